//! A schedule: a dependency graph of point-to-point transfers and local
//! computations (e.g. reductions), run on a `NetSim`. A task starts the moment
//! all its dependencies have completed (a transfer when it is delivered, a
//! computation when its duration has elapsed). This is how the collectives
//! layer says "send chunk k from a to b after X and Y, then reduce on b".
//! Dependencies must name earlier tasks, so a schedule is acyclic by
//! construction and every task either runs or is reported as not run.

use crate::engine::Time;

use super::link::LinkId;
use super::netsim::{NetSim, Occurrence, Undeliverable};
use super::NetError;

/// Index of a task in its schedule.
pub type TaskId = usize;

/// What a task does.
#[derive(Debug, Clone, PartialEq)]
pub enum TaskKind {
    /// Move `bytes` along `route` (links from source to destination).
    Transfer { route: Vec<LinkId>, bytes: u64 },
    /// Occupy `device` for `duration` (slowed by stragglers, jittered).
    Compute { device: u64, duration: Time },
}

#[derive(Debug, Clone, PartialEq)]
struct Task {
    kind: TaskKind,
    deps: Vec<TaskId>,
}

/// A dependency graph of tasks, in insertion order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Schedule {
    tasks: Vec<Task>,
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

    pub fn kind(&self, t: TaskId) -> &TaskKind {
        &self.tasks[t].kind
    }

    pub fn deps(&self, t: TaskId) -> &[TaskId] {
        &self.tasks[t].deps
    }

    /// Add a transfer that starts after `deps`.
    pub fn add_transfer(
        &mut self,
        route: Vec<LinkId>,
        bytes: u64,
        deps: &[TaskId],
    ) -> Result<TaskId, NetError> {
        self.add(TaskKind::Transfer { route, bytes }, deps)
    }

    /// Add a computation on `device` that starts after `deps`.
    pub fn add_compute(
        &mut self,
        device: u64,
        duration: Time,
        deps: &[TaskId],
    ) -> Result<TaskId, NetError> {
        self.add(TaskKind::Compute { device, duration }, deps)
    }

    fn add(&mut self, kind: TaskKind, deps: &[TaskId]) -> Result<TaskId, NetError> {
        let id = self.tasks.len();
        if let Some(&bad) = deps.iter().find(|&&d| d >= id) {
            return Err(NetError::BadDependency { task: id, dep: bad });
        }
        let mut deps = deps.to_vec();
        deps.sort_unstable();
        deps.dedup();
        self.tasks.push(Task { kind, deps });
        Ok(id)
    }

    /// Run every task on `sim` (from its current time) until nothing is left.
    /// Caller events of `sim` are task ids (computations finishing).
    pub fn run(&self, sim: &mut NetSim<TaskId>) -> Result<ScheduleReport, NetError> {
        let n = self.tasks.len();
        // Dependents in CSR form, ascending, so start order is deterministic.
        let mut counts = vec![0usize; n + 1];
        for t in &self.tasks {
            for &d in &t.deps {
                counts[d + 1] += 1;
            }
        }
        for i in 0..n {
            counts[i + 1] += counts[i];
        }
        let mut fill = counts.clone();
        let mut dependents = vec![0usize; counts[n]];
        for (id, t) in self.tasks.iter().enumerate() {
            for &d in &t.deps {
                dependents[fill[d]] = id;
                fill[d] += 1;
            }
        }
        let mut waiting: Vec<usize> = self.tasks.iter().map(|t| t.deps.len()).collect();
        let mut finish: Vec<Option<Time>> = vec![None; n];
        let mut undeliverable = Vec::new();
        let ready: Vec<TaskId> = (0..n).filter(|&id| waiting[id] == 0).collect();
        for id in ready {
            self.start(sim, id)?;
        }
        while let Some(o) = sim.step()? {
            let (id, at) = match o {
                Occurrence::User { at, event } => {
                    sim.log_mut()
                        .record(at, "compute_done", event as u64, String::new);
                    (event, at)
                }
                Occurrence::Delivered { at, tag } => (tag as usize, at),
                Occurrence::Undeliverable(u) => {
                    undeliverable.push((u.tag as usize, u));
                    continue;
                }
            };
            finish[id] = Some(at);
            for &next in &dependents[counts[id]..counts[id + 1]] {
                waiting[next] -= 1;
                if waiting[next] == 0 {
                    self.start(sim, next)?;
                }
            }
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
        match &self.tasks[id].kind {
            TaskKind::Transfer { route, bytes } => sim.start_flow(id as u64, route, *bytes),
            TaskKind::Compute { device, duration } => {
                let d = sim.compute_time(*device, *duration)?;
                sim.schedule_after(d, id)
            }
        }
    }
}
