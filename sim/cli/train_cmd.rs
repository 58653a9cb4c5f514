//! `shardsim train MODEL`: simulate one training step of a model preset (or a
//! model `.toml`) under a parallel strategy on a topology sized to the
//! strategy's devices; print step time, pipeline idle fraction, TFLOP/s per GPU,
//! MFU, tokens/s and memory per GPU; exit 3 when it does not fit.

use std::path::Path;

use anyhow::Context;
use clap::Args;

use shardsim::models::step::{model_timed_options, simulate_step, StepReport};
use shardsim::models::{ModelSpec, Recompute, Schedule, Strategy};

use super::output::{load_topology, Format};

#[derive(Debug, Args)]
pub struct TrainArgs {
    /// A model preset (gpt3-175b, llama3-8b, llama3-70b, llama3-405b, mixtral-8x7b, deepseek-moe-16b) or a model .toml file.
    model: String,
    /// A strategy .toml file (fields as the flags below); flags override it.
    #[arg(long)]
    strategy: Option<std::path::PathBuf>,
    /// Tensor parallelism: each layer's matmuls split over this many devices (Megatron).
    #[arg(long)]
    tp: Option<u64>,
    /// Pipeline parallelism: the layers split into this many stages.
    #[arg(long)]
    pp: Option<u64>,
    /// Data parallelism: model replicas, each on its share of the batch.
    #[arg(long)]
    dp: Option<u64>,
    /// Context parallelism: the sequence split over this many devices (ring attention).
    #[arg(long)]
    cp: Option<u64>,
    /// Expert parallelism (mixture-of-experts models): experts split over
    /// `ep` of the `dp` replicas, tokens exchanged by all-to-all.
    #[arg(long)]
    ep: Option<u64>,
    /// Model chunks per pipeline device (needs --schedule interleaved).
    #[arg(long)]
    virtual_stages: Option<u64>,
    /// Layers on the first pipeline stage; the stages between share the rest
    /// evenly (Megatron-Core's --decoder-first-pipeline-num-layers).
    #[arg(long)]
    first_stage_layers: Option<u64>,
    /// Layers on the last pipeline stage (--decoder-last-pipeline-num-layers).
    #[arg(long)]
    last_stage_layers: Option<u64>,
    /// Count the embedding as a layer where the layers split into stages: the
    /// first chunk holds one layer fewer (--account-for-embedding-in-pipeline-split).
    #[arg(long)]
    embedding_in_pipeline_split: bool,
    /// Count the output layer and loss as a layer: the last chunk holds one
    /// layer fewer (--account-for-loss-in-pipeline-split).
    #[arg(long)]
    loss_in_pipeline_split: bool,
    /// Sequences per microbatch.
    #[arg(long)]
    micro_batch: Option<u64>,
    /// Sequences per step over all replicas (default: dp x micro-batch x pp).
    #[arg(long)]
    global_batch: Option<u64>,
    /// ZeRO stage: 0, 1 (optimizer states sharded over dp), 2 (and gradients), 3 (and parameters: FSDP).
    #[arg(long)]
    zero: Option<u8>,
    /// Activation recomputation: none, selective (attention scores) or full (whole layers).
    #[arg(long, value_parser = ["none", "selective", "full"])]
    recompute: Option<String>,
    /// Megatron's sequence parallelism: layer norms and dropout split over the tensor ranks.
    #[arg(long)]
    sequence_parallel: bool,
    /// Pipeline schedule (interleaved needs --virtual-stages).
    #[arg(long, value_parser = ["gpipe", "1f1b", "interleaved"])]
    schedule: Option<String>,
    /// Attention as one fused kernel (no score matrix in memory).
    #[arg(long)]
    flash_attention: bool,
    /// Reduce gradients in buckets during the backward pass.
    #[arg(long)]
    overlap_grad_reduce: bool,
    /// Overlap the tensor-parallel all-gathers and reduce-scatters with the
    /// matmuls (Megatron-Core with Transformer Engine; needs --sequence-parallel)
    #[arg(long)]
    tp_comm_overlap: bool,
    /// Overlap the distributed optimizer's parameter all-gather with the next
    /// step's forward passes (needs --zero 1 or 2)
    #[arg(long)]
    overlap_param_gather: bool,
    /// Accumulate gradients and reduce them over the data replicas in fp32
    /// (Megatron-LM's default for bf16): 4 bytes per parameter
    #[arg(long)]
    accumulate_allreduce_grads_in_fp32: bool,
    /// Without flash attention, run the attention probabilities' dropout as a
    /// kernel of its own after the fused softmax (Megatron-LM 2021's kernels)
    #[arg(long)]
    separate_attention_dropout: bool,
    /// Compute the loss as Megatron-LM's vocab-parallel cross-entropy does:
    /// on an fp32 copy of the logits, one PyTorch kernel per step
    #[arg(long)]
    unfused_cross_entropy: bool,
    /// Training sequence length (the model's by default).
    #[arg(long)]
    seq: Option<u64>,
    #[command(flatten)]
    machine: MachineArgs,
    /// Write each chunk's forward and backward programs, the gradient
    /// reduction and the optimizer (`.mlir`) into this directory.
    #[arg(long)]
    emit: Option<std::path::PathBuf>,
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
}

/// A report with what made it: the strategy, the machine and its
/// overrides, as every other summary records them (two `train --format
/// json` runs of different strategies printed the same bytes when their
/// figures agreed, e.g. `--zero 1` at one replica).
#[derive(serde::Serialize)]
pub(super) struct Recorded<'a, R: serde::Serialize> {
    #[serde(flatten)]
    pub report: &'a R,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub strategy: Option<&'a Strategy>,
    pub topology: &'a str,
    pub overrides: &'a [String],
    pub roofline: Option<&'a Path>,
}

/// The machine a model runs on: `train` and `infer` alike.
#[derive(Debug, Args)]
pub(super) struct MachineArgs {
    /// Topology preset or file; its node count follows the devices used.
    #[arg(long, default_value = "dgx-h100")]
    pub(super) topology: String,
    /// Topology overrides (KEY=VALUE), as `topology --set` takes them.
    #[arg(long)]
    pub(super) set: Vec<String>,
    /// Kernel efficiency table (the form of sim/models/kernels.toml).
    #[arg(long)]
    pub(super) roofline: Option<std::path::PathBuf>,
}

impl MachineArgs {
    /// The topology at as many nodes as `gpus` devices fill (switches grown
    /// to fit, see [`shardsim::topology::load_nodes`]); fewer devices than
    /// one node only when `part_of_a_node` (the others stay idle); `flags`
    /// name what sets the device count, for the error.
    pub(super) fn sized(
        &self,
        gpus: u64,
        part_of_a_node: bool,
        what: &str,
        flags: &str,
    ) -> anyhow::Result<shardsim::topology::Topology> {
        // The node count follows the devices: a `--set nodes` would be
        // overridden (and was reported as contradicting a `--nodes 1`
        // that `train` and `infer` do not have).
        if let Some(s) = self
            .set
            .iter()
            .find(|s| s.split_once('=').is_some_and(|(k, _)| k.trim() == "nodes"))
        {
            anyhow::bail!(
                "--set {}: the node count follows the devices {flags} use; set those instead",
                s.trim()
            );
        }
        let per_node = load_topology(&self.topology, Some(1), &self.set)
            .map_err(without_one_node)?
            .num_devices();
        let per_node = u64::from(per_node);
        let partial = part_of_a_node && gpus < per_node;
        if per_node == 0 || (!partial && gpus % per_node != 0) {
            anyhow::bail!(
                "{what} uses {gpus} device{}, not a whole number of {per_node}-device {} nodes (set {flags} so that their product is a multiple of {per_node})",
                if gpus == 1 { "" } else { "s" },
                self.topology
            );
        }
        let nodes = u32::try_from(gpus.div_ceil(per_node)).context("too many nodes")?;
        let set = self
            .set
            .iter()
            .map(|s| shardsim::topology::Override::parse(s))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(shardsim::topology::load_nodes(&self.topology, nodes, &set)?)
    }

    /// The models' timed-run options with `--roofline`'s table.
    pub(super) fn timed_options(&self) -> anyhow::Result<shardsim::exec::timed::TimedOptions> {
        let mut opts = model_timed_options();
        if let Some(path) = &self.roofline {
            opts.roofline = super::output::read_roofline(path)?;
        }
        Ok(opts)
    }
}

/// A `--set` error of the one-node load without the `nodes=1` it added
/// (`--set nodes=1 nvlink.bandwidth=0GB/s: ...` named a flag not given).
fn without_one_node(e: anyhow::Error) -> anyhow::Error {
    match e.downcast::<shardsim::topology::TopologyError>() {
        Ok(shardsim::topology::TopologyError::Override { key, message }) => {
            let key = key.strip_prefix("nodes=1 ").unwrap_or(&key).to_string();
            shardsim::topology::TopologyError::Override { key, message }.into()
        }
        Ok(other) => other.into(),
        Err(e) => e,
    }
}

pub(super) fn model_of(name: &str) -> anyhow::Result<ModelSpec> {
    if name.ends_with(".toml") || Path::new(name).exists() {
        let text = super::output::read_text(Path::new(name))?;
        return ModelSpec::from_toml(&text).map_err(|e| anyhow::anyhow!(e.in_file(name)));
    }
    Ok(ModelSpec::preset(name)?)
}

fn strategy_of(args: &TrainArgs) -> anyhow::Result<Strategy> {
    // A file need not give `global_batch`: the flag, or its default
    // (dp x micro-batch x pp), fills it in as without a file.
    let mut batch_given = args.global_batch.is_some();
    let mut s = match &args.strategy {
        Some(p) => {
            let text = super::output::read_text(p)?;
            let (s, given) = Strategy::from_file_toml(&text)
                .map_err(|e| anyhow::anyhow!(e.in_file(&p.display().to_string())))?;
            batch_given |= given;
            s
        }
        None => Strategy::from_toml("global_batch = 1")?,
    };
    let set = |v: Option<u64>, f: &mut u64| {
        if let Some(v) = v {
            *f = v;
        }
    };
    set(args.tp, &mut s.tp);
    set(args.pp, &mut s.pp);
    set(args.dp, &mut s.dp);
    set(args.cp, &mut s.cp);
    set(args.ep, &mut s.ep);
    set(args.virtual_stages, &mut s.virtual_stages);
    set(args.micro_batch, &mut s.micro_batch);
    s.first_stage_layers = args.first_stage_layers.or(s.first_stage_layers);
    s.last_stage_layers = args.last_stage_layers.or(s.last_stage_layers);
    s.embedding_in_pipeline_split |= args.embedding_in_pipeline_split;
    s.loss_in_pipeline_split |= args.loss_in_pipeline_split;
    set(args.global_batch, &mut s.global_batch);
    if !batch_given {
        // One microbatch per pipeline stage and replica unless told.
        s.global_batch = s.default_global_batch()?;
    }
    if let Some(z) = args.zero {
        s.zero = z;
    }
    if let Some(r) = &args.recompute {
        s.recompute = match r.as_str() {
            "selective" => Recompute::Selective,
            "full" => Recompute::Full,
            _ => Recompute::None,
        };
    }
    if let Some(k) = &args.schedule {
        s.schedule = match k.as_str() {
            "gpipe" => Schedule::Gpipe,
            "interleaved" => Schedule::Interleaved,
            _ => Schedule::OneFOneB,
        };
    }
    s.sequence_parallel |= args.sequence_parallel;
    s.flash_attention |= args.flash_attention;
    s.overlap_grad_reduce |= args.overlap_grad_reduce;
    s.tp_comm_overlap |= args.tp_comm_overlap;
    s.overlap_param_gather |= args.overlap_param_gather;
    s.accumulate_allreduce_grads_in_fp32 |= args.accumulate_allreduce_grads_in_fp32;
    s.separate_attention_dropout |= args.separate_attention_dropout;
    s.unfused_cross_entropy |= args.unfused_cross_entropy;
    Ok(s)
}

pub fn run(args: TrainArgs) -> anyhow::Result<()> {
    let mut model = model_of(&args.model)?;
    if let Some(seq) = args.seq {
        model.seq = seq;
    }
    let strategy = strategy_of(&args)?;
    strategy.check(&model)?;
    // With one stage there is no pipeline to schedule: every schedule is
    // the same run (Megatron-LM refuses interleaving without pipeline stages).
    if let (Some(k), 1) = (&args.schedule, strategy.pp) {
        anyhow::bail!(
            "--schedule {k} needs pipeline stages (--pp above 1): with pp = 1 there is nothing to schedule"
        );
    }
    // The kernel it splits out exists only without flash attention, in a
    // model with attention dropout: elsewhere the flag would do nothing.
    if args.separate_attention_dropout && (strategy.flash_attention || !model.dropout) {
        anyhow::bail!(
            "--separate-attention-dropout changes nothing here: {} (it splits out the dropout kernel of unfused attention)",
            if strategy.flash_attention {
                "flash attention fuses the dropout".to_string()
            } else {
                format!("`{}` has no attention dropout", model.name)
            }
        );
    }
    // Flags that change nothing at this strategy's sizes (the step's
    // figures came out byte for byte the same) are refused as
    // --separate-attention-dropout is: one replica has nothing to shard
    // or gather, one tensor rank nothing to split.
    let replicas = strategy.dp * strategy.cp;
    for (given, flag, why) in [
        (
            args.sequence_parallel && strategy.tp == 1,
            "--sequence-parallel",
            "tp = 1: no tensor ranks to split layer norms and dropout over",
        ),
        (
            args.tp_comm_overlap && strategy.tp == 1,
            "--tp-comm-overlap",
            "tp = 1: no tensor-parallel communication to overlap",
        ),
        (
            args.zero == Some(1) && replicas == 1,
            "--zero 1",
            "dp x cp = 1: one replica, no optimizer states to shard over replicas",
        ),
        (
            args.overlap_param_gather && replicas == 1,
            "--overlap-param-gather",
            "dp x cp = 1: one replica, no parameters to gather",
        ),
    ] {
        if given {
            anyhow::bail!("{flag} changes nothing here: {why}");
        }
    }
    let topo = args.machine.sized(
        strategy.devices(),
        false,
        &format!(
            "the strategy (tp {} x pp {} x dp {} x cp {})",
            strategy.tp, strategy.pp, strategy.dp, strategy.cp
        ),
        "--tp, --pp, --dp and --cp",
    )?;
    if let Some(dir) = &args.emit {
        super::output::check_out_dir(dir, "--emit")?;
    }
    let mut opts = args.machine.timed_options()?;
    let bar = super::progress::TimedBar::new("train");
    opts.progress = Some(bar.hook());
    let report = simulate_step(&model, &strategy, &topo, &opts)?;
    drop(bar);
    // After the step: a run that fails leaves no programs behind.
    if let Some(dir) = &args.emit {
        emit_programs(&model, &strategy, dir)?;
    }
    match args.format {
        Format::Json => outln!(
            "{}",
            serde_json::to_string_pretty(&Recorded {
                report: &report,
                strategy: Some(&strategy),
                topology: &args.machine.topology,
                overrides: &args.machine.set,
                roofline: args.machine.roofline.as_deref(),
            })?
        )?,
        Format::Text => crate::cli::output::print_out(&text(&report))?,
    }
    if !report.memory.fits {
        return Err(super::OutOfMemory(format!(
            "stage {} needs {:.2} GiB per GPU, the device has {:.0} GiB",
            report.memory.stage,
            gib(report.memory.peak_bytes),
            gib(report.memory.capacity_bytes)
        ))
        .into());
    }
    Ok(())
}

/// Write the programs of every chunk class into `dir`.
fn emit_programs(model: &ModelSpec, strategy: &Strategy, dir: &Path) -> anyhow::Result<()> {
    use shardsim::models::chunk::{backward_program, chunk_kinds, chunk_weights, forward_program};
    use shardsim::models::optimizer::{optimizer_buffers, optimizer_program, reduce_program};
    crate::cli::output::create_out_dir(dir, "--emit")?;
    let kinds = chunk_kinds(model, strategy)?;
    let role = |k: &shardsim::models::chunk::ChunkKind| match (k.embed, k.head) {
        (true, true) => "whole",
        (true, false) => "first",
        (false, true) => "last",
        (false, false) => "middle",
    };
    let mut seen = std::collections::BTreeSet::new();
    for &kind in &kinds {
        let name = role(&kind);
        if !seen.insert((name, kind.layers)) {
            continue;
        }
        // Chunks of one role with other layer counts (uneven stages) each
        // get files of their own, named by their layers.
        let name = if kinds
            .iter()
            .any(|k| role(k) == name && k.layers != kind.layers)
        {
            format!("{name}{}", kind.layers)
        } else {
            name.to_string()
        };
        let group = strategy.reduction();
        let weights = optimizer_buffers(&chunk_weights(model, strategy, kind), &group);
        for (what, text) in [
            ("forward", forward_program(model, strategy, kind)),
            ("backward", backward_program(model, strategy, kind)),
            ("reduce", reduce_program(&weights, &group)),
            ("optimizer", optimizer_program(&weights, &group)),
        ] {
            let path = dir.join(format!("{name}_{what}.mlir"));
            super::output::write_output(Some(&path), &text)?;
        }
    }
    Ok(())
}

pub(super) fn gib(b: u64) -> f64 {
    b as f64 / (1u64 << 30) as f64
}

fn text(r: &StepReport) -> String {
    let ms = |ps: u64| ps as f64 * 1e-9;
    let mut out = format!(
        "{} on {} GPUs, {} microbatches\n\
         step time        {:.2} ms (pipeline {:.2} ms, idle {:.1}% = bubble + stage imbalance, stage transfer {:.3} ms, embedding all-reduce {:.3} ms)\n\
         TFLOP/s per GPU  {:.1} model, {:.1} with recomputation; MFU {:.1}%\n\
         tokens/s         {:.0}\n\
         memory per GPU   {:.2} GiB peak of {:.0} GiB (model states {:.2}, activations {:.2} = {} in flight, transient {:.2}; stage {}, {:.2}e9 parameters)\n",
        r.model,
        r.gpus,
        r.microbatches,
        ms(r.step_time_ps),
        ms(r.pipeline_ps),
        100.0 * r.bubble_fraction,
        ms(r.transfer_ps),
        ms(r.embedding_sync_ps),
        r.model_tflops_per_gpu,
        r.hardware_tflops_per_gpu,
        100.0 * r.mfu,
        r.tokens_per_s,
        gib(r.memory.peak_bytes),
        gib(r.memory.capacity_bytes),
        gib(r.memory.model_state_bytes),
        gib(r.memory.activation_bytes),
        r.memory.in_flight,
        gib(r.memory.transient_bytes),
        r.memory.stage,
        r.memory.params as f64 / 1e9,
    );
    if !r.memory.fits {
        out.push_str(&format!(
            "OUT OF MEMORY    stage {} needs {:.2} GiB per GPU, the device has {:.0} GiB\n",
            r.memory.stage,
            gib(r.memory.peak_bytes),
            gib(r.memory.capacity_bytes)
        ));
    }
    out.push_str("chunk            forward_ms (exposed comm) backward_ms (exposed comm) reduce_ms optimizer_ms kept_GiB\n");
    for c in &r.chunks {
        let name = match (c.embed, c.head) {
            (true, true) => "embed+head",
            (true, false) => "first",
            (false, true) => "last",
            (false, false) => "middle",
        };
        out.push_str(&format!(
            "{:<16} {:>10.3} {:>15.3} {:>11.3} {:>15.3} {:>9.3} {:>12.3} {:>8.3}\n",
            format!("{name} x{}", c.layers),
            ms(c.forward.time_ps),
            ms(c.forward.exposed_comm_ps),
            ms(c.backward.time_ps),
            ms(c.backward.exposed_comm_ps),
            ms(c.reduce.time_ps),
            ms(c.optimizer.time_ps),
            gib(c.kept_bytes)
        ));
    }
    out
}
