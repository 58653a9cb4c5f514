//! A schedule: a dependency graph of point-to-point transfers and local
//! computations (e.g. reductions), run on a `NetSim`. A task starts the moment
//! all its dependencies have completed (a transfer when it is delivered, a
//! computation when its duration has elapsed). This is how the collectives
//! layer says "send chunk k from a to b after X and Y, then reduce on b".
//! Dependencies must name earlier tasks, so a schedule is acyclic by
//! construction and every task either runs or is reported as not run.
//!
//! A dependency on a transfer may instead wait only for it to have *left*
//! ([`departure`]: its last byte transmitted, its route's latency still to
//! come). That is how a sender with several slots in flight (NCCL's
//! connection FIFO) posts its next send: the link latency is then paid along
//! the data's path, not once per send by the sender. A schedule with such
//! edges asks its `NetSim` for transmission ends; one without costs the same
//! as before.

use crate::engine::Time;

use super::link::LinkId;
use super::netsim::{NetSim, Occurrence, Undeliverable};
use super::NetError;

/// Index of a task in its schedule.
pub type TaskId = usize;

/// Marks a dependency as "after the task has left" ([`departure`]).
const DEPARTED: TaskId = 1 << (TaskId::BITS - 1);

/// A dependency on `t`'s departure rather than its completion: for a
/// transfer, the end of its transmission (its delivery comes its route's
/// latency later); for a computation, its completion.
pub fn departure(t: TaskId) -> TaskId {
    t | DEPARTED
}

/// A dependency's task and whether it waits for the departure only.
pub fn split_dependency(d: TaskId) -> (TaskId, bool) {
    (d & !DEPARTED, d & DEPARTED != 0)
}

/// What a task does.
#[derive(Debug, Clone, PartialEq)]
pub enum TaskKind {
    /// Move `bytes` along `route` (links from source to destination), never
    /// faster than `cap` bytes/s (`f64::INFINITY`: the links alone).
    Transfer {
        route: Vec<LinkId>,
        bytes: u64,
        cap: f64,
    },
    /// Occupy `device` for `duration` (slowed by stragglers, jittered).
    Compute { device: u64, duration: Time },
}

/// A task's fixed part: a transfer's bytes, or a computation's duration and
/// device. A transfer's `device` is `TRANSFER` with its rate cap's bits (a
/// positive float or infinity: the top bit is free), a computation's is
/// below `TRANSFER`: one record of 16 bytes either way.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Task {
    value: u64,
    device: u64,
}

const TRANSFER: u64 = 1 << 63;

impl Task {
    fn is_transfer(self) -> bool {
        self.device >= TRANSFER
    }

    fn cap(self) -> f64 {
        f64::from_bits(self.device & !TRANSFER)
    }
}

/// A dependency graph of tasks, in insertion order. Routes and dependencies
/// live in two flat arrays (task `t`'s in `[off[t], off[t + 1])`): a
/// collective at scale adds millions of tasks, and a vector per task cost
/// twice the memory.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    tasks: Vec<Task>,
    route_off: Vec<usize>,
    routes: Vec<LinkId>,
    dep_off: Vec<usize>,
    deps: Vec<TaskId>,
}

impl Default for Schedule {
    fn default() -> Self {
        Schedule {
            tasks: Vec::new(),
            route_off: vec![0],
            routes: Vec::new(),
            dep_off: vec![0],
            deps: Vec::new(),
        }
    }
}

/// The outcome of running a schedule.
#[derive(Debug, Clone, PartialEq)]
pub struct ScheduleReport {
    /// Completion time of each task (`None` if it never completed).
    pub finish: Vec<Option<Time>>,
    /// Latest completion time.
    pub makespan: Time,
    /// Transfers stopped by a failed link, in the order they were reported.
    pub undeliverable: Vec<(TaskId, Undeliverable)>,
    /// Tasks that never started because a dependency did not complete.
    pub not_run: Vec<TaskId>,
}

impl Schedule {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn len(&self) -> usize {
        self.tasks.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }

    pub fn kind(&self, t: TaskId) -> TaskKind {
        let k = self.tasks[t];
        if k.is_transfer() {
            TaskKind::Transfer {
                route: self.route(t).to_vec(),
                bytes: k.value,
                cap: k.cap(),
            }
        } else {
            TaskKind::Compute {
                device: k.device,
                duration: Time(k.value),
            }
        }
    }

    /// Task `t`'s dependencies (a departure one marked as [`departure`]
    /// made it; [`split_dependency`] reads it).
    pub fn deps(&self, t: TaskId) -> &[TaskId] {
        &self.deps[self.dep_off[t]..self.dep_off[t + 1]]
    }

    fn route(&self, t: TaskId) -> &[LinkId] {
        &self.routes[self.route_off[t]..self.route_off[t + 1]]
    }

    /// Add a transfer that starts after `deps` (a [`departure`] among them:
    /// after that transfer has left).
    pub fn add_transfer(
        &mut self,
        route: &[LinkId],
        bytes: u64,
        deps: &[TaskId],
    ) -> Result<TaskId, NetError> {
        self.add_transfer_capped(route, bytes, f64::INFINITY, deps)
    }

    /// Add a transfer that starts after `deps` and never runs faster than
    /// `cap` bytes/s (`f64::INFINITY`: no cap; [`NetSim::start_flow_capped`]).
    pub fn add_transfer_capped(
        &mut self,
        route: &[LinkId],
        bytes: u64,
        cap: f64,
        deps: &[TaskId],
    ) -> Result<TaskId, NetError> {
        if cap.is_nan() || cap <= 0.0 {
            return Err(NetError::BadRateCap(cap));
        }
        // A borrowed route: the schedule copies it into its flat table once.
        self.add(
            Task {
                value: bytes,
                device: TRANSFER | cap.to_bits(),
            },
            route,
            deps,
        )
    }

    /// Add a computation on `device` that starts after `deps`.
    pub fn add_compute(
        &mut self,
        device: u64,
        duration: Time,
        deps: &[TaskId],
    ) -> Result<TaskId, NetError> {
        // Ids from `TRANSFER` on mark transfers: they are no devices.
        let device = device.min(TRANSFER - 1);
        self.add(
            Task {
                value: duration.0,
                device,
            },
            &[],
            deps,
        )
    }

    fn add(&mut self, task: Task, route: &[LinkId], deps: &[TaskId]) -> Result<TaskId, NetError> {
        let id = self.tasks.len();
        if let Some(&bad) = deps.iter().find(|&&d| split_dependency(d).0 >= id) {
            return Err(NetError::BadDependency {
                task: id,
                dep: split_dependency(bad).0,
            });
        }
        let from = self.deps.len();
        // A computation leaves when it completes: its departure is its completion.
        self.deps.extend(deps.iter().map(|&d| {
            let (t, _) = split_dependency(d);
            if self.tasks[t].is_transfer() {
                d
            } else {
                t
            }
        }));
        self.deps[from..].sort_unstable();
        let mut kept = from;
        for i in from..self.deps.len() {
            if kept == from || self.deps[i] != self.deps[kept - 1] {
                self.deps[kept] = self.deps[i];
                kept += 1;
            }
        }
        self.deps.truncate(kept);
        self.dep_off.push(kept);
        self.routes.extend_from_slice(route);
        self.route_off.push(self.routes.len());
        self.tasks.push(task);
        Ok(id)
    }

    /// Run every task on `sim` (from its current time) until nothing is left.
    /// Caller events of `sim` are task ids (computations finishing).
    pub fn run(&self, sim: &mut NetSim<TaskId>) -> Result<ScheduleReport, NetError> {
        let n = self.tasks.len();
        // Dependents in CSR form, ascending, so start order is deterministic:
        // task `t`'s on its delivery (completion) under key `2 t`, on its
        // departure under `2 t + 1`.
        let key = |d: TaskId| {
            let (t, left) = split_dependency(d);
            2 * t + usize::from(left)
        };
        let mut counts = vec![0usize; 2 * n + 1];
        let mut departures = false;
        for &d in &self.deps {
            counts[key(d) + 1] += 1;
            departures |= split_dependency(d).1;
        }
        for i in 0..2 * n {
            counts[i + 1] += counts[i];
        }
        let mut fill = counts.clone();
        let mut dependents = vec![0usize; counts[2 * n]];
        for id in 0..n {
            for &d in self.deps(id) {
                dependents[fill[key(d)]] = id;
                fill[key(d)] += 1;
            }
        }
        drop(fill);
        if departures {
            sim.report_departures(true);
        }
        let mut waiting: Vec<usize> = (0..n).map(|t| self.deps(t).len()).collect();
        let mut finish: Vec<Option<Time>> = vec![None; n];
        let mut undeliverable = Vec::new();
        let ready: Vec<TaskId> = (0..n).filter(|&id| waiting[id] == 0).collect();
        for id in ready {
            self.start(sim, id)?;
        }
        while let Some(o) = sim.step()? {
            let (k, at) = match o {
                Occurrence::User { at, event } => {
                    sim.log_mut()
                        .record(at, "compute_done", event as u64, String::new);
                    (2 * event, at)
                }
                Occurrence::Delivered { at, tag } => (2 * tag as usize, at),
                Occurrence::Departed { at, tag } => (2 * tag as usize + 1, at),
                Occurrence::Undeliverable(u) => {
                    undeliverable.push((u.tag as usize, u));
                    continue;
                }
            };
            if k % 2 == 0 {
                finish[k / 2] = Some(at);
            }
            for &next in &dependents[counts[k]..counts[k + 1]] {
                waiting[next] -= 1;
                if waiting[next] == 0 {
                    self.start(sim, next)?;
                }
            }
        }
        if departures {
            sim.report_departures(false);
        }
        let undelivered: Vec<TaskId> = undeliverable.iter().map(|(t, _)| *t).collect();
        let not_run = (0..n)
            .filter(|&t| finish[t].is_none() && !undelivered.contains(&t))
            .collect();
        let makespan = finish.iter().flatten().copied().max().unwrap_or(Time::ZERO);
        Ok(ScheduleReport {
            finish,
            makespan,
            undeliverable,
            not_run,
        })
    }

    fn start(&self, sim: &mut NetSim<TaskId>, id: TaskId) -> Result<(), NetError> {
        let k = self.tasks[id];
        if k.is_transfer() {
            sim.start_flow_capped(id as u64, self.route(id), k.value, k.cap())
        } else {
            let d = sim.compute_time(k.device, Time(k.value))?;
            sim.schedule_after(d, id)
        }
    }
}
