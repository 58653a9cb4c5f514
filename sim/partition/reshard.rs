//! Lowering one reshard (source sharding → target sharding of the same tensor)
//! to collectives. Two candidate plans are costed and the cheaper kept:
//!
//! * the axis plan: move an axis that is minor-most in one dim and next-needed
//!   in another with `all_to_all`, gather (`all_gather`) the minor axes no dim
//!   keeps, then slice (`all_slice`, local) the axes the target adds;
//! * a `collective_permute` when both shardings cut every dim into the same
//!   number of shards (each device then needs exactly one other device's block);
//! * a local slice to such a sharding (adding unused axes or major sub-axes),
//!   then a `collective_permute`.
//!
//! Cost is alpha-beta: `alpha * (group size - 1) + beta * bytes` per collective
//! that moves data (a local slice is free).

use crate::mesh::{AxisRef, Mesh};
use crate::sharding::{DimSharding, ShardLayout, TensorSharding};

use super::program::CollectiveKind;
use super::PartitionError;

/// One planned collective: what it does, its axes and the sharding after it.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedStep {
    pub kind: CollectiveKind,
    pub axes: Vec<AxisRef>,
    pub after: TensorSharding,
}

/// The alpha-beta cost model used to choose between plans.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CostModel {
    /// Cost of one message (in byte-equivalents).
    pub alpha: f64,
    /// Cost per byte of the per-device buffer.
    pub beta: f64,
}

impl Default for CostModel {
    fn default() -> Self {
        // About 1 µs latency against ~100 GB/s: 100 kB per message.
        CostModel {
            alpha: 1.0e5,
            beta: 1.0,
        }
    }
}

fn with_dims(base: &TensorSharding, dims: &[Vec<AxisRef>]) -> TensorSharding {
    TensorSharding {
        mesh: base.mesh.clone(),
        dims: dims
            .iter()
            .map(|a| DimSharding::closed(a.clone()))
            .collect(),
        replicated: Vec::new(),
        unreduced: Vec::new(),
        reduction: crate::sharding::Reduction::Sum,
    }
}

fn is_prefix(a: &[AxisRef], b: &[AxisRef]) -> bool {
    a.len() <= b.len() && a == &b[..a.len()]
}

/// True when `axes` cut a dim of `size` into equal blocks. Blocks of uneven
/// (padded) shardings do not nest, so such a dim is only gathered whole or
/// sliced from whole.
fn even(mesh: &Mesh, size: u64, axes: &[AxisRef]) -> bool {
    let count: u64 = axes.iter().map(|a| a.size(mesh).unwrap_or(1)).product();
    size % count == 0
}

/// The axis plan (see module doc).
fn axis_plan(
    mesh: &Mesh,
    shape: &[u64],
    source: &TensorSharding,
    target: &TensorSharding,
) -> Vec<PlannedStep> {
    let mut cur: Vec<Vec<AxisRef>> = source.dims.iter().map(|d| d.axes.clone()).collect();
    let want: Vec<Vec<AxisRef>> = target.dims.iter().map(|d| d.axes.clone()).collect();
    let mut steps = Vec::new();
    // all_to_all moves while one applies.
    loop {
        let mut moved = false;
        for d1 in 0..cur.len() {
            if is_prefix(&cur[d1], &want[d1]) {
                continue;
            }
            let Some(a) = cur[d1].last().cloned() else {
                continue;
            };
            if !even(mesh, shape[d1], &cur[d1]) {
                continue;
            }
            let target_dim = (0..cur.len()).find(|&d2| {
                d2 != d1
                    && is_prefix(&cur[d2], &want[d2])
                    && want[d2].get(cur[d2].len()) == Some(&a)
                    && even(mesh, shape[d2], &want[d2][..=cur[d2].len()])
            });
            if let Some(d2) = target_dim {
                cur[d1].pop();
                cur[d2].push(a.clone());
                steps.push(PlannedStep {
                    kind: CollectiveKind::AllToAll {
                        axis: a.clone(),
                        src_dim: d1,
                        tgt_dim: d2,
                    },
                    axes: vec![a],
                    after: with_dims(target, &cur),
                });
                moved = true;
            }
        }
        if !moved {
            break;
        }
    }
    // Gather what no dim keeps at its place.
    let mut gathered: Vec<Vec<AxisRef>> = vec![Vec::new(); cur.len()];
    for d in 0..cur.len() {
        let uneven = !even(mesh, shape[d], &cur[d]) || !even(mesh, shape[d], &want[d]);
        if uneven && cur[d] != want[d] {
            let mut all = std::mem::take(&mut cur[d]);
            all.append(&mut gathered[d]);
            gathered[d] = all;
            continue;
        }
        while !is_prefix(&cur[d], &want[d]) {
            let a = cur[d].pop().expect("non-prefix is non-empty");
            gathered[d].insert(0, a);
        }
    }
    if gathered.iter().any(|g| !g.is_empty()) {
        steps.push(PlannedStep {
            axes: gathered.iter().flatten().cloned().collect(),
            kind: CollectiveKind::AllGather(gathered),
            after: with_dims(target, &cur),
        });
    }
    // Slice what the target adds.
    let sliced: Vec<Vec<AxisRef>> = (0..cur.len())
        .map(|d| want[d][cur[d].len()..].to_vec())
        .collect();
    if sliced.iter().any(|s| !s.is_empty()) {
        steps.push(PlannedStep {
            axes: sliced.iter().flatten().cloned().collect(),
            kind: CollectiveKind::AllSlice(sliced),
            after: with_dims(target, &want),
        });
    }
    steps
}

/// A permute plan, when every dim keeps its shard count.
fn permute_plan(
    mesh: &Mesh,
    fixed: &[String],
    source: &TensorSharding,
    target: &TensorSharding,
    shape: &[u64],
) -> Result<Option<Vec<PlannedStep>>, PartitionError> {
    let ls = ShardLayout::new(mesh, source, shape).map_err(PartitionError::sharding)?;
    let lt = ShardLayout::new(mesh, target, shape).map_err(PartitionError::sharding)?;
    if ls.shards != lt.shards {
        return Ok(None);
    }
    // The first device (in mesh order) holding each source block, per
    // coordinates on the fixed axes.
    let fixed_at: Vec<usize> = mesh
        .axes()
        .iter()
        .enumerate()
        .filter(|(_, a)| fixed.contains(&a.name))
        .map(|(i, _)| i)
        .collect();
    let group_of = |device: u64| -> Vec<u64> {
        let c = mesh.coords(device).unwrap_or_default();
        fixed_at.iter().filter_map(|&i| c.get(i).copied()).collect()
    };
    let mut holder: std::collections::BTreeMap<(Vec<u64>, Vec<u64>), u64> =
        std::collections::BTreeMap::new();
    for pos in 0..ls.num_devices() {
        let d = ls.device_at(pos);
        holder
            .entry((group_of(d), ls.shard_index_at(pos)))
            .or_insert(d);
    }
    let mut pairs = Vec::new();
    for pos in 0..lt.num_devices() {
        let want = lt.shard_index_at(pos);
        if ls.shard_index_at(pos) == want {
            continue;
        }
        let Some(&src) = holder.get(&(group_of(lt.device_at(pos)), want)) else {
            return Ok(None);
        };
        pairs.push((src, lt.device_at(pos)));
    }
    Ok(Some(vec![PlannedStep {
        kind: CollectiveKind::CollectivePermute(pairs),
        axes: Vec::new(),
        after: with_dims(
            target,
            &target
                .dims
                .iter()
                .map(|d| d.axes.clone())
                .collect::<Vec<_>>(),
        ),
    }]))
}

/// A slice-then-permute plan: slice locally (free) to an intermediate sharding
/// with the target's shard count per dim, then permute blocks. The added axes
/// are axes (or major sub-axes) the source does not use.
fn slice_permute_plan(
    mesh: &Mesh,
    fixed: &[String],
    source: &TensorSharding,
    target: &TensorSharding,
    shape: &[u64],
) -> Result<Option<Vec<PlannedStep>>, PartitionError> {
    let count =
        |axes: &[AxisRef]| -> u64 { axes.iter().map(|a| a.size(mesh).unwrap_or(1)).product() };
    let mut taken: Vec<String> = source.sharding_axes().map(|a| a.name.clone()).collect();
    taken.extend(fixed.iter().cloned());
    let mut mid: Vec<Vec<AxisRef>> = Vec::new();
    let mut sliced: Vec<Vec<AxisRef>> = Vec::new();
    for (d, (s, t)) in source.dims.iter().zip(&target.dims).enumerate() {
        let (cs, ct) = (count(&s.axes), count(&t.axes));
        let mut axes = s.axes.clone();
        let mut added = Vec::new();
        if ct != cs {
            if ct % cs != 0 || !even(mesh, shape[d], &s.axes) || shape[d] % ct != 0 {
                return Ok(None);
            }
            let r = ct / cs;
            let pick = mesh
                .axes()
                .iter()
                .find(|a| !taken.contains(&a.name) && a.size % r == 0);
            let Some(a) = pick else {
                return Ok(None);
            };
            taken.push(a.name.clone());
            let axis = if a.size == r {
                AxisRef::full(a.name.clone())
            } else {
                AxisRef::sub(a.name.clone(), 1, r)
            };
            added.push(axis.clone());
            axes.push(axis);
        }
        mid.push(axes);
        sliced.push(added);
    }
    if sliced.iter().all(|a| a.is_empty()) {
        return Ok(None);
    }
    let mid_sharding = with_dims(target, &mid);
    let Some(mut rest) = permute_plan(mesh, fixed, &mid_sharding, target, shape)? else {
        return Ok(None);
    };
    let mut plan = vec![PlannedStep {
        axes: sliced.iter().flatten().cloned().collect(),
        kind: CollectiveKind::AllSlice(sliced),
        after: mid_sharding,
    }];
    plan.append(&mut rest);
    Ok(Some(plan))
}

/// Cost of a plan under `model` for a tensor of `shape` with `elem` bytes per element.
pub fn plan_cost(
    mesh: &Mesh,
    source: &TensorSharding,
    plan: &[PlannedStep],
    shape: &[u64],
    elem: u64,
    model: CostModel,
) -> Result<f64, PartitionError> {
    let mut before = ShardLayout::new(mesh, source, shape).map_err(PartitionError::sharding)?;
    let mut total = 0.0;
    for s in plan {
        let after = ShardLayout::new(mesh, &s.after, shape).map_err(PartitionError::sharding)?;
        if s.kind.moves_data() {
            let bytes = before.local_bytes(elem).max(after.local_bytes(elem));
            let group: u64 = if s.axes.is_empty() {
                2
            } else {
                s.axes.iter().map(|a| a.size(mesh).unwrap_or(1)).product()
            };
            total += model.alpha * (group.saturating_sub(1)) as f64 + model.beta * bytes as f64;
        }
        before = after;
    }
    Ok(total)
}

/// The cheapest plan moving a tensor from `source` to `target` (neither unreduced).
pub fn plan_reshard(
    mesh: &Mesh,
    source: &TensorSharding,
    target: &TensorSharding,
    shape: &[u64],
    elem: u64,
    model: CostModel,
) -> Result<Vec<PlannedStep>, PartitionError> {
    plan_reshard_within(mesh, &[], source, target, shape, elem, model)
}

/// [`plan_reshard`] for a value of a partially manual computation's body:
/// every device keeps its coordinates on the `fixed` (manual) axes, so a
/// permute reads from the device's own manual group and no step slices
/// along a fixed axis.
pub fn plan_reshard_within(
    mesh: &Mesh,
    fixed: &[String],
    source: &TensorSharding,
    target: &TensorSharding,
    shape: &[u64],
    elem: u64,
    model: CostModel,
) -> Result<Vec<PlannedStep>, PartitionError> {
    let same = source
        .dims
        .iter()
        .zip(&target.dims)
        .all(|(a, b)| a.axes == b.axes);
    if same {
        return Ok(Vec::new());
    }
    let axes = axis_plan(mesh, shape, source, target);
    let mut best_cost = plan_cost(mesh, source, &axes, shape, elem, model)?;
    let mut best = axes;
    let candidates = [
        permute_plan(mesh, fixed, source, target, shape)?,
        slice_permute_plan(mesh, fixed, source, target, shape)?,
    ];
    for p in candidates.into_iter().flatten() {
        let c = plan_cost(mesh, source, &p, shape, elem, model)?;
        if c < best_cost {
            best_cost = c;
            best = p;
        }
    }
    Ok(best)
}
