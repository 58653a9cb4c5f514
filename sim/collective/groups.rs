//! One collective over several disjoint device groups at once, as a
//! partitioned program runs it (an all-reduce over mesh axis `y` is one
//! all-reduce per `y` group, all at the same time). The algorithm and protocol
//! are chosen on the first group; every group runs that algorithm, and the
//! merged plan (ranks renumbered group after group) is timed on one network,
//! so groups that share links (a NIC, a leaf switch) slow each other down.
//! Where the first group's algorithm does not apply to another group (a
//! hierarchical algorithm on groups with other node layouts), each group is
//! chosen and timed alone and the slowest counts.
//!
//! Besides the time, it reports the bytes each link carried (for link
//! utilization in execution reports).

use std::collections::BTreeMap;

use crate::engine::{LinkFault, Time};
use crate::topology::Topology;

use super::algorithms::build;
use super::calibration::Calibration;
use super::kinds::{Algorithm, CollectiveOp, Protocol};
use super::path_cache::PathCache;
use super::plan::{Plan, Via};
use super::ring_groups::time_ring_groups;
use super::timing::{simulate_with_faults, Group, Routes};
use super::tuner::{
    choose, choose_candidate_with, plan_options, time_collective, Candidate, TimedChoice,
};
use super::CollectiveError;

/// What a multi-group collective costs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupsTiming {
    /// From the common start to the last group's end.
    pub time: Time,
    pub algo: Algorithm,
    pub proto: Protocol,
    /// Point-to-point flows the network carried.
    pub flows: usize,
    /// Bytes per link index (ascending), over all groups.
    pub link_bytes: Vec<(usize, u64)>,
}

/// Time `ops[g]` on `groups[g]` for every group at once; `total` elements of
/// `elem_bytes` bytes per rank (as [`super::plan::buffer_len`] reads it);
/// `faults` at times from the collective's start (see [`simulate_with_faults`]).
pub fn time_groups(
    topo: &Topology,
    groups: &[Vec<u32>],
    ops: &[CollectiveOp],
    total: u64,
    elem_bytes: u64,
    cal: &Calibration,
    faults: &[LinkFault],
) -> Result<GroupsTiming, CollectiveError> {
    time_groups_with(
        topo, groups, ops, total, elem_bytes, cal, faults, true, None, None,
    )
}

/// [`time_groups`] (no faults) or [`time_groups_using`] (`algo`) for one
/// of a series of rounds over the same groups and operations: `cache`
/// keeps what a `collective` sweep keeps between sizes (a tree's period
/// run serves every later size past the chunk budget). The same figures as
/// with a fresh cache.
#[allow(clippy::too_many_arguments)]
pub fn time_groups_cached(
    topo: &Topology,
    groups: &[Vec<u32>],
    ops: &[CollectiveOp],
    total: u64,
    elem_bytes: u64,
    cal: &Calibration,
    algo: Option<Algorithm>,
    cache: &mut PathCache,
) -> Result<GroupsTiming, CollectiveError> {
    let run = |algo, cache: &mut PathCache| {
        time_groups_with(
            topo,
            groups,
            ops,
            total,
            elem_bytes,
            cal,
            &[],
            true,
            algo,
            Some(cache),
        )
    };
    // An algorithm asked for that does not apply: NCCL's choice.
    match run(algo, cache) {
        Err(CollectiveError::NotApplicable { .. }) if algo.is_some() => run(None, cache),
        other => other,
    }
}

/// [`time_groups`] (no faults) with `algo` asked for by name where it
/// applies to the groups, NCCL's choice where it does not: for collectives
/// a program runs with kernels of its own rather than NCCL's (Transformer
/// Engine's userbuffers read and write every peer's buffer over NVLink in
/// one step: `direct`).
pub fn time_groups_using(
    topo: &Topology,
    groups: &[Vec<u32>],
    ops: &[CollectiveOp],
    total: u64,
    elem_bytes: u64,
    cal: &Calibration,
    algo: Algorithm,
) -> Result<GroupsTiming, CollectiveError> {
    let mut cache = PathCache::new();
    time_groups_cached(
        topo,
        groups,
        ops,
        total,
        elem_bytes,
        cal,
        Some(algo),
        &mut cache,
    )
}

/// The links each group's moves use when every group runs `algo` (as
/// [`time_groups`] runs them after choosing `algo` on the first group; a
/// group `algo` does not apply to, with its own choice): what a caller
/// needs to tell which groups share links, or which a link fault reaches.
pub fn group_links(
    topo: &Topology,
    groups: &[Vec<u32>],
    ops: &[CollectiveOp],
    total: u64,
    elem_bytes: u64,
    cal: &Calibration,
    algo: Algorithm,
) -> Result<Vec<Vec<usize>>, CollectiveError> {
    if groups.len() != ops.len() {
        return Err(CollectiveError::EmptyGroup);
    }
    groups
        .iter()
        .zip(ops)
        .map(|(g, op)| {
            let g = Group::new(topo, g.clone())?;
            let opts = plan_options(topo, &g, cal, total * elem_bytes);
            let plan = match build(op, algo, g.len(), total, &opts) {
                Ok(p) => p,
                Err(_) => choose(topo, &g, op, total, elem_bytes, cal, None, None)?.1,
            };
            Ok(link_bytes(topo, &g, &plan, elem_bytes)?
                .into_iter()
                .map(|(l, _)| l)
                .collect())
        })
        .collect()
}

/// [`time_groups`] with every group on one network even where their links
/// are disjoint (the reference the decomposition must equal).
pub fn time_groups_merged(
    topo: &Topology,
    groups: &[Vec<u32>],
    ops: &[CollectiveOp],
    total: u64,
    elem_bytes: u64,
    cal: &Calibration,
) -> Result<GroupsTiming, CollectiveError> {
    time_groups_with(
        topo,
        groups,
        ops,
        total,
        elem_bytes,
        cal,
        &[],
        false,
        None,
        None,
    )
}

#[allow(clippy::too_many_arguments)]
fn time_groups_with(
    topo: &Topology,
    groups: &[Vec<u32>],
    ops: &[CollectiveOp],
    total: u64,
    elem_bytes: u64,
    cal: &Calibration,
    faults: &[LinkFault],
    decompose: bool,
    algo: Option<Algorithm>,
    cache: Option<&mut PathCache>,
) -> Result<GroupsTiming, CollectiveError> {
    if groups.is_empty() || groups.len() != ops.len() {
        return Err(CollectiveError::EmptyGroup);
    }
    let groups: Vec<Group> = groups
        .iter()
        .map(|g| Group::new(topo, g.clone()))
        .collect::<Result<_, _>>()?;
    let mut routes = Routes::new(topo, &groups[0]);
    // Groups that run apart (no faults) are each timed as `collective`
    // times one group alone: `auto` ranks by times where a tree is past the
    // chunk budget, and such a tree is timed by its period, not by the
    // budget's larger chunks.
    let alone = decompose && faults.is_empty();
    let (choice, cand) = choose_candidate_with(
        topo,
        &groups[0],
        &mut routes,
        &ops[0],
        total,
        elem_bytes,
        cal,
        algo,
        None,
        true,
        alone,
        cache,
    )?;
    // Group 0's time alone where the choice timed it.
    let timed_alone = match &cand {
        Candidate::Period(t) => Some(**t),
        Candidate::Timed(b) => Some(b.0),
        _ => None,
    };
    // A candidate timed for the ranking is timed here with the others.
    let cand = match cand {
        Candidate::Timed(b) => b.1,
        c => c,
    };
    let first = match cand {
        Candidate::Plan(p) => p,
        Candidate::Channels(_)
        | Candidate::Tree(_)
        | Candidate::Period(_)
        | Candidate::Timed(_) => {
            let opts = plan_options(topo, &groups[0], cal, total * elem_bytes);
            build(&ops[0], choice.algo, groups[0].len(), total, &opts)?
        }
        Candidate::Ring(_) => {
            if decompose && faults.is_empty() {
                if let Some(t) =
                    time_ring_groups(topo, &groups, ops, total, elem_bytes, &choice, cal)?
                {
                    return Ok(t);
                }
            }
            let opts = plan_options(topo, &groups[0], cal, total * elem_bytes);
            build(&ops[0], choice.algo, groups[0].len(), total, &opts)?
        }
    };
    let mut plans = vec![first];
    for (g, op) in groups.iter().zip(ops).skip(1) {
        let opts = plan_options(topo, g, cal, total * elem_bytes);
        match build(op, choice.algo, g.len(), total, &opts) {
            Ok(p) => plans.push(p),
            Err(_) => return time_apart(topo, &groups, ops, total, elem_bytes, cal, faults),
        }
    }
    if alone {
        let alone = Alone {
            ops,
            total,
            first: timed_alone,
        };
        let runs = group_runs(topo, &groups, &plans, elem_bytes)?;
        if let Some(t) = time_independent(topo, &groups, &runs, elem_bytes, &choice, cal, alone)? {
            return Ok(t);
        }
        if let Some(t) =
            time_symmetric_shared(topo, &groups, &plans, &runs, elem_bytes, &choice, cal)?
        {
            return Ok(t);
        }
    }
    let union = Group::new(
        topo,
        groups
            .iter()
            .flat_map(|g| g.devices.iter().copied())
            .collect(),
    )?;
    let merged = merge(&plans);
    let t = match simulate_with_faults(
        topo,
        &union,
        &merged,
        elem_bytes,
        choice.algo,
        choice.proto,
        cal,
        faults,
    ) {
        Ok(t) => t,
        Err(e @ CollectiveError::Undeliverable { .. }) => return Err(e),
        // NVLS on the union can fail where it held per group (two switches).
        Err(_) => return time_apart(topo, &groups, ops, total, elem_bytes, cal, faults),
    };
    Ok(GroupsTiming {
        time: t.time,
        algo: choice.algo,
        proto: choice.proto,
        flows: t.flows,
        link_bytes: link_bytes(topo, &union, &merged, elem_bytes)?,
    })
}

/// What timing a group alone needs: the groups' operations, the elements
/// per rank, and group 0's time where the choice already took it.
#[derive(Clone, Copy)]
struct Alone<'a> {
    ops: &'a [CollectiveOp],
    total: u64,
    first: Option<TimedChoice>,
}

/// When no link carries traffic of two groups, the groups do not interact:
/// the merged run is the groups' runs side by side, so its time is the
/// slowest group's. Groups whose runs are the same up to renaming links (same
/// plan, and every move's route the same sequence of link capacities and
/// latencies, with the same links shared between moves) take the same time,
/// so one group per such class is simulated. `None` when links are shared.
fn time_independent(
    topo: &Topology,
    groups: &[Group],
    runs: &GroupRuns,
    elem_bytes: u64,
    choice: &super::tuner::Choice,
    cal: &Calibration,
    alone: Alone,
) -> Result<Option<GroupsTiming>, CollectiveError> {
    if runs.used.iter().any(|&l| runs.users[l] > 1) {
        return Ok(None);
    }
    let class_of = &runs.class_of;
    let reps: std::collections::BTreeSet<usize> = class_of.iter().copied().collect();
    let mut time = Time::ZERO;
    let mut flows_of: BTreeMap<usize, usize> = BTreeMap::new();
    for &g in &reps {
        // Each class's representative timed alone, as `collective` times it.
        let t = match (g, alone.first) {
            (0, Some(t)) => t,
            _ => time_collective(
                topo,
                &groups[g],
                &alone.ops[g],
                alone.total,
                elem_bytes,
                cal,
                Some(choice.algo),
                Some(choice.proto),
            )?,
        };
        time = time.max(t.time);
        flows_of.insert(g, t.flows);
    }
    // Flows: every group's, each as many as its class representative's.
    let flows = class_of.iter().map(|rep| flows_of[rep]).sum();
    Ok(Some(GroupsTiming {
        time,
        algo: choice.algo,
        proto: choice.proto,
        flows,
        link_bytes: runs.link_bytes(),
    }))
}

/// When the groups' runs are the same up to renaming links (as in
/// [`time_independent`]) and every link they share is shared by all of them,
/// at the same place in each run (the rails of a three-level fat tree whose
/// tapered cores are one layer for every rail), the merged run is
/// symmetric: max-min fair sharing gives every group's flows the same
/// rates, so each group's moves on a shared link get exactly `1 / k` of it.
/// Then one group's plan run with its shared links at `1 / k` of their
/// capacity is the merged run (the quotient of `channels`' node rotation,
/// here over groups). `None` where the groups do not have that symmetry.
fn time_symmetric_shared(
    topo: &Topology,
    groups: &[Group],
    plans: &[Plan],
    runs: &GroupRuns,
    elem_bytes: u64,
    choice: &super::tuner::Choice,
    cal: &Calibration,
) -> Result<Option<GroupsTiming>, CollectiveError> {
    let k = groups.len();
    let shared: Vec<usize> = runs
        .used
        .iter()
        .copied()
        .filter(|&l| runs.users[l] > 1)
        .collect();
    if k < 2
        || !runs.aligned
        || runs.class_of.iter().any(|&c| c != 0)
        || shared.is_empty()
        || shared.iter().any(|&l| runs.users[l] as usize != k)
    {
        return Ok(None);
    }
    // A link that never binds does not bind shared either: it keeps the
    // unbounded rate the flow model gives it (a fault would restore its
    // real capacity).
    let faults: Vec<LinkFault> = shared
        .iter()
        .filter(|&&l| !topo.never_binding(crate::topology::LinkId(l as u32)))
        .map(|&link| LinkFault {
            link,
            at: Time::ZERO,
            kind: crate::engine::FaultKind::Degrade(1.0 / k as f64),
        })
        .collect();
    let t = simulate_with_faults(
        topo,
        &groups[0],
        &plans[0],
        elem_bytes,
        choice.algo,
        choice.proto,
        cal,
        &faults,
    )?;
    Ok(Some(GroupsTiming {
        time: t.time,
        algo: choice.algo,
        proto: choice.proto,
        flows: t.flows * k,
        link_bytes: runs.link_bytes(),
    }))
}

/// The groups' runs as [`time_independent`] and [`time_symmetric_shared`]
/// read them, from one walk over every group's plan.
struct GroupRuns {
    /// Per link, how many groups' moves use it.
    users: Vec<u32>,
    /// Per link, the bytes all groups' moves carry on it.
    bytes: Vec<u64>,
    /// The links used, ascending.
    used: Vec<usize>,
    /// Per group, the first group whose run is the same up to renaming
    /// links ([`shape_of`]): its class's representative.
    class_of: Vec<usize>,
    /// Every link sits at one place (first-use index) in the run of every
    /// group using it.
    aligned: bool,
}

impl GroupRuns {
    /// Bytes per used link, ascending.
    fn link_bytes(&self) -> Vec<(usize, u64)> {
        self.used.iter().map(|&l| (l, self.bytes[l])).collect()
    }
}

/// Walk every group's plan once: the links it uses with their bytes, and
/// its run's shape.
fn group_runs(
    topo: &Topology,
    groups: &[Group],
    plans: &[Plan],
    elem_bytes: u64,
) -> Result<GroupRuns, CollectiveError> {
    let links = topo.links().len();
    let mut users = vec![0u32; links];
    let mut bytes = vec![0u64; links];
    let mut place = vec![u64::MAX; links];
    let mut used: Vec<usize> = Vec::new();
    // The distinct runs only: a group's run is dropped once classed.
    let mut classes: BTreeMap<Vec<u64>, usize> = BTreeMap::new();
    let mut class_of = Vec::with_capacity(groups.len());
    let mut aligned = true;
    // Per link: (group that last named it, its name there); one table for all
    // groups instead of a map per group.
    let mut names = vec![(usize::MAX, 0u64); links];
    for (g, (group, plan)) in groups.iter().zip(plans).enumerate() {
        // One route cache for both passes over the plan.
        let mut routes = Routes::new(topo, group);
        let mut seen: Vec<usize> = Vec::new();
        route_bytes(&mut routes, plan, elem_bytes, &mut |l, b| {
            bytes[l] += b;
            seen.push(l);
        })?;
        seen.sort_unstable();
        seen.dedup();
        let shape = shape_of(topo, &mut routes, plan, (g, &mut names))?;
        class_of.push(*classes.entry(shape).or_insert(g));
        for &l in &seen {
            if users[l] == 0 {
                used.push(l);
            }
            users[l] += 1;
            let (namer, here) = names[l];
            if namer != g || (place[l] != u64::MAX && place[l] != here) {
                aligned = false;
            }
            place[l] = here;
        }
    }
    used.sort_unstable();
    Ok(GroupRuns {
        users,
        bytes,
        used,
        class_of,
        aligned,
    })
}

/// A group's run up to renaming links: per step and move, the move and its
/// route's links as (first-use index, bandwidth, latency, class), so equal
/// shapes give isomorphic flow-level runs. `names` is (this group's index,
/// a per-link table of (group, first-use index) shared by the groups).
fn shape_of(
    topo: &Topology,
    routes: &mut Routes,
    plan: &Plan,
    (g, names): (usize, &mut [(usize, u64)]),
) -> Result<Vec<u64>, CollectiveError> {
    let mut next = 0u64;
    let mut out = vec![plan.ranks as u64, plan.buffer_len, plan.steps.len() as u64];
    let mut link = |l: usize, out: &mut Vec<u64>| {
        let e = &mut names[l];
        if e.0 != g {
            *e = (g, next);
            next += 1;
        }
        let id = e.1;
        let k = &topo.links()[l];
        out.extend([
            id,
            k.bandwidth_bytes_per_s(),
            k.latency_ps(),
            k.class as u64,
        ]);
    };
    for step in &plan.steps {
        out.push(u64::MAX);
        for m in step {
            out.extend([
                m.via as u64,
                m.from as u64,
                m.to as u64,
                m.src,
                m.dst,
                m.len,
            ]);
            match m.via {
                Via::P2p => {
                    if m.from != m.to {
                        let r = routes.get_lane(m.from, m.to, m.lane)?;
                        out.push(r.len() as u64);
                        for &l in r {
                            link(l, &mut out);
                        }
                    }
                }
                Via::SwitchReduce | Via::SwitchMulticast => {
                    let (up, _) = routes.switch_links(m.from)?;
                    let (_, down) = routes.switch_links(m.to)?;
                    link(up, &mut out);
                    link(down, &mut out);
                }
                Via::InNetwork | Via::NetworkReduce | Via::NetworkMulticast => {
                    let (up, down) = routes.net_move_links(m)?;
                    out.push((up.len() + down.len()) as u64);
                    for l in up.into_iter().chain(down) {
                        link(l, &mut out);
                    }
                }
            }
        }
    }
    for (r, o, l) in &plan.reduced {
        out.extend([*r as u64, *o, *l]);
    }
    Ok(out)
}

/// Every group chosen and timed on its own; the slowest group's time.
fn time_apart(
    topo: &Topology,
    groups: &[Group],
    ops: &[CollectiveOp],
    total: u64,
    elem_bytes: u64,
    cal: &Calibration,
    faults: &[LinkFault],
) -> Result<GroupsTiming, CollectiveError> {
    let mut out: Option<GroupsTiming> = None;
    let mut bytes: BTreeMap<usize, u64> = BTreeMap::new();
    for (g, op) in groups.iter().zip(ops) {
        let (choice, plan) = choose(topo, g, op, total, elem_bytes, cal, None, None)?;
        let t = simulate_with_faults(
            topo,
            g,
            &plan,
            elem_bytes,
            choice.algo,
            choice.proto,
            cal,
            faults,
        )?;
        for (l, b) in link_bytes(topo, g, &plan, elem_bytes)? {
            *bytes.entry(l).or_default() += b;
        }
        let flows = out.as_ref().map_or(0, |o| o.flows) + t.flows;
        if out.as_ref().map_or(true, |o| t.time > o.time) {
            out = Some(GroupsTiming {
                time: t.time,
                algo: choice.algo,
                proto: choice.proto,
                flows,
                link_bytes: Vec::new(),
            });
        } else if let Some(o) = out.as_mut() {
            o.flows = flows;
        }
    }
    let mut out = out.ok_or(CollectiveError::EmptyGroup)?;
    out.link_bytes = bytes.into_iter().collect();
    Ok(out)
}

/// The plans side by side: group `g`'s ranks follow the ranks of groups before it.
fn merge(plans: &[Plan]) -> Plan {
    let mut offset = 0;
    let mut lists = Vec::with_capacity(plans.len());
    let mut reduced = Vec::new();
    for p in plans {
        lists.push(
            p.steps
                .iter()
                .map(|step| {
                    step.iter()
                        .map(|m| {
                            let mut m = *m;
                            m.from += offset;
                            m.to += offset;
                            m
                        })
                        .collect()
                })
                .collect(),
        );
        reduced.extend(p.reduced.iter().map(|&(r, o, l)| (r + offset, o, l)));
        offset += p.ranks;
    }
    Plan {
        ranks: offset,
        buffer_len: plans.iter().map(|p| p.buffer_len).max().unwrap_or(0),
        steps: super::plan::parallel(lists),
        reduced,
    }
}

/// Bytes each link carries when `plan` runs on `group`: a point-to-point move
/// loads every link of its route; a switch reduction loads each sender's
/// uplink and the receiver's downlink once; a multicast the sender's uplink
/// once and every receiver's downlink.
fn link_bytes(
    topo: &Topology,
    group: &Group,
    plan: &Plan,
    elem_bytes: u64,
) -> Result<Vec<(usize, u64)>, CollectiveError> {
    // (link, bytes) per use, summed per link after one sort (cheaper than a
    // map updated per link of every move).
    let mut bytes: Vec<(usize, u64)> = Vec::new();
    route_bytes(
        &mut Routes::new(topo, group),
        plan,
        elem_bytes,
        &mut |l, b| bytes.push((l, b)),
    )?;
    bytes.sort_unstable_by_key(|&(l, _)| l);
    let mut out: Vec<(usize, u64)> = Vec::new();
    for (l, b) in bytes {
        match out.last_mut() {
            Some(last) if last.0 == l => last.1 += b,
            _ => out.push((l, b)),
        }
    }
    Ok(out)
}

/// Each use of a link by the plan's moves as `add(link, bytes)` (bytes > 0),
/// over a group's route cache.
fn route_bytes(
    routes: &mut Routes,
    plan: &Plan,
    elem_bytes: u64,
    add: &mut impl FnMut(usize, u64),
) -> Result<(), CollectiveError> {
    for step in &plan.steps {
        let mut once: BTreeMap<(usize, u64, u64, bool), ()> = BTreeMap::new();
        let mut net_once: std::collections::BTreeSet<(usize, u64, u64)> = Default::default();
        for m in step {
            let b = m.len * elem_bytes;
            if b == 0 {
                continue;
            }
            match m.via {
                Via::P2p => {
                    if m.from != m.to {
                        for &l in routes.get_lane(m.from, m.to, m.lane)? {
                            add(l, b);
                        }
                    }
                }
                Via::SwitchReduce => {
                    let (up, _) = routes.switch_links(m.from)?;
                    add(up, b);
                    if once.insert((m.to, m.dst, m.len, true), ()).is_none() {
                        let (_, down) = routes.switch_links(m.to)?;
                        add(down, b);
                    }
                }
                Via::SwitchMulticast => {
                    if once.insert((m.from, m.src, m.len, false), ()).is_none() {
                        let (up, _) = routes.switch_links(m.from)?;
                        add(up, b);
                    }
                    let (_, down) = routes.switch_links(m.to)?;
                    add(down, b);
                }
                Via::InNetwork | Via::NetworkReduce | Via::NetworkMulticast => {
                    // Each link of the aggregation tree once per range
                    // (nothing up for a result held at the root).
                    let (up, down) = routes.net_move_links(m)?;
                    for l in up.into_iter().chain(down) {
                        if net_once.insert((l, m.dst, m.len)) {
                            add(l, b);
                        }
                    }
                }
            }
        }
    }
    Ok(())
}
