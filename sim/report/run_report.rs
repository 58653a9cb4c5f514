//! Everything `shardsim run` writes for one scenario into its report
//! directory: `summary.json`, `summary.csv` (one row, the sweep columns),
//! `trace.json` (Chrome trace), `events.csv`, the plots (SVG and PNG) and
//! `report.html` (a model workload: the two summaries only).

use std::path::Path;

use crate::engine::log::write_atomically;
use crate::exec::timed::report::{human_bytes, human_time};
use crate::exec::timed::trace;
use crate::scenario::sweep::{metric_cells, to_csv, METRICS};
use crate::scenario::ScenarioResult;

use super::html::{page, table, Block};
use super::run_plots::{Breakdown, Gantt, LinkUtilization, MemoryOverTime};
use super::{render, ReportError};

fn write(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), ReportError> {
    let p = dir.join(name);
    write_atomically(&p, bytes).map_err(|e| ReportError::Io {
        path: p.display().to_string(),
        message: e.to_string(),
    })
}

/// The summary table rows (what the terminal prints too).
pub fn summary_rows(r: &ScenarioResult) -> Vec<Vec<String>> {
    let s = &r.summary;
    let t = &s.timing;
    let n = t.per_device.len().max(1) as u64;
    let mut rows = vec![
        vec!["scenario".into(), s.scenario.clone()],
        vec!["program".into(), s.program.clone()],
        vec![
            "topology".into(),
            format!(
                "{}{} ({} devices)",
                s.topology,
                s.nodes.map_or(String::new(), |n| format!(" x {n} nodes")),
                t.devices
            ),
        ],
        vec![
            "overrides".into(),
            if s.overrides.is_empty() {
                "none".into()
            } else {
                s.overrides.join(" ")
            },
        ],
        vec!["mesh".into(), s.mesh.clone()],
        vec![
            "placement".into(),
            s.placement
                .iter()
                .map(|a| {
                    format!(
                        "{}={} over {}",
                        a.axis,
                        a.size,
                        if a.links.is_empty() {
                            "-".into()
                        } else {
                            a.links.join("+")
                        }
                    )
                })
                .collect::<Vec<_>>()
                .join(", "),
        ],
        vec!["step time".into(), human_time(t.step_time_ps)],
    ];
    if let Some(m) = &s.model_step {
        rows.retain(|r| r[0] != "placement");
        rows.extend(model_rows(m));
    } else {
        rows.extend(vec![
            vec![
                "compute busy (mean)".into(),
                human_time(t.per_device.iter().map(|d| d.compute_busy_ps).sum::<u64>() / n),
            ],
            vec![
                "communication (mean)".into(),
                human_time(t.per_device.iter().map(|d| d.comm_busy_ps).sum::<u64>() / n),
            ],
            vec![
                "exposed communication".into(),
                format!(
                    "{} mean, {} max",
                    human_time(t.mean_exposed_comm_ps),
                    human_time(t.max_exposed_comm_ps)
                ),
            ],
        ]);
    }
    for k in &t.comm_by_kind {
        rows.push(vec![
            format!("  {}", k.kind),
            format!(
                "{} x, {} and {} per device",
                k.count,
                human_time(k.mean_ps),
                human_bytes(k.bytes)
            ),
        ]);
    }
    let mut scopes: Vec<&str> = t.peak_memory.iter().map(|p| p.scope.as_str()).collect();
    scopes.sort_unstable();
    scopes.dedup();
    for scope in scopes {
        let best = t
            .peak_memory
            .iter()
            .filter(|p| p.scope == scope)
            .max_by(|a, b| a.peak.cmp(&b.peak).then(b.device.cmp(&a.device)));
        if let Some(p) = best.filter(|p| p.peak > 0) {
            rows.push(vec![
                format!("peak memory {scope}"),
                format!("{} (device {})", human_bytes(p.peak), p.device),
            ]);
        }
    }
    if let Some(x) = &s.numerics {
        rows.push(vec![
            "numerics vs interpreter".into(),
            format!(
                "{} outputs, max abs error {:.3e}, max rel error {:.3e}",
                x.outputs, x.max_abs_error, x.max_rel_error
            ),
        ]);
    }
    for p in &s.perturbations {
        rows.push(vec!["perturbation".into(), p.clone()]);
    }
    for o in &t.ooms {
        rows.push(vec![
            "OUT OF MEMORY".into(),
            format!(
                "device {} {} at {}: {} needs {}",
                o.device,
                o.scope,
                human_time(o.time_ps),
                o.value,
                human_bytes(o.bytes)
            ),
        ]);
    }
    rows
}

/// A model step's figures, as `shardsim train` prints them.
fn model_rows(m: &crate::models::step::StepReport) -> Vec<Vec<String>> {
    let mem = &m.memory;
    vec![
        vec![
            "pipeline".into(),
            format!(
                "{} microbatches, {} ({:.1}% idle: bubble and stage imbalance), stage transfer {}",
                m.microbatches,
                human_time(m.pipeline_ps),
                100.0 * m.bubble_fraction,
                human_time(m.transfer_ps)
            ),
        ],
        vec![
            "TFLOP/s per GPU".into(),
            format!(
                "{:.1} model, {:.1} with recomputation; MFU {:.1}%",
                m.model_tflops_per_gpu,
                m.hardware_tflops_per_gpu,
                100.0 * m.mfu
            ),
        ],
        vec!["tokens/s".into(), format!("{:.0}", m.tokens_per_s)],
        vec![
            "memory per GPU".into(),
            format!(
                "model states {}, activations {} ({} in flight), transient {} (stage {})",
                human_bytes(mem.model_state_bytes),
                human_bytes(mem.activation_bytes),
                mem.in_flight,
                human_bytes(mem.transient_bytes),
                mem.stage
            ),
        ],
    ]
}

/// The expectation rows: what, measured, expected, verdict.
pub fn check_rows(r: &ScenarioResult) -> Vec<Vec<String>> {
    r.summary
        .checks
        .iter()
        .map(|c| {
            vec![
                c.what.clone(),
                c.measured.clone(),
                c.expected.clone(),
                if c.ok {
                    "ok".into()
                } else {
                    format!("FAILED: {}", c.message)
                },
            ]
        })
        .collect()
}

/// Write the report of `r` into `dir` (created); with `plots` false only the
/// data files. Returns the files written, relative to `dir`.
pub fn write_run_report(
    r: &ScenarioResult,
    dir: &Path,
    plots: bool,
) -> Result<Vec<String>, ReportError> {
    std::fs::create_dir_all(dir).map_err(|e| ReportError::Io {
        path: dir.display().to_string(),
        message: e.to_string(),
    })?;
    let mut files = Vec::new();
    let json = serde_json::to_string_pretty(&r.summary)
        .map_err(|e| ReportError::Plot(e.to_string()))?
        + "\n";
    write(dir, "summary.json", json.as_bytes())?;
    let mut header: Vec<String> = vec!["scenario".into()];
    header.extend(METRICS.iter().map(|m| m.to_string()));
    let mut row = vec![r.summary.scenario.clone()];
    row.extend(metric_cells(r));
    let csv = to_csv(&header, &[(0usize, row)].into_iter().collect())
        .map_err(|e| ReportError::Plot(e.to_string()))?;
    write(dir, "summary.csv", &csv)?;
    files.extend(["summary.json", "summary.csv"].map(String::from));
    if r.summary.model_step.is_some() {
        // A model step is timed per chunk program, not as one timeline:
        // the trace, events and plots would be empty.
        return Ok(files);
    }
    write(
        dir,
        "trace.json",
        trace::chrome_trace(&r.timeline, &r.topology).as_bytes(),
    )?;
    write(dir, "events.csv", trace::events_csv(&r.timeline).as_bytes())?;
    files.extend(["trace.json", "events.csv"].map(String::from));
    if !plots {
        return Ok(files);
    }
    let t = &r.timeline;
    let pictures = [
        (
            "gantt",
            render(&Gantt(t), dir, "gantt")?,
            "Compute (blue) and communication per device over the step",
        ),
        (
            "links",
            render(&LinkUtilization(t, &r.topology), dir, "links")?,
            "Bytes carried per link class over time, as a share of the class's total bandwidth",
        ),
        (
            "memory",
            render(&MemoryOverTime(t), dir, "memory")?,
            "Bytes in use per memory scope over time",
        ),
        (
            "breakdown",
            render(&Breakdown(&r.summary.timing), dir, "breakdown")?,
            "Per device: compute, communication not hidden by compute, and idle time",
        ),
    ];
    let mut blocks = vec![
        Block::Paragraph(super::html::esc(&r.summary.description)),
        Block::Heading("Summary".into()),
        Block::Table(table(&["", ""], &summary_rows(r))),
    ];
    if !r.summary.checks.is_empty() {
        let verdict = if r.summary.passed {
            "<span class=\"pass\">all expectations hold</span>"
        } else {
            "<span class=\"fail\">expectations failed</span>"
        };
        blocks.push(Block::Heading("Expectations".into()));
        blocks.push(Block::Paragraph(verdict.into()));
        blocks.push(Block::Table(table(
            &["what", "measured", "expected", "verdict"],
            &check_rows(r),
        )));
    }
    blocks.push(Block::Heading("Pictures".into()));
    for (name, svg, caption) in pictures {
        files.push(format!("{name}.svg"));
        files.push(format!("{name}.png"));
        blocks.push(Block::Svg(svg, caption.into()));
    }
    let html = page(&format!("shardsim report: {}", r.summary.scenario), &blocks);
    write(dir, "report.html", html.as_bytes())?;
    files.push("report.html".into());
    Ok(files)
}
