//! Collective times for a timed run: each collective step of the program
//! becomes the collectives layer's operation over its device groups (mesh
//! device `i` on topology device `i`), timed once per distinct (operation,
//! groups, size) and cached.

use std::collections::BTreeMap;

use crate::collective::{time_groups, Calibration, CollectiveError, CollectiveOp, GroupsTiming};
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
}

/// One round: groups, their operations, elements per rank.
type Round = (Vec<Vec<u32>>, Vec<CollectiveOp>, u64);

/// Fault-free collective times shared by several timed runs on one topology
/// with one calibration (the programs of a training step reduce the same
/// gradient sizes over the same groups again and again): keyed by the
/// round's groups, operations, element count and element size, so a hit is
/// the very computation it replaces. Only looked up, never iterated.
#[derive(Default)]
pub struct CommMemo(std::sync::Mutex<BTreeMap<MemoKey, GroupsTiming>>);

/// Groups, operations (as printed), elements per rank, bytes per element.
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
        cal: &Calibration,
    ) -> Result<GroupsTiming, CollectiveError> {
        let key = (groups.to_vec(), format!("{ops:?}"), total, elem_bytes);
        if let Some(t) = self.0.lock().ok().and_then(|m| m.get(&key).cloned()) {
            return Ok(t);
        }
        let t = time_groups(topo, groups, ops, total, elem_bytes, cal, &[])?;
        if let Ok(mut m) = self.0.lock() {
            m.insert(key, t.clone());
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
    /// Shared with other runs on the same topology and calibration.
    memo: Option<std::sync::Arc<CommMemo>>,
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
            memo: None,
        })
    }

    /// Share fault-free collective times with other runs through `memo`
    /// (runs on the same topology with the same calibration only).
    pub fn with_memo(mut self, memo: Option<std::sync::Arc<CommMemo>>) -> Self {
        self.memo = memo;
        self
    }

    /// Time collective `c` of `program` starting at `now`: the fault-free
    /// time (cached), or, when a fault happens before that ends, a run with
    /// the faults moved to the collective's clock (a fault already past
    /// applies from its start). Link bytes stay those of the fault-free routes.
    pub fn time(
        &mut self,
        program: &SpmdProgram,
        c: &Collective,
        now: Time,
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
                &relevant,
            )
            .map_err(|e| match e {
                // Report the failure on the run's clock.
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
            })?;
            time = time.checked_add(t.time)?;
            last = Some(t);
        }
        let Some(t) = last else {
            return Ok(clean);
        };
        Ok(CommTiming {
            time,
            label: format!("{}/{} with faults", t.algo.name(), t.proto.name()),
            link_bytes: clean.link_bytes,
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
        };
        let mut labels = Vec::new();
        let mut bytes: BTreeMap<usize, u64> = BTreeMap::new();
        for (groups, ops, total) in &rounds {
            // A group of one device (or an empty message) moves nothing.
            if *total == 0 || groups.iter().all(|g| g.len() < 2) {
                continue;
            }
            let t = match &self.memo {
                Some(memo) => memo.time(self.topo, (groups, ops, *total), elem_bytes, &self.cal)?,
                None => time_groups(self.topo, groups, ops, *total, elem_bytes, &self.cal, &[])?,
            };
            timing.time = timing.time.checked_add(t.time)?;
            labels.push(format!("{}/{}", t.algo.name(), t.proto.name()));
            for (l, b) in t.link_bytes {
                *bytes.entry(l).or_default() += b;
            }
        }
        if !labels.is_empty() {
            labels.dedup();
            timing.label = labels.join("+");
        }
        timing.link_bytes = bytes.into_iter().collect();
        self.cache.insert(key, timing.clone());
        Ok(timing)
    }
}

/// What a collective's fault-free timing depends on, without listing its
/// groups: collectives over the same axes share one groups list (compared by
/// address), so the key stays small however many devices there are.
fn cache_key(program: &SpmdProgram, c: &Collective) -> String {
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
