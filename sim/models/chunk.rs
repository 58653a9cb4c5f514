//! The programs of one model chunk (a pipeline stage's layers, or one of its
//! virtual stages) for one microbatch: the forward program returns the
//! chunk's output and the activations its backward keeps (per the
//! recomputation mode); the backward program takes them back with the output
//! gradient and accumulates the weight gradients. The first chunk embeds
//! tokens (vocabulary-parallel lookup), the last applies the final norm, the
//! output projection and the cross-entropy loss.

use crate::base::DType;

use super::block::{
    block_backward, block_forward, block_weight_args, complete_acts, kernel_boundary, norm,
    norm_grad, Acts, Ctx, Sharded, CORE_ROLES, ROLES,
};
use super::emit::{Emitter, Val};
use super::moe::{layer_ctx, EXPERT_AXIS, EXPERT_WEIGHTS};
use super::spec::ModelSpec;
use super::strategy::{Recompute, Strategy};
use super::ModelError;

/// Which layers a chunk holds and whether it embeds or ends in the loss.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ChunkKind {
    pub layers: u64,
    /// Index of the chunk's first layer (seeds its dropout masks).
    pub first_layer: u64,
    pub embed: bool,
    pub head: bool,
}

/// Which activation roles a recomputation mode keeps.
fn kept_roles(strategy: &Strategy) -> Vec<&'static str> {
    match strategy.recompute {
        Recompute::Full => vec!["x"],
        Recompute::Selective => ROLES
            .iter()
            .copied()
            .filter(|r| !CORE_ROLES.contains(r))
            .collect(),
        Recompute::None if strategy.flash_attention => ROLES
            .iter()
            .copied()
            .filter(|r| !CORE_ROLES.contains(r))
            .collect(),
        Recompute::None => ROLES.to_vec(),
    }
}

/// The mesh of a chunk program: `data` (size `data`) x `context` (with
/// context parallelism) x `tensor`, tensor ranks fastest as Megatron-LM
/// orders them; with expert parallelism `expert` x `tensor`, the program one
/// replica's, manual over `expert` (the replicas exchange tokens by
/// all-to-all, see [`super::moe`]).
fn emitter(strategy: &Strategy, data: u64) -> Emitter {
    if strategy.ep > 1 {
        let mut e = Emitter::new(&[(EXPERT_AXIS, strategy.ep), ("tensor", strategy.tp)]);
        e.manual_over(EXPERT_AXIS);
        return e;
    }
    if strategy.cp > 1 {
        Emitter::new(&[
            ("data", data),
            ("context", strategy.cp),
            ("tensor", strategy.tp),
        ])
    } else {
        Emitter::new(&[("data", data), ("tensor", strategy.tp)])
    }
}

/// The gradient accumulator of a weight (shape and sharding): the weight's
/// own, or with context parallelism one per context rank stacked on a
/// leading `context` dimension (each rank's partial sum, reduced with the
/// data-parallel replicas').
pub fn grad_accumulator(
    strategy: &Strategy,
    shape: &[u64],
    dims: &[&'static str],
) -> (Vec<u64>, Vec<&'static str>) {
    if strategy.cp == 1 {
        return (shape.to_vec(), dims.to_vec());
    }
    let mut s = vec![strategy.cp];
    s.extend_from_slice(shape);
    let mut d = vec!["context"];
    d.extend_from_slice(dims);
    (s, d)
}

/// The arguments every chunk program takes, in order: the input (tokens, or
/// activations), labels for the head, each layer's weights, the embedding
/// table(s) and the RoPE tables.
struct ChunkArgs {
    /// Tokens (first chunk) or activations; none for a backward program
    /// that does not embed.
    input: Option<Val>,
    labels: Option<Val>,
    layers: Vec<super::block::BlockWeights>,
    /// Embedding (first chunk) and output projection (last chunk); tied
    /// (one table) for models without RoPE when the chunk has both.
    embed_table: Option<Sharded>,
    head_table: Option<Sharded>,
    positions: Option<Val>,
    rope: Option<(Val, Val)>,
}

fn chunk_args(
    e: &mut Emitter,
    model: &ModelSpec,
    c: &Ctx,
    kind: ChunkKind,
    forward: bool,
) -> ChunkArgs {
    let tokens = c.tokens(&["", ""]);
    let input = if kind.embed {
        Some(e.arg(&[c.b, c.s], DType::I32, &tokens))
    } else {
        forward.then(|| e.arg(&c.act(), c.dtype, &c.act_dims()))
    };
    let labels = kind.head.then(|| e.arg(&[c.b, c.s], DType::I32, &tokens));
    let layers = (0..kind.layers)
        .map(|l| block_weight_args(e, &layer_ctx(model, c, kind.first_layer + l)))
        .collect();
    let table = |e: &mut Emitter| {
        let dims = vec!["tensor", ""];
        (e.arg(&[c.vocab, c.h], c.dtype, &dims), dims)
    };
    let embed_table = kind.embed.then(|| table(e));
    let head_table = if kind.head && (model.rope || !kind.embed) {
        Some(table(e))
    } else {
        None
    };
    let positions = (kind.embed && !model.rope).then(|| e.arg(&[c.s, c.h], c.dtype, &["", ""]));
    let rope = model.rope.then(|| {
        (
            e.arg(&[c.s, c.d], c.dtype, &[c.seq(), ""]),
            e.arg(&[c.s, c.d], c.dtype, &[c.seq(), ""]),
        )
    });
    ChunkArgs {
        input,
        labels,
        layers,
        embed_table,
        head_table,
        positions,
        rope,
    }
}

impl ChunkArgs {
    /// The table the head projects with (the embedding when tied).
    fn head(&self) -> &Sharded {
        self.head_table
            .as_ref()
            .or(self.embed_table.as_ref())
            .expect("a head chunk has a table")
    }

    /// Every weight with its sharding, in argument order.
    /// Index, among [`ChunkArgs::weights`], of layer `l`'s first weight
    /// (layers differ in their weights when the first are dense).
    fn layer_offset(&self, l: usize) -> usize {
        self.layers[..l].iter().map(|w| w.mats.len()).sum()
    }

    fn weights(&self) -> Vec<Sharded> {
        let mut w: Vec<Sharded> = self.layers.iter().flat_map(|l| l.mats.clone()).collect();
        w.extend(self.embed_table.clone());
        w.extend(self.head_table.clone());
        w.extend(self.positions.clone().map(|p| (p, vec!["", ""])));
        w
    }
}

fn seed_of(kind: ChunkKind, layer: u64) -> u64 {
    1000 * (kind.first_layer + layer + 1)
}

/// Embedding of `tokens` (`[b, s]`): table rows plus learned positions.
fn embed(e: &mut Emitter, c: &Ctx, args: &ChunkArgs, tokens: &Val) -> Val {
    let ids = e.reshape(tokens, &[c.b, c.s, 1]);
    let table = &args.embed_table.as_ref().expect("embedding table").0;
    let x = e.take_rows(table, &ids);
    let x = match &args.positions {
        Some(p) => {
            let pb = e.broadcast(p, &[1, 2], &c.act());
            e.binary("add", &x, &pb)
        }
        None => x,
    };
    e.constrain(&x, &c.act_dims())
}

/// The head's forward from the last block's output: the mean cross-entropy
/// and what its backward keeps (the final norm's input and output and the
/// softmax of the logits).
fn head_forward(e: &mut Emitter, c: &Ctx, args: &ChunkArgs, x: &Val) -> (Val, Vec<Sharded>) {
    let (xf, _) = norm(e, c, x);
    let xf = e.constrain(&xf, &c.act_dims());
    let xg = super::block::gathered(e, c, &xf);
    let table = &args.head().0;
    let logits = e.dot(&xg, table, (&[], &[]), (&[2], &[1]));
    let vdims = c.tokens(&["", "", "tensor"]);
    let logits = e.constrain(&logits, &vdims);
    let logits = if c.unfused_cross_entropy {
        // Megatron-LM's vocab-parallel cross-entropy: the matmul writes the
        // logits, `.float()` copies them to fp32, and max, subtract, exp,
        // sum and divide each run as a PyTorch kernel of their own.
        let l = kernel_boundary(e, &logits, &vdims);
        let l = e.convert(&l, DType::F32);
        kernel_boundary(e, &l, &vdims)
    } else {
        logits
    };
    let onehot = onehot(e, c, args);
    let (probs, total) = if c.unfused_cross_entropy {
        // Each step a kernel: a reduction's result ([b, s]) goes to memory
        // before the next kernel broadcasts it.
        let tdims = &vdims[..2];
        let reduce = |e: &mut Emitter, op: &str, x: &Val, init: f64| {
            let r = e.reduce(op, x, init, &[2]);
            kernel_boundary(e, &r, tdims)
        };
        let m = reduce(e, "maximum", &logits, f64::NEG_INFINITY);
        // The target's logit (Megatron gathers it by index, a read per
        // token): a masked sum over the vocabulary beside the max.
        let zero = e.splat(0.0, &logits.shape.clone(), logits.dtype);
        let hit = e.select(&onehot, &logits, &zero);
        let hit = e.reduce("add", &hit, 0.0, &[2]);
        let mx = e.broadcast(&m, &[0, 1], &logits.shape.clone());
        let z = e.binary("subtract", &logits, &mx);
        let z = kernel_boundary(e, &z, &vdims);
        let ez = e.unary("exponential", &z);
        let ez = kernel_boundary(e, &ez, &vdims);
        let sum = reduce(e, "add", &ez, 0.0);
        let se = e.broadcast(&sum, &[0, 1], &ez.shape.clone());
        let probs = e.binary("divide", &ez, &se);
        let probs = kernel_boundary(e, &probs, &vdims);
        // Per token: log(sum exp(z)) - z[target], z = logits - max.
        let lse = e.unary("log", &sum);
        let picked = e.binary("subtract", &hit, &m);
        let per_tok = e.binary("subtract", &lse, &picked);
        (probs, e.reduce("add", &per_tok, 0.0, &[0, 1]))
    } else {
        let mx = e.reduce_last_keep("maximum", &logits, f64::NEG_INFINITY);
        let z = e.binary("subtract", &logits, &mx);
        let ez = e.unary("exponential", &z);
        // One sum per token ([b, s]): its log enters the loss once per
        // token, the broadcast only the division.
        let sum = e.reduce("add", &ez, 0.0, &[2]);
        let se = e.broadcast(&sum, &[0, 1], &ez.shape.clone());
        let probs = e.binary("divide", &ez, &se);
        let lse = e.unary("log", &sum);
        let zero = e.splat(0.0, &z.shape.clone(), c.dtype);
        let picked = e.select(&onehot, &z, &zero);
        let picked = e.reduce("add", &picked, 0.0, &[2]);
        let per_tok = e.binary("subtract", &lse, &picked);
        (probs, e.reduce("add", &per_tok, 0.0, &[0, 1]))
    };
    let loss = e.binary_scalar("multiply", &total, 1.0 / (c.b * c.s) as f64);
    let kept = vec![
        (x.clone(), c.act_dims()),
        (xf, c.act_dims()),
        (probs, vdims),
    ];
    (loss, kept)
}

/// `labels[b, s] == v` as `[b, s, vocab]`.
fn onehot(e: &mut Emitter, c: &Ctx, args: &ChunkArgs) -> Val {
    let shape = [c.b, c.s, c.vocab];
    let labels = args.labels.as_ref().expect("a head chunk has labels");
    let lb = e.broadcast(labels, &[0, 1], &shape);
    let iv = e.iota(2, &shape, DType::I32);
    e.compare("EQ", &lb, &iv)
}

/// The forward program of a chunk and the shapes of what it keeps.
pub fn forward_program(model: &ModelSpec, strategy: &Strategy, kind: ChunkKind) -> String {
    let c = Ctx::new(model, strategy);
    let mut e = emitter(strategy, 1);
    let args = chunk_args(&mut e, model, &c, kind, true);
    let input = args.input.clone().expect("a forward program has an input");
    let mut x = if kind.embed {
        embed(&mut e, &c, &args, &input)
    } else {
        input
    };
    let keep = kept_roles(strategy);
    let mut results: Vec<Sharded> = Vec::new();
    let mut kept: Vec<Sharded> = Vec::new();
    for (l, ws) in args.layers.iter().enumerate() {
        let (y, acts) = block_forward(
            &mut e,
            &layer_ctx(model, &c, kind.first_layer + l as u64),
            &x,
            ws,
            args.rope.as_ref(),
            seed_of(kind, l as u64),
        );
        kept.extend(select_roles(&acts, &keep).into_iter().map(|(_, v)| v));
        x = y;
    }
    if kind.head {
        let (loss, head_kept) = head_forward(&mut e, &c, &args, &x);
        results.push((loss, vec![]));
        kept.extend(head_kept);
    } else {
        results.push((x, c.act_dims()));
    }
    results.extend(kept);
    finish(e, "chunk_forward", &results)
}

/// The activations of `acts` the recompute mode keeps, in [`ROLES`] order
/// (a block has masks only with dropout, `hu` only with SwiGLU).
fn select_roles(acts: &Acts, keep: &[&'static str]) -> Vec<(&'static str, Sharded)> {
    ROLES
        .iter()
        .filter(|r| keep.contains(r))
        .filter_map(|r| Some((*r, acts.get(r)?.clone())))
        .collect()
}

fn finish(e: Emitter, name: &str, results: &[Sharded]) -> String {
    let r: Vec<(Val, Vec<&str>)> = results
        .iter()
        .map(|(v, d)| (v.clone(), d.clone()))
        .collect();
    e.finish(name, &r)
}

/// The backward program of a chunk: takes the forward's kept activations
/// (same order and shardings), the output gradient (none for the head: it
/// starts from the loss), the weights and their gradient accumulators;
/// returns the input gradient (none for the embedding) and the accumulated
/// gradients.
pub fn backward_program(model: &ModelSpec, strategy: &Strategy, kind: ChunkKind) -> String {
    let c = Ctx::new(model, strategy);
    // The kept activations' types come from the forward program itself.
    let mut scratch = emitter(strategy, 1);
    let fargs = chunk_args(&mut scratch, model, &c, kind, true);
    let keep = kept_roles(strategy);
    let mut e = emitter(strategy, 1);
    let mut layer_kept: Vec<Acts> = Vec::new();
    let input = fargs.input.clone().expect("a forward program has an input");
    let mut x = if kind.embed {
        embed(&mut scratch, &c, &fargs, &input)
    } else {
        input
    };
    for (l, ws) in fargs.layers.iter().enumerate() {
        let (y, acts) = block_forward(
            &mut scratch,
            &layer_ctx(model, &c, kind.first_layer + l as u64),
            &x,
            ws,
            fargs.rope.as_ref(),
            seed_of(kind, l as u64),
        );
        let mut kept = Acts::new();
        for (r, (v, dims)) in select_roles(&acts, &keep) {
            kept.insert(r, (e.arg(&v.shape, v.dtype, &dims), dims));
        }
        layer_kept.push(kept);
        x = y;
    }
    let head_kept: Vec<Val> = if kind.head {
        let (_, hk) = head_forward(&mut scratch, &c, &fargs, &x);
        hk.iter()
            .map(|(v, d)| e.arg(&v.shape, v.dtype, d))
            .collect()
    } else {
        Vec::new()
    };
    // The rest of the arguments: dy, then the forward's own arguments (the
    // tokens only for the embedding's gradient).
    let dy = (!kind.head).then(|| e.arg(&c.act(), c.dtype, &c.act_dims()));
    let args = chunk_args(&mut e, model, &c, kind, false);
    let weights = args.weights();
    let accum: Vec<Sharded> = weights
        .iter()
        .map(|(w, d)| {
            let (shape, dims) = grad_accumulator(strategy, &w.shape, d);
            (e.arg(&shape, strategy.grad_dtype(), &dims), dims)
        })
        .collect();
    // Each weight gradient is added into its accumulator as soon as it
    // exists (Megatron-LM's gradient-accumulation fusion writes it into
    // `main_grad` from the weight-gradient matmul), so one layer's weight
    // gradients, not the whole chunk's, are ever held besides the
    // accumulators; adding them all at the end would hold every weight
    // gradient across the rest of the backward (a second copy of the
    // chunk's parameters).
    let mut sums: Vec<Option<Val>> = vec![None; weights.len()];
    let table_grad_index = |which: &str| -> usize {
        let base = args.layer_offset(args.layers.len());
        match which {
            "embed" => base,
            _ => base + usize::from(args.embed_table.is_some() && args.head_table.is_some()),
        }
    };
    // Head.
    let mut dy = match dy {
        Some(d) => d,
        None => {
            let (xin, xf, probs) = (&head_kept[0], &head_kept[1], &head_kept[2]);
            let onehot = onehot(&mut e, &c, &args);
            let one = e.splat(1.0, &probs.shape.clone(), probs.dtype);
            let zero = e.splat(0.0, &probs.shape.clone(), probs.dtype);
            let oh = e.select(&onehot, &one, &zero);
            let dl = e.binary("subtract", probs, &oh);
            let dl = e.binary_scalar("multiply", &dl, 1.0 / (c.b * c.s) as f64);
            let dl = if c.unfused_cross_entropy {
                // The softmax scaled in place (fp32), then `.float()`'s
                // gradient back to the compute type: two kernels.
                let vdims = c.tokens(&["", "", "tensor"]);
                let dl = kernel_boundary(&mut e, &dl, &vdims);
                let dl = e.convert(&dl, c.dtype);
                kernel_boundary(&mut e, &dl, &vdims)
            } else {
                dl
            };
            let table = &args.head().0;
            let dxf = e.dot(&dl, table, (&[], &[]), (&[2], &[0]));
            let dxf = e.constrain(&dxf, &c.act_dims());
            let xg = super::block::gathered(&mut e, &c, xf);
            let dt = super::block::mm_dw(&mut e, &c, &dl, &xg);
            let i = table_grad_index("head");
            sums[i] = Some(accumulate(&mut e, &accum[i].0, &dt));
            norm_grad(&mut e, &c, xin, &dxf)
        }
    };
    // Blocks, last first.
    for (l, kept) in layer_kept.into_iter().enumerate().rev() {
        let ws = &args.layers[l];
        let lc = layer_ctx(model, &c, kind.first_layer + l as u64);
        let acts = complete_acts(
            &mut e,
            &lc,
            kept,
            ws,
            args.rope.as_ref(),
            seed_of(kind, l as u64),
        );
        let (dx, gs) = block_backward(&mut e, &lc, &acts, ws, args.rope.as_ref(), &dy);
        let first = args.layer_offset(l);
        for (i, g) in gs.into_iter().enumerate() {
            sums[first + i] = Some(accumulate(&mut e, &accum[first + i].0, &g));
        }
        dy = dx;
    }
    let mut results: Vec<Sharded> = Vec::new();
    if kind.embed {
        let tokens = args
            .input
            .clone()
            .expect("the embedding's backward takes the tokens");
        let ids = e.reshape(&tokens, &[c.b, c.s, 1]);
        let (table, dims) = args.embed_table.as_ref().expect("embedding table");
        let dt = embedding_grad(&mut e, &c, strategy, table, dims, &ids, &dy);
        let i = table_grad_index("embed");
        // A tied table already holds the head's gradient.
        let acc = sums[i].take().unwrap_or_else(|| accum[i].0.clone());
        sums[i] = Some(accumulate(&mut e, &acc, &dt));
        if args.positions.is_some() {
            let dp = positions_grad(&mut e, &c, &dy);
            let i = weights.len() - 1;
            sums[i] = Some(accumulate(&mut e, &accum[i].0, &dp));
        }
    } else {
        results.push((dy, c.act_dims()));
    }
    for (sum, (_, dims)) in sums.into_iter().zip(&accum) {
        let sum = sum.expect("every weight has a gradient");
        results.push((sum, dims.clone()));
    }
    finish(e, "chunk_backward", &results)
}

/// A weight gradient added into its accumulator, in the accumulator's type.
/// With gradient-accumulation fusion and a wider accumulator (fp32 for bf16)
/// the weight-gradient matmul already wrote the accumulator's type, and the
/// timed run folds the add into it as its epilogue (an add of a matmul's
/// wider result into a donated buffer); otherwise the gradient is written in
/// the compute type and the add (after a convert) is a kernel of its own,
/// as Megatron-LM's `main_grad.add_(grad)`.
fn accumulate(e: &mut Emitter, acc: &Val, g: &Val) -> Val {
    let g = if g.dtype == acc.dtype {
        g.clone()
    } else {
        e.convert(g, acc.dtype)
    };
    e.binary("add", acc, &g)
}

/// The embedding table's gradient from the token ids (`[b, s, 1]`) and the
/// embedding's output gradient: rows added at the ids; with context
/// parallelism each context rank's into its own stacked table (the ids
/// paired with the rank that holds them).
fn embedding_grad(
    e: &mut Emitter,
    c: &Ctx,
    strategy: &Strategy,
    table: &Val,
    dims: &[&'static str],
    ids: &Val,
    dy: &Val,
) -> Val {
    if c.cp == 1 {
        let zero = e.splat(0.0, &table.shape, c.dtype);
        let zero = e.constrain(&zero, dims);
        return e.add_rows(&zero, ids, dy);
    }
    // Each context rank adds its own tokens' rows into its own table: a
    // computation manual over `context` (partitioned over `tensor` inside).
    let seq = c.tokens(&["", "", ""]);
    let scope = e.manual_begin_over(&["context".to_string()], &[(ids, seq.clone()), (dy, seq)]);
    let (ids, dy) = (scope.args[0].clone(), scope.args[1].clone());
    let zero = e.splat(0.0, &table.shape, c.dtype);
    let zero = e.constrain(&zero, dims);
    let dt = e.add_rows(&zero, &ids, &dy);
    let mut one = vec![1];
    one.extend_from_slice(&table.shape);
    let dt = e.reshape(&dt, &one);
    let (_, sdims) = grad_accumulator(strategy, &table.shape, dims);
    e.manual_end(scope, &[(&dt, sdims)])[0].clone()
}

/// The learned positions' gradient (`[s, h]`): the output gradient summed
/// over the batch; with context parallelism each context rank's rows in its
/// own stacked `[cp, s, h]` (zero elsewhere).
fn positions_grad(e: &mut Emitter, c: &Ctx, dy: &Val) -> Val {
    if c.cp == 1 {
        return e.reduce("add", dy, 0.0, &[0]);
    }
    let (cp, part) = (c.cp, c.s / c.cp);
    let r = e.reshape(dy, &[c.b, cp, part, c.h]);
    let r = e.constrain(&r, &["", "context", "", ""]);
    let r = e.reduce("add", &r, 0.0, &[0]);
    let shape = [cp, cp, part, c.h];
    let wide = e.broadcast(&r, &[0, 2, 3], &shape);
    let wide = e.constrain(&wide, &["context", "", "", ""]);
    let row = e.iota(0, &shape, DType::I32);
    let col = e.iota(1, &shape, DType::I32);
    let own = e.compare("EQ", &row, &col);
    let zero = e.splat(0.0, &shape, c.dtype);
    let g = e.select(&own, &wide, &zero);
    let g = e.reshape(&g, &[cp, c.s, c.h]);
    e.constrain(&g, &["context", "", ""])
}

/// Shapes and shardings of a chunk's weights, in argument order; with
/// expert parallelism the routed experts' matrices whole, split over the
/// `expert` axis on their first dimension.
pub fn chunk_weights(
    model: &ModelSpec,
    strategy: &Strategy,
    kind: ChunkKind,
) -> Vec<(Vec<u64>, Vec<&'static str>)> {
    let c = Ctx::new(model, strategy);
    let mut scratch = emitter(strategy, 1);
    let args = chunk_args(&mut scratch, model, &c, kind, true);
    // Each weight's layer and index within it (none past the layers).
    let place: Vec<Option<(u64, usize)>> = args
        .layers
        .iter()
        .enumerate()
        .flat_map(|(l, w)| (0..w.mats.len()).map(move |i| Some((l as u64, i))))
        .collect();
    args.weights()
        .into_iter()
        .enumerate()
        .map(|(i, (v, mut d))| {
            let mut shape = v.shape;
            let expert = place.get(i).copied().flatten().is_some_and(|(l, j)| {
                model.moe_at(kind.first_layer + l).is_some() && EXPERT_WEIGHTS.contains(&j)
            });
            if strategy.ep > 1 && expert {
                shape[0] *= strategy.ep;
                d[0] = EXPERT_AXIS;
            }
            (shape, d)
        })
        .collect()
}

/// Elements of a weight on one device: split over `tensor` and over the
/// expert replicas where its sharding says so.
pub fn local_elements(shape: &[u64], dims: &[&str], strategy: &Strategy) -> u64 {
    let n: u64 = shape.iter().product();
    let n = if dims.contains(&EXPERT_AXIS) {
        n / strategy.ep
    } else {
        n
    };
    if dims.contains(&"tensor") {
        n / strategy.tp
    } else {
        n
    }
}

/// Elements on one device of each unit ZeRO-3 gathers whole before use
/// (FSDP's wrapped modules): each layer's, then the others' (the embedding,
/// its table with the learned positions, and a separate output table).
pub fn chunk_gather_units(
    model: &ModelSpec,
    strategy: &Strategy,
    kind: ChunkKind,
) -> (Vec<u64>, Vec<u64>) {
    let weights = chunk_weights(model, strategy, kind);
    let c = Ctx::new(model, strategy);
    let mut scratch = emitter(strategy, 1);
    let args = chunk_args(&mut scratch, model, &c, kind, true);
    let local = |w: &[(Vec<u64>, Vec<&'static str>)]| -> u64 {
        w.iter()
            .map(|(shape, dims)| local_elements(shape, dims, strategy))
            .sum()
    };
    let mut units = Vec::new();
    let mut at = 0;
    for layer in &args.layers {
        let n = layer.mats.len();
        units.push(local(&weights[at..at + n]));
        at += n;
    }
    // The rest in [`ChunkArgs::weights`]' order: embedding table, output
    // table, positions.
    let mut next = |present: bool| {
        let n = usize::from(present);
        let u = local(&weights[at..at + n]);
        at += n;
        u
    };
    let embed = next(args.embed_table.is_some());
    let head = next(args.head_table.is_some());
    let positions = next(args.positions.is_some());
    let others = [embed + positions, head]
        .into_iter()
        .filter(|&u| u > 0)
        .collect();
    (units, others)
}

/// The chunks of a pipeline in model order, with the layers
/// [`Strategy::chunk_layers`] gives each; the first embeds, the last ends
/// in the loss.
pub fn chunk_kinds(model: &ModelSpec, strategy: &Strategy) -> Result<Vec<ChunkKind>, ModelError> {
    let layers = strategy.chunk_layers(model)?;
    let n = layers.len();
    let mut first_layer = 0;
    Ok(layers
        .into_iter()
        .enumerate()
        .map(|(c, layers)| {
            let kind = ChunkKind {
                layers,
                first_layer,
                embed: c == 0,
                head: c + 1 == n,
            };
            first_layer += layers;
            kind
        })
        .collect())
}

/// How many of a chunk's layers are dense in a mixture-of-experts model
/// whose first `dense_layers` are dense (0 in a dense model: it has no
/// expert layers to tell them from).
pub fn dense_layers_in(model: &ModelSpec, kind: ChunkKind) -> u64 {
    model.moe.as_ref().map_or(0, |m| {
        m.dense_layers
            .saturating_sub(kind.first_layer)
            .min(kind.layers)
    })
}
