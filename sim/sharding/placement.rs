//! TVM's `Placement`: one `PlacementSpec` per mesh dimension, `S[tensor_dim]` or `R`,
//! with its text form (`"S[0]R"`, `"R, S[1]"`) and conversion to and from
//! [`TensorSharding`] where one exists.

use std::fmt;

use crate::base::{Cursor, TextError};
use crate::mesh::{AxisRef, Mesh};

use super::{DimSharding, MeshRef, TensorSharding};

/// How the tensor is laid out along one mesh dimension.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PlacementSpec {
    /// `S[d]`: tensor dim `d` is split along this mesh dimension.
    Sharding(usize),
    /// `R`: replicated along this mesh dimension.
    Replica,
}

/// One [`PlacementSpec`] per mesh dimension.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Placement(pub Vec<PlacementSpec>);

/// Why a placement and a sharding cannot be converted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlacementError {
    #[error("placement has {placement} specs but the mesh has {mesh} dimensions")]
    MeshRank { placement: usize, mesh: usize },
    #[error("S[{dim}] names tensor dim {dim} but the tensor has rank {rank}")]
    DimOutOfRange { dim: usize, rank: usize },
    #[error("tensor dim {dim} is sharded on {axes} in an order other than the mesh order; a Placement cannot express it")]
    NonMeshOrder { dim: usize, axes: String },
    #[error("sub-axis {0} has no Placement equivalent")]
    SubAxis(String),
    #[error("unreduced (partial) axes have no Placement equivalent")]
    Unreduced,
    #[error("{0}")]
    Mesh(#[from] crate::mesh::MeshError),
}

impl Placement {
    /// Parse `S[0]R`, `R, S[1]`, `S[0] S[1]`: separators (commas, spaces) are optional.
    pub fn from_text(text: &str) -> Result<Placement, TextError> {
        let mut c = Cursor::new(text);
        let mut specs = Vec::new();
        loop {
            if c.at_end() {
                break;
            }
            if !specs.is_empty() {
                c.eat(",");
            }
            if c.eat("S") {
                c.expect("[")?;
                let d = c.uint()?;
                c.expect("]")?;
                specs.push(PlacementSpec::Sharding(d as usize));
            } else if c.eat("R") {
                specs.push(PlacementSpec::Replica);
            } else {
                return Err(c.error("'S[<dim>]' or 'R'"));
            }
        }
        if specs.is_empty() {
            return Err(c.error("at least one placement spec ('S[<dim>]' or 'R')"));
        }
        Ok(Placement(specs))
    }

    /// Text form with `, ` separators: `S[0], R`.
    pub fn to_text(&self) -> String {
        self.to_string()
    }

    /// The equivalent sharding of a tensor of rank `rank` on `mesh` (closed dims,
    /// each dim's axes in mesh order).
    pub fn to_sharding(
        &self,
        mesh: &Mesh,
        mesh_name: &str,
        rank: usize,
    ) -> Result<TensorSharding, PlacementError> {
        if self.0.len() != mesh.axes().len() {
            return Err(PlacementError::MeshRank {
                placement: self.0.len(),
                mesh: mesh.axes().len(),
            });
        }
        let mut dims = vec![DimSharding::closed(Vec::new()); rank];
        for (axis, spec) in mesh.axes().iter().zip(&self.0) {
            if let PlacementSpec::Sharding(d) = *spec {
                if d >= rank {
                    return Err(PlacementError::DimOutOfRange { dim: d, rank });
                }
                dims[d].axes.push(AxisRef::full(axis.name.clone()));
            }
        }
        Ok(TensorSharding {
            mesh: MeshRef::Symbol(mesh_name.to_string()),
            dims,
            replicated: Vec::new(),
            unreduced: Vec::new(),
            reduction: crate::sharding::Reduction::Sum,
        })
    }

    /// The placement equivalent to `sharding` on `mesh`, where one exists: full
    /// axes only, nothing unreduced, and several axes on one dim in mesh order.
    /// Open/closed and priorities are propagation hints and are dropped.
    pub fn from_sharding(
        sharding: &TensorSharding,
        mesh: &Mesh,
    ) -> Result<Placement, PlacementError> {
        if !sharding.unreduced.is_empty() {
            return Err(PlacementError::Unreduced);
        }
        let mut specs = vec![PlacementSpec::Replica; mesh.axes().len()];
        for (d, dim) in sharding.dims.iter().enumerate() {
            let mut last = None;
            for a in &dim.axes {
                if a.sub.is_some() {
                    return Err(PlacementError::SubAxis(a.to_string()));
                }
                let i = mesh.axis_index(&a.name)?;
                if last.is_some_and(|l| l >= i) {
                    let names: Vec<String> = dim.axes.iter().map(|a| a.to_string()).collect();
                    return Err(PlacementError::NonMeshOrder {
                        dim: d,
                        axes: names.join(", "),
                    });
                }
                last = Some(i);
                specs[i] = PlacementSpec::Sharding(d);
            }
        }
        Ok(Placement(specs))
    }
}

impl fmt::Display for PlacementSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PlacementSpec::Sharding(d) => write!(f, "S[{d}]"),
            PlacementSpec::Replica => f.write_str("R"),
        }
    }
}

impl fmt::Display for Placement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, s) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{s}")?;
        }
        Ok(())
    }
}
