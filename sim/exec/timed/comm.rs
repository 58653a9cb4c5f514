//! Collective times for a timed run: each collective step of the program
//! becomes the collectives layer's operation over its device groups (mesh
//! device `i` on topology device `i`), timed once per distinct (operation,
//! groups, size) and cached.
//!
//! Under link faults a step's groups are split into components, groups that
//! share no link with another component (found from the links each group's
//! plan uses): a component none of whose links has a fault before the step
//! ends takes the fault-free time; one that has is timed alone with the
//! faults, so a fault slows only the groups whose link loads it reaches.

use std::collections::BTreeMap;

use std::rc::Rc;

use crate::collective::{
    group_links, time_groups, time_groups_cached, Algorithm, Calibration, CollectiveError,
    CollectiveOp, GroupsTiming, PathCache,
};
use crate::engine::{LinkFault, Time};
use crate::partition::{window, Collective, CollectiveKind, SpmdProgram, Traffic};
use crate::topology::Topology;

use super::TimedError;

/// The cost of one collective step (all groups together).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommTiming {
    pub time: Time,
    /// `algorithm/protocol` as chosen.
    pub label: String,
    pub link_bytes: Vec<(usize, u64)>,
    /// The algorithm, where exactly one round moved data.
    pub algo: Option<Algorithm>,
}

/// A collective step's groups by the links they use: groups that share a
/// link (directly or through other groups) form one component.
#[derive(Debug)]
struct Components {
    /// Component of each device group.
    of: Vec<usize>,
    /// Per component, its device groups in increasing order.
    groups: Vec<Vec<usize>>,
    /// Per component, the links its groups use (sorted).
    links: Vec<Vec<usize>>,
}

impl Components {
    /// Union of groups over shared links (the lowest group of a component
    /// numbers it, so components come in order of their first group).
    fn new(links: Vec<Vec<usize>>, num_links: usize) -> Components {
        let n = links.len();
        let mut parent: Vec<usize> = (0..n).collect();
        fn root(parent: &mut [usize], mut x: usize) -> usize {
            while parent[x] != x {
                parent[x] = parent[parent[x]];
                x = parent[x];
            }
            x
        }
        let mut owner = vec![usize::MAX; num_links];
        for (g, ls) in links.iter().enumerate() {
            for &l in ls {
                match owner.get(l).copied() {
                    Some(usize::MAX) => owner[l] = g,
                    Some(o) => {
                        let (a, b) = (root(&mut parent, o), root(&mut parent, g));
                        // The lower root stays: components keep their first group.
                        parent[a.max(b)] = a.min(b);
                    }
                    None => {}
                }
            }
        }
        let mut of = vec![usize::MAX; n];
        let mut groups: Vec<Vec<usize>> = Vec::new();
        let mut comp_links: Vec<Vec<usize>> = Vec::new();
        for g in 0..n {
            let r = root(&mut parent, g);
            if of[r] == usize::MAX {
                of[r] = groups.len();
                groups.push(Vec::new());
                comp_links.push(Vec::new());
            }
            let k = of[r];
            of[g] = k;
            groups[k].push(g);
            comp_links[k].extend_from_slice(&links[g]);
        }
        for ls in &mut comp_links {
            ls.sort_unstable();
            ls.dedup();
        }
        Components {
            of,
            groups,
            links: comp_links,
        }
    }

    fn touched(&self, k: usize, faults: &[LinkFault]) -> bool {
        faults
            .iter()
            .any(|f| self.links[k].binary_search(&f.link).is_ok())
    }
}

/// One round: groups, their operations, elements per rank.
type Round = (Vec<Vec<u32>>, Vec<CollectiveOp>, u64);

/// Fault-free collective times shared by several timed runs on one topology
/// with one calibration (the programs of a training step reduce the same
/// gradient sizes over the same groups again and again): keyed by the
/// round's groups, operations, element count and element size, so a hit is
/// the very computation it replaces. Only looked up, never iterated.
#[derive(Default)]
pub struct CommMemo(std::sync::Mutex<Memo>);

#[derive(Default)]
struct Memo {
    times: BTreeMap<MemoKey, GroupsTiming>,
    /// Per groups and operations, what `collective`'s sweeps keep between
    /// sizes (a tree's period run serves every size past the chunk budget;
    /// the figures are those of a fresh cache).
    sweeps: BTreeMap<(Vec<Vec<u32>>, String), PathCache>,
}

/// Groups, operations, the algorithm asked for and whether the round ran
/// latency-free (as printed), elements per rank, bytes per element.
type MemoKey = (Vec<Vec<u32>>, String, u64, u64);

impl std::fmt::Debug for CommMemo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CommMemo")
    }
}

impl CommMemo {
    fn time(
        &self,
        topo: &Topology,
        (groups, ops, total): (&[Vec<u32>], &[CollectiveOp], u64),
        elem_bytes: u64,
        (cal, latency_free): (&Calibration, bool),
        algo: Option<Algorithm>,
    ) -> Result<GroupsTiming, CollectiveError> {
        // The memo serves one calibration; a latency-free round runs on the
        // variant derived from it, so a flag tells the two apart.
        let key = (
            groups.to_vec(),
            format!("{ops:?} {algo:?} {latency_free}"),
            total,
            elem_bytes,
        );
        if let Some(t) = self.0.lock().ok().and_then(|m| m.times.get(&key).cloned()) {
            return Ok(t);
        }
        // Taken out while in use (another thread starts its own).
        let sweep = (key.0.clone(), key.1.clone());
        let mut cache = self
            .0
            .lock()
            .ok()
            .and_then(|mut m| m.sweeps.remove(&sweep))
            .unwrap_or_default();
        let t = time_groups_cached(topo, groups, ops, total, elem_bytes, cal, algo, &mut cache)?;
        if let Ok(mut m) = self.0.lock() {
            m.times.insert(key, t.clone());
            m.sweeps.insert(sweep, cache);
        }
        Ok(t)
    }
}

pub struct CommModel<'t> {
    topo: &'t Topology,
    cal: Calibration,
    /// Link faults at absolute run times.
    faults: Vec<LinkFault>,
    cache: BTreeMap<String, CommTiming>,
    /// Per collective (by cache key) under faults: its groups' components
    /// (`None`: timed all together, as a halo exchange is).
    components: BTreeMap<String, Option<Rc<Components>>>,
    /// Faulted times by (cache key, component, start).
    faulted: BTreeMap<(String, usize, Time), (Time, String)>,
    /// Shared with other runs on the same topology and calibration.
    memo: Option<std::sync::Arc<CommMemo>>,
    /// Algorithm of node-local all-gathers and reduce-scatters
    /// ([`super::TimedOptions::node_local_algorithm`]).
    node_local: Option<Algorithm>,
    /// The calibration of node-local rounds run latency-free
    /// ([`super::TimedOptions::node_local_latency_free`]).
    latency_free: Option<Calibration>,
}

impl<'t> CommModel<'t> {
    /// `cal`, or the calibration of the topology's first device model.
    pub fn new(
        topo: &'t Topology,
        cal: Option<Calibration>,
        faults: Vec<LinkFault>,
    ) -> Result<CommModel<'t>, TimedError> {
        let cal = match cal {
            Some(c) => c,
            None => {
                let model = topo
                    .device(0)
                    .map(|c| topo.component(c).model.clone())
                    .unwrap_or_default();
                Calibration::for_topology(topo, &model).map_err(|source| {
                    TimedError::Collective {
                        step: 0,
                        what: "calibration",
                        cause: Box::new(source),
                    }
                })?
            }
        };
        Ok(CommModel {
            topo,
            cal,
            faults,
            cache: BTreeMap::new(),
            components: BTreeMap::new(),
            faulted: BTreeMap::new(),
            memo: None,
            node_local: None,
            latency_free: None,
        })
    }

    /// Share fault-free collective times with other runs through `memo`
    /// (runs on the same topology with the same calibration only).
    pub fn with_memo(mut self, memo: Option<std::sync::Arc<CommMemo>>) -> Self {
        self.memo = memo;
        self
    }

    /// Run all-gathers and reduce-scatters whose groups each lie within one
    /// node with `algo` where it applies.
    pub fn with_node_local_algorithm(mut self, algo: Option<Algorithm>) -> Self {
        self.node_local = algo;
        self
    }

    /// With node-local rounds asked for, run them (and collective permutes
    /// inside one node) without the protocols' launch and per-step
    /// latencies.
    pub fn with_node_local_latency_free(mut self, on: bool) -> Self {
        self.latency_free = (on && self.node_local.is_some()).then(|| {
            let mut cal = self.cal;
            for p in [&mut cal.ll, &mut cal.ll128, &mut cal.simple, &mut cal.nvls] {
                (p.base_us, p.nvlink_hop_us, p.network_hop_us) = (0.0, 0.0, 0.0);
                p.tree_nvlink_hop_us = None; // a tree's hop is then the (zero) step's
            }
            cal
        });
        self
    }

    /// The node of device `d`, if it has one.
    fn node_of(&self, d: u32) -> Option<u32> {
        self.topo
            .device(d)
            .and_then(|c| self.topo.component(c).node)
    }

    /// Whether every group of a round sits in one node.
    fn node_local_groups(&self, groups: &[Vec<u32>]) -> bool {
        groups.iter().all(|g| {
            let first = g.first().and_then(|&d| self.node_of(d));
            first.is_some() && g.iter().all(|&d| self.node_of(d) == first)
        })
    }

    /// The algorithm asked for a round: the node-local one for all-gathers
    /// and reduce-scatters whose every group sits in one node.
    fn asked(&self, groups: &[Vec<u32>], ops: &[CollectiveOp]) -> Option<Algorithm> {
        let algo = self.node_local?;
        let kind_fits = ops
            .iter()
            .all(|o| matches!(o, CollectiveOp::AllGather | CollectiveOp::ReduceScatter));
        (kind_fits && self.node_local_groups(groups)).then_some(algo)
    }

    /// The calibration of a round and whether it is the latency-free one:
    /// for a node-local round asked for and for a collective permute inside
    /// one node, when set.
    fn round_calibration(
        &self,
        groups: &[Vec<u32>],
        ops: &[CollectiveOp],
        asked: Option<Algorithm>,
    ) -> (&Calibration, bool) {
        let node = |d: Option<&u32>| d.and_then(|&d| self.node_of(d));
        // Every send of the round from a device to one of its own node.
        let permutes = !ops.is_empty()
            && groups.iter().zip(ops).all(|(g, o)| match o {
                CollectiveOp::Permute { pairs } => pairs.iter().all(|&(s, t)| {
                    let from = node(g.get(s));
                    from.is_some() && from == node(g.get(t))
                }),
                _ => false,
            });
        match &self.latency_free {
            Some(cal) if asked.is_some() || permutes => (cal, true),
            _ => (&self.cal, false),
        }
    }

    /// Whether any link fault is set for the run.
    pub fn has_faults(&self) -> bool {
        !self.faults.is_empty()
    }

    /// The device groups (indices into `c.groups`) of collective `c` that a
    /// link fault of the run may reach at some time: the groups of every
    /// component with a faulted link; none where the step is timed all
    /// together (every group then takes the same time).
    pub fn touched(
        &mut self,
        program: &SpmdProgram,
        c: &Collective,
    ) -> Result<Vec<usize>, CollectiveError> {
        if self.faults.is_empty() {
            return Ok(Vec::new());
        }
        let Some(comps) = self.components(program, c)? else {
            return Ok(Vec::new());
        };
        let mut out: Vec<usize> = (0..comps.groups.len())
            .filter(|&k| comps.touched(k, &self.faults))
            .flat_map(|k| comps.groups[k].iter().copied())
            .collect();
        out.sort_unstable();
        Ok(out)
    }

    /// Time collective `c` of `program` for its device group `group` (an
    /// index into `c.groups`; past them, a device in no group) starting at
    /// `now`: the fault-free time (cached, the slowest group's), or, when a
    /// fault on a link of the group's component happens before that ends, a
    /// run of that component with the faults moved to the collective's clock
    /// (a fault already past applies from its start), never shorter than the
    /// fault-free time. Link bytes stay those of the fault-free routes.
    pub fn time(
        &mut self,
        program: &SpmdProgram,
        c: &Collective,
        now: Time,
        group: usize,
    ) -> Result<CommTiming, CollectiveError> {
        let clean = self.time_clean(program, c)?;
        let end = now.0.saturating_add(clean.time.0);
        let relevant: Vec<LinkFault> = self
            .faults
            .iter()
            .filter(|f| f.at.0 < end)
            .map(|f| LinkFault {
                at: Time(f.at.0.saturating_sub(now.0)),
                ..*f
            })
            .collect();
        if relevant.is_empty() || clean.label == "none" || clean.label == "local" {
            return Ok(clean);
        }
        let Some(comps) = self.components(program, c)? else {
            return self.time_together(program, c, now, clean, &relevant);
        };
        let Some(&k) = comps.of.get(group) else {
            return Ok(clean);
        };
        if !comps.touched(k, &relevant) {
            return Ok(clean);
        }
        let key = (cache_key(program, c), k, now);
        if let Some((time, label)) = self.faulted.get(&key) {
            return Ok(CommTiming {
                time: *time,
                label: label.clone(),
                ..clean
            });
        }
        let (groups, ops, total) = self.operation(program, c);
        let part: Vec<Vec<u32>> = comps.groups[k].iter().map(|&g| groups[g].clone()).collect();
        let part_ops: Vec<CollectiveOp> = comps.groups[k].iter().map(|&g| ops[g].clone()).collect();
        let t = time_groups(
            self.topo,
            &part,
            &part_ops,
            total,
            c.dtype.size_bytes(),
            &self.cal,
            &relevant,
        )
        .map_err(|e| on_run_clock(e, now))?;
        let time = t.time.max(clean.time);
        let label = format!("{}/{} with faults", t.algo.name(), t.proto.name());
        self.faulted.insert(key, (time, label.clone()));
        Ok(CommTiming {
            time,
            label,
            ..clean
        })
    }

    /// The components of `c`'s groups (cached); `None` for a collective
    /// timed all together (several rounds, or no single algorithm).
    fn components(
        &mut self,
        program: &SpmdProgram,
        c: &Collective,
    ) -> Result<Option<Rc<Components>>, CollectiveError> {
        let key = cache_key(program, c);
        if let Some(comps) = self.components.get(&key) {
            return Ok(comps.clone());
        }
        let clean = self.time_clean(program, c)?;
        let comps = match (&c.kind, clean.algo) {
            (CollectiveKind::Window { .. }, _) | (_, None) => None,
            (_, Some(algo)) => {
                let (groups, ops, total) = self.operation(program, c);
                let links = group_links(
                    self.topo,
                    &groups,
                    &ops,
                    total,
                    c.dtype.size_bytes(),
                    &self.cal,
                    algo,
                )?;
                Some(Rc::new(Components::new(links, self.topo.links().len())))
            }
        };
        self.components.insert(key, comps.clone());
        Ok(comps)
    }

    /// Every group of `c` timed together with the faults (each takes the
    /// slowest group's time).
    fn time_together(
        &mut self,
        program: &SpmdProgram,
        c: &Collective,
        now: Time,
        clean: CommTiming,
        relevant: &[LinkFault],
    ) -> Result<CommTiming, CollectiveError> {
        let mut time = Time::ZERO;
        let mut last = None;
        for (groups, ops, total) in self.rounds(program, c) {
            if total == 0 || groups.iter().all(|g| g.len() < 2) {
                continue;
            }
            let t = time_groups(
                self.topo,
                &groups,
                &ops,
                total,
                c.dtype.size_bytes(),
                &self.cal,
                relevant,
            )
            .map_err(|e| on_run_clock(e, now))?;
            time = time.checked_add(t.time)?;
            last = Some(t);
        }
        let Some(t) = last else {
            return Ok(clean);
        };
        Ok(CommTiming {
            time,
            label: format!("{}/{} with faults", t.algo.name(), t.proto.name()),
            ..clean
        })
    }

    /// The collectives layer's operations, one round after another (a halo
    /// exchange is one permute per round), each over its groups with its
    /// element count.
    fn rounds(&self, program: &SpmdProgram, c: &Collective) -> Vec<Round> {
        if let CollectiveKind::Window { transfers, .. } = &c.kind {
            let all: Vec<u64> = program.mesh.device_ids();
            let ranks: BTreeMap<u64, usize> =
                all.iter().enumerate().map(|(i, &d)| (d, i)).collect();
            return window::rounds(transfers)
                .into_iter()
                .map(|round| {
                    let rank = |d: u64| ranks.get(&d).copied().unwrap_or(0);
                    let pairs = round.iter().map(|&(s, t, _)| (rank(s), rank(t))).collect();
                    let total = round.iter().map(|t| t.2).max().unwrap_or(0);
                    (
                        vec![all.iter().map(|&d| d as u32).collect()],
                        vec![CollectiveOp::Permute { pairs }],
                        total,
                    )
                })
                .collect();
        }
        vec![self.operation(program, c)]
    }

    /// The collectives layer's operation per group, and the element count.
    fn operation(
        &self,
        program: &SpmdProgram,
        c: &Collective,
    ) -> (Vec<Vec<u32>>, Vec<CollectiveOp>, u64) {
        let elems = |slot: usize| program.values[slot].local_elements();
        let groups: Vec<Vec<u32>> = c
            .groups
            .iter()
            .map(|g| g.iter().map(|&d| d as u32).collect())
            .collect();
        let one = |o: CollectiveOp| vec![o; groups.len()];
        let (ops, total): (Vec<CollectiveOp>, u64) = match c.kind.traffic() {
            Traffic::AllReduce => (one(CollectiveOp::AllReduce), elems(c.input)),
            Traffic::AllGather => (one(CollectiveOp::AllGather), elems(c.output)),
            Traffic::ReduceScatter => (one(CollectiveOp::ReduceScatter), elems(c.input)),
            Traffic::AllToAll => (one(CollectiveOp::AllToAll), elems(c.input)),
            Traffic::Permute(pairs) => (permutes(&c.groups, pairs), elems(c.input)),
            Traffic::Other => (Vec::new(), 0),
        };
        (groups, ops, total)
    }

    /// The fault-free time of `c`, cached per (operation, groups, size).
    fn time_clean(
        &mut self,
        program: &SpmdProgram,
        c: &Collective,
    ) -> Result<CommTiming, CollectiveError> {
        if !c.kind.moves_data() {
            return Ok(CommTiming {
                time: Time::ZERO,
                label: "local".into(),
                link_bytes: Vec::new(),
                algo: None,
            });
        }
        let elem_bytes = c.dtype.size_bytes();
        let key = cache_key(program, c);
        if let Some(t) = self.cache.get(&key) {
            return Ok(t.clone());
        }
        let rounds = self.rounds(program, c);
        let mut timing = CommTiming {
            time: Time::ZERO,
            label: "none".into(),
            link_bytes: Vec::new(),
            algo: None,
        };
        let mut labels = Vec::new();
        let mut algos = Vec::new();
        let mut bytes: BTreeMap<usize, u64> = BTreeMap::new();
        for (groups, ops, total) in &rounds {
            // A group of one device (or an empty message) moves nothing.
            if *total == 0 || groups.iter().all(|g| g.len() < 2) {
                continue;
            }
            let algo = self.asked(groups, ops);
            let (cal, latency_free) = self.round_calibration(groups, ops, algo);
            let round = (groups.as_slice(), ops.as_slice(), *total);
            let t = match &self.memo {
                Some(memo) => memo.time(self.topo, round, elem_bytes, (cal, latency_free), algo)?,
                None => time_groups_cached(
                    self.topo,
                    groups,
                    ops,
                    *total,
                    elem_bytes,
                    cal,
                    algo,
                    &mut PathCache::new(),
                )?,
            };
            timing.time = timing.time.checked_add(t.time)?;
            labels.push(format!("{}/{}", t.algo.name(), t.proto.name()));
            algos.push(t.algo);
            for (l, b) in t.link_bytes {
                *bytes.entry(l).or_default() += b;
            }
        }
        if !labels.is_empty() {
            labels.dedup();
            timing.label = labels.join("+");
        }
        timing.link_bytes = bytes.into_iter().collect();
        if let [algo] = algos.as_slice() {
            timing.algo = Some(*algo);
        }
        self.cache.insert(key, timing.clone());
        Ok(timing)
    }
}

/// A failure reported on a collective's clock, moved to the run's.
fn on_run_clock(e: CollectiveError, now: Time) -> CollectiveError {
    match e {
        CollectiveError::Undeliverable {
            transfers,
            link,
            name,
            at,
        } => CollectiveError::Undeliverable {
            transfers,
            link,
            name,
            at: Time(at.0.saturating_add(now.0)),
        },
        e => e,
    }
}

/// What a collective's fault-free timing depends on, without listing its
/// groups: collectives over the same axes share one groups list (compared by
/// address), so the key stays small however many devices there are.
pub(super) fn cache_key(program: &SpmdProgram, c: &Collective) -> String {
    let elems = |slot: usize| program.values[slot].local_elements();
    let mut key = format!(
        "{:p} {} {} {} {}",
        std::sync::Arc::as_ptr(&c.groups),
        c.kind.name(),
        elems(c.input),
        elems(c.output),
        c.dtype.size_bytes()
    );
    match (&c.kind, c.kind.traffic()) {
        (CollectiveKind::Window { transfers, .. }, _) => key += &format!(" {transfers:?}"),
        (_, Traffic::Permute(pairs)) => key += &format!(" {pairs:?}"),
        _ => {}
    }
    key
}

/// Per group, the permute of `pairs` between its members (by rank).
fn permutes(groups: &[Vec<u64>], pairs: &[(u64, u64)]) -> Vec<CollectiveOp> {
    groups
        .iter()
        .map(|g| {
            let ranks: BTreeMap<u64, usize> = g.iter().enumerate().map(|(i, &d)| (d, i)).collect();
            let rank = |d: u64| ranks.get(&d).copied();
            let pairs = pairs
                .iter()
                .filter_map(|&(s, t)| Some((rank(s)?, rank(t)?)))
                .collect();
            CollectiveOp::Permute { pairs }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_that_share_a_link_directly_or_through_others_form_one_component() {
        // Groups 0-2 chain over links 5 and 7; group 3 alone; group 4 uses
        // nothing (a group of one device).
        let links = vec![vec![1, 5], vec![5, 7], vec![7, 9], vec![2, 3], vec![]];
        let c = Components::new(links, 10);
        assert_eq!(c.of, vec![0, 0, 0, 1, 2]);
        assert_eq!(c.groups, vec![vec![0, 1, 2], vec![3], vec![4]]);
        assert_eq!(c.links[0], vec![1, 5, 7, 9]);
        let fault = |link| LinkFault {
            link,
            at: Time::ZERO,
            kind: crate::engine::FaultKind::Fail,
        };
        assert!(c.touched(0, &[fault(9)]));
        assert!(!c.touched(1, &[fault(9)]));
        assert!(c.touched(1, &[fault(9), fault(3)]));
    }
}
