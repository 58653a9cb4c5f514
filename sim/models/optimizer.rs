//! The end of a training step for one model chunk's weights on a stage's
//! `data x tensor` mesh: the data-parallel gradient reduction (each replica's
//! accumulated gradients summed: an all-reduce, or a reduce-scatter when
//! ZeRO shards the optimizer) and Adam on fp32 master weights and moments,
//! whose new bf16 parameters every replica gets back (an all-gather under
//! ZeRO-1 and 2; ZeRO-3 keeps its shard and gathers the parameters before
//! each pass, [`gather_program`]).

use crate::base::DType;

use super::block::Sharded;
use super::emit::{Emitter, Val};
use super::moe::EXPERT_AXIS;
use super::strategy::Strategy;

/// Adam's coefficients (the values do not change the cost).
const BETA1: f64 = 0.9;
const BETA2: f64 = 0.95;
const EPS: f64 = 1e-8;
const LR: f64 = 1e-4;

/// Where ZeRO puts a weight's optimizer state: the weight's own sharding
/// with `data` added on the first dimension it divides and `tensor` does
/// not split; the weight's sharding when nothing fits or without ZeRO.
pub fn optimizer_dims(
    shape: &[u64],
    dims: &[&'static str],
    strategy: &Strategy,
) -> Vec<&'static str> {
    let mut out = dims.to_vec();
    let (axes, n) = data_axes(dims, strategy);
    if strategy.zero == 0 || n == 1 {
        return out;
    }
    if let Some(i) = (0..shape.len()).find(|&i| out[i].is_empty() && shape[i] % n == 0) {
        out[i] = axes;
    }
    out
}

/// The mesh axes a weight's gradient is reduced over, and their size: every
/// data-parallel replica (`data`, and `expert` with expert parallelism) for
/// a dense weight; for a routed expert's weight (split over `expert`) only
/// the `dp / ep` replicas holding the same experts (`data`).
pub fn data_axes(dims: &[&'static str], strategy: &Strategy) -> (&'static str, u64) {
    if strategy.ep <= 1 {
        ("data", strategy.dp)
    } else if dims.contains(&EXPERT_AXIS) {
        ("data", strategy.dp / strategy.ep)
    } else {
        ("data,expert", strategy.dp)
    }
}

/// Megatron-LM's smallest gradient bucket, in elements: `max(40M, 1M x dp)`
/// (`DistributedDataParallel`'s default when gradient reduction overlaps).
pub fn bucket_elements(strategy: &Strategy) -> u64 {
    40_000_000u64.max(1_000_000 * strategy.dp)
}

/// The buffers a distributed optimizer (ZeRO-1 and up, `dp > 1`) reduces
/// and steps: as Megatron-LM's, each tensor-parallel rank's gradients laid
/// end to end in buckets of at least [`bucket_elements`] (a bucket closes
/// once it holds that many), each padded to a multiple of `dp` so every
/// replica owns an equal slice: `[tp, elements]` split over `tensor`, the
/// optimizer's slice over `data` on the second dimension. Without ZeRO (or
/// with one replica) the weights themselves.
pub fn optimizer_buffers(
    weights: &[(Vec<u64>, Vec<&'static str>)],
    strategy: &Strategy,
) -> Vec<(Vec<u64>, Vec<&'static str>)> {
    if strategy.zero == 0 || strategy.dp == 1 {
        return weights.to_vec();
    }
    let (dp, tp) = (strategy.dp, strategy.tp);
    let bucket = bucket_elements(strategy);
    let buffer = |n: u64| (vec![tp, n.div_ceil(dp) * dp], vec!["tensor", ""]);
    let mut out = Vec::new();
    let mut acc = 0u64;
    // Routed experts' weights (expert parallelism) are stepped as they are,
    // sharded over the replicas holding the same experts.
    let mut experts = Vec::new();
    for (shape, dims) in weights {
        if dims.contains(&EXPERT_AXIS) {
            experts.push((shape.clone(), dims.clone()));
            continue;
        }
        let n: u64 = shape.iter().product();
        acc += if dims.contains(&"tensor") { n / tp } else { n };
        if acc >= bucket {
            out.push(buffer(acc));
            acc = 0;
        }
    }
    if acc > 0 {
        out.push(buffer(acc));
    }
    out.extend(experts);
    out
}

/// `data x tensor`; with expert parallelism `data x expert x tensor`, the
/// data axis split into `dp / ep` groups of `ep` replicas.
fn mesh(strategy: &Strategy) -> Emitter {
    if strategy.ep > 1 {
        return Emitter::new(&[
            ("data", strategy.dp / strategy.ep),
            (EXPERT_AXIS, strategy.ep),
            ("tensor", strategy.tp),
        ]);
    }
    Emitter::new(&[("data", strategy.dp), ("tensor", strategy.tp)])
}

/// The gradient reduction of `weights` (shape and sharding of each): each
/// replica's gradients arrive stacked on a leading `data` dimension and are
/// summed over it into the optimizer's sharding.
pub fn reduce_program(weights: &[(Vec<u64>, Vec<&'static str>)], strategy: &Strategy) -> String {
    let mut e = mesh(strategy);
    let mut results: Vec<(Val, Vec<&str>)> = Vec::new();
    for (shape, dims) in weights {
        let (axes, n) = data_axes(dims, strategy);
        let distributed = strategy.zero >= 1 && n > 1;
        let mut stacked = vec![n];
        stacked.extend(shape);
        let mut sdims = vec![axes];
        sdims.extend(dims.iter().copied());
        let g = e.arg(&stacked, strategy.grad_dtype(), &sdims);
        let sum = if distributed {
            let odims = optimizer_dims(shape, dims, strategy);
            if odims.last() == Some(&axes) && dims.last() == Some(&"") {
                // Megatron's distributed optimizer: each replica's bucket is
                // scaled by 1 / n (its gradient scaling, in place) and
                // reduce-scattered by NCCL into the replicas' slices;
                // per-device code, so no other op is costed.
                let scope = e.manual_begin(&[(&g, sdims.clone())]);
                let local = scope.args[0].clone();
                let scaled = e.binary_scalar("multiply", &local, 1.0 / n as f64);
                let flat: u64 = local.shape.iter().product();
                let flat = e.reshape(&scaled, &[flat]);
                let slice = e.reduce_scatter_over(&flat, axes, 0);
                let mut block: Vec<u64> = local.shape[1..].to_vec();
                let last = block.len() - 1;
                block[last] /= n;
                let slice = e.reshape(&slice, &block);
                e.manual_end(scope, &[(&slice, odims)])[0].clone()
            } else {
                // A routed expert's weight stepped as it is (sharded on
                // another dim, or on none): its replicas' partial sums
                // reduced into the optimizer's sharding, written as a
                // contraction with ones so the partitioner leaves a partial
                // sum, as it does for a row-parallel matmul.
                let ones = e.splat(1.0, &[n], strategy.grad_dtype());
                let ones = e.constrain(&ones, &[axes]);
                e.dot(&ones, &g, (&[], &[]), (&[0], &[0]))
            }
        } else {
            e.reduce("add", &g, 0.0, &[0])
        };
        results.push((sum, optimizer_dims(shape, dims, strategy)));
    }
    e.finish("gradient_reduction", &results)
}

/// Adam on fp32 master weights and moments (in the optimizer's sharding),
/// from the reduced gradients; returns the new master weights, moments and
/// the parameters in the compute type, replicated over `data`.
pub fn optimizer_program(weights: &[(Vec<u64>, Vec<&'static str>)], strategy: &Strategy) -> String {
    let mut e = mesh(strategy);
    let mut results: Vec<Sharded> = Vec::new();
    for (shape, dims) in weights {
        let odims = optimizer_dims(shape, dims, strategy);
        let g = e.arg(shape, strategy.grad_dtype(), &odims);
        let w = e.arg(shape, DType::F32, &odims);
        let m = e.arg(shape, DType::F32, &odims);
        let v = e.arg(shape, DType::F32, &odims);
        let g = e.convert(&g, DType::F32);
        let m1 = e.binary_scalar("multiply", &m, BETA1);
        let g1 = e.binary_scalar("multiply", &g, 1.0 - BETA1);
        let m = e.binary("add", &m1, &g1);
        let gg = e.binary("multiply", &g, &g);
        let v1 = e.binary_scalar("multiply", &v, BETA2);
        let g2 = e.binary_scalar("multiply", &gg, 1.0 - BETA2);
        let v = e.binary("add", &v1, &g2);
        let sq = e.unary("sqrt", &v);
        let den = e.binary_scalar("add", &sq, EPS);
        let upd = e.binary("divide", &m, &den);
        let step = e.binary_scalar("multiply", &upd, LR);
        let w = e.binary("subtract", &w, &step);
        let p = e.convert(&w, strategy.dtype());
        results.push((w, odims.clone()));
        results.push((m, odims.clone()));
        results.push((v, odims.clone()));
        // ZeRO-3 keeps only its shard of the parameters.
        let pdims = if strategy.zero >= 3 {
            odims
        } else {
            dims.clone()
        };
        results.push((p, pdims));
    }
    let r: Vec<(Val, Vec<&str>)> = results.into_iter().collect();
    e.finish("optimizer", &r)
}

/// ZeRO-3's parameter all-gather: each replica's shard of `weights` (in the
/// optimizer's sharding) gathered whole over `data` before a pass uses them.
pub fn gather_program(weights: &[(Vec<u64>, Vec<&'static str>)], strategy: &Strategy) -> String {
    let mut e = mesh(strategy);
    let mut results: Vec<(Val, Vec<&str>)> = Vec::new();
    for (shape, dims) in weights {
        let w = e.arg(
            shape,
            strategy.dtype(),
            &optimizer_dims(shape, dims, strategy),
        );
        let whole = e.constrain(&w, dims);
        results.push((whole, dims.clone()));
    }
    e.finish("parameter_gather", &results)
}
