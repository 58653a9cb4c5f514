//! Partially manual computations (shard_map with some mesh axes left
//! automatic) in propagation, as Shardy's data-flow edges of
//! `sdy.manual_computation`:
//!
//! * each operand is tied to its block argument; the block argument's
//!   sharding names free axes only, so the edge sees it with the manual axes
//!   of its in-sharding put back in front of each dim (and the in-sharding's
//!   replicated axes), propagates across the edge in global terms and erases
//!   the manual axes again from what it gives the block argument;
//! * each returned value is tied to its result; the result's sharding is
//!   global, so the edge sees it without its manual axes (in the body's local
//!   terms) and puts the out-sharding's manual axes back in front of each dim
//!   of what it gives the result.
//!
//! Export writes the block arguments' and results' shardings back into the
//! op's in- and out-shardings, each cut to its largest evenly dividing prefix
//! (Shardy keeps a manual computation's edge owners divisible).

use crate::mesh::{AxisRef, Mesh};
use crate::sharding::{DimSharding, TensorSharding};

/// How a manual computation's edge sees one of its two tensors.
#[derive(Debug, Clone)]
pub(super) struct ManualView {
    /// Which tensor of the edge (0 the source, 1 the target) is transformed.
    pub tensor: usize,
    /// Whether the edge adds the manual axes to it (a block argument) or
    /// erases them from it (a result).
    pub add: bool,
    /// The manual axes of the in- or out-sharding, per dim.
    pub manual_dims: Vec<Vec<AxisRef>>,
    /// The in- or out-sharding's replicated axes.
    pub replicated: Vec<AxisRef>,
    /// The computation's manual axes.
    pub manual_axes: Vec<String>,
}

impl ManualView {
    /// The sharding the edge works with for the transformed tensor.
    pub fn before(&self, s: &TensorSharding) -> TensorSharding {
        if self.add {
            with_manual(&self.manual_dims, &self.replicated, s)
        } else {
            free_part(s, &self.manual_axes)
        }
    }

    /// What the transformed tensor gets from `new` (the edge's result).
    pub fn after(&self, new: &TensorSharding, old: Option<&TensorSharding>) -> TensorSharding {
        if self.add {
            let mut s = free_part(new, &self.manual_axes);
            // The block argument keeps its own replicated axes.
            s.replicated = old.map(|o| o.replicated.clone()).unwrap_or_default();
            s
        } else {
            let mut s = with_manual(&self.manual_dims, &[], new);
            s.replicated = old.map(|o| o.replicated.clone()).unwrap_or_default();
            s
        }
    }
}

/// Whether a manual computation over `manual_axes` leaves a mesh axis
/// (of size > 1) automatic.
pub(super) fn is_partial(mesh: &Mesh, manual_axes: &[String]) -> bool {
    !crate::ir::interp::manual::free_axes(mesh, manual_axes).is_empty()
}

/// `s` without its manual axes (dims, replicated and unreduced).
pub fn free_part(s: &TensorSharding, manual_axes: &[String]) -> TensorSharding {
    let mut s = s.clone();
    let keep = |axes: &mut Vec<AxisRef>| axes.retain(|a| !manual_axes.contains(&a.name));
    for d in &mut s.dims {
        keep(&mut d.axes);
    }
    keep(&mut s.replicated);
    keep(&mut s.unreduced);
    s
}

/// `s` with every manual axis it does not use (in a dim or as replicated)
/// added to its replicated axes, in mesh order (Shardy's
/// sdy-manual-axes-cleanup on in/out shardings).
pub(super) fn with_unused_manual_replicated(
    s: &TensorSharding,
    manual_axes: &[String],
    mesh: &Mesh,
) -> TensorSharding {
    let mut s = s.clone();
    let used = |name: &str, s: &TensorSharding| {
        s.dims
            .iter()
            .flat_map(|d| &d.axes)
            .chain(&s.replicated)
            .any(|a| a.name == name)
    };
    let unused: Vec<&String> = manual_axes.iter().filter(|m| !used(m, &s)).collect();
    if unused.is_empty() {
        return s;
    }
    s.replicated
        .extend(unused.into_iter().map(|m| AxisRef::full(m.clone())));
    s.replicated.sort_by_key(|a| {
        (
            mesh.axis_index(&a.name).unwrap_or(usize::MAX),
            a.sub.as_ref().map(|x| x.pre_size),
        )
    });
    s
}

/// The manual axes of each dim of `s`.
pub(super) fn manual_dims(s: &TensorSharding, manual_axes: &[String]) -> Vec<Vec<AxisRef>> {
    s.dims
        .iter()
        .map(|d| {
            d.axes
                .iter()
                .filter(|a| manual_axes.contains(&a.name))
                .cloned()
                .collect()
        })
        .collect()
}

/// `free` with `manual_dims` in front of each dim (closedness from `free`).
pub(super) fn with_manual(
    manual_dims: &[Vec<AxisRef>],
    replicated: &[AxisRef],
    free: &TensorSharding,
) -> TensorSharding {
    let mut s = free.clone();
    for (d, manual) in s.dims.iter_mut().zip(manual_dims) {
        let mut axes = manual.clone();
        axes.append(&mut d.axes);
        d.axes = axes;
    }
    s.replicated = replicated.to_vec();
    s
}

/// The largest prefix of each dim's axes that divides the dim evenly, taking
/// part of an axis (a sub-axis) where only part of it divides (Shardy's
/// `getEvenlySharded`).
pub(super) fn evenly_sharded(s: &TensorSharding, shape: &[u64], mesh: &Mesh) -> TensorSharding {
    let mut out = s.clone();
    for (d, &size) in out.dims.iter_mut().zip(shape) {
        let count: u64 = d.axes.iter().map(|a| a.size(mesh).unwrap_or(1)).product();
        if count == 0 || size % count == 0 {
            continue;
        }
        let mut left = size;
        let mut kept: Vec<AxisRef> = Vec::new();
        for a in &d.axes {
            let n = a.size(mesh).unwrap_or(1);
            let g = gcd(n, left);
            if g == 1 {
                break;
            }
            if g == n {
                kept.push(a.clone());
                left /= g;
            } else {
                let pre = a.sub.map(|s| s.pre_size).unwrap_or(1);
                kept.push(AxisRef::sub(a.name.clone(), pre, g));
                break;
            }
        }
        *d = DimSharding {
            axes: kept,
            ..d.clone()
        };
    }
    out
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}
