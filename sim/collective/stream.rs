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

use std::collections::VecDeque;

use crate::engine::Time;
use crate::net::{NetSim, Occurrence, TaskId};
use crate::topology::Topology;

use super::calibration::{us, Calibration};
use super::kinds::{Algorithm, Protocol};
use super::plan::Move;
use super::timing::{protocol_links, CollectiveTiming, Deps, Quotient, Routes, StepCtx, TaskSink};
use super::CollectiveError;

/// Marks a transfer (a computation's device is never this).
const TRANSFER: u64 = u64::MAX;

struct Entry {
    /// A transfer's bytes or a computation's duration.
    value: u64,
    device: u64,
    route: Vec<usize>,
    waiting: u32,
    done: bool,
    step: u32,
    dependents: Vec<TaskId>,
}

/// The tasks not yet run, by id from `base`.
struct StreamSchedule {
    base: TaskId,
    entries: VecDeque<Entry>,
    started: bool,
    /// A task came too late (every dependency already complete).
    late: bool,
    /// The step being generated.
    step: u32,
    ready: Vec<TaskId>,
    /// Emptied dependent lists, reused.
    pool: Vec<Vec<TaskId>>,
    scratch: Vec<TaskId>,
}

impl StreamSchedule {
    fn new() -> StreamSchedule {
        StreamSchedule {
            base: 0,
            entries: VecDeque::new(),
            started: false,
            late: false,
            step: 0,
            ready: Vec::new(),
            pool: Vec::new(),
            scratch: Vec::new(),
        }
    }

    fn entry(&mut self, id: TaskId) -> &mut Entry {
        &mut self.entries[id - self.base]
    }

    fn add(&mut self, value: u64, device: u64, route: Vec<usize>, deps: &[TaskId]) -> TaskId {
        let id = self.base + self.entries.len();
        let mut d = std::mem::take(&mut self.scratch);
        d.clear();
        d.extend_from_slice(deps);
        d.sort_unstable();
        d.dedup();
        let mut waiting = 0u32;
        for &x in &d {
            if x >= self.base {
                let e = &mut self.entries[x - self.base];
                if !e.done {
                    e.dependents.push(id);
                    waiting += 1;
                }
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
        let dependents = self.pool.pop().unwrap_or_default();
        self.entries.push_back(Entry {
            value,
            device,
            route,
            waiting,
            done: false,
            step: self.step,
            dependents,
        });
        id
    }

    /// Drop the run tasks at the front.
    fn trim(&mut self) {
        while self.entries.front().is_some_and(|e| e.done) {
            if let Some(e) = self.entries.pop_front() {
                self.pool.push(e.dependents);
            }
            self.base += 1;
        }
    }

    fn start(&mut self, sim: &mut NetSim<TaskId>, id: TaskId) -> Result<(), CollectiveError> {
        let e = self.entry(id);
        if e.device == TRANSFER {
            let route = std::mem::take(&mut e.route);
            let bytes = e.value;
            sim.start_flow(id as u64, &route, bytes)?;
        } else {
            let (device, value) = (e.device, e.value);
            let d = sim.compute_time(device, Time(value))?;
            sim.schedule_after(d, id)?;
        }
        Ok(())
    }
}

impl TaskSink for StreamSchedule {
    fn transfer(
        &mut self,
        route: Vec<usize>,
        bytes: u64,
        deps: &[TaskId],
    ) -> Result<TaskId, CollectiveError> {
        Ok(self.add(bytes, TRANSFER, route, deps))
    }

    fn compute(
        &mut self,
        device: u64,
        duration: Time,
        deps: &[TaskId],
    ) -> Result<TaskId, CollectiveError> {
        Ok(self.add(duration.0, device.min(TRANSFER - 1), Vec::new(), deps))
    }
}

/// Steps generated on demand.
pub(crate) trait StepSource {
    /// Steps to ask for (some may be empty).
    fn num_steps(&self) -> usize;
    /// Step `k`'s moves, appended to `out`.
    fn step_into(&self, k: usize, out: &mut Vec<Move>);
}

impl StepSource for super::tree_stream::TreeStream {
    fn num_steps(&self) -> usize {
        self.len()
    }

    fn step_into(&self, k: usize, out: &mut Vec<Move>) {
        self.step(k, out)
    }
}

/// Steps generated ahead of the completions of tasks after the
/// completion of a task of step `s`, the steps up to `s + lookahead` exist.
pub(crate) const LOOKAHEAD: usize = 4;

/// Time `source`'s steps over the group of `routes` as
/// [`super::timing::simulate_inner`] times its plan (no faults), generating
/// steps `lookahead` ahead; `None` when a task came too late (run again with
/// a larger `lookahead`: `usize::MAX` generates every step up front and never
/// returns `None`).
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
) -> Result<Option<CollectiveTiming>, CollectiveError> {
    let params = *cal.params(algo, proto);
    let mut deps = Deps::new(n);
    let mut ctx = StepCtx {
        routes,
        deps: &mut deps,
        params,
        quotient,
        elem_bytes,
    };
    let mut sched = StreamSchedule::new();
    let total = source.num_steps();
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
    let links = protocol_links(topo, cal, algo, proto);
    let mut sim: NetSim<TaskId> = NetSim::new(&links, 0)?;
    for id in std::mem::take(&mut sched.ready) {
        sched.start(&mut sim, id)?;
    }
    let mut makespan = Time::ZERO;
    while let Some(o) = sim.step()? {
        let (id, at) = match o {
            Occurrence::User { at, event } => {
                sim.log_mut()
                    .record(at, "compute_done", event as u64, String::new);
                (event, at)
            }
            Occurrence::Delivered { at, tag } => (tag as usize, at),
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
        makespan = makespan.max(at);
        let e = sched.entry(id);
        e.done = true;
        let dependents = std::mem::take(&mut e.dependents);
        for &t in &dependents {
            let e = sched.entry(t);
            e.waiting -= 1;
            if e.waiting == 0 {
                sched.start(&mut sim, t)?;
            }
        }
        let mut dependents = dependents;
        dependents.clear();
        sched.entry(id).dependents = dependents;
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
/// too late the first time.
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
) -> Result<CollectiveTiming, CollectiveError> {
    for lookahead in [LOOKAHEAD, usize::MAX] {
        if let Some(t) = simulate_stream(
            topo, routes, n, source, elem_bytes, algo, proto, cal, quotient, lookahead,
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
    )
}
