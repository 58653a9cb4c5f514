//! Gathers and scatters on a sharded operand: each device holds a block of
//! the operand, so the indices, which are global, are moved by the block's
//! start along the indexed dims. A scatter update whose window then falls
//! outside the local block is skipped (StableHLO's out-of-bounds rule), so
//! every device applies exactly the updates that land in its block; a gather
//! row outside the block is zeroed ([`GatherMask`]), so the devices' results
//! sum (all-reduce) to the gather from the whole table.

use crate::base::DType;
use crate::ir::OpKind;
use crate::sharding::ShardLayout;
use crate::tensor::{Data, Tensor, TensorError};

/// Before a gather or scatter runs on `device`'s block of its operand (laid
/// out by `layout`): move the global indices in `args` into the block. For a
/// gather whose looked-up dims are sharded, the mask to apply to its result.
pub fn localize(
    kind: &OpKind,
    layout: &ShardLayout,
    device: u64,
    args: &mut [Tensor],
) -> Result<Option<GatherMask>, TensorError> {
    let Some(shard) = layout.shard_of(device) else {
        return Ok(None);
    };
    let range = |od: u64| shard.ranges.get(od as usize).copied().unwrap_or((0, 0));
    match kind {
        OpKind::Scatter { dims, .. } => {
            let starts: Vec<i128> = dims
                .scatter_dims_to_operand_dims
                .iter()
                .map(|&od| i128::from(range(od).0))
                .collect();
            if starts.iter().any(|&s| s != 0) {
                // Operands: N inputs, the indices, N updates.
                let n = args.len().saturating_sub(1) / 2;
                args[n] = offset_indices(&args[n], dims.index_vector_dim as usize, &starts)?;
            }
            Ok(None)
        }
        OpKind::Gather {
            dims, slice_sizes, ..
        } => {
            let map = &dims.start_index_map;
            let whole = |od: u64| {
                (
                    0,
                    layout.global_shape.get(od as usize).copied().unwrap_or(0),
                )
            };
            if map.iter().all(|&od| range(od) == whole(od)) {
                return Ok(None);
            }
            let starts: Vec<i128> = map.iter().map(|&od| i128::from(range(od).0)).collect();
            let ivd = dims.index_vector_dim as usize;
            args[1] = offset_indices(&args[1], ivd, &starts)?;
            Ok(Some(GatherMask {
                indices: args[1].clone(),
                index_vector_dim: ivd,
                lens: map
                    .iter()
                    .map(|&od| i128::from(range(od).1 - range(od).0))
                    .collect(),
                slices: map
                    .iter()
                    .map(|&od| slice_sizes.get(od as usize).map_or(1, |&x| i128::from(x)))
                    .collect(),
                offset_dims: dims.offset_dims.clone(),
            }))
        }
        _ => Ok(None),
    }
}

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

/// Gathers from a sharded table (Megatron's vocab-parallel embedding): the
/// global indices along `starts`' dims are moved into the device's block;
/// index vectors that fall outside it (`lens`: the block's valid sizes,
/// `slices`: the slice sizes) give rows of zeros, so summing every device's
/// result gives the gather from the whole table.
pub struct GatherMask {
    /// The indices, already moved into the block.
    indices: Tensor,
    index_vector_dim: usize,
    lens: Vec<i128>,
    slices: Vec<i128>,
    offset_dims: Vec<u64>,
}

impl GatherMask {
    /// For each index vector (row-major over the indices' batch dims), whether
    /// it selects a slice inside the block.
    fn valid(&self) -> Result<Vec<bool>, TensorError> {
        let indices = &self.indices;
        let values = indices
            .data()
            .to_i128_vec()
            .ok_or_else(|| TensorError::invalid("gather", "indices must be integers"))?;
        let shape = indices.shape();
        let ivd = self.index_vector_dim;
        let (len, stride) = if ivd < shape.len() {
            (
                shape[ivd] as usize,
                shape[ivd + 1..].iter().product::<u64>() as usize,
            )
        } else {
            (1, 1)
        };
        let batch = values.len() / len.max(1);
        let mut ok = vec![true; batch];
        for (i, &v) in values.iter().enumerate() {
            let k = (i / stride.max(1)) % len.max(1);
            // The batch position: drop coordinate k of the index vector dim.
            let b = (i / (stride * len)) * stride + i % stride;
            let inside = v >= 0
                && v + self.slices.get(k).copied().unwrap_or(1)
                    <= self.lens.get(k).copied().unwrap_or(i128::MAX);
            if !inside {
                ok[b] = false;
            }
        }
        Ok(ok)
    }

    /// Zero the rows of `result` whose index vector is outside the block.
    pub fn apply(&self, result: Tensor) -> Result<Tensor, TensorError> {
        let valid = self.valid()?;
        if valid.iter().all(|&v| v) {
            return Ok(result);
        }
        let shape = result.shape().to_vec();
        let rank = shape.len();
        let batch_dims: Vec<usize> = (0..rank)
            .filter(|&d| !self.offset_dims.contains(&(d as u64)))
            .collect();
        let batch_shape: Vec<u64> = batch_dims.iter().map(|&d| shape[d]).collect();
        let mut strides = vec![1u64; rank];
        for d in (0..rank.saturating_sub(1)).rev() {
            strides[d] = strides[d + 1] * shape[d + 1];
        }
        let dtype = result.dtype();
        let mut data = result.into_data();
        let zero = crate::tensor::Scalar::zero(dtype);
        for i in 0..data.len() {
            let mut b = 0u64;
            for (j, &d) in batch_dims.iter().enumerate() {
                let coord = (i as u64 / strides[d]) % shape[d];
                b = b * batch_shape[j] + coord;
            }
            if !valid.get(b as usize).copied().unwrap_or(true) {
                data.set(i, zero);
            }
        }
        Tensor::new(shape, data)
    }
}
