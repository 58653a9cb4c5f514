//! Many ring groups at once without their plans (see [`super::rings`]): when
//! every group's ring moves equal chunks, a step loads the same links with the
//! same bytes at every step, so link bytes are one step's times the step
//! count, groups whose one-step routes share no link run apart, and groups
//! with the same ring and the same routes up to renaming links take the same
//! time, so one group per class is timed (on one unit when it is symmetric).
//! Equal to timing the merged plans on one network (tested).

use std::collections::BTreeMap;

use crate::engine::Time;
use crate::topology::Topology;

use super::calibration::Calibration;
use super::groups::GroupsTiming;
use super::kinds::CollectiveOp;
use super::rings::RingSpec;
use super::timing::{simulate, Group, Routes};
use super::tuner::{plan_options, Choice};
use super::{build, CollectiveError};

/// The groups timed as rings, or `None` when a group's moves are not equal
/// chunks or two groups share a link (the caller then merges the plans).
pub(crate) fn time_ring_groups(
    topo: &Topology,
    groups: &[Group],
    ops: &[CollectiveOp],
    total: u64,
    elem_bytes: u64,
    choice: &Choice,
    cal: &Calibration,
) -> Result<Option<GroupsTiming>, CollectiveError> {
    let mut specs = Vec::with_capacity(groups.len());
    for (g, op) in groups.iter().zip(ops) {
        let opts = plan_options(topo, g, cal, total * elem_bytes);
        match RingSpec::new(op, g.len(), total, &opts) {
            Some(s) => specs.push(s),
            None => return Ok(None),
        }
    }
    let mut owner: BTreeMap<usize, usize> = BTreeMap::new();
    let mut all_bytes: BTreeMap<usize, u64> = BTreeMap::new();
    let mut classes: BTreeMap<Vec<u64>, usize> = BTreeMap::new();
    let mut class_of = Vec::with_capacity(groups.len());
    for (g, (group, spec)) in groups.iter().zip(&specs).enumerate() {
        let mut routes = Routes::new(topo, group);
        let per_move = spec.chunk * elem_bytes;
        let mut key = vec![
            spec.steps as u64,
            spec.chunk,
            spec.unit as u64,
            spec.rings.len() as u64,
            spec.lanes as u64,
        ];
        for ring in &spec.rings {
            key.extend(ring.iter().map(|&r| r as u64));
        }
        let mut names: BTreeMap<usize, u64> = BTreeMap::new();
        for m in spec.one_step() {
            let route = routes.get_lane(m.from, m.to, m.lane)?;
            key.push(route.len() as u64);
            for &l in route {
                if owner.insert(l, g).is_some_and(|o| o != g) {
                    return Ok(None);
                }
                let b = all_bytes.entry(l).or_default();
                *b = b
                    .checked_add(per_move * spec.steps as u64)
                    .ok_or(CollectiveError::Sizes("link bytes overflow 64 bits".into()))?;
                let next = names.len() as u64;
                let id = *names.entry(l).or_insert(next);
                let k = &topo.links()[l];
                key.extend([
                    id,
                    k.bandwidth_bytes_per_s(),
                    k.latency_ps(),
                    k.class as u64,
                ]);
            }
        }
        let next = g;
        class_of.push(*classes.entry(key).or_insert(next));
    }
    let mut time = Time::ZERO;
    let mut reps: Vec<usize> = class_of.clone();
    reps.sort_unstable();
    reps.dedup();
    for g in reps {
        let t = time_ring(
            topo, &groups[g], &ops[g], &specs[g], total, elem_bytes, choice, cal,
        )?;
        time = time.max(t);
    }
    Ok(Some(GroupsTiming {
        time,
        algo: choice.algo,
        proto: choice.proto,
        flows: specs.iter().map(RingSpec::flows).sum(),
        link_bytes: all_bytes.into_iter().collect(),
    }))
}

/// One ring group's time: on one unit when its units are alike, else its plan.
#[allow(clippy::too_many_arguments)]
fn time_ring(
    topo: &Topology,
    group: &Group,
    op: &CollectiveOp,
    spec: &RingSpec,
    total: u64,
    elem_bytes: u64,
    choice: &Choice,
    cal: &Calibration,
) -> Result<Time, CollectiveError> {
    let mut routes = Routes::new(topo, group);
    if let Some(t) = spec.time_units(
        topo,
        &mut routes,
        elem_bytes,
        choice.algo,
        choice.proto,
        cal,
    )? {
        return Ok(t.time);
    }
    let opts = plan_options(topo, group, cal, total * elem_bytes);
    let plan = build(op, choice.algo, group.len(), total, &opts)?;
    let t = simulate(
        topo,
        group,
        &plan,
        elem_bytes,
        choice.algo,
        choice.proto,
        cal,
    )?;
    Ok(t.time)
}
