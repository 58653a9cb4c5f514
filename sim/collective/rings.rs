//! Ring collectives without their plan: a ring allreduce over `n` ranks has
//! `2 (n - 1)` steps of `n` moves per ring (16.8 million moves for 1,024
//! ranks on eight rail rings), so at scale neither the tuner's estimate nor
//! the timing may walk it.
//!
//! When every move carries the same number of elements (the message divides
//! into `ranks x rings` equal chunks), every step loads the links alike, so
//! the estimate is one step's cost repeated. The timing uses the ring's
//! translation symmetry: a unit of consecutive ring positions (a node of `m`
//! ranks on `m` rail rings, or one rank of a single ring) maps onto the next
//! unit, ring `k` onto ring `k - 1`. When no link carries moves of two units,
//! a unit interacts with the rest only through the receipt into its first
//! position, and when every unit's moves have the same routes up to renaming
//! links ([`RingSpec::unit_classes`]) each unit's run is the first unit's
//! shifted along the ring, so one unit is simulated with its last move
//! delivering into the first position of the next ring (its image). The
//! flow-level network, the hop latencies and the dependencies (a send waits
//! a hop after the receipt of the range it forwards, and for its rank's
//! previous send in the same ring (arrived, or left with
//! `Calibration::send_on_departure`; in two slices with
//! `Calibration::ring_slices`): hops pipelined along the data's path and
//! channels progressing apart, [`super::kinds::Algorithm::pipelines_hops`],
//! [`super::kinds::Algorithm::per_channel_slots`]) are those of
//! [`super::timing::simulate`].
//!
//! Units of several classes (a ring crossing a leaf boundary through a
//! spine, or wrapping from the last node to the first on another rail) are
//! timed on the plan while it has at most `MULTI_CLASS_PLAN_MOVES` moves,
//! beyond that as a ring of each class's unit, the slowest counting. That is
//! a model, not a symmetry: with hops paid along the data's path the slowest
//! class's ring pays its boundaries' extra latency at every unit where the
//! run pays it at that class's share of them (2 DGX H100 nodes, 128
//! elements, Simple: 269.16 us against the plan's 267.16, +0.7%).
//!
//! A single ring whose message does not divide into `n` equal pieces
//! ([`RingSpec::uneven`]: piece `p` of `[floor(total p / n), floor(total
//! (p + 1) / n))`, some of them empty when `total < n`) is handled the same
//! way when every position's move has the same route up to renaming links and
//! no link carries two positions' moves: every step moves every piece once,
//! so its cost is that of a move of the largest piece, and piece sizes repeat
//! every `g = n / gcd(n, total)` positions, so a unit of `g` positions is
//! timed alone ([`RingSpec::simulate_uneven`], empty moves skipped as the
//! plan skips them). Building the plan instead costs `2 (n - 1) min(n,
//! total)` moves: 2.1 billion for a 64 KiB allreduce over 65,536 ranks.

use crate::engine::Time;
use crate::net::{departure, NetSim, Schedule, TaskId};
use crate::topology::Topology;

use super::algorithms::PlanOptions;
use super::blocks::rail_rings;
use super::calibration::{us, Calibration};
use super::kinds::{Algorithm, CollectiveOp, Protocol};
use super::plan::{bound, Move};
use super::timing::{
    behind_hop, hop, protocol_links, ring_slices, slice_lens, CollectiveTiming, Routes,
};
use super::CollectiveError;

/// Rings whose units fall into several classes are timed on their plan up
/// to this many moves (32 DGX nodes' rail rings: 1.0 million), beyond on the
/// slowest class's ring.
const MULTI_CLASS_PLAN_MOVES: usize = 1 << 20;

/// A ring algorithm whose moves all carry `chunk` elements.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RingSpec {
    /// The rings (each a cyclic order of all ranks), side by side.
    pub rings: Vec<Vec<usize>>,
    /// Ring positions per symmetry unit (ranks per node on rail rings, else 1).
    pub unit: usize,
    /// Steps: `(n - 1)` per phase (reduce-scatter, all-gather).
    pub steps: usize,
    /// Elements per move (the largest piece's when `uneven`).
    pub chunk: u64,
    /// A single ring with pieces of different sizes.
    pub uneven: Option<Uneven>,
    /// NICs per GPU the rail rings run over (`PlanOptions::lanes`, 1 on a
    /// single ring): channel `l * rings + k` is ring `k` on every rank's NIC
    /// `l` (`blocks::multi_ring`). The node shift maps each copy onto the
    /// same copy of the next ring, so the unit symmetry holds per lane.
    pub lanes: usize,
}

/// The pieces of an uneven single ring: position `i` moves piece
/// `(i - s - shift) mod n` at step `s` (reduce-scatter and allreduce shift
/// by one, all-gather by none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Uneven {
    pub total: u64,
    pub shift: usize,
}

/// Run a ring's schedule on the protocol's links: its makespan (every
/// transfer delivered and every task run, or an error).
fn run_on_network(
    sched: Schedule,
    topo: &Topology,
    cal: &Calibration,
    algo: Algorithm,
    proto: Protocol,
) -> Result<Time, CollectiveError> {
    let links = protocol_links(topo, cal, algo, proto);
    let mut sim: NetSim<TaskId> = NetSim::new(&links, 0)?;
    let report = sched.run(&mut sim)?;
    if !report.undeliverable.is_empty() || !report.not_run.is_empty() {
        return Err(CollectiveError::Buffers(format!(
            "{} transfers undeliverable, {} tasks not run",
            report.undeliverable.len(),
            report.not_run.len()
        )));
    }
    Ok(report.makespan)
}

/// How a position's last send gates its next: by its departure with
/// [`Calibration::send_on_departure`], else by its delivery.
fn last_send_gate(cal: &Calibration, algo: Algorithm) -> fn(TaskId) -> TaskId {
    if super::timing::Gating::of(algo, cal).departed {
        departure
    } else {
        |t| t
    }
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

impl RingSpec {
    /// The ring form of `op` with `Algorithm::Ring`, when its moves are all
    /// equal and non-empty (else `None`: the plan must be built).
    pub fn new(op: &CollectiveOp, n: usize, total: u64, opts: &PlanOptions) -> Option<RingSpec> {
        let phases = match op {
            CollectiveOp::AllReduce => 2,
            CollectiveOp::AllGather | CollectiveOp::ReduceScatter => 1,
            _ => return None,
        };
        if n < 2 {
            return None;
        }
        // Rail rings run a copy per NIC lane; a single ring has one lane
        // (`algorithms::allreduce`).
        let (rings, unit, lanes) = match rail_rings(&opts.nodes) {
            Some(rings) if rings[0].len() == n => {
                let m = rings.len();
                (rings, m, opts.lanes.max(1))
            }
            _ => (vec![(0..n).collect()], 1, 1),
        };
        let parts = (n as u64)
            .checked_mul(rings.len() as u64)?
            .checked_mul(lanes as u64)?;
        if total == 0 || total % parts != 0 {
            return None;
        }
        Some(RingSpec {
            steps: phases * (n - 1),
            chunk: total / parts,
            rings,
            unit,
            uneven: None,
            lanes,
        })
    }

    /// The single-ring form of `op` whose pieces differ in size (the plan's
    /// `ring_reduce_scatter` / `ring_all_gather` over all ranks), when
    /// [`Self::new`] does not apply; `None` on rail rings. Its estimate and
    /// time hold only when the positions are alike and link-disjoint
    /// ([`Self::positions_alike`]).
    pub fn uneven(op: &CollectiveOp, n: usize, total: u64, opts: &PlanOptions) -> Option<RingSpec> {
        let (phases, shift) = match op {
            CollectiveOp::AllReduce => (2, 1),
            CollectiveOp::ReduceScatter => (1, 1),
            CollectiveOp::AllGather => (1, 0),
            _ => return None,
        };
        if n < 2 || total == 0 || matches!(rail_rings(&opts.nodes), Some(r) if r[0].len() == n) {
            return None;
        }
        Some(RingSpec {
            rings: vec![(0..n).collect()],
            unit: 1,
            steps: phases * (n - 1),
            chunk: total.div_ceil(n as u64),
            uneven: Some(Uneven { total, shift }),
            lanes: 1,
        })
    }

    /// Every position's move has the same route up to renaming links and no
    /// link carries two positions' moves (one class of one-position units).
    pub(crate) fn positions_alike(
        &self,
        topo: &Topology,
        routes: &mut Routes,
    ) -> Result<bool, CollectiveError> {
        if self.unit != 1 || self.rings.len() != 1 {
            return Ok(false);
        }
        Ok(self.unit_classes(topo, routes)?.is_some_and(|r| r == [0]))
    }

    fn n(&self) -> usize {
        self.rings[0].len()
    }

    /// Channels: every ring once per NIC lane.
    fn channels(&self) -> usize {
        self.rings.len() * self.lanes.max(1)
    }

    /// Channel `ch`'s ring and NIC lane (`blocks::multi_ring`'s order).
    fn channel(&self, ch: usize) -> (&[usize], u32) {
        let c = self.rings.len();
        (&self.rings[ch % c], (ch / c) as u32)
    }

    /// Moves of the ring's plan (positions x channels x steps).
    fn plan_moves(&self) -> usize {
        self.n()
            .saturating_mul(self.channels())
            .saturating_mul(self.steps)
    }

    /// The moves of one step (every step moves the same sizes over the same
    /// pairs; only the ranges differ, which the estimate ignores).
    pub fn one_step(&self) -> Vec<Move> {
        let n = self.n();
        let mut out = Vec::with_capacity(n * self.channels());
        for ch in 0..self.channels() {
            let (ring, lane) = self.channel(ch);
            for i in 0..n {
                let mut m = Move::copy(ring[i], ring[(i + 1) % n], 0, self.chunk);
                m.lane = lane;
                out.push(m);
            }
        }
        out
    }

    /// Point-to-point flows of the whole run.
    pub fn flows(&self) -> usize {
        match self.uneven {
            // Pieces of total < n elements: `total` of them are not empty.
            Some(u) => self.steps * (self.n() as u64).min(u.total) as usize,
            None => self.steps * self.n() * self.channels(),
        }
    }

    /// Channel `ch` (ring `k` on lane `l`), position `p` of unit `i` (`p <
    /// unit`) as a position of the whole run: the image of unit 0's `(ch, p)`
    /// under `i` shifts, ring `k - i` on the same lane.
    fn image(&self, i: usize, ch: usize, p: usize) -> (usize, usize) {
        let c = self.rings.len();
        let (l, k) = (ch / c, ch % c);
        (l * c + (k + c - i % c) % c, i * self.unit + p)
    }

    /// The units up to renaming links (same capacities, latencies and
    /// classes, same links shared between moves, same sender pattern): one
    /// representative unit per class, first appearance order; `None` when a
    /// link carries moves of two units (their runs interact).
    pub(crate) fn unit_classes(
        &self,
        topo: &Topology,
        routes: &mut Routes,
    ) -> Result<Option<Vec<usize>>, CollectiveError> {
        let n = self.n();
        if n % self.unit != 0 {
            return Ok(None);
        }
        let units = n / self.unit;
        let links = topo.links();
        let mut owner = vec![u32::MAX; links.len()];
        let mut seen: Vec<Vec<u64>> = Vec::new();
        let mut reps: Vec<usize> = Vec::new();
        let mut shape = Vec::new();
        let mut names: Vec<u32> = vec![u32::MAX; links.len()];
        let mut named: Vec<usize> = Vec::new();
        let mut senders: Vec<(usize, u64)> = Vec::new();
        for i in 0..units {
            shape.clear();
            senders.clear();
            for &l in &named {
                names[l] = u32::MAX;
            }
            named.clear();
            for ch in 0..self.channels() {
                for p in 0..self.unit {
                    let (rk, pos) = self.image(i, ch, p);
                    let (ring, lane) = self.channel(rk);
                    let (a, b) = (ring[pos], ring[(pos + 1) % n]);
                    let id = match senders.iter().find(|s| s.0 == a) {
                        Some(s) => s.1,
                        None => {
                            senders.push((a, senders.len() as u64));
                            senders.len() as u64 - 1
                        }
                    };
                    shape.push(id);
                    let route = routes.get_lane(a, b, lane)?;
                    shape.push(route.len() as u64);
                    for &l in route {
                        if owner[l] != u32::MAX && owner[l] != i as u32 {
                            return Ok(None);
                        }
                        owner[l] = i as u32;
                        if names[l] == u32::MAX {
                            names[l] = named.len() as u32;
                            named.push(l);
                        }
                        let k = &links[l];
                        shape.extend([
                            u64::from(names[l]),
                            k.bandwidth_bytes_per_s(),
                            k.latency_ps(),
                            k.class as u64,
                        ]);
                    }
                }
            }
            if !seen.contains(&shape) {
                seen.push(shape.clone());
                reps.push(i);
            }
        }
        Ok(Some(reps))
    }

    /// Are the ring's steps sliced ([`ring_slices`]: a Simple ring whose
    /// steps cross the network, as the plan's timing decides per step)?
    fn sliced(
        &self,
        routes: &mut Routes,
        cal: &Calibration,
        algo: Algorithm,
        proto: Protocol,
    ) -> Result<bool, CollectiveError> {
        if !ring_slices(cal, algo, proto, true) {
            return Ok(false);
        }
        if ring_slices(cal, algo, proto, false) {
            return Ok(true);
        }
        let n = self.n();
        for ch in 0..self.channels() {
            let (ring, _) = self.channel(ch);
            for i in 0..n {
                if routes.crosses_network(ring[i], ring[(i + 1) % n])? {
                    return Ok(true);
                }
            }
        }
        Ok(false)
    }

    /// Time the ring as if every unit were unit `unit` (exact when the units
    /// are alike, [`Self::unit_classes`]).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn simulate_unit(
        &self,
        topo: &Topology,
        unit: usize,
        routes: &mut Routes,
        elem_bytes: u64,
        algo: Algorithm,
        proto: Protocol,
        cal: &Calibration,
    ) -> Result<CollectiveTiming, CollectiveError> {
        let n = self.n();
        let c = self.rings.len();
        let u = self.unit;
        let params = cal.params(algo, proto);
        // A step's slices (one, or two where the ring is sliced), bytes each.
        let slices: Vec<u64> = if self.sliced(routes, cal, algo, proto)? {
            let (a, b) = slice_lens(self.chunk, elem_bytes);
            [a, b].into_iter().filter(|&x| x > 0).collect()
        } else {
            vec![self.chunk]
        };
        let slices: Vec<u64> = slices.into_iter().map(|e| e * elem_bytes).collect();
        // Quotient positions q = ch * u + p (channel ch = l * c + k); their
        // sender ranks, routes, hops.
        let q_count = self.channels() * u;
        let mut rank_of = Vec::with_capacity(q_count);
        let mut route_of = Vec::with_capacity(q_count);
        let mut hop_of = Vec::with_capacity(q_count);
        for ch in 0..self.channels() {
            for p in 0..u {
                let (rk, pos) = self.image(unit, ch, p);
                let (ring, lane) = self.channel(rk);
                let (a, b) = (ring[pos], ring[(pos + 1) % n]);
                hop_of.push(hop(&params, routes.crosses_network(a, b)?));
                rank_of.push(a);
                route_of.push(routes.get_lane(a, b, lane)?.to_vec());
            }
        }
        // The position whose move delivers into q: the previous one in the
        // ring, or (first of a unit) the last of ring k - 1 on the same lane,
        // whose image it is.
        let pred = |q: usize| -> usize {
            let (ch, p) = (q / u, q % u);
            if p > 0 {
                q - 1
            } else {
                let (l, k) = (ch / c, ch % c);
                (l * c + (k + c - 1) % c) * u + u - 1
            }
        };
        // A send waits a hop after its data came in (pipelined, as the plan's
        // timing runs rings), and for its rank's previous send in the same
        // ring (per-channel slots; to have left, with `send_on_departure`):
        // a rank's sends in other rings do not gate it. See `Algorithm::pipelines_hops` and `per_channel_slots`.
        let left = last_send_gate(cal, algo);
        // Slice `h` of a step forwards slice `h` of the last step's receipt;
        // a position's sends go in order (slice 0, 1, then the next step's).
        let k = slices.len();
        let mut sched = Schedule::new();
        let mut prev: Vec<TaskId> = Vec::new();
        let mut cur: Vec<TaskId> = Vec::with_capacity(q_count * k);
        let mut deps: Vec<TaskId> = Vec::new();
        for s in 0..self.steps {
            cur.clear();
            for (h, &bytes) in slices.iter().enumerate() {
                for q in 0..q_count {
                    deps.clear();
                    if s > 0 {
                        deps.push(prev[h * q_count + pred(q)]);
                    }
                    let mut gate = behind_hop(&mut sched, rank_of[q], hop_of[q], deps.clone())?;
                    if h > 0 {
                        gate.push(left(cur[(h - 1) * q_count + q]));
                    } else if s > 0 {
                        gate.push(left(prev[(k - 1) * q_count + q]));
                    }
                    cur.push(sched.add_transfer(&route_of[q], bytes, &gate)?);
                }
            }
            std::mem::swap(&mut prev, &mut cur);
        }
        let time = run_on_network(sched, topo, cal, algo, proto)?;
        Ok(CollectiveTiming {
            time: time.checked_add(us(params.base_us))?,
            // Every move once per non-empty slice.
            flows: self.flows() * k,
        })
    }

    /// Time an uneven single ring on one period of `g` positions (piece
    /// sizes repeat every `g`), the last delivering into position `g`, the
    /// image of position 0; a position skips its empty moves, and its next
    /// send waits for its last one that was sent (as in the plan's run).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn simulate_uneven(
        &self,
        topo: &Topology,
        routes: &mut Routes,
        elem_bytes: u64,
        algo: Algorithm,
        proto: Protocol,
        cal: &Calibration,
    ) -> Result<CollectiveTiming, CollectiveError> {
        let Some(Uneven { total, shift }) = self.uneven else {
            return Err(CollectiveError::Buffers("not an uneven ring".into()));
        };
        let n = self.n();
        let ring = &self.rings[0];
        let g = (n as u64 / gcd(n as u64, total)) as usize;
        let params = cal.params(algo, proto);
        let mut route_of = Vec::with_capacity(g);
        let mut hop_of = Vec::with_capacity(g);
        for q in 0..g {
            let (a, b) = (ring[q], ring[(q + 1) % n]);
            hop_of.push(hop(&params, routes.crosses_network(a, b)?));
            route_of.push(routes.get(a, b)?.to_vec());
        }
        let len = |q: usize, s: usize| {
            let p = (q + n - (s + shift) % n) % n;
            bound(total, n, p + 1) - bound(total, n, p)
        };
        // Sliced: a piece goes in two slices (the second empty when the
        // piece fits one), as the plan's timing cuts its moves.
        let sliced = self.sliced(routes, cal, algo, proto)?;
        let k = if sliced { 2 } else { 1 };
        let part = |elems: u64, h: usize| match (sliced, h) {
            (false, _) => elems,
            (true, 0) => slice_lens(elems, elem_bytes).0,
            (true, _) => slice_lens(elems, elem_bytes).1,
        };
        let mut sched = Schedule::new();
        let left = last_send_gate(cal, algo);
        let mut prev: Vec<Option<TaskId>> = vec![None; g * k];
        let mut cur: Vec<Option<TaskId>> = vec![None; g * k];
        let mut last: Vec<Option<TaskId>> = vec![None; g];
        let mut deps: Vec<TaskId> = Vec::new();
        for s in 0..self.steps {
            for h in 0..k {
                for q in 0..g {
                    let elems = part(len(q, s), h);
                    if elems == 0 {
                        cur[h * g + q] = None;
                        continue;
                    }
                    deps.clear();
                    // The receipt of this slice of the piece (one step
                    // earlier, from the previous position) behind the hop,
                    // then this position's last send to have left
                    // (pipelined, as in `simulate_unit`).
                    if s > 0 {
                        deps.extend(prev[h * g + if q > 0 { q - 1 } else { g - 1 }]);
                    }
                    let mut gate = behind_hop(&mut sched, ring[q], hop_of[q], deps.clone())?;
                    gate.extend(last[q].map(left));
                    let bytes = elems * elem_bytes;
                    let t = sched.add_transfer(&route_of[q], bytes, &gate)?;
                    cur[h * g + q] = Some(t);
                    last[q] = Some(t);
                }
            }
            std::mem::swap(&mut prev, &mut cur);
        }
        let time = run_on_network(sched, topo, cal, algo, proto)?;
        // Every step moves every piece once per non-empty slice.
        let flows = (0..n)
            .map(|p| {
                let len = bound(total, n, p + 1) - bound(total, n, p);
                (0..k).filter(|&h| part(len, h) > 0).count()
            })
            .sum::<usize>()
            * self.steps;
        Ok(CollectiveTiming {
            time: time.checked_add(us(params.base_us))?,
            flows,
        })
    }

    /// The ring's time from its units: the slowest class's ring (one unit
    /// when all are alike). `None` when units share links: time the plan.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn time_units(
        &self,
        topo: &Topology,
        routes: &mut Routes,
        elem_bytes: u64,
        algo: Algorithm,
        proto: Protocol,
        cal: &Calibration,
    ) -> Result<Option<CollectiveTiming>, CollectiveError> {
        if self.uneven.is_some() {
            if !self.positions_alike(topo, routes)? {
                return Ok(None);
            }
            return self
                .simulate_uneven(topo, routes, elem_bytes, algo, proto, cal)
                .map(Some);
        }
        let Some(reps) = self.unit_classes(topo, routes)? else {
            return Ok(None);
        };
        // Several classes: the slowest class's ring is a model, no longer
        // exact once hops are pipelined and channels progress apart (the
        // data's path meets each class's boundaries in their share, not the
        // slowest's at every unit: 2 DGX H100, 128 elements, Simple, 269.16
        // us against the plan's 267.16). The plan is timed while it is small.
        if reps.len() > 1 && self.plan_moves() <= MULTI_CLASS_PLAN_MOVES {
            return Ok(None);
        }
        let mut out: Option<CollectiveTiming> = None;
        for u in reps {
            let t = self.simulate_unit(topo, u, routes, elem_bytes, algo, proto, cal)?;
            if out.map_or(true, |o| t.time > o.time) {
                out = Some(t);
            }
        }
        Ok(out)
    }
}

/// Whether [`super::time_collective`] times a ring `op` of `total` elements
/// on `group` on one unit (equal moves, one class of alike units), as
/// [`super::tree_on_quotient`] says for trees.
pub fn ring_on_units(
    topo: &Topology,
    group: &super::Group,
    op: &CollectiveOp,
    total: u64,
    elem_bytes: u64,
    cal: &Calibration,
) -> Result<bool, CollectiveError> {
    let opts = super::tuner::plan_options(topo, group, cal, total * elem_bytes);
    let Some(spec) = RingSpec::new(op, group.len(), total, &opts) else {
        return Ok(false);
    };
    let mut routes = super::timing::Routes::new(topo, group);
    Ok(spec
        .unit_classes(topo, &mut routes)?
        .is_some_and(|r| r.len() == 1))
}
