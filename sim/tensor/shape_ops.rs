//! Data-movement kernels: constants, iota, broadcast_in_dim, reshape, transpose,
//! slice, dynamic_slice, dynamic_update_slice, concatenate, pad and reverse.
//!
//! Each computes, for every output position in row-major order, the flat source
//! position it reads (or `None` for padding) and gathers once.

use crate::base::DType;

use super::data::Data;
use super::index::{element_count, for_each_index, row_major_strides};
use super::{Scalar, Tensor, TensorError};

fn check_len(op: &str, what: &str, got: usize, rank: usize) -> Result<(), TensorError> {
    if got != rank {
        return Err(TensorError::invalid(
            op,
            format!("expected {rank} {what} (one per dimension), found {got}"),
        ));
    }
    Ok(())
}

/// Gather `x` where the source of output index `i` is `base + sum(i[d] * strides[d])`
/// (transpose, broadcast, slice and reverse are all of this form). Offsets are
/// updated incrementally, odometer style, instead of recomputed per element.
fn affine_gather(
    x: &Tensor,
    out_shape: Vec<u64>,
    strides: &[isize],
    base: isize,
) -> Result<Tensor, TensorError> {
    let n = element_count("gather", &out_shape)?;
    let dims: Vec<usize> = out_shape.iter().map(|&d| d as usize).collect();
    let mut idx = Vec::with_capacity(n);
    if n > 0 {
        let mut pos = vec![0usize; dims.len()];
        let mut off = base;
        'all: loop {
            idx.push(off as usize);
            let mut d = dims.len();
            loop {
                if d == 0 {
                    break 'all;
                }
                d -= 1;
                pos[d] += 1;
                off += strides[d];
                if pos[d] < dims[d] {
                    break;
                }
                off -= strides[d] * dims[d] as isize;
                pos[d] = 0;
            }
        }
    }
    Tensor::new(out_shape, x.data().take(&idx))
}

/// Row-major strides of `x` as signed offsets.
fn signed_strides(x: &Tensor) -> Vec<isize> {
    row_major_strides(&x.dims())
        .into_iter()
        .map(|s| s as isize)
        .collect()
}

/// StableHLO `constant` with a splat value.
pub fn constant_splat(shape: Vec<u64>, value: Scalar) -> Result<Tensor, TensorError> {
    Tensor::splat(shape, value)
}

/// StableHLO `constant` with one value per element (row-major), each converted to `dtype`.
pub fn constant_list(
    shape: Vec<u64>,
    dtype: DType,
    values: &[Scalar],
) -> Result<Tensor, TensorError> {
    let n = element_count("constant", &shape)?;
    if values.len() != n {
        return Err(TensorError::invalid(
            "constant",
            format!("shape {shape:?} needs {n} values, found {}", values.len()),
        ));
    }
    Tensor::from_scalars(shape, dtype, values)
}

/// StableHLO `iota`: element value is its index along `dim`.
pub fn iota(shape: Vec<u64>, dim: usize, dtype: DType) -> Result<Tensor, TensorError> {
    if dim >= shape.len() {
        return Err(TensorError::invalid(
            "iota",
            format!(
                "iota_dimension {dim} is out of range for rank {}",
                shape.len()
            ),
        ));
    }
    let n = element_count("iota", &shape)?;
    let dims: Vec<usize> = shape.iter().map(|&d| d as usize).collect();
    let mut values = Vec::with_capacity(n);
    for_each_index(&dims, |i| values.push(i[dim] as i128));
    Tensor::new(shape, Data::from_i128s(dtype, &values))
}

/// StableHLO `broadcast_in_dim`: operand dim `i` maps to result dim `dims[i]` and
/// must be 1 or equal to it.
pub fn broadcast_in_dim(
    x: &Tensor,
    out_shape: &[u64],
    dims: &[usize],
) -> Result<Tensor, TensorError> {
    const OP: &str = "broadcast_in_dim";
    check_len(OP, "broadcast_dimensions", dims.len(), x.rank())?;
    for (i, &d) in dims.iter().enumerate() {
        if d >= out_shape.len() {
            return Err(TensorError::invalid(
                OP,
                format!(
                    "broadcast_dimensions[{i}] = {d} is out of range for result rank {}",
                    out_shape.len()
                ),
            ));
        }
        if dims[..i].contains(&d) {
            return Err(TensorError::invalid(
                OP,
                format!("broadcast_dimensions {dims:?} repeat {d}"),
            ));
        }
        let size = x.shape()[i];
        if size != 1 && size != out_shape[d] {
            return Err(TensorError::invalid(
                OP,
                format!(
                    "operand dim {i} has size {size}, expected 1 or result dim {d}'s size {}",
                    out_shape[d]
                ),
            ));
        }
    }
    let in_strides = signed_strides(x);
    let mut strides = vec![0isize; out_shape.len()];
    for (i, &d) in dims.iter().enumerate() {
        if x.shape()[i] != 1 {
            strides[d] = in_strides[i];
        }
    }
    affine_gather(x, out_shape.to_vec(), &strides, 0)
}

/// StableHLO `reshape` (row-major order is kept).
pub fn reshape(x: &Tensor, shape: &[u64]) -> Result<Tensor, TensorError> {
    let n = element_count("reshape", shape)?;
    if n != x.num_elements() {
        return Err(TensorError::invalid(
            "reshape",
            format!(
                "cannot reshape {:?} ({} elements) to {shape:?} ({n} elements)",
                x.shape(),
                x.num_elements()
            ),
        ));
    }
    Ok(x.clone().with_shape(shape.to_vec()))
}

/// StableHLO `transpose`: result dim `i` is operand dim `perm[i]`.
pub fn transpose(x: &Tensor, perm: &[usize]) -> Result<Tensor, TensorError> {
    check_len("transpose", "permutation entries", perm.len(), x.rank())?;
    let mut seen = vec![false; perm.len()];
    for &p in perm {
        if p >= perm.len() || std::mem::replace(&mut seen[p], true) {
            return Err(TensorError::invalid(
                "transpose",
                format!("{perm:?} is not a permutation of 0..{}", perm.len()),
            ));
        }
    }
    let in_strides = signed_strides(x);
    let out_shape: Vec<u64> = perm.iter().map(|&p| x.shape()[p]).collect();
    let strides: Vec<isize> = perm.iter().map(|&p| in_strides[p]).collect();
    affine_gather(x, out_shape, &strides, 0)
}

/// StableHLO `slice`: `[start, limit)` with a positive stride per dim.
pub fn slice(
    x: &Tensor,
    starts: &[u64],
    limits: &[u64],
    strides: &[u64],
) -> Result<Tensor, TensorError> {
    const OP: &str = "slice";
    check_len(OP, "start indices", starts.len(), x.rank())?;
    check_len(OP, "limit indices", limits.len(), x.rank())?;
    check_len(OP, "strides", strides.len(), x.rank())?;
    let mut out_shape = Vec::with_capacity(x.rank());
    for d in 0..x.rank() {
        let (s, l, st, size) = (starts[d], limits[d], strides[d], x.shape()[d]);
        if s > l || l > size || st == 0 {
            return Err(TensorError::invalid(
                OP,
                format!("dim {d}: expected 0 <= start <= limit <= {size} and stride >= 1, found start {s}, limit {l}, stride {st}"),
            ));
        }
        out_shape.push((l - s).div_ceil(st));
    }
    let in_strides = signed_strides(x);
    // A dim with one output element never steps (its stride may be huge).
    let steps: Vec<isize> = (0..x.rank())
        .map(|d| {
            if out_shape[d] <= 1 {
                0
            } else {
                in_strides[d] * strides[d] as isize
            }
        })
        .collect();
    let base: isize = (0..x.rank())
        .map(|d| in_strides[d] * starts[d] as isize)
        .sum();
    affine_gather(x, out_shape, &steps, base)
}

/// Clamp StableHLO start indices into `[0, size - len]` per dim.
fn clamp_starts(
    op: &str,
    shape: &[u64],
    sizes: &[u64],
    starts: &[i64],
) -> Result<Vec<u64>, TensorError> {
    check_len(op, "start indices", starts.len(), shape.len())?;
    shape
        .iter()
        .zip(sizes)
        .zip(starts)
        .enumerate()
        .map(|(d, ((&dim, &len), &s))| {
            if len > dim {
                return Err(TensorError::invalid(
                    op,
                    format!("dim {d}: size {len} exceeds the operand's {dim}"),
                ));
            }
            Ok((s.max(0) as u64).min(dim - len))
        })
        .collect()
}

/// StableHLO `dynamic_slice`: start indices are clamped so the window fits.
pub fn dynamic_slice(x: &Tensor, starts: &[i64], sizes: &[u64]) -> Result<Tensor, TensorError> {
    check_len("dynamic_slice", "slice sizes", sizes.len(), x.rank())?;
    let s = clamp_starts("dynamic_slice", x.shape(), sizes, starts)?;
    let limits: Vec<u64> = s.iter().zip(sizes).map(|(a, b)| a + b).collect();
    slice(x, &s, &limits, &vec![1; x.rank()])
}

/// StableHLO `dynamic_update_slice`: `update` written at the clamped start indices.
pub fn dynamic_update_slice(
    x: &Tensor,
    update: &Tensor,
    starts: &[i64],
) -> Result<Tensor, TensorError> {
    const OP: &str = "dynamic_update_slice";
    if update.dtype() != x.dtype() {
        return Err(TensorError::invalid(
            OP,
            format!(
                "update has element type {}, operand has {}",
                update.dtype(),
                x.dtype()
            ),
        ));
    }
    check_len(OP, "update dimensions", update.rank(), x.rank())?;
    let s = clamp_starts(OP, x.shape(), update.shape(), starts)?;
    let mut out = x.clone();
    super::buffers::write_block(&mut out, update, &s);
    Ok(out)
}

/// StableHLO `concatenate` along `dim`; every other dim must agree.
pub fn concatenate(tensors: &[Tensor], dim: usize) -> Result<Tensor, TensorError> {
    const OP: &str = "concatenate";
    let first = tensors
        .first()
        .ok_or_else(|| TensorError::invalid(OP, "expected at least one operand"))?;
    if dim >= first.rank() {
        return Err(TensorError::invalid(
            OP,
            format!("dimension {dim} is out of range for rank {}", first.rank()),
        ));
    }
    let mut out_shape = first.shape().to_vec();
    out_shape[dim] = 0;
    for (k, t) in tensors.iter().enumerate() {
        let same_other_dims = t.rank() == first.rank()
            && (0..t.rank()).all(|d| d == dim || t.shape()[d] == first.shape()[d]);
        if t.dtype() != first.dtype() || !same_other_dims {
            return Err(TensorError::invalid(
                OP,
                format!(
                    "operand {k} is {}, expected {} with the shape of operand 0 {:?} outside dim {dim}",
                    t.tensor_type(),
                    first.dtype(),
                    first.shape()
                ),
            ));
        }
        out_shape[dim] += t.shape()[dim];
    }
    let outer: usize = first.dims()[..dim].iter().product();
    let inner: usize = first.dims()[dim + 1..].iter().product();
    let mut data = first.data().take(&[]);
    for o in 0..outer {
        for t in tensors {
            let chunk = t.dims()[dim] * inner;
            data.extend_from(&t.data().range(o * chunk, (o + 1) * chunk));
        }
    }
    Tensor::new(out_shape, data)
}

/// StableHLO `pad`: `low`/`high` may be negative (cropping); `interior` inserts
/// that many padding elements between neighbours.
pub fn pad(
    x: &Tensor,
    value: Scalar,
    low: &[i64],
    high: &[i64],
    interior: &[u64],
) -> Result<Tensor, TensorError> {
    const OP: &str = "pad";
    check_len(OP, "edge_padding_low entries", low.len(), x.rank())?;
    check_len(OP, "edge_padding_high entries", high.len(), x.rank())?;
    check_len(OP, "interior_padding entries", interior.len(), x.rank())?;
    if value.dtype() != x.dtype() {
        return Err(TensorError::invalid(
            OP,
            format!(
                "padding value has type {}, operand has {}",
                value.dtype(),
                x.dtype()
            ),
        ));
    }
    let mut out_shape = Vec::with_capacity(x.rank());
    for d in 0..x.rank() {
        let size = x.shape()[d] as i128;
        let dilated = if size == 0 {
            0
        } else {
            size + (size - 1) * interior[d] as i128
        };
        let n = low[d] as i128 + dilated + high[d] as i128;
        if n < 0 || n > u64::MAX as i128 {
            return Err(TensorError::invalid(
                OP,
                format!("dim {d}: low {} + dilated size {dilated} + high {} gives size {n}, expected >= 0", low[d], high[d]),
            ));
        }
        out_shape.push(n as u64);
    }
    let out_dims: Vec<usize> = out_shape.iter().map(|&d| d as usize).collect();
    let in_dims = x.dims();
    let strides = row_major_strides(&in_dims);
    let mut src = Vec::with_capacity(element_count(OP, &out_shape)?);
    for_each_index(&out_dims, |idx| {
        let mut flat = 0usize;
        for d in 0..idx.len() {
            let p = idx[d] as i128 - low[d] as i128;
            let step = interior[d] as i128 + 1;
            if p < 0 || p % step != 0 || p / step >= in_dims[d] as i128 {
                src.push(None);
                return;
            }
            flat += (p / step) as usize * strides[d];
        }
        src.push(Some(flat));
    });
    Tensor::new(out_shape, x.data().take_or(&src, value))
}

/// StableHLO `reverse` along each of `dims`.
pub fn reverse(x: &Tensor, dims: &[usize]) -> Result<Tensor, TensorError> {
    let mut flip = vec![false; x.rank()];
    for &d in dims {
        if d >= x.rank() || std::mem::replace(&mut flip[d], true) {
            return Err(TensorError::invalid(
                "reverse",
                format!(
                    "dimensions {dims:?} must be distinct and below rank {}",
                    x.rank()
                ),
            ));
        }
    }
    let in_strides = signed_strides(x);
    let strides: Vec<isize> = (0..x.rank())
        .map(|d| {
            if flip[d] {
                -in_strides[d]
            } else {
                in_strides[d]
            }
        })
        .collect();
    // Flipped dims start at their last element (never read when a dim is empty).
    let base: isize = (0..x.rank())
        .filter(|&d| flip[d])
        .map(|d| (x.shape()[d] as isize - 1) * in_strides[d])
        .sum();
    affine_gather(x, x.shape().to_vec(), &strides, base)
}
