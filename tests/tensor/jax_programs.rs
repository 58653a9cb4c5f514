//! Whole JAX programs evaluated by hand with the kernels, one kernel call per
//! StableHLO op of the fixture's `lowered.mlir` (the shape the interpreter glue
//! will have), checked against JAX's own outputs within the interpreter's
//! tolerance (rtol 1e-4, atol 1e-5).

use shardsim::base::DType;
use shardsim::tensor::npy::read_npy;
use shardsim::tensor::{
    self as t, CompareDirection as Dir, DotDims, ReduceKind, Scalar, Tensor, TensorError,
};

use crate::common::fixture;

fn load(case: &str, file: &str) -> Tensor {
    read_npy(&fixture(&format!("jax/{case}/{file}"))).unwrap()
}

fn check(case: &str, out: usize, got: &Tensor) {
    let want = load(case, &format!("out{out}.npy"));
    assert_eq!(got.tensor_type(), want.tensor_type(), "{case} out{out}");
    let (abs, rel) = t::max_abs_rel_error(got, &want).unwrap();
    assert!(
        t::allclose(got, &want, 1e-4, 1e-5).unwrap(),
        "{case} out{out}: max abs {abs:e}, max rel {rel:e}"
    );
}

fn f32c(v: f32) -> Tensor {
    Tensor::scalar(Scalar::F32(v))
}

fn bcast(x: &Tensor, shape: &[u64], dims: &[usize]) -> Tensor {
    t::broadcast_in_dim(x, shape, dims).unwrap()
}

/// `x - max(x)`, `exp`, `/ sum` over dim 1 of a [rows, cols] tensor, as jax.nn.softmax lowers.
fn softmax_rows(x: &Tensor) -> Tensor {
    let (rows, cols) = (x.shape()[0], x.shape()[1]);
    let m = t::reduce(x, Scalar::F32(f32::NEG_INFINITY), &[1], ReduceKind::Max).unwrap();
    let m = t::maximum(&bcast(&f32c(f32::NEG_INFINITY), &[rows], &[]), &m).unwrap();
    let m = bcast(&bcast(&m, &[rows, 1], &[0]), &[rows, cols], &[0, 1]);
    let e = t::exponential(&t::subtract(x, &m).unwrap()).unwrap();
    let s = t::reduce(&e, Scalar::F32(0.0), &[1], ReduceKind::Add).unwrap();
    let s = bcast(&bcast(&s, &[rows, 1], &[0]), &[rows, cols], &[0, 1]);
    t::divide(&e, &s).unwrap()
}

#[test]
fn softmax_matches_jax() {
    check("softmax", 0, &softmax_rows(&load("softmax", "in0.npy")));
}

#[test]
fn causal_attention_matches_jax() {
    let c = "attention_single_head";
    let (x, wq, wk, wv, wo) = (
        load(c, "in0.npy"),
        load(c, "in1.npy"),
        load(c, "in2.npy"),
        load(c, "in3.npy"),
        load(c, "in4.npy"),
    );
    let mm = |a: &Tensor, b: &Tensor| {
        t::dot_general(a, b, &DotDims::plain_dot(a.rank()), DType::F32).unwrap()
    };
    let (q, k, v) = (mm(&x, &wq), mm(&x, &wk), mm(&x, &wv));
    let scores = mm(&q, &t::transpose(&k, &[1, 0]).unwrap());
    let scale = bcast(&t::sqrt(&f32c(32.0)).unwrap(), &[16, 16], &[]);
    let scores = t::divide(&scores, &scale).unwrap();
    let rows = bcast(
        &bcast(&t::iota(vec![16], 0, DType::I32).unwrap(), &[16, 1], &[0]),
        &[16, 16],
        &[0, 1],
    );
    let cols = bcast(
        &bcast(&t::iota(vec![16], 0, DType::I32).unwrap(), &[1, 16], &[1]),
        &[16, 16],
        &[0, 1],
    );
    let causal = t::compare(&rows, &cols, Dir::Ge).unwrap();
    let masked = t::select(
        &causal,
        &scores,
        &bcast(
            &t::convert(&f32c(-1e9), DType::F32).unwrap(),
            &[16, 16],
            &[],
        ),
    )
    .unwrap();
    let p = softmax_rows(&masked);
    check(c, 0, &mm(&mm(&p, &v), &wo));
}

/// The reducer JAX emits for argmax/argmin, evaluated op by op on rank-0 tensors
/// with the first operand group as the accumulator.
fn arg_reducer(dir: Dir) -> impl FnMut(&[Scalar], &[Scalar]) -> Result<Vec<Scalar>, TensorError> {
    move |acc, elem| {
        let (a1, a2, a3, a4) = (
            Tensor::scalar(acc[0]),
            Tensor::scalar(acc[1]),
            Tensor::scalar(elem[0]),
            Tensor::scalar(elem[1]),
        );
        let r2 = t::compare(&a1, &a3, dir)?;
        let r3 = t::compare(&a1, &a1, Dir::Ne)?;
        let r4 = t::or(&r2, &r3)?;
        let r5 = t::compare(&a1, &a3, Dir::Eq)?;
        let r6 = t::compare(&a2, &a4, Dir::Lt)?;
        let r7 = t::and(&r5, &r6)?;
        let r8 = t::or(&r4, &r7)?;
        let r9 = t::select(&r4, &a1, &a3)?;
        let r10 = t::select(&r8, &a2, &a4)?;
        Ok(vec![r9.to_scalar()?, r10.to_scalar()?])
    }
}

#[test]
fn argmax_and_argmin_match_jax() {
    let c = "argmax_sharded";
    let x = load(c, "in0.npy");
    for (out, dim, dir, init) in [
        (0, 1, Dir::Gt, f32::NEG_INFINITY),
        (1, 0, Dir::Lt, f32::INFINITY),
    ] {
        let idx = t::iota(x.shape().to_vec(), dim, DType::I32).unwrap();
        let inits = [Scalar::F32(init), Scalar::I32(0)];
        let r = t::reduce_with(&[x.clone(), idx], &inits, &[dim], &mut arg_reducer(dir)).unwrap();
        check(c, out, &r[1]);
    }
}

#[test]
fn pads_match_jax() {
    let c = "pad_sharded";
    let x = load(c, "in0.npy");
    let zero = t::convert(&Tensor::scalar(Scalar::I32(0)), DType::F32)
        .unwrap()
        .to_scalar()
        .unwrap();
    // (padding value, low, high, interior)
    type PadCase = (Scalar, [i64; 2], [i64; 2], [u64; 2]);
    let pads: [PadCase; 4] = [
        (zero, [1, 0], [2, 3], [0, 0]),
        (Scalar::F32(-1.0), [2, 1], [2, 1], [0, 0]),
        (Scalar::F32(0.5), [1, 0], [1, 0], [1, 0]),
        (Scalar::F32(0.0), [0, -2], [0, 1], [0, 0]),
    ];
    for (out, (value, low, high, interior)) in pads.into_iter().enumerate() {
        check(c, out, &t::pad(&x, value, &low, &high, &interior).unwrap());
    }
}

#[test]
fn dynamic_slice_clamps_like_jax() {
    let c = "dynamic_slice_index";
    let x = load(c, "in0.npy");
    // JAX wraps negative indices first (select on `i < 0`); StableHLO then clamps.
    let wrap = |i: Tensor| {
        let neg = t::compare(&i, &Tensor::scalar(Scalar::I32(0)), Dir::Lt).unwrap();
        let plus = t::add(&i, &Tensor::scalar(Scalar::I32(16))).unwrap();
        t::select(&neg, &plus, &i)
            .unwrap()
            .to_scalar()
            .unwrap()
            .to_i128()
            .unwrap() as i64
    };
    let starts = [wrap(load(c, "in1.npy")), wrap(load(c, "in2.npy"))];
    let s = t::dynamic_slice(&x, &starts, &[4, 8]).unwrap();
    check(
        c,
        0,
        &t::multiply(&s, &bcast(&f32c(2.0), &[4, 8], &[])).unwrap(),
    );
}
