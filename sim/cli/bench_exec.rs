//! `shardsim bench exec`: partition and time a generated transformer-like
//! program (the `bench propagate` module) on a topology, and report the
//! medians of the partitioning and of the timed run (shape-only), with the
//! engine events per second of the timed run.

use std::time::Instant;

use clap::Args;

use shardsim::exec::timed::{run_timed, TimedOptions};
use shardsim::ir::mlir::parse_and_verify;
use shardsim::partition::partition;
use shardsim::propagate::{propagate_module, Strategy};
use shardsim::topology;

use super::bench_propagate::transformer_like;

#[derive(Debug, Args)]
pub struct BenchExecArgs {
    /// Blocks of the generated program (11 ops each; several sizes: 100,1000).
    #[arg(long, default_value = "100,1000")]
    blocks: String,
    /// Topology to time on (the program's mesh has 8 devices).
    #[arg(long, default_value = "dgx-h100")]
    topology: String,
    /// Timed repetitions per size (the median is reported).
    #[arg(long, default_value_t = 3)]
    runs: usize,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

pub fn run(args: BenchExecArgs) -> anyhow::Result<()> {
    let sizes = super::output::parse_u64_list(&args.blocks, "--blocks")?;
    if sizes.contains(&0) || args.runs == 0 {
        anyhow::bail!("--blocks and --runs must be at least 1");
    }
    let topo = topology::load(&args.topology, &[])?;
    outln!(
        "{:>8} {:>8} {:>12} {:>10} {:>12} {:>14} {:>14}",
        "blocks",
        "steps",
        "partition_s",
        "timed_s",
        "events",
        "events_per_s",
        "step_time_us"
    )?;
    let bar = super::progress::TimedBar::new("bench exec");
    let opts = TimedOptions {
        progress: Some(bar.hook()),
        ..TimedOptions::default()
    };
    for blocks in sizes {
        bar.message(format!("{blocks} blocks"));
        let text = transformer_like(blocks as usize);
        let mut m =
            parse_and_verify(&text).map_err(|e| anyhow::anyhow!("generated module: {e}"))?;
        propagate_module(&mut m, Strategy::default())?;
        let (mut part, mut timed) = (Vec::new(), Vec::new());
        let mut last = None;
        for _ in 0..args.runs.max(1) {
            let t0 = Instant::now();
            let program = partition(&m)?;
            part.push(t0.elapsed().as_secs_f64());
            let t1 = Instant::now();
            let t = run_timed(&program, &topo, &opts)?;
            timed.push(t1.elapsed().as_secs_f64());
            last = Some((program.steps.len(), t.events, t.makespan_ps));
        }
        let (steps, events, makespan) = last.unwrap_or_default();
        let (p, q) = (median(part), median(timed));
        bar.suspend(|| {
            outln!(
                "{blocks:>8} {steps:>8} {p:>12.3} {q:>10.3} {events:>12} {:>14.0} {:>14.1}",
                events as f64 / q,
                makespan as f64 / 1e6
            )
        })?;
    }
    Ok(())
}
