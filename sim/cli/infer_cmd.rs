//! `shardsim infer MODEL`: simulate serving a model preset (or a model
//! `.toml`): the prefill of a batch of prompts and the decode steps that
//! follow, with tensor and pipeline parallelism and independent replicas, on
//! a topology sized to the devices; print time to first token, decode step
//! time, tokens/s and memory per GPU (weights, key/value cache); exit 3
//! when it does not fit.

use clap::Args;

use shardsim::models::inference::{
    simulate_inference, InferenceReport, PassTiming, RoutedExperts, Serving,
};

use super::output::Format;
use super::train_cmd::{gib, model_of, MachineArgs};

#[derive(Debug, Args)]
pub struct InferArgs {
    /// A model preset (gpt3-175b, llama3-8b, llama3-70b, llama3-405b, mixtral-8x7b, deepseek-moe-16b) or a model .toml file.
    model: String,
    /// Tensor parallelism: each layer's matmuls and heads split over this many devices.
    #[arg(long, default_value_t = 1)]
    tp: u64,
    /// Pipeline parallelism: the layers split into this many stages.
    #[arg(long, default_value_t = 1)]
    pp: u64,
    /// Independent replicas, each serving its own batch.
    #[arg(long, default_value_t = 1)]
    dp: u64,
    /// Expert parallelism (MoE models): each group of `ep` replicas splits
    /// the routed experts and exchanges tokens by all-to-all; divides --dp.
    #[arg(long, default_value_t = 1)]
    ep: u64,
    /// Sequences decoded together on one replica.
    #[arg(long, default_value_t = 1)]
    batch: u64,
    /// Prompt tokens per sequence (the model's sequence length by default).
    #[arg(long)]
    prompt: Option<u64>,
    /// Tokens generated per sequence.
    #[arg(long, default_value_t = 128)]
    generate: u64,
    /// Weights, activations and key/value cache element type.
    #[arg(long, value_parser = ["bf16", "f32"], default_value = "bf16")]
    precision: String,
    /// How decode steps run an MoE model's routed experts: gather each
    /// token's experts by index (only their weights are read), dispatch
    /// through every local expert, or auto (gather when fewer token slots
    /// than experts and ep = 1).
    #[arg(long, value_parser = ["auto", "gather", "dispatch"], default_value = "auto")]
    routed: String,
    /// (one node when fewer devices than a node has: the others stay idle)
    #[command(flatten)]
    machine: MachineArgs,
    /// Write the programs timed (`prefill_layer`, `decode_layer`,
    /// `embedding`, `head` for each pass, `.mlir`) into this directory.
    #[arg(long)]
    emit: Option<std::path::PathBuf>,
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
}

pub fn run(args: InferArgs) -> anyhow::Result<()> {
    let model = model_of(&args.model)?;
    let serving = Serving {
        tp: args.tp,
        pp: args.pp,
        dp: args.dp,
        ep: args.ep,
        batch: args.batch,
        prompt: args.prompt.unwrap_or(model.seq),
        generate: args.generate,
        precision: if args.precision == "f32" {
            shardsim::models::strategy::Precision::F32
        } else {
            shardsim::models::strategy::Precision::Bf16
        },
        routed: match args.routed.as_str() {
            "gather" => RoutedExperts::Gather,
            "dispatch" => RoutedExperts::Dispatch,
            _ => RoutedExperts::Auto,
        },
    };
    serving.check(&model)?;
    let topo = args.machine.sized(
        serving.devices(),
        true,
        "the serving layout",
        "--tp, --pp, --dp and --ep",
    )?;
    if let Some(dir) = &args.emit {
        super::output::check_out_dir(dir, "--emit")?;
    }
    let mut opts = args.machine.timed_options()?;
    let bar = super::progress::TimedBar::new("infer");
    opts.progress = Some(bar.hook());
    let report = simulate_inference(&model, &serving, &topo, &opts)?;
    drop(bar);
    // After the run: one that fails leaves no programs behind.
    if let Some(dir) = &args.emit {
        emit_programs(&model, &serving, dir)?;
    }
    match args.format {
        Format::Json => outln!(
            "{}",
            serde_json::to_string_pretty(&super::train_cmd::Recorded {
                report: &report,
                strategy: None,
                topology: &args.machine.topology,
                overrides: &args.machine.set,
                roofline: args.machine.roofline.as_deref(),
            })?
        )?,
        Format::Text => super::output::print_out(&text(&report))?,
    }
    if !report.memory.fits {
        return Err(super::OutOfMemory(format!(
            "{:.2} GiB per GPU needed, the device has {:.0} GiB",
            gib(report.memory.peak_bytes),
            gib(report.memory.capacity_bytes)
        ))
        .into());
    }
    Ok(())
}

/// Write one layer, the embedding and the head of the prefill and of the
/// first decode step into `dir`.
fn emit_programs(
    model: &shardsim::models::ModelSpec,
    serving: &Serving,
    dir: &std::path::Path,
) -> anyhow::Result<()> {
    use shardsim::models::inference::{serving_program, Part, Phase};
    crate::cli::output::create_out_dir(dir, "--emit")?;
    let phases = [
        ("prefill", Phase::Prefill),
        (
            "decode",
            Phase::Decode {
                context: serving.prompt,
            },
        ),
    ];
    let parts = [
        (
            "layer",
            Part {
                layers: 1,
                embed: false,
                head: false,
            },
        ),
        (
            "embedding",
            Part {
                layers: 0,
                embed: true,
                head: false,
            },
        ),
        (
            "head",
            Part {
                layers: 0,
                embed: false,
                head: true,
            },
        ),
    ];
    for (phase_name, phase) in phases {
        for (part_name, part) in parts {
            let path = dir.join(format!("{phase_name}_{part_name}.mlir"));
            let text = serving_program(model, serving, phase, part);
            super::output::write_output(Some(&path), &text)?;
        }
    }
    Ok(())
}

fn ms(ps: u64) -> f64 {
    ps as f64 * 1e-9
}

fn pass_line(name: &str, p: &PassTiming) -> String {
    format!(
        "{name:<22} {:>10.3} {:>10.4} {:>12.4} {:>9.3} {:>9.3} {:>11.4}\n",
        ms(p.time_ps),
        ms(p.layer.time_ps),
        ms(p.layer.exposed_comm_ps),
        ms(p.embed.time_ps),
        ms(p.head.time_ps),
        ms(p.transfer_ps)
    )
}

fn text(r: &InferenceReport) -> String {
    let s = &r.serving;
    let m = &r.memory;
    let mut out = format!(
        "{} on {} GPUs (tp {}, pp {}, dp {}{}), batch {} per replica, prompt {}, {} tokens generated\n\
         time to first token  {:.2} ms ({:.0} prompt tokens/s)\n\
         decode step          {:.3} ms at {} cached tokens, {:.3} ms at {} ({:.0} tokens/s)\n\
         generation           {:.2} ms ({:.0} tokens/s with the prefill)\n\
         memory per GPU       {:.2} GiB peak of {:.0} GiB (weights {:.2}, KV cache {:.2}, transient {:.2})\n",
        r.model,
        r.gpus,
        s.tp,
        s.pp,
        s.dp,
        if s.ep > 1 {
            format!(", ep {}", s.ep)
        } else {
            String::new()
        },
        s.batch,
        s.prompt,
        s.generate,
        ms(r.ttft_ps),
        r.prefill_tokens_per_s,
        ms(r.decode_first.time_ps),
        s.prompt,
        ms(r.decode_last.time_ps),
        s.final_context(),
        r.decode_tokens_per_s,
        ms(r.generation_ps),
        r.throughput_tokens_per_s,
        gib(m.peak_bytes),
        gib(m.capacity_bytes),
        gib(m.weight_bytes),
        gib(m.kv_cache_bytes),
        gib(m.transient_bytes),
    );
    if !m.fits {
        out.push_str(&format!(
            "OUT OF MEMORY        needs {:.2} GiB per GPU, the device has {:.0} GiB\n",
            gib(m.peak_bytes),
            gib(m.capacity_bytes)
        ));
    }
    out.push_str("pass                      total_ms   layer_ms layer_comm_ms  embed_ms   head_ms transfer_ms\n");
    out.push_str(&pass_line("prefill", &r.prefill));
    out.push_str(&pass_line("decode (first)", &r.decode_first));
    out.push_str(&pass_line("decode (last)", &r.decode_last));
    out
}
