//! `shardsim bench propagate`: parse and propagate a generated transformer-like
//! module of N ops (MLP blocks with residuals and a layernorm-style reduction,
//! data-parallel activations, model-parallel weights) and report the medians.

use std::time::Instant;

use clap::Args;

use shardsim::ir::mlir::parse_and_verify;
use shardsim::propagate::{propagate_module, Strategy};

#[derive(Debug, Args)]
pub struct BenchPropagateArgs {
    /// Approximate number of ops in the generated module (several sizes: 10000,100000).
    #[arg(long, default_value = "10000,100000")]
    ops: String,
    /// Timed repetitions per size (the median is reported).
    #[arg(long, default_value_t = 3)]
    runs: usize,
}

/// Ops per generated block.
const OPS_PER_BLOCK: usize = 11;

/// A module of `blocks` blocks of `x = x + W2 · tanh(W1 · norm(x))`.
pub fn transformer_like(blocks: usize) -> String {
    let (b, d, f) = (64, 128, 512);
    let mut s = String::with_capacity(blocks * 1200);
    s.push_str("module @bench {\n  sdy.mesh @mesh = <[\"x\"=2, \"y\"=4]>\n");
    s.push_str(&format!(
        "  func.func @main(%x: tensor<{b}x{d}xf32> {{sdy.sharding = #sdy.sharding<@mesh, [{{\"x\"}}, {{}}]>}}, \
%w1: tensor<{d}x{f}xf32> {{sdy.sharding = #sdy.sharding<@mesh, [{{}}, {{\"y\"}}]>}}, \
%w2: tensor<{f}x{d}xf32> {{sdy.sharding = #sdy.sharding<@mesh, [{{\"y\"}}, {{}}]>}}) -> tensor<{b}x{d}xf32> {{\n"
    ));
    s.push_str("    %zero = sdy.constant dense<0.000000e+00> : tensor<f32>\n");
    let mut x = "%x".to_string();
    for i in 0..blocks {
        let t = |n: &str| format!("%b{i}_{n}");
        s.push_str(&format!(
            "    {sum} = stablehlo.reduce({x} init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<{b}x{d}xf32>, tensor<f32>) -> tensor<{b}xf32>\n\
    {mean} = stablehlo.broadcast_in_dim {sum}, dims = [0] : (tensor<{b}xf32>) -> tensor<{b}x{d}xf32>\n\
    {cen} = stablehlo.subtract {x}, {mean} : tensor<{b}x{d}xf32>\n\
    {sq} = stablehlo.multiply {cen}, {cen} : tensor<{b}x{d}xf32>\n\
    {nrm} = stablehlo.tanh {sq} : tensor<{b}x{d}xf32>\n\
    {h} = stablehlo.dot_general {nrm}, %w1, contracting_dims = [1] x [0] : (tensor<{b}x{d}xf32>, tensor<{d}x{f}xf32>) -> tensor<{b}x{f}xf32>\n\
    {a} = stablehlo.tanh {h} : tensor<{b}x{f}xf32>\n\
    {o} = stablehlo.dot_general {a}, %w2, contracting_dims = [1] x [0] : (tensor<{b}x{f}xf32>, tensor<{f}x{d}xf32>) -> tensor<{b}x{d}xf32>\n\
    {r} = stablehlo.add {x}, {o} : tensor<{b}x{d}xf32>\n\
    {y} = stablehlo.maximum {r}, {cen} : tensor<{b}x{d}xf32>\n",
            sum = t("sum"),
            mean = t("mean"),
            cen = t("cen"),
            sq = t("sq"),
            nrm = t("nrm"),
            h = t("h"),
            a = t("a"),
            o = t("o"),
            r = t("r"),
            y = t("y"),
        ));
        x = t("y");
    }
    s.push_str(&format!("    return {x} : tensor<{b}x{d}xf32>\n  }}\n}}\n"));
    s
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

pub fn run(args: BenchPropagateArgs) -> anyhow::Result<()> {
    let sizes = super::output::parse_u64_list(&args.ops, "--ops")?;
    if sizes.contains(&0) || args.runs == 0 {
        anyhow::bail!("--ops and --runs must be at least 1");
    }
    outln!(
        "{:>10} {:>12} {:>12} {:>14}",
        "ops",
        "parse_s",
        "propagate_s",
        "ops_per_s"
    )?;
    let mut first: Option<(f64, f64)> = None;
    let mut bar = super::progress::Progress::new(
        sizes.len() as u64 * args.runs.max(1) as u64,
        "bench propagate",
    );
    for n in sizes {
        let blocks = (n as usize).div_ceil(OPS_PER_BLOCK).max(1);
        let text = transformer_like(blocks);
        let (mut parse, mut prop) = (Vec::new(), Vec::new());
        let mut ops = 0;
        for _ in 0..args.runs.max(1) {
            let t0 = Instant::now();
            let mut m =
                parse_and_verify(&text).map_err(|e| anyhow::anyhow!("generated module: {e}"))?;
            parse.push(t0.elapsed().as_secs_f64());
            ops = m.num_ops();
            let t1 = Instant::now();
            propagate_module(&mut m, Strategy::default())?;
            prop.push(t1.elapsed().as_secs_f64());
            bar.inc();
        }
        let (p, q) = (median(parse), median(prop));
        bar.suspend(|| outln!("{ops:>10} {p:>12.3} {q:>12.3} {:>14.0}", ops as f64 / q))?;
        if let Some((n0, t0)) = first {
            bar.suspend(|| {
                outln!(
                    "{:>10} propagation time ratio vs first size: {:.2}x for {:.2}x ops",
                    "",
                    q / t0,
                    ops as f64 / n0
                )
            })?;
        } else {
            first = Some((ops as f64, q));
        }
    }
    Ok(())
}
