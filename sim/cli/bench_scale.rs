//! `shardsim bench scale`: a GPT-3 175B training step (bf16) on 1,024 to
//! 16,384 GPUs, for several device counts and layer counts, with the median
//! wall time and the peak resident memory of each size (VmHWM, reset between
//! sizes), so growth with devices and with layers can be read off.
//!
//! By default the step is the models part's ([`shardsim::models::step`], as
//! `shardsim train gpt3-175b` runs it): Megatron-LM's layout, tensor-parallel
//! 8 inside a node, pipeline 8 interleaved over 2 virtual stages, the rest
//! data-parallel, full recomputation, 96 sequences per replica; every chunk
//! program propagated, partitioned and timed on `dgx-h100` with the node
//! count the GPUs need. `--program` times instead one whole-step program
//! (weights split on a `model` axis of 8, the batch on `data` across nodes;
//! see [`super::scale_model`]) propagated, partitioned and timed shape-only.

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
    /// Write the program of the first size and layer count to this file and
    /// stop (with --program).
    #[arg(long)]
    emit: Option<std::path::PathBuf>,
    /// Time one whole-step program (propagate, partition, timed run) instead
    /// of the models part's training step.
    #[arg(long)]
    program: bool,
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

pub fn run(args: BenchScaleArgs) -> anyhow::Result<()> {
    let gpus = super::output::parse_u64_list(&args.gpus, "--gpus")?;
    let layers = super::output::parse_u64_list(&args.layers, "--layers")?;
    if !args.program {
        return run_steps(&gpus, &layers, args.runs);
    }
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
    let bar = super::progress::TimedBar::new("bench scale");
    for &layer_count in &layers {
        for &n in &gpus {
            bar.message(format!("{n} GPUs, {layer_count} layers"));
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
            // The preset's 64-port switches, in three levels past 256 nodes.
            let topo = super::output::load_topology("dgx-h100", Some(n as u32 / 8), &[])?;
            let opts = TimedOptions {
                // GPT-3 175B with Adam does not fit 8-way tensor parallel in
                // 80 GB: keep timing past the reports.
                on_oom: OomPolicy::Continue,
                // Only the step time and peaks are read: one record per link.
                link_totals: true,
                progress: Some(bar.hook()),
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
            bar.suspend(|| outln!(
                "{n:>6} {layer_count:>7} {ops:>7} {steps:>8} {parse_s:>9.3} {:>12.3} {:>9.3} {classes:>8} {:>12.3} {:>12.1} {:>12.1}",
                median(part),
                median(timed),
                makespan as f64 / 1e9,
                hbm as f64 / (1u64 << 30) as f64,
                status_kib("VmHWM:") as f64 / 1024.0
            ))?;
        }
    }
    Ok(())
}

/// Tensor- and pipeline-parallel degrees and virtual stages of the step.
const TP: u64 = 8;
const PP: u64 = 8;
const VIRTUAL: u64 = 2;
/// Sequences per data-parallel replica per step (GPT-3's batch of 1,536 at
/// 16 replicas).
const SEQS_PER_REPLICA: u64 = 96;

/// The models part's GPT-3 175B step at every size: medians of the whole
/// simulation (all chunk programs built, partitioned and timed) and VmHWM.
fn run_steps(gpus: &[u64], layers: &[u64], runs: usize) -> anyhow::Result<()> {
    use shardsim::models::step::{model_timed_options, simulate_step};
    use shardsim::models::{ModelSpec, Recompute, Schedule, Strategy};
    let per_group = TP * PP;
    if let Some(&g) = gpus.iter().find(|&&g| g == 0 || g % per_group != 0) {
        anyhow::bail!("--gpus: {g} is not a positive multiple of {per_group} (tp {TP} x pp {PP})");
    }
    if let Some(&l) = layers.iter().find(|&&l| l == 0 || l % (PP * VIRTUAL) != 0) {
        anyhow::bail!(
            "--layers: {l} is not a positive multiple of {}",
            PP * VIRTUAL
        );
    }
    outln!(
        "{:>6} {:>7} {:>5} {:>9} {:>12} {:>8} {:>12}",
        "gpus",
        "layers",
        "dp",
        "median_s",
        "step_time_ms",
        "mfu_pct",
        "peak_rss_mib"
    )?;
    let bar = super::progress::TimedBar::new("bench scale");
    let opts = TimedOptions {
        progress: Some(bar.hook()),
        ..model_timed_options()
    };
    for &layer_count in layers {
        for &n in gpus {
            bar.message(format!("{n} GPUs, {layer_count} layers"));
            reset_peak_rss();
            let mut model = ModelSpec::preset("gpt3-175b")?;
            model.layers = layer_count;
            let dp = n / per_group;
            let mut strategy = Strategy::from_toml("global_batch = 1")?;
            strategy.tp = TP;
            strategy.pp = PP;
            strategy.dp = dp;
            strategy.virtual_stages = VIRTUAL;
            strategy.schedule = Schedule::Interleaved;
            strategy.recompute = Recompute::Full;
            strategy.global_batch = SEQS_PER_REPLICA * dp;
            let nodes = u32::try_from(n / 8)?;
            let mut times = Vec::new();
            let mut last = None;
            for _ in 0..runs.max(1) {
                let t0 = Instant::now();
                let topo = shardsim::topology::load_nodes("dgx-h100", nodes, &[])?;
                let r = simulate_step(&model, &strategy, &topo, &opts)?;
                times.push(t0.elapsed().as_secs_f64());
                last = Some(r);
            }
            let r = last.expect("at least one run");
            bar.suspend(|| {
                outln!(
                    "{n:>6} {layer_count:>7} {dp:>5} {:>9.3} {:>12.3} {:>8.1} {:>12.1}",
                    median(times),
                    r.step_time_ps as f64 / 1e9,
                    100.0 * r.mfu,
                    status_kib("VmHWM:") as f64 / 1024.0
                )
            })?;
        }
    }
    Ok(())
}
