//! `DTensor`: a global tensor type with its mesh and sharding (TVM's `DTensorStructInfo`).

use std::fmt;

use crate::base::TensorType;
use crate::mesh::Mesh;

use super::{Placement, ShardLayout, ShardingError, TensorSharding};

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
