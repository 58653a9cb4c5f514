//! Memory per device and scope during a timed run: every buffer is allocated
//! in its scope when the step that produces it starts and freed when the last
//! step that reads it ends (function results stay to the end). Peaks are kept
//! per (device, scope); an allocation past a scope's capacity is an
//! out-of-memory report naming the device, scope, time and the live buffers.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::engine::Time;
use crate::partition::Slot;

/// Live buffers an out-of-memory report lists (the largest).
pub const MAX_LIVE: usize = 16;

/// A live buffer at the time of an out-of-memory report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LiveBuffer {
    pub value: String,
    pub bytes: u64,
}

/// An allocation that did not fit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OomReport {
    pub device: u64,
    pub scope: String,
    pub time_ps: u64,
    /// The value being allocated and its size.
    pub value: String,
    pub bytes: u64,
    pub capacity: u64,
    /// Bytes in use before the allocation.
    pub in_use: u64,
    /// Buffers live at that moment, largest first (at most [`MAX_LIVE`]).
    pub live: Vec<LiveBuffer>,
}

/// Peak use of one scope of one device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ScopePeak {
    pub device: u64,
    pub scope: String,
    pub capacity: u64,
    pub peak: u64,
    pub peak_at_ps: u64,
}

/// Bytes in use in one scope of one device from `time_ps` on (recorded on
/// every change when asked, for memory-over-time plots).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MemorySample {
    pub device: u64,
    pub scope: String,
    pub time_ps: u64,
    pub in_use: u64,
}

#[derive(Debug, Clone)]
struct ScopeState {
    capacity: u64,
    in_use: u64,
    peak: u64,
    peak_at: Time,
    live: BTreeMap<Slot, u64>,
}

/// Allocations of every device.
#[derive(Debug, Clone)]
pub struct MemoryTracker {
    devices: Vec<u64>,
    /// Per device index: scope -> state.
    scopes: Vec<BTreeMap<String, ScopeState>>,
    /// Every change of bytes in use, when recording.
    history: Option<Vec<MemorySample>>,
    /// Each slot's place in the order of value names, when known: reports
    /// then pick their largest buffers without comparing names.
    name_rank: Vec<u32>,
}

impl MemoryTracker {
    /// No scopes yet: declare them with [`MemoryTracker::add_scope`].
    pub fn new(devices: Vec<u64>) -> MemoryTracker {
        let n = devices.len();
        MemoryTracker {
            devices,
            scopes: vec![BTreeMap::new(); n],
            history: None,
            name_rank: Vec::new(),
        }
    }

    /// Record every change of bytes in use from now on (off by default: a
    /// long program on many devices makes many samples).
    pub fn record_history(&mut self) {
        self.history.get_or_insert_with(Vec::new);
    }

    /// The recorded changes in the order they happened (empty unless recording).
    pub fn history(&self) -> &[MemorySample] {
        self.history.as_deref().unwrap_or(&[])
    }

    fn sample(&mut self, d: usize, scope: &str, now: Time) {
        if let Some(h) = &mut self.history {
            let in_use = self.scopes[d].get(scope).map_or(0, |s| s.in_use);
            h.push(MemorySample {
                device: self.devices[d],
                scope: scope.to_string(),
                time_ps: now.0,
                in_use,
            });
        }
    }

    /// Declare the order of the slots' names (`rank[slot]`), so reports
    /// order equal-sized buffers by name without comparing strings.
    pub fn set_name_order(&mut self, rank: Vec<u32>) {
        self.name_rank = rank;
    }

    /// Declare `scope` of device index `d` with `capacity` bytes.
    pub fn add_scope(&mut self, d: usize, scope: &str, capacity: u64) {
        self.scopes[d].insert(
            scope.to_string(),
            ScopeState {
                capacity,
                in_use: 0,
                peak: 0,
                peak_at: Time::ZERO,
                live: BTreeMap::new(),
            },
        );
    }

    /// Allocate `bytes` for `slot` in `scope` of device index `d` at `now`.
    /// The allocation is always recorded (so peaks show the demand); a report
    /// comes back when it exceeds the capacity.
    pub fn alloc<'n>(
        &mut self,
        d: usize,
        scope: &str,
        slot: Slot,
        bytes: u64,
        now: Time,
        name: impl Fn(Slot) -> &'n str,
    ) -> Option<OomReport> {
        if !self.scopes[d].contains_key(scope) {
            // A scope the topology does not declare is unbounded.
            self.add_scope(d, scope, u64::MAX);
        }
        let s = self.scopes[d].get_mut(scope).expect("added above");
        if s.live.contains_key(&slot) {
            return None;
        }
        let before = s.in_use;
        let report = if before.saturating_add(bytes) > s.capacity {
            let rank = |v: Slot| self.name_rank.get(v).copied();
            let mut live: Vec<(Option<u32>, &str, u64)> = s
                .live
                .iter()
                .map(|(&v, &b)| (rank(v), name(v), b))
                .collect();
            let order = |a: &(Option<u32>, &str, u64), b: &(Option<u32>, &str, u64)| {
                b.2.cmp(&a.2).then_with(|| match (a.0, b.0) {
                    (Some(x), Some(y)) => x.cmp(&y),
                    _ => a.1.cmp(b.1),
                })
            };
            // The largest few say what fills the memory; listing every live
            // buffer in every report grows with buffers x reports.
            if live.len() > MAX_LIVE {
                live.select_nth_unstable_by(MAX_LIVE - 1, order);
                live.truncate(MAX_LIVE);
            }
            live.sort_by(order);
            let live: Vec<LiveBuffer> = live
                .into_iter()
                .map(|(_, v, b)| LiveBuffer {
                    value: v.to_string(),
                    bytes: b,
                })
                .collect();
            Some(OomReport {
                device: self.devices[d],
                scope: scope.to_string(),
                time_ps: now.0,
                value: name(slot).to_string(),
                bytes,
                capacity: s.capacity,
                in_use: before,
                live,
            })
        } else {
            None
        };
        s.live.insert(slot, bytes);
        s.in_use = before.saturating_add(bytes);
        if s.in_use > s.peak {
            s.peak = s.in_use;
            s.peak_at = now;
        }
        self.sample(d, scope, now);
        report
    }

    /// Free `slot` in `scope` of device index `d` at `now` (no-op if not live).
    pub fn free(&mut self, d: usize, scope: &str, slot: Slot, now: Time) {
        if let Some(s) = self.scopes[d].get_mut(scope) {
            if let Some(b) = s.live.remove(&slot) {
                s.in_use -= b;
                self.sample(d, scope, now);
            }
        }
    }

    /// Peaks of every (device, scope), devices in order, scopes by name.
    pub fn peaks(&self) -> Vec<ScopePeak> {
        self.scopes
            .iter()
            .zip(&self.devices)
            .flat_map(|(scopes, &device)| {
                scopes.iter().map(move |(scope, s)| ScopePeak {
                    device,
                    scope: scope.clone(),
                    capacity: s.capacity,
                    peak: s.peak,
                    peak_at_ps: s.peak_at.0,
                })
            })
            .collect()
    }
}
