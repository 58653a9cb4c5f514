//! StableHLO `scatter` with the full dimension numbers, batching dims included,
//! over one or more inputs, combining with a caller-given update function.
//!
//! Updates are applied one element at a time in row-major order over the update
//! index space, so colliding indices combine in a fixed order. An update window
//! that does not fit inside the input (start below 0 or start + window size above
//! the dim on any dim) is skipped whole, as XLA does (the spec leaves it to the
//! implementation); scatter start indices are never clamped.

use super::dim_numbers::{batch_position, check_dims, check_sorted, IndexVectors};
use super::index::{for_each_index, row_major_strides};
use super::{Scalar, Tensor, TensorError};

/// The dimension numbers of a `scatter`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct ScatterParams {
    pub update_window_dims: Vec<usize>,
    pub inserted_window_dims: Vec<usize>,
    pub input_batching_dims: Vec<usize>,
    pub scatter_indices_batching_dims: Vec<usize>,
    pub scatter_dims_to_operand_dims: Vec<usize>,
    /// May equal the indices rank: then every index is a vector of length 1.
    pub index_vector_dim: usize,
}

/// The update computation: `(current values, update values) -> new values`, one
/// scalar per input in each.
pub type ScatterUpdate<'a> =
    dyn FnMut(&[Scalar], &[Scalar]) -> Result<Vec<Scalar>, TensorError> + 'a;

const OP: &str = "scatter";

fn fail<T>(message: String) -> Result<T, TensorError> {
    Err(TensorError::invalid(OP, message))
}

/// Check that all tensors share the first one's shape, and pair element types.
fn check_operands(inputs: &[Tensor], updates: &[Tensor]) -> Result<(), TensorError> {
    let (Some(first), Some(first_update)) = (inputs.first(), updates.first()) else {
        return fail("expected at least one input and one update".into());
    };
    if inputs.len() != updates.len() {
        return fail(format!(
            "{} inputs need as many updates, found {}",
            inputs.len(),
            updates.len()
        ));
    }
    for (i, (x, u)) in inputs.iter().zip(updates).enumerate() {
        if x.shape() != first.shape() || u.shape() != first_update.shape() {
            return fail(format!(
                "input {i} {:?} / update {i} {:?} differ in shape from input 0 {:?} / update 0 {:?}",
                x.shape(),
                u.shape(),
                first.shape(),
                first_update.shape()
            ));
        }
        if x.dtype() != u.dtype() {
            return fail(format!(
                "input {i} has element type {}, its update has {}",
                x.dtype(),
                u.dtype()
            ));
        }
    }
    Ok(())
}

/// The input dims the update window spans, after checking every dimension number.
fn window_dims(
    input: &Tensor,
    updates: &Tensor,
    iv: &IndexVectors,
    indices_rank: usize,
    p: &ScatterParams,
) -> Result<Vec<usize>, TensorError> {
    let rank = input.rank();
    check_sorted(OP, "update_window_dims", &p.update_window_dims)?;
    check_sorted(OP, "inserted_window_dims", &p.inserted_window_dims)?;
    check_sorted(OP, "input_batching_dims", &p.input_batching_dims)?;
    check_dims(
        OP,
        "update_window_dims",
        &p.update_window_dims,
        updates.rank(),
    )?;
    let both: Vec<usize> = [&p.inserted_window_dims[..], &p.input_batching_dims].concat();
    check_dims(
        OP,
        "inserted_window_dims and input_batching_dims",
        &both,
        rank,
    )?;
    check_dims(
        OP,
        "scatter_dims_to_operand_dims",
        &p.scatter_dims_to_operand_dims,
        rank,
    )?;
    if let Some(d) = p
        .scatter_dims_to_operand_dims
        .iter()
        .find(|d| p.input_batching_dims.contains(d))
    {
        return fail(format!(
            "scatter_dims_to_operand_dims names input batching dim {d}"
        ));
    }
    if p.scatter_dims_to_operand_dims.len() != iv.vector_len {
        return fail(format!(
            "scatter_dims_to_operand_dims {:?} needs one entry per index vector component ({})",
            p.scatter_dims_to_operand_dims, iv.vector_len
        ));
    }
    let window: Vec<usize> = (0..rank).filter(|d| !both.contains(d)).collect();
    if window.len() != p.update_window_dims.len() {
        return fail(format!(
            "update_window_dims {:?} needs one entry per window dim of the input ({})",
            p.update_window_dims,
            window.len()
        ));
    }
    for (&w, &u) in window.iter().zip(&p.update_window_dims) {
        if updates.shape()[u] > input.shape()[w] {
            return fail(format!(
                "update window dim {u} (size {}) exceeds input dim {w} (size {})",
                updates.shape()[u],
                input.shape()[w]
            ));
        }
    }
    let scatter_dims: Vec<usize> = (0..updates.rank())
        .filter(|d| !p.update_window_dims.contains(d))
        .collect();
    let scatter_sizes: Vec<usize> = scatter_dims
        .iter()
        .map(|&d| updates.shape()[d] as usize)
        .collect();
    if scatter_sizes != iv.batch_shape {
        return fail(format!(
            "update scatter dims {scatter_dims:?} have sizes {scatter_sizes:?}, the indices batch shape is {:?}",
            iv.batch_shape
        ));
    }
    check_dims(
        OP,
        "scatter_indices_batching_dims",
        &p.scatter_indices_batching_dims,
        indices_rank,
    )?;
    if p.scatter_indices_batching_dims.len() != p.input_batching_dims.len() {
        return fail(format!(
            "input_batching_dims {:?} and scatter_indices_batching_dims {:?} differ in length",
            p.input_batching_dims, p.scatter_indices_batching_dims
        ));
    }
    for (&id, &sd) in p
        .input_batching_dims
        .iter()
        .zip(&p.scatter_indices_batching_dims)
    {
        if sd == p.index_vector_dim {
            return fail(format!(
                "scatter_indices_batching_dims names the index_vector_dim {sd}"
            ));
        }
        let size = iv.batch_shape[batch_position(sd, p.index_vector_dim)];
        if input.shape()[id] != size as u64 {
            return fail(format!(
                "input batching dim {id} (size {}) and indices batching dim {sd} (size {size}) differ",
                input.shape()[id]
            ));
        }
    }
    Ok(window)
}

/// `scatter(inputs, scatter_indices, updates)`: copies of `inputs` with every
/// in-bounds update combined in by `update(current, update)`.
pub fn scatter(
    inputs: &[Tensor],
    scatter_indices: &Tensor,
    updates: &[Tensor],
    p: &ScatterParams,
    update: &mut ScatterUpdate<'_>,
) -> Result<Vec<Tensor>, TensorError> {
    check_operands(inputs, updates)?;
    let (input, upd) = (&inputs[0], &updates[0]);
    let iv = IndexVectors::new(OP, scatter_indices, p.index_vector_dim)?;
    let window = window_dims(input, upd, &iv, scatter_indices.rank(), p)?;
    let input_dims = input.dims();
    let input_strides = row_major_strides(&input_dims);
    // The window extent on every input dim: 1 on inserted and batching dims.
    let mut extent = vec![1usize; input.rank()];
    for (&w, &u) in window.iter().zip(&p.update_window_dims) {
        extent[w] = upd.shape()[u] as usize;
    }
    // Flat start of each batch position's window, or None when it does not fit.
    let mut starts: Vec<Option<usize>> = Vec::new();
    for_each_index(&iv.batch_shape, |batch| {
        let mut start = vec![0i64; input.rank()];
        for (k, &d) in p.scatter_dims_to_operand_dims.iter().enumerate() {
            start[d] = iv.get(batch, k);
        }
        for (&id, &sd) in p
            .input_batching_dims
            .iter()
            .zip(&p.scatter_indices_batching_dims)
        {
            start[id] = batch[batch_position(sd, p.index_vector_dim)] as i64;
        }
        let fits = start
            .iter()
            .zip(&extent)
            .zip(&input_dims)
            .all(|((&s, &e), &dim)| s >= 0 && s.saturating_add(e as i64) <= dim as i64);
        starts.push(fits.then(|| {
            start
                .iter()
                .zip(&input_strides)
                .map(|(&s, &st)| s as usize * st)
                .sum()
        }));
    });
    let scatter_dims: Vec<usize> = (0..upd.rank())
        .filter(|d| !p.update_window_dims.contains(d))
        .collect();
    let batch_strides = row_major_strides(&iv.batch_shape);
    let mut results: Vec<Tensor> = inputs.to_vec();
    let mut flat = 0usize;
    let mut failure = None;
    let (mut current, mut values) = (Vec::new(), Vec::new());
    for_each_index(&upd.dims(), |u| {
        let here = flat;
        flat += 1;
        if failure.is_some() {
            return;
        }
        let batch: usize = scatter_dims
            .iter()
            .zip(&batch_strides)
            .map(|(&d, s)| u[d] * s)
            .sum();
        let Some(start) = starts[batch] else { return };
        let dst = start
            + window
                .iter()
                .zip(&p.update_window_dims)
                .map(|(&w, &ud)| u[ud] * input_strides[w])
                .sum::<usize>();
        current.clear();
        current.extend(results.iter().filter_map(|t| t.get_flat(dst)));
        values.clear();
        values.extend(updates.iter().filter_map(|t| t.get_flat(here)));
        match update(&current, &values) {
            Err(e) => failure = Some(e),
            Ok(new) => {
                if new.len() != results.len()
                    || new
                        .iter()
                        .zip(&results)
                        .any(|(s, t)| s.dtype() != t.dtype())
                {
                    failure = Some(TensorError::invalid(
                        OP,
                        format!(
                            "update computation returned {new:?}, expected {} values of the input types",
                            results.len()
                        ),
                    ));
                    return;
                }
                for (t, s) in results.iter_mut().zip(new) {
                    t.data_mut().set(dst, s);
                }
            }
        }
    });
    match failure {
        Some(e) => Err(e),
        None => Ok(results),
    }
}
