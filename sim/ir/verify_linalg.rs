//! Result types of the linear-algebra ops (`stablehlo.cholesky`,
//! `stablehlo.triangular_solve`, `stablehlo.batch_norm_inference`), with
//! StableHLO's constraints: square matrices in the last two dims, matching
//! batch dims, the feature dim in range and 1-D statistics of its size, a
//! finite non-negative epsilon.

use crate::base::TensorType;

use super::ops::OpKind;

/// The result types of `kind` on operands `t`; None for other kinds.
pub fn infer_linalg(kind: &OpKind, t: &[&TensorType]) -> Option<Result<Vec<TensorType>, String>> {
    Some(match kind {
        OpKind::Cholesky { .. } => (|| {
            count(t, 1)?;
            square(t[0], "the operand")?;
            float(t[0])?;
            Ok(vec![t[0].clone()])
        })(),
        OpKind::TriangularSolve { left_side, .. } => (|| {
            count(t, 2)?;
            let (a, b) = (t[0], t[1]);
            let r = square(a, "a")?;
            float(a)?;
            if b.rank() != a.rank() || b.shape[..r] != a.shape[..r] || b.dtype != a.dtype {
                return Err(format!(
                    "b ({b}) must have a's ({a}) rank, batch dims and element type"
                ));
            }
            // Left side: b's rows match a; right side: its columns.
            let (dim, side) = if *left_side {
                (r, "rows")
            } else {
                (r + 1, "columns")
            };
            if b.shape[dim] != a.shape[r] {
                return Err(format!(
                    "b ({b}) must have {} {side} to match a ({a})",
                    a.shape[r]
                ));
            }
            Ok(vec![b.clone()])
        })(),
        OpKind::BatchNormInference {
            epsilon,
            feature_index,
        } => (|| {
            count(t, 5)?;
            let x = t[0];
            float(x)?;
            let f = usize::try_from(*feature_index)
                .ok()
                .filter(|&f| f < x.rank())
                .ok_or_else(|| format!("feature_index {feature_index} is out of range for {x}"))?;
            for (i, s) in t.iter().enumerate().skip(1) {
                if s.shape != [x.shape[f]] || s.dtype != x.dtype {
                    return Err(format!(
                        "operand {i} ({s}) must be tensor<{}x{}>, the feature dim's size",
                        x.shape[f], x.dtype
                    ));
                }
            }
            epsilon_value(epsilon)?;
            Ok(vec![x.clone()])
        })(),
        _ => return None,
    })
}

/// The value of an `epsilon = 1.000000e-03 : f32` attribute.
pub fn epsilon_value(text: &str) -> Result<f64, String> {
    let number = text.split(':').next().unwrap_or("").trim();
    number
        .parse::<f64>()
        .ok()
        .filter(|e| e.is_finite() && *e >= 0.0)
        .ok_or_else(|| format!("epsilon must be a finite non-negative float, found '{text}'"))
}

fn count(t: &[&TensorType], k: usize) -> Result<(), String> {
    if t.len() != k {
        return Err(format!("takes {k} operand(s), found {}", t.len()));
    }
    Ok(())
}

fn float(t: &TensorType) -> Result<(), String> {
    if !t.dtype.is_float() {
        return Err(format!("needs a floating-point operand, found {t}"));
    }
    Ok(())
}

/// The index of the first matrix dim of a batch of square matrices.
fn square(t: &TensorType, what: &str) -> Result<usize, String> {
    let r = t
        .rank()
        .checked_sub(2)
        .ok_or_else(|| format!("{what} must have rank 2 or more, found {t}"))?;
    if t.shape[r] != t.shape[r + 1] {
        return Err(format!("{what} must hold square matrices, found {t}"));
    }
    Ok(r)
}
