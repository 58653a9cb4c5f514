//! The flow-level model: active flows share link bandwidth max-min fairly
//! (progressive filling), recomputed only over the flows whose rates a change
//! can move (see `flush`). A flow transmits from its start until its
//! bytes are integrated away at its (piecewise constant) rate; it is delivered
//! after that plus the sum of its route's latencies (and, with store-and-forward
//! packets, the pipeline fill of one packet per extra hop).
//!
//! The model is passive: it never owns a clock. Every call takes `now`. Starts,
//! finishes and link changes only mark links (or new flows) dirty; `flush(now)`
//! recomputes rates once for all changes at the same instant (so k flows
//! finishing together cost one recomputation, not k). The driver must
//! call `flush` before its clock moves past `now`. Recomputation pushes the times
//! at which re-rated flows finish into a timer list that the driver drains into
//! its event queue; a timer made stale by a later rate change carries an old
//! version and is ignored when it fires.
//!
//! A flow may carry its own rate cap (the speed of whatever moves it, e.g. a
//! copy engine or a thread block, beside its links): the cap is a private
//! link of that capacity on the flow's route, crossed by that flow alone, so
//! max-min sharing, incremental recomputation and its invariants hold as for
//! any link. A slot keeps its private link for its next capped flow; the
//! private links are not part of the caller's network (ids past
//! `link_count`, absent from routes handed back).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::engine::{transfer_ps, Time, TimeOverflow, PS_PER_SEC};

use super::link::{Link, LinkId, LinkInfo, LinkState};
use super::spans::{Arena, Span};
use super::NetError;

/// A flow's slot in the model (reused after the flow ends).
pub type FlowSlot = u32;

/// A timer the driver must deliver back to `Network::on_timer` at its time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NetTimer {
    pub slot: FlowSlot,
    pub version: u32,
}

/// A flow finished transmitting; it is delivered at `deliver_at`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxDone {
    pub tag: u64,
    pub deliver_at: Time,
}

/// A flow stopped by a link failure: its remaining bytes and route.
#[derive(Debug, Clone, PartialEq)]
pub struct Blocked {
    pub slot: FlowSlot,
    pub tag: u64,
    pub link: LinkId,
    pub remaining_bytes: f64,
    pub route: Vec<LinkId>,
    /// The flow's own rate cap, bytes/s (`f64::INFINITY`: none).
    pub rate_cap: f64,
}

/// A flow's fields that rate recomputation reads, in one record (it reaches
/// flows in no particular order); the rest is in `FlowLife`.
#[derive(Debug, Clone, Copy, Default)]
struct Flow {
    rate: f64,
    /// Rate found by the recomputation in progress (scratch).
    new_rate: f64,
    /// Its links, in the network's route arena.
    route: Span,
    mark: u32,
    /// The link that froze it in the last filling that covered it (`NONE`
    /// until the first).
    bottleneck: u32,
    active: bool,
    frozen: bool,
    /// Held at its rate in the recomputation in progress (scratch).
    fixed: bool,
    /// Started (or re-routed) since the last flush: must be timed even if its
    /// computed rate equals the stale one.
    fresh: bool,
}

/// A flow's fields read when it starts, is re-timed or ends.
#[derive(Debug, Clone, Copy, Default)]
struct FlowLife {
    tag: u64,
    bytes: f64,
    remaining: f64,
    last: Time,
    /// Latency (and store-and-forward fill) added after transmission ends.
    deliver_delay: Time,
    version: u32,
    in_use: bool,
    /// Its rate cap (`f64::INFINITY`: none).
    cap: f64,
    /// The slot's private cap link (`NONE` until its first capped flow).
    own: u32,
}

/// Counters for benchmarks and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NetStats {
    pub flows_started: u64,
    pub recomputations: u64,
    pub timers: u64,
    pub stale_timers: u64,
    pub peak_active_flows: u64,
}

/// Flow-level network with max-min fair sharing.
pub struct Network {
    /// The caller's links, then the slots' private cap links.
    links: Vec<LinkState>,
    /// How many of `links` are the caller's.
    real_links: usize,
    info: Vec<LinkInfo>,
    /// The links' flow lists.
    lists: Arena,
    flows: Vec<Flow>,
    life: Vec<FlowLife>,
    /// The flows' routes (a slot keeps its span for its next flow).
    routes: Arena,
    free: Vec<FlowSlot>,
    active: u64,
    epoch: u32,
    packet_bytes: Option<u64>,
    timers: Vec<(Time, NetTimer)>,
    /// Links whose flows must be re-rated at the next flush (capacity changed,
    /// or a flow left while the link was a bottleneck).
    dirty: Vec<LinkId>,
    /// Flows started since the last flush.
    fresh: Vec<FlowSlot>,
    /// Epoch of the slack test (several per flush when the set widens).
    pepoch: u32,
    /// Recompute every flow at every flush (the reference for tests).
    exhaustive: bool,
    stats: NetStats,
    // Scratch buffers reused across recomputations.
    comp_links: Vec<LinkId>,
    residual: Vec<f64>,
    unfrozen: Vec<u32>,
    heap: BinaryHeap<Reverse<Entry>>,
    new_rates: Vec<(FlowSlot, f64)>,
    passive: Vec<LinkId>,
    seen: Vec<FlowSlot>,
    froze: Vec<(FlowSlot, u32)>,
    violators: Vec<FlowSlot>,
    isolated: Vec<Entry>,
    held: Vec<Entry>,
}

/// A water-filling event, in the order progressive filling over the whole
/// component would meet it: (share bits, link id, kind, flow), packed into
/// one integer that orders the same way (64, 31, 1 and 32 bits; `NONE` packs
/// as the largest link). Kind `SHARE`: the link's fair share; kind `HELD`: a
/// held flow frozen by its bottleneck `link` at its unchanged rate.
type Entry = u128;

const SHARE: u8 = 0;
const HELD: u8 = 1;

/// Link ids fit in an entry's 31 bits below this (checked by `Network::new`).
pub const MAX_LINKS: usize = (1 << 31) - 1;

fn entry(bits: u64, link: u32, kind: u8, slot: u32) -> Entry {
    let link = link.min(MAX_LINKS as u32);
    (bits as u128) << 64 | (link as u128) << 33 | (kind as u128) << 32 | slot as u128
}

/// The link of an entry (`NONE` back from its packed form).
fn link_of(e: Entry) -> u32 {
    match ((e >> 33) as u32) & MAX_LINKS as u32 {
        l if l == MAX_LINKS as u32 => NONE,
        l => l,
    }
}

const NONE: u32 = u32::MAX;

/// Remaining bytes below this fraction of a flow's size count as sent (absorbs
/// float error from piecewise integration).
const DONE_FRACTION: f64 = 1e-9;

/// A link outside the recomputed set whose load comes within this fraction of
/// its capacity joins the set (float error of a max-min solution is ~1e-15).
const SLACK: f64 = 1e-9;

/// The running load sum is trusted below this fraction of capacity; above it
/// the load is summed exactly before the slack test.
const LOAD_ESTIMATE: f64 = 1e-6;

impl Network {
    /// A network over `links`; errors on a non-positive or non-finite capacity.
    pub fn new(links: &[Link]) -> Result<Network, NetError> {
        if links.len() >= MAX_LINKS {
            return Err(NetError::TooManyLinks(links.len()));
        }
        for (i, l) in links.iter().enumerate() {
            if !(l.capacity.is_finite() && l.capacity > 0.0) {
                return Err(NetError::BadCapacity {
                    link: i,
                    capacity: l.capacity,
                });
            }
        }
        let n = links.len();
        let (links, info) = links.iter().map(LinkState::new).unzip();
        Ok(Network {
            links,
            real_links: n,
            info,
            // Room for four flows a link: growth by doubling copied the
            // arena and faulted in fresh pages for every network built.
            lists: Arena::with_capacity(n * 4),
            flows: Vec::new(),
            life: Vec::new(),
            routes: Arena::default(),
            free: Vec::new(),
            active: 0,
            epoch: 0,
            packet_bytes: None,
            timers: Vec::new(),
            dirty: Vec::new(),
            fresh: Vec::new(),
            pepoch: 0,
            exhaustive: false,
            stats: NetStats::default(),
            comp_links: Vec::new(),
            residual: Vec::new(),
            unfrozen: Vec::new(),
            heap: BinaryHeap::new(),
            new_rates: Vec::new(),
            passive: Vec::new(),
            seen: Vec::new(),
            froze: Vec::new(),
            violators: Vec::new(),
            isolated: Vec::new(),
            held: Vec::new(),
        })
    }

    /// Store-and-forward packets of this size: a flow over h hops is delivered
    /// (h - 1) packet transmission times later (pipeline fill), each at the
    /// nominal capacity of the slowest link on its route.
    pub fn set_packet_bytes(&mut self, packet: Option<u64>) {
        self.packet_bytes = packet.filter(|&p| p > 0);
    }

    /// Recompute every active flow over every loaded link at each flush,
    /// instead of only what the changes can move: the whole-network progressive
    /// filling that the incremental one must equal, to the bit (for tests).
    pub fn set_exhaustive(&mut self, on: bool) {
        self.exhaustive = on;
    }

    /// The store-and-forward packet size, if packets are on.
    pub fn packet_bytes(&self) -> Option<u64> {
        self.packet_bytes
    }

    pub fn link_count(&self) -> usize {
        self.real_links
    }

    pub fn stats(&self) -> NetStats {
        self.stats
    }

    pub fn active_flows(&self) -> u64 {
        self.active
    }

    /// Current capacity of a link (0 when failed).
    pub fn capacity(&self, link: LinkId) -> f64 {
        self.links[link].capacity
    }

    pub fn is_failed(&self, link: LinkId) -> bool {
        self.info[link].failed
    }

    pub fn latency(&self, link: LinkId) -> Time {
        self.info[link].latency
    }

    /// Sum of the current rates of the flows on `link`.
    pub fn link_load(&self, link: LinkId) -> f64 {
        self.flows_on(link)
            .iter()
            .map(|&s| self.flows[s as usize].rate)
            .sum()
    }

    /// Active flows on `link` (slots).
    pub fn flows_on(&self, link: LinkId) -> &[FlowSlot] {
        self.lists.get(self.links[link].flows)
    }

    /// Rate, route and tag of an active flow.
    pub fn flow_rate(&self, slot: FlowSlot) -> Option<(f64, Vec<LinkId>, u64)> {
        let f = self.flows.get(slot as usize)?;
        f.active
            .then(|| (f.rate, self.route_of(slot), self.life[slot as usize].tag))
    }

    /// The links of a flow's route (without its private cap link).
    fn route_of(&self, slot: FlowSlot) -> Vec<LinkId> {
        let r = self.flows[slot as usize].route;
        self.routes
            .get(r)
            .iter()
            .map(|&l| l as LinkId)
            .filter(|&l| l < self.real_links)
            .collect()
    }

    /// The rate cap of an active flow (`f64::INFINITY`: none).
    pub fn flow_cap(&self, slot: FlowSlot) -> Option<f64> {
        let f = self.flows.get(slot as usize)?;
        f.active.then(|| self.life[slot as usize].cap)
    }

    /// Take the timers produced since the last call.
    pub fn drain_timers(&mut self) -> std::vec::Drain<'_, (Time, NetTimer)> {
        self.timers.drain(..)
    }

    /// Check a route: every link exists, none repeats, none has failed.
    pub fn check_route(&self, route: &[LinkId]) -> Result<(), NetError> {
        for (i, &l) in route.iter().enumerate() {
            if l >= self.real_links {
                return Err(NetError::UnknownLink {
                    link: l,
                    links: self.real_links,
                });
            }
            if route[..i].contains(&l) {
                return Err(NetError::RepeatedLink { link: l });
            }
            if self.info[l].failed {
                return Err(NetError::FailedLink { link: l });
            }
        }
        Ok(())
    }

    /// Start a flow of `bytes` over `route` at `now`. `latency` is the delivery
    /// delay after transmission (normally the sum of the route's link latencies;
    /// the driver passes a jittered sum when jitter is on).
    pub fn start_flow(
        &mut self,
        now: Time,
        tag: u64,
        route: &[LinkId],
        bytes: u64,
        latency: Time,
    ) -> Result<FlowSlot, NetError> {
        self.start_flow_capped(now, tag, route, bytes, latency, f64::INFINITY)
    }

    /// [`Self::start_flow`] for a flow that never runs faster than `cap`
    /// bytes/s (`f64::INFINITY`: no cap), whatever its links could give it;
    /// what it leaves of its links goes to the other flows as usual.
    pub fn start_flow_capped(
        &mut self,
        now: Time,
        tag: u64,
        route: &[LinkId],
        bytes: u64,
        latency: Time,
        cap: f64,
    ) -> Result<FlowSlot, NetError> {
        if cap.is_nan() || cap <= 0.0 {
            return Err(NetError::BadRateCap(cap));
        }
        self.check_route(route)?;
        let fill = self.store_and_forward_fill(route, bytes)?;
        let deliver_delay = latency.checked_add(fill)?;
        self.insert_flow(
            now,
            tag,
            route,
            bytes as f64,
            bytes as f64,
            deliver_delay,
            cap,
        )
    }

    /// The sum of nominal latencies along a route.
    pub fn route_latency(&self, route: &[LinkId]) -> Result<Time, TimeOverflow> {
        route
            .iter()
            .try_fold(Time::ZERO, |acc, &l| acc.checked_add(self.info[l].latency))
    }

    fn store_and_forward_fill(&self, route: &[LinkId], bytes: u64) -> Result<Time, TimeOverflow> {
        match self.packet_bytes {
            Some(p) if route.len() > 1 && bytes > 0 => {
                let slowest = route
                    .iter()
                    .map(|&l| self.info[l].nominal)
                    .fold(f64::INFINITY, f64::min);
                transfer_ps(p.min(bytes) as f64, slowest)?.checked_mul(route.len() as u64 - 1)
            }
            _ => Ok(Time::ZERO),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn insert_flow(
        &mut self,
        now: Time,
        tag: u64,
        route: &[LinkId],
        bytes: f64,
        remaining: f64,
        deliver_delay: Time,
        cap: f64,
    ) -> Result<FlowSlot, NetError> {
        let slot = match self.free.pop() {
            Some(s) => s,
            None => {
                self.flows.push(Flow::default());
                self.life.push(FlowLife {
                    own: NONE,
                    ..FlowLife::default()
                });
                (self.flows.len() - 1) as FlowSlot
            }
        };
        let own = if cap.is_finite() {
            Some(self.own_link(slot, cap)?)
        } else {
            None
        };
        let life = &mut self.life[slot as usize];
        life.cap = cap;
        life.tag = tag;
        life.bytes = bytes;
        life.remaining = remaining;
        life.last = now;
        life.deliver_delay = deliver_delay;
        life.version = life.version.wrapping_add(1);
        life.in_use = true;
        let version = life.version;
        let f = &mut self.flows[slot as usize];
        f.rate = 0.0;
        f.active = true;
        f.fresh = true;
        f.fixed = false;
        f.bottleneck = NONE;
        // Link ids fit in 31 bits (`new`, `own_link`) and the route was
        // checked; the private cap link goes last.
        self.routes
            .set(&mut f.route, route.iter().map(|&l| l as u32))?;
        if let Some(o) = own {
            self.routes.push(&mut f.route, o as u32)?;
        }
        if self.routes.wants_compaction() {
            self.routes
                .compact(self.flows.iter_mut().map(|f| &mut f.route));
        }
        self.active += 1;
        self.stats.flows_started += 1;
        self.stats.peak_active_flows = self.stats.peak_active_flows.max(self.active);
        if route.is_empty() && own.is_none() {
            // A local copy: no link to share, done at once.
            self.flows[slot as usize].rate = f64::INFINITY;
            self.timers.push((now, NetTimer { slot, version }));
            self.stats.timers += 1;
            return Ok(slot);
        }
        for &l in route.iter().chain(own.as_ref()) {
            self.lists.push(&mut self.links[l].flows, slot)?;
        }
        if self.lists.wants_compaction() {
            self.lists
                .compact(self.links.iter_mut().map(|l| &mut l.flows));
        }
        self.fresh.push(slot);
        Ok(slot)
    }

    /// The private link of `slot`, at capacity `cap` (made at the slot's
    /// first capped flow; the slot's earlier flow has left it).
    fn own_link(&mut self, slot: FlowSlot, cap: f64) -> Result<LinkId, NetError> {
        let own = self.life[slot as usize].own;
        let l = if own == NONE {
            if self.links.len() >= MAX_LINKS {
                return Err(NetError::TooManyLinks(self.links.len() + 1));
            }
            let (state, info) = LinkState::new(&Link::new(cap, Time::ZERO));
            self.links.push(state);
            self.info.push(info);
            self.life[slot as usize].own = (self.links.len() - 1) as u32;
            self.links.len() - 1
        } else {
            own as LinkId
        };
        self.links[l].capacity = cap;
        self.info[l].nominal = cap;
        Ok(l)
    }

    /// Handle a timer at `now`: `Some` when it completes a flow's transmission.
    pub fn on_timer(&mut self, now: Time, t: NetTimer) -> Result<Option<TxDone>, NetError> {
        let Some(f) = self.flows.get(t.slot as usize) else {
            return Ok(None);
        };
        let life = &self.life[t.slot as usize];
        if !f.active || life.version != t.version {
            self.stats.stale_timers += 1;
            return Ok(None);
        }
        let tag = life.tag;
        let deliver_at = now.checked_add(life.deliver_delay)?;
        self.detach(t.slot);
        self.release(t.slot);
        Ok(Some(TxDone { tag, deliver_at }))
    }

    /// Change a link's capacity to `fraction` of nominal (effective at the next flush).
    pub fn degrade_link(&mut self, link: LinkId, fraction: f64) -> Result<(), NetError> {
        if link >= self.real_links {
            return Err(NetError::UnknownLink {
                link,
                links: self.real_links,
            });
        }
        if !(fraction > 0.0 && fraction <= 1.0) {
            return Err(NetError::BadFraction(fraction));
        }
        if self.info[link].failed {
            return Ok(());
        }
        self.links[link].capacity = self.info[link].nominal * fraction;
        self.dirty.push(link);
        Ok(())
    }

    /// Whether changes wait for `flush`.
    pub fn needs_flush(&self) -> bool {
        !self.dirty.is_empty() || !self.fresh.is_empty()
    }

    /// Recompute rates for everything changed at `now` and time the re-rated
    /// flows.
    ///
    /// Only flows whose rates can move are recomputed. A link is *tight* when
    /// it froze a flow in the last water-filling that covered it (it is that
    /// flow's bottleneck); other links have slack. The recomputed flows start
    /// as the new ones; the set of links as the dirty ones (capacity changed,
    /// or a flow left a tight link) and every tight link of a recomputed flow
    /// (a new flow without one enters by the link with the least headroom per
    /// flow). Other flows on these links are *held* at their rates: filling
    /// meets them in the order a filling of the whole component would, and
    /// checks that it would freeze them at the same rate; a held flow that
    /// would move (a link in the set reaches a smaller share while it is
    /// unfrozen, or its bottleneck is in the set and no longer freezes it)
    /// joins the recomputed flows and the filling is redone. Links of
    /// recomputed flows outside the set must keep slack under the new rates
    /// (within `SLACK`), or join the set. What remains is exactly the
    /// computation over the whole connected component restricted to what it
    /// changes: a link that ends with slack never freezes a flow, and every
    /// other link sees the same shares subtracted in the same order (ties
    /// between equal shares broken by link id).
    pub fn flush(&mut self, now: Time) -> Result<(), NetError> {
        if !self.needs_flush() {
            return Ok(());
        }
        self.stats.recomputations += 1;
        if !self.exhaustive && (self.flush_single_links(now)? || self.flush_at_caps(now)?) {
            return Ok(());
        }
        let epoch = self.next_epoch();
        let mut comp_links = std::mem::take(&mut self.comp_links);
        let mut new_rates = std::mem::take(&mut self.new_rates);
        let mut passive = std::mem::take(&mut self.passive);
        let mut violators = std::mem::take(&mut self.violators);
        comp_links.clear();
        self.seen.clear();
        for i in 0..self.dirty.len() {
            let l = self.dirty[i];
            if self.links[l].mark == epoch {
                continue;
            }
            self.join(epoch, l, &mut comp_links);
            // The flows this link froze move with it (a filling would find
            // them violating and start over): recompute them at once.
            for k in 0..self.links[l].flows.len() {
                let s = self.lists.at(self.links[l].flows, k);
                if self.flows[s as usize].bottleneck == l as u32 {
                    self.recompute_flow(epoch, s, &mut comp_links);
                }
            }
        }
        self.dirty.clear();
        for i in 0..self.fresh.len() {
            let s = self.fresh[i];
            let f = &self.flows[s as usize];
            if f.active && f.fresh && !f.route.is_empty() && f.mark != epoch {
                let l = self.seed_link(s);
                self.join(epoch, l, &mut comp_links);
                self.recompute_flow(epoch, s, &mut comp_links);
            }
        }
        self.fresh.clear();
        if self.exhaustive {
            for l in 0..self.links.len() {
                if !self.links[l].flows.is_empty() {
                    self.join(epoch, l, &mut comp_links);
                }
            }
            for s in 0..self.flows.len() as FlowSlot {
                let f = &self.flows[s as usize];
                if f.active && !f.route.is_empty() {
                    self.recompute_flow(epoch, s, &mut comp_links);
                }
            }
        }
        let mut scanned = 0;
        loop {
            self.collect(epoch, &comp_links, &mut scanned);
            new_rates.clear();
            violators.clear();
            self.water_fill(epoch, &comp_links, &mut new_rates, &mut violators);
            if !violators.is_empty() {
                for &g in &violators {
                    self.recompute_flow(epoch, g, &mut comp_links);
                }
                continue;
            }
            if !self.widen(epoch, &new_rates, &mut comp_links, &mut passive) {
                break;
            }
        }
        for i in 0..self.froze.len() {
            let (s, by) = self.froze[i];
            self.flows[s as usize].bottleneck = by;
        }
        let r = self.retime(now, &new_rates);
        self.comp_links = comp_links;
        self.new_rates = new_rates;
        self.passive = passive;
        self.violators = violators;
        r
    }

    /// The common case of rings and point-to-point steps, without the general
    /// machinery: every link changed since the last flush is empty or carries
    /// only new flows that cross no other link. Each such link then shares its
    /// capacity equally, in the order the general filling meets them (share,
    /// then link id; links alone in the set need no heap) and with no slack
    /// test (no route leaves the set). False, with nothing changed but scratch
    /// marks, when the case does not apply.
    fn flush_single_links(&mut self, now: Time) -> Result<bool, NetError> {
        if self.dirty.iter().any(|&l| !self.links[l].flows.is_empty()) {
            return Ok(false);
        }
        let epoch = self.next_epoch();
        for &s in &self.fresh {
            let f = &mut self.flows[s as usize];
            if !(f.active && f.fresh) {
                continue; // ended or re-used before the flush (as `flush` skips it)
            }
            if f.route.len() != 1 {
                return Ok(false);
            }
            f.mark = epoch;
        }
        let mut isolated = std::mem::take(&mut self.isolated);
        isolated.clear();
        for &s in &self.fresh {
            let f = &self.flows[s as usize];
            if f.mark != epoch || !(f.active && f.fresh) {
                continue;
            }
            let l = self.routes.at(f.route, 0) as usize;
            let ls = &mut self.links[l];
            if ls.mark == epoch {
                continue;
            }
            ls.mark = epoch;
            // Every flow on the link is one of the new single-link flows.
            if !self
                .lists
                .get(ls.flows)
                .iter()
                .all(|&o| self.flows[o as usize].mark == epoch)
            {
                self.isolated = isolated;
                return Ok(false);
            }
            let share = ls.capacity / ls.flows.len() as f64;
            isolated.push(entry(share.to_bits(), l as u32, SHARE, 0));
        }
        for i in 0..self.dirty.len() {
            let l = self.dirty[i];
            self.links[l].tight = false; // empty: it freezes nothing
        }
        self.dirty.clear();
        self.fresh.clear();
        if isolated.windows(2).any(|w| w[0] > w[1]) {
            isolated.sort(); // stable: finds the runs of the usual near-sorted order (keys are distinct)
        }
        let mut new_rates = std::mem::take(&mut self.new_rates);
        new_rates.clear();
        for &e in &isolated {
            let (share, l) = (f64::from_bits((e >> 64) as u64), link_of(e));
            let ls = &mut self.links[l as usize];
            ls.tight = true;
            for &s in self.lists.get(ls.flows) {
                self.flows[s as usize].bottleneck = l;
                new_rates.push((s, share));
            }
        }
        let r = self.retime(now, &new_rates);
        self.isolated = isolated;
        self.new_rates = new_rates;
        r.map(|()| true)
    }

    /// The common case of capped flows (tree sends at their channel's rate):
    /// every link changed since the last flush is empty, and every new flow
    /// is capped and crosses only links with slack that keep it (within
    /// `LOAD_ESTIMATE`) with every new flow at its cap. No other flow can
    /// move, and each new flow is frozen by its own cap link, in the order
    /// the general filling meets them (cap, then link id). False, with
    /// nothing changed, when the case does not apply.
    fn flush_at_caps(&mut self, now: Time) -> Result<bool, NetError> {
        if self.dirty.iter().any(|&l| !self.links[l].flows.is_empty()) {
            return Ok(false);
        }
        let pepoch = self.next_pepoch();
        let mut passive = std::mem::take(&mut self.passive);
        passive.clear();
        let mut isolated = std::mem::take(&mut self.isolated);
        isolated.clear();
        let mut fits = true;
        for &s in &self.fresh {
            let f = &self.flows[s as usize];
            if !(f.active && f.fresh) {
                continue; // ended or re-used before the flush (as `flush` skips it)
            }
            let life = &self.life[s as usize];
            if !life.cap.is_finite() {
                fits = false;
                break;
            }
            isolated.push(entry(life.cap.to_bits(), life.own, SHARE, s));
            for &m in self.routes.get(f.route) {
                let lm = &mut self.links[m as usize];
                if m == life.own {
                    continue;
                }
                if lm.tight {
                    fits = false;
                    break;
                }
                if lm.pmark != pepoch {
                    lm.pmark = pepoch;
                    lm.delta = 0.0;
                    passive.push(m as LinkId);
                }
                lm.delta += life.cap;
            }
            if !fits {
                break;
            }
        }
        fits = fits
            && passive.iter().all(|&m| {
                let lm = &self.links[m];
                lm.load + lm.delta <= lm.capacity * (1.0 - LOAD_ESTIMATE)
            });
        self.passive = passive;
        if !fits {
            self.isolated = isolated;
            return Ok(false);
        }
        for i in 0..self.dirty.len() {
            let l = self.dirty[i];
            self.links[l].tight = false; // empty: it freezes nothing
        }
        self.dirty.clear();
        self.fresh.clear();
        if isolated.windows(2).any(|w| w[0] > w[1]) {
            isolated.sort(); // near-sorted; keys are distinct (one cap link a flow)
        }
        let mut new_rates = std::mem::take(&mut self.new_rates);
        new_rates.clear();
        for &e in &isolated {
            let (cap, l, s) = (f64::from_bits((e >> 64) as u64), link_of(e), e as u32);
            self.links[l as usize].tight = true;
            self.flows[s as usize].bottleneck = l;
            new_rates.push((s, cap));
        }
        let r = self.retime(now, &new_rates);
        self.isolated = isolated;
        self.new_rates = new_rates;
        r.map(|()| true)
    }

    /// Make `s` a recomputed flow (not held) and add its tight links.
    fn recompute_flow(&mut self, epoch: u32, s: FlowSlot, comp_links: &mut Vec<LinkId>) {
        let f = &mut self.flows[s as usize];
        if f.mark != epoch {
            f.mark = epoch;
            self.seen.push(s);
        }
        f.fixed = false;
        for j in 0..self.flows[s as usize].route.len() {
            let m = self.routes.at(self.flows[s as usize].route, j) as usize;
            if self.links[m].tight {
                self.join(epoch, m, comp_links);
            }
        }
    }

    fn join(&mut self, epoch: u32, l: LinkId, comp_links: &mut Vec<LinkId>) {
        if self.links[l].mark != epoch {
            self.links[l].mark = epoch;
            comp_links.push(l);
        }
    }

    /// The link a new flow enters the recomputed set by: a tight link of its
    /// route, else the one with the least headroom per flow (its likely
    /// bottleneck; the slack test adds any other it needs).
    fn seed_link(&self, s: FlowSlot) -> LinkId {
        let route = self.routes.get(self.flows[s as usize].route);
        if let Some(&l) = route.iter().find(|&&l| self.links[l as usize].tight) {
            return l as LinkId;
        }
        let mut best = route[0] as LinkId;
        let mut best_room = f64::INFINITY;
        for &l in route {
            let l = l as LinkId;
            let ls = &self.links[l];
            let room = (ls.capacity - ls.load) / ls.flows.len().max(1) as f64;
            if room < best_room {
                best = l;
                best_room = room;
            }
        }
        best
    }

    /// Fail a link at `now`: its flows stop and are returned (remaining bytes
    /// settled at `now`), for the driver to re-route or report.
    pub fn fail_link(&mut self, now: Time, link: LinkId) -> Result<Vec<Blocked>, NetError> {
        if link >= self.real_links {
            return Err(NetError::UnknownLink {
                link,
                links: self.real_links,
            });
        }
        if self.info[link].failed {
            return Ok(Vec::new());
        }
        let slots = self.flows_on(link).to_vec();
        let mut blocked = Vec::with_capacity(slots.len());
        for s in slots {
            self.settle(now, s);
            let f = &self.life[s as usize];
            let (tag, remaining, cap) = (f.tag, f.remaining.max(0.0), f.cap);
            let route = self.route_of(s);
            self.detach(s);
            blocked.push(Blocked {
                slot: s,
                tag,
                link,
                remaining_bytes: remaining,
                route,
                rate_cap: cap,
            });
        }
        self.info[link].failed = true;
        self.links[link].capacity = 0.0;
        Ok(blocked)
    }

    /// Restart a blocked flow on a new route with its remaining bytes.
    pub fn reroute(
        &mut self,
        now: Time,
        b: &Blocked,
        route: &[LinkId],
        latency: Time,
    ) -> Result<FlowSlot, NetError> {
        self.check_route(route)?;
        let bytes = self.life[b.slot as usize].bytes;
        let fill = self.store_and_forward_fill(route, b.remaining_bytes.ceil() as u64)?;
        self.release(b.slot);
        self.insert_flow(
            now,
            b.tag,
            route,
            bytes,
            b.remaining_bytes,
            latency.checked_add(fill)?,
            b.rate_cap,
        )
    }

    /// Give up a blocked flow (frees its slot).
    pub fn abandon(&mut self, b: &Blocked) {
        self.release(b.slot);
    }

    /// Remove an active flow from its links; the tight ones are marked dirty
    /// (a link with slack keeps it: no rate depends on it).
    fn detach(&mut self, slot: FlowSlot) {
        let f = &mut self.flows[slot as usize];
        f.active = false;
        let life = &mut self.life[slot as usize];
        life.version = life.version.wrapping_add(1);
        let rate = if f.rate.is_finite() { f.rate } else { 0.0 };
        for &l in self.routes.get(f.route) {
            let ls = &mut self.links[l as usize];
            // Keeps insertion order: it fixes iteration order.
            self.lists.remove(&mut ls.flows, slot);
            // An empty link's load is exactly zero (no drift carried over).
            ls.load = if ls.flows.is_empty() {
                0.0
            } else {
                ls.load - rate
            };
            if ls.tight {
                self.dirty.push(l as LinkId);
            }
        }
        self.active -= 1;
    }

    fn release(&mut self, slot: FlowSlot) {
        let life = &mut self.life[slot as usize];
        if life.in_use {
            life.in_use = false;
            // Keeps its span for the slot's next flow.
            self.flows[slot as usize].route.clear();
            self.free.push(slot);
        }
    }

    /// Integrate a flow's progress at its current rate up to `now`.
    fn settle(&mut self, now: Time, slot: FlowSlot) {
        let rate = self.flows[slot as usize].rate;
        let f = &mut self.life[slot as usize];
        if now > f.last {
            let dt = (now.0 - f.last.0) as f64 / PS_PER_SEC as f64;
            f.remaining -= rate * dt;
            if f.remaining <= DONE_FRACTION * f.bytes {
                f.remaining = 0.0;
            }
            f.last = now;
        }
    }

    fn next_epoch(&mut self) -> u32 {
        self.epoch = self.epoch.wrapping_add(1);
        if self.epoch == 0 {
            // Wrapped: clear every mark so old epochs cannot collide.
            for l in &mut self.links {
                l.mark = 0;
            }
            for f in &mut self.flows {
                f.mark = 0;
            }
            self.epoch = 1;
        }
        self.epoch
    }

    fn next_pepoch(&mut self) -> u32 {
        self.pepoch = self.pepoch.wrapping_add(1);
        if self.pepoch == 0 {
            for l in &mut self.links {
                l.pmark = 0;
            }
            self.pepoch = 1;
        }
        self.pepoch
    }

    /// Hold every flow first met on a link of the set from `links[*scanned..]`.
    fn collect(&mut self, epoch: u32, links: &[LinkId], scanned: &mut usize) {
        while *scanned < links.len() {
            let l = links[*scanned];
            *scanned += 1;
            for k in 0..self.links[l].flows.len() {
                let s = self.lists.at(self.links[l].flows, k);
                let f = &mut self.flows[s as usize];
                if f.mark != epoch {
                    f.mark = epoch;
                    f.fixed = true;
                    self.seen.push(s);
                }
            }
        }
    }

    /// Progressive filling over the links in the set (`mark == epoch`; the
    /// flows' other links are ignored): repeatedly saturate the link with the
    /// smallest fair share among its unfrozen flows, freezing those flows at
    /// that share. Shares only grow as flows freeze elsewhere, so a lazy
    /// min-heap is exact. Held flows freeze at their rates when the heap
    /// reaches them; one that would freeze otherwise goes to `violators`.
    /// Appends (flow, rate) of the recomputed flows to `out` in freezing order
    /// and marks the links that froze a flow tight.
    fn water_fill(
        &mut self,
        epoch: u32,
        comp_links: &[LinkId],
        out: &mut Vec<(FlowSlot, f64)>,
        violators: &mut Vec<FlowSlot>,
    ) {
        self.froze.clear();
        if let [l] = comp_links {
            if self.seen.iter().all(|&s| !self.flows[s as usize].fixed) {
                // One link, nothing held: every flow on it gets an equal share
                // (what the filling below gives, without the heap).
                let ls = &mut self.links[*l];
                ls.tight = !ls.flows.is_empty();
                let share = ls.capacity / ls.flows.len().max(1) as f64;
                for &s in self.lists.get(ls.flows) {
                    let f = &mut self.flows[s as usize];
                    f.frozen = true;
                    f.new_rate = share;
                    f.bottleneck = *l as u32;
                    out.push((s, share));
                }
                return;
            }
        }
        self.residual.clear();
        self.unfrozen.clear();
        self.heap.clear();
        let mut isolated = std::mem::take(&mut self.isolated);
        isolated.clear();
        let mut held = std::mem::take(&mut self.held);
        held.clear();
        for (li, &l) in comp_links.iter().enumerate() {
            let ls = &mut self.links[l];
            ls.local = li as u32;
            ls.tight = false;
            self.residual.push(ls.capacity);
            self.unfrozen.push(ls.flows.len() as u32);
        }
        for &l in comp_links {
            let ls = &self.links[l];
            if ls.flows.is_empty() {
                continue;
            }
            let share = ls.capacity / ls.flows.len() as f64;
            // A link whose flows are all recomputed and cross no other link of
            // the set keeps this share to the end: it needs no heap entry, only
            // its place in the heap's order (merged below).
            let alone = self.lists.get(ls.flows).iter().all(|&s| {
                let f = &self.flows[s as usize];
                !f.fixed
                    && self
                        .routes
                        .get(f.route)
                        .iter()
                        .all(|&m| m as LinkId == l || self.links[m as usize].mark != epoch)
            });
            let e = entry(share.to_bits(), l as u32, SHARE, 0);
            if alone {
                isolated.push(e);
            } else {
                self.heap.push(Reverse(e));
            }
        }
        // Held flows' events never move: a sorted list, merged like
        // `isolated`, instead of heap entries.
        for i in 0..self.seen.len() {
            let s = self.seen[i];
            let f = &mut self.flows[s as usize];
            f.frozen = false;
            if f.fixed {
                held.push(entry(f.rate.to_bits(), f.bottleneck, HELD, s));
            }
        }
        for list in [&mut isolated, &mut held] {
            if list.windows(2).any(|w| w[0] > w[1]) {
                list.sort(); // stable: finds the runs of the usual near-sorted order (keys are distinct)
            }
        }
        let (mut next_alone, mut next_held) = (0, 0);
        loop {
            // The smallest of the three sources.
            let top = self.heap.peek().map(|r| r.0);
            let alone = isolated.get(next_alone).copied();
            let hold = held.get(next_held).copied();
            // (Compared by hand: an array's `into_iter().flatten()` copied
            // its 112-byte state every round, a sixth of the filling's time.)
            let mut first = top;
            for x in [alone, hold].into_iter().flatten() {
                if first.map_or(true, |f| x < f) {
                    first = Some(x);
                }
            }
            let Some(e) = first else {
                break;
            };
            let (bits, key) = ((e >> 64) as u64, link_of(e));
            if Some(e) == alone {
                next_alone += 1;
                let l = key as usize;
                let share = f64::from_bits(bits);
                self.links[l].tight = true;
                for k in 0..self.links[l].flows.len() {
                    let s = self.lists.at(self.links[l].flows, k);
                    self.freeze(epoch, s, share, l as u32, l as u32, out);
                }
                continue;
            }
            if Some(e) == hold {
                // A held flow's bottleneck outside the set freezes it, with
                // every other held flow it froze at the same share (the run
                // of equal (share, link) keys).
                let from = next_held;
                while held.get(next_held).is_some_and(|&h| h >> 33 == e >> 33) {
                    next_held += 1;
                }
                let inside = key == NONE || self.links[key as usize].mark == epoch;
                for &h in &held[from..next_held] {
                    let g = h as u32;
                    if self.flows[g as usize].frozen {
                        continue;
                    }
                    if inside {
                        // Its bottleneck is in the set and no longer freezes it here.
                        violators.push(g);
                    }
                    self.freeze(epoch, g, f64::from_bits(bits), key, NONE, out);
                }
                continue;
            }
            self.heap.pop();
            let l = key as usize;
            let li = self.links[l].local as usize;
            let n = self.unfrozen[li];
            if n == 0 {
                continue;
            }
            let share = (self.residual[li] / n as f64).max(0.0);
            if share.to_bits() != bits {
                continue; // stale entry; a current one is in the heap
            }
            self.links[l].tight = true;
            for k in 0..self.links[l].flows.len() {
                let s = self.lists.at(self.links[l].flows, k);
                let f = &self.flows[s as usize];
                if f.frozen {
                    continue;
                }
                // A held flow moves if its share differs, and also if a tie
                // hands it from a bottleneck outside the set to this link:
                // that link would then fill its other flows from another
                // residual (equal shares summed in another order differ in
                // the last bits), so it must be recomputed too.
                let handed = f.bottleneck != l as u32
                    && self
                        .links
                        .get(f.bottleneck as usize)
                        .map_or(true, |b| b.mark != epoch);
                if f.fixed && (f.rate.to_bits() != bits || handed) {
                    violators.push(s);
                }
                self.freeze(epoch, s, share, l as u32, l as u32, out);
            }
        }
        self.isolated = isolated;
        self.held = held;
    }

    /// Freeze flow `s` at `share` (by link `by`), subtracting it from its links
    /// in the set other than `skip` (the link freezing it: done with it).
    fn freeze(
        &mut self,
        epoch: u32,
        s: FlowSlot,
        share: f64,
        by: u32,
        skip: u32,
        out: &mut Vec<(FlowSlot, f64)>,
    ) {
        let f = &mut self.flows[s as usize];
        f.frozen = true;
        if f.fixed {
            // A held flow's bottleneck is read by the next filling of this
            // flush (if any): it changes only once the flush is done.
            self.froze.push((s, by));
        } else {
            // A recomputed flow stays recomputed until the flush ends, and
            // only held flows' bottlenecks are read while filling.
            f.new_rate = share;
            f.bottleneck = by;
            out.push((s, share));
        }
        for j in 0..self.flows[s as usize].route.len() {
            let m = self.routes.at(self.flows[s as usize].route, j) as usize;
            if self.links[m].mark != epoch {
                continue; // outside the set: checked for slack after
            }
            let mi = self.links[m].local as usize;
            self.residual[mi] -= share;
            self.unfrozen[mi] -= 1;
            if m as u32 != skip && self.unfrozen[mi] > 0 {
                let sh = (self.residual[mi] / self.unfrozen[mi] as f64).max(0.0);
                self.heap
                    .push(Reverse(entry(sh.to_bits(), m as u32, SHARE, 0)));
            }
        }
    }

    /// The slack test: each link outside the set that the new `rates` load to
    /// within `SLACK` of its capacity joins the set. True when any joined.
    fn widen(
        &mut self,
        epoch: u32,
        rates: &[(FlowSlot, f64)],
        comp_links: &mut Vec<LinkId>,
        passive: &mut Vec<LinkId>,
    ) -> bool {
        let pepoch = self.next_pepoch();
        passive.clear();
        for &(s, rate) in rates {
            let f = &self.flows[s as usize];
            let change = rate - f.rate;
            for &m in self.routes.get(f.route) {
                let m = m as LinkId;
                let lm = &mut self.links[m];
                if lm.mark == epoch {
                    continue;
                }
                if lm.pmark != pepoch {
                    lm.pmark = pepoch;
                    lm.delta = 0.0;
                    passive.push(m);
                }
                lm.delta += change;
            }
        }
        let mut widened = false;
        for &m in passive.iter() {
            let lm = &self.links[m];
            if lm.load + lm.delta <= lm.capacity * (1.0 - LOAD_ESTIMATE) {
                continue;
            }
            let exact: f64 = self
                .lists
                .get(lm.flows)
                .iter()
                .map(|&o| {
                    let f = &self.flows[o as usize];
                    if f.mark == epoch && !f.fixed {
                        f.new_rate
                    } else {
                        f.rate
                    }
                })
                .sum();
            if exact > lm.capacity * (1.0 - SLACK) {
                self.links[m].mark = epoch;
                comp_links.push(m);
                widened = true;
            }
        }
        widened
    }

    /// Give flows their new rates; re-time those whose rate changed or that are fresh.
    fn retime(&mut self, now: Time, rates: &[(FlowSlot, f64)]) -> Result<(), NetError> {
        for &(s, rate) in rates {
            let old = self.flows[s as usize].rate;
            let changed = old.to_bits() != rate.to_bits();
            if changed || self.flows[s as usize].fresh {
                self.settle(now, s);
                for j in 0..self.flows[s as usize].route.len() {
                    let m = self.routes.at(self.flows[s as usize].route, j) as usize;
                    self.links[m].load += rate - old;
                }
                let f = &mut self.flows[s as usize];
                f.fresh = false;
                f.rate = rate;
                let f = &mut self.life[s as usize];
                f.version = f.version.wrapping_add(1);
                let d = if f.remaining <= 0.0 {
                    Time::ZERO
                } else {
                    transfer_ps(f.remaining, rate)?
                };
                self.timers.push((
                    now.checked_add(d)?,
                    NetTimer {
                        slot: s,
                        version: f.version,
                    },
                ));
                self.stats.timers += 1;
            }
        }
        Ok(())
    }
}
