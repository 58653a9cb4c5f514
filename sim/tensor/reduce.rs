//! StableHLO `reduce`: a fast path for the common bodies (add, mul, max, min,
//! and, or) and a general multi-operand form driven by a body closure.
//!
//! Order: for each result position (row-major over the kept dims), the
//! accumulator starts at the init value(s) and takes the reduced elements one by
//! one in row-major order over the reduced dims (ascending dim order). Floats
//! accumulate in f64 and round once to the element type; integers wrap.

use crate::base::DType;

use super::data::Data;
use super::index::{for_each_index, row_major_strides};
use super::{Scalar, Tensor, TensorError};

/// The body of a fast-path reduce.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ReduceKind {
    Add,
    Mul,
    Max,
    Min,
    And,
    Or,
}

/// Result shape plus, for the operand, the flat offset of each result position and
/// of each reduced position (their sum is the operand element).
struct Plan {
    out_shape: Vec<u64>,
    out_base: Vec<usize>,
    red_offsets: Vec<usize>,
}

fn plan(op: &str, shape: &[u64], dims: &[usize]) -> Result<Plan, TensorError> {
    let rank = shape.len();
    let mut reduced = vec![false; rank];
    for &d in dims {
        if d >= rank || std::mem::replace(&mut reduced[d], true) {
            return Err(TensorError::invalid(
                op,
                format!("dimensions {dims:?} must be distinct and below rank {rank}"),
            ));
        }
    }
    let sizes: Vec<usize> = shape.iter().map(|&d| d as usize).collect();
    let strides = row_major_strides(&sizes);
    let kept: Vec<usize> = (0..rank).filter(|&d| !reduced[d]).collect();
    let red: Vec<usize> = (0..rank).filter(|&d| reduced[d]).collect();
    let offsets = |ds: &[usize]| {
        let sub: Vec<usize> = ds.iter().map(|&d| sizes[d]).collect();
        let mut out = Vec::new();
        for_each_index(&sub, |i| {
            out.push(i.iter().zip(ds).map(|(&x, &d)| x * strides[d]).sum())
        });
        out
    };
    Ok(Plan {
        out_shape: kept.iter().map(|&d| shape[d]).collect(),
        out_base: offsets(&kept),
        red_offsets: offsets(&red),
    })
}

/// Reduce `x` over `dims` with `kind`, starting from `init` (of `x`'s type).
pub fn reduce(
    x: &Tensor,
    init: Scalar,
    dims: &[usize],
    kind: ReduceKind,
) -> Result<Tensor, TensorError> {
    const OP: &str = "reduce";
    if init.dtype() != x.dtype() {
        return Err(TensorError::invalid(
            OP,
            format!(
                "init value has type {}, operand has {}",
                init.dtype(),
                x.dtype()
            ),
        ));
    }
    let dtype = x.dtype();
    if dtype.is_float() && matches!(kind, ReduceKind::And | ReduceKind::Or) {
        return Err(TensorError::dtype(
            OP,
            dtype,
            "i1 or an integer type for and/or",
        ));
    }
    let p = plan(OP, x.shape(), dims)?;
    let (mut floats, mut ints) = (Vec::new(), Vec::new());
    if dtype.is_float() {
        let v = x.to_f64_vec();
        for &base in &p.out_base {
            let mut acc = init.to_f64();
            for &off in &p.red_offsets {
                let e = v[base + off];
                acc = match kind {
                    ReduceKind::Add => acc + e,
                    ReduceKind::Mul => acc * e,
                    _ if acc.is_nan() || e.is_nan() => f64::NAN,
                    ReduceKind::Max => acc.max(e),
                    _ => acc.min(e),
                };
            }
            floats.push(acc);
        }
    } else {
        let v = x.data().to_i128_vec().unwrap_or_default();
        let boolean = dtype == DType::I1;
        for &base in &p.out_base {
            let mut acc = init.to_i128().unwrap_or(0);
            for &off in &p.red_offsets {
                let e = v[base + off];
                acc = match (kind, boolean) {
                    (ReduceKind::Add | ReduceKind::Max | ReduceKind::Or, true) => acc | e,
                    (ReduceKind::Mul | ReduceKind::Min | ReduceKind::And, true) => acc & e,
                    (ReduceKind::Add, false) => acc.wrapping_add(e),
                    (ReduceKind::Mul, false) => acc.wrapping_mul(e),
                    (ReduceKind::Max, false) => acc.max(e),
                    (ReduceKind::Min, false) => acc.min(e),
                    (ReduceKind::And, false) => acc & e,
                    (ReduceKind::Or, false) => acc | e,
                };
            }
            ints.push(acc);
        }
    }
    let data = if dtype.is_float() {
        Data::from_f64s(dtype, &floats)
    } else {
        Data::from_i128s(dtype, &ints)
    };
    Tensor::new(p.out_shape, data)
}

/// The body of a general reduce: `(accumulators, elements) -> new accumulators`,
/// one scalar per operand in each.
pub type ReduceBody<'a> = dyn FnMut(&[Scalar], &[Scalar]) -> Result<Vec<Scalar>, TensorError> + 'a;

/// Multi-operand reduce (e.g. argmax over values and indices). All inputs share a
/// shape; `inits[i]` has `inputs[i]`'s type. For each result position the body is
/// called as `body(acc, elem)` over the reduced positions in row-major order.
pub fn reduce_with(
    inputs: &[Tensor],
    inits: &[Scalar],
    dims: &[usize],
    body: &mut ReduceBody<'_>,
) -> Result<Vec<Tensor>, TensorError> {
    const OP: &str = "reduce";
    let first = inputs
        .first()
        .ok_or_else(|| TensorError::invalid(OP, "expected at least one operand"))?;
    if inits.len() != inputs.len() {
        return Err(TensorError::invalid(
            OP,
            format!(
                "{} operands need as many init values, found {}",
                inputs.len(),
                inits.len()
            ),
        ));
    }
    for (i, (t, init)) in inputs.iter().zip(inits).enumerate() {
        if t.shape() != first.shape() {
            return Err(TensorError::invalid(
                OP,
                format!(
                    "operand {i} has shape {:?}, operand 0 has {:?}",
                    t.shape(),
                    first.shape()
                ),
            ));
        }
        if init.dtype() != t.dtype() {
            return Err(TensorError::invalid(
                OP,
                format!(
                    "init value {i} has type {}, operand has {}",
                    init.dtype(),
                    t.dtype()
                ),
            ));
        }
    }
    let p = plan(OP, first.shape(), dims)?;
    let mut columns: Vec<Vec<Scalar>> = vec![Vec::with_capacity(p.out_base.len()); inputs.len()];
    let mut elems = Vec::with_capacity(inputs.len());
    for &base in &p.out_base {
        let mut acc = inits.to_vec();
        for &off in &p.red_offsets {
            elems.clear();
            elems.extend(inputs.iter().filter_map(|t| t.get_flat(base + off)));
            let next = body(&acc, &elems)?;
            if next.len() != inputs.len()
                || next.iter().zip(inits).any(|(a, b)| a.dtype() != b.dtype())
            {
                return Err(TensorError::invalid(
                    OP,
                    format!(
                        "body returned {next:?}, expected {} values of types {:?}",
                        inputs.len(),
                        inits.iter().map(|s| s.dtype()).collect::<Vec<_>>()
                    ),
                ));
            }
            acc = next;
        }
        for (col, v) in columns.iter_mut().zip(acc) {
            col.push(v);
        }
    }
    columns
        .iter()
        .zip(inits)
        .map(|(col, init)| Tensor::from_scalars(p.out_shape.clone(), init.dtype(), col))
        .collect()
}
