//! StableHLO `dot_general`: batch, contracting and free dimensions, result dims
//! ordered (batch, lhs free, rhs free). Floats accumulate in f64 and round once
//! to the result type; integers accumulate in i64 with wrapping (exact modulo
//! 2^64, so narrower results wrap like a native accumulator).

use crate::base::DType;

use super::convert::convert;
use super::data::Data;
use super::shape_ops::transpose;
use super::{Tensor, TensorError};

/// The dimension numbers of a `dot_general`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct DotDims {
    pub lhs_batch: Vec<usize>,
    pub rhs_batch: Vec<usize>,
    pub lhs_contract: Vec<usize>,
    pub rhs_contract: Vec<usize>,
}

impl DotDims {
    /// The dims of `stablehlo.dot` (lhs rank 1 or 2, rhs rank 1 or 2): contract the
    /// last lhs dim with the first rhs dim, no batch dims.
    pub fn plain_dot(lhs_rank: usize) -> DotDims {
        DotDims {
            lhs_contract: vec![lhs_rank.saturating_sub(1)],
            rhs_contract: vec![0],
            ..DotDims::default()
        }
    }
}

const OP: &str = "dot_general";

/// Free dims of an operand (neither batch nor contracting), checking the others.
fn free_dims(
    side: &str,
    t: &Tensor,
    batch: &[usize],
    contract: &[usize],
) -> Result<Vec<usize>, TensorError> {
    let mut used = vec![false; t.rank()];
    for &d in batch.iter().chain(contract) {
        if d >= t.rank() || std::mem::replace(&mut used[d], true) {
            return Err(TensorError::invalid(
                OP,
                format!(
                    "{side} batch {batch:?} and contracting {contract:?} dims must be distinct and below rank {}",
                    t.rank()
                ),
            ));
        }
    }
    Ok((0..t.rank()).filter(|&d| !used[d]).collect())
}

/// `dot_general(lhs, rhs)` with result element type `out`.
pub fn dot_general(
    lhs: &Tensor,
    rhs: &Tensor,
    dims: &DotDims,
    out: DType,
) -> Result<Tensor, TensorError> {
    if dims.lhs_batch.len() != dims.rhs_batch.len()
        || dims.lhs_contract.len() != dims.rhs_contract.len()
    {
        return Err(TensorError::invalid(
            OP,
            format!("lhs and rhs need as many batch and contracting dims, found {dims:?}"),
        ));
    }
    for t in [lhs, rhs] {
        if t.dtype() == DType::I1 {
            return Err(TensorError::dtype(OP, DType::I1, "a float or integer type"));
        }
    }
    if out == DType::I1 {
        return Err(TensorError::dtype(
            OP,
            DType::I1,
            "a float or integer result type",
        ));
    }
    let lhs_free = free_dims("lhs", lhs, &dims.lhs_batch, &dims.lhs_contract)?;
    let rhs_free = free_dims("rhs", rhs, &dims.rhs_batch, &dims.rhs_contract)?;
    for (kind, l, r) in [
        ("batch", &dims.lhs_batch, &dims.rhs_batch),
        ("contracting", &dims.lhs_contract, &dims.rhs_contract),
    ] {
        for (&a, &b) in l.iter().zip(r.iter()) {
            if lhs.shape()[a] != rhs.shape()[b] {
                return Err(TensorError::invalid(
                    OP,
                    format!(
                        "{kind} dims lhs {a} (size {}) and rhs {b} (size {}) differ",
                        lhs.shape()[a],
                        rhs.shape()[b]
                    ),
                ));
            }
        }
    }
    let size =
        |t: &Tensor, ds: &[usize]| -> usize { ds.iter().map(|&d| t.shape()[d] as usize).product() };
    let (b, m, n, k) = (
        size(lhs, &dims.lhs_batch),
        size(lhs, &lhs_free),
        size(rhs, &rhs_free),
        size(lhs, &dims.lhs_contract),
    );
    // Bring both operands to [batch, free, contract] so every dot is over contiguous rows.
    let lhs_perm: Vec<usize> = [&dims.lhs_batch[..], &lhs_free, &dims.lhs_contract].concat();
    let rhs_perm: Vec<usize> = [&dims.rhs_batch[..], &rhs_free, &dims.rhs_contract].concat();
    let l = transpose(lhs, &lhs_perm)?;
    let r = transpose(rhs, &rhs_perm)?;
    let mut out_shape: Vec<u64> = dims.lhs_batch.iter().map(|&d| lhs.shape()[d]).collect();
    out_shape.extend(lhs_free.iter().map(|&d| lhs.shape()[d]));
    out_shape.extend(rhs_free.iter().map(|&d| rhs.shape()[d]));

    let int_path = !lhs.dtype().is_float() && !rhs.dtype().is_float() && !out.is_float();
    let (mut ints, mut floats) = (Vec::new(), Vec::with_capacity(b * m * n));
    if int_path {
        let (Data::I64(lv), Data::I64(rv)) = (
            convert(&l, DType::I64)?.into_data(),
            convert(&r, DType::I64)?.into_data(),
        ) else {
            return Err(TensorError::invalid(
                OP,
                "integer operands did not widen to i64",
            ));
        };
        for bi in 0..b {
            for mi in 0..m {
                let lrow = &lv[(bi * m + mi) * k..][..k];
                for ni in 0..n {
                    let rrow = &rv[(bi * n + ni) * k..][..k];
                    let acc = lrow
                        .iter()
                        .zip(rrow)
                        .fold(0i64, |acc, (&x, &y)| acc.wrapping_add(x.wrapping_mul(y)));
                    ints.push(acc as i128);
                }
            }
        }
    } else {
        let (lv, rv) = (l.to_f64_vec(), r.to_f64_vec());
        for bi in 0..b {
            for mi in 0..m {
                let lrow = &lv[(bi * m + mi) * k..][..k];
                for ni in 0..n {
                    let rrow = &rv[(bi * n + ni) * k..][..k];
                    let acc: f64 = lrow.iter().zip(rrow).map(|(&x, &y)| x * y).sum();
                    floats.push(acc);
                }
            }
        }
    }
    let data = if int_path {
        Data::from_i128s(out, &ints)
    } else {
        Data::from_f64s(out, &floats)
    };
    Tensor::new(out_shape, data)
}
