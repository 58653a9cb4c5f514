//! A device mesh placed on a topology: mesh device id `d` is topology device
//! `d`, so a mesh's `device_ids` order is the placement. Helpers say which link
//! classes a collective along some mesh axes crosses (NVLink inside a node,
//! the network between nodes...).

use std::collections::BTreeSet;

use crate::mesh::{AxisRef, Mesh};

use super::graph::{ComponentId, LinkClass, LinkId};
use super::units::Bandwidth;
use super::{Topology, TopologyError};

/// A mesh mapped onto a topology (sizes checked).
#[derive(Debug, Clone)]
pub struct MeshMapping<'t> {
    topology: &'t Topology,
    mesh: Mesh,
}

impl<'t> MeshMapping<'t> {
    /// Map `mesh` onto `topology`; the mesh must have exactly as many devices.
    pub fn new(topology: &'t Topology, mesh: &Mesh) -> Result<Self, TopologyError> {
        if mesh.num_devices() != topology.num_devices() as u64 {
            return Err(TopologyError::MeshSize {
                mesh: mesh.num_devices(),
                topology: topology.num_devices(),
            });
        }
        Ok(MeshMapping {
            topology,
            mesh: mesh.clone(),
        })
    }

    pub fn mesh(&self) -> &Mesh {
        &self.mesh
    }

    /// The physical device (component) at mesh position `pos`.
    pub fn component_at(&self, pos: u64) -> ComponentId {
        self.topology.devices[self.mesh.device_at(pos) as usize]
    }

    /// The physical device (component) of mesh device id `device`.
    pub fn component_of_device(&self, device: u64) -> Result<ComponentId, TopologyError> {
        self.topology
            .device(device as u32)
            .filter(|_| device < self.mesh.num_devices())
            .ok_or(TopologyError::NoSuchDevice(
                device as u32,
                self.topology.num_devices(),
            ))
    }

    /// Routes between ring neighbours of every device group along `axes`
    /// (each member to the next, the last back to the first).
    pub fn axis_routes(&self, axes: &[AxisRef]) -> Result<Vec<Vec<LinkId>>, TopologyError> {
        let mut routes = Vec::new();
        for group in self.mesh.device_groups(axes)? {
            let n = group.len();
            if n < 2 {
                continue;
            }
            let pairs = if n == 2 { 1 } else { n };
            for i in 0..pairs {
                let a = self.component_of_device(group[i])?;
                let b = self.component_of_device(group[(i + 1) % n])?;
                routes.push(self.topology.route(a, b, i as u64)?);
            }
        }
        Ok(routes)
    }

    /// Link classes crossed by a collective along `axes` (empty when the groups
    /// have one device).
    pub fn axis_link_classes(
        &self,
        axes: &[AxisRef],
    ) -> Result<BTreeSet<LinkClass>, TopologyError> {
        Ok(self
            .axis_routes(axes)?
            .iter()
            .flatten()
            .map(|&l| self.topology.link(l).class)
            .collect())
    }

    /// The slowest link on any ring-neighbour route along `axes` (None when
    /// the groups have one device).
    pub fn axis_bottleneck(&self, axes: &[AxisRef]) -> Result<Option<Bandwidth>, TopologyError> {
        Ok(self
            .axis_routes(axes)?
            .iter()
            .flatten()
            .map(|&l| self.topology.link(l).bandwidth)
            .min())
    }
}
