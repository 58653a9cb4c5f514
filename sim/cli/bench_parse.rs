//! `shardsim bench parse`: times parsing + verifying a generated module of N ops.

use std::fmt::Write;
use std::time::Instant;

use anyhow::bail;
use clap::Args;

use shardsim::ir::mlir::parse_and_verify;

#[derive(Debug, Args)]
pub struct ParseBenchArgs {
    /// Number of ops in the generated module.
    #[arg(long, default_value_t = 100_000)]
    ops: usize,
    /// Timed runs (the median is reported).
    #[arg(long, default_value_t = 5)]
    runs: usize,
}

/// A module in XLA's after-propagation style: a chain of `n` ops cycling
/// dot_general (with a per-op sharding and rule) / add / tanh.
pub fn chain_module(n: usize) -> String {
    let mut s = String::with_capacity(n * 200);
    s.push_str("module @bench {\n  sdy.mesh @mesh = <[\"x\"=2, \"y\"=4]>\n");
    s.push_str("  func.func @main(%arg0: tensor<16x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{\"x\"}, {}]>}, %arg1: tensor<16x16xf32>) -> tensor<16x16xf32> {\n");
    let mut prev = "%arg0".to_string();
    for i in 0..n {
        let _ = match i % 3 {
            0 => writeln!(
                s,
                "    %{i} = stablehlo.dot_general {prev}, %arg1, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] {{sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{{\"x\"}}, {{}}]>]>, sdy.sharding_rule = #sdy.op_sharding_rule<([i, k], [k, j])->([i, j]) {{i=16, j=16, k=16}} reduction={{k}}>}} : (tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x16xf32>"
            ),
            1 => writeln!(s, "    %{i} = stablehlo.add {prev}, %arg0 : tensor<16x16xf32>"),
            _ => writeln!(s, "    %{i} = stablehlo.tanh {prev} : tensor<16x16xf32>"),
        };
        prev = format!("%{i}");
    }
    let _ = writeln!(s, "    return {prev} : tensor<16x16xf32>\n  }}\n}}");
    s
}

pub fn run(p: ParseBenchArgs) -> anyhow::Result<()> {
    if p.ops == 0 || p.runs == 0 {
        bail!("--ops and --runs must be at least 1");
    }
    let text = chain_module(p.ops);
    let mut times = Vec::with_capacity(p.runs);
    let mut cpu = Vec::with_capacity(p.runs);
    let mut bar = super::progress::Progress::new(p.runs as u64, "bench parse");
    for _ in 0..p.runs {
        let c0 = cpu_seconds();
        let t = Instant::now();
        let m = parse_and_verify(&text).map_err(|e| anyhow::anyhow!("generated module: {e}"))?;
        times.push(t.elapsed().as_secs_f64());
        if let (Some(a), Some(b)) = (c0, cpu_seconds()) {
            cpu.push(b - a);
        }
        drop(m);
        bar.inc();
    }
    drop(bar);
    times.sort_by(f64::total_cmp);
    cpu.sort_by(f64::total_cmp);
    let median = times[times.len() / 2];
    outln!(
        "parse+verify {} ops ({:.1} MB): median {:.3} s over {} runs (min {:.3} s, max {:.3} s), {:.0} ops/s",
        p.ops,
        text.len() as f64 / 1e6,
        median,
        p.runs,
        times[0],
        times[times.len() - 1],
        p.ops as f64 / median
    )?;
    if !cpu.is_empty() {
        // CPU time is what the parser used, whatever else runs on the machine.
        let c = cpu[cpu.len() / 2];
        outln!(
            "  cpu time: median {c:.3} s ({:.0} ops per cpu-second)",
            p.ops as f64 / c
        )?;
    }
    Ok(())
}

/// CPU time this thread has run, in seconds (Linux `/proc/thread-self/schedstat`), if available.
fn cpu_seconds() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: u64 = text.split_whitespace().next()?.parse().ok()?;
    Some(ns as f64 / 1e9)
}
