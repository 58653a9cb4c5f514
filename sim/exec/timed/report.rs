//! The summary of a timed run: step time, per-device busy and idle time,
//! communication time by kind, exposed communication (communication that no
//! compute overlaps), peak memory per device and scope, link utilization.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use crate::topology::Topology;

use super::{ClassTimeline, LinkBusy, OomReport, ScopePeak, Span, StreamKind, Timeline};

/// One device's use of its streams.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeviceUse {
    pub device: u64,
    pub compute_busy_ps: u64,
    pub comm_busy_ps: u64,
    /// Step time minus compute busy time.
    pub compute_idle_ps: u64,
    /// Communication time during which the compute stream was idle.
    pub exposed_comm_ps: u64,
}

/// Collectives of one kind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CommKind {
    pub kind: String,
    /// Collective steps of this kind.
    pub count: usize,
    /// Time per device spent in them (mean over devices).
    pub mean_ps: u64,
    /// Bytes per device (sum of the buffers).
    pub bytes: u64,
}

/// One link's load over the run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LinkUse {
    pub link: usize,
    pub from: String,
    pub to: String,
    pub class: String,
    pub bytes: u64,
    /// Bytes over (bandwidth x step time).
    pub utilization: f64,
}

/// The summary.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    pub topology: String,
    pub devices: usize,
    pub step_time_ps: u64,
    pub events: u64,
    pub compute_steps: usize,
    pub collective_steps: usize,
    pub per_device: Vec<DeviceUse>,
    pub comm_by_kind: Vec<CommKind>,
    pub mean_exposed_comm_ps: u64,
    pub max_exposed_comm_ps: u64,
    pub peak_memory: Vec<ScopePeak>,
    pub links: Vec<LinkUse>,
    pub ooms: Vec<OomReport>,
    /// Out-of-memory reports counted but not listed.
    pub ooms_dropped: u64,
    pub stopped: bool,
}

/// Total length of `spans` minus their overlap with `other` (both sorted,
/// each list non-overlapping since a stream runs one step at a time).
fn uncovered(spans: &[(u64, u64)], other: &[(u64, u64)]) -> u64 {
    let mut total = 0;
    let mut j = 0;
    for &(s, e) in spans {
        let mut covered = 0;
        while j < other.len() && other[j].1 <= s {
            j += 1;
        }
        let mut k = j;
        while k < other.len() && other[k].0 < e {
            covered += other[k].1.min(e) - other[k].0.max(s);
            k += 1;
        }
        total += (e - s) - covered;
    }
    total
}

fn intervals(spans: &[&Span], stream: StreamKind) -> Vec<(u64, u64)> {
    let mut v: Vec<(u64, u64)> = spans
        .iter()
        .filter(|s| s.stream == stream && s.end_ps > s.start_ps)
        .map(|s| (s.start_ps, s.end_ps))
        .collect();
    v.sort_unstable();
    v
}

/// One device's (or class's) use of its streams, from its spans.
fn device_use(device: u64, spans: &[&Span], makespan_ps: u64) -> DeviceUse {
    let compute = intervals(spans, StreamKind::Compute);
    let comm = intervals(spans, StreamKind::Comm);
    let busy = |v: &[(u64, u64)]| v.iter().map(|(s, e)| e - s).sum::<u64>();
    DeviceUse {
        device,
        compute_busy_ps: busy(&compute),
        comm_busy_ps: busy(&comm),
        compute_idle_ps: makespan_ps.saturating_sub(busy(&compute)),
        exposed_comm_ps: uncovered(&comm, &compute),
    }
}

/// Summarize `t`, a run on `topo`.
pub fn summarize(t: &Timeline, topo: &Topology) -> Summary {
    let weight: BTreeMap<u64, u64> = BTreeMap::new();
    let devices: Vec<(u64, u64)> = t.devices.iter().map(|&d| (d, d)).collect();
    let parts = Parts {
        makespan_ps: t.makespan_ps,
        devices: &devices,
        spans: &t.spans,
        weight: &weight,
        links: &t.links,
        events: t.events,
    };
    parts.summarize(
        topo,
        t.peaks.clone(),
        (t.ooms.clone(), t.ooms_dropped),
        t.stopped,
    )
}

/// Summarize `t`, a run in reduced form on `topo`: the same summary as
/// [`summarize`] of its expansion, computed per class.
pub fn summarize_classes(t: &ClassTimeline, topo: &Topology) -> Summary {
    let weight: BTreeMap<u64, u64> = t
        .classes
        .iter()
        .filter_map(|m| Some((*m.first()?, m.len() as u64)))
        .collect();
    let mut devices: Vec<(u64, u64)> = t
        .classes
        .iter()
        .flat_map(|m| m.iter().map(move |&d| (d, m[0])))
        .collect();
    let position: BTreeMap<u64, usize> =
        t.devices.iter().enumerate().map(|(i, &d)| (d, i)).collect();
    devices.sort_by_key(|(d, _)| position.get(d).copied().unwrap_or(usize::MAX));
    let parts = Parts {
        makespan_ps: t.makespan_ps,
        devices: &devices,
        spans: &t.spans,
        weight: &weight,
        links: &t.links,
        events: t.events,
    };
    parts.summarize(
        topo,
        t.device_peaks(),
        (t.device_ooms(), t.ooms_dropped),
        t.stopped,
    )
}

/// What a summary is computed from: devices with the representative whose
/// spans they share, and each representative's weight (devices it stands
/// for; absent: 1).
struct Parts<'a> {
    makespan_ps: u64,
    /// `(device, representative)` in mesh order.
    devices: &'a [(u64, u64)],
    spans: &'a [Span],
    weight: &'a BTreeMap<u64, u64>,
    links: &'a [LinkBusy],
    events: u64,
}

impl Parts<'_> {
    fn summarize(
        &self,
        topo: &Topology,
        peak_memory: Vec<ScopePeak>,
        (ooms, ooms_dropped): (Vec<OomReport>, u64),
        stopped: bool,
    ) -> Summary {
        let mut by_rep: BTreeMap<u64, Vec<&Span>> = BTreeMap::new();
        for s in self.spans {
            by_rep.entry(s.device).or_default().push(s);
        }
        let uses: BTreeMap<u64, DeviceUse> = by_rep
            .iter()
            .map(|(&rep, spans)| (rep, device_use(rep, spans, self.makespan_ps)))
            .collect();
        let per_device: Vec<DeviceUse> = self
            .devices
            .iter()
            .map(|&(device, rep)| match uses.get(&rep) {
                Some(u) => DeviceUse {
                    device,
                    ..u.clone()
                },
                None => device_use(device, &[], self.makespan_ps),
            })
            .collect();
        let n = self.devices.len().max(1) as u64;
        let weight = |rep: u64| self.weight.get(&rep).copied().unwrap_or(1);
        let mut kinds: BTreeMap<String, (BTreeMap<usize, ()>, u64, u64)> = BTreeMap::new();
        for s in self.spans.iter().filter(|s| s.stream == StreamKind::Comm) {
            let k = kinds.entry(s.op.clone()).or_default();
            k.0.insert(s.step, ());
            k.1 += (s.end_ps - s.start_ps) * weight(s.device);
            k.2 += s.bytes * weight(s.device);
        }
        let comm_by_kind = kinds
            .into_iter()
            .map(|(kind, (steps, time, bytes))| CommKind {
                kind,
                count: steps.len(),
                mean_ps: time / n,
                bytes: bytes / n,
            })
            .collect();
        let mut link_bytes: BTreeMap<usize, u64> = BTreeMap::new();
        for l in self.links {
            *link_bytes.entry(l.link).or_default() += l.bytes;
        }
        let links = link_bytes
            .into_iter()
            .map(|(link, bytes)| {
                let l = &topo.links()[link];
                let capacity = l.bandwidth_bytes_per_s() as f64 * self.makespan_ps as f64 * 1e-12;
                LinkUse {
                    link,
                    from: topo.component(l.from).name.clone(),
                    to: topo.component(l.to).name.clone(),
                    class: l.class.to_string(),
                    bytes,
                    utilization: if capacity > 0.0 {
                        bytes as f64 / capacity
                    } else {
                        0.0
                    },
                }
            })
            .collect();
        let exposed: Vec<u64> = per_device.iter().map(|d| d.exposed_comm_ps).collect();
        let mut steps: BTreeMap<(bool, usize), ()> = BTreeMap::new();
        for s in self.spans {
            steps.insert((s.stream == StreamKind::Comm, s.step), ());
        }
        Summary {
            topology: topo.name.clone(),
            devices: self.devices.len(),
            step_time_ps: self.makespan_ps,
            events: self.events,
            compute_steps: steps.keys().filter(|k| !k.0).count(),
            collective_steps: steps.keys().filter(|k| k.0).count(),
            mean_exposed_comm_ps: exposed.iter().sum::<u64>() / n,
            max_exposed_comm_ps: exposed.iter().copied().max().unwrap_or(0),
            per_device,
            comm_by_kind,
            peak_memory,
            links,
            ooms,
            ooms_dropped,
            stopped,
        }
    }
}

/// Picoseconds as a short human figure (`12.345 us`).
pub fn human_time(ps: u64) -> String {
    let x = ps as f64;
    if x >= 1e12 {
        format!("{:.3} s", x / 1e12)
    } else if x >= 1e9 {
        format!("{:.3} ms", x / 1e9)
    } else if x >= 1e6 {
        format!("{:.3} us", x / 1e6)
    } else {
        format!("{:.3} ns", x / 1e3)
    }
}

/// Bytes as a short binary figure (`1.50 GiB`).
pub fn human_bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut x = b as f64;
    let mut u = 0;
    while x >= 1024.0 && u + 1 < UNITS.len() {
        x /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} B")
    } else {
        format!("{x:.2} {}", UNITS[u])
    }
}

/// The summary as text for the terminal.
pub fn to_text(s: &Summary) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "simulated step time {} on {} ({} devices, {} compute steps, {} collectives, {} events)",
        human_time(s.step_time_ps),
        s.topology,
        s.devices,
        s.compute_steps,
        s.collective_steps,
        s.events
    );
    let mean = |f: fn(&DeviceUse) -> u64| {
        s.per_device.iter().map(f).sum::<u64>() / s.per_device.len().max(1) as u64
    };
    let _ = writeln!(
        out,
        "per device (mean): compute busy {}, compute idle {}, communication {}, exposed communication {} (max {})",
        human_time(mean(|d| d.compute_busy_ps)),
        human_time(mean(|d| d.compute_idle_ps)),
        human_time(mean(|d| d.comm_busy_ps)),
        human_time(s.mean_exposed_comm_ps),
        human_time(s.max_exposed_comm_ps)
    );
    for k in &s.comm_by_kind {
        let _ = writeln!(
            out,
            "  {:<20} {:>3} x  {} per device, {} per device",
            k.kind,
            k.count,
            human_time(k.mean_ps),
            human_bytes(k.bytes)
        );
    }
    let mut by_scope: BTreeMap<&str, (u64, u64, u64)> = BTreeMap::new();
    for p in s.peak_memory.iter().filter(|p| p.peak > 0) {
        let e = by_scope
            .entry(&p.scope)
            .or_insert((0, p.device, p.capacity));
        if p.peak > e.0 {
            *e = (p.peak, p.device, p.capacity);
        }
    }
    for (scope, (peak, device, cap)) in by_scope {
        let cap = if cap == u64::MAX {
            "unbounded".to_string()
        } else {
            human_bytes(cap)
        };
        let _ = writeln!(
            out,
            "peak memory {scope}: {} (device {device}, capacity {cap})",
            human_bytes(peak)
        );
    }
    let mut links: Vec<&LinkUse> = s.links.iter().collect();
    links.sort_by(|a, b| {
        b.utilization
            .total_cmp(&a.utilization)
            .then(a.link.cmp(&b.link))
    });
    for l in links.iter().take(3) {
        let _ = writeln!(
            out,
            "link {} -> {} ({}): {}, {:.1}% of the step",
            l.from,
            l.to,
            l.class,
            human_bytes(l.bytes),
            l.utilization * 100.0
        );
    }
    // The text lists the first reports; the JSON summary keeps every kept one.
    const LISTED: usize = 16;
    for o in s.ooms.iter().take(LISTED) {
        let live: Vec<String> = o
            .live
            .iter()
            .take(5)
            .map(|b| format!("{} {}", b.value, human_bytes(b.bytes)))
            .collect();
        let _ = writeln!(
            out,
            "OUT OF MEMORY: device {} scope {} at {}: {} needs {} with {} of {} in use; live: {}",
            o.device,
            o.scope,
            human_time(o.time_ps),
            o.value,
            human_bytes(o.bytes),
            human_bytes(o.in_use),
            human_bytes(o.capacity),
            live.join(", ")
        );
    }
    let more = s.ooms.len().saturating_sub(LISTED) as u64 + s.ooms_dropped;
    if more > 0 {
        let _ = writeln!(out, "... and {more} more out-of-memory reports");
    }
    if s.stopped {
        let _ = writeln!(out, "the run stopped at the first out-of-memory report");
    }
    out
}
