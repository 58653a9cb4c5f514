//! `NetSim`: the simulation loop over the network model. It owns the engine
//! (queue and clock), the network, the event log and the perturbations, and
//! returns one `Occurrence` per call to `step`: a caller event coming due, a
//! flow delivered, or a flow that cannot be delivered. The caller reacts by
//! scheduling more events and starting more flows; everything internal (rate
//! changes, faults, re-routing) happens inside `step`.
//!
//! Jitter, when on, scales each hop's latency (from that link's stream,
//! `"link/<id>"`) and each compute duration (from `"device/<id>"`); link
//! bandwidth itself is not jittered. Stragglers scale compute durations.

use std::collections::VecDeque;

use crate::engine::{
    component_rng, ComponentRng, Engine, EventLog, FaultKind, Jitter, LinkFault, Stragglers, Time,
};

use super::link::{Link, LinkId};
use super::network::{Blocked, NetTimer, Network};
use super::NetError;

enum Ev<U> {
    User(U),
    Timer(NetTimer),
    Deliver(u64),
    Fault(Box<LinkFault>),
}

/// A flow that could not be delivered: its tag, the failed link that stopped
/// it, when, and how many bytes were still unsent.
#[derive(Debug, Clone, PartialEq)]
pub struct Undeliverable {
    pub tag: u64,
    pub link: LinkId,
    pub at: Time,
    pub remaining_bytes: f64,
}

/// What the caller sees, one at a time, in time order.
#[derive(Debug, Clone, PartialEq)]
pub enum Occurrence<U> {
    /// A caller event scheduled with `schedule_at`/`schedule_after` is due.
    User { at: Time, event: U },
    /// The flow started with this tag has arrived.
    Delivered { at: Time, tag: u64 },
    /// The flow started with this tag has left: its last byte is on the
    /// wire, its links' latency still to come. Reported only after
    /// [`NetSim::report_departures`] (a caller that never asks pays nothing).
    Departed { at: Time, tag: u64 },
    /// The flow could not complete (a failed link, no re-route).
    Undeliverable(Undeliverable),
}

/// What a re-route callback is told about a flow stopped by a failed link.
#[derive(Debug, Clone)]
pub struct RerouteRequest<'a> {
    pub tag: u64,
    pub at: Time,
    pub route: &'a [LinkId],
    pub failed_link: LinkId,
    /// Every link failed so far, ascending.
    pub failed_links: &'a [LinkId],
}

/// Returns a new route for a stopped flow, or `None` to report it undeliverable.
pub type RerouteFn = Box<dyn FnMut(&RerouteRequest<'_>) -> Option<Vec<LinkId>>>;

/// The simulation loop: engine + network + log + perturbations.
pub struct NetSim<U> {
    engine: Engine<Ev<U>>,
    net: Network,
    log: EventLog,
    seed: u64,
    jitter: Option<Jitter>,
    stragglers: Stragglers,
    link_rngs: Vec<Option<Box<ComponentRng>>>,
    device_rngs: std::collections::BTreeMap<u64, ComponentRng>,
    reroute: Option<RerouteFn>,
    failed: Vec<LinkId>,
    pending: VecDeque<Occurrence<U>>,
    departures: bool,
}

impl<U> NetSim<U> {
    /// A simulation over `links` with scenario seed `seed`; the log is off.
    pub fn new(links: &[Link], seed: u64) -> Result<Self, NetError> {
        Ok(NetSim {
            engine: Engine::new(),
            net: Network::new(links)?,
            log: EventLog::disabled(),
            seed,
            jitter: None,
            stragglers: Stragglers::new(),
            link_rngs: (0..links.len()).map(|_| None).collect(),
            device_rngs: Default::default(),
            reroute: None,
            failed: Vec::new(),
            pending: VecDeque::new(),
            departures: false,
        })
    }

    /// Record every flow start, delivery, fault and caller event in the log.
    pub fn enable_log(&mut self) {
        self.log = EventLog::enabled();
    }

    pub fn set_jitter(&mut self, jitter: Option<Jitter>) {
        self.jitter = jitter;
    }

    pub fn set_stragglers(&mut self, s: Stragglers) {
        self.stragglers = s;
    }

    /// Report each flow's transmission end as [`Occurrence::Departed`]
    /// (before its `Delivered`, which comes its route's latency later).
    pub fn report_departures(&mut self, on: bool) {
        self.departures = on;
    }

    /// Recompute every flow's rate at every change (see `Network::set_exhaustive`).
    pub fn set_exhaustive(&mut self, on: bool) {
        self.net.set_exhaustive(on);
    }

    pub fn set_packet_bytes(&mut self, packet: Option<u64>) {
        self.net.set_packet_bytes(packet);
    }

    /// Install the callback that re-routes flows stopped by a failed link.
    pub fn set_reroute(&mut self, f: RerouteFn) {
        self.reroute = Some(f);
    }

    /// Schedule a link fault.
    pub fn add_fault(&mut self, f: LinkFault) -> Result<(), NetError> {
        f.validate()?;
        if f.link >= self.net.link_count() {
            return Err(NetError::UnknownLink {
                link: f.link,
                links: self.net.link_count(),
            });
        }
        self.engine.schedule_at(f.at, Ev::Fault(Box::new(f)))?;
        Ok(())
    }

    pub fn now(&self) -> Time {
        self.engine.now()
    }

    pub fn seed(&self) -> u64 {
        self.seed
    }

    pub fn network(&self) -> &Network {
        &self.net
    }

    pub fn log(&self) -> &EventLog {
        &self.log
    }

    pub fn log_mut(&mut self) -> &mut EventLog {
        &mut self.log
    }

    /// Queue events processed so far.
    pub fn events_processed(&self) -> u64 {
        self.engine.processed()
    }

    pub fn schedule_at(&mut self, at: Time, event: U) -> Result<(), NetError> {
        Ok(self.engine.schedule_at(at, Ev::User(event))?)
    }

    pub fn schedule_after(&mut self, delay: Time, event: U) -> Result<(), NetError> {
        Ok(self.engine.schedule_after(delay, Ev::User(event))?)
    }

    /// A compute duration on `device`, slowed if it straggles and jittered from
    /// the device's own stream (`"device/<id>"`) when jitter is on.
    pub fn compute_time(&mut self, device: u64, base: Time) -> Result<Time, NetError> {
        let slowed = self.stragglers.apply(device, base)?;
        match self.jitter {
            Some(j) => {
                let seed = self.seed;
                let rng = self
                    .device_rngs
                    .entry(device)
                    .or_insert_with(|| component_rng(seed, &format!("device/{device}")));
                Ok(j.apply(slowed, rng)?)
            }
            None => Ok(slowed),
        }
    }

    /// Start a flow of `bytes` over `route` now; `tag` comes back in its
    /// `Delivered` (or `Undeliverable`). A route through a failed link goes to
    /// the re-route callback first.
    pub fn start_flow(&mut self, tag: u64, route: &[LinkId], bytes: u64) -> Result<(), NetError> {
        self.start_flow_capped(tag, route, bytes, f64::INFINITY)
    }

    /// [`Self::start_flow`] for a flow that never runs faster than `cap`
    /// bytes/s (`f64::INFINITY`: no cap; [`Network::start_flow_capped`]).
    pub fn start_flow_capped(
        &mut self,
        tag: u64,
        route: &[LinkId],
        bytes: u64,
        cap: f64,
    ) -> Result<(), NetError> {
        if cap.is_nan() || cap <= 0.0 {
            return Err(NetError::BadRateCap(cap));
        }
        let now = self.engine.now();
        match self.net.check_route(route) {
            Err(NetError::FailedLink { link }) => {
                let b = Blocked {
                    slot: u32::MAX,
                    tag,
                    link,
                    remaining_bytes: bytes as f64,
                    route: route.to_vec(),
                    rate_cap: cap,
                };
                self.handle_blocked(now, b, bytes as f64)
            }
            Err(e) => Err(e),
            Ok(()) => {
                let latency = self.path_latency(route)?;
                self.log.record(now, "flow_start", tag, || {
                    if cap.is_finite() {
                        format!("bytes={bytes} route={} cap={cap}", join(route))
                    } else {
                        format!("bytes={bytes} route={}", join(route))
                    }
                });
                self.net
                    .start_flow_capped(now, tag, route, bytes, latency, cap)?;
                self.drain_timers()
            }
        }
    }

    /// The next occurrence, or `None` when nothing is left to happen.
    pub fn step(&mut self) -> Result<Option<Occurrence<U>>, NetError> {
        loop {
            if let Some(o) = self.pending.pop_front() {
                return Ok(Some(o));
            }
            // Rates are recomputed once per instant, before the clock moves on.
            if self.net.needs_flush() {
                let now = self.engine.now();
                if self.engine.peek_time().map_or(true, |t| t > now) {
                    self.net.flush(now)?;
                    self.drain_timers()?;
                }
            }
            let Some((now, ev)) = self.engine.next() else {
                return Ok(None);
            };
            match ev {
                Ev::User(event) => {
                    return Ok(Some(Occurrence::User { at: now, event }));
                }
                Ev::Timer(t) => {
                    if let Some(done) = self.net.on_timer(now, t)? {
                        self.engine
                            .schedule_at(done.deliver_at, Ev::Deliver(done.tag))?;
                        if self.departures {
                            self.drain_timers()?;
                            return Ok(Some(Occurrence::Departed {
                                at: now,
                                tag: done.tag,
                            }));
                        }
                    }
                    self.drain_timers()?;
                }
                Ev::Deliver(tag) => {
                    self.log.record(now, "delivered", tag, String::new);
                    return Ok(Some(Occurrence::Delivered { at: now, tag }));
                }
                Ev::Fault(f) => self.apply_fault(now, *f)?,
            }
        }
    }

    fn apply_fault(&mut self, now: Time, f: LinkFault) -> Result<(), NetError> {
        match f.kind {
            FaultKind::Degrade(fraction) => {
                self.log.record(now, "link_degrade", f.link as u64, || {
                    format!("fraction={fraction}")
                });
                self.net.degrade_link(f.link, fraction)?;
            }
            FaultKind::Fail => {
                self.log
                    .record(now, "link_fail", f.link as u64, String::new);
                let blocked = self.net.fail_link(now, f.link)?;
                if let Err(pos) = self.failed.binary_search(&f.link) {
                    self.failed.insert(pos, f.link);
                }
                for b in blocked {
                    let remaining = b.remaining_bytes;
                    self.handle_blocked(now, b, remaining)?;
                }
            }
        }
        self.drain_timers()
    }

    /// Re-route a stopped flow through the callback, or report it.
    fn handle_blocked(&mut self, now: Time, b: Blocked, remaining: f64) -> Result<(), NetError> {
        let new_route = match self.reroute.as_mut() {
            Some(cb) => cb(&RerouteRequest {
                tag: b.tag,
                at: now,
                route: &b.route,
                failed_link: b.link,
                failed_links: &self.failed,
            }),
            None => None,
        };
        let usable = new_route.filter(|r| self.net.check_route(r).is_ok());
        match usable {
            Some(route) => {
                let latency = self.path_latency(&route)?;
                self.log.record(now, "rerouted", b.tag, || {
                    format!("remaining={remaining} route={}", join(&route))
                });
                if b.slot == u32::MAX {
                    self.net.start_flow_capped(
                        now,
                        b.tag,
                        &route,
                        remaining as u64,
                        latency,
                        b.rate_cap,
                    )?;
                } else {
                    self.net.reroute(now, &b, &route, latency)?;
                }
                self.drain_timers()
            }
            None => {
                if b.slot != u32::MAX {
                    self.net.abandon(&b);
                }
                self.log.record(now, "undeliverable", b.tag, || {
                    format!("link={} remaining={remaining}", b.link)
                });
                self.pending
                    .push_back(Occurrence::Undeliverable(Undeliverable {
                        tag: b.tag,
                        link: b.link,
                        at: now,
                        remaining_bytes: remaining,
                    }));
                Ok(())
            }
        }
    }

    /// Sum of the route's latencies, each jittered from its link's stream.
    fn path_latency(&mut self, route: &[LinkId]) -> Result<Time, NetError> {
        let Some(j) = self.jitter else {
            return Ok(self.net.route_latency(route)?);
        };
        let mut total = Time::ZERO;
        for &l in route {
            let seed = self.seed;
            let rng = self.link_rngs[l]
                .get_or_insert_with(|| Box::new(component_rng(seed, &format!("link/{l}"))));
            total = total.checked_add(j.apply(self.net.latency(l), rng)?)?;
        }
        Ok(total)
    }

    fn drain_timers(&mut self) -> Result<(), NetError> {
        let Self { net, engine, .. } = self;
        for (t, timer) in net.drain_timers() {
            engine.schedule_at(t, Ev::Timer(timer))?;
        }
        Ok(())
    }
}

fn join(route: &[LinkId]) -> String {
    let mut s = String::new();
    for (i, l) in route.iter().enumerate() {
        if i > 0 {
            s.push(';');
        }
        s.push_str(&l.to_string());
    }
    s
}
