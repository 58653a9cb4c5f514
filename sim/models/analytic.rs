//! Closed forms the simulated results are checked against: model FLOPs per
//! step as Megatron-LM counts them, ZeRO's model-state bytes per parameter
//! and the activation memory of Korthikanti et al. (2022).

use super::spec::{Mlp, ModelSpec};
use super::strategy::{Recompute, Strategy};

/// FLOPs of one forward pass per token: twice the multiply-adds of every
/// block matrix a token goes through, the attention scores and context
/// (`2 x 2 x s x h` per layer, the full square as Megatron counts it) and
/// the output projection.
pub fn forward_flops_per_token(model: &ModelSpec) -> f64 {
    let (h, s, l) = (model.hidden as f64, model.seq as f64, model.layers as f64);
    let d = model.head_dim() as f64;
    let attn_mats = h * (model.heads as f64 * d) * 2.0 + 2.0 * h * (model.kv_heads() as f64 * d);
    let mats = match model.mlp {
        Mlp::Gelu => 2.0,
        Mlp::Swiglu => 3.0,
    };
    let dense_mlp = mats * h * model.ffn_hidden as f64;
    // Layers with experts go through `top_k` routed and the shared experts.
    let moe_layers = model.moe_layers() as f64;
    let moe_mlp = model.moe.as_ref().map_or(0.0, |m| {
        mats * h * m.expert_ffn_hidden as f64 * (m.top_k + m.shared_experts) as f64
    });
    let mlp = (l - moe_layers) * dense_mlp + moe_layers * moe_mlp;
    let attn_core = 2.0 * s * model.heads as f64 * d;
    2.0 * (l * (attn_mats + attn_core) + mlp) + 2.0 * h * model.vocab as f64
}

/// Model FLOPs of one training step of `global_batch` sequences: forward
/// and backward (3 forward passes), plus one more forward with full
/// recomputation when `count_recompute` (how Narayanan et al. count).
pub fn step_flops(model: &ModelSpec, global_batch: u64, count_recompute: bool) -> f64 {
    let passes = if count_recompute { 4.0 } else { 3.0 };
    passes * forward_flops_per_token(model) * (global_batch * model.seq) as f64
}

/// Model-state bytes per parameter under ZeRO stage `zero` over `dp`
/// replicas: bf16 parameters and gradients and 12 bytes of fp32 master
/// weights and Adam moments (Rajbhandari et al. 2020, K = 12).
pub fn zero_bytes_per_param(zero: u8, dp: u64) -> f64 {
    zero_bytes_per_param_with_grads(zero, dp, 2.0)
}

/// [`zero_bytes_per_param`] with gradients of `grad` bytes (4 when they
/// are accumulated and reduced in fp32: ZeRO-1 `6 + 12/dp`, the
/// distributed optimizer's count for bf16 parameters with fp32 gradients
/// in Megatron-LM's documentation).
pub fn zero_bytes_per_param_with_grads(zero: u8, dp: u64, grad: f64) -> f64 {
    let n = dp as f64;
    match zero {
        0 => 2.0 + grad + 12.0,
        1 => 2.0 + grad + 12.0 / n,
        2 => 2.0 + (grad + 12.0) / n,
        _ => (2.0 + grad + 12.0) / n,
    }
}

/// Activation bytes one transformer layer keeps for one microbatch of `b`
/// sequences on one tensor-parallel device (Korthikanti et al. 2022, Table
/// 2): `sbh (34 + 5as/h)` without recomputation split over `t` with sequence
/// parallelism, `sbh (10 + 24/t + 5as/(ht))` without it; selective
/// recomputation drops the `5as/h` term, full keeps the layer input `2sbh`.
pub fn layer_activation_bytes(model: &ModelSpec, strategy: &Strategy) -> f64 {
    let (s, b, h) = (
        model.seq as f64,
        strategy.micro_batch as f64,
        model.hidden as f64,
    );
    let (a, t) = (model.heads as f64, strategy.tp as f64);
    let sbh = s * b * h;
    let core = 5.0 * a * s / h;
    let core = match strategy.recompute {
        Recompute::None if !strategy.flash_attention => core,
        _ => 0.0,
    };
    match (strategy.recompute, strategy.sequence_parallel) {
        (Recompute::Full, true) => 2.0 * sbh / t,
        (Recompute::Full, false) => 2.0 * sbh,
        (_, true) => sbh * (34.0 + core) / t,
        (_, false) => sbh * (10.0 + 24.0 / t + core / t),
    }
}

/// Parameters on one device of `strategy` with one pipeline stage, as
/// `(dense, routed experts)`: attention, router, shared experts and the
/// embedding tables split over `tp` (the router replicated), and each
/// block's `experts / ep` routed experts split over `tp`; the first
/// `dense_layers` have a dense MLP split over `tp` instead.
pub fn params_per_device(model: &ModelSpec, strategy: &Strategy) -> (f64, f64) {
    let (h, tp) = (model.hidden as f64, strategy.tp as f64);
    let l = model.layers as f64;
    let attn = 2.0 * h * h + 2.0 * h * (model.kv_heads() * model.head_dim()) as f64;
    let tables = if model.rope { 2.0 } else { 1.0 } * model.vocab as f64 * h;
    let positions = if model.rope {
        0.0
    } else {
        (model.seq * model.hidden) as f64
    };
    let mats = match model.mlp {
        Mlp::Gelu => 2.0,
        Mlp::Swiglu => 3.0,
    };
    let (dense_mlp, router, experts) = match &model.moe {
        None => (mats * h * model.ffn_hidden as f64, 0.0, 0.0),
        Some(m) => {
            let one = mats * h * m.expert_ffn_hidden as f64;
            (
                one * m.shared_experts as f64,
                h * m.experts as f64,
                one * (m.experts / strategy.ep) as f64,
            )
        }
    };
    let m = model.moe_layers() as f64;
    let first_dense = (l - m) * mats * h * model.ffn_hidden as f64;
    let (dense_mlp, router) = if model.moe.is_some() {
        (m * dense_mlp + first_dense, m * router)
    } else {
        (l * dense_mlp, 0.0)
    };
    let dense = (l * attn + dense_mlp) / tp + router + tables / tp + positions;
    (dense, m * experts / tp)
}

/// Model-state bytes on one device with one pipeline stage: ZeRO's bytes
/// per parameter over the `dp` replicas for dense weights, over the `dp /
/// ep` replicas holding the same experts for routed experts' weights (their
/// gradients are reduced, and their optimizer states sharded, only there).
pub fn model_state_bytes(model: &ModelSpec, strategy: &Strategy) -> f64 {
    let (dense, experts) = params_per_device(model, strategy);
    let grad = strategy.grad_dtype().size_bytes() as f64;
    let per = |dp: u64| zero_bytes_per_param_with_grads(strategy.zero, dp, grad);
    dense * per(strategy.dp) + experts * per(strategy.dp / strategy.ep.max(1))
}
