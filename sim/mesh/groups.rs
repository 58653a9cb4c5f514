//! Device groups along a set of axes: the devices a collective over those axes
//! runs on. Within a group, devices are ordered by their index along the given
//! axes (the first listed is the most major); groups are ordered by mesh position.

use std::collections::BTreeMap;

use super::{AxisRef, Mesh, MeshError};

impl Mesh {
    /// Check that `axes` are valid references to this mesh and pairwise disjoint.
    pub fn validate_axis_set(&self, axes: &[AxisRef]) -> Result<(), MeshError> {
        for (i, a) in axes.iter().enumerate() {
            a.validate(self)?;
            for b in &axes[..i] {
                if a == b {
                    return Err(MeshError::DuplicateAxisRef(a.to_string()));
                }
                if a.overlaps(b, self) {
                    return Err(MeshError::OverlappingAxes(b.to_string(), a.to_string()));
                }
            }
        }
        Ok(())
    }

    /// The device groups of a collective over `axes` (device ids). With no axes
    /// every device is its own group; with all axes there is one group.
    pub fn device_groups(&self, axes: &[AxisRef]) -> Result<Vec<Vec<u64>>, MeshError> {
        Ok(self
            .position_groups(axes)?
            .into_iter()
            .map(|g| g.into_iter().map(|p| self.device_at(p)).collect())
            .collect())
    }

    /// Like [`Mesh::device_groups`] but with mesh positions instead of device ids.
    pub fn position_groups(&self, axes: &[AxisRef]) -> Result<Vec<Vec<u64>>, MeshError> {
        self.validate_axis_set(axes)?;
        let sizes: Vec<u64> = axes
            .iter()
            .map(|a| a.size(self))
            .collect::<Result<_, _>>()?;
        let strides: Vec<u64> = axes
            .iter()
            .map(|a| a.position_stride(self))
            .collect::<Result<_, _>>()?;
        let group_size: u64 = sizes.iter().product();
        let mut groups: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
        for pos in 0..self.num_devices() {
            let mut key = pos;
            let mut rank = 0u64;
            for (a, (&size, &stride)) in axes.iter().zip(sizes.iter().zip(&strides)) {
                let idx = a.index_of_position(self, pos)?;
                key -= idx * stride;
                rank = rank * size + idx;
            }
            let g = groups
                .entry(key)
                .or_insert_with(|| vec![u64::MAX; group_size as usize]);
            g[rank as usize] = pos;
        }
        Ok(groups.into_values().collect())
    }

    /// Index of device `device` within its group along `axes` (its rank in the collective).
    pub fn rank_in_group(&self, device: u64, axes: &[AxisRef]) -> Result<u64, MeshError> {
        let pos = self.position_of(device)?;
        let mut rank = 0;
        for a in axes {
            rank = rank * a.size(self)? + a.index_of_position(self, pos)?;
        }
        Ok(rank)
    }
}
