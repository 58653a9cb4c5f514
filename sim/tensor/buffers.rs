//! Buffer helpers for the multi-device executor and the collective algorithms:
//! cut a tensor into equal pieces or arbitrary blocks, put blocks back, pad to a
//! shape, and combine buffers elementwise with a collective's reduction.
//!
//! Combining works in the element type, one pair at a time (as a device would
//! when it adds a received chunk into its own), so summation order is the
//! caller's: `reduce_buffers` folds left to right.

use crate::base::DType;

use super::elementwise::{binary, BinaryOp};
use super::index::{for_each_index, row_major_strides};
use super::shape_ops::{concatenate, pad, slice};
use super::{Scalar, Tensor, TensorError};

/// The reduction a collective applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CollectiveReduction {
    Sum,
    Prod,
    Min,
    Max,
    /// Sum, then divide by the number of buffers (integers: truncating division).
    Avg,
}

impl CollectiveReduction {
    /// Lower-case name (`sum`, `prod`, `min`, `max`, `avg`).
    pub fn name(self) -> &'static str {
        match self {
            CollectiveReduction::Sum => "sum",
            CollectiveReduction::Prod => "prod",
            CollectiveReduction::Min => "min",
            CollectiveReduction::Max => "max",
            CollectiveReduction::Avg => "avg",
        }
    }

    fn op(self) -> BinaryOp {
        match self {
            CollectiveReduction::Sum | CollectiveReduction::Avg => BinaryOp::Add,
            CollectiveReduction::Prod => BinaryOp::Multiply,
            CollectiveReduction::Min => BinaryOp::Minimum,
            CollectiveReduction::Max => BinaryOp::Maximum,
        }
    }
}

/// Split `x` along `dim` into `parts` equal pieces (the size must divide evenly).
pub fn split(x: &Tensor, dim: usize, parts: u64) -> Result<Vec<Tensor>, TensorError> {
    if dim >= x.rank() {
        return Err(TensorError::invalid(
            "split",
            format!("dim {dim} is out of range for rank {}", x.rank()),
        ));
    }
    let size = x.shape()[dim];
    if parts == 0 || size % parts != 0 {
        return Err(TensorError::invalid(
            "split",
            format!("dim {dim} of size {size} does not split into {parts} equal pieces"),
        ));
    }
    let step = size / parts;
    (0..parts)
        .map(|p| {
            let ranges: Vec<(u64, u64)> = (0..x.rank())
                .map(|d| {
                    if d == dim {
                        (p * step, (p + 1) * step)
                    } else {
                        (0, x.shape()[d])
                    }
                })
                .collect();
            extract_block(x, &ranges)
        })
        .collect()
}

/// Concatenate pieces along `dim` (the inverse of [`split`]).
pub fn concat_pieces(pieces: &[Tensor], dim: usize) -> Result<Tensor, TensorError> {
    concatenate(pieces, dim)
}

/// The block `[start, end)` per dim of `x`.
pub fn extract_block(x: &Tensor, ranges: &[(u64, u64)]) -> Result<Tensor, TensorError> {
    // A token holds no data: each device's block is a token.
    if x.dtype() == DType::Token && ranges.is_empty() {
        return Ok(Tensor::token());
    }
    if ranges.len() != x.rank() {
        return Err(TensorError::invalid(
            "extract_block",
            format!(
                "expected {} ranges (one per dim), found {}",
                x.rank(),
                ranges.len()
            ),
        ));
    }
    let starts: Vec<u64> = ranges.iter().map(|r| r.0).collect();
    let limits: Vec<u64> = ranges.iter().map(|r| r.1).collect();
    slice(x, &starts, &limits, &vec![1; x.rank()])
}

/// Write `block` into `x` with its first element at `starts`; it must fit.
pub fn insert_block(x: &mut Tensor, block: &Tensor, starts: &[u64]) -> Result<(), TensorError> {
    if x.dtype() == DType::Token && block.dtype() == DType::Token && starts.is_empty() {
        return Ok(());
    }
    let fits = block.rank() == x.rank()
        && starts.len() == x.rank()
        && (0..x.rank()).all(|d| {
            starts[d]
                .checked_add(block.shape()[d])
                .is_some_and(|end| end <= x.shape()[d])
        });
    if !fits || block.dtype() != x.dtype() {
        return Err(TensorError::invalid(
            "insert_block",
            format!(
                "block {} at {starts:?} does not fit in {}",
                block.tensor_type(),
                x.tensor_type()
            ),
        ));
    }
    write_block(x, block, starts);
    Ok(())
}

/// Write `block` at `starts` (checked by the caller).
pub(crate) fn write_block(x: &mut Tensor, block: &Tensor, starts: &[u64]) {
    let strides = row_major_strides(&x.dims());
    let mut dst = Vec::with_capacity(block.num_elements());
    for_each_index(&block.dims(), |idx| {
        dst.push(
            idx.iter()
                .zip(starts)
                .zip(&strides)
                .map(|((&i, &s), &st)| (i + s as usize) * st)
                .sum(),
        )
    });
    x.data_mut().scatter_from(block.data(), &dst);
}

/// Pad `x` at the high end of every dim up to `shape` with `value`.
pub fn pad_to_shape(x: &Tensor, shape: &[u64], value: Scalar) -> Result<Tensor, TensorError> {
    if x.dtype() == DType::Token && shape.is_empty() {
        return Ok(Tensor::token());
    }
    if shape.len() != x.rank() || shape.iter().zip(x.shape()).any(|(s, d)| s < d) {
        return Err(TensorError::invalid(
            "pad_to_shape",
            format!(
                "cannot pad {:?} to {shape:?}: expected the same rank and no smaller dim",
                x.shape()
            ),
        ));
    }
    let high: Vec<i64> = shape
        .iter()
        .zip(x.shape())
        .map(|(s, d)| i64::try_from(s - d))
        .collect::<Result<_, _>>()
        .map_err(|_| TensorError::invalid("pad_to_shape", "padding does not fit in i64"))?;
    pad(x, value, &vec![0; x.rank()], &high, &vec![0; x.rank()])
}

/// `acc = acc (kind) x` elementwise, in the element type (`Avg` adds; divide with
/// [`reduce_buffers`] or by hand at the end).
pub fn accumulate_into(
    acc: &mut Tensor,
    x: &Tensor,
    kind: CollectiveReduction,
) -> Result<(), TensorError> {
    *acc = binary(kind.op(), acc, x)?;
    Ok(())
}

/// Combine `bufs` elementwise with `kind`, folding left to right; `Avg` divides
/// the sum by `bufs.len()` at the end.
/// [`reduce_buffers`] with floats accumulated in f64 and rounded once (as
/// the interpreter's dot and reduce do), so a split reduction rounds twice at
/// most: once per partial, once at the end.
pub fn reduce_buffers_wide(
    bufs: &[Tensor],
    kind: CollectiveReduction,
) -> Result<Tensor, TensorError> {
    let dtype = bufs
        .first()
        .ok_or_else(|| TensorError::invalid("reduce_buffers", "expected at least one buffer"))?
        .dtype();
    if !dtype.is_float() || dtype == DType::F64 {
        return reduce_buffers(bufs, kind);
    }
    let wide: Vec<Tensor> = bufs
        .iter()
        .map(|b| crate::tensor::convert(b, DType::F64))
        .collect::<Result<_, _>>()?;
    crate::tensor::convert(&reduce_buffers(&wide, kind)?, dtype)
}

pub fn reduce_buffers(bufs: &[Tensor], kind: CollectiveReduction) -> Result<Tensor, TensorError> {
    let (first, rest) = bufs
        .split_first()
        .ok_or_else(|| TensorError::invalid("reduce_buffers", "expected at least one buffer"))?;
    if kind == CollectiveReduction::Avg && first.dtype() == DType::I1 {
        return Err(TensorError::dtype(
            "reduce_buffers",
            DType::I1,
            "a float or integer type for avg",
        ));
    }
    let mut acc = first.clone();
    for b in rest {
        accumulate_into(&mut acc, b, kind)?;
    }
    if kind == CollectiveReduction::Avg {
        let n = Tensor::splat(
            acc.shape().to_vec(),
            Scalar::from_i128(acc.dtype(), bufs.len() as i128),
        )?;
        acc = binary(BinaryOp::Divide, &acc, &n)?;
    }
    Ok(acc)
}
