//! Kernels of the linear-algebra ops, batched over the leading dims and
//! computed in f64 then rounded once to the element type: Cholesky
//! factorisation (reads one triangle, zeroes the other), triangular solve
//! by substitution (left `op(a) x = b` or right `x op(a) = b`), and batch
//! normalisation with given statistics.

use crate::ir::ops::OpKind;
use crate::ir::verify_linalg::epsilon_value;
use crate::tensor::{Data, Tensor};

/// The result of `kind` on `args` (types already verified).
pub(super) fn eval_linalg(kind: &OpKind, args: &[Tensor]) -> Result<Vec<Tensor>, String> {
    let out = |like: &Tensor, v: Vec<f64>| {
        Tensor::new(like.shape().to_vec(), Data::from_f64s(like.dtype(), &v))
            .map(|t| vec![t])
            .map_err(|e| e.to_string())
    };
    match kind {
        OpKind::Cholesky { lower } => {
            let a = args.first().ok_or("missing operand")?;
            let n = matrix_size(a)?;
            let mut v = a.to_f64_vec();
            for m in v.chunks_mut(n * n) {
                cholesky(m, n, *lower);
            }
            out(a, v)
        }
        OpKind::TriangularSolve {
            left_side,
            lower,
            unit_diagonal,
            transpose_a,
        } => {
            let [a, b] = args else {
                return Err("takes two operands".into());
            };
            let n = matrix_size(a)?;
            let r = b.shape().len();
            let (rows, cols) = (b.shape()[r - 2] as usize, b.shape()[r - 1] as usize);
            let (av, mut bv) = (a.to_f64_vec(), b.to_f64_vec());
            for (am, bm) in av.chunks(n * n).zip(bv.chunks_mut(rows * cols)) {
                // The triangle `a` is read from, with its diagonal.
                let at = |i: usize, j: usize| {
                    if i == j && *unit_diagonal {
                        1.0
                    } else if (j <= i) == *lower || i == j {
                        am[i * n + j]
                    } else {
                        0.0
                    }
                };
                let t = transpose_a.transposed();
                // m = op(a) (left) or op(a)^T (right: x op(a) = b is
                // op(a)^T x^T = b^T), applied to b or to b^T: a itself when
                // exactly one of the two transposes applies.
                let flip = t == *left_side;
                let m = |i: usize, j: usize| if flip { at(j, i) } else { at(i, j) };
                let m_lower = *lower != flip;
                if *left_side {
                    solve(&m, m_lower, n, cols, |i, j| i * cols + j, bm);
                } else {
                    solve(&m, m_lower, n, rows, |i, j| j * cols + i, bm);
                }
            }
            out(b, bv)
        }
        OpKind::BatchNormInference {
            epsilon,
            feature_index,
        } => {
            let [x, scale, offset, mean, var] = args else {
                return Err("takes five operands".into());
            };
            let eps = epsilon_value(epsilon)?;
            let shape = x.shape();
            let f = *feature_index as usize;
            let inner: u64 = shape[f + 1..].iter().product();
            let size = shape[f];
            let (s, o, m, va) = (
                scale.to_f64_vec(),
                offset.to_f64_vec(),
                mean.to_f64_vec(),
                var.to_f64_vec(),
            );
            let v: Vec<f64> = x
                .to_f64_vec()
                .iter()
                .enumerate()
                .map(|(i, &e)| {
                    let c = ((i as u64 / inner) % size) as usize;
                    (e - m[c]) / (va[c] + eps).sqrt() * s[c] + o[c]
                })
                .collect();
            out(x, v)
        }
        _ => Err("not a linear-algebra op".into()),
    }
}

/// The size of the square matrices in the last two dims.
fn matrix_size(a: &Tensor) -> Result<usize, String> {
    let s = a.shape();
    match s {
        [.., m, n] if m == n => Ok(*n as usize),
        _ => Err("needs square matrices in its last two dims".into()),
    }
}

/// In place: the lower (or upper) Cholesky factor of the n x n matrix `m`,
/// read from that triangle; the other triangle becomes 0. A matrix that is
/// not positive definite gives NaNs, as XLA does.
fn cholesky(m: &mut [f64], n: usize, lower: bool) {
    // Work on the lower triangle of a (or of a^T for upper).
    let get = |m: &[f64], i: usize, j: usize| if lower { m[i * n + j] } else { m[j * n + i] };
    let mut l = vec![0.0; n * n];
    for j in 0..n {
        let d = get(m, j, j) - (0..j).map(|k| l[j * n + k] * l[j * n + k]).sum::<f64>();
        let d = if d > 0.0 { d.sqrt() } else { f64::NAN };
        l[j * n + j] = d;
        for i in j + 1..n {
            let s = get(m, i, j) - (0..j).map(|k| l[i * n + k] * l[j * n + k]).sum::<f64>();
            l[i * n + j] = s / d;
        }
    }
    for i in 0..n {
        for j in 0..n {
            m[i * n + j] = if lower { l[i * n + j] } else { l[j * n + i] };
        }
    }
}

/// Solves `m x = b` in place for the `k` columns of `b` (element (i, j) at
/// `at(i, j)`), `m` triangular (lower or upper) n x n.
fn solve(
    m: &dyn Fn(usize, usize) -> f64,
    lower: bool,
    n: usize,
    k: usize,
    at: impl Fn(usize, usize) -> usize,
    b: &mut [f64],
) {
    for j in 0..k {
        let order: Vec<usize> = if lower {
            (0..n).collect()
        } else {
            (0..n).rev().collect()
        };
        for &i in &order {
            let known: f64 = if lower {
                (0..i).map(|p| m(i, p) * b[at(p, j)]).sum()
            } else {
                (i + 1..n).map(|p| m(i, p) * b[at(p, j)]).sum()
            };
            b[at(i, j)] = (b[at(i, j)] - known) / m(i, i);
        }
    }
}
