//! The program `bench scale` times: one training step of a GPT-3-shaped
//! transformer (bf16, unrolled layers, shape-only), written as StableHLO text
//! with Megatron-style shardings on a `data x model` mesh. Self-contained on
//! purpose (the model builders of `sim/models/` come later).
//!
//! Per layer, forward: layernorm, Q/K/V projections (column-parallel), heads
//! split by reshape + transpose, scores and context as batched dot_generals,
//! softmax, out-projection (row-parallel), residual, layernorm, MLP
//! `d -> f -> d` with a gelu (`h * logistic(h)`) and a residual. Backward, in
//! reverse layer order: the transposed matmuls for activation and weight
//! gradients, the elementwise derivatives of gelu, softmax and layernorm.
//! Update: Adam-like (moments, square root, divide) for the six weight
//! matrices of every layer. The embedding and the loss head are left out: the
//! step starts from the activations and the output gradient.

use std::fmt::Write as _;

/// Dimensions of the generated model.
#[derive(Debug, Clone, Copy)]
pub struct ModelDims {
    pub layers: usize,
    /// Sequences per step (one per `data` shard by default).
    pub batch: u64,
    pub seq: u64,
    pub d_model: u64,
    pub heads: u64,
    pub d_ff: u64,
}

impl ModelDims {
    /// GPT-3 175B: 96 layers, d_model 12288, 96 heads of 128, d_ff 49152, sequence 2048.
    pub fn gpt3_175b(layers: usize, batch: u64) -> ModelDims {
        ModelDims {
            layers,
            batch,
            seq: 2048,
            d_model: 12288,
            heads: 96,
            d_ff: 49152,
        }
    }
}

/// Emits ops with fresh names.
struct Writer {
    text: String,
    next: usize,
}

/// `tensor<AxBx...xbf16>`.
fn ty(shape: &[u64]) -> String {
    let mut s = String::from("tensor<");
    for d in shape {
        let _ = write!(s, "{d}x");
    }
    s.push_str("bf16>");
    s
}

fn list(v: &[usize]) -> String {
    v.iter()
        .map(|d| d.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

impl Writer {
    fn fresh(&mut self) -> String {
        self.next += 1;
        format!("%v{}", self.next)
    }

    fn line(&mut self, name: &str, body: &str) {
        let _ = writeln!(self.text, "    {name} = {body}");
    }

    fn unary(&mut self, op: &str, x: &str, shape: &[u64]) -> String {
        let v = self.fresh();
        self.line(&v, &format!("stablehlo.{op} {x} : {}", ty(shape)));
        v
    }

    fn binary(&mut self, op: &str, a: &str, b: &str, shape: &[u64]) -> String {
        let v = self.fresh();
        self.line(&v, &format!("stablehlo.{op} {a}, {b} : {}", ty(shape)));
        v
    }

    /// Sum (or max) over `dims`.
    fn reduce(&mut self, op: &str, x: &str, init: &str, shape: &[u64], dims: &[usize]) -> String {
        let out: Vec<u64> = (0..shape.len())
            .filter(|d| !dims.contains(d))
            .map(|d| shape[d])
            .collect();
        let v = self.fresh();
        self.line(
            &v,
            &format!(
                "stablehlo.reduce({x} init: {init}) applies stablehlo.{op} across dimensions = [{}] : ({}, tensor<bf16>) -> {}",
                list(dims),
                ty(shape),
                ty(&out)
            ),
        );
        v
    }

    fn broadcast(&mut self, x: &str, from: &[u64], dims: &[usize], to: &[u64]) -> String {
        let v = self.fresh();
        self.line(
            &v,
            &format!(
                "stablehlo.broadcast_in_dim {x}, dims = [{}] : ({}) -> {}",
                list(dims),
                ty(from),
                ty(to)
            ),
        );
        v
    }

    fn reshape(&mut self, x: &str, from: &[u64], to: &[u64]) -> String {
        let v = self.fresh();
        self.line(
            &v,
            &format!("stablehlo.reshape {x} : ({}) -> {}", ty(from), ty(to)),
        );
        v
    }

    fn transpose(&mut self, x: &str, from: &[u64], perm: &[usize]) -> String {
        let to: Vec<u64> = perm.iter().map(|&p| from[p]).collect();
        let v = self.fresh();
        self.line(
            &v,
            &format!(
                "stablehlo.transpose {x}, dims = [{}] : ({}) -> {}",
                list(perm),
                ty(from),
                ty(&to)
            ),
        );
        v
    }

    /// `dot_general` with batching and contracting dims; the result is batch,
    /// lhs free, rhs free dims (StableHLO's order).
    #[allow(clippy::too_many_arguments)]
    fn dot(
        &mut self,
        a: &str,
        a_shape: &[u64],
        b: &str,
        b_shape: &[u64],
        batch: (&[usize], &[usize]),
        contract: (&[usize], &[usize]),
    ) -> (String, Vec<u64>) {
        let mut out: Vec<u64> = batch.0.iter().map(|&d| a_shape[d]).collect();
        out.extend(
            (0..a_shape.len())
                .filter(|d| !batch.0.contains(d) && !contract.0.contains(d))
                .map(|d| a_shape[d]),
        );
        out.extend(
            (0..b_shape.len())
                .filter(|d| !batch.1.contains(d) && !contract.1.contains(d))
                .map(|d| b_shape[d]),
        );
        let batching = if batch.0.is_empty() {
            String::new()
        } else {
            format!(
                "batching_dims = [{}] x [{}], ",
                list(batch.0),
                list(batch.1)
            )
        };
        let v = self.fresh();
        self.line(
            &v,
            &format!(
                "stablehlo.dot_general {a}, {b}, {batching}contracting_dims = [{}] x [{}] : ({}, {}) -> {}",
                list(contract.0),
                list(contract.1),
                ty(a_shape),
                ty(b_shape),
                ty(&out)
            ),
        );
        (v, out)
    }

    /// A scalar constant broadcast to `shape`.
    fn splat(&mut self, scalar: &str, shape: &[u64]) -> String {
        self.broadcast(scalar, &[], &[], shape)
    }
}

/// What the forward pass of one layer keeps for the backward pass.
struct Saved {
    n1: String,
    rs1: String,
    q: String,
    k: String,
    v: String,
    p: String,
    ctx: String,
    n2: String,
    rs2: String,
    h: String,
    sig: String,
    g: String,
}

/// Names of one layer's weights and optimizer moments.
struct LayerArgs {
    /// wq, wk, wv, wo, w1, w2.
    w: [String; 6],
    m: [String; 6],
    v: [String; 6],
}

/// The shapes of the six weights (wq, wk, wv, wo, w1, w2).
fn weight_shapes(m: &ModelDims) -> [[u64; 2]; 6] {
    let (d, f) = (m.d_model, m.d_ff);
    [[d, d], [d, d], [d, d], [d, d], [d, f], [f, d]]
}

/// Megatron: Q, K, V and the first MLP matrix split by columns, the
/// out-projection and the second MLP matrix by rows.
fn weight_sharding(i: usize) -> &'static str {
    if matches!(i, 3 | 5) {
        "[{\"model\"}, {}]"
    } else {
        "[{}, {\"model\"}]"
    }
}

/// The training step as StableHLO text on mesh `data x model`.
pub fn gpt3_step(m: &ModelDims, data: u64, model: u64) -> String {
    let (b, s, d, h) = (m.batch, m.seq, m.d_model, m.heads);
    let hd = d / h;
    let act = [b, s, d];
    let mut w = Writer {
        text: String::with_capacity(m.layers * 40_000),
        next: 0,
    };
    let mut args = Vec::new();
    let mut layer_args = Vec::new();
    let data_sharded = "[{\"data\"}, {}, {}]";
    args.push(("%x".to_string(), ty(&act), data_sharded));
    args.push(("%dy".to_string(), ty(&act), data_sharded));
    for l in 0..m.layers {
        let names = |p: &str| -> [String; 6] {
            ["q", "k", "v", "o", "1", "2"].map(|n| format!("%l{l}_{p}{n}"))
        };
        let la = LayerArgs {
            w: names("w"),
            m: names("m"),
            v: names("v"),
        };
        for (i, shape) in weight_shapes(m).iter().enumerate() {
            for n in [&la.w[i], &la.m[i], &la.v[i]] {
                args.push((n.clone(), ty(shape), weight_sharding(i)));
            }
        }
        layer_args.push(la);
    }
    // Constants: zero, -inf stand-in, one, Adam's coefficients.
    for (name, value) in [
        ("%zero", "0.000000e+00"),
        ("%ninf", "-1.000000e+30"),
        ("%one", "1.000000e+00"),
        ("%b1", "9.000000e-01"),
        ("%c1", "1.000000e-01"),
        ("%b2", "9.990000e-01"),
        ("%c2", "1.000000e-03"),
        ("%eps", "1.000000e-08"),
        ("%lr", "1.000000e-04"),
    ] {
        w.line(
            name,
            &format!("stablehlo.constant dense<{value}> : tensor<bf16>"),
        );
    }
    // Forward.
    let mut x = "%x".to_string();
    let mut saved = Vec::with_capacity(m.layers);
    for la in &layer_args {
        let (n1, rs1) = layernorm(&mut w, &x, &act);
        let wq = &la.w;
        let dd = [d, d];
        let proj = |w: &mut Writer, a: &str, wt: &str, to: [u64; 2]| {
            w.dot(a, &act, wt, &to, (&[], &[]), (&[2], &[0])).0
        };
        let q = proj(&mut w, &n1, &wq[0], dd);
        let k = proj(&mut w, &n1, &wq[1], dd);
        let v = proj(&mut w, &n1, &wq[2], dd);
        let heads = [b, s, h, hd];
        let split = |w: &mut Writer, t: &str| {
            let r = w.reshape(t, &act, &heads);
            w.transpose(&r, &heads, &[0, 2, 1, 3])
        };
        let bh = [b, h, s, hd];
        let (qt, kt, vt) = (split(&mut w, &q), split(&mut w, &k), split(&mut w, &v));
        let (scores, ss) = w.dot(&qt, &bh, &kt, &bh, (&[0, 1], &[0, 1]), (&[3], &[3]));
        let mx = w.reduce("maximum", &scores, "%ninf", &ss, &[3]);
        let bmx = w.broadcast(&mx, &[b, h, s], &[0, 1, 2], &ss);
        let sh = w.binary("subtract", &scores, &bmx, &ss);
        let e = w.unary("exponential", &sh, &ss);
        let sm = w.reduce("add", &e, "%zero", &ss, &[3]);
        let bsm = w.broadcast(&sm, &[b, h, s], &[0, 1, 2], &ss);
        let p = w.binary("divide", &e, &bsm, &ss);
        let (ctx, cs) = w.dot(&p, &ss, &vt, &bh, (&[0, 1], &[0, 1]), (&[3], &[2]));
        let ct = w.transpose(&ctx, &cs, &[0, 2, 1, 3]);
        let cr = w.reshape(&ct, &heads, &act);
        let o = proj(&mut w, &cr, &wq[3], dd);
        let x1 = w.binary("add", &x, &o, &act);
        let (n2, rs2) = layernorm(&mut w, &x1, &act);
        let ff = [b, s, m.d_ff];
        let hh = proj(&mut w, &n2, &wq[4], [d, m.d_ff]);
        let sig = w.unary("logistic", &hh, &ff);
        let g = w.binary("multiply", &hh, &sig, &ff);
        let y = w
            .dot(&g, &ff, &wq[5], &[m.d_ff, d], (&[], &[]), (&[2], &[0]))
            .0;
        let x2 = w.binary("add", &x1, &y, &act);
        saved.push(Saved {
            n1,
            rs1,
            q: qt,
            k: kt,
            v: vt,
            p,
            ctx: cr,
            n2,
            rs2,
            h: hh,
            sig,
            g,
        });
        x = x2;
    }
    // Backward, then the update of each layer.
    let mut dy = "%dy".to_string();
    let mut results: Vec<(String, String)> = Vec::new();
    let mut grads: Vec<[String; 6]> = vec![Default::default(); m.layers];
    for (l, sv) in saved.iter().enumerate().rev() {
        let la = &layer_args[l];
        let ff = [b, s, m.d_ff];
        // MLP: y = g . w2, g = h * sig(h), h = n2 . w1.
        let dg = w
            .dot(&dy, &act, &la.w[5], &[m.d_ff, d], (&[], &[]), (&[2], &[1]))
            .0;
        let dw2 = w
            .dot(&sv.g, &ff, &dy, &act, (&[], &[]), (&[0, 1], &[0, 1]))
            .0;
        let one = w.splat("%one", &ff);
        let oms = w.binary("subtract", &one, &sv.sig, &ff);
        let t = w.binary("multiply", &sv.h, &oms, &ff);
        let t = w.binary("add", &t, &one, &ff);
        let t = w.binary("multiply", &sv.sig, &t, &ff);
        let dh = w.binary("multiply", &dg, &t, &ff);
        let dn2 = w
            .dot(&dh, &ff, &la.w[4], &[d, m.d_ff], (&[], &[]), (&[2], &[1]))
            .0;
        let dw1 = w
            .dot(&sv.n2, &act, &dh, &ff, (&[], &[]), (&[0, 1], &[0, 1]))
            .0;
        let dln2 = layernorm_grad(&mut w, &dn2, &sv.n2, &sv.rs2, &act);
        let dx1 = w.binary("add", &dy, &dln2, &act);
        // Attention.
        let dd = [d, d];
        let dcr = w.dot(&dx1, &act, &la.w[3], &dd, (&[], &[]), (&[2], &[1])).0;
        let dwo = w
            .dot(&sv.ctx, &act, &dx1, &act, (&[], &[]), (&[0, 1], &[0, 1]))
            .0;
        let heads = [b, s, h, hd];
        let bh = [b, h, s, hd];
        let ss = [b, h, s, s];
        let r = w.reshape(&dcr, &act, &heads);
        let dctx = w.transpose(&r, &heads, &[0, 2, 1, 3]);
        let dp = w
            .dot(&dctx, &bh, &sv.v, &bh, (&[0, 1], &[0, 1]), (&[3], &[3]))
            .0;
        let dvt = w
            .dot(&sv.p, &ss, &dctx, &bh, (&[0, 1], &[0, 1]), (&[2], &[2]))
            .0;
        let t = w.binary("multiply", &dp, &sv.p, &ss);
        let r = w.reduce("add", &t, "%zero", &ss, &[3]);
        let br = w.broadcast(&r, &[b, h, s], &[0, 1, 2], &ss);
        let t = w.binary("subtract", &dp, &br, &ss);
        let ds = w.binary("multiply", &t, &sv.p, &ss);
        let dqt = w
            .dot(&ds, &ss, &sv.k, &bh, (&[0, 1], &[0, 1]), (&[3], &[2]))
            .0;
        let dkt = w
            .dot(&ds, &ss, &sv.q, &bh, (&[0, 1], &[0, 1]), (&[2], &[2]))
            .0;
        let mut dn1: Option<String> = None;
        let mut dws: Vec<String> = Vec::new();
        for (i, dt) in [dqt, dkt, dvt].iter().enumerate() {
            let tr = w.transpose(dt, &bh, &[0, 2, 1, 3]);
            let g = w.reshape(&tr, &heads, &act);
            dws.push(
                w.dot(&sv.n1, &act, &g, &act, (&[], &[]), (&[0, 1], &[0, 1]))
                    .0,
            );
            let part = w.dot(&g, &act, &la.w[i], &dd, (&[], &[]), (&[2], &[1])).0;
            dn1 = Some(match dn1 {
                None => part,
                Some(acc) => w.binary("add", &acc, &part, &act),
            });
        }
        let dn1 = dn1.unwrap_or_default();
        let dln1 = layernorm_grad(&mut w, &dn1, &sv.n1, &sv.rs1, &act);
        dy = w.binary("add", &dx1, &dln1, &act);
        grads[l] = [
            dws[0].clone(),
            dws[1].clone(),
            dws[2].clone(),
            dwo,
            dw1,
            dw2,
        ];
    }
    for (l, la) in layer_args.iter().enumerate() {
        for (i, shape) in weight_shapes(m).iter().enumerate() {
            let (nw, nm, nv) = adam(&mut w, &la.w[i], &la.m[i], &la.v[i], &grads[l][i], shape);
            for n in [nw, nm, nv] {
                results.push((n, ty(shape)));
            }
        }
    }
    results.push((dy, ty(&act)));
    let mut out = String::with_capacity(w.text.len() + args.len() * 120 + 4096);
    let _ = writeln!(out, "module @gpt3_step {{");
    let _ = writeln!(
        out,
        "  sdy.mesh @mesh = <[\"data\"={data}, \"model\"={model}]>"
    );
    let arg_text: Vec<String> = args
        .iter()
        .map(|(n, t, sh)| format!("{n}: {t} {{sdy.sharding = #sdy.sharding<@mesh, {sh}>}}"))
        .collect();
    let result_types: Vec<&str> = results.iter().map(|r| r.1.as_str()).collect();
    let _ = writeln!(
        out,
        "  func.func @main({}) -> ({}) {{",
        arg_text.join(", "),
        result_types.join(", ")
    );
    out.push_str(&w.text);
    let names: Vec<&str> = results.iter().map(|r| r.0.as_str()).collect();
    let _ = writeln!(
        out,
        "    return {} : {}\n  }}\n}}",
        names.join(", "),
        result_types.join(", ")
    );
    out
}

/// `(x - mean) * rsqrt(var)` over the last dim; returns it and the broadcast rsqrt.
fn layernorm(w: &mut Writer, x: &str, act: &[u64; 3]) -> (String, String) {
    let rows = [act[0], act[1]];
    let sum = w.reduce("add", x, "%zero", act, &[2]);
    let mean = w.broadcast(&sum, &rows, &[0, 1], act);
    let c = w.binary("subtract", x, &mean, act);
    let sq = w.binary("multiply", &c, &c, act);
    let var = w.reduce("add", &sq, "%zero", act, &[2]);
    let rs = w.unary("rsqrt", &var, &rows);
    let brs = w.broadcast(&rs, &rows, &[0, 1], act);
    (w.binary("multiply", &c, &brs, act), brs)
}

/// The layernorm derivative's shape: `(dn - n * sum(dn * n)) * rsqrt(var)`.
fn layernorm_grad(w: &mut Writer, dn: &str, n: &str, brs: &str, act: &[u64; 3]) -> String {
    let rows = [act[0], act[1]];
    let t = w.binary("multiply", dn, n, act);
    let r = w.reduce("add", &t, "%zero", act, &[2]);
    let br = w.broadcast(&r, &rows, &[0, 1], act);
    let t = w.binary("multiply", n, &br, act);
    let t = w.binary("subtract", dn, &t, act);
    w.binary("multiply", &t, brs, act)
}

/// Adam-like update: new weight, first and second moments.
fn adam(
    w: &mut Writer,
    wt: &str,
    m: &str,
    v: &str,
    g: &str,
    shape: &[u64; 2],
) -> (String, String, String) {
    let c = |w: &mut Writer, name: &str| w.splat(name, shape);
    let (b1, c1, b2, c2, eps, lr) = (
        c(w, "%b1"),
        c(w, "%c1"),
        c(w, "%b2"),
        c(w, "%c2"),
        c(w, "%eps"),
        c(w, "%lr"),
    );
    let m1 = w.binary("multiply", m, &b1, shape);
    let g1 = w.binary("multiply", g, &c1, shape);
    let mn = w.binary("add", &m1, &g1, shape);
    let v1 = w.binary("multiply", v, &b2, shape);
    let gg = w.binary("multiply", g, g, shape);
    let g2 = w.binary("multiply", &gg, &c2, shape);
    let vn = w.binary("add", &v1, &g2, shape);
    let sq = w.unary("sqrt", &vn, shape);
    let den = w.binary("add", &sq, &eps, shape);
    let upd = w.binary("divide", &mn, &den, shape);
    let us = w.binary("multiply", &upd, &lr, shape);
    let nw = w.binary("subtract", wt, &us, shape);
    (nw, mn, vn)
}
