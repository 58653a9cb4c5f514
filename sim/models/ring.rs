//! Context parallelism's attention: ring attention as Megatron-Core runs it
//! with Transformer Engine (`AttnFuncWithCPAndKVP2P`), written as per-device
//! code in a manual computation over the mesh.
//!
//! The sequence is split over the `context` axis with causal load
//! balancing: context rank `c` holds two chunks of `s / 2cp` tokens, chunk
//! `c` and chunk `2cp - 1 - c` (Megatron's `get_batch_on_this_cp_rank`), so
//! the program's sequence order is that permutation of the tokens and every
//! rank does the same work. Each rank's keys and values (one buffer) travel
//! around the ring in `cp - 1` point-to-point sends; the send of the next
//! block is issued before the current block's attention, so it travels
//! while the rank computes. Step 0 is the local causal block; at step `i`
//! the block comes from rank `r = c - i`: when `r < c` both query chunks
//! attend to its first chunk only, when `r > c` only the second query chunk
//! attends, to both of its chunks; either way half a block, unmasked
//! (written as two quarter blocks chosen by the rank, so every device runs
//! the same code). Partial results merge by their log-sum-exp (online
//! softmax); the forward keeps that log-sum-exp for the backward, which
//! recomputes the probabilities block by block and sends the keys and
//! values around the ring again, with each block's key and value gradients
//! following it (`cp - 1` sends each), the last send returning them to
//! their owner. Attention-probability dropout is not applied here.

use crate::base::DType;

use super::block::Ctx;
use super::emit::{Emitter, Val};

/// The sharding of `q`-shaped values (`[b, kv, g, s, d]`).
fn q_dims() -> Vec<&'static str> {
    vec!["", "tensor", "", "context", ""]
}

/// The sharding of `k`- and `v`-shaped values (`[b, kv, s, d]`).
fn kv_dims() -> Vec<&'static str> {
    vec!["", "tensor", "context", ""]
}

/// The sharding of the kept log-sum-exp (`[b, kv, g, s]`).
pub fn lse_dims() -> Vec<&'static str> {
    vec!["", "tensor", "", "context"]
}

/// Each context rank's index, one per device (`[cp]` split over `context`).
fn ranks(e: &mut Emitter, c: &Ctx) -> Val {
    let r = e.iota(0, &[c.cp], DType::I32);
    e.constrain(&r, &["context"])
}

/// Per-device code: whether the block of step `i` comes from a lower rank
/// (`i <= c`), a scalar.
fn from_below(e: &mut Emitter, rank: &Val, i: u64) -> Val {
    let r = e.reshape(rank, &[]);
    let i = e.splat(i as f64, &[], DType::I32);
    e.compare("GE", &r, &i)
}

/// `a` where the scalar `pred` holds, else `b`.
fn pick(e: &mut Emitter, pred: &Val, a: &Val, b: &Val) -> Val {
    let p = e.broadcast(pred, &[], &a.shape);
    e.select(&p, a, b)
}

/// `x` halved along dimension `dim`: the rank's two chunks.
fn halves(e: &mut Emitter, x: &Val, dim: usize) -> (Val, Val) {
    let n = x.shape[dim];
    (e.slice(x, dim, 0, n / 2), e.slice(x, dim, n / 2, n))
}

/// `keys` and `values` (`[b, kv, t, d]`) in one buffer `[b, kv, 2, t, d]`.
fn pack(e: &mut Emitter, k: &Val, v: &Val) -> Val {
    let mut shape = k.shape.clone();
    shape.insert(2, 1);
    let k = e.reshape(k, &shape);
    let v = e.reshape(v, &shape);
    e.concatenate(&[&k, &v], 2)
}

fn unpack(e: &mut Emitter, kv: &Val) -> (Val, Val) {
    let mut shape = kv.shape.clone();
    shape.remove(2);
    let k = e.slice(kv, 2, 0, 1);
    let v = e.slice(kv, 2, 1, 2);
    (e.reshape(&k, &shape), e.reshape(&v, &shape))
}

/// Scaled scores of `q` (`[b, kv, g, m, d]`) against `k` (`[b, kv, n, d]`),
/// causal (query row `i` sees keys up to `i`) when `causal`.
/// The key and value halves of the block held at ring step `i`, and
/// whether it comes from a lower rank.
struct Arrived {
    k0: Val,
    k1: Val,
    v0: Val,
    v1: Val,
    below: Val,
}

/// Take the block in flight at ring step `i`; unless it is the last, its
/// send on to the next rank is written first, so it overlaps this step's
/// attention.
fn arrive(e: &mut Emitter, next: &mut Option<Val>, rank: &Val, i: u64, cp: u64) -> Arrived {
    let held = next.take().expect("a block in flight");
    if i + 1 < cp {
        *next = Some(e.ring_shift(&held, "context", 1));
    }
    let (kr, vr) = unpack(e, &held);
    let (k0, k1) = halves(e, &kr, 2);
    let (v0, v1) = halves(e, &vr, 2);
    let below = from_below(e, rank, i);
    Arrived {
        k0,
        k1,
        v0,
        v1,
        below,
    }
}

fn scores(e: &mut Emitter, c: &Ctx, q: &Val, k: &Val, causal: bool) -> Val {
    let s = e.dot(q, k, (&[0, 1], &[0, 1]), (&[4], &[3]));
    let s = e.binary_scalar("multiply", &s, 1.0 / (c.d as f64).sqrt());
    if !causal {
        return s;
    }
    let shape = s.shape.clone();
    let row = e.iota(3, &shape, DType::I32);
    let col = e.iota(4, &shape, DType::I32);
    let keep = e.compare("GE", &row, &col);
    let masked = e.splat(-1e4, &shape, c.dtype);
    e.select(&keep, &s, &masked)
}

/// `[b, kv, g, m]` broadcast over the head dimension or the key dimension.
fn spread(e: &mut Emitter, x: &Val, n: u64) -> Val {
    let mut to = x.shape.clone();
    to.push(n);
    e.broadcast(x, &[0, 1, 2, 3], &to)
}

/// The running softmax state of a query chunk: row maximum, row sum of
/// exponentials, unnormalized output.
#[derive(Clone)]
struct State {
    m: Val,
    l: Val,
    o: Val,
}

/// One block's attention of `q` over `k`, `v`.
fn block(e: &mut Emitter, c: &Ctx, q: &Val, k: &Val, v: &Val, causal: bool) -> State {
    let s = scores(e, c, q, k, causal);
    let m = e.reduce("maximum", &s, f64::NEG_INFINITY, &[4]);
    let mb = spread(e, &m, s.shape[4]);
    let z = e.binary("subtract", &s, &mb);
    let p = e.unary("exponential", &z);
    let l = e.reduce("add", &p, 0.0, &[4]);
    let o = e.dot(&p, v, (&[0, 1], &[0, 1]), (&[4], &[2]));
    State { m, l, o }
}

/// Two partial results of the same rows merged (online softmax).
fn merge(e: &mut Emitter, c: &Ctx, a: &State, b: &State) -> State {
    let m = e.binary("maximum", &a.m, &b.m);
    let da = e.binary("subtract", &a.m, &m);
    let fa = e.unary("exponential", &da);
    let db = e.binary("subtract", &b.m, &m);
    let fb = e.unary("exponential", &db);
    let la = e.binary("multiply", &a.l, &fa);
    let lb = e.binary("multiply", &b.l, &fb);
    let l = e.binary("add", &la, &lb);
    let fa = spread(e, &fa, c.d);
    let fb = spread(e, &fb, c.d);
    let oa = e.binary("multiply", &a.o, &fa);
    let ob = e.binary("multiply", &b.o, &fb);
    let o = e.binary("add", &oa, &ob);
    State { m, l, o }
}

fn choose(e: &mut Emitter, pred: &Val, a: &State, b: &State) -> State {
    State {
        m: pick(e, pred, &a.m, &b.m),
        l: pick(e, pred, &a.l, &b.l),
        o: pick(e, pred, &a.o, &b.o),
    }
}

/// Ring attention's forward of `q` (`[b, kv, g, s, d]`), `k`, `v`
/// (`[b, kv, s, d]`), each split over `context` along the sequence: the
/// context (`[b, kv, g, s, d]`) and the log-sum-exp (`[b, kv, g, s]`).
pub fn forward(e: &mut Emitter, c: &Ctx, q: &Val, k: &Val, v: &Val) -> (Val, Val) {
    let rank = ranks(e, c);
    let scope = e.manual_begin(&[
        (q, q_dims()),
        (k, kv_dims()),
        (v, kv_dims()),
        (&rank, vec!["context"]),
    ]);
    let [q, k, v, rank] = [0, 1, 2, 3].map(|i| scope.args[i].clone());
    let (q0, q1) = halves(e, &q, 3);
    // The first send goes before the local block's attention.
    let held = pack(e, &k, &v);
    let mut next = Some(e.ring_shift(&held, "context", 1));
    let diag = block(e, c, &q, &k, &v, true);
    let split = |e: &mut Emitter, x: &Val| halves(e, x, 3);
    let (m0, m1) = split(e, &diag.m);
    let (l0, l1) = split(e, &diag.l);
    let (o0, o1) = split(e, &diag.o);
    let mut s0 = State {
        m: m0,
        l: l0,
        o: o0,
    };
    let mut s1 = State {
        m: m1,
        l: l1,
        o: o1,
    };
    for i in 1..c.cp {
        let Arrived {
            k0,
            k1,
            v0,
            v1,
            below,
        } = arrive(e, &mut next, &rank, i, c.cp);
        let qa = pick(e, &below, &q0, &q1);
        let kb = pick(e, &below, &k0, &k1);
        let vb = pick(e, &below, &v0, &v1);
        let x = block(e, c, &qa, &k0, &v0, false);
        let y = block(e, c, &q1, &kb, &vb, false);
        s1 = merge(e, c, &s1, &y);
        let s0x = merge(e, c, &s0, &x);
        s0 = choose(e, &below, &s0x, &s0);
        let s1x = merge(e, c, &s1, &x);
        s1 = choose(e, &below, &s1, &s1x);
    }
    let finish = |e: &mut Emitter, s: &State| {
        let lb = spread(e, &s.l, c.d);
        let o = e.binary("divide", &s.o, &lb);
        let log = e.unary("log", &s.l);
        (o, e.binary("add", &s.m, &log))
    };
    let (o0, lse0) = finish(e, &s0);
    let (o1, lse1) = finish(e, &s1);
    let o = e.concatenate(&[&o0, &o1], 3);
    let lse = e.concatenate(&[&lse0, &lse1], 3);
    let out = e.manual_end(scope, &[(&o, q_dims()), (&lse, lse_dims())]);
    (out[0].clone(), out[1].clone())
}

/// Gradients of one block from its rows' `q`, log-sum-exp, `D = rowsum(dO
/// o)` and `dO` against keys `k` and values `v`: `dq`, `dk`, `dv`.
#[allow(clippy::too_many_arguments)]
fn block_grads(
    e: &mut Emitter,
    c: &Ctx,
    q: &Val,
    lse: &Val,
    dd: &Val,
    dout: &Val,
    k: &Val,
    v: &Val,
    causal: bool,
) -> (Val, Val, Val) {
    let s = scores(e, c, q, k, causal);
    let lb = spread(e, lse, s.shape[4]);
    let z = e.binary("subtract", &s, &lb);
    let p = e.unary("exponential", &z);
    let dv = e.dot(&p, dout, (&[0, 1], &[0, 1]), (&[2, 3], &[2, 3]));
    let dp = e.dot(dout, v, (&[0, 1], &[0, 1]), (&[4], &[3]));
    let db = spread(e, dd, s.shape[4]);
    let t = e.binary("subtract", &dp, &db);
    let ds = e.binary("multiply", &p, &t);
    let ds = e.binary_scalar("multiply", &ds, 1.0 / (c.d as f64).sqrt());
    let dq = e.dot(&ds, k, (&[0, 1], &[0, 1]), (&[4], &[2]));
    let dk = e.dot(&ds, q, (&[0, 1], &[0, 1]), (&[2, 3], &[2, 3]));
    (dq, dk, dv)
}

/// Ring attention's backward: from `[q, k, v, o, lse]` (as the forward
/// took and returned them) and the context gradient `dout`, the gradients
/// of `q`, `k` and `v`.
pub fn backward(e: &mut Emitter, c: &Ctx, kept: [&Val; 5], dout: &Val) -> (Val, Val, Val) {
    let rank = ranks(e, c);
    let [q, k, v, o, lse] = kept;
    let scope = e.manual_begin(&[
        (q, q_dims()),
        (k, kv_dims()),
        (v, kv_dims()),
        (o, q_dims()),
        (lse, lse_dims()),
        (dout, q_dims()),
        (&rank, vec!["context"]),
    ]);
    let [q, k, v, o, lse, dout, rank] = [0, 1, 2, 3, 4, 5, 6].map(|i| scope.args[i].clone());
    let held = pack(e, &k, &v);
    let mut next = Some(e.ring_shift(&held, "context", 1));
    let t = e.binary("multiply", &dout, &o);
    let dd = e.reduce("add", &t, 0.0, &[4]);
    let (dq, dk_own, dv_own) = block_grads(e, c, &q, &lse, &dd, &dout, &k, &v, true);
    let (mut dq0, mut dq1) = halves(e, &dq, 3);
    let (q0, q1) = halves(e, &q, 3);
    let (lse0, lse1) = halves(e, &lse, 3);
    let (dd0, dd1) = halves(e, &dd, 3);
    let (do0, do1) = halves(e, &dout, 3);
    // The key and value gradients of the block held, sent after it.
    let mut trail: Option<Val> = None;
    for i in 1..c.cp {
        let Arrived {
            k0,
            k1,
            v0,
            v1,
            below,
        } = arrive(e, &mut next, &rank, i, c.cp);
        let pick = |e: &mut Emitter, a: &Val, b: &Val| pick(e, &below, a, b);
        let qa = pick(e, &q0, &q1);
        let lsea = pick(e, &lse0, &lse1);
        let dda = pick(e, &dd0, &dd1);
        let doa = pick(e, &do0, &do1);
        let kb = pick(e, &k0, &k1);
        let vb = pick(e, &v0, &v1);
        let (dqx, dkx, dvx) = block_grads(e, c, &qa, &lsea, &dda, &doa, &k0, &v0, false);
        let (dqy, dky, dvy) = block_grads(e, c, &q1, &lse1, &dd1, &do1, &kb, &vb, false);
        let zq = e.splat(0.0, &dqx.shape, c.dtype);
        let to0 = pick(e, &dqx, &zq);
        dq0 = e.binary("add", &dq0, &to0);
        let to1 = pick(e, &zq, &dqx);
        dq1 = e.binary("add", &dq1, &dqy);
        dq1 = e.binary("add", &dq1, &to1);
        // This step's gradients of the held block's two chunks.
        let zk = e.splat(0.0, &dkx.shape, c.dtype);
        let grads = |e: &mut Emitter, x: &Val, y: &Val| {
            let y0 = pick(e, y, &zk);
            let first = e.binary("add", x, &y0);
            let second = pick(e, &zk, y);
            e.concatenate(&[&first, &second], 2)
        };
        let dk = grads(e, &dkx, &dky);
        let dv = grads(e, &dvx, &dvy);
        let mut step = pack(e, &dk, &dv);
        if let Some(arrived) = trail.take() {
            step = e.binary("add", &arrived, &step);
        }
        // Sent on at once: to the rank that holds the block next, and after
        // the last step back to its owner.
        trail = Some(e.ring_shift(&step, "context", 1));
    }
    let (dk, dv) = match trail {
        Some(home) => {
            let (dk, dv) = unpack(e, &home);
            (e.binary("add", &dk_own, &dk), e.binary("add", &dv_own, &dv))
        }
        None => (dk_own, dv_own),
    };
    let dq = e.concatenate(&[&dq0, &dq1], 3);
    let out = e.manual_end(
        scope,
        &[(&dq, q_dims()), (&dk, kv_dims()), (&dv, kv_dims())],
    );
    (out[0].clone(), out[1].clone(), out[2].clone())
}
