//! Finishing partial results (values with unreduced axes). The axes the
//! consumer's sharding adds next to a dim are finished by one
//! `reduce_scatter` (each device keeps only its block of the sum); the rest
//! by `all_reduce`. Shardy's insert-explicit-reshards does the same: an
//! unreduced axis that the result is sharded on becomes a reduce-scatter.
//!
//! Also here: the cost of computing an op with a given factor sharding (the
//! reshards of its operands, the finishing collectives and the reshard of its
//! result), which lets the driver choose between keeping a contraction sharded
//! (partial result, then reduce-scatter) and gathering operands instead.

use crate::base::TensorType;
use crate::mesh::{AxisRef, Mesh};
use crate::sharding::{ShardLayout, TensorSharding};
use crate::tensor::CollectiveReduction;

use super::lower::Builder;
use super::program::{CollectiveKind, Slot};
use super::reshard::{plan_cost, plan_reshard, CostModel, PlannedStep};
use super::PartitionError;

/// Per dim, the unreduced axes of `partial` that `target` shards next on that
/// dim (the dim's axes must be a prefix of the target's, and blocks must
/// nest: an even split, or a slice of the whole dim straight to the target).
/// Empty when no reduce-scatter applies.
pub(super) fn scatter_dims(
    mesh: &Mesh,
    shape: &[u64],
    partial: &TensorSharding,
    target: &TensorSharding,
) -> Vec<Vec<AxisRef>> {
    let count =
        |axes: &[AxisRef]| -> u64 { axes.iter().map(|a| a.size(mesh).unwrap_or(1)).product() };
    let mut left = partial.unreduced.clone();
    let mut dims: Vec<Vec<AxisRef>> = vec![Vec::new(); shape.len()];
    for (d, (cur, want)) in partial.dims.iter().zip(&target.dims).enumerate() {
        let (cur, want) = (&cur.axes, &want.axes);
        if cur.len() > want.len() || cur[..] != want[..cur.len()] {
            continue;
        }
        let run: Vec<AxisRef> = want[cur.len()..]
            .iter()
            .take_while(|a| left.contains(a))
            .cloned()
            .collect();
        let mut after = cur.clone();
        after.extend(run.iter().cloned());
        let nests = shape[d] % count(&after) == 0 || (cur.is_empty() && after == *want);
        if run.is_empty() || !nests {
            continue;
        }
        left.retain(|a| !run.contains(a));
        dims[d] = run;
    }
    dims
}

/// `partial` after a reduce-scatter of `dims`.
fn after_scatter(partial: &TensorSharding, dims: &[Vec<AxisRef>]) -> TensorSharding {
    let mut after = partial.clone();
    for (d, extra) in after.dims.iter_mut().zip(dims) {
        d.axes.extend(extra.iter().cloned());
    }
    after
        .unreduced
        .retain(|a| !dims.iter().flatten().any(|x| x == a));
    after
}

/// Alpha-beta cost of one collective over `axes` moving a `bytes` buffer.
fn collective_cost(mesh: &Mesh, model: CostModel, axes: &[AxisRef], bytes: u64) -> f64 {
    let group: u64 = axes.iter().map(|a| a.size(mesh).unwrap_or(1)).product();
    model.alpha * group.saturating_sub(1) as f64 + model.beta * bytes as f64
}

impl Builder {
    /// Finish partial `slot` toward `target`: a reduce-scatter of what
    /// [`scatter_dims`] finds, then an all-reduce of the remaining axes.
    /// The result is not partial; it may still need a reshard to `target`.
    pub(super) fn finish_partial(
        &mut self,
        slot: Slot,
        kind: CollectiveReduction,
        target: &TensorSharding,
        at: &str,
    ) -> Result<Slot, PartitionError> {
        let src = self.values[slot].clone();
        let dims = scatter_dims(&self.mesh, &src.global.shape, &src.sharding, target);
        let mut cur = slot;
        if dims.iter().any(|d| !d.is_empty()) {
            let axes = self.sorted_axes(dims.iter().flatten().cloned().collect());
            let after = after_scatter(&src.sharding, &dims);
            let kind = CollectiveKind::ReduceScatter {
                reduction: kind,
                dims,
            };
            cur = self.emit(PlannedStep { kind, axes, after }, cur, at)?;
        }
        let partial = self.values[cur].sharding.clone();
        if partial.unreduced.is_empty() {
            return Ok(cur);
        }
        let after = TensorSharding {
            unreduced: Vec::new(),
            reduction: crate::sharding::Reduction::Sum,
            ..partial.clone()
        };
        let step = PlannedStep {
            kind: CollectiveKind::AllReduce(kind),
            axes: partial.unreduced,
            after,
        };
        self.emit(step, cur, at)
    }

    /// Cost of moving `ty` from `source` to `target` (finishing a partial
    /// source the way [`Self::finish_partial`] would).
    pub(super) fn move_cost(
        &self,
        ty: &TensorType,
        source: &TensorSharding,
        target: &TensorSharding,
    ) -> Result<f64, PartitionError> {
        let (mesh, model) = (&self.mesh, self.model);
        let elem = ty.dtype.size_bytes();
        let bytes = |s: &TensorSharding| -> Result<u64, PartitionError> {
            let geometry = TensorSharding {
                unreduced: Vec::new(),
                reduction: crate::sharding::Reduction::Sum,
                ..s.clone()
            };
            Ok(ShardLayout::new(mesh, &geometry, &ty.shape)
                .map_err(PartitionError::sharding)?
                .local_bytes(elem))
        };
        let mut cost = 0.0;
        let mut cur = source.clone();
        if !cur.unreduced.is_empty() {
            let dims = scatter_dims(mesh, &ty.shape, &cur, target);
            let scattered: Vec<AxisRef> = dims.iter().flatten().cloned().collect();
            if !scattered.is_empty() {
                cost += collective_cost(mesh, model, &scattered, bytes(&cur)?);
                cur = after_scatter(&cur, &dims);
            }
            if !cur.unreduced.is_empty() {
                cost += collective_cost(mesh, model, &cur.unreduced, bytes(&cur)?);
                cur.unreduced.clear();
            }
        }
        let plan = plan_reshard(mesh, &cur, target, &ty.shape, elem, model)?;
        Ok(cost + plan_cost(mesh, &cur, &plan, &ty.shape, elem, model)?)
    }
}
