//! Row-major index arithmetic: strides, element counts and an odometer that
//! visits every multi-index of a shape in row-major order.

use super::TensorError;

/// Row-major strides (in elements) of `shape`.
pub fn row_major_strides(shape: &[usize]) -> Vec<usize> {
    let mut strides = vec![1usize; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        strides[d] = strides[d + 1] * shape[d + 1];
    }
    strides
}

/// The most elements one tensor may hold here (2^31): a reference interpreter that
/// materializes every value refuses larger ones with an error instead of aborting
/// on a failed allocation.
pub const MAX_ELEMENTS: u64 = 1 << 31;

/// Number of elements of `shape`, or an error above [`MAX_ELEMENTS`].
pub fn element_count(op: &str, shape: &[u64]) -> Result<usize, TensorError> {
    let mut n: u64 = 1;
    for &d in shape {
        n = n.saturating_mul(d);
    }
    if shape.contains(&0) {
        return Ok(0);
    }
    if n > MAX_ELEMENTS {
        return Err(TensorError::invalid(
            op,
            format!("shape {shape:?} has more than the {MAX_ELEMENTS} elements a tensor may hold"),
        ));
    }
    usize::try_from(n)
        .map_err(|_| TensorError::invalid(op, format!("shape {shape:?} is too large")))
}

/// Shape as usize (callers have checked the element count, so every dim fits).
pub fn to_usize(shape: &[u64]) -> Vec<usize> {
    shape.iter().map(|&d| d as usize).collect()
}

/// Visit every multi-index of `shape` in row-major order (nothing for an empty shape
/// with a zero dim; once for rank 0).
pub fn for_each_index(shape: &[usize], mut f: impl FnMut(&[usize])) {
    if shape.contains(&0) {
        return;
    }
    let mut idx = vec![0usize; shape.len()];
    loop {
        f(&idx);
        let mut d = shape.len();
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            idx[d] += 1;
            if idx[d] < shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
}
