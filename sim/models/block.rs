//! One transformer block, its embedding and its loss head, forward and
//! backward, written with [`Emitter`] on a `data x tensor` mesh with
//! Megatron's tensor-parallel shardings: Q/K/V and the first MLP matrices
//! split by columns, the out-projection and the last MLP matrix by rows,
//! the vocabulary split for the embedding and the head; with sequence
//! parallelism the residual stream, norms and dropouts are split along the
//! sequence. The partitioner derives the collectives from these shardings.
//!
//! Activations the backward pass needs are named by role ([`Acts`]) so a
//! forward program can return them and a backward program take them back,
//! whichever recomputation mode decides which of them are kept.

use std::collections::BTreeMap;

use crate::base::DType;

use super::emit::{Emitter, Val};
use super::spec::{Mlp, ModelSpec, Norm};
use super::strategy::Strategy;

/// Dropout probability (GPT-3, Megatron).
pub const DROPOUT: f64 = 0.1;

/// Pieces of Transformer Engine's split-pipelined communication overlap
/// (`num_splits` of Megatron-Core's default userbuffers configuration).
pub const OVERLAP_SPLITS: u64 = 4;

/// Shapes and switches of the blocks of one model chunk.
#[derive(Debug, Clone)]
pub struct Ctx {
    /// Sequences per microbatch.
    pub b: u64,
    pub s: u64,
    pub h: u64,
    pub heads: u64,
    pub kv: u64,
    /// Query heads per key/value head.
    pub g: u64,
    pub d: u64,
    pub f: u64,
    pub vocab: u64,
    pub mlp: Mlp,
    pub norm: Norm,
    pub rope: bool,
    pub dropout: bool,
    /// The attention probabilities' dropout (and its gradient) a kernel of
    /// its own, after the fused softmax (Megatron-LM 2021): see
    /// [`Strategy::separate_attention_dropout`].
    pub separate_attention_dropout: bool,
    /// The loss on an fp32 copy of the logits, one kernel per step
    /// ([`Strategy::unfused_cross_entropy`]).
    pub unfused_cross_entropy: bool,
    pub sequence_parallel: bool,
    /// Tensor-parallel ranks (the `tensor` axis).
    pub tp: u64,
    /// Context-parallel ranks (the `context` axis): the sequence split over
    /// them, attention as ring attention ([`super::ring`]).
    pub cp: u64,
    /// Tensor-parallel communication overlapped with the matmuls, as
    /// Megatron-Core with Transformer Engine does it (`--tp-comm-overlap`):
    /// see [`gathered_mm`] and [`mm_scattered`].
    pub tp_comm_overlap: bool,
    /// Element type of activations and parameters.
    pub dtype: DType,
    /// Element type the weight-gradient matmuls write: the accumulators'
    /// with gradient-accumulation fusion, else `dtype`.
    pub wgrad_dtype: DType,
    /// Mixture of experts in place of the dense MLP ([`super::moe`]).
    pub moe: Option<super::moe::MoeCtx>,
}

impl Ctx {
    pub fn new(model: &ModelSpec, strategy: &Strategy) -> Ctx {
        Ctx {
            sequence_parallel: strategy.sequence_parallel,
            separate_attention_dropout: strategy.separate_attention_dropout
                && model.dropout
                && !strategy.flash_attention,
            unfused_cross_entropy: strategy.unfused_cross_entropy,
            tp: strategy.tp,
            cp: strategy.cp,
            tp_comm_overlap: strategy.tp_comm_overlap && strategy.sequence_parallel,
            moe: super::moe::MoeCtx::new(model, strategy.micro_batch, model.seq, strategy.ep),
            wgrad_dtype: if strategy.gradient_accumulation_fusion {
                strategy.grad_dtype()
            } else {
                strategy.dtype()
            },
            ..Ctx::of(model, strategy.micro_batch, model.seq, strategy.dtype())
        }
    }

    /// `b` sequences of `s` tokens of `model` (dropout as the model says,
    /// no sequence parallelism).
    pub fn of(model: &ModelSpec, b: u64, s: u64, dtype: DType) -> Ctx {
        Ctx {
            b,
            s,
            h: model.hidden,
            heads: model.heads,
            kv: model.kv_heads(),
            g: model.heads / model.kv_heads(),
            d: model.head_dim(),
            f: model.ffn_hidden,
            vocab: model.vocab,
            mlp: model.mlp,
            norm: model.norm,
            rope: model.rope,
            dropout: model.dropout,
            separate_attention_dropout: false,
            unfused_cross_entropy: false,
            sequence_parallel: false,
            tp: 1,
            cp: 1,
            tp_comm_overlap: false,
            dtype,
            wgrad_dtype: dtype,
            moe: super::moe::MoeCtx::new(model, b, s, 1),
        }
    }

    /// Pieces each reduce-scatter is split into when it overlaps a matmul:
    /// Transformer Engine's split-pipelined overlap (`pipeline`, its default
    /// for `proj_fprop` and `fc2_fprop`) cuts the sequence into
    /// `num_splits = 4` pieces (Megatron-Core's default), each piece its own
    /// collective, so at most 4 and at most `tp`; fewer when 4 does not split
    /// a rank's share of the sequence evenly; 0 without overlap (then the
    /// all-gathers are not ring exchanges either, see [`gathered_mm`]).
    pub fn overlap_chunks(&self) -> u64 {
        if !self.tp_comm_overlap || self.tp < 2 {
            return 0;
        }
        let local = self.s / self.tp;
        (1..=self.tp.min(OVERLAP_SPLITS))
            .rev()
            .find(|n| local % n == 0)
            .unwrap_or(1)
    }

    /// `[b, s, h]`.
    pub fn act(&self) -> Vec<u64> {
        vec![self.b, self.s, self.h]
    }

    /// The residual stream's sharding: split along the sequence with
    /// sequence parallelism (inside each context rank's share), else
    /// replicated over `tensor`.
    pub fn act_dims(&self) -> Vec<&'static str> {
        match (self.sequence_parallel, self.cp > 1) {
            (true, true) => vec!["", "context,tensor", ""],
            (true, false) => vec!["", "tensor", ""],
            (false, _) => vec!["", self.seq(), ""],
        }
    }

    /// The mesh axis of the sequence outside sequence parallelism:
    /// `context` with context parallelism, none otherwise.
    pub fn seq(&self) -> &'static str {
        if self.cp > 1 {
            "context"
        } else {
            ""
        }
    }

    /// `dims` of a value with its sequence on dimension `at`, that
    /// dimension split over `context` with context parallelism.
    pub fn on_seq(&self, dims: &[&'static str], at: usize) -> Vec<&'static str> {
        let mut d = dims.to_vec();
        d[at] = self.seq();
        d
    }

    /// `dims` of a `[b, s, ...]` value (sequence second).
    pub fn tokens(&self, dims: &[&'static str]) -> Vec<&'static str> {
        self.on_seq(dims, 1)
    }
}

/// A value with the sharding it is returned or taken with.
pub type Sharded = (Val, Vec<&'static str>);

/// Activations of one block by role.
pub type Acts = BTreeMap<&'static str, Sharded>;

/// The roles of a block in the order residuals are passed, and which
/// recomputation keeps them: `x` always; the attention core's (`p`, `pmask`,
/// `pd`) only without recomputation.
pub const ROLES: &[&str] = &[
    "x", "ln1", "q", "k", "v", "lse", "p", "pmask", "pd", "ctx", "omask", "x1", "ln2", "h1", "hu",
    "gact", "mmask", "rprobs", "rmask", "disp", "xe", "eh1", "ehu", "egact", "ye", "sh1", "shu",
    "sgact",
];

/// Roles of the attention core (recomputed by selective recomputation and
/// by a flash-attention kernel).
pub const CORE_ROLES: &[&str] = &["p", "pmask", "pd"];

/// One block's weights (bf16), in argument order.
#[derive(Debug, Clone)]
pub struct BlockWeights {
    pub mats: Vec<Sharded>,
}

/// Shapes and shardings of one block's weights, fused as Megatron-LM fuses
/// them: `wqkv` (`[h, kv, g + 2, d]`: each key/value group's query heads,
/// key and value together, so a tensor-parallel shard of `kv` holds whole
/// groups), `wo` (`[heads d, h]`, row-parallel), the first MLP matrix
/// (`[h, f]`, or `[h, 2, f]` gate and up for SwiGLU; column-parallel) and
/// `w2` (`[f, h]`, row-parallel).
pub fn block_weight_shapes(c: &Ctx) -> Vec<(Vec<u64>, Vec<&'static str>)> {
    let mut w = vec![
        (vec![c.h, c.kv, c.g + 2, c.d], vec!["", "tensor", "", ""]),
        (vec![c.heads * c.d, c.h], vec!["tensor", ""]),
    ];
    if let Some(m) = &c.moe {
        w.extend(m.weight_shapes(c));
        return w;
    }
    match c.mlp {
        Mlp::Gelu => w.push((vec![c.h, c.f], vec!["", "tensor"])),
        Mlp::Swiglu => w.push((vec![c.h, 2, c.f], vec!["", "", "tensor"])),
    }
    w.push((vec![c.f, c.h], vec!["tensor", ""]));
    w
}

/// Arguments for one block's weights.
pub fn block_weight_args(e: &mut Emitter, c: &Ctx) -> BlockWeights {
    BlockWeights {
        mats: block_weight_shapes(c)
            .into_iter()
            .map(|(shape, dims)| (e.arg(&shape, c.dtype, &dims), dims))
            .collect(),
    }
}

fn w(ws: &BlockWeights, i: usize) -> &Val {
    &ws.mats[i].0
}

/// A counter-based hash of every element's index plus `seed` (Philox-like in
/// spirit: each element's bits depend only on its position and the seed, so
/// shards generate their own part and a recomputation reproduces the mask).
fn hash_bits(e: &mut Emitter, shape: &[u64], seed: u64) -> Val {
    let u = DType::UI32;
    let mut idx: Option<Val> = None;
    for dim in 0..shape.len() {
        let i = e.iota(dim, shape, u);
        idx = Some(match idx {
            None => i,
            Some(acc) => {
                let scaled = e.binary_scalar("multiply", &acc, shape[dim] as f64);
                e.binary("add", &scaled, &i)
            }
        });
    }
    let mut x = idx.expect("a tensor has at least one dimension");
    x = e.binary_scalar("add", &x, (seed % (1 << 31)) as f64);
    for (shift, mult) in [(16.0, 73244475.0), (15.0, 2246822507.0)] {
        let sh = e.binary_scalar("shift_right_logical", &x, shift);
        x = e.binary("xor", &x, &sh);
        x = e.binary_scalar("multiply", &x, mult);
    }
    let sh = e.binary_scalar("shift_right_logical", &x, 16.0);
    e.binary("xor", &x, &sh)
}

/// Dropout of `x` with a mask drawn from `seed`: the kept mask (`i1`, one
/// byte per element) and the scaled result.
pub fn dropout(e: &mut Emitter, x: &Val, seed: u64) -> (Val, Val) {
    let bits = hash_bits(e, &x.shape, seed);
    let threshold = e.splat((DROPOUT * 4294967296.0).floor(), &x.shape, DType::UI32);
    let keep = e.compare("GE", &bits, &threshold);
    let y = dropout_apply(e, x, &keep);
    (keep, y)
}

/// `keep ? x / (1 - p) : 0`: dropout's forward with a given mask, and its
/// backward.
pub fn dropout_apply(e: &mut Emitter, x: &Val, keep: &Val) -> Val {
    let scaled = e.binary_scalar("multiply", x, 1.0 / (1.0 - DROPOUT));
    let zero = e.splat(0.0, &x.shape, x.dtype);
    e.select(keep, &scaled, &zero)
}

/// Normalized `x` over its last dimension and the broadcast reciprocal of
/// its spread (`rsqrt(var + eps)` or, for RMSNorm, of the mean square).
pub fn norm(e: &mut Emitter, c: &Ctx, x: &Val) -> (Val, Val) {
    let inv_h = 1.0 / x.shape[x.shape.len() - 1] as f64;
    let centered = match c.norm {
        Norm::Layernorm => {
            let sum = e.reduce_last_keep("add", x, 0.0);
            let mean = e.binary_scalar("multiply", &sum, inv_h);
            e.binary("subtract", x, &mean)
        }
        Norm::Rmsnorm => x.clone(),
    };
    let sq = e.binary("multiply", &centered, &centered);
    let ss = e.reduce_last_keep("add", &sq, 0.0);
    let ms = e.binary_scalar("multiply", &ss, inv_h);
    let ms = e.binary_scalar("add", &ms, 1e-5);
    let rs = e.unary("rsqrt", &ms);
    (e.binary("multiply", &centered, &rs), rs)
}

/// The gradient through [`norm`] from `dn`, recomputing the normalized value
/// from the saved input `x`.
pub fn norm_grad(e: &mut Emitter, c: &Ctx, x: &Val, dn: &Val) -> Val {
    let (n, rs) = norm(e, c, x);
    let inv_h = 1.0 / x.shape[x.shape.len() - 1] as f64;
    let t = e.binary("multiply", dn, &n);
    let s = e.reduce_last_keep("add", &t, 0.0);
    let m = e.binary_scalar("multiply", &s, inv_h);
    let nm = e.binary("multiply", &n, &m);
    let mut g = e.binary("subtract", dn, &nm);
    if c.norm == Norm::Layernorm {
        let s = e.reduce_last_keep("add", dn, 0.0);
        let m = e.binary_scalar("multiply", &s, inv_h);
        g = e.binary("subtract", &g, &m);
    }
    e.binary("multiply", &g, &rs)
}

/// `x` whole along the sequence: with sequence parallelism, the one
/// all-gather before the column-parallel matmuls that read it (Megatron's
/// `g` operator); the value itself otherwise.
pub fn gathered(e: &mut Emitter, c: &Ctx, x: &Val) -> Val {
    if c.sequence_parallel {
        let dims = c.tokens(&vec![""; x.shape.len()]);
        e.constrain(x, &dims)
    } else {
        x.clone()
    }
}

/// `[b, tp, s / tp, ...]` back to `[b, s, ...]`.
fn merge_ranks(e: &mut Emitter, x: &Val) -> Val {
    let mut shape = vec![x.shape[0], x.shape[1] * x.shape[2]];
    shape.extend_from_slice(&x.shape[3..]);
    e.reshape(x, &shape)
}

/// `dims` of a `[b, s, ...]` value for its `[b, tp, s / tp, ...]` form with
/// the rank dimension unsplit.
fn rank_dims(dims: &[&'static str]) -> Vec<&'static str> {
    let mut d = vec![dims[0], "", dims[1]];
    d.extend_from_slice(&dims[2..]);
    d
}

/// A column-parallel matmul `f` of the sequence-split `x` with the weight
/// `w` (a block weight and its sharding): its output (with sharding
/// `out_dims`) and, when `keep` asks for it, `x` gathered whole (what a
/// weight gradient reads). With tensor-parallel overlap the all-gather is
/// Transformer Engine's ring exchange (`ring_exchange`, its default for
/// `qkv_fprop`, `fc1_fprop`, `proj_dgrad` and `fc2_dgrad`), see
/// [`ring_exchange_mm`]. Otherwise one all-gather, then the matmul.
pub fn gathered_mm(
    e: &mut Emitter,
    c: &Ctx,
    x: &Val,
    w: &Sharded,
    out_dims: &[&'static str],
    keep: bool,
    f: impl Fn(&mut Emitter, &Val, &Val) -> Val,
) -> (Val, Option<Val>) {
    if c.overlap_chunks() == 0 {
        let xg = gathered(e, c, x);
        let y = f(e, &xg, &w.0);
        return (e.constrain(&y, out_dims), keep.then_some(xg));
    }
    ring_exchange_mm(e, c, x, w, out_dims, keep, f)
}

/// Transformer Engine's ring-exchange all-gather overlapped with the matmul,
/// in per-device code: each tensor rank starts on its own share of the
/// sequence (no wait), and at each of `tp` steps sends the share it holds
/// to the next rank (a point-to-point send over NVLink, issued before the
/// step's matmul so it travels while the matmul runs) and multiplies it;
/// after `tp - 1` sends every rank has multiplied every share. The product
/// of step `i` on rank `r` belongs to share `(r - i) mod tp`, where
/// Transformer Engine writes it in the output ([`in_sequence_order`]).
fn ring_exchange_mm(
    e: &mut Emitter,
    c: &Ctx,
    x: &Val,
    w: &Sharded,
    out_dims: &[&'static str],
    keep: bool,
    f: impl Fn(&mut Emitter, &Val, &Val) -> Val,
) -> (Val, Option<Val>) {
    let tp = c.tp;
    let rank = e.iota(0, &[tp], DType::I32);
    let rank = e.constrain(&rank, &["tensor"]);
    let scope = e.manual_begin(&[
        (x, c.act_dims()),
        (&w.0, w.1.clone()),
        (&rank, vec!["tensor"]),
    ]);
    let [xl, wl, rank] = [0, 1, 2].map(|i| scope.args[i].clone());
    let mut held = xl;
    let mut ys = Vec::new();
    let mut xs = Vec::new();
    for i in 0..tp {
        let next = (i + 1 < tp).then(|| e.ring_shift(&held, "tensor", 1));
        ys.push(f(e, &held, &wl));
        xs.push(held.clone());
        if let Some(n) = next {
            held = n;
        }
    }
    let r = e.reshape(&rank, &[]);
    let y = in_sequence_order(e, &ys, &r);
    let mut results = vec![(y, out_dims.to_vec())];
    if keep {
        let g = in_sequence_order(e, &xs, &r);
        results.push((g, vec![""; x.shape.len()]));
    }
    let refs: Vec<(&Val, Vec<&str>)> = results.iter().map(|(v, d)| (v, d.clone())).collect();
    let out = e.manual_end(scope, &refs);
    let y = e.constrain(&out[0], out_dims);
    let g = keep.then(|| e.constrain(&out[1], &vec![""; x.shape.len()]));
    (y, g)
}

/// Per-device code: the pieces `[b, s / tp, ...]` of a ring exchange on
/// the rank `r` (a scalar) in sequence order, `[b, s, ...]`: share `j` is
/// the piece of step `(r - j) mod tp`, picked by selects that fuse into the
/// consumer's kernel (no copy of its own, as the pieces land in place).
fn in_sequence_order(e: &mut Emitter, pieces: &[Val], r: &Val) -> Val {
    let n = pieces.len() as u64;
    let shape = pieces[0].shape.clone();
    let shares: Vec<Val> = (0..n)
        .map(|j| {
            let back = e.binary_scalar("add", r, (n - j) as f64);
            let step = e.binary_scalar("remainder", &back, n as f64);
            let mut acc = pieces[n as usize - 1].clone();
            for i in (0..n as usize - 1).rev() {
                let i_val = e.scalar(i as f64, DType::I32);
                let is = e.compare("EQ", &step, &i_val);
                let is = e.broadcast(&is, &[], &shape);
                acc = e.select(&is, &pieces[i], &acc);
            }
            acc
        })
        .collect();
    e.concatenate(&shares.iter().collect::<Vec<_>>(), 1)
}

/// A row-parallel matmul `f` of `x` (its contraction split over `tensor`,
/// sharding `x_dims`) whose partial sums are reduce-scattered along the
/// sequence (sequence parallelism). With tensor-parallel overlap the
/// sequence is cut into [`Ctx::overlap_chunks`] pieces whose matmuls run
/// one after another while the previous piece's reduce-scatter travels
/// (Transformer Engine's pipelined reduce-scatter): only the last piece is
/// exposed. Otherwise one matmul, then one reduce-scatter.
pub fn mm_scattered(
    e: &mut Emitter,
    c: &Ctx,
    x: &Val,
    x_dims: &[&'static str],
    f: impl Fn(&mut Emitter, &Val) -> Val,
) -> Val {
    let act_dims = c.act_dims();
    let n = c.overlap_chunks();
    if n == 0 {
        let y = f(e, x);
        return e.constrain(&y, &act_dims);
    }
    let xr = e.reshape(x, &{
        let mut s = vec![x.shape[0], c.tp, x.shape[1] / c.tp];
        s.extend_from_slice(&x.shape[2..]);
        s
    });
    let xdims = rank_dims(x_dims);
    let xr = e.constrain(&xr, &xdims);
    let piece = xr.shape[2] / n;
    // The partial sums' pieces land split over the rank dimension.
    let mut ydims = vec!["", "tensor", ""];
    ydims.extend(std::iter::repeat("").take(act_dims.len() - 2));
    let mut ys = Vec::new();
    for j in 0..n {
        let p = e.slice(&xr, 2, j * piece, (j + 1) * piece);
        let p = e.constrain(&p, &xdims);
        let y = f(e, &p);
        ys.push(e.constrain(&y, &ydims));
    }
    let y = e.concatenate(&ys.iter().collect::<Vec<_>>(), 2);
    let y = e.constrain(&y, &ydims);
    let y = merge_ranks(e, &y);
    e.constrain(&y, &act_dims)
}

/// `x @ w` over the last dimension of `x`.
pub(super) fn mm(e: &mut Emitter, x: &Val, w: &Val) -> Val {
    let last = x.shape.len() - 1;
    e.dot(x, w, (&[], &[]), (&[last], &[0]))
}

/// `dy @ w^T`: the input gradient of [`mm`].
pub(super) fn mm_dx(e: &mut Emitter, dy: &Val, w: &Val) -> Val {
    let last = dy.shape.len() - 1;
    e.dot(dy, w, (&[], &[]), (&[last], &[1]))
}

/// `dy @ w^T` over every dimension of `w` after its first (a fused weight).
pub(super) fn mm_dx_all(e: &mut Emitter, dy: &Val, w: &Val) -> Val {
    let n = w.shape.len() - 1;
    let dy_dims: Vec<usize> = (dy.shape.len() - n..dy.shape.len()).collect();
    let w_dims: Vec<usize> = (1..=n).collect();
    e.dot(dy, w, (&[], &[]), (&dy_dims, &w_dims))
}

/// `x^T @ dy` over batch and sequence: the weight gradient of [`mm`].
/// With context parallelism each context rank's own sum, stacked on a
/// leading `context` dimension (`[cp, ...]`): the partial gradients the
/// data x context reduction sums (no reduction inside the pass).
pub fn mm_dw(e: &mut Emitter, c: &Ctx, x: &Val, dy: &Val) -> Val {
    if c.cp == 1 {
        // With gradient-accumulation fusion, in the accumulator's type.
        return e.dot_as(x, dy, (&[], &[]), (&[0, 1], &[0, 1]), c.wgrad_dtype);
    }
    // The context axis moves to the new dimension with the reshape; the
    // other dimensions keep their shardings.
    let split = |e: &mut Emitter, v: &Val| {
        let mut shape = vec![v.shape[0], c.cp, v.shape[1] / c.cp];
        shape.extend_from_slice(&v.shape[2..]);
        e.reshape(v, &shape)
    };
    let (xs, dys) = (split(e, x), split(e, dy));
    e.dot(&xs, &dys, (&[1], &[1]), (&[0, 2], &[0, 2]))
}

/// Rotary embedding of `t` (`[b, heads, ..., s, d]`, sequence second to
/// last) with tables `cos`, `sin` (`[s, d]`); `inverse` applies the
/// transpose (for gradients).
fn rope(e: &mut Emitter, t: &Val, tables: &(Val, Val), inverse: bool) -> Val {
    let rank = t.shape.len();
    let d = t.shape[rank - 1];
    let bc = |e: &mut Emitter, tab: &Val| e.broadcast(tab, &[rank - 2, rank - 1], &t.shape);
    let (cos, sin) = (bc(e, &tables.0), bc(e, &tables.1));
    let lo = e.slice(t, rank - 1, 0, d / 2);
    let hi = e.slice(t, rank - 1, d / 2, d);
    let rotated = if inverse {
        let nlo = e.unary("negate", &lo);
        e.concatenate(&[&hi, &nlo], rank - 1)
    } else {
        let nhi = e.unary("negate", &hi);
        e.concatenate(&[&nhi, &lo], rank - 1)
    };
    let a = e.binary("multiply", t, &cos);
    let b = e.binary("multiply", &rotated, &sin);
    e.binary("add", &a, &b)
}

/// Attention probabilities from rotated `q` (`[b, kv, g, s, d]`) and `k`
/// (`[b, kv, s, d]`): causal softmax of the scaled scores, then dropout.
/// Returns the roles `p`, and with dropout `pmask` and `pd`.
fn attention_probs(e: &mut Emitter, c: &Ctx, q: &Val, k: &Val, seed: u64) -> Acts {
    let dims5 = vec!["", "tensor", "", "", ""];
    let scores = e.dot(q, k, (&[0, 1], &[0, 1]), (&[4], &[3]));
    let scores = e.binary_scalar("multiply", &scores, 1.0 / (c.d as f64).sqrt());
    let row = e.iota(3, &scores.shape.clone(), DType::I32);
    let col = e.iota(4, &scores.shape.clone(), DType::I32);
    let causal = e.compare("GE", &row, &col);
    let masked = e.splat(-1e4, &scores.shape.clone(), c.dtype);
    let scores = e.select(&causal, &scores, &masked);
    let mx = e.reduce_last_keep("maximum", &scores, f64::NEG_INFINITY);
    let z = e.binary("subtract", &scores, &mx);
    let ez = e.unary("exponential", &z);
    let se = e.reduce_last_keep("add", &ez, 0.0);
    let p = e.binary("divide", &ez, &se);
    let mut p = e.constrain(&p, &dims5);
    if c.separate_attention_dropout {
        // The fused softmax kernel ends here: the probabilities go to memory.
        p = kernel_boundary(e, &p, &dims5);
    }
    let mut acts = Acts::new();
    if c.dropout {
        let (keep, pd) = dropout(e, &p, seed);
        acts.insert("pmask", (keep, dims5.clone()));
        acts.insert("pd", (pd, dims5.clone()));
    }
    acts.insert("p", (p, dims5));
    acts
}

/// `x` (sharded as `dims`) unchanged, written to memory by the kernel that
/// makes it and read back by the next: an identity per-device region,
/// whose result is a relabel of each device's block (no data moves), which
/// no fusion of the timed run spans. Where a framework's kernels end on a
/// value a compiler would have fused through.
pub(super) fn kernel_boundary(e: &mut Emitter, x: &Val, dims: &[&str]) -> Val {
    let scope = e.manual_begin(&[(x, dims.to_vec())]);
    let block = scope.args[0].clone();
    e.manual_end(scope, &[(&block, dims.to_vec())]).remove(0)
}

/// The probabilities attention applies: after dropout when there is one.
fn applied_probs(acts: &Acts) -> &Val {
    &acts.get("pd").or_else(|| acts.get("p")).expect("p").0
}

/// Forward of one block from `x`: its output and every activation by role.
pub fn block_forward(
    e: &mut Emitter,
    c: &Ctx,
    x: &Val,
    ws: &BlockWeights,
    rope_tables: Option<&(Val, Val)>,
    seed: u64,
) -> (Val, Acts) {
    let act_dims = c.act_dims();
    let tp_last = c.tokens(&["", "", "tensor"]);
    let mut acts = Acts::new();
    acts.insert("x", (x.clone(), act_dims.clone()));
    let (ln1, q, k, v) = attention_inputs(e, c, x, ws, rope_tables);
    acts.insert("ln1", (ln1, act_dims));
    let ctx = if c.cp > 1 {
        // Ring attention: keeps the softmax's log-sum-exp instead of the
        // probabilities (the backward recomputes them block by block).
        let (o, lse) = super::ring::forward(e, c, &q, &k, &v);
        acts.insert("lse", (lse, super::ring::lse_dims()));
        o
    } else {
        let probs = attention_probs(e, c, &q, &k, seed);
        let ctx = e.dot(applied_probs(&probs), &v, (&[0, 1], &[0, 1]), (&[4], &[2]));
        acts.extend(probs);
        ctx
    };
    let ctx = heads_to_hidden(e, c, &ctx);
    acts.insert("q", (q, c.on_seq(&["", "tensor", "", "", ""], 3)));
    acts.insert("k", (k, c.on_seq(&["", "tensor", "", ""], 2)));
    acts.insert("v", (v, c.on_seq(&["", "tensor", "", ""], 2)));
    acts.insert("ctx", (ctx.clone(), tp_last));
    let y = block_tail(e, c, x, &ctx, ws, seed, &mut acts);
    (y, acts)
}

/// The attention inputs of a block from `x`: the first norm's output (as
/// kept, before its gather) and rotated `q` (`[b, kv, g, s, d]`), `k` and `v`
/// (`[b, kv, s, d]`), split over `tensor` by key/value head.
pub fn attention_inputs(
    e: &mut Emitter,
    c: &Ctx,
    x: &Val,
    ws: &BlockWeights,
    rope_tables: Option<&(Val, Val)>,
) -> (Val, Val, Val, Val) {
    let (ln1, _) = norm(e, c, x);
    let ln1 = e.constrain(&ln1, &c.act_dims());
    let (b, s, kv, g, d) = (c.b, c.s, c.kv, c.g, c.d);
    let (qkv, _) = gathered_mm(
        e,
        c,
        &ln1,
        &ws.mats[0],
        &c.tokens(&["", "", "tensor", "", ""]),
        false,
        mm,
    );
    let qkv = e.transpose(&qkv, &[0, 2, 3, 1, 4]);
    let mut q = e.slice(&qkv, 2, 0, g);
    let k = e.slice(&qkv, 2, g, g + 1);
    let mut k = e.reshape(&k, &[b, kv, s, d]);
    let v = e.slice(&qkv, 2, g + 1, g + 2);
    let v = e.reshape(&v, &[b, kv, s, d]);
    if let Some(t) = rope_tables {
        q = rope(e, &q, t, false);
        k = rope(e, &k, t, false);
    }
    let q = e.constrain(&q, &c.on_seq(&["", "tensor", "", "", ""], 3));
    let k = e.constrain(&k, &c.on_seq(&["", "tensor", "", ""], 2));
    let v = e.constrain(&v, &c.on_seq(&["", "tensor", "", ""], 2));
    (ln1, q, k, v)
}

/// The attention context `[b, kv, g, s, d]` as `[b, s, heads d]`, split over
/// `tensor` by columns (the out projection's row-parallel input).
pub fn heads_to_hidden(e: &mut Emitter, c: &Ctx, ctx: &Val) -> Val {
    let ctx = e.transpose(ctx, &[0, 3, 1, 2, 4]);
    let ctx = e.reshape(&ctx, &[c.b, c.s, c.heads * c.d]);
    e.constrain(&ctx, &c.tokens(&["", "", "tensor"]))
}

/// The rest of a block after the attention core, from its input `x` and the
/// attention context `ctx`: out projection, dropout and residual, second
/// norm, MLP, dropout and residual. The activations it makes go to `acts`.
pub fn block_tail(
    e: &mut Emitter,
    c: &Ctx,
    x: &Val,
    ctx: &Val,
    ws: &BlockWeights,
    seed: u64,
    acts: &mut Acts,
) -> Val {
    let act_dims = c.act_dims();
    let tp_last = c.tokens(&["", "", "tensor"]);
    let o = mm_scattered(e, c, ctx, &tp_last, |e, x| mm(e, x, w(ws, 1)));
    let o = if c.dropout {
        let (keep, od) = dropout(e, &o, seed + 1);
        acts.insert("omask", (keep, act_dims.clone()));
        od
    } else {
        o
    };
    let x1 = e.binary("add", x, &o);
    acts.insert("x1", (x1.clone(), act_dims.clone()));
    let (ln2, _) = norm(e, c, &x1);
    let ln2 = e.constrain(&ln2, &act_dims);
    acts.insert("ln2", (ln2.clone(), act_dims.clone()));
    let m2 = match &c.moe {
        Some(m) => m.forward(e, c, &ln2, &ws.mats[2..], acts),
        None => dense_mlp(e, c, &ln2, ws, acts),
    };
    let m2 = if c.dropout {
        let (keep, md) = dropout(e, &m2, seed + 2);
        acts.insert("mmask", (keep, act_dims.clone()));
        md
    } else {
        m2
    };
    let x2 = e.binary("add", &x1, &m2);
    e.constrain(&x2, &act_dims)
}

/// The dense MLP of a block from the second norm's output `ln2`: its
/// output before dropout (partial sums reduced as `act_dims` says).
fn dense_mlp(e: &mut Emitter, c: &Ctx, ln2: &Val, ws: &BlockWeights, acts: &mut Acts) -> Val {
    let tp_last = c.tokens(&["", "", "tensor"]);
    let (b, s) = (c.b, c.s);
    let h_dims = match c.mlp {
        Mlp::Gelu => tp_last.clone(),
        Mlp::Swiglu => c.tokens(&["", "", "", "tensor"]),
    };
    let (h, _) = gathered_mm(e, c, ln2, &ws.mats[2], &h_dims, false, mm);
    let (h1, gact) = match c.mlp {
        Mlp::Gelu => {
            let h1 = e.constrain(&h, &tp_last);
            let g = gelu(e, &h1);
            (h1, g)
        }
        Mlp::Swiglu => {
            let h = e.constrain(&h, &h_dims);
            let gate = e.slice(&h, 2, 0, 1);
            let h1 = e.reshape(&gate, &[b, s, c.f]);
            let up = e.slice(&h, 2, 1, 2);
            let hu = e.reshape(&up, &[b, s, c.f]);
            let sg = silu(e, &h1);
            let g = e.binary("multiply", &sg, &hu);
            acts.insert("hu", (hu, tp_last.clone()));
            (h1, g)
        }
    };
    let w2 = w(ws, 3);
    acts.insert("h1", (h1, tp_last.clone()));
    acts.insert("gact", (gact.clone(), tp_last.clone()));
    mm_scattered(e, c, &gact, &tp_last, |e, x| mm(e, x, w2))
}

/// GeLU as `x * sigmoid(1.702 x)` (the sigmoid approximation).
fn gelu(e: &mut Emitter, x: &Val) -> Val {
    let t = e.binary_scalar("multiply", x, 1.702);
    let s = e.unary("logistic", &t);
    e.binary("multiply", x, &s)
}

fn gelu_grad(e: &mut Emitter, x: &Val, dy: &Val) -> Val {
    let t = e.binary_scalar("multiply", x, 1.702);
    let s = e.unary("logistic", &t);
    let one = e.splat(1.0, &x.shape.clone(), x.dtype);
    let oms = e.binary("subtract", &one, &s);
    let xs = e.binary("multiply", &t, &oms);
    let xs = e.binary("multiply", &xs, &s);
    let d = e.binary("add", &s, &xs);
    e.binary("multiply", dy, &d)
}

pub(super) fn silu(e: &mut Emitter, x: &Val) -> Val {
    let s = e.unary("logistic", x);
    e.binary("multiply", x, &s)
}

/// `d silu(x) / dx * dy`.
pub(super) fn silu_grad(e: &mut Emitter, x: &Val, dy: &Val) -> Val {
    let s = e.unary("logistic", x);
    let one = e.splat(1.0, &x.shape.clone(), x.dtype);
    let oms = e.binary("subtract", &one, &s);
    let xs = e.binary("multiply", x, &oms);
    let t = e.binary("add", &one, &xs);
    let d = e.binary("multiply", &s, &t);
    e.binary("multiply", dy, &d)
}

/// Recompute what the kept residuals lack: the whole block from `x` (full
/// recomputation) or the attention core from `q` and `k` (selective).
pub fn complete_acts(
    e: &mut Emitter,
    c: &Ctx,
    kept: Acts,
    ws: &BlockWeights,
    rope_tables: Option<&(Val, Val)>,
    seed: u64,
) -> Acts {
    if !kept.contains_key("ln1") {
        // Full recomputation reruns the whole forward, as activation
        // checkpointing does: the barrier keeps what the backward does not
        // read (the block's output and the last matmuls) from being removed.
        let x = kept["x"].0.clone();
        let (y, acts) = block_forward(e, c, &x, ws, rope_tables, seed);
        let roles: Vec<&'static str> = acts.keys().copied().collect();
        let mut vals: Vec<&Val> = vec![&y];
        vals.extend(roles.iter().map(|r| &acts[r].0));
        let through = e.barrier(&vals);
        return roles
            .iter()
            .zip(&through[1..])
            .map(|(r, v)| (*r, (v.clone(), acts[r].1.clone())))
            .collect();
    }
    if kept.contains_key("p") || c.cp > 1 {
        return kept;
    }
    let mut acts = kept;
    let probs = attention_probs(e, c, &acts["q"].0, &acts["k"].0, seed);
    acts.extend(probs);
    acts
}

/// Backward of one block: the input gradient and one gradient per weight
/// (in [`block_weight_shapes`] order).
pub fn block_backward(
    e: &mut Emitter,
    c: &Ctx,
    acts: &Acts,
    ws: &BlockWeights,
    rope_tables: Option<&(Val, Val)>,
    dy: &Val,
) -> (Val, Vec<Val>) {
    let a = |r: &str| acts[r].0.clone();
    let act_dims = c.act_dims();
    let tp_last = c.tokens(&["", "", "tensor"]);
    let (b, s, kv, g, d) = (c.b, c.s, c.kv, c.g, c.d);
    let mut grads: Vec<Option<Val>> = vec![None; ws.mats.len()];
    // MLP.
    let dm = if c.dropout {
        dropout_apply(e, dy, &a("mmask"))
    } else {
        dy.clone()
    };
    // With tensor-parallel overlap (Megatron-Core with Transformer
    // Engine): the output gradient's all-gather overlaps the input-gradient
    // matmul piece by piece; the all-gather of the input a weight gradient
    // reads is issued before the weight gradient before it, and each input
    // gradient's reduce-scatter runs while its weight gradient computes.
    let ahead = c.tp_comm_overlap;
    let dln2 = match &c.moe {
        Some(m) => m.backward(e, c, acts, &ws.mats[2..], &dm, &mut grads[2..]),
        None => dense_mlp_backward(e, c, acts, ws, &dm, &mut grads),
    };
    let dx1n = norm_grad(e, c, &a("x1"), &dln2);
    let dx1 = e.binary("add", dy, &dx1n);
    // Attention.
    let do_ = if c.dropout {
        dropout_apply(e, &dx1, &a("omask"))
    } else {
        dx1.clone()
    };
    let (dctx, dog) = gathered_mm(e, c, &do_, &ws.mats[1], &tp_last, true, mm_dx);
    let dog = dog.expect("kept");
    let ln1_early = ahead.then(|| gathered(e, c, &a("ln1")));
    grads[1] = Some(mm_dw(e, c, &a("ctx"), &dog));
    let dctx = e.reshape(&dctx, &[b, s, kv, g, d]);
    let dctx = e.transpose(&dctx, &[0, 2, 3, 1, 4]);
    let dctx = e.constrain(&dctx, &c.on_seq(&["", "tensor", "", "", ""], 3));
    let (dq, dk, dv) = if c.cp > 1 {
        let o = e.reshape(&a("ctx"), &[b, s, kv, g, d]);
        let o = e.transpose(&o, &[0, 2, 3, 1, 4]);
        let o = e.constrain(&o, &c.on_seq(&["", "tensor", "", "", ""], 3));
        super::ring::backward(e, c, [&a("q"), &a("k"), &a("v"), &o, &a("lse")], &dctx)
    } else {
        core_backward(e, c, acts, &dctx)
    };
    let (mut dq, mut dk) = (dq, dk);
    if let Some(t) = rope_tables {
        dq = rope(e, &dq, t, true);
        dk = rope(e, &dk, t, true);
    }
    let dk = e.reshape(&dk, &[b, kv, 1, s, d]);
    let dv = e.reshape(&dv, &[b, kv, 1, s, d]);
    let dqkv = e.concatenate(&[&dq, &dk, &dv], 2);
    let dqkv = e.transpose(&dqkv, &[0, 3, 1, 2, 4]);
    let dqkv = e.constrain(&dqkv, &c.tokens(&["", "", "tensor", "", ""]));
    let ln1 = ln1_early.unwrap_or_else(|| gathered(e, c, &a("ln1")));
    if !ahead {
        grads[0] = Some(mm_dw(e, c, &ln1, &dqkv));
    }
    let dln1 = mm_dx_all(e, &dqkv, w(ws, 0));
    let dln1 = e.constrain(&dln1, &act_dims);
    if ahead {
        grads[0] = Some(mm_dw(e, c, &ln1, &dqkv));
    }
    let dxn = norm_grad(e, c, &a("x"), &dln1);
    let dx = e.binary("add", &dx1, &dxn);
    let dx = e.constrain(&dx, &act_dims);
    (
        dx,
        grads
            .into_iter()
            .map(|g| g.expect("every weight"))
            .collect(),
    )
}

/// The attention core's backward from the context gradient `dctx`
/// (`[b, kv, g, s, d]`) with the probabilities kept or recomputed: `dq`,
/// `dk`, `dv` before the rotary embedding's inverse.
fn core_backward(e: &mut Emitter, c: &Ctx, acts: &Acts, dctx: &Val) -> (Val, Val, Val) {
    let a = |r: &str| acts[r].0.clone();
    let d = c.d;
    let probs = applied_probs(acts).clone();
    let dpd = e.dot(dctx, &a("v"), (&[0, 1], &[0, 1]), (&[4], &[3]));
    let dv = e.dot(&probs, dctx, (&[0, 1], &[0, 1]), (&[2, 3], &[2, 3]));
    let mut dp = if c.dropout {
        dropout_apply(e, &dpd, &a("pmask"))
    } else {
        dpd
    };
    if c.separate_attention_dropout {
        // Dropout's gradient is a kernel of its own before the fused
        // softmax gradient: it goes to memory.
        dp = kernel_boundary(e, &dp, &["", "tensor", "", "", ""]);
    }
    let p = a("p");
    let t = e.binary("multiply", &dp, &p);
    let r = e.reduce_last_keep("add", &t, 0.0);
    let t = e.binary("subtract", &dp, &r);
    let ds = e.binary("multiply", &t, &p);
    let ds = e.binary_scalar("multiply", &ds, 1.0 / (d as f64).sqrt());
    let dq = e.dot(&ds, &a("k"), (&[0, 1], &[0, 1]), (&[4], &[2]));
    let dk = e.dot(&ds, &a("q"), (&[0, 1], &[0, 1]), (&[2, 3], &[2, 3]));
    (dq, dk, dv)
}

/// The dense MLP's backward from its output gradient `dm`: the gradient of
/// the second norm's output; the MLP weights' gradients go to `grads`.
fn dense_mlp_backward(
    e: &mut Emitter,
    c: &Ctx,
    acts: &Acts,
    ws: &BlockWeights,
    dm: &Val,
    grads: &mut [Option<Val>],
) -> Val {
    let a = |r: &str| acts[r].0.clone();
    let act_dims = c.act_dims();
    let tp_last = c.tokens(&["", "", "tensor"]);
    let (b, s) = (c.b, c.s);
    let ahead = c.tp_comm_overlap;
    let (dg, dmg) = gathered_mm(e, c, dm, &ws.mats[3], &tp_last, true, mm_dx);
    let dmg = dmg.expect("kept");
    let ln2_early = ahead.then(|| gathered(e, c, &a("ln2")));
    grads[3] = Some(mm_dw(e, c, &a("gact"), &dmg));
    let ln2 = ln2_early.unwrap_or_else(|| gathered(e, c, &a("ln2")));
    let dh = match c.mlp {
        Mlp::Gelu => gelu_grad(e, &a("h1"), &dg),
        Mlp::Swiglu => {
            let sg = silu(e, &a("h1"));
            let dhu = e.binary("multiply", &dg, &sg);
            let dsg = e.binary("multiply", &dg, &a("hu"));
            let dgate = silu_grad(e, &a("h1"), &dsg);
            let shape = [b, s, 1, c.f];
            let dgate = e.reshape(&dgate, &shape);
            let dup = e.reshape(&dhu, &shape);
            let dh = e.concatenate(&[&dgate, &dup], 2);
            e.constrain(&dh, &c.tokens(&["", "", "", "tensor"]))
        }
    };
    if !ahead {
        grads[2] = Some(mm_dw(e, c, &ln2, &dh));
    }
    let dln2 = mm_dx_all(e, &dh, w(ws, 2));
    let dln2 = e.constrain(&dln2, &act_dims);
    if ahead {
        grads[2] = Some(mm_dw(e, c, &ln2, &dh));
    }
    dln2
}
