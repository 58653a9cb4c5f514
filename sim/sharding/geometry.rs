//! Shard geometry: for a global shape, a mesh and a sharding, each device's
//! shard index, local (padded) shape and index ranges into the global tensor,
//! the padding of uneven splits, and which devices hold replicas of a shard.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;

use crate::mesh::Mesh;

use super::{ShardingError, TensorSharding};

/// One device's piece of a sharded tensor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeviceShard {
    pub device: u64,
    /// Shard index along each tensor dim.
    pub shard_index: Vec<u64>,
    /// The local buffer shape (padded: the same on every device).
    pub local_shape: Vec<u64>,
    /// `[start, end)` of global indices this device holds, per dim; `end - start`
    /// is smaller than the local size where the shard holds padding.
    pub ranges: Vec<(u64, u64)>,
}

/// The layout of a sharded tensor over a mesh. Per-device data (shard index,
/// ranges) is derived from the mesh geometry on demand, so a layout costs
/// O(rank) memory whatever the number of devices.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ShardLayout {
    pub global_shape: Vec<u64>,
    /// Number of shards per dim.
    pub shards: Vec<u64>,
    /// Local (padded) size per dim: `ceil(global / shards)`.
    pub local_shape: Vec<u64>,
    /// Padding added to each dim so that its shards divide it.
    pub padding: Vec<u64>,
    /// Per dim, `(position stride, size)` of each sharding axis, major to
    /// minor: the axis index of mesh position `p` is `(p / stride) % size`.
    #[serde(skip)]
    dim_axes: Vec<Vec<(u64, u64)>>,
    /// Device id at each mesh position; `None` for iota.
    #[serde(skip)]
    device_ids: Option<Arc<[u64]>>,
    #[serde(skip)]
    num_devices: u64,
}

impl ShardLayout {
    /// Compute the layout; uneven splits are padded (GSPMD style).
    pub fn new(
        mesh: &Mesh,
        sharding: &TensorSharding,
        shape: &[u64],
    ) -> Result<ShardLayout, ShardingError> {
        sharding.validate(mesh, shape, true)?;
        if mesh.is_maximal() {
            let device = mesh.device_at(0);
            return Ok(ShardLayout {
                global_shape: shape.to_vec(),
                shards: vec![1; shape.len()],
                local_shape: shape.to_vec(),
                padding: vec![0; shape.len()],
                dim_axes: vec![Vec::new(); shape.len()],
                device_ids: (device != 0).then(|| Arc::from(vec![device])),
                num_devices: 1,
            });
        }
        let shards: Vec<u64> = sharding
            .dims
            .iter()
            .map(|d| d.shard_count(mesh))
            .collect::<Result<_, _>>()
            .map_err(|e| ShardingError {
                site: super::Site::Whole,
                problem: e.into(),
            })?;
        let local_shape: Vec<u64> = shape
            .iter()
            .zip(&shards)
            .map(|(&s, &k)| s.div_ceil(k))
            .collect();
        let padding: Vec<u64> = shape
            .iter()
            .zip(&shards)
            .zip(&local_shape)
            .map(|((&s, &k), &l)| l * k - s)
            .collect();
        let dim_axes = sharding
            .dims
            .iter()
            .map(|dim| {
                dim.axes
                    .iter()
                    .map(|a| {
                        let stride = a.position_stride(mesh).expect("validated");
                        (stride, a.size(mesh).expect("validated"))
                    })
                    .collect()
            })
            .collect();
        Ok(ShardLayout {
            global_shape: shape.to_vec(),
            shards,
            local_shape,
            padding,
            dim_axes,
            device_ids: mesh.explicit_device_ids().map(Arc::from),
            num_devices: mesh.num_devices(),
        })
    }

    /// Number of devices (mesh positions).
    pub fn num_devices(&self) -> u64 {
        self.num_devices
    }

    /// Device id at mesh position `pos`.
    pub fn device_at(&self, pos: u64) -> u64 {
        match &self.device_ids {
            Some(ids) => ids[pos as usize],
            None => pos,
        }
    }

    /// Shard index along each dim of the device at mesh position `pos`.
    pub fn shard_index_at(&self, pos: u64) -> Vec<u64> {
        self.dim_axes
            .iter()
            .map(|axes| {
                axes.iter()
                    .fold(0, |idx, &(stride, size)| idx * size + (pos / stride) % size)
            })
            .collect()
    }

    /// The shard of the device at mesh position `pos`.
    pub fn device_shard(&self, pos: u64) -> DeviceShard {
        let shard_index = self.shard_index_at(pos);
        let ranges = shard_index
            .iter()
            .zip(&self.local_shape)
            .zip(&self.global_shape)
            .map(|((&i, &l), &s)| ((i * l).min(s), ((i + 1) * l).min(s)))
            .collect();
        DeviceShard {
            device: self.device_at(pos),
            shard_index,
            local_shape: self.local_shape.clone(),
            ranges,
        }
    }

    /// Every device's shard, in mesh-position order.
    pub fn devices(&self) -> impl Iterator<Item = DeviceShard> + '_ {
        (0..self.num_devices).map(|p| self.device_shard(p))
    }

    /// Mesh position of device `device`.
    pub fn position_of(&self, device: u64) -> Option<u64> {
        match &self.device_ids {
            Some(ids) => ids.iter().position(|&d| d == device).map(|p| p as u64),
            None => (device < self.num_devices).then_some(device),
        }
    }

    /// The shard of device `device`.
    pub fn shard_of(&self, device: u64) -> Option<DeviceShard> {
        self.position_of(device).map(|p| self.device_shard(p))
    }

    /// Groups of devices that hold the same data (same shard, and for unreduced
    /// axes the same partial sum), ordered by their first device's mesh position.
    pub fn replica_groups(&self, mesh: &Mesh, sharding: &TensorSharding) -> Vec<Vec<u64>> {
        // (shard index, unreduced coordinates) -> (first position, devices).
        type Key = (Vec<u64>, Vec<u64>);
        let mut groups: BTreeMap<Key, (usize, Vec<u64>)> = BTreeMap::new();
        for (pos, d) in self.devices().enumerate() {
            let partial: Vec<u64> = sharding
                .unreduced
                .iter()
                .map(|a| a.index_of_position(mesh, pos as u64).unwrap_or(0))
                .collect();
            groups
                .entry((d.shard_index, partial))
                .or_insert_with(|| (pos, Vec::new()))
                .1
                .push(d.device);
        }
        let mut out: Vec<(usize, Vec<u64>)> = groups.into_values().collect();
        out.sort_by_key(|(first, _)| *first);
        out.into_iter().map(|(_, g)| g).collect()
    }

    /// Bytes of one local buffer for elements of `elem_bytes` bytes.
    pub fn local_bytes(&self, elem_bytes: u64) -> u64 {
        self.local_shape.iter().product::<u64>() * elem_bytes
    }
}
