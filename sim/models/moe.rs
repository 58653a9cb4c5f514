//! A mixture-of-experts MLP (Mixtral: top-2 of 8 SwiGLU experts;
//! DeepSeek-MoE: many small experts plus shared ones), forward and backward,
//! in place of a block's dense MLP.
//!
//! Token model (static shapes): tokens are routed in groups of
//! [`MoeCtx::group`] tokens (GShard's groups); each expert takes at most
//! `capacity = ceil(capacity_factor x group x top_k / experts)` tokens of a
//! group, with capacity factor [`CAPACITY_FACTOR`] = 1.0 (Megatron's and
//! GShard's default with dropping): balanced routing fills every slot, and
//! tokens past an expert's capacity are dropped (their MoE output is zero),
//! as GShard drops them. Dispatch and combine are GShard's einsums with a
//! one-hot `[group, token, expert, slot]` mask (a token's slot is the count
//! of earlier tokens of its group sent to the same expert); the gates are
//! the router's softmax probabilities of the chosen experts (DeepSeek-MoE;
//! Mixtral renormalizes them over the top-k, which costs the same). No
//! auxiliary load-balancing loss.
//!
//! Parallelism, as Megatron-Core's all-to-all token dispatcher does it: the
//! router is replicated; with expert parallelism (`ep` replicas of the data
//! axis, a manual mesh axis `expert`, see [`super::emit::Emitter::manual_over`])
//! each replica holds `experts / ep` experts, and the dispatched tokens go
//! to their expert's replica with one all-to-all, the expert outputs come
//! back with another. Inside an expert, Megatron's tensor parallelism (expert
//! TP = TP): the first matrices split by columns, the last by rows; each
//! tensor-parallel rank sends `1 / tp` of the hidden width in the
//! all-to-alls (a local slice before, an all-gather after, as Megatron sends
//! each rank's sequence-parallel share), so each all-to-all moves
//! `tokens x top_k x hidden x bytes x (ep - 1) / ep / tp` per device.
//! Shared experts are one dense SwiGLU MLP (`shared_experts x
//! expert_ffn_hidden` wide) beside the routed ones, tensor-parallel like a
//! dense MLP.

use std::borrow::Cow;

use crate::base::DType;

use super::block::{gathered, mm, mm_dw, mm_dx, mm_dx_all, silu, silu_grad, Acts, Ctx, Sharded};
use super::emit::{Emitter, Val};
use super::spec::ModelSpec;

/// Expert capacity over the balanced share (Megatron's
/// `--moe-expert-capacity-factor 1.0`, GShard's training value is 2.0).
pub const CAPACITY_FACTOR: f64 = 1.0;

/// Tokens routed together at most (GShard's group size).
pub const ROUTING_GROUP: u64 = 1024;

/// Mesh axis of expert parallelism (carved from the data axis).
pub const EXPERT_AXIS: &str = "expert";

/// Indices, among one block's weights, of the routed experts' matrices
/// (split over the `expert` axis; the others are replicated over it).
pub const EXPERT_WEIGHTS: [usize; 2] = [3, 4];

/// The context of layer `layer` (counted from 0) of `model` from its
/// chunk's `c`: without the mixture of experts for the first dense layers.
pub fn layer_ctx<'a>(model: &ModelSpec, c: &'a Ctx, layer: u64) -> Cow<'a, Ctx> {
    if c.moe.is_some() && model.moe_at(layer).is_none() {
        Cow::Owned(Ctx {
            moe: None,
            ..c.clone()
        })
    } else {
        Cow::Borrowed(c)
    }
}

/// Shapes of the mixture of experts of one microbatch on one replica.
#[derive(Debug, Clone, PartialEq)]
pub struct MoeCtx {
    pub experts: u64,
    pub top_k: u64,
    /// Width of one routed expert.
    pub ffn: u64,
    /// Width of the shared experts together (0: none).
    pub shared_ffn: u64,
    /// Expert-parallel replicas.
    pub ep: u64,
    /// Tokens routed together.
    pub group: u64,
    /// Groups of the microbatch.
    pub groups: u64,
    /// Tokens an expert takes from one group.
    pub capacity: u64,
    /// Each token slot reads only its routed expert's weights (gathered by
    /// index, no capacity, nothing dropped) instead of the capacity
    /// dispatch through every expert: decoding a small batch, as serving
    /// engines' fused MoE kernels do (see [`MoeCtx::routed_gather`]).
    pub gather: bool,
}

impl MoeCtx {
    /// The mixture of experts of `model` for `b` sequences of `s` tokens
    /// over `ep` replicas; none for a dense model.
    pub fn new(model: &ModelSpec, b: u64, s: u64, ep: u64) -> Option<MoeCtx> {
        let m = model.moe.as_ref()?;
        let moe = MoeCtx {
            experts: m.experts,
            top_k: m.top_k,
            ffn: m.expert_ffn_hidden,
            shared_ffn: m.shared_experts * m.expert_ffn_hidden,
            ep: ep.max(1),
            group: 1,
            groups: 1,
            capacity: 1,
            gather: false,
        };
        Some(moe.routing(b * s))
    }

    /// The same experts routing `tokens` tokens: groups of at most
    /// [`ROUTING_GROUP`] that divide them, and each expert's capacity in a
    /// group.
    fn routing(&self, tokens: u64) -> MoeCtx {
        let group = gcd(tokens, ROUTING_GROUP);
        let capacity =
            ((CAPACITY_FACTOR * (group * self.top_k) as f64) / self.experts as f64).ceil();
        MoeCtx {
            group,
            groups: tokens / group,
            capacity: (capacity as u64).max(1),
            ..self.clone()
        }
    }

    /// Each context rank's own routing (context parallelism): its tokens
    /// are routed in groups among themselves (`[cp, b s / cp]`), as
    /// Megatron-Core routes each rank's local tokens.
    fn in_context_rank(&self, cp: u64) -> MoeCtx {
        self.routing(self.groups * self.group / cp)
    }

    /// Whether gathering each token slot's expert reads fewer weights than
    /// running every local expert: fewer slots (`tokens x top_k`) than
    /// experts, and all experts local (no expert parallelism).
    pub fn routed_gather(&self) -> bool {
        self.ep == 1 && self.groups * self.group * self.top_k < self.experts
    }

    /// Experts on one replica.
    pub fn local_experts(&self) -> u64 {
        self.experts / self.ep
    }

    /// Token slots one replica dispatches per microbatch (`groups x experts
    /// x capacity`, `tokens x top_k` when balanced).
    pub fn slots(&self) -> u64 {
        self.groups * self.experts * self.capacity
    }

    /// Shapes and shardings (on one replica) of the MLP's weights, after a
    /// block's attention weights: the router `[h, experts]` (replicated),
    /// the experts' fused gate and up `[experts / ep, h, 2, ffn]` and down
    /// `[experts / ep, ffn, h]` matrices, then the shared experts' `[h, 2,
    /// shared]` and `[shared, h]`.
    pub fn weight_shapes(&self, c: &Ctx) -> Vec<(Vec<u64>, Vec<&'static str>)> {
        let el = self.local_experts();
        let mut w = vec![
            (vec![c.h, self.experts], vec!["", ""]),
            (vec![el, c.h, 2, self.ffn], vec!["", "", "", "tensor"]),
            (vec![el, self.ffn, c.h], vec!["", "tensor", ""]),
        ];
        if self.shared_ffn > 0 {
            w.push((vec![c.h, 2, self.shared_ffn], vec!["", "", "tensor"]));
            w.push((vec![self.shared_ffn, c.h], vec!["tensor", ""]));
        }
        w
    }

    /// The one-hot dispatch mask `[groups, group, experts, capacity]` of the
    /// chosen experts `mask` (`[groups, group, experts]`, 0 or 1): a token
    /// takes slot `c` of expert `e` when `c` earlier tokens of its group
    /// chose `e`; past the capacity it is dropped.
    fn dispatch(&self, e: &mut Emitter, mask: &Val, dtype: DType) -> Val {
        let (g, s, x, cap) = (self.groups, self.group, self.experts, self.capacity);
        // Counts in f32: bf16 holds integers exactly only up to 256.
        let m32 = e.convert(mask, DType::F32);
        let row = e.iota(0, &[s, s], DType::I32);
        let col = e.iota(1, &[s, s], DType::I32);
        let before = e.compare("GT", &row, &col);
        let one = e.splat(1.0, &[s, s], DType::F32);
        let zero = e.splat(0.0, &[s, s], DType::F32);
        let tri = e.select(&before, &one, &zero);
        let pos = e.dot(&m32, &tri, (&[], &[]), (&[1], &[1]));
        let pos = e.transpose(&pos, &[0, 2, 1]);
        let shape = [g, s, x, cap];
        let posb = e.broadcast(&pos, &[0, 1, 2], &shape);
        let slot = e.iota(3, &shape, DType::F32);
        let at = e.compare("EQ", &posb, &slot);
        let maskb = e.broadcast(mask, &[0, 1, 2], &shape);
        let zero4 = e.splat(0.0, &shape, dtype);
        e.select(&at, &maskb, &zero4)
    }

    /// Dispatched tokens `[groups, experts, capacity, h]` (replicated over
    /// `tensor`) to the experts' layout `[local experts, groups x ep,
    /// capacity, h]`, whole: with expert parallelism one all-to-all over the
    /// `expert` axis, each tensor-parallel rank sending its slice of `h`.
    fn to_experts(&self, e: &mut Emitter, c: &Ctx, x: &Val) -> Val {
        let whole = ["", "", "", ""];
        if self.ep == 1 {
            let t = e.transpose(x, &[1, 0, 2, 3]);
            return e.constrain(&t, &whole);
        }
        let split = c.tp > 1 && c.h % c.tp == 0;
        let x = if split {
            e.constrain(x, &["", "", "", "tensor"])
        } else {
            x.clone()
        };
        let a = e.all_to_all(&x, EXPERT_AXIS, 1, 0);
        let t = e.transpose(&a, &[1, 0, 2, 3]);
        e.constrain(&t, &whole)
    }

    /// Expert outputs `[local experts, groups x ep, capacity, h]` (partial
    /// sums over `tensor`) back to each token's replica as `[groups,
    /// experts, capacity, h]`, reduce-scattered over `tensor` along `h`.
    fn back_from_experts(&self, e: &mut Emitter, c: &Ctx, y: &Val) -> Val {
        let split = ["", "", "", "tensor"];
        let y = if c.h % c.tp == 0 {
            e.constrain(y, &split)
        } else {
            e.constrain(y, &["", "", "", ""])
        };
        let t = e.transpose(&y, &[1, 0, 2, 3]);
        if self.ep == 1 {
            return t;
        }
        e.all_to_all(&t, EXPERT_AXIS, 0, 1)
    }

    /// The output sharding of [`MoeCtx::back_from_experts`].
    fn hidden_dims(&self, c: &Ctx) -> [&'static str; 4] {
        if c.h % c.tp == 0 {
            ["", "", "", "tensor"]
        } else {
            ["", "", "", ""]
        }
    }

    /// Forward from the second norm's output `ln2`; `ws` are the MLP's
    /// weights ([`MoeCtx::weight_shapes`]). Returns the output with the
    /// residual stream's sharding; activations go to `acts`.
    pub fn forward(
        &self,
        e: &mut Emitter,
        c: &Ctx,
        ln2: &Val,
        ws: &[Sharded],
        acts: &mut Acts,
    ) -> Val {
        if self.gather {
            return self.forward_gathered(e, c, ln2, ws);
        }
        if c.cp > 1 {
            return self.forward_in_context(e, c, ln2, ws, acts);
        }
        let (g, s, x) = (self.groups, self.group, self.experts);
        let rep3 = vec!["", "", ""];
        let xg = gathered(e, c, ln2);
        // Router.
        let logits = mm(e, &xg, &ws[0].0);
        let logits = e.constrain(&logits, &rep3);
        let probs = softmax(e, &logits);
        acts.insert("rprobs", (probs.clone(), rep3.clone()));
        let pg = e.reshape(&probs, &[g, s, x]);
        // Top-k: the largest remaining probability, k times.
        let one = e.splat(1.0, &[g, s, x], c.dtype);
        let gone = e.splat(-1.0, &[g, s, x], c.dtype);
        let mut mask = e.splat(0.0, &[g, s, x], c.dtype);
        let mut rest = pg.clone();
        for _ in 0..self.top_k {
            let mx = e.reduce_last_keep("maximum", &rest, f64::NEG_INFINITY);
            let pick = e.compare("EQ", &rest, &mx);
            mask = e.select(&pick, &one, &mask);
            rest = e.select(&pick, &gone, &rest);
        }
        acts.insert("rmask", (mask.clone(), rep3.clone()));
        let disp = self.dispatch(e, &mask, c.dtype);
        acts.insert("disp", (disp.clone(), vec!["", "", "", ""]));
        // Dispatch, experts, combine.
        let xt = e.reshape(&xg, &[g, s, c.h]);
        let xin = e.dot(&disp, &xt, (&[0], &[0]), (&[1], &[1]));
        let xe = self.to_experts(e, c, &xin);
        acts.insert("xe", (xe.clone(), vec!["", "", "", ""]));
        let h = e.dot(&xe, &ws[1].0, (&[0], &[0]), (&[3], &[1]));
        let h = e.constrain(&h, &["", "", "", "", "tensor"]);
        let (eh1, ehu, gact) = swiglu_parts(e, &h, 3);
        let f_dims = vec!["", "", "", "tensor"];
        acts.insert("eh1", (eh1, f_dims.clone()));
        acts.insert("ehu", (ehu, f_dims.clone()));
        acts.insert("egact", (gact.clone(), f_dims));
        let ye = e.dot(&gact, &ws[2].0, (&[0], &[0]), (&[3], &[1]));
        let ye = self.back_from_experts(e, c, &ye);
        let hd = self.hidden_dims(c);
        acts.insert("ye", (ye.clone(), hd.to_vec()));
        let comb = combine_weights(e, &pg, &mask, &disp);
        let out = e.dot(&comb, &ye, (&[0], &[0]), (&[2, 3], &[1, 2]));
        let out = e.constrain(&out, &hd[1..]);
        let mut out = e.reshape(&out, &c.act());
        // Shared experts: a dense SwiGLU MLP.
        if self.shared_ffn > 0 {
            let hs = mm(e, &xg, &ws[3].0);
            let hs = e.constrain(&hs, &["", "", "", "tensor"]);
            let (sh1, shu, sg) = swiglu_parts(e, &hs, 2);
            let tp_last = vec!["", "", "tensor"];
            acts.insert("sh1", (sh1, tp_last.clone()));
            acts.insert("shu", (shu, tp_last.clone()));
            acts.insert("sgact", (sg.clone(), tp_last));
            let ys = mm(e, &sg, &ws[4].0);
            let ys = e.constrain(&ys, &hd[1..]);
            out = e.constrain(&out, &hd[1..]);
            out = e.binary("add", &out, &ys);
        }
        e.constrain(&out, &c.act_dims())
    }

    /// Forward with each token slot's expert gathered (inference only, no
    /// activations kept): the router's top-k as expert indices, the chosen
    /// experts' matrices picked by index (`[tokens x top_k, ...]`: only the
    /// routed experts' weights are read, the gather runs inside the matmul
    /// that consumes it, see `exec::timed::fusion`), one SwiGLU per slot,
    /// the outputs weighted by the gates and summed per token. Same values
    /// as the capacity dispatch when nothing is dropped.
    fn forward_gathered(&self, e: &mut Emitter, c: &Ctx, ln2: &Val, ws: &[Sharded]) -> Val {
        let (t, x, k) = (self.groups * self.group, self.experts, self.top_k);
        let xg = gathered(e, c, ln2);
        let logits = mm(e, &xg, &ws[0].0);
        let logits = e.constrain(&logits, &["", "", ""]);
        let probs = softmax(e, &logits);
        let mut rest = e.reshape(&probs, &[t, x]);
        // Top-k: the largest remaining probability (the gate) and the
        // lowest expert index holding it, k times.
        let iota = e.iota(1, &[t, x], DType::F32);
        let none = e.splat(x as f64, &[t, x], DType::F32);
        let gone = e.splat(-1.0, &[t, x], c.dtype);
        let (mut ids, mut gates) = (Vec::new(), Vec::new());
        for _ in 0..k {
            let mx = e.reduce("maximum", &rest, f64::NEG_INFINITY, &[1]);
            let mxb = e.broadcast(&mx, &[0], &[t, x]);
            let pick = e.compare("EQ", &rest, &mxb);
            let at = e.select(&pick, &iota, &none);
            let id = e.reduce("minimum", &at, x as f64, &[1]);
            ids.push(e.reshape(&id, &[t, 1]));
            gates.push(e.reshape(&mx, &[t, 1]));
            rest = e.select(&pick, &gone, &rest);
        }
        let ids = e.concatenate(&ids.iter().collect::<Vec<_>>(), 1);
        let ids = e.convert(&ids, DType::I32);
        let ids = e.reshape(&ids, &[t * k, 1]);
        let gates = e.concatenate(&gates.iter().collect::<Vec<_>>(), 1);
        // Each slot's token and its expert's matrices.
        let xt = e.reshape(&xg, &[t, c.h]);
        let xs = e.broadcast(&xt, &[0, 2], &[t, k, c.h]);
        let xs = e.reshape(&xs, &[t * k, c.h]);
        let w1 = e.take_slices(&ws[1].0, &ids);
        let w1 = e.constrain(&w1, &["", "", "", "tensor"]);
        let h = e.dot(&xs, &w1, (&[0], &[0]), (&[1], &[1]));
        let h = e.constrain(&h, &["", "", "tensor"]);
        let (_, _, gact) = swiglu_parts(e, &h, 1);
        let w2 = e.take_slices(&ws[2].0, &ids);
        let w2 = e.constrain(&w2, &["", "tensor", ""]);
        let ye = e.dot(&gact, &w2, (&[0], &[0]), (&[1], &[1]));
        let hd = self.hidden_dims(c);
        let ye = e.constrain(&ye, &hd[2..]);
        let ye = e.reshape(&ye, &[t, k, c.h]);
        let ye = e.constrain(&ye, &hd[1..]);
        let gb = e.broadcast(&gates, &[0, 1], &[t, k, c.h]);
        let yg = e.binary("multiply", &ye, &gb);
        let out = e.reduce("add", &yg, 0.0, &[1]);
        let out = e.constrain(&out, &hd[2..]);
        let mut out = e.reshape(&out, &c.act());
        if self.shared_ffn > 0 {
            let hs = mm(e, &xg, &ws[3].0);
            let hs = e.constrain(&hs, &["", "", "", "tensor"]);
            let (_, _, sg) = swiglu_parts(e, &hs, 2);
            let ys = mm(e, &sg, &ws[4].0);
            let ys = e.constrain(&ys, &hd[1..]);
            out = e.constrain(&out, &hd[1..]);
            out = e.binary("add", &out, &ys);
        }
        e.constrain(&out, &c.act_dims())
    }

    /// Backward from the output gradient `dm`: the gradient of the second
    /// norm's output; the MLP weights' gradients go to `grads` (in
    /// [`MoeCtx::weight_shapes`] order).
    pub fn backward(
        &self,
        e: &mut Emitter,
        c: &Ctx,
        acts: &Acts,
        ws: &[Sharded],
        dm: &Val,
        grads: &mut [Option<Val>],
    ) -> Val {
        if c.cp > 1 {
            return self.backward_in_context(e, c, acts, ws, dm, grads);
        }
        let a = |r: &str| acts[r].0.clone();
        let (g, s, x) = (self.groups, self.group, self.experts);
        let act_dims = c.act_dims();
        let hd = self.hidden_dims(c);
        let rep3 = ["", "", ""];
        let xg = gathered(e, c, &a("ln2"));
        let probs = a("rprobs");
        let pg = e.reshape(&probs, &[g, s, x]);
        let (mask, disp) = (a("rmask"), a("disp"));
        // Combine.
        let dmh = e.constrain(dm, &hd[1..]);
        let dmg = e.reshape(&dmh, &[g, s, c.h]);
        let dmg = e.constrain(&dmg, &hd[1..]);
        let comb = combine_weights(e, &pg, &mask, &disp);
        let dye = e.dot(&comb, &dmg, (&[0], &[0]), (&[1], &[1]));
        let dye = e.constrain(&dye, &hd);
        let dcomb = e.dot(&dmg, &a("ye"), (&[0], &[0]), (&[2], &[3]));
        let t = e.binary("multiply", &dcomb, &disp);
        let dgates = e.reduce("add", &t, 0.0, &[3]);
        let dgates = e.constrain(&dgates, &rep3);
        // Router: gates are the chosen probabilities.
        let dp = e.binary("multiply", &dgates, &mask);
        let dp = e.reshape(&dp, &[c.b, c.s, x]);
        let t = e.binary("multiply", &dp, &probs);
        let r = e.reduce_last_keep("add", &t, 0.0);
        let t = e.binary("subtract", &dp, &r);
        let dl = e.binary("multiply", &t, &probs);
        grads[0] = Some(mm_dw(e, c, &xg, &dl));
        let dx_router = mm_dx(e, &dl, &ws[0].0);
        let dx_router = e.constrain(&dx_router, &act_dims);
        // Experts.
        let dy = self.to_experts(e, c, &dye);
        grads[2] = Some(e.dot(&a("egact"), &dy, (&[0], &[0]), (&[1, 2], &[1, 2])));
        let dg = e.dot(&dy, &ws[2].0, (&[0], &[0]), (&[3], &[2]));
        let dg = e.constrain(&dg, &["", "", "", "tensor"]);
        let dh = swiglu_grad(e, &a("eh1"), &a("ehu"), &dg, 3);
        grads[1] = Some(e.dot(&a("xe"), &dh, (&[0], &[0]), (&[1, 2], &[1, 2])));
        let dxe = e.dot(&dh, &ws[1].0, (&[0], &[0]), (&[3, 4], &[2, 3]));
        let dxin = self.back_from_experts(e, c, &dxe);
        let dxg = e.dot(&disp, &dxin, (&[0], &[0]), (&[2, 3], &[1, 2]));
        let dxg = e.constrain(&dxg, &hd[1..]);
        let dxg = e.reshape(&dxg, &c.act());
        let dxg = e.constrain(&dxg, &act_dims);
        let mut dln2 = e.binary("add", &dx_router, &dxg);
        // Shared experts.
        if self.shared_ffn > 0 {
            let dmw = gathered(e, c, dm);
            let dgs = mm_dx(e, &dmw, &ws[4].0);
            let dgs = e.constrain(&dgs, &["", "", "tensor"]);
            grads[4] = Some(mm_dw(e, c, &a("sgact"), &dmw));
            let dhs = swiglu_grad(e, &a("sh1"), &a("shu"), &dgs, 2);
            grads[3] = Some(mm_dw(e, c, &xg, &dhs));
            let dxs = mm_dx_all(e, &dhs, &ws[3].0);
            let dxs = e.constrain(&dxs, &act_dims);
            dln2 = e.binary("add", &dln2, &dxs);
        }
        e.constrain(&dln2, &act_dims)
    }
}

/// Context parallelism: each context rank routes its own tokens through
/// every expert (a computation manual over `context`, partitioned over
/// `tensor` inside); the activations leave it split over `context` along
/// their token (or routing-group) dimension, and the weight gradients as
/// each rank's partial sums stacked on a leading `context` dimension, as
/// [`super::block::mm_dw`] gives a dense layer's.
impl MoeCtx {
    /// The context of one context rank: its share of the sequence, no
    /// context axis, its own routing.
    fn rank_ctx(&self, c: &Ctx) -> (Ctx, MoeCtx) {
        let m = self.in_context_rank(c.cp);
        let inner = Ctx {
            s: c.s / c.cp,
            cp: 1,
            moe: Some(m.clone()),
            ..c.clone()
        };
        (inner, m)
    }

    fn forward_in_context(
        &self,
        e: &mut Emitter,
        c: &Ctx,
        ln2: &Val,
        ws: &[Sharded],
        acts: &mut Acts,
    ) -> Val {
        let (inner, m) = self.rank_ctx(c);
        let mut operands: Vec<(&Val, Vec<&str>)> = vec![(ln2, c.act_dims())];
        operands.extend(ws.iter().map(|(w, d)| (w, d.clone())));
        let scope = e.manual_begin_over(&[CONTEXT.to_string()], &operands);
        let args = scope.args.clone();
        let ws_in: Vec<Sharded> = ws
            .iter()
            .zip(&args[1..])
            .map(|((_, d), a)| (a.clone(), d.clone()))
            .collect();
        let mut local = Acts::new();
        let out = m.forward(e, &inner, &args[0], &ws_in, &mut local);
        let mut results: Vec<(&Val, Vec<&str>)> = vec![(&out, c.act_dims())];
        let kept: Vec<(&'static str, Vec<&'static str>)> = local
            .iter()
            .map(|(r, (_, d))| (*r, with_context(d, token_dim(r))))
            .collect();
        results.extend(
            local
                .values()
                .zip(&kept)
                .map(|((v, _), (_, d))| (v, d.clone())),
        );
        let outs = e.manual_end(scope, &results);
        for ((r, d), v) in kept.into_iter().zip(&outs[1..]) {
            acts.insert(r, (v.clone(), d));
        }
        e.constrain(&outs[0], &c.act_dims())
    }

    fn backward_in_context(
        &self,
        e: &mut Emitter,
        c: &Ctx,
        acts: &Acts,
        ws: &[Sharded],
        dm: &Val,
        grads: &mut [Option<Val>],
    ) -> Val {
        let (inner, m) = self.rank_ctx(c);
        // The activations the backward reads: the norm's output and the
        // mixture's own.
        let roles: Vec<&'static str> = std::iter::once("ln2")
            .chain(MOE_ROLES.iter().copied())
            .filter(|r| acts.contains_key(r))
            .collect();
        let mut operands: Vec<(&Val, Vec<&str>)> = vec![(dm, c.act_dims())];
        operands.extend(roles.iter().map(|r| (&acts[r].0, acts[r].1.clone())));
        operands.extend(ws.iter().map(|(w, d)| (w, d.clone())));
        let scope = e.manual_begin_over(&[CONTEXT.to_string()], &operands);
        let args = scope.args.clone();
        let local: Acts = roles
            .iter()
            .zip(&args[1..])
            .map(|(r, a)| (*r, (a.clone(), without_context(&acts[r].1))))
            .collect();
        let ws_in: Vec<Sharded> = ws
            .iter()
            .zip(&args[1 + roles.len()..])
            .map(|((_, d), a)| (a.clone(), d.clone()))
            .collect();
        let mut local_grads: Vec<Option<Val>> = vec![None; ws.len()];
        let dln2 = m.backward(e, &inner, &local, &ws_in, &args[0], &mut local_grads);
        // Each rank's weight gradients, `[1, ...]` inside: `[cp, ...]`.
        let stacked: Vec<Sharded> = local_grads
            .into_iter()
            .zip(ws)
            .map(|(g, (_, d))| {
                let g = g.expect("every expert weight has a gradient");
                let mut shape = vec![1];
                shape.extend_from_slice(&g.shape);
                let g = e.reshape(&g, &shape);
                let mut dims = vec![CONTEXT];
                dims.extend_from_slice(d);
                (g, dims)
            })
            .collect();
        let mut results: Vec<(&Val, Vec<&str>)> = vec![(&dln2, c.act_dims())];
        results.extend(stacked.iter().map(|(g, d)| (g, d.clone())));
        let outs = e.manual_end(scope, &results);
        for (slot, g) in grads.iter_mut().zip(&outs[1..]) {
            *slot = Some(g.clone());
        }
        e.constrain(&outs[0], &c.act_dims())
    }
}

/// The context-parallel mesh axis.
const CONTEXT: &str = "context";

/// The activation roles of the mixture of experts (what its backward reads
/// besides the norm's output).
const MOE_ROLES: [&str; 11] = [
    "rprobs", "rmask", "disp", "xe", "eh1", "ehu", "egact", "ye", "sh1", "shu", "sgact",
];

/// The dimension of a mixture-of-experts activation that holds its tokens
/// (or their routing groups), split over `context` outside a rank:
/// `[b, s, ...]` values on the sequence, the dispatch masks and expert
/// outputs `[groups, ...]` on their groups, the experts' inputs and
/// intermediates `[local experts, groups, ...]` on their groups.
fn token_dim(role: &str) -> usize {
    match role {
        "rmask" | "disp" | "ye" => 0,
        _ => 1,
    }
}

/// `dims` with `context` added (major) on dimension `at`.
fn with_context(dims: &[&'static str], at: usize) -> Vec<&'static str> {
    let mut d = dims.to_vec();
    d[at] = match d[at] {
        "" => CONTEXT,
        "tensor" => "context,tensor",
        other => panic!("a mixture-of-experts activation split over {other}"),
    };
    d
}

/// `dims` without `context`: what one context rank sees.
fn without_context(dims: &[&'static str]) -> Vec<&'static str> {
    dims.iter()
        .map(|d| match *d {
            "context" => "",
            "context,tensor" => "tensor",
            other => other,
        })
        .collect()
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Softmax over the last dimension.
fn softmax(e: &mut Emitter, x: &Val) -> Val {
    let mx = e.reduce_last_keep("maximum", x, f64::NEG_INFINITY);
    let z = e.binary("subtract", x, &mx);
    let ez = e.unary("exponential", &z);
    let se = e.reduce_last_keep("add", &ez, 0.0);
    e.binary("divide", &ez, &se)
}

/// The combine weights `[groups, group, experts, capacity]`: each slot's
/// gate (the chosen expert's probability).
fn combine_weights(e: &mut Emitter, pg: &Val, mask: &Val, disp: &Val) -> Val {
    let gates = e.binary("multiply", pg, mask);
    let gb = e.broadcast(&gates, &[0, 1, 2], &disp.shape.clone());
    e.binary("multiply", disp, &gb)
}

/// Gate, up and `silu(gate) * up` of a fused `[..., 2, f]` projection `h`
/// whose pair dimension is `dim`.
fn swiglu_parts(e: &mut Emitter, h: &Val, dim: usize) -> (Val, Val, Val) {
    let mut shape = h.shape.clone();
    shape.remove(dim);
    let gate = e.slice(h, dim, 0, 1);
    let h1 = e.reshape(&gate, &shape);
    let up = e.slice(h, dim, 1, 2);
    let hu = e.reshape(&up, &shape);
    let sg = silu(e, &h1);
    let g = e.binary("multiply", &sg, &hu);
    (h1, hu, g)
}

/// The gradient of the fused projection `[..., 2, f]` (pair dimension
/// `dim`) from the gradient `dg` of `silu(h1) * hu`, split over `tensor`
/// along `f`.
fn swiglu_grad(e: &mut Emitter, h1: &Val, hu: &Val, dg: &Val, dim: usize) -> Val {
    let sg = silu(e, h1);
    let dhu = e.binary("multiply", dg, &sg);
    let dsg = e.binary("multiply", dg, hu);
    let dgate = silu_grad(e, h1, &dsg);
    let mut shape = h1.shape.clone();
    shape.insert(dim, 1);
    let dgate = e.reshape(&dgate, &shape);
    let dup = e.reshape(&dhu, &shape);
    let dh = e.concatenate(&[&dgate, &dup], dim);
    let mut dims = vec![""; dh.shape.len()];
    let last = dims.len() - 1;
    dims[last] = "tensor";
    e.constrain(&dh, &dims)
}
