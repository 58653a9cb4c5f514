//! The event loop of a timed run (see the part's doc): per-device compute and
//! communication streams advanced by `ComputeDone` / `CommDone` events. The
//! loop runs one representative per class of devices with identical timelines
//! (see [`super::classes`]); with every device its own class it is the full
//! per-device run.

use std::collections::{BTreeMap, BTreeSet};

use std::rc::Rc;

use crate::collective::CollectiveError;
use crate::engine::{component_rng, ComponentRng, Engine, Time};
use crate::ir::RawAttr;
use crate::partition::{Collective, CollectiveKind, Slot, SpmdProgram, Step};
use crate::topology::Topology;

use super::classes::{ClassGroups, Classes};

use super::comm::{cache_key as comm_key, CommModel};
use super::cost::{step_cost, DeviceRoofline, OpCost};
use super::memory::{MemoryTracker, OomReport};
use super::options::{OomPolicy, RunProgress, TimedOptions, PROGRESS_EVERY};
use super::timeline::{ClassTimeline, LinkBusy, Span, StreamKind, Timeline};
use super::TimedError;

#[derive(Debug, Clone, Copy)]
enum Event {
    ComputeDone { d: usize, step: usize },
    CommDone { step: usize, group: usize },
}

/// The memory scope of every value: `host` for function arguments and results
/// that JAX places in host memory (`mhlo.memory_kind`), else `global`.
pub fn value_scopes(program: &SpmdProgram) -> Vec<String> {
    let mut scopes = vec!["global".to_string(); program.values.len()];
    let host = |attrs: &[RawAttr]| {
        attrs.iter().any(|a| {
            a.name == "mhlo.memory_kind" && a.value.trim().trim_matches('"').ends_with("_host")
        })
    };
    if let Some(f) = program.module.entry() {
        for (slot, attrs) in program.args.iter().zip(&f.arg_attrs) {
            if host(attrs) {
                scopes[*slot] = "host".into();
            }
        }
        for (slot, attrs) in program.results.iter().zip(&f.result_attrs) {
            if host(attrs) {
                scopes[*slot] = "host".into();
            }
        }
    }
    scopes
}

/// The slots a step reads.
fn step_inputs(step: &Step) -> Vec<Slot> {
    match step {
        Step::Local { operands, .. } => operands.clone(),
        Step::Collective(c) => std::iter::once(c.input)
            .chain(c.extra_inputs.iter().copied())
            .collect(),
        Step::Loop(_) | Step::Case(_) => Vec::new(),
    }
}

/// The slots a step writes.
fn step_outputs(step: &Step) -> &[Slot] {
    match step {
        Step::Local { results, .. } => results,
        Step::Collective(c) => std::slice::from_ref(&c.output),
        Step::Loop(_) | Step::Case(_) => &[],
    }
}

/// Compute steps run on the compute stream; data-moving collectives on the
/// communication stream.
fn on_compute_stream(step: &Step) -> bool {
    match step {
        Step::Local { .. } | Step::Loop(_) | Step::Case(_) => true,
        Step::Collective(c) => !c.kind.moves_data(),
    }
}

/// Per-class progress.
struct DeviceRun {
    next_compute: usize,
    next_comm: usize,
    compute_busy: bool,
    /// Waiting in, or running, a collective.
    comm_busy: bool,
    rng: ComponentRng,
}

/// A collective step across its groups: first group start, groups
/// finished, bytes per link (recorded once the last group ends).
type CommProgress = (Time, usize, Vec<(usize, u64)>);

/// The run in progress; "device index" `d` is a class of devices with
/// identical timelines, run by its representative.
struct Run<'a> {
    program: &'a SpmdProgram,
    opts: &'a TimedOptions,
    /// The representative device (id) of every class.
    devices: Vec<u64>,
    classes: Classes,
    compute_steps: Vec<usize>,
    comm_steps: Vec<usize>,
    /// Per comm step: its groups seen from the classes (shared between the
    /// steps over the same device groups).
    groups: BTreeMap<usize, Rc<ClassGroups>>,
    costs: Vec<OpCost>,
    /// The slots each step reads.
    inputs: Vec<Vec<Slot>>,
    rooflines: Vec<DeviceRoofline>,
    /// Per slot: inside a fused kernel (never allocated).
    internal: Vec<bool>,
    scopes: Vec<String>,
    /// Function arguments (owned by the caller) and results: never freed.
    kept: Vec<bool>,
    /// Per slot: a donated argument (see `TimedOptions::donated_args`).
    donated: Vec<bool>,
    /// Per slot: the slot whose buffer it holds (itself, or for a relabel's
    /// output the root of its input's relabels).
    buffer_of: Vec<Slot>,
    /// `aliases_live[d * slots + root]`: relabels of `root`'s buffer still
    /// live on device index `d` (the buffer is freed when none is and the
    /// root is dead too).
    aliases_live: Vec<u32>,
    /// `ready[d * slots + s]`.
    ready: Vec<bool>,
    /// Reads left per (device, slot) before the buffer is freed.
    uses_left: Vec<u32>,
    state: Vec<DeviceRun>,
    arrived: BTreeMap<(usize, usize), usize>,
    comm_progress: BTreeMap<usize, CommProgress>,
    comm: CommModel<'a>,
    memory: MemoryTracker,
    engine: Engine<Event>,
    spans: Vec<Span>,
    links: Vec<LinkBusy>,
    /// With `TimedOptions::link_totals`: each topology link's record in
    /// `links` (u32::MAX: none yet).
    link_totals: Option<Vec<u32>>,
    ooms: Vec<OomReport>,
    /// Per device index: reports kept, and those counted but not kept (a
    /// program that never fits would otherwise keep one per allocation).
    ooms_kept: Vec<u32>,
    ooms_dropped: Vec<u64>,
    /// The time of the first out-of-memory report under [`OomPolicy::Stop`]:
    /// the rest of that instant still runs (so which device reports first
    /// does not depend on event order), then the run stops.
    stop_at: Option<Time>,
    /// Events of the full per-device run the handled events stand for.
    events: u64,
    makespan: Time,
    /// Steps finished over all devices, and at the last progress call.
    done: u64,
    reported: u64,
}

/// Out-of-memory reports kept per device; later ones are only counted.
pub const MAX_OOM_REPORTS: u32 = 64;

/// Time `program` on `topo`: mesh device `i` runs on topology device `i`.
/// Every device's spans, peaks and reports (see [`run_timed_classes`] for
/// the reduced form large meshes need).
pub fn run_timed(
    program: &SpmdProgram,
    topo: &Topology,
    opts: &TimedOptions,
) -> Result<Timeline, TimedError> {
    Ok(run_timed_classes(program, topo, opts)?.expand())
}

/// Time `program` on `topo`, one representative per class of devices with
/// identical timelines (every device its own class with
/// [`TimedOptions::per_device`] or jitter).
pub fn run_timed_classes(
    program: &SpmdProgram,
    topo: &Topology,
    opts: &TimedOptions,
) -> Result<ClassTimeline, TimedError> {
    // Loops run iteration by iteration (see `unroll`).
    let expanded = super::unroll::expand_loops(program, opts.trip_count)?;
    let program: &SpmdProgram = &expanded;
    let mut run = Run::new(program, topo, opts)?;
    for d in 0..run.devices.len() {
        run.try_start(d)?;
    }
    while let Some(next) = run.engine.peek_time() {
        if run.stop_at.is_some_and(|t| next > t) {
            break;
        }
        let Some((now, ev)) = run.engine.next() else {
            break;
        };
        run.makespan = run.makespan.max(now);
        match ev {
            Event::ComputeDone { d, step } => {
                let n = run.classes.members[d].len() as u64;
                run.events += n;
                run.done += n;
                run.compute_done(d, step)?
            }
            Event::CommDone { step, group } => {
                let groups = &run.groups[&step];
                run.events += groups.count[group];
                run.done += groups.members[group]
                    .iter()
                    .map(|&c| run.classes.members[c].len() as u64)
                    .sum::<u64>();
                run.comm_done(step, group)?
            }
        }
        run.report_progress(false);
    }
    run.report_progress(true);
    let stopped = run.stop_at.is_some();
    if let Some(t) = run.stop_at {
        // Nothing that starts at the report's instant runs.
        run.spans.retain(|s| s.start_ps < t.0);
    } else {
        let unfinished = run.state.iter().any(|s| {
            s.next_compute < run.compute_steps.len() || s.next_comm < run.comm_steps.len()
        });
        if unfinished {
            return Err(TimedError::Stalled(run.makespan));
        }
    }
    let ids = program.mesh.device_ids();
    Ok(ClassTimeline {
        makespan_ps: run.makespan.0,
        classes: run
            .classes
            .members
            .iter()
            .map(|m| m.iter().map(|&p| ids[p]).collect())
            .collect(),
        devices: ids,
        spans: run.spans,
        links: run.links,
        peaks: run.memory.peaks(),
        memory: run.memory.history().to_vec(),
        ooms_dropped: run
            .ooms_dropped
            .iter()
            .zip(&run.classes.members)
            .map(|(&n, m)| n * m.len() as u64)
            .sum(),
        ooms: run.ooms,
        stopped,
        events: run.events,
    })
}

/// Collective step `i`'s (`c`'s) timing failure as the run reports it.
fn collective_error(i: usize, c: &Collective, source: CollectiveError) -> TimedError {
    TimedError::Collective {
        step: i,
        what: c.kind.name(),
        cause: Box::new(source),
    }
}

impl<'a> Run<'a> {
    fn new(
        program: &'a SpmdProgram,
        topo: &'a Topology,
        opts: &'a TimedOptions,
    ) -> Result<Run<'a>, TimedError> {
        let ids = program.mesh.device_ids();
        let n = ids.len();
        if program.num_devices() > u64::from(topo.num_devices()) {
            return Err(TimedError::TooFewDevices {
                mesh: program.num_devices(),
                topology: topo.num_devices(),
            });
        }
        let index: BTreeMap<u64, usize> = ids.iter().enumerate().map(|(i, &d)| (d, i)).collect();
        let slots = program.values.len();
        let (mut compute_steps, mut comm_steps) = (Vec::new(), Vec::new());
        let mut uses = vec![0u32; slots];
        // Distinct device groupings (collectives over the same axes share
        // theirs), as mesh positions, and the grouping of each comm step.
        let mut grouping_of: BTreeMap<usize, usize> = BTreeMap::new();
        let mut groupings: Vec<Vec<Vec<usize>>> = Vec::new();
        let mut seen: BTreeMap<*const Vec<Vec<u64>>, usize> = BTreeMap::new();
        for (i, step) in program.steps.iter().enumerate() {
            for s in step_inputs(step) {
                uses[s] += 1;
            }
            if on_compute_stream(step) {
                compute_steps.push(i);
                continue;
            }
            comm_steps.push(i);
            let Step::Collective(c) = step else {
                unreachable!("comm steps are collectives")
            };
            let key = std::sync::Arc::as_ptr(&c.groups);
            let g = match seen.get(&key) {
                Some(&g) => g,
                None => {
                    let mut groups = Vec::with_capacity(c.groups.len());
                    for group in c.groups.iter() {
                        let mut m = Vec::with_capacity(group.len());
                        for dev in group {
                            let &d = index.get(dev).ok_or(TimedError::NoSuchDevice(
                                u32::try_from(*dev).unwrap_or(u32::MAX),
                                topo.num_devices(),
                            ))?;
                            m.push(d);
                        }
                        groups.push(m);
                    }
                    groupings.push(groups);
                    seen.insert(key, groupings.len() - 1);
                    groupings.len() - 1
                }
            };
            grouping_of.insert(i, g);
        }
        // Per device: what makes its timeline its own before any collective.
        let mut rooflines_all = Vec::with_capacity(n);
        let mut keys = Vec::with_capacity(n);
        let mut capacities: Vec<Vec<(String, u64)>> = Vec::with_capacity(n);
        for (d, &dev) in ids.iter().enumerate() {
            let idx = u32::try_from(dev)
                .map_err(|_| TimedError::NoSuchDevice(u32::MAX, topo.num_devices()))?;
            let roofline = DeviceRoofline::for_device(topo, idx, &opts.roofline)?;
            let c = topo
                .device(idx)
                .ok_or(TimedError::NoSuchDevice(idx, topo.num_devices()))?;
            let caps: Vec<(String, u64)> = topo
                .component(c)
                .memory
                .iter()
                .map(|m| (m.scope.clone(), m.capacity.0))
                .collect();
            let alone = opts.per_device || opts.jitter.is_some();
            let straggler = opts
                .stragglers
                .iter()
                .find(|&(s, _)| s == dev)
                .map_or(1.0f64, |(_, f)| f);
            keys.push((
                if alone { d } else { 0 },
                format!("{roofline:?}"),
                straggler.to_bits(),
                caps.clone(),
                Vec::new(),
            ));
            rooflines_all.push(roofline);
            capacities.push(caps);
        }
        let mut comm = CommModel::new(topo, opts.calibration, opts.faults.clone())?
            .with_memo(opts.comm_memo.clone())
            .with_node_local_algorithm(opts.node_local_algorithm)
            .with_node_local_latency_free(opts.node_local_latency_free);
        let singletons = opts.per_device || opts.jitter.is_some();
        if !singletons && comm.has_faults() {
            // A group a link fault may reach is its own: its devices carry
            // (grouping, group) in their keys.
            let mut done: BTreeSet<(usize, String)> = BTreeSet::new();
            for (&i, &gi) in &grouping_of {
                let Step::Collective(c) = &program.steps[i] else {
                    unreachable!("comm steps are collectives")
                };
                if !done.insert((gi, comm_key(program, c))) {
                    continue;
                }
                let touched = comm
                    .touched(program, c)
                    .map_err(|source| collective_error(i, c, source))?;
                for g in touched {
                    for &p in &groupings[gi][g] {
                        keys[p].4.push((gi, g));
                    }
                }
            }
            for k in &mut keys {
                k.4.sort_unstable();
                k.4.dedup();
            }
        }
        let classes = if singletons {
            Classes::singletons(n)
        } else {
            let refs: Vec<&[Vec<usize>]> = groupings.iter().map(Vec::as_slice).collect();
            Classes::refine(keys, &refs)
        };
        let class_groups: Vec<Rc<ClassGroups>> = groupings
            .iter()
            .map(|g| Rc::new(ClassGroups::new(g, &classes)))
            .collect();
        let groups = grouping_of
            .into_iter()
            .map(|(i, g)| (i, class_groups[g].clone()))
            .collect();
        let (costs, internal) = if opts.fusion {
            let plan = super::fusion::plan_with(program, opts.fuse_attention, &opts.donated_args);
            (super::fusion::fused_costs(program, &plan), plan.internal)
        } else {
            let costs = program
                .steps
                .iter()
                .map(|s| step_cost(program, s))
                .collect();
            (costs, vec![false; program.values.len()])
        };
        let reps: Vec<usize> = classes.members.iter().map(|m| m[0]).collect();
        let devices: Vec<u64> = reps.iter().map(|&p| ids[p]).collect();
        let k = devices.len();
        let rooflines = reps.iter().map(|&p| rooflines_all[p].clone()).collect();
        let mut memory = MemoryTracker::new(devices.clone());
        if opts.record_memory {
            memory.record_history();
        }
        let mut by_name: Vec<usize> = (0..slots).collect();
        by_name.sort_by(|&a, &b| program.values[a].name.cmp(&program.values[b].name));
        let mut rank = vec![0u32; slots];
        for (r, &s) in by_name.iter().enumerate() {
            rank[s] = r as u32;
        }
        memory.set_name_order(rank);
        for (d, &p) in reps.iter().enumerate() {
            for (scope, cap) in &capacities[p] {
                memory.add_scope(d, scope, *cap);
            }
        }
        let mut kept = vec![false; slots];
        for &r in program.results.iter().chain(&program.args) {
            kept[r] = true;
        }
        let mut donated = vec![false; slots];
        for &i in &opts.donated_args {
            if let Some(&a) = program.args.get(i) {
                if !program.results.contains(&a) {
                    kept[a] = false;
                    donated[a] = true;
                }
            }
        }
        // A relabel's output is its input's buffer under another value.
        let mut buffer_of: Vec<Slot> = (0..slots).collect();
        for step in &program.steps {
            if let Step::Collective(c) = step {
                if matches!(c.kind, CollectiveKind::Relabel) {
                    buffer_of[c.output] = buffer_of[c.input];
                }
            }
        }
        let state = devices
            .iter()
            .map(|dev| DeviceRun {
                next_compute: 0,
                next_comm: 0,
                compute_busy: false,
                comm_busy: false,
                rng: component_rng(opts.seed, &format!("exec.device{dev}")),
            })
            .collect();
        let mut run = Run {
            program,
            opts,
            devices,
            classes,
            compute_steps,
            comm_steps,
            groups,
            costs,
            inputs: program.steps.iter().map(step_inputs).collect(),
            rooflines,
            internal,
            scopes: value_scopes(program),
            kept,
            donated,
            buffer_of,
            aliases_live: vec![0; k * slots],
            ready: vec![false; k * slots],
            uses_left: uses.iter().cycle().take(k * slots).copied().collect(),
            state,
            arrived: BTreeMap::new(),
            comm_progress: BTreeMap::new(),
            comm,
            memory,
            engine: Engine::new(),
            spans: Vec::new(),
            links: Vec::new(),
            link_totals: opts.link_totals.then(|| vec![u32::MAX; topo.links().len()]),
            ooms: Vec::new(),
            ooms_kept: vec![0; k],
            ooms_dropped: vec![0; k],
            stop_at: None,
            events: 0,
            makespan: Time::ZERO,
            done: 0,
            reported: 0,
        };
        for &a in &program.args {
            for d in 0..k {
                run.ready[d * slots + a] = true;
                run.alloc(d, a)?;
            }
        }
        Ok(run)
    }

    fn slots(&self) -> usize {
        self.program.values.len()
    }

    /// Tell the progress hook how far the run has got (every
    /// [`PROGRESS_EVERY`] steps, and at the end).
    fn report_progress(&mut self, end: bool) {
        let Some(hook) = &self.opts.progress else {
            return;
        };
        if end || self.done >= self.reported + PROGRESS_EVERY {
            self.reported = self.done;
            let devices = self.classes.class_of.len() as u64;
            let total = devices * (self.compute_steps.len() + self.comm_steps.len()) as u64;
            (hook.0)(RunProgress {
                done: self.done.min(total),
                total,
                finished: end,
            });
        }
    }

    fn is_ready(&self, d: usize, s: Slot) -> bool {
        self.ready[d * self.slots() + s]
    }

    /// Allocate `slot` on device index `d` now; false when the run must stop.
    fn alloc(&mut self, d: usize, slot: Slot) -> Result<bool, TimedError> {
        // Values inside a fused kernel never reach device memory.
        let bytes = if self.internal[slot] {
            0
        } else {
            self.program.values[slot].local_bytes()
        };
        let program = self.program;
        let report =
            self.memory
                .alloc(d, &self.scopes[slot], slot, bytes, self.engine.now(), |s| {
                    program.values[s].name.as_str()
                });
        if let Some(r) = report {
            if self.ooms_kept[d] < MAX_OOM_REPORTS {
                self.ooms_kept[d] += 1;
                self.ooms.push(r);
            } else {
                self.ooms_dropped[d] += 1;
            }
            if self.opts.on_oom == OomPolicy::Stop && self.stop_at.is_none() {
                self.stop_at = Some(self.engine.now());
            }
        }
        Ok(true)
    }

    /// A read of `slot` on `d` finished; free it after its last read (a
    /// buffer several values hold, after the last read of them all).
    fn release(&mut self, d: usize, slot: Slot) {
        let slots = self.slots();
        let i = d * slots + slot;
        self.uses_left[i] = self.uses_left[i].saturating_sub(1);
        self.free_if_unread(d, slot);
    }

    /// Free `slot` on `d` once nothing reads it any more (nor is it kept):
    /// after its last read, or as soon as it is made when nothing reads it
    /// (a multi-result op's unused results).
    fn free_if_unread(&mut self, d: usize, slot: Slot) {
        let slots = self.slots();
        if self.uses_left[d * slots + slot] != 0 || self.kept[slot] {
            return;
        }
        let root = self.buffer_of[slot];
        if root != slot {
            self.aliases_live[d * slots + root] -= 1;
        }
        let root_dead = !self.kept[root] && self.uses_left[d * slots + root] == 0;
        if root_dead && self.aliases_live[d * slots + root] == 0 {
            let now = self.engine.now();
            self.memory.free(d, &self.scopes[root], root, now);
        }
    }

    /// Start whatever device index `d` can start now.
    fn try_start(&mut self, d: usize) -> Result<(), TimedError> {
        let now = self.engine.now();
        let st = &self.state[d];
        if !st.compute_busy && st.next_compute < self.compute_steps.len() {
            let i = self.compute_steps[st.next_compute];
            if self.inputs[i].iter().all(|&s| self.is_ready(d, s)) {
                self.start_compute(d, i, now)?;
            }
        }
        let st = &self.state[d];
        if !st.comm_busy && st.next_comm < self.comm_steps.len() {
            let i = self.comm_steps[st.next_comm];
            if self.inputs[i].iter().all(|&s| self.is_ready(d, s)) {
                self.state[d].comm_busy = true;
                let groups = &self.groups[&i];
                let g = groups.group_of[d];
                let size = groups.members[g].len();
                let count = self.arrived.entry((i, g)).or_insert(0);
                *count += 1;
                if *count == size {
                    self.arrived.remove(&(i, g));
                    self.start_collective(i, g, now)?;
                }
            }
        }
        Ok(())
    }

    fn start_compute(&mut self, d: usize, i: usize, now: Time) -> Result<(), TimedError> {
        let step = &self.program.steps[i];
        let cost = self.costs[i];
        let mut dur = self.rooflines[d].time(&cost)?;
        if dur > Time::ZERO {
            dur = self.opts.stragglers.apply(self.devices[d], dur)?;
            if let Some(j) = &self.opts.jitter {
                dur = j.apply(dur, &mut self.state[d].rng)?;
            }
        }
        if let Step::Collective(c) = step {
            if matches!(c.kind, CollectiveKind::Relabel) {
                // A relabel renames the buffer: no second copy; the buffer
                // lives while the input or any of its relabels does.
                let at = d * self.slots() + self.buffer_of[c.output];
                self.aliases_live[at] += 1;
                self.state[d].compute_busy = true;
                let end = now.checked_add(dur)?;
                self.engine
                    .schedule_at(end, Event::ComputeDone { d, step: i })?;
                return Ok(());
            }
        }
        if let Step::Local {
            op,
            operands,
            results,
            ..
        } = step
        {
            // A donated buffer at its last read takes the result in place.
            let elementwise = self.program.local_func.op(*op).kind.is_elementwise();
            let size = |s: Slot| self.program.values[s].local_bytes();
            if let (true, [r]) = (elementwise, results.as_slice()) {
                let slots = self.slots();
                let taken = operands.iter().copied().find(|&o| {
                    self.donated[o]
                        && self.uses_left[d * slots + o] == 1
                        && self.buffer_of[o] == o
                        && self.aliases_live[d * slots + o] == 0
                        && size(o) == size(*r)
                        && !self.internal[*r]
                });
                if let Some(o) = taken {
                    self.memory.free(d, &self.scopes[o], o, now);
                }
            }
        }
        for &s in step_outputs(step) {
            if !self.alloc(d, s)? {
                return Ok(());
            }
        }
        self.state[d].compute_busy = true;
        let end = now.checked_add(dur)?;
        self.engine
            .schedule_at(end, Event::ComputeDone { d, step: i })?;
        if cost.kernel {
            let (op, value) = self.describe(i);
            self.spans.push(Span {
                device: self.devices[d],
                stream: StreamKind::Compute,
                step: i,
                start_ps: now.0,
                end_ps: end.0,
                op,
                value,
                flops: cost.flops,
                bytes: cost.bytes,
                detail: String::new(),
            });
        }
        Ok(())
    }

    fn start_collective(&mut self, i: usize, g: usize, now: Time) -> Result<(), TimedError> {
        let Step::Collective(c) = &self.program.steps[i] else {
            unreachable!("comm steps are collectives")
        };
        let first = self.groups[&i].first[g];
        let timing = self
            .comm
            .time(self.program, c, now, first)
            .map_err(|source| collective_error(i, c, source))?;
        let mut dur = timing.time;
        let members = self.groups[&i].members[g].clone();
        if let Some(j) = &self.opts.jitter {
            // One draw per group, from the stream of its first device.
            dur = j.apply(dur, &mut self.state[members[0]].rng)?;
        }
        for &d in &members {
            if !self.alloc(d, c.output)? {
                return Ok(());
            }
        }
        let end = now.checked_add(dur)?;
        self.engine
            .schedule_at(end, Event::CommDone { step: i, group: g })?;
        self.comm_progress
            .entry(i)
            .or_insert_with(|| (now, 0, timing.link_bytes.clone()));
        let (op, value) = self.describe(i);
        for &d in &members {
            self.spans.push(Span {
                device: self.devices[d],
                stream: StreamKind::Comm,
                step: i,
                start_ps: now.0,
                end_ps: end.0,
                op: op.clone(),
                value: value.clone(),
                flops: 0,
                bytes: c.bytes,
                detail: timing.label.clone(),
            });
        }
        Ok(())
    }

    fn compute_done(&mut self, d: usize, i: usize) -> Result<(), TimedError> {
        let slots = self.slots();
        let program = self.program;
        let step = &program.steps[i];
        for &s in step_outputs(step) {
            self.ready[d * slots + s] = true;
            self.free_if_unread(d, s);
        }
        for k in 0..self.inputs[i].len() {
            self.release(d, self.inputs[i][k]);
        }
        let st = &mut self.state[d];
        st.compute_busy = false;
        st.next_compute += 1;
        self.try_start(d)
    }

    fn comm_done(&mut self, i: usize, g: usize) -> Result<(), TimedError> {
        let Step::Collective(c) = &self.program.steps[i] else {
            unreachable!("comm steps are collectives")
        };
        let output = c.output;
        let slots = self.slots();
        let members = self.groups[&i].members[g].clone();
        for &d in &members {
            self.ready[d * slots + output] = true;
            self.free_if_unread(d, output);
            for k in 0..self.inputs[i].len() {
                self.release(d, self.inputs[i][k]);
            }
            let st = &mut self.state[d];
            st.comm_busy = false;
            st.next_comm += 1;
        }
        let groups = self.groups[&i].members.len();
        let now = self.engine.now();
        let mut finished = None;
        if let Some(p) = self.comm_progress.get_mut(&i) {
            p.1 += 1;
            if p.1 == groups {
                // The bytes are recorded once: later trips of a loop find
                // the count past `groups` (the first trip's records stand).
                finished = Some((p.0, std::mem::take(&mut p.2)));
            }
        }
        if let Some((start, bytes)) = finished {
            for (link, bytes) in bytes {
                self.record_link(LinkBusy {
                    link,
                    step: i,
                    start_ps: start.0,
                    end_ps: now.0,
                    bytes,
                });
            }
        }
        for d in members {
            self.try_start(d)?;
        }
        Ok(())
    }

    /// Keep `b`, or add it to its link's total (`TimedOptions::link_totals`).
    fn record_link(&mut self, b: LinkBusy) {
        let Some(slots) = &mut self.link_totals else {
            self.links.push(b);
            return;
        };
        match slots.get(b.link).copied() {
            Some(s) if s != u32::MAX => {
                let t = &mut self.links[s as usize];
                t.bytes += b.bytes;
                t.start_ps = t.start_ps.min(b.start_ps);
                t.end_ps = t.end_ps.max(b.end_ps);
            }
            Some(_) => {
                slots[b.link] = self.links.len() as u32;
                self.links.push(b);
            }
            None => self.links.push(b),
        }
    }

    /// (op name, produced value) of step `i` for spans.
    fn describe(&self, i: usize) -> (String, String) {
        let p = self.program;
        match &p.steps[i] {
            Step::Local { op, results, .. } => {
                let name = p.local_func.op(*op).kind.name();
                let short = name.rsplit('.').next().unwrap_or(name).to_string();
                let value = results
                    .first()
                    .map_or(String::new(), |&s| p.values[s].name.clone());
                (short, value)
            }
            Step::Collective(c) => (c.kind.name().to_string(), p.values[c.output].name.clone()),
            Step::Loop(_) => ("while".to_string(), String::new()),
            Step::Case(_) => ("case".to_string(), String::new()),
        }
    }
}
