//! Collective times for a timed run: each collective step of the program
//! becomes the collectives layer's operation over its device groups (mesh
//! device `i` on topology device `i`), timed once per distinct (operation,
//! groups, size) and cached.

use std::collections::BTreeMap;

use crate::collective::{time_groups, Calibration, CollectiveError, CollectiveOp};
use crate::engine::Time;
use crate::partition::{Collective, CollectiveKind, SpmdProgram};
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

pub struct CommModel<'t> {
    topo: &'t Topology,
    cal: Calibration,
    cache: BTreeMap<String, CommTiming>,
}

impl<'t> CommModel<'t> {
    /// `cal`, or the calibration of the topology's first device model.
    pub fn new(topo: &'t Topology, cal: Option<Calibration>) -> Result<CommModel<'t>, TimedError> {
        let cal = match cal {
            Some(c) => c,
            None => {
                let model = topo
                    .device(0)
                    .map(|c| topo.component(c).model.clone())
                    .unwrap_or_default();
                Calibration::for_model(&model).map_err(|source| TimedError::Collective {
                    step: 0,
                    what: "calibration",
                    source: Box::new(source),
                })?
            }
        };
        Ok(CommModel {
            topo,
            cal,
            cache: BTreeMap::new(),
        })
    }

    /// Time collective `c` of `program`.
    pub fn time(
        &mut self,
        program: &SpmdProgram,
        c: &Collective,
    ) -> Result<CommTiming, CollectiveError> {
        let elems = |slot: usize| {
            program.values[slot]
                .layout
                .local_shape
                .iter()
                .product::<u64>()
        };
        let groups: Vec<Vec<u32>> = c
            .groups
            .iter()
            .map(|g| g.iter().map(|&d| d as u32).collect())
            .collect();
        let (ops, total): (Vec<CollectiveOp>, u64) = match &c.kind {
            CollectiveKind::AllReduce(_) => {
                (vec![CollectiveOp::AllReduce; groups.len()], elems(c.input))
            }
            CollectiveKind::AllGather(_) => {
                (vec![CollectiveOp::AllGather; groups.len()], elems(c.output))
            }
            CollectiveKind::AllToAll { .. } => {
                (vec![CollectiveOp::AllToAll; groups.len()], elems(c.input))
            }
            CollectiveKind::CollectivePermute(pairs) => {
                let ops = c
                    .groups
                    .iter()
                    .map(|g| {
                        let rank = |d: u64| g.iter().position(|&x| x == d);
                        let pairs = pairs
                            .iter()
                            .filter_map(|&(s, t)| Some((rank(s)?, rank(t)?)))
                            .collect();
                        CollectiveOp::Permute { pairs }
                    })
                    .collect();
                (ops, elems(c.input))
            }
            CollectiveKind::AllSlice(_) => {
                return Ok(CommTiming {
                    time: Time::ZERO,
                    label: "local".into(),
                    link_bytes: Vec::new(),
                })
            }
        };
        let elem_bytes = c.dtype.size_bytes();
        let key = format!("{ops:?} {groups:?} {total} {elem_bytes}");
        if let Some(t) = self.cache.get(&key) {
            return Ok(t.clone());
        }
        // A group of one device (or an empty message) moves nothing.
        let timing = if total == 0 || groups.iter().all(|g| g.len() < 2) {
            CommTiming {
                time: Time::ZERO,
                label: "none".into(),
                link_bytes: Vec::new(),
            }
        } else {
            let t = time_groups(self.topo, &groups, &ops, total, elem_bytes, &self.cal)?;
            CommTiming {
                time: t.time,
                label: format!("{}/{}", t.algo.name(), t.proto.name()),
                link_bytes: t.link_bytes,
            }
        };
        self.cache.insert(key, timing.clone());
        Ok(timing)
    }
}
