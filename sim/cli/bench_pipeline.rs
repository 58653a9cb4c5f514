//! `shardsim bench pipeline FILE...`: parse + verify, inline calls, propagate
//! and partition programs JAX exported (e.g. `models/gpt3_175b_train_scan_96.mlir`,
//! a scanned GPT-3 175B training step), reporting the median of each phase
//! and the ratio of each program's total to the first's.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use clap::Args;

use shardsim::ir::inline::inline_calls;
use shardsim::ir::mlir::parse_and_verify;
use shardsim::partition::partition;
use shardsim::propagate::{propagate_module, Strategy};

#[derive(Debug, Args)]
pub struct BenchPipelineArgs {
    /// Programs to run through the pipeline (the first is the baseline of the ratios).
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Timed repetitions per program (the median is reported).
    #[arg(long, default_value_t = 3)]
    runs: usize,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

pub fn run(args: BenchPipelineArgs) -> anyhow::Result<()> {
    if args.runs == 0 {
        anyhow::bail!("--runs must be at least 1");
    }
    let mut first_total = None;
    let mut bar =
        super::progress::Progress::new((args.files.len() * args.runs) as u64, "bench pipeline");
    for path in &args.files {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("{}: cannot read", path.display()))?;
        let mut times: [Vec<f64>; 4] = Default::default();
        let mut facts = (0usize, 0usize, 0u64);
        for _ in 0..args.runs {
            let t0 = Instant::now();
            let parsed = parse_and_verify(&text)
                .map_err(|e| anyhow::anyhow!("{}", e.in_file(&path.display().to_string())))?;
            let t1 = Instant::now();
            let mut module = inline_calls(&parsed).map_err(|e| anyhow::anyhow!("{e}"))?;
            let t2 = Instant::now();
            propagate_module(&mut module, Strategy::default())
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            let t3 = Instant::now();
            let program = partition(&module).map_err(|e| anyhow::anyhow!("{e}"))?;
            let t4 = Instant::now();
            let ops = module.funcs.iter().map(|f| f.ops.len()).sum();
            facts = (ops, program.steps.len(), program.total_collective_bytes());
            for (k, (a, b)) in [(t0, t1), (t1, t2), (t2, t3), (t3, t4)]
                .into_iter()
                .enumerate()
            {
                times[k].push((b - a).as_secs_f64());
            }
            bar.inc();
        }
        let [parse, inline, prop, part] = times.map(median);
        let total = parse + inline + prop + part;
        let base = *first_total.get_or_insert(total);
        bar.suspend(|| {
            outln!(
            "{}: {} ops after inlining, {} steps, {} collective bytes per device; median of {}: \
             parse {:.3} s, inline {:.3} s, propagate {:.3} s, partition {:.3} s, total {:.3} s ({:.2}x the first)",
            path.display(),
            facts.0,
            facts.1,
            facts.2,
            args.runs,
            parse,
            inline,
            prop,
            part,
            total,
            total / base
        )
        })?;
    }
    Ok(())
}
