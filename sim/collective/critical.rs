//! The tuner's estimate of a tree or NVLS-tree plan (see
//! [`Algorithm::estimated_by_path`]): the longest path through its moves, as the
//! timing runs them, instead of a sum of step costs. Chunks at different
//! levels of a tree move at once and a level does not wait for a slower one
//! elsewhere, so summing each step's busiest link over-counts where the
//! steps' bottlenecks sit on different links (ECMP collisions on a
//! fat tree's spines: 21% at 128 DGX nodes, which made `auto` rank the ring
//! above a tree that times 13% faster).
//!
//! A move starts a protocol's hop after the ranges it sends have arrived and
//! its sender's sends of the previous step have arrived (where the timing
//! pipelines hops, [`Algorithm::pipelines_hops`]: the hop after the data
//! alone, and with `Calibration::send_on_departure` the previous sends need
//! only have left, their route's latency not counted); it
//! takes its
//! route's latency plus the bytes of its busiest link in the step over that
//! link's protocol bandwidth (the step's moves share links evenly, no
//! max-min). Figures per protocol, in [`Protocol::ALL`] order.
//!
//! When a range was written is kept per rank in a flat array over the
//! walk's segments (the buffer cut at every boundary of a range the moves
//! read or write), in the columns asked for only: a read's ready time is
//! the latest write of a segment it covers, which is the latest write of a
//! range it overlaps.

use std::collections::{BTreeMap, BTreeSet};

use crate::topology::{LinkClass, Topology};

use super::calibration::Calibration;
use super::kinds::{Algorithm, Protocol};
use super::plan::{Move, Plan, Via};
use super::stream::StepSource;
use super::timing::{Quotient, Routes};
use super::CollectiveError;

pub(crate) type PerProto = [f64; 3];

/// The walk's columns: per protocol of [`Protocol::ALL`], then the same
/// protocols with every link's bytes left out (the zero-bandwidth path,
/// asked for with `zero_bw`).
type Cols = [f64; 6];

/// A walk's longest paths: with the bytes, and without them (zero where
/// not asked for).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Paths {
    pub path: PerProto,
    pub zero_bw: PerProto,
}

impl Paths {
    fn of(c: Cols) -> Paths {
        Paths {
            path: [c[0], c[1], c[2]],
            zero_bw: [c[3], c[4], c[5]],
        }
    }
}

/// The longest path (picoseconds, without the base latency) of `plan` with
/// `algo` under each protocol of `protos` (the others' figures are 0), and
/// with `zero_bw` the same without the bytes (see [`PathCache`]);
/// `quotient`: a plan that stands for its images (its routes run on link
/// classes, a rank's sends gate its class).
#[allow(clippy::too_many_arguments)]
pub(crate) fn pipelined_path(
    topo: &Topology,
    routes: &mut Routes,
    plan: &Plan,
    elem_bytes: u64,
    cal: &Calibration,
    algo: Algorithm,
    protos: &[Protocol],
    zero_bw: bool,
    quotient: Option<&Quotient>,
) -> Result<Paths, CollectiveError> {
    // Moves repeat their ranges: a range equal to the last one adds nothing.
    let mut bounds = Vec::new();
    let mut last = None;
    for m in plan.steps.iter().flatten() {
        for r in [(m.src, m.len), (m.dst, m.len)] {
            if last != Some(r) {
                bounds.extend([r.0, r.0 + r.1]);
                last = Some(r);
            }
        }
    }
    let mut walk = PathWalk::new(
        plan.ranks, bounds, elem_bytes, cal, algo, protos, zero_bw, quotient,
    );
    let mut fabric = RouteFabric::new(topo, routes, quotient);
    for step in &plan.steps {
        walk.step(&mut fabric, step)?;
    }
    Ok(walk.paths())
}

/// [`pipelined_path`] of a streamed schedule's steps (the plan's, generated
/// one at a time: the whole plan is never held).
#[allow(clippy::too_many_arguments)]
pub(crate) fn streamed_path(
    topo: &Topology,
    routes: &mut Routes,
    ranks: usize,
    source: &dyn StepSource,
    elem_bytes: u64,
    cal: &Calibration,
    algo: Algorithm,
    protos: &[Protocol],
) -> Result<Paths, CollectiveError> {
    let mut fabric = RouteFabric::new(topo, routes, None);
    walk_stream(&mut fabric, ranks, source, elem_bytes, cal, algo, protos)
}

/// [`streamed_path`] on any [`Fabric`].
pub(crate) fn walk_stream(
    fabric: &mut impl Fabric,
    ranks: usize,
    source: &dyn StepSource,
    elem_bytes: u64,
    cal: &Calibration,
    algo: Algorithm,
    protos: &[Protocol],
) -> Result<Paths, CollectiveError> {
    let mut bounds = Vec::new();
    source.bounds_into(&mut bounds);
    let mut walk = PathWalk::new(ranks, bounds, elem_bytes, cal, algo, protos, false, None);
    let mut buf: Vec<Move> = Vec::new();
    for k in 0..source.num_steps() {
        buf.clear();
        source.step_into(k, &mut buf);
        walk.step(fabric, &buf)?;
    }
    Ok(walk.paths())
}

/// Where a walk's moves run: each step's link loads, and each move's route
/// latency and busiest links. [`RouteFabric`] follows the routes link by
/// link; `grid_fabric.rs` computes the same figures from a grid's geometry.
pub(crate) trait Fabric {
    /// Adds a non-empty move's bytes to its links' loads in the step;
    /// whether its route crosses the network.
    fn add(&mut self, m: &Move, bytes: u64) -> Result<bool, CollectiveError>;
    /// After the step's adds, before its costs.
    fn settle(&mut self) {}
    /// A move's route latency (picoseconds); `by_bw` gets, per (network?,
    /// bandwidth) of its links, the largest load among them.
    fn cost(&mut self, m: &Move, by_bw: &mut Vec<(bool, u64, u64)>)
        -> Result<u64, CollectiveError>;
    /// Clears the step's loads (`moves`: the step's moves that were added).
    fn clear<'m>(&mut self, moves: impl Iterator<Item = &'m Move>) -> Result<(), CollectiveError>;
}

/// The walk's routes, link by link (link classes in a quotient).
pub(crate) struct RouteFabric<'r, 'a, 't, 'q> {
    topo: &'t Topology,
    routes: &'r mut Routes<'a>,
    quotient: Option<&'q Quotient>,
    load: Vec<u64>,
    down_done: BTreeSet<(usize, u64, u64, bool)>,
    /// In-network moves' links loaded so far in the step, by (link, range,
    /// bytes): each carries a range once.
    net_done: BTreeSet<(usize, u64, u64)>,
}

impl<'r, 'a, 't, 'q> RouteFabric<'r, 'a, 't, 'q> {
    pub(crate) fn new(
        topo: &'t Topology,
        routes: &'r mut Routes<'a>,
        quotient: Option<&'q Quotient>,
    ) -> Self {
        RouteFabric {
            topo,
            routes,
            quotient,
            load: vec![0; topo.links().len()],
            down_done: BTreeSet::new(),
            net_done: BTreeSet::new(),
        }
    }
}

impl Fabric for RouteFabric<'_, '_, '_, '_> {
    fn add(&mut self, m: &Move, bytes: u64) -> Result<bool, CollectiveError> {
        let links = self.topo.links();
        let quotient = self.quotient;
        let class = |l: usize| quotient.map_or(l, |q| q.link_class[l]);
        let load = &mut self.load;
        // A move's links are looked up again in `cost` (the routes are
        // cached), not copied: a step of a ring topology's tree holds
        // thousands of routes of thousands of links.
        Ok(match m.via {
            Via::P2p => {
                let mut net = false;
                for &l in self.routes.get_lane(m.from, m.to, m.lane)? {
                    let l = class(l);
                    load[l] += bytes;
                    net |= links[l].class == LinkClass::Network;
                }
                net
            }
            Via::SwitchReduce | Via::SwitchMulticast => {
                // As the step costs count them: reduce loads every
                // sender's up link and the receiver's down link once,
                // multicast the sender's up link once and every down link.
                let reduce = m.via == Via::SwitchReduce;
                let (up, _) = self.routes.switch_links(m.from)?;
                let (_, down) = self.routes.switch_links(m.to)?;
                let (up, down) = (class(up), class(down));
                let k = if reduce { m.to } else { m.from };
                let once = self.down_done.insert((k, m.src, bytes, reduce));
                if reduce || once {
                    load[up] += bytes;
                }
                if !reduce || once {
                    load[down] += bytes;
                }
                false
            }
            Via::InNetwork | Via::NetworkReduce | Via::NetworkMulticast => {
                // Every link of the aggregation tree carries the range
                // once: the sender's route up (not for a result held at
                // the root), the receiver's down (not while held).
                let (up, down) = self.routes.net_move_links(m)?;
                for l in up.into_iter().chain(down) {
                    let l = class(l);
                    if self.net_done.insert((l, m.dst, bytes)) {
                        load[l] += bytes;
                    }
                }
                true
            }
        })
    }

    fn cost(
        &mut self,
        m: &Move,
        by_bw: &mut Vec<(bool, u64, u64)>,
    ) -> Result<u64, CollectiveError> {
        // One pass over the route: its latency and, per (class,
        // bandwidth), its busiest link's load (the same denominator per
        // group, so the group's largest load gives its largest time).
        let links = self.topo.links();
        let mut lat = 0u64;
        by_bw.clear();
        for l in move_links(self.routes, m, self.quotient)? {
            let link = &links[l];
            lat += link.latency_ps();
            let g = (
                link.class == LinkClass::Network,
                super::timing::copy_bandwidth(self.topo, self.quotient, l),
            );
            match by_bw.iter_mut().find(|e| (e.0, e.1) == g) {
                Some(e) => e.2 = e.2.max(self.load[l]),
                None => by_bw.push((g.0, g.1, self.load[l])),
            }
        }
        Ok(lat)
    }

    fn clear<'m>(&mut self, moves: impl Iterator<Item = &'m Move>) -> Result<(), CollectiveError> {
        for m in moves {
            for l in move_links(self.routes, m, self.quotient)? {
                self.load[l] = 0;
            }
        }
        self.down_done.clear();
        self.net_done.clear();
        Ok(())
    }
}

/// The path walk's state: per rank, when each range it holds was written
/// and when its last step's sends ended; the worst end so far.
pub(crate) struct PathWalk<'q> {
    elem_bytes: u64,
    /// The columns asked for: their index in [`Cols`], figures.
    params: Vec<(usize, Scaled)>,
    quotient: Option<&'q Quotient>,
    /// Segment boundaries, ascending: segment `i` is `bounds[i]..bounds[i + 1]`.
    bounds: Vec<u64>,
    /// Per rank and segment (`rank * segments + i`), its latest write in
    /// each column asked for (`params`' order, `width` of them: a walk of
    /// three protocols keeps three figures, not six).
    writes: Vec<f64>,
    width: usize,
    segments: usize,
    /// Per sender and slot (channel, [`Algorithm::per_channel_slots`], or
    /// connection, [`Algorithm::per_connection_slots`]).
    last_end: Vec<Vec<Cols>>,
    per_channel: bool,
    per_conn: bool,
    worst: Cols,
    // Per-step scratch, reused.
    /// (move index, crosses the network, slot).
    moves: Vec<(usize, bool, usize)>,
    /// (receiver, first segment, end segment, time).
    landed: Vec<(usize, usize, usize, Cols)>,
    /// This step's sends' ends by (sender, slot) with channel or connection slots; else
    /// by sender in `step_end` (slot 0).
    ends: Vec<(usize, usize, Cols)>,
    step_end: Vec<Option<Cols>>,
    /// Per sender, its point-to-point moves so far in this step.
    slot_count: Vec<usize>,
    senders: Vec<usize>,
    /// A move's route per (network?, bandwidth): its largest load.
    by_bw: Vec<(bool, u64, u64)>,
}

impl<'q> PathWalk<'q> {
    /// `bounds`: every boundary of a range the walk's moves read or write
    /// (in any order, repeats allowed).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        ranks: usize,
        mut bounds: Vec<u64>,
        elem_bytes: u64,
        cal: &Calibration,
        algo: Algorithm,
        protos: &[Protocol],
        zero_bw: bool,
        quotient: Option<&'q Quotient>,
    ) -> PathWalk<'q> {
        let zero: &[bool] = if zero_bw { &[false, true] } else { &[false] };
        let params: Vec<(usize, Scaled)> = zero
            .iter()
            .flat_map(|&z| {
                Protocol::ALL
                    .iter()
                    .enumerate()
                    .map(move |(i, &p)| (z, i, p))
            })
            .filter(|&(_, _, p)| protos.contains(&p))
            .map(|(z, i, p)| {
                let q = cal.params(algo, p);
                let payload = if algo == Algorithm::Nvls {
                    1.0
                } else {
                    p.payload_fraction()
                };
                let mut s = q_scaled(q, payload);
                s.pipelined = algo.pipelines_hops();
                s.departed = s.pipelined && cal.send_on_departure;
                s.channel_rate = cal.tree_channel_rate(algo, p).unwrap_or(0.0);
                if z {
                    s.no_bytes = true;
                    (i + 3, s)
                } else {
                    (i, s)
                }
            })
            .collect();
        bounds.sort_unstable();
        bounds.dedup();
        let segments = bounds.len().saturating_sub(1);
        // At least one column (`chunks_exact` needs a non-zero width).
        let width = params.len().max(1);
        PathWalk {
            elem_bytes,
            params,
            quotient,
            bounds,
            writes: vec![0.0; ranks * segments * width],
            width,
            segments,
            last_end: vec![Vec::new(); ranks],
            per_channel: algo.per_channel_slots(),
            per_conn: algo.per_connection_slots(),
            worst: [0.0; 6],
            moves: Vec::new(),
            landed: Vec::new(),
            ends: Vec::new(),
            step_end: vec![None; ranks],
            slot_count: vec![0; ranks],
            senders: Vec::new(),
            by_bw: Vec::new(),
        }
    }

    /// The longest paths so far.
    pub(crate) fn paths(&self) -> Paths {
        Paths::of(self.worst)
    }

    pub(crate) fn step(
        &mut self,
        fabric: &mut impl Fabric,
        step: &[Move],
    ) -> Result<(), CollectiveError> {
        // Senders keyed as the timing keys them (`timing::StepCtx::key`).
        let quotient = self.quotient.filter(|_| !self.per_conn);
        let key = |r: usize| quotient.map_or(r, |q| q.sender_class[r]);
        let moves = &mut self.moves;
        // The step's loads.
        moves.clear();
        for (i, m) in step.iter().enumerate() {
            // Slots as the timing counts them (empty moves included).
            let slot = if self.per_channel && m.via == Via::P2p && m.from != m.to {
                let k = key(m.from);
                if self.slot_count[k] == 0 {
                    self.senders.push(k);
                }
                self.slot_count[k] += 1;
                self.slot_count[k] - 1
            } else if self.per_conn {
                m.conn as usize
            } else {
                0
            };
            let bytes = m.len * self.elem_bytes;
            if bytes == 0 || (m.via == Via::P2p && m.from == m.to) {
                continue;
            }
            let net = fabric.add(m, bytes)?;
            moves.push((i, net, slot));
        }
        for k in self.senders.drain(..) {
            self.slot_count[k] = 0;
        }
        fabric.settle();
        self.landed.clear();
        for &(i, net, slot) in moves.iter() {
            let m = &step[i];
            let mut ready = [0.0f64; 6];
            let (a, b) = segs(&self.bounds, m.src, m.len);
            let (base, width) = (m.from * self.segments, self.width);
            for w in self.writes[(base + a) * width..(base + b) * width].chunks_exact(width) {
                for (&x, &(k, _)) in w.iter().zip(&self.params) {
                    ready[k] = ready[k].max(x);
                }
            }
            let lat = fabric.cost(m, &mut self.by_bw)?;
            let by_bw = &self.by_bw;
            let mut end = [0.0f64; 6];
            let mut left = [0.0f64; 6];
            let sender = key(m.from);
            let last = self.last_end[sender].get(slot).copied().unwrap_or([0.0; 6]);
            for &(k, ref p) in &self.params {
                let hop = if net { p.network_hop } else { p.nvlink_hop };
                let start = if p.pipelined {
                    (ready[k] + hop).max(last[k])
                } else {
                    ready[k].max(last[k]) + hop
                };
                let t = if p.no_bytes {
                    0.0
                } else {
                    by_bw
                        .iter()
                        .map(|&(network, bw, most)| {
                            let f = if network { p.network_bw } else { p.nvlink_bw };
                            most as f64 / (bw as f64 * f)
                        })
                        .fold(0.0, f64::max)
                        .max(own_time(m.len * self.elem_bytes, p.channel_rate))
                };
                end[k] = start + lat as f64 + t * 1e12;
                self.worst[k] = self.worst[k].max(end[k]);
                // Pipelined: the sender's next send waits for this one to
                // have left, not arrived (`timing::Deps::gate`).
                left[k] = if p.departed {
                    end[k] - lat as f64
                } else {
                    end[k]
                };
            }
            if self.per_channel || self.per_conn {
                self.ends.push((sender, slot, left));
            } else {
                if self.step_end[sender].is_none() {
                    self.senders.push(sender);
                }
                let e = self.step_end[sender].get_or_insert([0.0; 6]);
                for k in 0..6 {
                    e[k] = e[k].max(left[k]);
                }
            }
            let (a, b) = segs(&self.bounds, m.dst, m.len);
            self.landed.push((m.to, a, b, end));
        }
        fabric.clear(moves.iter().map(|&(i, _, _)| &step[i]))?;
        // A rank's next step (in a slot) waits for all its sends of this
        // one (in the slot); a slot it did not send in keeps its last end.
        for r in self.senders.drain(..) {
            if let Some(e) = self.step_end[r].take() {
                match self.last_end[r].first_mut() {
                    Some(l) => *l = e,
                    None => self.last_end[r].push(e),
                }
            }
        }
        self.ends.sort_by_key(|&(r, slot, _)| (r, slot));
        let mut i = 0;
        while i < self.ends.len() {
            let (r, slot, mut e) = self.ends[i];
            let mut j = i + 1;
            while j < self.ends.len() && (self.ends[j].0, self.ends[j].1) == (r, slot) {
                for (x, y) in e.iter_mut().zip(self.ends[j].2) {
                    *x = x.max(y);
                }
                j += 1;
            }
            let l = &mut self.last_end[r];
            if l.len() <= slot {
                l.resize(slot + 1, [0.0; 6]);
            }
            l[slot] = e;
            i = j;
        }
        self.ends.clear();
        // Writes land after the step's reads; two writes of one range keep
        // the later one.
        for &(r, a, b, t) in &self.landed {
            let (base, width) = (r * self.segments, self.width);
            for w in self.writes[(base + a) * width..(base + b) * width].chunks_exact_mut(width) {
                for (x, &(k, _)) in w.iter_mut().zip(&self.params) {
                    *x = x.max(t[k]);
                }
            }
        }
        Ok(())
    }
}

/// The links (class ids in a quotient) of a move the walk counts: a
/// point-to-point move's route, a switch move's up and down links.
fn move_links<'a>(
    routes: &'a mut Routes,
    m: &Move,
    quotient: Option<&'a Quotient>,
) -> Result<impl Iterator<Item = usize> + 'a, CollectiveError> {
    // A route is borrowed from the cache (this runs per move of a walk);
    // only an in-network move's two legs are put together.
    let mut joined = Vec::new();
    let mut pair = None;
    let route: &[usize] = match m.via {
        Via::P2p => routes.get_lane(m.from, m.to, m.lane)?,
        Via::SwitchReduce | Via::SwitchMulticast => {
            let (up, _) = routes.switch_links(m.from)?;
            let (_, down) = routes.switch_links(m.to)?;
            pair = Some([up, down]);
            &[]
        }
        Via::InNetwork | Via::NetworkReduce | Via::NetworkMulticast => {
            let (up, down) = routes.net_move_links(m)?;
            joined = up;
            joined.extend(down);
            &[]
        }
    };
    Ok(route
        .iter()
        .copied()
        .chain(joined)
        .chain(pair.into_iter().flatten())
        .map(move |l| quotient.map_or(l, |q| q.link_class[l])))
}

/// The segments of `off..off + len` (a range of the walk's moves) over
/// the boundaries `bounds`.
fn segs(bounds: &[u64], off: u64, len: u64) -> (usize, usize) {
    let a = bounds.partition_point(|&b| b < off);
    let b = bounds.partition_point(|&b| b < off + len);
    (a, b)
}

/// One protocol's figures in picoseconds and bandwidth factors.
struct Scaled {
    nvlink_hop: f64,
    network_hop: f64,
    /// The hop waits for the data only ([`Algorithm::pipelines_hops`]).
    pipelined: bool,
    /// A sender's next send waits for its last to have left, not arrived
    /// ([`Calibration::send_on_departure`], pipelined algorithms).
    departed: bool,
    nvlink_bw: f64,
    network_bw: f64,
    /// The zero-bandwidth column: moves cost their latencies only.
    no_bytes: bool,
    /// A send's own rate (bytes/s, [`Calibration::tree_channel_rate`]):
    /// it lasts at least its bytes at this rate. 0: links only.
    channel_rate: f64,
}

/// Seconds a send of `bytes` takes at its own `rate` (0: none).
fn own_time(bytes: u64, rate: f64) -> f64 {
    if rate > 0.0 {
        bytes as f64 / rate
    } else {
        0.0
    }
}

fn q_scaled(q: super::calibration::ProtocolParams, payload: f64) -> Scaled {
    Scaled {
        nvlink_hop: q.nvlink_hop_us * 1e6,
        network_hop: q.network_hop_us * 1e6,
        pipelined: false,
        departed: false,
        nvlink_bw: q.nvlink_fraction * payload,
        network_bw: q.network_fraction * payload,
        no_bytes: false,
        channel_rate: 0.0,
    }
}

/// A lower bound (picoseconds, base latency included) of the best estimate
/// over `protos` of [`streamed_path`] for an algorithm without channel
/// slots: one rank's chain of steps. The walk starts a rank's sends of a
/// step after all its sends of the last one ended (plus the hop where hops
/// do not pipeline; with `send_on_departure`, after they left, their
/// latency not counted), and a send lasts at least its route's latency plus its
/// own bytes over its slowest link; the rank is the sender of the longest
/// move by place in the group (on a ring topology, the tree's longest
/// routes). Costs a pass over the steps and that rank's routes only.
#[allow(clippy::too_many_arguments)]
pub(crate) fn streamed_chain_bound(
    topo: &Topology,
    routes: &mut Routes,
    ranks: usize,
    source: &dyn StepSource,
    elem_bytes: u64,
    cal: &Calibration,
    algo: Algorithm,
    protos: &[Protocol],
) -> Result<Option<f64>, CollectiveError> {
    if algo.per_channel_slots() || protos.is_empty() || ranks < 2 {
        return Ok(None);
    }
    let sends = |m: &Move| m.via == Via::P2p && m.from != m.to && m.len > 0;
    let mut buf: Vec<Move> = Vec::new();
    let mut far: Option<(usize, usize)> = None;
    for k in 0..source.num_steps() {
        buf.clear();
        source.step_into(k, &mut buf);
        for m in buf.iter().filter(|m| sends(m)) {
            let d = m.from.abs_diff(m.to);
            let d = d.min(ranks - d);
            if far.map_or(true, |(best, _)| d > best) {
                far = Some((d, m.from));
            }
        }
    }
    let Some((_, rank)) = far else {
        return Ok(None);
    };
    let links = topo.links();
    let params: Vec<(f64, Scaled)> = protos
        .iter()
        .map(|&p| {
            let q = cal.params(algo, p);
            let mut s = q_scaled(q, p.payload_fraction());
            s.pipelined = algo.pipelines_hops();
            s.departed = s.pipelined && cal.send_on_departure;
            s.channel_rate = cal.tree_channel_rate(algo, p).unwrap_or(0.0);
            (q.base_us * 1e6, s)
        })
        .collect();
    // Per connection (one, 0, unless `Algorithm::per_connection_slots`):
    // `end`, when the rank's sends so far have left (pipelined: the next
    // step waits for that only) or arrived; `next`, the same with this
    // step's. `done`: arrived.
    let per_conn = algo.per_connection_slots();
    let zeros = vec![0.0f64; params.len()];
    let mut end: BTreeMap<u32, Vec<f64>> = BTreeMap::new();
    let mut next: BTreeMap<u32, Vec<f64>> = BTreeMap::new();
    let mut done = vec![0.0f64; params.len()];
    for k in 0..source.num_steps() {
        buf.clear();
        source.step_into(k, &mut buf);
        for m in buf.iter().filter(|m| m.from == rank && sends(m)) {
            let conn = if per_conn { m.conn } else { 0 };
            let end = end.get(&conn).unwrap_or(&zeros);
            let next = next.entry(conn).or_insert_with(|| end.clone());
            let bytes = (m.len * elem_bytes) as f64;
            let (mut lat, mut net) = (0u64, false);
            let (mut local_t, mut net_t) = (0.0f64, 0.0f64);
            for &l in routes.get_lane(m.from, m.to, m.lane)? {
                let link = &links[l];
                lat += link.latency_ps();
                let t = bytes / link.bandwidth_bytes_per_s() as f64;
                if link.class == LinkClass::Network {
                    net = true;
                    net_t = net_t.max(t);
                } else {
                    local_t = local_t.max(t);
                }
            }
            for (i, (_, p)) in params.iter().enumerate() {
                let hop = if net { p.network_hop } else { p.nvlink_hop };
                let start = if p.pipelined {
                    end[i].max(hop)
                } else {
                    end[i] + hop
                };
                let t = (local_t / p.nvlink_bw)
                    .max(net_t / p.network_bw)
                    .max(own_time(m.len * elem_bytes, p.channel_rate));
                let arrive = start + lat as f64 + t * 1e12;
                done[i] = done[i].max(arrive);
                next[i] = next[i].max(if p.departed { start + t * 1e12 } else { arrive });
            }
        }
        end.append(&mut next);
    }
    Ok(params
        .iter()
        .zip(&done)
        .map(|((base, _), e)| base + e)
        .reduce(f64::min))
}
