//! StableHLO `sort` (several operands sorted together by one comparator) and
//! `chlo.top_k`.
//!
//! The sort is a merge sort written here rather than `slice::sort_by`: the
//! comparator comes from the program and need not be a strict weak order (a plain
//! `LT` on floats with NaN is not), and the standard sort may panic on such a
//! comparator. This one never panics, calls the comparator a bounded number of
//! times, and is stable whatever `is_stable` says (a stable order is one of the
//! orders an unstable sort may give, so it is always a correct answer).

use super::data::Data;
use super::index::{for_each_index, row_major_strides};
use super::{Scalar, Tensor, TensorError};

/// The sort comparator: `less(lhs, rhs)` with one scalar per operand in each.
pub type SortLess<'a> = dyn FnMut(&[Scalar], &[Scalar]) -> Result<bool, TensorError> + 'a;

/// Stable merge sort of `perm` (positions into `keys`): an element from the right
/// half goes first only when it is strictly less than the left one.
fn merge_sort(
    perm: &mut [usize],
    keys: &[Vec<Scalar>],
    less: &mut SortLess<'_>,
    scratch: &mut Vec<usize>,
) -> Result<(), TensorError> {
    let n = perm.len();
    let mut width = 1;
    while width < n {
        let mut lo = 0;
        while lo < n {
            let mid = (lo + width).min(n);
            let hi = (lo + 2 * width).min(n);
            scratch.clear();
            let (mut i, mut j) = (lo, mid);
            while i < mid && j < hi {
                if less(&keys[perm[j]], &keys[perm[i]])? {
                    scratch.push(perm[j]);
                    j += 1;
                } else {
                    scratch.push(perm[i]);
                    i += 1;
                }
            }
            scratch.extend_from_slice(&perm[i..mid]);
            scratch.extend_from_slice(&perm[j..hi]);
            perm[lo..hi].copy_from_slice(scratch);
            lo = hi;
        }
        width *= 2;
    }
    Ok(())
}

/// Sort `inputs` (all of one shape) along `dim`: at every position of the other
/// dims, the tuples `(inputs[0][.., i, ..], inputs[1][.., i, ..], ...)` are
/// reordered so that `less` holds for no later tuple against an earlier one.
pub fn sort(
    inputs: &[Tensor],
    dim: usize,
    is_stable: bool,
    less: &mut SortLess<'_>,
) -> Result<Vec<Tensor>, TensorError> {
    const OP: &str = "sort";
    let _ = is_stable; // always stable, see the module doc
    let first = inputs
        .first()
        .ok_or_else(|| TensorError::invalid(OP, "expected at least one operand"))?;
    if let Some((i, t)) = inputs
        .iter()
        .enumerate()
        .find(|(_, t)| t.shape() != first.shape())
    {
        return Err(TensorError::invalid(
            OP,
            format!(
                "operand {i} has shape {:?}, operand 0 has {:?}",
                t.shape(),
                first.shape()
            ),
        ));
    }
    if dim >= first.rank() {
        return Err(TensorError::invalid(
            OP,
            format!("dimension {dim} is not below the rank {}", first.rank()),
        ));
    }
    let dims = first.dims();
    let strides = row_major_strides(&dims);
    let (len, stride) = (dims[dim], strides[dim]);
    let mut outer = dims.clone();
    outer[dim] = 1;
    let mut source = vec![0usize; first.num_elements()];
    let (mut perm, mut scratch, mut keys) = (Vec::new(), Vec::new(), Vec::new());
    let mut failure = None;
    for_each_index(&outer, |idx| {
        if failure.is_some() {
            return;
        }
        let base: usize = idx.iter().zip(&strides).map(|(i, s)| i * s).sum();
        keys.clear();
        keys.extend((0..len).map(|i| {
            inputs
                .iter()
                .filter_map(|t| t.get_flat(base + i * stride))
                .collect::<Vec<Scalar>>()
        }));
        perm.clear();
        perm.extend(0..len);
        if let Err(e) = merge_sort(&mut perm, &keys, less, &mut scratch) {
            failure = Some(e);
            return;
        }
        for (i, &p) in perm.iter().enumerate() {
            source[base + i * stride] = base + p * stride;
        }
    });
    if let Some(e) = failure {
        return Err(e);
    }
    inputs
        .iter()
        .map(|t| Tensor::new(t.shape().to_vec(), t.data().take(&source)))
        .collect()
}

/// The order `top_k` ranks by: floats by IEEE totalOrder (so NaN is above +inf,
/// as XLA's TopK does), integers and bool numerically.
fn rank_key(s: Scalar) -> (f64, i128) {
    match s.to_i128() {
        Some(i) => (0.0, i),
        None => (s.to_f64(), 0),
    }
}

/// `chlo.top_k`: the `k` largest elements along the last dim in descending order,
/// ties taken by lower index first, and their positions as i32.
pub fn top_k(operand: &Tensor, k: u64) -> Result<(Tensor, Tensor), TensorError> {
    const OP: &str = "top_k";
    let Some(&last) = operand.shape().last() else {
        return Err(TensorError::invalid(OP, "operand must have rank 1 or more"));
    };
    if k > last {
        return Err(TensorError::invalid(
            OP,
            format!("k = {k} exceeds the last dim {last}"),
        ));
    }
    let (n, k) = (last as usize, k as usize);
    let rows = operand.num_elements().checked_div(n).unwrap_or(0);
    let keys: Vec<(f64, i128)> = (0..operand.num_elements())
        .filter_map(|i| operand.get_flat(i).map(rank_key))
        .collect();
    let (mut source, mut indices) = (Vec::with_capacity(rows * k), Vec::with_capacity(rows * k));
    let mut perm: Vec<usize> = Vec::with_capacity(n);
    for r in 0..rows {
        let row = &keys[r * n..(r + 1) * n];
        perm.clear();
        perm.extend(0..n);
        // Stable, so equal keys keep ascending positions.
        perm.sort_by(|&a, &b| {
            let (x, y) = (row[a], row[b]);
            y.0.total_cmp(&x.0).then(y.1.cmp(&x.1))
        });
        for &p in &perm[..k] {
            source.push(r * n + p);
            indices.push(p as i32);
        }
    }
    let mut shape = operand.shape().to_vec();
    if let Some(l) = shape.last_mut() {
        *l = k as u64;
    }
    let values = Tensor::new(shape.clone(), operand.data().take(&source))?;
    Ok((values, Tensor::new(shape, Data::I32(indices))?))
}
