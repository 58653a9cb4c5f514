//! One training step of a model under a strategy on a topology: every
//! distinct chunk program (forward and backward of one microbatch), the
//! gradient reduction and the optimizer are propagated, partitioned and
//! timed on the topology's devices; the pipeline schedule composes the pass
//! times with the transfers between stages; memory adds the model states,
//! the activations the schedule keeps in flight and the largest transient.
//!
//! Devices are laid out as Megatron-LM orders ranks: tensor-parallel ranks
//! fastest (inside a node), then context-parallel ranks, then data-parallel
//! replicas, then pipeline stages. Stages and replicas are alike (up to the first and last chunk),
//! so each program is timed once, on the first stage's devices.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::base::DType;
use crate::exec::timed::{run_timed_classes, CommMemo, OomPolicy, TimedOptions};
use crate::ir::mlir::parse_and_verify;
use crate::partition::{partition, SpmdProgram};
use crate::propagate::{propagate_module, Strategy as Propagation};
use crate::topology::Topology;

use super::analytic;
use super::chunk::{
    backward_program, chunk_gather_units, chunk_kinds, chunk_weights, dense_layers_in,
    forward_program, local_elements, ChunkKind,
};
use super::optimizer::{gather_program, optimizer_buffers, optimizer_program, reduce_program};
use super::pipeline::{
    run_schedule, schedule_order, too_long, PassTimes, PipelineRun, MAX_STEP_PS,
};
use super::spec::ModelSpec;
use super::strategy::{Recompute, Strategy};
use super::ModelError;

/// Kernel efficiencies of the builders' programs per device model (see
/// the file).
pub const KERNELS_TOML: &str = include_str!("kernels.toml");

/// Timed-run options for model steps: [`KERNELS_TOML`] and fusion.
pub fn model_timed_options() -> TimedOptions {
    TimedOptions {
        roofline: crate::exec::timed::parse_roofline(KERNELS_TOML)
            .expect("the compiled-in kernel table is valid"),
        fusion: true,
        ..TimedOptions::default()
    }
}

/// A program timed on the topology.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct TimedProgram {
    pub time_ps: u64,
    /// Bytes of the arguments on one device.
    pub arg_bytes: u64,
    /// Bytes of the results on one device.
    pub result_bytes: u64,
    /// Peak bytes in use on one device during the program.
    pub peak_bytes: u64,
    /// Bytes the device sends in collectives.
    pub collective_bytes: u64,
    /// Time the compute stream was busy.
    pub compute_ps: u64,
    /// Communication during which the compute stream was idle.
    pub exposed_comm_ps: u64,
}

/// The passes of one kind of chunk.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChunkTiming {
    pub layers: u64,
    pub embed: bool,
    pub head: bool,
    pub forward: TimedProgram,
    pub backward: TimedProgram,
    pub reduce: TimedProgram,
    pub optimizer: TimedProgram,
    /// ZeRO-3's all-gather of the chunk's parameters (zero otherwise).
    pub gather: TimedProgram,
    /// Activations the forward keeps for the backward (one microbatch).
    pub kept_bytes: u64,
    /// Parameters on one device.
    pub params: u64,
    /// Bytes of the parameters (compute type) one device keeps between
    /// steps: a shard under ZeRO-3.
    pub param_bytes: u64,
    /// Bytes of the gradient accumulators on one device: a shard under
    /// ZeRO-2 and 3.
    pub grad_bytes: u64,
    /// Bytes of the whole parameters (compute type) of the chunk on one
    /// device, as a pass uses them.
    pub whole_param_bytes: u64,
    /// Elements on one device of the two largest units ZeRO-3 gathers
    /// whole (a layer, the embedding, a separate output table), largest
    /// first.
    pub largest_units: [u64; 2],
    /// Elements on one device of the chunk's largest layer.
    pub largest_layer: u64,
}

/// Memory of the fullest device.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepMemory {
    /// Parameters, gradients, master weights and moments.
    pub model_state_bytes: u64,
    /// Activations kept for backward passes at the schedule's fullest.
    pub activation_bytes: u64,
    /// The largest transient of one pass over what it takes and returns.
    pub transient_bytes: u64,
    pub peak_bytes: u64,
    pub capacity_bytes: u64,
    /// Pipeline stage of the fullest device.
    pub stage: u64,
    /// Chunk activations in flight on it at most.
    pub in_flight: u64,
    /// Parameters on that device.
    pub params: u64,
    /// Whether the peak fits the device's memory.
    pub fits: bool,
}

/// One simulated training step.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepReport {
    pub model: String,
    pub gpus: u64,
    pub microbatches: u64,
    pub step_time_ps: u64,
    /// Time of the pipeline (all passes) without the gradient reduction
    /// and optimizer.
    pub pipeline_ps: u64,
    /// Stage time idle over the pipeline: the schedule's bubble plus any
    /// imbalance between stages (the embedding and the head sit on the
    /// first and last), so at least the closed form `(p-1)/(m+p-1)`.
    pub bubble_fraction: f64,
    pub transfer_ps: u64,
    /// All-reduce of the tied embedding's gradient between the first and
    /// the last stage (GPT-style models with pipeline parallelism).
    pub embedding_sync_ps: u64,
    pub chunks: Vec<ChunkTiming>,
    /// Model FLOPs of the step (forward and backward, no recomputation).
    pub model_flops: f64,
    /// With the recomputation's extra forward (as Narayanan et al. count
    /// with full recomputation).
    pub hardware_flops: f64,
    pub model_tflops_per_gpu: f64,
    pub hardware_tflops_per_gpu: f64,
    /// Model FLOP/s over the devices' peak for the compute type.
    pub mfu: f64,
    pub tokens_per_s: f64,
    pub memory: StepMemory,
}

/// Parse, propagate and partition `text`.
pub(super) fn partitioned(text: &str, what: &str) -> Result<SpmdProgram, ModelError> {
    let mut module =
        parse_and_verify(text).map_err(|e| ModelError::Program(format!("{what}: {e}")))?;
    propagate_module(&mut module, Propagation::default())
        .map_err(|e| ModelError::Program(format!("{what}: {e}")))?;
    partition(&module).map_err(|e| ModelError::Program(format!("{what}: {e}")))
}

pub(super) fn bytes_of(program: &SpmdProgram, slots: &[usize]) -> u64 {
    slots.iter().map(|&s| program.values[s].local_bytes()).sum()
}

/// Time `program` on `topo` (mesh device `i` on topology device `i`).
pub(super) fn timed(
    program: &SpmdProgram,
    topo: &Topology,
    opts: &TimedOptions,
    what: &str,
) -> Result<TimedProgram, ModelError> {
    let t = run_timed_classes(program, topo, opts)
        .map_err(|e| ModelError::Program(format!("{what}: {e}")))?;
    let peak = t.max_peak("global");
    let summary = crate::exec::timed::report::summarize_classes(&t, topo);
    let first = summary.per_device.first();
    Ok(TimedProgram {
        compute_ps: first.map_or(0, |u| u.compute_busy_ps),
        exposed_comm_ps: first.map_or(0, |u| u.exposed_comm_ps),
        time_ps: t.makespan_ps,
        arg_bytes: bytes_of(program, &program.args),
        result_bytes: bytes_of(program, &program.results),
        peak_bytes: peak,
        collective_bytes: program.total_collective_bytes(),
    })
}

/// Simulate one training step of `model` under `strategy` on `topo`.
pub fn simulate_step(
    model: &ModelSpec,
    strategy: &Strategy,
    topo: &Topology,
    base: &TimedOptions,
) -> Result<StepReport, ModelError> {
    model.check()?;
    strategy.check(model)?;
    let gpus = strategy.devices();
    if u64::from(topo.num_devices()) != gpus {
        return Err(ModelError::Strategy(format!(
            "tp x pp x dp x cp = {} x {} x {} x {} = {gpus} devices, the topology has {}",
            strategy.tp,
            strategy.pp,
            strategy.dp,
            strategy.cp,
            topo.num_devices()
        )));
    }
    let opts = TimedOptions {
        on_oom: OomPolicy::Continue,
        record_memory: false,
        fuse_attention: base.fusion && strategy.flash_attention,
        // Every program of the step runs on `topo` with one calibration.
        comm_memo: Some(std::sync::Arc::new(CommMemo::default())),
        ..base.clone()
    };
    let kinds = chunk_kinds(model, strategy)?;
    // Chunks differ only by embedding, head and their (dense) layers: time
    // each such class once.
    let class = |k: &ChunkKind| (k.embed, k.head, k.layers, dense_layers_in(model, *k));
    let mut by_class: BTreeMap<(bool, bool, u64, u64), ChunkTiming> = BTreeMap::new();
    for kind in &kinds {
        let class = class(kind);
        if by_class.contains_key(&class) {
            continue;
        }
        by_class.insert(
            class,
            time_chunk_scaled(model, strategy, *kind, topo, &opts)?,
        );
    }
    let timing = |k: &ChunkKind| &by_class[&class(k)];
    let (p, v) = (strategy.pp, strategy.virtual_stages);
    let m = strategy.microbatches();
    let transfer_ps = transfer_time(model, strategy, topo)?;
    let times = PassTimes {
        forward_ps: kinds
            .iter()
            .map(|k| timing(k).forward_pass_ps(strategy.zero))
            .collect(),
        backward_ps: kinds
            .iter()
            .map(|k| timing(k).backward_pass_ps(strategy.zero))
            .collect(),
        transfer_ps,
        blocking_sends: strategy.blocking_p2p,
    };
    let order = schedule_order(strategy.schedule, p, m, v);
    let run = run_schedule(&order, v, &times)?;
    let embedding_sync_ps = embedding_sync_time(model, strategy, topo)?;
    // Each stage then reduces its gradients and steps its optimizer.
    let mut step_time_ps = 0;
    let mut memory: Option<StepMemory> = None;
    for s in 0..p {
        let chunks: Vec<&ChunkTiming> = (0..v)
            .map(|c| timing(&kinds[(c * p + s) as usize]))
            .collect();
        // ZeRO-2 and 3 reduce-scatter each microbatch's gradients during
        // its backward (in the pass times); the others reduce once.
        let reduce: u64 = if strategy.zero >= 2 {
            0
        } else {
            chunks.iter().map(|c| c.reduce.time_ps).sum()
        };
        let optimize: u64 = if strategy.overlap_param_gather {
            // The distributed optimizer's parameter all-gather runs during
            // the next step's forward passes, bucket by bucket (Megatron's
            // --overlap-param-gather): only what outlasts the stage's
            // first forward pass (warm-up idle time included) shows.
            let compute: u64 = chunks.iter().map(|c| c.optimizer.compute_ps).sum();
            let comm: u64 = chunks
                .iter()
                .map(|c| c.optimizer.time_ps.saturating_sub(c.optimizer.compute_ps))
                .sum();
            let window = run
                .passes
                .iter()
                .filter(|t| t.stage == s && t.pass.forward)
                .map(|t| t.end_ps)
                .min()
                .unwrap_or(0);
            compute + comm.saturating_sub(window)
        } else {
            chunks.iter().map(|c| c.optimizer.time_ps).sum()
        };
        let end = run.stage_end_ps[s as usize];
        let reduced = if strategy.overlap_grad_reduce {
            end.max(run.last_backward_start_ps[s as usize].saturating_add(reduce))
        } else {
            end.saturating_add(reduce)
        };
        // The stages holding the tied table sum its gradient before their
        // optimizer steps (Megatron-LM's embedding all-reduce).
        let sync = if s == 0 || s + 1 == p {
            embedding_sync_ps
        } else {
            0
        };
        step_time_ps = step_time_ps.max(reduced.saturating_add(sync).saturating_add(optimize));
        let kept = held_activation_bytes(&run, s, &chunks);
        let mem = stage_memory(
            &chunks,
            run.max_in_flight[s as usize],
            kept,
            s,
            strategy,
            topo,
        );
        if memory
            .as_ref()
            .map_or(true, |m| mem.peak_bytes > m.peak_bytes)
        {
            memory = Some(mem);
        }
    }
    let memory = memory.expect("at least one stage");
    if step_time_ps >= MAX_STEP_PS {
        return Err(too_long("the step", step_time_ps as u128));
    }
    let model_flops = analytic::step_flops(model, strategy.global_batch, false);
    let hardware_flops = analytic::step_flops(
        model,
        strategy.global_batch,
        strategy.recompute == Recompute::Full,
    );
    let secs = step_time_ps as f64 * 1e-12;
    let per_gpu = |f: f64| f / secs / gpus as f64 / 1e12;
    let peak = device_peak_flops(topo, strategy.dtype());
    Ok(StepReport {
        model: model.name.clone(),
        gpus,
        microbatches: m,
        step_time_ps,
        pipeline_ps: run.makespan_ps,
        bubble_fraction: run.bubble_fraction(),
        transfer_ps,
        embedding_sync_ps,
        chunks: by_class.into_values().collect(),
        model_flops,
        hardware_flops,
        model_tflops_per_gpu: per_gpu(model_flops),
        hardware_tflops_per_gpu: per_gpu(hardware_flops),
        mfu: if peak > 0.0 {
            per_gpu(model_flops) * 1e12 / peak
        } else {
            0.0
        },
        tokens_per_s: (strategy.global_batch * model.seq) as f64 / secs,
        memory,
    })
}

/// A chunk of `L` identical layers timed from chunks of one and two
/// layers: every figure is `f(1) + (L - 1) (f(2) - f(1))` (layers run one
/// after another, so each adds the same time, bytes and parameters; exact
/// up to the overlap of a layer boundary's communication, which is the same
/// in both). A chunk whose first `k` layers are dense and the rest experts'
/// is its dense part timed alone plus `L - k` times what an expert layer
/// adds to a chunk of them.
fn time_chunk_scaled(
    model: &ModelSpec,
    strategy: &Strategy,
    kind: ChunkKind,
    topo: &Topology,
    opts: &TimedOptions,
) -> Result<ChunkTiming, ModelError> {
    let dense = dense_layers_in(model, kind);
    if dense > 0 && dense < kind.layers {
        let base = time_chunk_scaled(
            model,
            strategy,
            ChunkKind {
                layers: dense,
                ..kind
            },
            topo,
            opts,
        )?;
        let experts = |layers| ChunkKind {
            layers,
            first_layer: kind.first_layer + dense,
            embed: false,
            head: false,
        };
        let one = time_chunk(model, strategy, experts(1), topo, opts)?;
        let two = time_chunk(model, strategy, experts(2), topo, opts)?;
        return Ok(extended(
            &base,
            &one,
            &two,
            kind.layers - dense,
            kind.layers,
        ));
    }
    if kind.layers <= 2 {
        return time_chunk(model, strategy, kind, topo, opts);
    }
    let one = time_chunk(model, strategy, ChunkKind { layers: 1, ..kind }, topo, opts)?;
    let two = time_chunk(model, strategy, ChunkKind { layers: 2, ..kind }, topo, opts)?;
    Ok(extended(&one, &one, &two, kind.layers - 1, kind.layers))
}

/// `base` plus `n` times what a layer adds (`two - one`), as a chunk of
/// `layers` layers.
fn extended(
    base: &ChunkTiming,
    one: &ChunkTiming,
    two: &ChunkTiming,
    n: u64,
    layers: u64,
) -> ChunkTiming {
    // Saturating: a chunk too long for 64-bit picoseconds stays at the
    // top of the range, where `run_schedule` refuses it (it wrapped).
    let ext = |a: u64, b: u64, c: u64| a.saturating_add(n.saturating_mul(c.saturating_sub(b)));
    let prog = |a: &TimedProgram, b: &TimedProgram, c: &TimedProgram| TimedProgram {
        time_ps: ext(a.time_ps, b.time_ps, c.time_ps),
        arg_bytes: ext(a.arg_bytes, b.arg_bytes, c.arg_bytes),
        result_bytes: ext(a.result_bytes, b.result_bytes, c.result_bytes),
        peak_bytes: ext(a.peak_bytes, b.peak_bytes, c.peak_bytes),
        collective_bytes: ext(a.collective_bytes, b.collective_bytes, c.collective_bytes),
        compute_ps: ext(a.compute_ps, b.compute_ps, c.compute_ps),
        exposed_comm_ps: ext(a.exposed_comm_ps, b.exposed_comm_ps, c.exposed_comm_ps),
    };
    ChunkTiming {
        layers,
        embed: base.embed,
        head: base.head,
        forward: prog(&base.forward, &one.forward, &two.forward),
        backward: prog(&base.backward, &one.backward, &two.backward),
        reduce: prog(&base.reduce, &one.reduce, &two.reduce),
        optimizer: prog(&base.optimizer, &one.optimizer, &two.optimizer),
        gather: prog(&base.gather, &one.gather, &two.gather),
        kept_bytes: ext(base.kept_bytes, one.kept_bytes, two.kept_bytes),
        params: ext(base.params, one.params, two.params),
        param_bytes: ext(base.param_bytes, one.param_bytes, two.param_bytes),
        grad_bytes: ext(base.grad_bytes, one.grad_bytes, two.grad_bytes),
        whole_param_bytes: ext(
            base.whole_param_bytes,
            one.whole_param_bytes,
            two.whole_param_bytes,
        ),
        // The `n` added layers are like `two`'s (two of them at most can
        // be among the largest).
        largest_units: largest_two(
            base.largest_units
                .into_iter()
                .chain(std::iter::repeat(two.largest_layer).take(n.min(2) as usize)),
        ),
        largest_layer: base.largest_layer.max(two.largest_layer),
    }
}

/// The two largest of `units`, largest first (0 where there are fewer).
fn largest_two(units: impl IntoIterator<Item = u64>) -> [u64; 2] {
    let mut all: Vec<u64> = units.into_iter().collect();
    all.sort_unstable_by(|a, b| b.cmp(a));
    [
        all.first().copied().unwrap_or(0),
        all.get(1).copied().unwrap_or(0),
    ]
}

/// Bytes of the activations the forward of chunk `kind` keeps for its
/// backward, on one device (partitioned, not timed).
pub fn kept_activation_bytes(
    model: &ModelSpec,
    strategy: &Strategy,
    kind: ChunkKind,
) -> Result<u64, ModelError> {
    let f = partitioned(&forward_program(model, strategy, kind), "chunk forward")?;
    Ok(bytes_of(&f, &f.results[1..]))
}

/// Forward, backward, reduction and optimizer of one chunk, timed.
fn time_chunk(
    model: &ModelSpec,
    strategy: &Strategy,
    kind: ChunkKind,
    topo: &Topology,
    opts: &TimedOptions,
) -> Result<ChunkTiming, ModelError> {
    let f = partitioned(&forward_program(model, strategy, kind), "chunk forward")?;
    let b = partitioned(&backward_program(model, strategy, kind), "chunk backward")?;
    let weights = chunk_weights(model, strategy, kind);
    // Gradients reduce over data x context.
    let group = strategy.reduction();
    let buffers = optimizer_buffers(&weights, &group);
    let r = partitioned(&reduce_program(&buffers, &group), "gradient reduction")?;
    let o = partitioned(&optimizer_program(&buffers, &group), "optimizer")?;
    let gather = if strategy.zero >= 3 {
        let g = partitioned(&gather_program(&buffers, &group), "parameter gather")?;
        timed(&g, topo, opts, "parameter gather")?
    } else {
        TimedProgram::default()
    };
    // One replica's whole gradients (the reduction's stacked argument holds
    // one replica's on each device), reduced into the optimizer's sharding.
    let whole_param_bytes = bytes_of(&r, &r.args);
    let reduced_bytes = bytes_of(&r, &r.results);
    // The optimizer returns, per weight, master weights, moments and the
    // parameters kept between steps (every fourth result).
    let param_bytes: u64 = o.results[3..]
        .iter()
        .step_by(4)
        .map(|&s| o.values[s].local_bytes())
        .sum();
    let (units, others) = chunk_gather_units(model, strategy, kind);
    // With tensor-parallel overlap, Transformer Engine's userbuffers run the
    // layers' tensor-parallel all-gathers and reduce-scatters: one-shot
    // reads and writes of every peer's buffer over NVLink, not NCCL rings
    // (the embedding's and output layer's, NCCL's in Megatron-Core, are
    // timed so too: two of a chunk's).
    let userbuffers = strategy.tp_comm_overlap && strategy.sequence_parallel && strategy.tp > 1;
    let pass_opts = TimedOptions {
        node_local_algorithm: userbuffers.then_some(crate::collective::Algorithm::Direct),
        // Userbuffers copy into a peer's buffer and set a flag there: no NCCL
        // launch or per-step handshake, for the layers' collectives and the
        // ring exchanges' sends. With context parallelism ring attention's
        // sends (NCCL's, inside a node as well) could not be told apart from
        // the ring exchanges': there it stays NCCL's latencies throughout.
        node_local_latency_free: userbuffers && strategy.cp == 1,
        ..opts.clone()
    };
    // Results of the forward after its output (or loss): the kept activations.
    let kept_bytes = bytes_of(&f, &f.results[1..]);
    let params = weights
        .iter()
        .map(|(shape, dims)| local_elements(shape, dims, strategy))
        .sum();
    Ok(ChunkTiming {
        layers: kind.layers,
        embed: kind.embed,
        head: kind.head,
        forward: timed(&f, topo, &pass_opts, "chunk forward")?,
        // The backward updates its gradient accumulators (its last
        // arguments) in place, as Megatron-LM's fused accumulation does.
        backward: timed(
            &b,
            topo,
            &TimedOptions {
                donated_args: (b.args.len().saturating_sub(weights.len())..b.args.len()).collect(),
                ..pass_opts.clone()
            },
            "chunk backward",
        )?,
        reduce: timed(&r, topo, opts, "gradient reduction")?,
        optimizer: timed(&o, topo, opts, "optimizer")?,
        gather,
        kept_bytes,
        params,
        param_bytes,
        grad_bytes: if strategy.zero >= 2 {
            reduced_bytes
        } else {
            whole_param_bytes
        },
        whole_param_bytes,
        largest_units: largest_two(units.iter().chain(&others).copied()),
        largest_layer: units.iter().copied().max().unwrap_or(0),
    })
}

/// The most activation bytes stage `s` keeps at once: its passes in the
/// order it ran them, each forward adding what its chunk keeps and each
/// backward freeing it. With interleaving the chunks differ (the one with
/// the output layer keeps the logits), so this is not the most chunks in
/// flight times the largest chunk's bytes.
fn held_activation_bytes(run: &PipelineRun, s: u64, chunks: &[&ChunkTiming]) -> u64 {
    let (mut held, mut most) = (0u64, 0u64);
    for t in run.passes.iter().filter(|t| t.stage == s) {
        let kept = chunks[t.pass.local_chunk as usize].kept_bytes;
        if t.pass.forward {
            held += kept;
            most = most.max(held);
        } else {
            held -= kept;
        }
    }
    most
}

/// Memory of a device of stage `s` holding `chunks`: parameters and
/// gradient accumulators (the backward's weight arguments), optimizer
/// state (the optimizer's fp32 arguments), activations in flight
/// (`activation_bytes`, at the schedule's fullest) and the largest
/// transient of a pass.
fn stage_memory(
    chunks: &[&ChunkTiming],
    in_flight: u64,
    activation_bytes: u64,
    s: u64,
    strategy: &Strategy,
    topo: &Topology,
) -> StepMemory {
    let zero = strategy.zero;
    let (param_b, grad_b) = (
        strategy.dtype().size_bytes(),
        strategy.grad_dtype().size_bytes(),
    );
    let params: u64 = chunks.iter().map(|c| c.params).sum();
    let states: u64 = chunks.iter().map(|c| c.model_state_bytes()).sum();
    let transient_bytes = chunks
        .iter()
        .map(|c| {
            let b = c.backward.peak_bytes.saturating_sub(c.backward.arg_bytes);
            // The forward's peak holds the activations it keeps, which
            // `activation_bytes` already counts among those in flight: its
            // transient is what it needs beyond them.
            let f = c
                .forward
                .peak_bytes
                .saturating_sub(c.forward.arg_bytes)
                .saturating_sub(c.kept_bytes);
            // Sharded states: the largest unit's gradients before their
            // reduce-scatter (ZeRO-2, 3) and two units' gathered
            // parameters, the one in use and the one prefetched (ZeRO-3):
            // at most the two largest (the embedding table is often one).
            let [first, second] = c.largest_units;
            let sharded = match zero {
                0 | 1 => 0,
                2 => first * grad_b,
                _ => first * grad_b + (first + second) * param_b,
            };
            b.max(f) + sharded
        })
        .max()
        .unwrap_or(0);
    let capacity_bytes = device_capacity(topo);
    StepMemory {
        model_state_bytes: states,
        activation_bytes,
        transient_bytes,
        peak_bytes: states + activation_bytes + transient_bytes,
        fits: capacity_bytes == 0 || states + activation_bytes + transient_bytes <= capacity_bytes,
        capacity_bytes,
        stage: s,
        in_flight,
        params,
    }
}

impl ChunkTiming {
    /// Model-state bytes of the chunk on one device: parameters and
    /// gradient accumulators in the compute type (shards as the ZeRO stage
    /// says), fp32 master weights and moments.
    pub fn model_state_bytes(&self) -> u64 {
        self.optimizer_state_bytes() + self.param_bytes + self.grad_bytes
    }

    /// Bytes of fp32 master weights and moments on one device.
    pub fn optimizer_state_bytes(&self) -> u64 {
        // The optimizer takes the reduced gradients (the reduction's
        // results), master weights and both moments.
        self.optimizer.arg_bytes - self.reduce.result_bytes
    }

    /// A forward pass of one microbatch: under ZeRO-3 each layer's
    /// parameters are gathered while the layer before computes (prefetch),
    /// so only the first layer's gather is exposed.
    pub fn forward_pass_ps(&self, zero: u8) -> u64 {
        if zero < 3 {
            return self.forward.time_ps;
        }
        let g = self.gather.time_ps;
        self.forward
            .time_ps
            .max(g)
            .saturating_add(g / self.layers.max(1))
    }

    /// A backward pass of one microbatch: under ZeRO-2 and 3 its gradients
    /// are reduce-scattered bucket by bucket as layers finish (the last
    /// layer's exposed), after ZeRO-3's parameter gathers.
    pub fn backward_pass_ps(&self, zero: u8) -> u64 {
        if zero < 2 {
            return self.backward.time_ps;
        }
        let comm =
            self.reduce
                .time_ps
                .saturating_add(if zero >= 3 { self.gather.time_ps } else { 0 });
        self.backward
            .time_ps
            .max(comm)
            .saturating_add(comm / self.layers.max(1))
    }
}

/// Global memory of device 0 (0: unbounded).
pub(super) fn device_capacity(topo: &Topology) -> u64 {
    topo.device(0)
        .and_then(|d| topo.memory_scope(d, "global"))
        .map_or(0, |m| m.capacity.0)
}

/// Peak FLOP/s of device 0 for `dtype`.
fn device_peak_flops(topo: &Topology, dtype: DType) -> f64 {
    topo.device(0)
        .map(|d| {
            let c = topo.component(d);
            c.flops.get(&dtype).map_or(0.0, |r| r.0 as f64)
        })
        .unwrap_or(0.0)
}

/// Time to send one microbatch's activations from the last device of a
/// stage's first replica to the next stage: bytes over the route's slowest
/// link plus its latencies (sequence parallelism sends each tensor-parallel
/// rank's share, scattered as Megatron-LM's scatter-gather optimization).
fn transfer_time(
    model: &ModelSpec,
    strategy: &Strategy,
    topo: &Topology,
) -> Result<u64, ModelError> {
    if strategy.pp == 1 {
        return Ok(0);
    }
    let stage = strategy.tp * strategy.cp * strategy.dp;
    // Each context rank sends its share of the sequence.
    let mut bytes = strategy.micro_batch * model.seq / strategy.cp
        * model.hidden
        * strategy.dtype().size_bytes();
    if strategy.sequence_parallel || strategy.tp > 1 {
        bytes /= strategy.tp;
    }
    route_time(topo, 0, stage, bytes, "pipeline transfer")
}

/// The all-reduce of the tied embedding table's gradient between its two
/// holders, the first and the last stage (each tensor-parallel rank with its
/// vocabulary shard, every replica at once): a reduce-scatter and an
/// all-gather of two ranks, each moving half the shard. Zero without
/// pipeline parallelism or with untied tables (models with RoPE).
fn embedding_sync_time(
    model: &ModelSpec,
    strategy: &Strategy,
    topo: &Topology,
) -> Result<u64, ModelError> {
    if strategy.pp == 1 || model.rope {
        return Ok(0);
    }
    let shard = model.vocab / strategy.tp * model.hidden * strategy.grad_dtype().size_bytes();
    let last = (strategy.pp - 1) * strategy.tp * strategy.cp * strategy.dp;
    Ok(2 * route_time(topo, 0, last, shard / 2, "embedding gradient all-reduce")?)
}

/// Time to send `bytes` from device `from` to device `to`: bytes over the
/// route's slowest link plus its latencies.
pub(super) fn route_time(
    topo: &Topology,
    from: u64,
    to: u64,
    bytes: u64,
    what: &str,
) -> Result<u64, ModelError> {
    let id = |d: u64| {
        u32::try_from(d)
            .map_err(|_| ModelError::Program(format!("{what}: device {d} out of range")))
    };
    let route = topo
        .route_devices(id(from)?, id(to)?, 0)
        .map_err(|e| ModelError::Program(format!("{what}: {e}")))?;
    let mut latency = 0u64;
    let mut bw = u64::MAX;
    for l in &route {
        let link = topo.link(*l);
        latency += link.latency_ps();
        bw = bw.min(link.bandwidth_bytes_per_s());
    }
    if route.is_empty() || bw == 0 {
        return Ok(0);
    }
    Ok(latency + (bytes as f64 / bw as f64 * 1e12).ceil() as u64)
}
