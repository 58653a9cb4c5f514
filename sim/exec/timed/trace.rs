//! Trace outputs of a timed run: Chrome trace-event JSON (loadable in Perfetto
//! and chrome://tracing: one process per device with a compute and a
//! communication thread, one process for the links with a thread per link that
//! carried traffic) and a CSV of every span. Both are functions of the
//! timeline only, so the same run gives the same bytes.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::{json, Value};

use crate::topology::Topology;

use super::{StreamKind, Timeline};

/// Picoseconds to the trace format's microseconds, exactly as a decimal.
fn us(ps: u64) -> Value {
    // Six decimals keep every picosecond; printed from integers, not floats.
    let text = format!("{}.{:06}", ps / 1_000_000, ps % 1_000_000);
    serde_json::from_str(&text).unwrap_or(Value::Null)
}

fn meta(name: &str, pid: u64, tid: Option<u64>, value: &str) -> Value {
    let mut e = json!({"name": name, "ph": "M", "pid": pid, "args": {"name": value}});
    if let Some(t) = tid {
        e["tid"] = json!(t);
    }
    e
}

/// The Chrome trace-event JSON of `t` on `topo`.
pub fn chrome_trace(t: &Timeline, topo: &Topology) -> String {
    let mut events = Vec::new();
    for &d in &t.devices {
        events.push(meta("process_name", d, None, &format!("device {d}")));
        events.push(
            json!({"name": "process_sort_index", "ph": "M", "pid": d, "args": {"sort_index": d}}),
        );
        events.push(meta("thread_name", d, Some(0), "compute"));
        events.push(meta("thread_name", d, Some(1), "communication"));
    }
    for s in &t.spans {
        let tid = match s.stream {
            StreamKind::Compute => 0,
            StreamKind::Comm => 1,
        };
        let cat = match s.stream {
            StreamKind::Compute => "compute",
            StreamKind::Comm => "communication",
        };
        let mut args = json!({"step": s.step, "value": s.value, "bytes": s.bytes});
        if s.flops > 0 {
            args["flops"] = json!(s.flops);
        }
        if !s.detail.is_empty() {
            args["algorithm"] = json!(s.detail);
        }
        events.push(json!({
            "name": format!("{} {}", s.op, s.value),
            "cat": cat,
            "ph": "X",
            "pid": s.device,
            "tid": tid,
            "ts": us(s.start_ps),
            "dur": us(s.end_ps - s.start_ps),
            "args": args,
        }));
    }
    let links_pid = t.devices.iter().max().map_or(0, |m| m + 1);
    let mut named: BTreeMap<usize, ()> = BTreeMap::new();
    if !t.links.is_empty() {
        events.push(meta("process_name", links_pid, None, "links"));
    }
    for l in &t.links {
        let link = &topo.links()[l.link];
        let label = format!(
            "{} -> {}",
            topo.component(link.from).name,
            topo.component(link.to).name
        );
        if named.insert(l.link, ()).is_none() {
            events.push(meta(
                "thread_name",
                links_pid,
                Some(l.link as u64),
                &format!("{label} ({})", link.class),
            ));
        }
        let secs = (l.end_ps - l.start_ps) as f64 * 1e-12;
        let util = if secs > 0.0 {
            l.bytes as f64 / (link.bandwidth_bytes_per_s() as f64 * secs)
        } else {
            0.0
        };
        events.push(json!({
            "name": format!("step {}", l.step),
            "cat": "link",
            "ph": "X",
            "pid": links_pid,
            "tid": l.link,
            "ts": us(l.start_ps),
            "dur": us(l.end_ps - l.start_ps),
            "args": {"bytes": l.bytes, "utilization": (util * 1e4).round() / 1e4},
        }));
    }
    let doc = json!({"traceEvents": events, "displayTimeUnit": "ns"});
    serde_json::to_string(&doc).unwrap_or_default() + "\n"
}

/// Every span as CSV, by (start, device, stream, step), then the links.
pub fn events_csv(t: &Timeline) -> String {
    let mut out = String::from("start_ps,end_ps,device,stream,step,op,value,flops,bytes,detail\n");
    for s in &t.spans {
        let stream = match s.stream {
            StreamKind::Compute => "compute",
            StreamKind::Comm => "comm",
        };
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{},{},{}",
            s.start_ps,
            s.end_ps,
            s.device,
            stream,
            s.step,
            s.op,
            s.value.replace(',', ";"),
            s.flops,
            s.bytes,
            s.detail
        );
    }
    for l in &t.links {
        let _ = writeln!(
            out,
            "{},{},,link{},{},link,,0,{},",
            l.start_ps, l.end_ps, l.link, l.step, l.bytes
        );
    }
    out
}
