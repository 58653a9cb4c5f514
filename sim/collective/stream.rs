//! Streamed timing: a plan's steps are turned into tasks a few steps ahead
//! of the simulated network instead of all at once, and a task is dropped
//! once it has run, so memory follows the steps in flight, not `ranks x
//! chunks` (4.9 GB for a 32 MiB tree allreduce over 65,536 ranks).
//!
//! Exactness: the tasks get the ids, dependencies, routes and start order of
//! [`super::timing::simulate`]'s `Schedule` (ids in generation order; a
//! completed task starts its dependents in ascending id order, the ready
//! tasks start in id order at time zero). That holds as long as every task
//! exists before its last dependency completes: before a completion is
//! handled, the steps up to `lookahead` past the completed task's step are
//! generated. A task generated later with every dependency already complete
//! (it should have started in the past) is detected, and the run reports
//! `None`; the caller then runs again with every step generated up front,
//! which is the whole schedule.
//!
//! Departure dependencies (`net::departure`: a sender's next send in a
//! channel waits for its last one to have left, not arrived) are kept as
//! the whole schedule keeps them: a transfer's dependents on its departure
//! start, in ascending id order, when the network reports its transmission
//! end, the others at its delivery.

use std::collections::VecDeque;

use crate::engine::Time;
use crate::net::{split_dependency, NetSim, Occurrence, TaskId};
use crate::topology::Topology;

use super::calibration::{us, Calibration};
use super::kinds::{Algorithm, Protocol};
use super::plan::Move;
use super::timing::{
    protocol_links, CollectiveTiming, Deps, Gating, Quotient, Routes, StepCtx, TaskSink,
};
use super::CollectiveError;

/// Marks a transfer (a computation's device, a rank, is never this).
const TRANSFER: u32 = u32::MAX;
/// Marks a transfer at the schedule's one rate cap (`StreamSchedule::cap`).
const CAPPED: u32 = u32::MAX - 1;
/// The end of an edge list.
const NONE: u32 = u32::MAX;
/// Dependents kept in the entry itself (the rest in the edge arena).
const INLINE: usize = 5;
/// Marks an inline dependent (an id offset) that waits for the departure.
const LEFT: u32 = 1 << 31;
/// Marks an edge's dependent that waits for the departure.
const LEFT_TASK: TaskId = 1 << (TaskId::BITS - 1);

/// A task not yet dropped, in one cache line: the run reaches millions of
/// them in no particular order.
#[repr(align(64))]
struct Entry {
    /// A transfer's bytes or a computation's duration.
    value: u64,
    /// The route's first link in `StreamSchedule::links` (absolute index).
    route_at: u64,
    device: u32,
    route_len: u16,
    inline_len: u8,
    done: bool,
    /// A transfer's transmission has ended (its departure dependents started).
    departed: bool,
    waiting: u32,
    step: u32,
    /// The first dependents, as id offsets from this task's (`LEFT` set:
    /// on its departure).
    inline: [u32; INLINE],
    /// First and last of the further dependents' edges (`NONE`: none).
    head: u32,
    tail: u32,
}

/// A dependent in an entry's list of dependents.
#[derive(Clone, Copy)]
struct Edge {
    task: TaskId,
    next: u32,
}

/// The tasks not yet run, by id from `base`; their routes in one queue of
/// links, their dependents in one arena of edges (freed edges are reused).
struct StreamSchedule {
    base: TaskId,
    entries: VecDeque<Entry>,
    /// Network link ids (below 2^31: `Network::new` refuses more links).
    links: VecDeque<u32>,
    links_base: u64,
    edges: Vec<Edge>,
    free: u32,
    started: bool,
    /// A task came too late (every dependency already complete).
    late: bool,
    /// The step being generated.
    step: u32,
    ready: Vec<TaskId>,
    scratch: Vec<TaskId>,
    route: Vec<usize>,
    /// The rate cap of its capped transfers (a run has one: its tree
    /// channels' rate), set by the first.
    cap: Option<f64>,
}

impl StreamSchedule {
    fn new() -> StreamSchedule {
        StreamSchedule {
            base: 0,
            entries: VecDeque::new(),
            links: VecDeque::new(),
            links_base: 0,
            edges: Vec::new(),
            free: NONE,
            started: false,
            late: false,
            step: 0,
            ready: Vec::new(),
            scratch: Vec::new(),
            route: Vec::new(),
            cap: None,
        }
    }

    fn entry(&mut self, id: TaskId) -> &mut Entry {
        &mut self.entries[id - self.base]
    }

    fn edge(&mut self, task: TaskId) -> Result<u32, CollectiveError> {
        let e = Edge { task, next: NONE };
        if self.free != NONE {
            let i = self.free;
            self.free = self.edges[i as usize].next;
            self.edges[i as usize] = e;
            return Ok(i);
        }
        let i = u32::try_from(self.edges.len())
            .ok()
            .filter(|&i| i != NONE)
            .ok_or_else(|| CollectiveError::Sizes("more than 2^32 pending dependencies".into()))?;
        self.edges.push(e);
        Ok(i)
    }

    fn add(
        &mut self,
        value: u64,
        device: u32,
        route: &[usize],
        deps: &[TaskId],
    ) -> Result<TaskId, CollectiveError> {
        let id = self.base + self.entries.len();
        let mut d = std::mem::take(&mut self.scratch);
        d.clear();
        d.extend_from_slice(deps);
        d.sort_unstable();
        d.dedup();
        let mut waiting = 0u32;
        for &dep in &d {
            let (x, left) = split_dependency(dep);
            if x < self.base {
                continue;
            }
            let e = &self.entries[x - self.base];
            // A computation leaves when it completes.
            let left = left && (e.device == TRANSFER || e.device == CAPPED);
            if e.done || (left && e.departed) {
                continue;
            }
            waiting += 1;
            let e = &mut self.entries[x - self.base];
            let n = e.inline_len as usize;
            if n < INLINE {
                let off = u32::try_from(id - x)
                    .ok()
                    .filter(|&o| o < LEFT)
                    .ok_or_else(|| CollectiveError::Sizes("a dependency 2^31 tasks back".into()))?;
                e.inline[n] = if left { off | LEFT } else { off };
                e.inline_len += 1;
                continue;
            }
            let k = self.edge(if left { id | LEFT_TASK } else { id })?;
            let e = &mut self.entries[x - self.base];
            let last = std::mem::replace(&mut e.tail, k);
            if last == NONE {
                e.head = k;
            } else {
                self.edges[last as usize].next = k;
            }
        }
        self.scratch = d;
        if waiting == 0 {
            if self.started {
                self.late = true;
            } else {
                self.ready.push(id);
            }
        }
        let route_at = self.links_base + self.links.len() as u64;
        for &l in route {
            let l = u32::try_from(l)
                .map_err(|_| CollectiveError::Sizes(format!("link {l} past 2^32 - 1")))?;
            self.links.push_back(l);
        }
        let route_len = u16::try_from(route.len())
            .map_err(|_| CollectiveError::Sizes("a route of more than 65,535 links".into()))?;
        self.entries.push_back(Entry {
            value,
            route_at,
            device,
            route_len,
            inline_len: 0,
            done: false,
            departed: false,
            waiting,
            step: self.step,
            inline: [0; INLINE],
            head: NONE,
            tail: NONE,
        });
        Ok(id)
    }

    /// Drop the run tasks at the front, and their routes.
    fn trim(&mut self) {
        while self.entries.front().is_some_and(|e| e.done) {
            self.entries.pop_front();
            self.base += 1;
        }
        let keep = self
            .entries
            .front()
            .map_or(self.links_base + self.links.len() as u64, |e| e.route_at);
        let drop = (keep - self.links_base) as usize;
        self.links.drain(..drop);
        self.links_base = keep;
    }

    fn start(&mut self, sim: &mut NetSim<TaskId>, id: TaskId) -> Result<(), CollectiveError> {
        let e = &self.entries[id - self.base];
        let (device, value) = (e.device, e.value);
        if device == TRANSFER || device == CAPPED {
            let at = (e.route_at - self.links_base) as usize;
            let len = e.route_len as usize;
            let mut route = std::mem::take(&mut self.route);
            route.clear();
            route.extend(self.links.range(at..at + len).map(|&l| l as usize));
            let cap = match device {
                CAPPED => self.cap.unwrap_or(f64::INFINITY),
                _ => f64::INFINITY,
            };
            sim.start_flow_capped(id as u64, &route, value, cap)?;
            self.route = route;
        } else {
            let d = sim.compute_time(u64::from(device), Time(value))?;
            sim.schedule_after(d, id)?;
        }
        Ok(())
    }

    /// `id` (a transfer) has left: start the dependents on its departure it
    /// was the last dependency of, in ascending id order.
    fn depart(&mut self, sim: &mut NetSim<TaskId>, id: TaskId) -> Result<(), CollectiveError> {
        let e = self.entry(id);
        if e.departed {
            return Ok(());
        }
        e.departed = true;
        let (inline, n) = (e.inline, e.inline_len as usize);
        let mut k = e.head;
        for &off in &inline[..n] {
            if off & LEFT != 0 {
                self.release(sim, id + (off & !LEFT) as usize)?;
            }
        }
        while k != NONE {
            let Edge { task, next } = self.edges[k as usize];
            if task & LEFT_TASK != 0 {
                self.release(sim, task & !LEFT_TASK)?;
            }
            k = next;
        }
        Ok(())
    }

    /// Mark `id` complete and start the dependents it was the last one of,
    /// in ascending id order (those on its departure first, if it was not
    /// reported: a computation's departure is its completion).
    fn complete(&mut self, sim: &mut NetSim<TaskId>, id: TaskId) -> Result<(), CollectiveError> {
        self.depart(sim, id)?;
        let e = self.entry(id);
        e.done = true;
        let (inline, n) = (e.inline, e.inline_len as usize);
        let mut k = std::mem::replace(&mut e.head, NONE);
        e.tail = NONE;
        for &off in &inline[..n] {
            if off & LEFT == 0 {
                self.release(sim, id + off as usize)?;
            }
        }
        while k != NONE {
            let Edge { task, next } = self.edges[k as usize];
            self.edges[k as usize].next = self.free;
            self.free = k;
            k = next;
            if task & LEFT_TASK == 0 {
                self.release(sim, task)?;
            }
        }
        Ok(())
    }

    /// One dependency of `task` has completed: start it if it was the last.
    fn release(&mut self, sim: &mut NetSim<TaskId>, task: TaskId) -> Result<(), CollectiveError> {
        let e = self.entry(task);
        e.waiting -= 1;
        if e.waiting == 0 {
            self.start(sim, task)?;
        }
        Ok(())
    }
}

impl TaskSink for StreamSchedule {
    fn transfer_capped(
        &mut self,
        route: &[usize],
        bytes: u64,
        cap: f64,
        deps: &[TaskId],
    ) -> Result<TaskId, CollectiveError> {
        if cap == f64::INFINITY {
            return self.add(bytes, TRANSFER, route, deps);
        }
        // One cap a run: an entry has room for a mark, not a rate.
        match self.cap {
            None => self.cap = Some(cap),
            Some(c) if c.to_bits() == cap.to_bits() => {}
            Some(c) => {
                return Err(CollectiveError::Buffers(format!(
                    "a streamed run with two rate caps ({c} and {cap} bytes/s)"
                )))
            }
        }
        self.add(bytes, CAPPED, route, deps)
    }

    fn compute(
        &mut self,
        device: u64,
        duration: Time,
        deps: &[TaskId],
    ) -> Result<TaskId, CollectiveError> {
        let device = u32::try_from(device)
            .ok()
            .filter(|&d| d < CAPPED)
            .ok_or_else(|| CollectiveError::Sizes(format!("rank {device} past 2^32 - 3")))?;
        self.add(duration.0, device, &[], deps)
    }
}

/// Steps generated on demand.
pub(crate) trait StepSource {
    /// Steps to ask for (some may be empty).
    fn num_steps(&self) -> usize;
    /// Step `k`'s moves, appended to `out`.
    fn step_into(&self, k: usize, out: &mut Vec<Move>);
    /// Every boundary of a range the steps' moves read or write, appended
    /// to `out` (any order, repeats allowed).
    fn bounds_into(&self, out: &mut Vec<u64>);
}

impl StepSource for super::tree_stream::TreeStream {
    fn num_steps(&self) -> usize {
        self.len()
    }

    fn step_into(&self, k: usize, out: &mut Vec<Move>) {
        self.step(k, out)
    }

    fn bounds_into(&self, out: &mut Vec<u64>) {
        self.bounds(out)
    }
}

/// Steps generated ahead of the completions of tasks after the
/// completion of a task of step `s`, the steps up to `s + lookahead` exist.
pub(crate) const LOOKAHEAD: usize = 4;

/// Time `source`'s steps over the group of `routes` as
/// [`super::timing::simulate_inner`] times its plan (no faults), generating
/// steps `lookahead` ahead; `None` when a task came too late (run again with
/// a larger `lookahead`: `usize::MAX` generates every step up front and never
/// returns `None`); `steps`: filled with each step's completion, as
/// [`super::timing::simulate_inner`] fills it.
#[allow(clippy::too_many_arguments)]
pub(crate) fn simulate_stream(
    topo: &Topology,
    routes: &mut Routes,
    n: usize,
    source: &dyn StepSource,
    elem_bytes: u64,
    algo: Algorithm,
    proto: Protocol,
    cal: &Calibration,
    quotient: Option<&Quotient>,
    lookahead: usize,
    mut steps: Option<&mut Vec<Time>>,
) -> Result<Option<CollectiveTiming>, CollectiveError> {
    let params = cal.params(algo, proto);
    let mut deps = Deps::new(n, Gating::of(algo, cal));
    let mut ctx = StepCtx {
        routes,
        deps: &mut deps,
        params,
        quotient,
        elem_bytes,
        channel_rate: cal.tree_channel_rate(algo, proto),
        slices: super::timing::ring_slices(cal, algo, proto, true),
        scratch: Default::default(),
    };
    let mut sched = StreamSchedule::new();
    let total = source.num_steps();
    if let Some(out) = steps.as_deref_mut() {
        out.clear();
        out.resize(total, Time::ZERO);
    }
    let mut next = 0usize;
    let mut flows = 0usize;
    let mut buf: Vec<Move> = Vec::new();
    let mut generate = |upto: usize,
                        ctx: &mut StepCtx,
                        sched: &mut StreamSchedule|
     -> Result<(), CollectiveError> {
        while next < upto.min(total) {
            buf.clear();
            source.step_into(next, &mut buf);
            sched.step = u32::try_from(next)
                .map_err(|_| CollectiveError::Sizes("more than 2^32 steps".into()))?;
            flows += ctx.add_step(sched, &buf)?;
            next += 1;
        }
        Ok(())
    };
    generate(lookahead.saturating_add(1), &mut ctx, &mut sched)?;
    sched.started = true;
    let mut links = protocol_links(topo, cal, algo, proto);
    if let Some(q) = quotient {
        q.scale_links(&mut links);
    }
    let mut sim: NetSim<TaskId> = NetSim::new(&links, 0)?;
    // Pipelined algorithms may gate a sender's next send on its last one's
    // departure (`timing::Deps::gate`).
    sim.report_departures(Gating::of(algo, cal).departed);
    for id in std::mem::take(&mut sched.ready) {
        sched.start(&mut sim, id)?;
    }
    let mut makespan = Time::ZERO;
    while let Some(o) = sim.step()? {
        // A departure starts only its departure dependents; the task
        // completes when it is delivered.
        let (id, at, departed) = match o {
            Occurrence::User { at, event } => {
                sim.log_mut()
                    .record(at, "compute_done", event as u64, String::new);
                (event, at, false)
            }
            Occurrence::Delivered { at, tag } => (tag as usize, at, false),
            Occurrence::Departed { at, tag } => (tag as usize, at, true),
            Occurrence::Undeliverable(u) => {
                return Err(CollectiveError::Buffers(format!(
                    "a transfer on link {} was undeliverable",
                    u.link
                )))
            }
        };
        let s = sched.entry(id).step as usize;
        generate(
            s.saturating_add(lookahead).saturating_add(1),
            &mut ctx,
            &mut sched,
        )?;
        if sched.late {
            return Ok(None);
        }
        if departed {
            sched.depart(&mut sim, id)?;
            continue;
        }
        makespan = makespan.max(at);
        if let Some(out) = steps.as_deref_mut() {
            out[s] = out[s].max(at);
        }
        sched.complete(&mut sim, id)?;
        sched.trim();
    }
    if next < total {
        // Steps left after the last completion: they came too late.
        return Ok(None);
    }
    if !sched.entries.is_empty() {
        return Err(CollectiveError::Buffers(format!(
            "{} tasks not run",
            sched.entries.len()
        )));
    }
    let time = makespan.checked_add(us(params.base_us))?;
    let flows = flows * quotient.map_or(1, |q| q.copies);
    Ok(Some(CollectiveTiming { time, flows }))
}

/// [`simulate_stream`], again with every step up front when a task came
/// too late the first time (`steps` as there).
#[allow(clippy::too_many_arguments)]
pub(crate) fn time_stream(
    topo: &Topology,
    routes: &mut Routes,
    n: usize,
    source: &dyn StepSource,
    elem_bytes: u64,
    algo: Algorithm,
    proto: Protocol,
    cal: &Calibration,
    quotient: Option<&Quotient>,
    mut steps: Option<&mut Vec<Time>>,
) -> Result<CollectiveTiming, CollectiveError> {
    for lookahead in [LOOKAHEAD, usize::MAX] {
        if let Some(t) = simulate_stream(
            topo,
            routes,
            n,
            source,
            elem_bytes,
            algo,
            proto,
            cal,
            quotient,
            lookahead,
            steps.as_deref_mut(),
        )? {
            return Ok(t);
        }
    }
    Err(CollectiveError::Buffers(
        "a streamed schedule came too late with every step up front".into(),
    ))
}

/// A tree allreduce of `total` elements on `group` with `proto`, streamed
/// with `lookahead` steps (`None`: a task came too late); for tests of the
/// streaming against the whole plan.
#[allow(clippy::too_many_arguments)]
pub fn time_tree_streamed(
    topo: &Topology,
    group: &super::Group,
    total: u64,
    elem_bytes: u64,
    cal: &Calibration,
    proto: Protocol,
    lookahead: usize,
) -> Result<Option<CollectiveTiming>, CollectiveError> {
    let opts = super::tuner::plan_options(topo, group, cal, total * elem_bytes);
    let stream = super::tree_stream::TreeStream::allreduce(group.len(), total, &opts);
    let mut routes = Routes::new(topo, group);
    simulate_stream(
        topo,
        &mut routes,
        group.len(),
        &stream,
        elem_bytes,
        Algorithm::Tree,
        proto,
        cal,
        None,
        lookahead,
        None,
    )
}
