//! `shardsim bench scale`: a GPT-3 175B training step (bf16, Megatron
//! sharding: weights split on a `model` axis of 8 inside a node, the batch on
//! `data` across nodes; see [`super::scale_model`]) propagated, partitioned
//! and timed (shape-only) on `dgx-h100 --nodes N/8`, for several device counts
//! and layer counts. Prints the medians of propagate + partition and of the
//! timed run, and the peak resident memory of each size (VmHWM, reset between
//! sizes), so growth with devices and with layers can be read off.

use std::time::Instant;

use clap::Args;

use shardsim::exec::timed::{run_timed_classes, OomPolicy, TimedOptions};
use shardsim::ir::mlir::parse_and_verify;
use shardsim::partition::partition;
use shardsim::propagate::{propagate_module, Strategy};

use super::scale_model::{gpt3_step, ModelDims};

#[derive(Debug, Args)]
pub struct BenchScaleArgs {
    /// GPU counts (multiples of 8; mesh data x model = N/8 x 8 on dgx-h100 --nodes N/8).
    #[arg(long, default_value = "1024,4096,16384")]
    gpus: String,
    /// Layer counts (GPT-3 175B has 96).
    #[arg(long, default_value = "96")]
    layers: String,
    /// Repetitions per size (the median is reported).
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Write the program of the first size and layer count to this file and stop.
    #[arg(long)]
    emit: Option<std::path::PathBuf>,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// A `/proc/self/status` field in KiB (0 where there is none).
fn status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

/// Reset the peak resident size to the current one (Linux `clear_refs` 5).
fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// The smallest switch radix (64 or a power of two above) whose two-level
/// rail-optimized fat tree joins `nodes` nodes of 8 rails: leaves use half
/// their ports for nodes, and the spine must reach every leaf.
fn radix_for(nodes: u64) -> u64 {
    let mut r = 64;
    while 8 * nodes.div_ceil(r / 2) > r {
        r *= 2;
    }
    r
}

pub fn run(args: BenchScaleArgs) -> anyhow::Result<()> {
    let gpus = super::output::parse_u64_list(&args.gpus, "--gpus")?;
    let layers = super::output::parse_u64_list(&args.layers, "--layers")?;
    if let Some(&g) = gpus.iter().find(|&&g| g < 16 || g % 8 != 0) {
        anyhow::bail!("--gpus: {g} is not a multiple of 8 of at least 16");
    }
    if let Some(path) = &args.emit {
        let (n, l) = (gpus.first().copied(), layers.first().copied());
        let (Some(n), Some(l)) = (n, l) else {
            anyhow::bail!("--emit needs one size and one layer count");
        };
        let text = gpt3_step(&ModelDims::gpt3_175b(l as usize, n / 8), n / 8, 8);
        return super::output::write_output(Some(path), &text);
    }
    outln!(
        "{:>6} {:>7} {:>7} {:>8} {:>9} {:>12} {:>9} {:>8} {:>12} {:>12} {:>12}",
        "gpus",
        "layers",
        "ops",
        "steps",
        "parse_s",
        "partition_s",
        "timed_s",
        "classes",
        "step_time_ms",
        "hbm_peak_gib",
        "peak_rss_mib"
    )?;
    for &layer_count in &layers {
        for &n in &gpus {
            reset_peak_rss();
            let data = n / 8;
            let dims = ModelDims::gpt3_175b(layer_count as usize, data);
            let text = gpt3_step(&dims, data, 8);
            let t0 = Instant::now();
            let module =
                parse_and_verify(&text).map_err(|e| anyhow::anyhow!("generated module: {e}"))?;
            drop(text);
            let parse_s = t0.elapsed().as_secs_f64();
            let ops = module.num_ops();
            let topo = super::output::load_topology(
                "dgx-h100",
                Some(n as u32 / 8),
                &[format!("network.switch_radix={}", radix_for(n / 8))],
            )?;
            let opts = TimedOptions {
                // GPT-3 175B with Adam does not fit 8-way tensor parallel in
                // 80 GB: keep timing past the reports.
                on_oom: OomPolicy::Continue,
                ..TimedOptions::default()
            };
            let (mut part, mut timed) = (Vec::new(), Vec::new());
            let mut last = None;
            for _ in 0..args.runs.max(1) {
                let t1 = Instant::now();
                let mut m = module.clone();
                propagate_module(&mut m, Strategy::default())?;
                let program = partition(&m)?;
                part.push(t1.elapsed().as_secs_f64());
                let t2 = Instant::now();
                let t = run_timed_classes(&program, &topo, &opts)?;
                timed.push(t2.elapsed().as_secs_f64());
                let hbm = t.max_peak("global");
                last = Some((program.steps.len(), t.classes.len(), t.makespan_ps, hbm));
            }
            let (steps, classes, makespan, hbm) = last.unwrap_or_default();
            outln!(
                "{n:>6} {layer_count:>7} {ops:>7} {steps:>8} {parse_s:>9.3} {:>12.3} {:>9.3} {classes:>8} {:>12.3} {:>12.1} {:>12.1}",
                median(part),
                median(timed),
                makespan as f64 / 1e9,
                hbm as f64 / (1u64 << 30) as f64,
                status_kib("VmHWM:") as f64 / 1024.0
            )?;
        }
    }
    Ok(())
}
