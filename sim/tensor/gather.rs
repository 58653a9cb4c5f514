//! StableHLO `gather` with the full dimension numbers, batching dims included.
//!
//! Every result element reads one operand element: for a batch position (the
//! start indices without the index vector dim) the slice start is the index
//! vector scattered through `start_index_map` and clamped so the whole slice
//! fits (`clamp(start, 0, dim - slice_size)`, as the spec says), plus the batch
//! position itself on the operand batching dims, plus the offset inside the slice.

use super::dim_numbers::{batch_position, check_dims, check_sorted, IndexVectors};
use super::index::{element_count, for_each_index, row_major_strides};
use super::{Tensor, TensorError};

/// The dimension numbers and slice sizes of a `gather`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct GatherParams {
    pub offset_dims: Vec<usize>,
    pub collapsed_slice_dims: Vec<usize>,
    pub operand_batching_dims: Vec<usize>,
    pub start_indices_batching_dims: Vec<usize>,
    pub start_index_map: Vec<usize>,
    /// May equal the indices rank: then every index is a vector of length 1.
    pub index_vector_dim: usize,
    pub slice_sizes: Vec<u64>,
}

const OP: &str = "gather";

fn fail<T>(message: String) -> Result<T, TensorError> {
    Err(TensorError::invalid(OP, message))
}

/// The operand dims that the slice keeps as result offset dims, after checking
/// every dimension number against the operand and indices shapes.
fn window_dims(
    operand: &Tensor,
    iv: &IndexVectors,
    start_indices_rank: usize,
    p: &GatherParams,
) -> Result<Vec<usize>, TensorError> {
    let rank = operand.rank();
    if p.slice_sizes.len() != rank {
        return fail(format!(
            "slice_sizes {:?} needs one size per operand dim ({rank})",
            p.slice_sizes
        ));
    }
    for (d, (&s, &dim)) in p.slice_sizes.iter().zip(operand.shape()).enumerate() {
        if s > dim {
            return fail(format!(
                "slice size {s} of dim {d} exceeds the operand dim {dim}"
            ));
        }
    }
    check_sorted(OP, "offset_dims", &p.offset_dims)?;
    check_sorted(OP, "collapsed_slice_dims", &p.collapsed_slice_dims)?;
    check_sorted(OP, "operand_batching_dims", &p.operand_batching_dims)?;
    check_dims(OP, "collapsed_slice_dims", &p.collapsed_slice_dims, rank)?;
    check_dims(OP, "operand_batching_dims", &p.operand_batching_dims, rank)?;
    check_dims(OP, "start_index_map", &p.start_index_map, rank)?;
    let both: Vec<usize> = [&p.collapsed_slice_dims[..], &p.operand_batching_dims].concat();
    check_dims(
        OP,
        "collapsed_slice_dims and operand_batching_dims",
        &both,
        rank,
    )?;
    if let Some(&d) = both.iter().find(|&&d| p.slice_sizes[d] > 1) {
        return fail(format!(
            "collapsed or batching dim {d} needs slice size at most 1, found {}",
            p.slice_sizes[d]
        ));
    }
    if let Some(d) = p
        .start_index_map
        .iter()
        .find(|d| p.operand_batching_dims.contains(d))
    {
        return fail(format!("start_index_map names operand batching dim {d}"));
    }
    if p.start_index_map.len() != iv.vector_len {
        return fail(format!(
            "start_index_map {:?} needs one entry per index vector component ({})",
            p.start_index_map, iv.vector_len
        ));
    }
    check_dims(
        OP,
        "start_indices_batching_dims",
        &p.start_indices_batching_dims,
        start_indices_rank,
    )?;
    if p.start_indices_batching_dims.len() != p.operand_batching_dims.len() {
        return fail(format!(
            "operand_batching_dims {:?} and start_indices_batching_dims {:?} differ in length",
            p.operand_batching_dims, p.start_indices_batching_dims
        ));
    }
    for (&od, &sd) in p
        .operand_batching_dims
        .iter()
        .zip(&p.start_indices_batching_dims)
    {
        if sd == p.index_vector_dim {
            return fail(format!(
                "start_indices_batching_dims names the index_vector_dim {sd}"
            ));
        }
        let size = iv.batch_shape[batch_position(sd, p.index_vector_dim)];
        if operand.shape()[od] != size as u64 {
            return fail(format!(
                "operand batching dim {od} (size {}) and indices batching dim {sd} (size {size}) differ",
                operand.shape()[od]
            ));
        }
    }
    let window: Vec<usize> = (0..rank).filter(|d| !both.contains(d)).collect();
    if window.len() != p.offset_dims.len() {
        return fail(format!(
            "offset_dims {:?} needs one entry per kept slice dim ({})",
            p.offset_dims,
            window.len()
        ));
    }
    let result_rank = p.offset_dims.len() + iv.batch_shape.len();
    check_dims(OP, "offset_dims", &p.offset_dims, result_rank)?;
    Ok(window)
}

/// `gather(operand, start_indices)`; the result has the operand's element type.
pub fn gather(
    operand: &Tensor,
    start_indices: &Tensor,
    p: &GatherParams,
) -> Result<Tensor, TensorError> {
    let iv = IndexVectors::new(OP, start_indices, p.index_vector_dim)?;
    let window = window_dims(operand, &iv, start_indices.rank(), p)?;
    let result_rank = p.offset_dims.len() + iv.batch_shape.len();
    let batch_dims: Vec<usize> = (0..result_rank)
        .filter(|d| !p.offset_dims.contains(d))
        .collect();
    let window_shape: Vec<usize> = window.iter().map(|&d| p.slice_sizes[d] as usize).collect();
    let mut result_shape = vec![0u64; result_rank];
    for (&r, &s) in p.offset_dims.iter().zip(&window_shape) {
        result_shape[r] = s as u64;
    }
    for (&r, &s) in batch_dims.iter().zip(&iv.batch_shape) {
        result_shape[r] = s as u64;
    }
    let n = element_count(OP, &result_shape)?;
    let result_strides =
        row_major_strides(&result_shape.iter().map(|&d| d as usize).collect::<Vec<_>>());
    let operand_dims = operand.dims();
    let operand_strides = row_major_strides(&operand_dims);
    let mut source = vec![0usize; n];
    let mut start = vec![0usize; operand.rank()];
    for_each_index(&iv.batch_shape, |batch| {
        start.iter_mut().for_each(|s| *s = 0);
        for (k, &d) in p.start_index_map.iter().enumerate() {
            let hi = (operand_dims[d] as u64 - p.slice_sizes[d]) as i64;
            start[d] = iv.get(batch, k).clamp(0, hi) as usize;
        }
        for (&od, &sd) in p
            .operand_batching_dims
            .iter()
            .zip(&p.start_indices_batching_dims)
        {
            start[od] = batch[batch_position(sd, p.index_vector_dim)];
        }
        let start_flat: usize = start.iter().zip(&operand_strides).map(|(i, s)| i * s).sum();
        let batch_flat: usize = batch_dims
            .iter()
            .zip(batch)
            .map(|(&r, &i)| i * result_strides[r])
            .sum();
        for_each_index(&window_shape, |offset| {
            let mut src = start_flat;
            let mut dst = batch_flat;
            for (j, &o) in offset.iter().enumerate() {
                src += o * operand_strides[window[j]];
                dst += o * result_strides[p.offset_dims[j]];
            }
            source[dst] = src;
        });
    });
    Tensor::new(result_shape, operand.data().take(&source))
}
