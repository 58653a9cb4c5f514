//! `compare`, `select` and `clamp`: the kernels that mix predicates and values.

use super::data::Data;
use super::elementwise::{binary, check_same, BinaryOp};
use super::half::{bf16_to_f32, f16_to_f32};
use super::{Tensor, TensorError};
use crate::base::DType;

/// StableHLO's `comparison_direction`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CompareDirection {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl CompareDirection {
    /// From the StableHLO spelling (`EQ`, `NE`, `LT`, `LE`, `GT`, `GE`).
    pub fn from_name(name: &str) -> Option<CompareDirection> {
        Some(match name {
            "EQ" => CompareDirection::Eq,
            "NE" => CompareDirection::Ne,
            "LT" => CompareDirection::Lt,
            "LE" => CompareDirection::Le,
            "GT" => CompareDirection::Gt,
            "GE" => CompareDirection::Ge,
            _ => return None,
        })
    }

    fn holds_ord(self, ord: std::cmp::Ordering) -> bool {
        use std::cmp::Ordering::*;
        match self {
            CompareDirection::Eq => ord == Equal,
            CompareDirection::Ne => ord != Equal,
            CompareDirection::Lt => ord == Less,
            CompareDirection::Le => ord != Greater,
            CompareDirection::Gt => ord == Greater,
            CompareDirection::Ge => ord != Less,
        }
    }

    fn holds<T: PartialOrd>(self, a: T, b: T) -> bool {
        match self {
            CompareDirection::Eq => a == b,
            CompareDirection::Ne => a != b,
            CompareDirection::Lt => a < b,
            CompareDirection::Le => a <= b,
            CompareDirection::Gt => a > b,
            CompareDirection::Ge => a >= b,
        }
    }
}

fn cmp_vec<T: PartialOrd + Copy>(dir: CompareDirection, a: &[T], b: &[T]) -> Vec<bool> {
    a.iter().zip(b).map(|(&x, &y)| dir.holds(x, y)).collect()
}

fn cmp16(dir: CompareDirection, a: &[u16], b: &[u16], dec: fn(u16) -> f32) -> Vec<bool> {
    a.iter()
        .zip(b)
        .map(|(&x, &y)| dir.holds(dec(x), dec(y)))
        .collect()
}

/// Elementwise comparison giving i1. Floats follow IEEE (any comparison with NaN is
/// false except NE); signed and unsigned integers compare by their own type; for
/// i1, false < true.
pub fn compare(a: &Tensor, b: &Tensor, dir: CompareDirection) -> Result<Tensor, TensorError> {
    check_same("compare", a, b)?;
    let out = match (a.data(), b.data()) {
        (Data::F32(x), Data::F32(y)) => cmp_vec(dir, x, y),
        (Data::F64(x), Data::F64(y)) => cmp_vec(dir, x, y),
        (Data::BF16(x), Data::BF16(y)) => cmp16(dir, x, y, bf16_to_f32),
        (Data::F16(x), Data::F16(y)) => cmp16(dir, x, y, f16_to_f32),
        (Data::I1(x), Data::I1(y)) => cmp_vec(dir, x, y),
        (Data::I8(x), Data::I8(y)) => cmp_vec(dir, x, y),
        (Data::I32(x), Data::I32(y)) => cmp_vec(dir, x, y),
        (Data::I64(x), Data::I64(y)) => cmp_vec(dir, x, y),
        (Data::UI8(x), Data::UI8(y)) => cmp_vec(dir, x, y),
        (Data::UI32(x), Data::UI32(y)) => cmp_vec(dir, x, y),
        (Data::UI64(x), Data::UI64(y)) => cmp_vec(dir, x, y),
        _ => {
            return Err(TensorError::invalid(
                "compare",
                "operand element types differ",
            ))
        }
    };
    Tensor::new(a.shape().to_vec(), Data::I1(out))
}

/// `compare` with StableHLO's `TOTALORDER` compare type: floats follow IEEE 754
/// totalOrder (-NaN < -inf < ... < -0 < +0 < ... < +inf < +NaN, so NaN equals
/// itself); other element types compare as in [`compare`].
pub fn compare_total_order(
    a: &Tensor,
    b: &Tensor,
    dir: CompareDirection,
) -> Result<Tensor, TensorError> {
    check_same("compare", a, b)?;
    let total = |x: f64, y: f64| dir.holds_ord(x.total_cmp(&y));
    let out: Vec<bool> = match (a.data(), b.data()) {
        (Data::F32(x), Data::F32(y)) => x
            .iter()
            .zip(y)
            .map(|(p, q)| dir.holds_ord(p.total_cmp(q)))
            .collect(),
        (Data::F64(x), Data::F64(y)) => x
            .iter()
            .zip(y)
            .map(|(p, q)| dir.holds_ord(p.total_cmp(q)))
            .collect(),
        // bf16/f16 widen exactly and monotonically (NaN payloads included), so f64 totalOrder agrees.
        (Data::BF16(_), Data::BF16(_)) | (Data::F16(_), Data::F16(_)) => a
            .to_f64_vec()
            .into_iter()
            .zip(b.to_f64_vec())
            .map(|(p, q)| total(p, q))
            .collect(),
        _ => return compare(a, b, dir),
    };
    Tensor::new(a.shape().to_vec(), Data::I1(out))
}

/// `pred ? on_true : on_false` elementwise; `pred` is i1 of the operands' shape or a
/// rank-0 i1 that picks a whole operand.
pub fn select(pred: &Tensor, on_true: &Tensor, on_false: &Tensor) -> Result<Tensor, TensorError> {
    check_same("select", on_true, on_false)?;
    let Data::I1(p) = pred.data() else {
        return Err(TensorError::dtype(
            "select",
            pred.dtype(),
            "i1 for the predicate",
        ));
    };
    if pred.rank() == 0 {
        return Ok(if p[0] {
            on_true.clone()
        } else {
            on_false.clone()
        });
    }
    if pred.shape() != on_true.shape() {
        return Err(TensorError::invalid(
            "select",
            format!(
                "predicate shape {:?} is neither a scalar nor the operand shape {:?}",
                pred.shape(),
                on_true.shape()
            ),
        ));
    }
    let picked: Vec<usize> = p
        .iter()
        .enumerate()
        .filter(|(_, &b)| b)
        .map(|(i, _)| i)
        .collect();
    let mut out = on_false.clone();
    out.data_mut()
        .scatter_from(&on_true.data().take(&picked), &picked);
    Ok(out)
}

/// `min(max(x, lo), hi)` elementwise; `lo` and `hi` are rank-0 or of `x`'s shape,
/// all of `x`'s element type.
pub fn clamp(lo: &Tensor, x: &Tensor, hi: &Tensor) -> Result<Tensor, TensorError> {
    let widen = |bound: &Tensor, what: &str| -> Result<Tensor, TensorError> {
        if bound.dtype() != x.dtype() {
            return Err(TensorError::invalid(
                "clamp",
                format!(
                    "{what} has element type {}, operand has {}",
                    bound.dtype(),
                    x.dtype()
                ),
            ));
        }
        if bound.rank() == 0 {
            Tensor::splat(x.shape().to_vec(), bound.to_scalar()?)
        } else if bound.shape() == x.shape() {
            Ok(bound.clone())
        } else {
            Err(TensorError::invalid(
                "clamp",
                format!(
                    "{what} shape {:?} is neither a scalar nor the operand shape {:?}",
                    bound.shape(),
                    x.shape()
                ),
            ))
        }
    };
    if x.dtype() == DType::I1 {
        return Err(TensorError::dtype(
            "clamp",
            DType::I1,
            "a float or integer type",
        ));
    }
    let lo = widen(lo, "min")?;
    let hi = widen(hi, "max")?;
    binary(BinaryOp::Minimum, &binary(BinaryOp::Maximum, x, &lo)?, &hi)
}
