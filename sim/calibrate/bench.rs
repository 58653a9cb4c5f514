//! The microbenchmarks: point-to-point (a broadcast between two workers),
//! all-reduce and all-gather over sizes and worker counts, a GEMM and an
//! elementwise add, each with warm-up runs and repeats; the repeats go round
//! every point in a seeded shuffled order (so load bursts and slow drift of
//! the machine do not line up with size).

use std::collections::BTreeSet;

use rand::seq::SliceRandom;
use serde::Serialize;

use crate::base::DType;
use crate::collective::{self, Calibration, CollectiveOp, Group};
use crate::engine::rng::component_rng;
use crate::runtime::{Arg, DPackedFunc, DRef, Session, SessionError};
use crate::tensor::CollectiveReduction;
use crate::topology::Topology;

use super::{CalibrateError, Stats};

/// What a measurement times.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    /// Worker 0 to worker 1 (a broadcast on two workers: one message per chunk).
    P2p,
    AllReduce,
    AllGather,
    /// `m x m` by `m x m` f32 matmul on every worker.
    Gemm,
    /// Elementwise f32 add on every worker.
    Elementwise,
}

impl Op {
    pub fn name(self) -> &'static str {
        match self {
            Op::P2p => "p2p",
            Op::AllReduce => "all_reduce",
            Op::AllGather => "all_gather",
            Op::Gemm => "gemm",
            Op::Elementwise => "elementwise",
        }
    }

    pub fn is_collective(self) -> bool {
        matches!(self, Op::P2p | Op::AllReduce | Op::AllGather)
    }
}

/// What to measure.
#[derive(Debug, Clone)]
pub struct BenchConfig {
    /// Message sizes in bytes (the collective's whole buffer, as nccl-tests counts).
    pub sizes: Vec<u64>,
    /// Worker counts for the collectives (point-to-point always uses 2).
    pub ranks: Vec<usize>,
    /// GEMM dimensions m.
    pub gemm_dims: Vec<u64>,
    pub warmup: usize,
    pub repeats: usize,
    pub seed: u64,
}

/// One measured point with what its plan moves.
#[derive(Debug, Clone, Serialize)]
pub struct Measured {
    pub op: Op,
    /// Bytes of the message (collectives, elementwise) or m (GEMM).
    pub size: u64,
    pub ranks: usize,
    pub stats: Stats,
    /// Messages between workers in the plan (collectives).
    pub messages: u64,
    /// Bytes those messages carry.
    pub moved_bytes: u64,
    /// Of those, bytes the receiver reduces into its own (the gamma term).
    pub reduced_bytes: u64,
    /// Floating-point operations (GEMM) or bytes touched (elementwise).
    pub work: f64,
}

struct Task {
    op: Op,
    size: u64,
    ranks: usize,
}

/// Messages, bytes and reduced bytes of the plan `session` runs for `op` of `total` f32 elements.
fn plan_load(
    topo: &Topology,
    group: &Group,
    cal: &Calibration,
    op: &CollectiveOp,
    total: u64,
) -> Result<(u64, u64, u64), CalibrateError> {
    let (_, plan) = collective::choose(topo, group, op, total, 4, cal, None, None)?;
    let moves = plan.steps.iter().flatten().filter(|m| m.from != m.to);
    let (mut n, mut b, mut r) = (0u64, 0u64, 0u64);
    for m in moves {
        n += 1;
        b += m.len * 4;
        if m.reduce {
            r += m.len * 4;
        }
    }
    Ok((n, b, r))
}

/// Run every benchmark; `start(n)` gives a fresh session of `n` workers,
/// `progress(done, total)` is told after each point.
pub fn run_benchmarks(
    cfg: &BenchConfig,
    topo: &Topology,
    start: &mut dyn FnMut(usize) -> Result<Box<dyn Session>, SessionError>,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<Vec<Measured>, CalibrateError> {
    if cfg.repeats == 0 || cfg.sizes.is_empty() {
        return Err(CalibrateError::Config(
            "need at least one size and one repeat".into(),
        ));
    }
    let mut counts: BTreeSet<usize> = cfg.ranks.iter().copied().collect();
    counts.insert(2);
    if let Some(&n) = counts
        .iter()
        .find(|&&n| n < 2 || n > topo.num_devices() as usize)
    {
        return Err(CalibrateError::Config(format!(
            "{n} ranks: need 2 to {} (the topology's devices)",
            topo.num_devices()
        )));
    }
    let mut tasks = Vec::new();
    for &n in &counts {
        if n == 2 {
            tasks.extend(cfg.sizes.iter().map(|&s| Task {
                op: Op::P2p,
                size: s,
                ranks: 2,
            }));
            tasks.extend(cfg.sizes.iter().map(|&s| Task {
                op: Op::Elementwise,
                size: s,
                ranks: 2,
            }));
            tasks.extend(cfg.gemm_dims.iter().map(|&m| Task {
                op: Op::Gemm,
                size: m,
                ranks: 2,
            }));
        }
        if cfg.ranks.contains(&n) {
            for op in [Op::AllReduce, Op::AllGather] {
                tasks.extend(cfg.sizes.iter().map(|&s| Task {
                    op,
                    size: s,
                    ranks: n,
                }));
            }
        }
    }
    tasks.shuffle(&mut component_rng(cfg.seed, "calibrate/order"));
    // One session per worker count, tasks in shuffled order within each.
    let total = tasks.len();
    let mut out = Vec::with_capacity(total);
    for &n in &counts {
        let mut s = start(n)?;
        let ids: Vec<u32> = (0..n as u32).collect();
        s.init_ccl("nccl", &ids)?;
        let group = Group::first(topo, n as u32)?;
        let cal = Calibration::for_topology(topo, &group.device_model(topo))?;
        let prepared = tasks
            .iter()
            .filter(|t| t.ranks == n)
            .map(|t| prepare(s.as_mut(), topo, &group, &cal, t))
            .collect::<Result<Vec<_>, _>>()?;
        // Repeats go round the tasks, so a burst of load on the machine
        // touches one sample of many points rather than every sample of one.
        for p in &prepared {
            for _ in 0..cfg.warmup {
                p.call.run(s.as_mut())?;
            }
        }
        let mut samples = vec![Vec::with_capacity(cfg.repeats); prepared.len()];
        for _ in 0..cfg.repeats {
            for (p, v) in prepared.iter().zip(&mut samples) {
                v.push(p.call.run(s.as_mut())?.ps() as f64 * 1e-12);
            }
        }
        for (p, v) in prepared.into_iter().zip(samples) {
            let mut m = p.measured;
            m.stats = Stats::of(&v).ok_or_else(|| CalibrateError::Config("no samples".into()))?;
            out.push(m);
            progress(out.len(), total);
        }
        s.shutdown()?;
    }
    out.sort_by_key(|a| (a.op, a.ranks, a.size));
    Ok(out)
}

fn filled(s: &mut dyn Session, elements: u64) -> Result<DRef, SessionError> {
    let full = s.get_global_func("tensor.full")?;
    let (r, _) = s.call_packed(
        &full,
        &[
            Arg::Int(elements as i64),
            Arg::Float(1.0),
            Arg::DType(DType::F32),
        ],
    )?;
    Ok(r)
}

/// A task with its registers made, ready to time.
struct Prepared {
    measured: Measured,
    call: Call,
}

enum Call {
    Broadcast(DRef, DRef),
    AllReduce(DRef, DRef),
    AllGather(DRef, DRef),
    Func(DPackedFunc, Vec<Arg>),
}

impl Call {
    fn run(&self, s: &mut dyn Session) -> Result<crate::engine::Time, SessionError> {
        match self {
            Call::Broadcast(a, b) => s.broadcast_from_worker0(*a, *b),
            Call::AllReduce(a, b) => s.allreduce(*a, *b, CollectiveReduction::Sum),
            Call::AllGather(a, b) => s.allgather(*a, *b),
            Call::Func(f, args) => s.call_packed(f, args).map(|x| x.1),
        }
    }
}

fn prepare(
    s: &mut dyn Session,
    topo: &Topology,
    group: &Group,
    cal: &Calibration,
    t: &Task,
) -> Result<Prepared, CalibrateError> {
    let n = t.ranks as u64;
    // f32 elements, a multiple of the worker count so all-gather pieces are whole.
    let elems = (t.size / 4).div_ceil(n).max(1) * n;
    let (mut messages, mut moved, mut reduced, mut work) = (0, 0, 0, 0.0);
    let call = match t.op {
        Op::P2p => {
            let src = filled(s, elems)?;
            let dst = s.empty(&[elems], DType::F32, None)?;
            (messages, moved, reduced) = plan_load(
                topo,
                group,
                cal,
                &CollectiveOp::Broadcast { root: 0 },
                elems,
            )?;
            Call::Broadcast(src, dst)
        }
        Op::AllReduce => {
            let src = filled(s, elems)?;
            let dst = s.empty(&[elems], DType::F32, None)?;
            (messages, moved, reduced) =
                plan_load(topo, group, cal, &CollectiveOp::AllReduce, elems)?;
            Call::AllReduce(src, dst)
        }
        Op::AllGather => {
            let src = filled(s, elems / n)?;
            let dst = s.empty(&[elems], DType::F32, None)?;
            (messages, moved, reduced) =
                plan_load(topo, group, cal, &CollectiveOp::AllGather, elems)?;
            Call::AllGather(src, dst)
        }
        Op::Elementwise => {
            let a = filled(s, elems)?;
            work = 3.0 * (elems * 4) as f64;
            Call::Func(
                s.get_global_func("tensor.add")?,
                vec![Arg::Ref(a), Arg::Ref(a)],
            )
        }
        Op::Gemm => {
            let m = t.size;
            let flat = filled(s, m * m)?;
            let reshape = s.get_global_func("tensor.reshape")?;
            let (a, _) = s.call_packed(
                &reshape,
                &[Arg::Ref(flat), Arg::Int(m as i64), Arg::Int(m as i64)],
            )?;
            work = 2.0 * (m * m * m) as f64;
            Call::Func(
                s.get_global_func("tensor.matmul")?,
                vec![Arg::Ref(a), Arg::Ref(a)],
            )
        }
    };
    let stats = Stats::of(&[0.0]).expect("one sample");
    Ok(Prepared {
        measured: Measured {
            op: t.op,
            size: if t.op == Op::Gemm { t.size } else { elems * 4 },
            ranks: t.ranks,
            stats,
            messages,
            moved_bytes: moved,
            reduced_bytes: reduced,
            work,
        },
        call,
    })
}
