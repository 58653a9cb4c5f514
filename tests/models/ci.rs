//! Megatron-LM's own single-node H100 CI runs
//! (tests/fixtures/megatron/megatron_ci_h100.csv) as a second anchor for
//! pass speed: one DGX H100 node, so no multi-node collective, only the
//! passes, tensor and pipeline parallelism over NVLink and the optimizer.
//! Each row runs through the pipeline of
//! `megatron_published_throughput_is_reproduced` (`simulate_step` on the
//! `dgx-h100` preset) and is compared by iteration time.

use shardsim::models::step::{model_timed_options, simulate_step, StepReport};
use shardsim::models::{ModelSpec, Strategy};
use shardsim::topology::load_nodes;

/// One fixture row: its name, class, model, strategy and measured seconds.
struct CiRow {
    name: String,
    large: bool,
    model: ModelSpec,
    strategy: Strategy,
    measured_s: f64,
    /// PyTorch's `max_memory_allocated` over the run, bytes.
    measured_bytes: f64,
}

fn ci_rows() -> Vec<CiRow> {
    super::csv_rows(include_str!("../fixtures/megatron/megatron_ci_h100.csv"))
        .into_iter()
        .map(|r| {
            let name = r["test_case"].clone();
            let n = |k: &str| {
                r[k].parse::<u64>()
                    .unwrap_or_else(|e| panic!("{name}: {k}: {e}"))
            };
            let b = |k: &str| {
                r[k].parse::<bool>()
                    .unwrap_or_else(|e| panic!("{name}: {k}: {e}"))
            };
            let model = ModelSpec::from_toml(&format!(
                "name = \"{name}\"\nlayers = {}\nhidden = {}\nheads = {}\nkv_heads = {}\nffn_hidden = {}\nvocab = {}\nseq = {}\nmlp = \"gelu\"\nnorm = \"layernorm\"\ndropout = true\n",
                n("layers"), n("hidden"), n("heads"), n("kv_heads"), n("ffn_hidden"), n("vocab"), n("seq")
            ))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
            let (tp, pp, dp, v) = (n("tp"), n("pp"), n("dp"), n("virtual_stages"));
            assert_eq!(tp * pp * dp, 8, "{name}: one node of 8 GPUs");
            let schedule = if v > 1 { "interleaved" } else { "1f1b" };
            let strategy = Strategy::from_toml(&format!(
                "tp = {tp}\npp = {pp}\ndp = {dp}\nmicro_batch = {}\nglobal_batch = {}\nvirtual_stages = {v}\nschedule = \"{schedule}\"\nzero = {}\nflash_attention = {}\noverlap_grad_reduce = {}\noverlap_param_gather = {}\nunfused_cross_entropy = {}\naccumulate_allreduce_grads_in_fp32 = true\n",
                n("micro_batch"), n("global_batch"), n("zero"), b("flash_attention"),
                b("overlap_grad_reduce"), b("overlap_param_gather"), b("unfused_cross_entropy")
            ))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
            CiRow {
                large: r["class"] == "large",
                model,
                strategy,
                measured_s: r["median_iter_s"].parse().unwrap(),
                measured_bytes: 1e9 * r["mem_max_alloc_gb"].parse::<f64>().unwrap(),
                name,
            }
        })
        .collect()
}

/// Large rows not within 25% of the measured iteration time, the largest
/// error they may show and why (none so far).
const CI_MISSES: &[(&str, f64, &str)] = &[];

/// The interleaved 7B row (pp 4, 8 chunks of one layer per stage, 4
/// microbatches), worked by hand from Megatron-Core's interleaved schedule:
/// the last stage's warm-up runs `(pp - rank - 1) x 2 + (v - 1) x pp` = 28
/// forward passes (chunks 0-6 of its 8, each on the 4 microbatches), then
/// the forward of its chunk 7 (the output layer's, which keeps the logits'
/// fp32 softmax) before its first backward: 28 one-layer chunks and one
/// head chunk at once, not 29 head chunks.
#[test]
fn megatron_ci_interleaved_stage_holds_the_chunks_it_ran() {
    let row = ci_rows()
        .into_iter()
        .find(|r| r.name == "gpt3_7b_tp1_pp4_memory_speed")
        .unwrap();
    let topo = load_nodes("dgx-h100", 1, &[]).unwrap();
    let r = simulate_step(&row.model, &row.strategy, &topo, &model_timed_options()).unwrap();
    let kept = |embed: bool, head: bool| {
        r.chunks
            .iter()
            .find(|c| c.embed == embed && c.head == head)
            .unwrap()
            .kept_bytes
    };
    let (layer, last) = (kept(false, false), kept(false, true));
    assert!(last > 4 * layer, "the head chunk keeps the logits");
    assert_eq!((r.memory.stage, r.memory.in_flight), (3, 29));
    assert_eq!(r.memory.activation_bytes, 28 * layer + last);
    assert!(r.memory.fits, "{:?}", r.memory);
}

/// Where the step's time goes, for the report.
fn breakdown(r: &StepReport) -> String {
    let ms = |ps: u64| ps as f64 * 1e-9;
    let passes: Vec<String> = r
        .chunks
        .iter()
        .map(|c| {
            format!(
                "{} layers{}{}: fwd {:.1} bwd {:.1} reduce {:.1} opt {:.1} ms",
                c.layers,
                if c.embed { " +embed" } else { "" },
                if c.head { " +head" } else { "" },
                ms(c.forward.time_ps),
                ms(c.backward.time_ps),
                ms(c.reduce.time_ps),
                ms(c.optimizer.time_ps)
            )
        })
        .collect();
    format!(
        "pipeline {:.1} ms, bubble {:.1}%, {} microbatches, MFU {:.1}%; {}",
        ms(r.pipeline_ps),
        100.0 * r.bubble_fraction,
        r.microbatches,
        100.0 * r.mfu,
        passes.join("; ")
    )
}

/// Every chosen CI row, simulated against its measured median iteration
/// time. The large rows (7B, 8,192 tokens per sequence) are kernel-rate
/// evidence: each within 25% unless listed in `CI_MISSES`, the bound of the
/// H100 table's own worst listed row (32B, 20%) widened for what these runs
/// add and the model leaves out (deterministic attention backward, the
/// unfused gradient accumulation of `--no-gradient-accumulation-fusion`,
/// per-iteration parameter and gradient norms), and each row's peak memory
/// within 10% of PyTorch's measured peak. The small rows (hidden 512) are
/// host-bound: the model charges each kernel its launch (3 us) but no
/// Python, framework or host time, so each simulated step must come in
/// under its measurement; the difference estimates the fixed per-step
/// cost it lacks.
#[test]
fn megatron_ci_single_node_iteration_times() {
    let topo = load_nodes("dgx-h100", 1, &[]).unwrap();
    let (mut large, mut small, mut failures) = (Vec::new(), Vec::new(), Vec::new());
    for row in ci_rows() {
        let r = simulate_step(&row.model, &row.strategy, &topo, &model_timed_options())
            .unwrap_or_else(|e| panic!("{}: {e}", row.name));
        let sim = r.step_time_ps as f64 * 1e-12;
        let err = sim / row.measured_s - 1.0;
        let mem = r.memory.peak_bytes as f64;
        let line = format!(
            "{}: {:.1} ms vs {:.1} ms ({:+.1}%); memory {:.2} vs {:.2} GB ({:+.1}%); {}",
            row.name,
            1e3 * sim,
            1e3 * row.measured_s,
            100.0 * err,
            mem * 1e-9,
            row.measured_bytes * 1e-9,
            100.0 * (mem / row.measured_bytes - 1.0),
            breakdown(&r)
        );
        if row.large {
            failures.extend(super::outside_bound(
                CI_MISSES,
                &row.name.as_str(),
                0.25,
                &row.name,
                err,
            ));
            // Megatron ran it on 80 GB devices; its allocator's peak is the
            // live bytes our static count sums (states, activations at the
            // schedule's fullest, the largest transient).
            if !r.memory.fits || (mem / row.measured_bytes - 1.0).abs() > 0.10 {
                failures.push(format!(
                    "{}: memory {:.2} GB against the measured {:.2} GB (fits: {})",
                    row.name,
                    mem * 1e-9,
                    row.measured_bytes * 1e-9,
                    r.memory.fits
                ));
            }
            large.push(line);
        } else {
            if sim >= row.measured_s {
                failures.push(format!(
                    "{}: simulated {:.1} ms not under the measured {:.1} ms though no launch or host time is charged",
                    row.name,
                    1e3 * sim,
                    1e3 * row.measured_s
                ));
            }
            small.push(format!(
                "{line}; unmodelled {:.1} ms",
                1e3 * (row.measured_s - sim)
            ));
        }
    }
    println!(
        "large rows (pass speed):\n{}\nsmall rows (fixed per-step costs):\n{}",
        large.join("\n"),
        small.join("\n")
    );
    assert_eq!(large.len(), 2, "the two 7B memory_speed rows");
    assert!(
        failures.is_empty(),
        "{}\n{}\n{}",
        failures.join("\n"),
        large.join("\n"),
        small.join("\n")
    );
}
