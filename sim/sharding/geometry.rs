//! Shard geometry: for a global shape, a mesh and a sharding, each device's
//! shard index, local (padded) shape and index ranges into the global tensor,
//! the padding of uneven splits, and which devices hold replicas of a shard.

use std::collections::BTreeMap;

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

/// The layout of a sharded tensor over a mesh.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ShardLayout {
    pub global_shape: Vec<u64>,
    /// Number of shards per dim.
    pub shards: Vec<u64>,
    /// Local (padded) size per dim: `ceil(global / shards)`.
    pub local_shape: Vec<u64>,
    /// Padding added to each dim so that its shards divide it.
    pub padding: Vec<u64>,
    /// One entry per device, in mesh-position order.
    pub devices: Vec<DeviceShard>,
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
                devices: vec![DeviceShard {
                    device,
                    shard_index: vec![0; shape.len()],
                    local_shape: shape.to_vec(),
                    ranges: shape.iter().map(|&s| (0, s)).collect(),
                }],
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
        let mut devices = Vec::with_capacity(mesh.num_devices() as usize);
        for pos in 0..mesh.num_devices() {
            let mut shard_index = Vec::with_capacity(shape.len());
            for dim in &sharding.dims {
                let mut idx = 0;
                for a in &dim.axes {
                    let size = a.size(mesh).expect("validated");
                    idx = idx * size + a.index_of_position(mesh, pos).expect("validated");
                }
                shard_index.push(idx);
            }
            let ranges = shard_index
                .iter()
                .zip(&local_shape)
                .zip(shape)
                .map(|((&i, &l), &s)| ((i * l).min(s), ((i + 1) * l).min(s)))
                .collect();
            devices.push(DeviceShard {
                device: mesh.device_at(pos),
                shard_index,
                local_shape: local_shape.clone(),
                ranges,
            });
        }
        Ok(ShardLayout {
            global_shape: shape.to_vec(),
            shards,
            local_shape,
            padding,
            devices,
        })
    }

    /// The shard of device `device`.
    pub fn shard_of(&self, device: u64) -> Option<&DeviceShard> {
        self.devices.iter().find(|d| d.device == device)
    }

    /// Groups of devices that hold the same data (same shard, and for unreduced
    /// axes the same partial sum), ordered by their first device's mesh position.
    pub fn replica_groups(&self, mesh: &Mesh, sharding: &TensorSharding) -> Vec<Vec<u64>> {
        // (shard index, unreduced coordinates) -> (first position, devices).
        type Key = (Vec<u64>, Vec<u64>);
        let mut groups: BTreeMap<Key, (usize, Vec<u64>)> = BTreeMap::new();
        for (pos, d) in self.devices.iter().enumerate() {
            let partial: Vec<u64> = sharding
                .unreduced
                .iter()
                .map(|a| a.index_of_position(mesh, pos as u64).unwrap_or(0))
                .collect();
            groups
                .entry((d.shard_index.clone(), partial))
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
