//! Checks of a sharding against its mesh and tensor shape, with the rules of
//! Shardy's verifier: known axes, valid sub-axes, no axis used twice or
//! overlapping, mergeable neighbours written as one, replicated/unreduced sorted
//! in mesh order, no priority on an empty closed dim, rank and divisibility.

use std::fmt;

use crate::mesh::{AxisRef, Mesh, MeshError};

use super::TensorSharding;

/// Where in a sharding a problem is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Site {
    Whole,
    Mesh,
    Dim(usize),
    DimAxis(usize, usize),
    Replicated(usize),
    Unreduced(usize),
}

impl fmt::Display for Site {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Site::Whole => f.write_str("sharding"),
            Site::Mesh => f.write_str("mesh"),
            Site::Dim(d) => write!(f, "dim {d}"),
            Site::DimAxis(d, _) => write!(f, "dim {d}"),
            Site::Replicated(_) => f.write_str("replicated axes"),
            Site::Unreduced(_) => f.write_str("unreduced axes"),
        }
    }
}

/// What is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    #[error("{0}")]
    Mesh(#[from] MeshError),
    #[error("axis {0} is used twice")]
    AxisUsedTwice(String),
    #[error("axes {0} and {1} overlap")]
    Overlap(String, String),
    #[error("sub-axes {0} and {1} are consecutive and must be merged into one")]
    Mergeable(String, String),
    #[error("{0} axes are not in mesh order")]
    NotSorted(&'static str),
    #[error("priority p{0} on a dim that is empty and closed (it can never be sharded)")]
    PriorityOnReplicatedDim(i64),
    #[error("negative priority p{0}")]
    NegativePriority(i64),
    #[error("sharding has rank {sharding} but the tensor has rank {tensor}")]
    RankMismatch { sharding: usize, tensor: usize },
    #[error(
        "dim of size {size} is not divisible by its {shards} shards (ask for padding to allow it)"
    )]
    NotDivisible { size: u64, shards: u64 },
    #[error("a sharding on a maximal mesh can have no dims, replicated or unreduced axes")]
    Maximal,
}

/// A problem and where it is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{site}: {problem}")]
pub struct ShardingError {
    pub site: Site,
    pub problem: Problem,
}

fn err(site: Site, problem: impl Into<Problem>) -> ShardingError {
    ShardingError {
        site,
        problem: problem.into(),
    }
}

impl TensorSharding {
    /// Check the axes against `mesh` (everything that does not need the tensor shape).
    pub fn validate_axes(&self, mesh: &Mesh) -> Result<(), ShardingError> {
        if mesh.is_maximal() {
            if !self.dims.is_empty() || !self.replicated.is_empty() || !self.unreduced.is_empty() {
                return Err(err(Site::Whole, Problem::Maximal));
            }
            return Ok(());
        }
        let mut seen: Vec<AxisRef> = Vec::new();
        let mut check_list =
            |axes: &[AxisRef], site_of: &dyn Fn(usize) -> Site| -> Result<(), ShardingError> {
                for (i, a) in axes.iter().enumerate() {
                    let site = site_of(i);
                    a.validate(mesh).map_err(|e| err(site, e))?;
                    for b in &seen {
                        if b == a {
                            return Err(err(site, Problem::AxisUsedTwice(a.to_string())));
                        }
                        if a.overlaps(b, mesh) {
                            return Err(err(site, Problem::Overlap(b.to_string(), a.to_string())));
                        }
                    }
                    if i > 0 && axes[i - 1].can_merge(a) {
                        return Err(err(
                            site,
                            Problem::Mergeable(axes[i - 1].to_string(), a.to_string()),
                        ));
                    }
                    seen.push(a.clone());
                }
                Ok(())
            };
        for (d, dim) in self.dims.iter().enumerate() {
            if let Some(p) = dim.priority {
                if p < 0 {
                    return Err(err(Site::Dim(d), Problem::NegativePriority(p)));
                }
                if dim.is_closed && dim.axes.is_empty() {
                    return Err(err(Site::Dim(d), Problem::PriorityOnReplicatedDim(p)));
                }
            }
            check_list(&dim.axes, &|i| Site::DimAxis(d, i))?;
        }
        check_list(&self.replicated, &Site::Replicated)?;
        check_list(&self.unreduced, &Site::Unreduced)?;
        for (axes, name, site) in [
            (
                &self.replicated,
                "replicated",
                Site::Replicated as fn(usize) -> Site,
            ),
            (
                &self.unreduced,
                "unreduced",
                Site::Unreduced as fn(usize) -> Site,
            ),
        ] {
            if let Some(i) = (1..axes.len()).find(|&i| axes[i - 1].mesh_cmp(&axes[i], mesh).is_gt())
            {
                return Err(err(site(i), Problem::NotSorted(name)));
            }
        }
        Ok(())
    }

    /// Full check against `mesh` and the tensor `shape`. A dim that its shards do
    /// not divide is an error unless `allow_padding` (then the geometry pads it).
    pub fn validate(
        &self,
        mesh: &Mesh,
        shape: &[u64],
        allow_padding: bool,
    ) -> Result<(), ShardingError> {
        self.validate_axes(mesh)?;
        if mesh.is_maximal() {
            return Ok(());
        }
        if self.dims.len() != shape.len() {
            return Err(err(
                Site::Whole,
                Problem::RankMismatch {
                    sharding: self.dims.len(),
                    tensor: shape.len(),
                },
            ));
        }
        if !allow_padding {
            for (d, (dim, &size)) in self.dims.iter().zip(shape).enumerate() {
                let shards = dim.shard_count(mesh).map_err(|e| err(Site::Dim(d), e))?;
                if size % shards != 0 {
                    return Err(err(Site::Dim(d), Problem::NotDivisible { size, shards }));
                }
            }
        }
        Ok(())
    }
}
