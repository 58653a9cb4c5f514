//! `DTensor`: a global tensor type with its mesh and sharding (TVM's `DTensorStructInfo`).

use std::fmt;

use crate::base::TensorType;
use crate::mesh::Mesh;

use super::placement::PlacementError;
use super::{MeshRef, Placement, ShardLayout, ShardingError, TensorSharding};

/// Why a DTensor cannot be built from a placement.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DTensorError {
    #[error("{0}")]
    Placement(#[from] PlacementError),
    #[error("{0}")]
    Sharding(#[from] ShardingError),
}

/// A distributed tensor's type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DTensor {
    pub ty: TensorType,
    pub mesh: Mesh,
    pub sharding: TensorSharding,
}

impl DTensor {
    /// A DTensor, checked: the sharding fits the mesh and the shape (padding allowed).
    pub fn new(
        ty: TensorType,
        mesh: Mesh,
        sharding: TensorSharding,
    ) -> Result<DTensor, ShardingError> {
        sharding.validate(&mesh, &ty.shape, true)?;
        Ok(DTensor { ty, mesh, sharding })
    }

    /// TVM's `DTensorStructInfo(tensor_sinfo, device_mesh, placement)`: the
    /// placement's `S[d]` on mesh dimension `i` shards tensor dim `d` along
    /// mesh axis `i` (axes in mesh order when several shard one dim).
    pub fn from_placement(
        ty: TensorType,
        mesh: Mesh,
        placement: &Placement,
    ) -> Result<DTensor, DTensorError> {
        let mut sharding = placement.to_sharding(&mesh, "mesh", ty.shape.len())?;
        sharding.mesh = MeshRef::Inline(mesh.clone());
        Ok(DTensor::new(ty, mesh, sharding)?)
    }

    /// The shard layout over the mesh.
    pub fn layout(&self) -> ShardLayout {
        ShardLayout::new(&self.mesh, &self.sharding, &self.ty.shape)
            .expect("validated at construction")
    }

    /// The TVM placement, where one exists.
    pub fn placement(&self) -> Result<Placement, super::placement::PlacementError> {
        Placement::from_sharding(&self.sharding, &self.mesh)
    }
}

impl fmt::Display for DTensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "DTensor({}, mesh{}, {})",
            self.ty,
            self.mesh,
            self.sharding.to_bare()
        )
    }
}
