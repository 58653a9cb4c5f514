//! Scatters into a sharded operand: each device holds a block of the operand,
//! so the scatter indices, which are global, are moved by the block's start
//! along the scattered dims. An update whose window then falls outside the
//! local block is skipped (StableHLO's out-of-bounds rule), so every device
//! applies exactly the updates that land in its block.

use crate::base::DType;
use crate::tensor::{Data, Tensor, TensorError};

/// `indices` with `starts[k]` subtracted from component `k` of every index
/// vector (along `index_vector_dim`; a trailing implicit vector when it equals
/// the rank).
pub fn offset_indices(
    indices: &Tensor,
    index_vector_dim: usize,
    starts: &[i128],
) -> Result<Tensor, TensorError> {
    let values = indices
        .data()
        .to_i128_vec()
        .ok_or_else(|| TensorError::invalid("scatter", "indices must be integers"))?;
    let shape = indices.shape();
    let (len, stride) = if index_vector_dim < shape.len() {
        let stride: u64 = shape[index_vector_dim + 1..].iter().product();
        (shape[index_vector_dim], stride)
    } else {
        (1, 1)
    };
    let moved: Vec<i128> = values
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            let k = ((i as u64 / stride.max(1)) % len.max(1)) as usize;
            v - starts.get(k).copied().unwrap_or(0)
        })
        .collect();
    let dtype: DType = indices.dtype();
    Tensor::new(shape.to_vec(), Data::from_i128s(dtype, &moved))
}
