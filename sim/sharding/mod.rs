//! Tensor shardings as Shardy has them (per-dimension axes major-to-minor, open
//! or closed dims, priorities, replicated and unreduced axes), their text form,
//! validation, TVM's `Placement` view, shard geometry and the `DTensor` type.

mod dtensor;
mod geometry;
mod placement;
mod text;
mod validate;

use serde::Serialize;

use crate::mesh::{AxisRef, Mesh, MeshError};

pub use dtensor::{DTensor, DTensorError};
pub use geometry::{DeviceShard, ShardLayout};
pub use placement::{Placement, PlacementError, PlacementSpec};
pub use text::{MeshLookup, ShardingPerValue};
pub use validate::{Problem, ShardingError, Site};

/// The mesh a sharding refers to: a symbol (`@mesh`) or an inline mesh (`mesh<[...]>`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub enum MeshRef {
    Symbol(String),
    Inline(Mesh),
}

/// How one tensor dimension is sharded.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct DimSharding {
    /// Axes major to minor.
    pub axes: Vec<AxisRef>,
    /// A closed dim (`{"x"}`) is never extended by propagation; an open one (`{"x", ?}`) may be.
    pub is_closed: bool,
    /// `p<N>`: lower is stronger; `None` is the strongest.
    pub priority: Option<i64>,
}

impl DimSharding {
    /// A closed dim sharded on `axes`.
    pub fn closed(axes: Vec<AxisRef>) -> Self {
        DimSharding {
            axes,
            is_closed: true,
            priority: None,
        }
    }

    /// An open dim sharded on `axes`.
    pub fn open(axes: Vec<AxisRef>) -> Self {
        DimSharding {
            axes,
            is_closed: false,
            priority: None,
        }
    }

    /// Number of shards along this dim.
    pub fn shard_count(&self, mesh: &Mesh) -> Result<u64, MeshError> {
        self.axes.iter().map(|a| a.size(mesh)).product()
    }
}

/// How a tensor's unreduced partial results combine (Shardy's `ReductionOp`:
/// `unreduced={...}` sums, `unreduced=max{...}` / `min{...}` take the
/// largest / smallest).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Default)]
pub enum Reduction {
    #[default]
    Sum,
    Max,
    Min,
}

impl Reduction {
    /// The keyword before `{` in `unreduced=...{...}` (empty for a sum).
    pub fn keyword(self) -> &'static str {
        match self {
            Reduction::Sum => "",
            Reduction::Max => "max",
            Reduction::Min => "min",
        }
    }
}

/// Shardy's `TensorShardingAttr`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct TensorSharding {
    pub mesh: MeshRef,
    pub dims: Vec<DimSharding>,
    /// Axes along which the tensor is explicitly replicated (never used by propagation).
    pub replicated: Vec<AxisRef>,
    /// Axes along which the tensor holds partial results still to be reduced.
    pub unreduced: Vec<AxisRef>,
    /// How the unreduced partial results combine (a sum unless written).
    pub reduction: Reduction,
}

impl TensorSharding {
    /// A fully replicated sharding of rank `rank` on the mesh symbol `mesh` (closed dims).
    pub fn replicated(mesh: &str, rank: usize) -> Self {
        TensorSharding {
            mesh: MeshRef::Symbol(mesh.to_string()),
            dims: vec![DimSharding::closed(Vec::new()); rank],
            replicated: Vec::new(),
            unreduced: Vec::new(),
            reduction: crate::sharding::Reduction::Sum,
        }
    }

    /// A sharding on mesh symbol `mesh` with closed dims sharded on the given full axes.
    pub fn from_axes(mesh: &str, dims: &[&[&str]]) -> Self {
        TensorSharding {
            mesh: MeshRef::Symbol(mesh.to_string()),
            dims: dims
                .iter()
                .map(|axes| DimSharding::closed(axes.iter().map(|a| AxisRef::full(*a)).collect()))
                .collect(),
            replicated: Vec::new(),
            unreduced: Vec::new(),
            reduction: crate::sharding::Reduction::Sum,
        }
    }

    /// Tensor rank this sharding describes.
    pub fn rank(&self) -> usize {
        self.dims.len()
    }

    /// The mesh symbol name, if the mesh is referenced by name.
    pub fn mesh_name(&self) -> Option<&str> {
        match &self.mesh {
            MeshRef::Symbol(s) => Some(s),
            MeshRef::Inline(_) => None,
        }
    }

    /// Resolve the mesh through `meshes`.
    pub fn resolve_mesh<'m>(&'m self, meshes: &'m dyn MeshLookup) -> Option<&'m Mesh> {
        match &self.mesh {
            MeshRef::Symbol(s) => meshes.lookup(s),
            MeshRef::Inline(m) => Some(m),
        }
    }

    /// A maximal sharding (`<@maximal, []>` on a mesh without axes: the whole
    /// value on one device), which fits a tensor of any rank, as in Shardy.
    pub fn is_maximal(&self, meshes: &dyn MeshLookup) -> bool {
        self.dims.is_empty() && self.resolve_mesh(meshes).is_some_and(Mesh::is_maximal)
    }

    /// True when no dim is sharded and nothing is unreduced.
    pub fn is_fully_replicated(&self) -> bool {
        self.dims.iter().all(|d| d.axes.is_empty()) && self.unreduced.is_empty()
    }

    /// Every axis that shards a dim, in dim order.
    pub fn sharding_axes(&self) -> impl Iterator<Item = &AxisRef> {
        self.dims.iter().flat_map(|d| d.axes.iter())
    }
}
