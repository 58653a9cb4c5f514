//! Checks and index arithmetic shared by the kernels with StableHLO dimension
//! numbers (gather, scatter): dim-list validation and the index vectors of a
//! `start_indices`/`scatter_indices` tensor with an `index_vector_dim`.

use super::index::row_major_strides;
use super::{Tensor, TensorError};

/// Check that `dims` are distinct and below `rank`.
pub(crate) fn check_dims(
    op: &str,
    what: &str,
    dims: &[usize],
    rank: usize,
) -> Result<(), TensorError> {
    let mut seen = vec![false; rank];
    for &d in dims {
        if d >= rank || std::mem::replace(&mut seen[d], true) {
            return Err(TensorError::invalid(
                op,
                format!("{what} {dims:?} must be distinct and below rank {rank}"),
            ));
        }
    }
    Ok(())
}

/// Check that `dims` are strictly increasing (sorted and distinct).
pub(crate) fn check_sorted(op: &str, what: &str, dims: &[usize]) -> Result<(), TensorError> {
    if dims.windows(2).any(|w| w[0] >= w[1]) {
        return Err(TensorError::invalid(
            op,
            format!("{what} {dims:?} must be sorted and distinct"),
        ));
    }
    Ok(())
}

/// The index vectors of an indices tensor: one vector of `vector_len` integers per
/// position of the batch shape (the indices shape without `index_vector_dim`; when
/// `index_vector_dim` equals the rank, every element is a vector of length 1).
pub(crate) struct IndexVectors {
    values: Vec<i64>,
    /// The indices shape without the index vector dim.
    pub batch_shape: Vec<usize>,
    /// Flat stride of each batch dim in `values`.
    batch_strides: Vec<usize>,
    /// Flat stride along the index vector dim.
    vector_stride: usize,
    pub vector_len: usize,
}

impl IndexVectors {
    pub(crate) fn new(
        op: &str,
        indices: &Tensor,
        index_vector_dim: usize,
    ) -> Result<IndexVectors, TensorError> {
        let rank = indices.rank();
        if index_vector_dim > rank {
            return Err(TensorError::invalid(
                op,
                format!("index_vector_dim {index_vector_dim} is above the indices rank {rank}"),
            ));
        }
        let ints = indices
            .data()
            .to_i128_vec()
            .filter(|_| indices.dtype() != crate::base::DType::I1)
            .ok_or_else(|| TensorError::dtype(op, indices.dtype(), "an integer index type"))?;
        let values = ints
            .into_iter()
            .map(|i| i.clamp(i64::MIN as i128, i64::MAX as i128) as i64)
            .collect();
        let dims = indices.dims();
        let strides = row_major_strides(&dims);
        let keep: Vec<usize> = (0..rank).filter(|&d| d != index_vector_dim).collect();
        let (vector_len, vector_stride) = if index_vector_dim == rank {
            (1, 0)
        } else {
            (dims[index_vector_dim], strides[index_vector_dim])
        };
        Ok(IndexVectors {
            values,
            batch_shape: keep.iter().map(|&d| dims[d]).collect(),
            batch_strides: keep.iter().map(|&d| strides[d]).collect(),
            vector_stride,
            vector_len,
        })
    }

    /// Component `k` of the index vector at batch position `batch`.
    pub(crate) fn get(&self, batch: &[usize], k: usize) -> i64 {
        let base: usize = batch
            .iter()
            .zip(&self.batch_strides)
            .map(|(i, s)| i * s)
            .sum();
        self.values[base + k * self.vector_stride]
    }
}

/// The position in the batch shape (indices without the index vector dim) that a
/// batching dim `d` of the indices tensor occupies.
pub(crate) fn batch_position(d: usize, index_vector_dim: usize) -> usize {
    if d < index_vector_dim {
        d
    } else {
        d - 1
    }
}
