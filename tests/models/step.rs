//! Whole training steps against closed forms and published runs: model
//! states follow ZeRO's bytes per parameter, kept activations follow
//! Korthikanti et al. for every recomputation mode, pipelines hold what
//! their schedule says, Megatron-LM's published throughput is reproduced
//! (data-driven from tests/fixtures/megatron/), and strategies that do not
//! divide the model are refused naming the numbers.

use shardsim::models::analytic::{
    layer_activation_bytes, zero_bytes_per_param, zero_bytes_per_param_with_grads,
};
use shardsim::models::chunk::ChunkKind;
use shardsim::models::step::{kept_activation_bytes, model_timed_options, simulate_step};
use shardsim::models::{ModelSpec, Strategy};
use shardsim::topology::{load, load_nodes, Topology};

fn gpt(layers: u64, hidden: u64, heads: u64, seq: u64) -> ModelSpec {
    ModelSpec::from_toml(&format!(
        "name = \"gpt\"\nlayers = {layers}\nhidden = {hidden}\nheads = {heads}\nffn_hidden = {}\nvocab = 51200\nseq = {seq}\nmlp = \"gelu\"\nnorm = \"layernorm\"\ndropout = true\n",
        4 * hidden
    ))
    .unwrap()
}

fn strategy(text: &str) -> Strategy {
    Strategy::from_toml(text).unwrap()
}

fn topology(preset: &str, nodes: u32) -> Topology {
    load_nodes(preset, nodes, &[]).unwrap()
}

fn within(got: f64, want: f64, rel: f64) -> bool {
    (got / want - 1.0).abs() <= rel
}

#[test]
fn model_states_follow_zero_bytes_per_parameter() {
    let model = gpt(4, 2048, 16, 1024);
    for (tp, dp, zero) in [
        (1, 8, 0),
        (1, 8, 1),
        (2, 4, 0),
        (2, 4, 1),
        (8, 2, 1),
        (1, 8, 2),
        (2, 4, 2),
        (1, 8, 3),
        (2, 4, 3),
        (8, 2, 3),
    ] {
        let s = strategy(&format!(
            "tp = {tp}\ndp = {dp}\nzero = {zero}\nglobal_batch = {dp}"
        ));
        let topo = topology("dgx-h100", (tp * dp / 8) as u32);
        let r = simulate_step(&model, &s, &topo, &model_timed_options()).unwrap();
        let params = r.memory.params as f64;
        // Every parameter of the model, split over tp but for the learned
        // positions (norms and biases are not built, and not counted).
        let positions = model.seq * model.hidden;
        let split = (model.params() - positions) / tp + positions;
        assert_eq!(r.memory.params, split, "tp={tp}");
        let want = params * zero_bytes_per_param(zero, dp);
        let got = r.memory.model_state_bytes as f64;
        assert!(
            within(got, want, 0.05),
            "tp={tp} dp={dp} zero={zero}: {got} vs {want}"
        );
    }
}

/// Gradients accumulated and reduced in fp32 (Megatron-LM's default for
/// bf16): each device's reduction (the distributed optimizer's
/// reduce-scatter, or a plain all-reduce) takes `4 x params` bytes into its
/// collectives, twice the bf16 reduction's, and model states follow ZeRO's
/// count with 4-byte gradients (ZeRO-1: `6 + 12 / dp` bytes per parameter).
#[test]
fn fp32_gradient_reduction_moves_and_keeps_four_bytes_per_parameter() {
    let model = gpt(4, 2048, 16, 1024);
    for (tp, dp, zero) in [(1, 8, 0), (1, 8, 1), (2, 4, 1), (1, 8, 2), (2, 4, 3)] {
        let text = format!("tp = {tp}\ndp = {dp}\nzero = {zero}\nglobal_batch = {dp}");
        let topo = topology("dgx-h100", (tp * dp / 8) as u32);
        let run = |fp32: bool| {
            let s = strategy(&format!(
                "{text}\naccumulate_allreduce_grads_in_fp32 = {fp32}"
            ));
            simulate_step(&model, &s, &topo, &model_timed_options()).unwrap()
        };
        let (bf16, fp32) = (run(false), run(true));
        let what = format!("tp={tp} dp={dp} zero={zero}");
        let params = fp32.memory.params as f64;
        let sent: u64 = fp32.chunks.iter().map(|c| c.reduce.collective_bytes).sum();
        let sent_bf16: u64 = bf16.chunks.iter().map(|c| c.reduce.collective_bytes).sum();
        assert_eq!(sent, 2 * sent_bf16, "{what}");
        // Buckets are padded to a multiple of dp.
        let want = 4.0 * params;
        assert!(
            within(sent as f64, want, 0.001),
            "{what}: {sent} bytes reduced vs {want}"
        );
        let want = params * zero_bytes_per_param_with_grads(zero, dp, 4.0);
        let got = fp32.memory.model_state_bytes as f64;
        assert!(within(got, want, 0.05), "{what}: {got} vs {want}");
        // bf16 gradients: the plain count.
        let want = params * zero_bytes_per_param(zero, dp);
        let got = bf16.memory.model_state_bytes as f64;
        assert!(within(got, want, 0.05), "{what}: bf16 {got} vs {want}");
    }
}

#[test]
fn kept_activations_follow_korthikanti_for_every_recomputation_mode() {
    // GPT-3-like proportions, small enough to partition quickly.
    let model = gpt(2, 1024, 16, 512);
    let kind = |layers| ChunkKind {
        layers,
        first_layer: 1,
        embed: false,
        head: false,
    };
    for recompute in ["none", "selective", "full"] {
        for (tp, sp) in [(1, false), (2, false), (4, false), (2, true), (4, true)] {
            for mb in [1, 2] {
                let s = strategy(&format!(
                    "tp = {tp}\nmicro_batch = {mb}\nglobal_batch = {mb}\nrecompute = \"{recompute}\"\nsequence_parallel = {sp}"
                ));
                let one = kept_activation_bytes(&model, &s, kind(1)).unwrap();
                let two = kept_activation_bytes(&model, &s, kind(2)).unwrap();
                let per_layer = (two - one) as f64;
                let want = layer_activation_bytes(&model, &s);
                assert!(
                    within(per_layer, want, 0.05),
                    "{recompute} tp={tp} sp={sp} b={mb}: {per_layer} bytes per layer, formula {want}"
                );
                // A chunk keeps its layers' activations and nothing else.
                assert_eq!(one as f64, per_layer, "{recompute} tp={tp} sp={sp}");
            }
        }
    }
}

#[test]
fn a_1f1b_pipeline_holds_p_microbatches_on_its_first_stage() {
    let model = gpt(8, 1024, 16, 512);
    for (pp, schedule, expect) in [(4, "1f1b", 4), (4, "gpipe", 8), (2, "1f1b", 2)] {
        let s = strategy(&format!(
            "tp = 2\npp = {pp}\ndp = 1\nglobal_batch = 8\nschedule = \"{schedule}\""
        ));
        let topo = load(&format!("ring:{}", 2 * pp), &[]).unwrap();
        let r = simulate_step(&model, &s, &topo, &model_timed_options()).unwrap();
        assert_eq!(r.memory.in_flight, expect, "{schedule} pp={pp}");
        // 1F1B: the first stage holds most; GPipe: every stage holds all m,
        // and the last (with the head) keeps the most bytes.
        let (stage, embed) = if schedule == "gpipe" {
            (pp - 1, false)
        } else {
            (0, true)
        };
        assert_eq!(r.memory.stage, stage, "{schedule} pp={pp}");
        let kept = r
            .chunks
            .iter()
            .find(|c| c.embed == embed && c.head != embed)
            .unwrap()
            .kept_bytes;
        assert_eq!(r.memory.activation_bytes, expect * kept);
    }
}

#[test]
fn a_step_counts_one_microbatchs_kept_activations_once_in_its_peak() {
    // One stage, one microbatch: the peak is the larger of the forward's
    // (which produces the kept activations) and the backward's (which
    // takes them) over the model states; the kept bytes count once.
    // Long sequences without recomputation: the forward's transient (all
    // the layers' kept activations) is above the backward's.
    let model = gpt(8, 256, 4, 2048);
    for recompute in ["none", "full"] {
        let s = strategy(&format!(
            "tp = 2\ndp = 1\nglobal_batch = 1\nrecompute = \"{recompute}\""
        ));
        let topo = load("ring:2", &[]).unwrap();
        let r = simulate_step(&model, &s, &topo, &model_timed_options()).unwrap();
        assert_eq!(r.memory.in_flight, 1, "{recompute}");
        let c = &r.chunks[0];
        let forward = c.forward.peak_bytes - c.forward.arg_bytes;
        let backward = c.kept_bytes + c.backward.peak_bytes - c.backward.arg_bytes;
        assert!(forward >= c.kept_bytes, "{recompute}");
        if recompute == "none" {
            // The case this test is for: a forward transient (with the kept
            // bytes) above the backward's own.
            assert!(forward > backward - c.kept_bytes, "{:?}", r.memory);
        }
        assert_eq!(
            r.memory.peak_bytes,
            r.memory.model_state_bytes + forward.max(backward),
            "{recompute}: {:?}",
            r.memory
        );
    }
}

#[test]
fn strategies_that_do_not_divide_the_model_are_refused_with_the_numbers() {
    let model = gpt(24, 2304, 24, 2048);
    for (text, says) in [
        ("tp = 5\nglobal_batch = 8", "24 heads"),
        ("pp = 5\nglobal_batch = 10", "24 layers"),
        (
            "pp = 4\nvirtual_stages = 4\nschedule = \"interleaved\"\nglobal_batch = 8",
            "pp x virtual_stages = 4 x 4",
        ),
        (
            "dp = 4\nmicro_batch = 3\nglobal_batch = 16",
            "dp x micro_batch = 4 x 3",
        ),
        ("virtual_stages = 2\nglobal_batch = 2", "needs schedule"),
        (
            "virtual_stages = 2\nschedule = \"interleaved\"\nglobal_batch = 2",
            "virtual_stages = 2 needs pipeline stages (pp above 1)",
        ),
        ("zero = 5\nglobal_batch = 2", "zero stage 5"),
        (
            "tp = 4\ntp_comm_overlap = true\nglobal_batch = 2",
            "tp_comm_overlap needs sequence_parallel (tp = 4)",
        ),
        (
            "dp = 2\noverlap_param_gather = true\nglobal_batch = 2",
            "overlap_param_gather needs a distributed optimizer (zero 1 or 2), not zero 0",
        ),
    ] {
        let err = strategy(text).check(&model).unwrap_err().to_string();
        assert!(err.contains(says), "{text}: {err}");
    }
    // Devices must match the topology, never silently fewer.
    let s = strategy("tp = 8\ndp = 4\nglobal_batch = 4");
    let err = simulate_step(&model, &s, &topology("dgx-h100", 2), &model_timed_options())
        .unwrap_err()
        .to_string();
    assert!(err.contains("32 devices, the topology has 16"), "{err}");
}

/// One published run: the model, its strategy as the source ran it, the
/// machine and the measured TFLOP/s per GPU.
struct Row {
    name: String,
    model: ModelSpec,
    strategy: Strategy,
    preset: &'static str,
    nodes: u32,
    measured: f64,
    /// A100 rows count the recomputation's FLOPs (Narayanan et al.).
    count_recompute: bool,
}

/// The 2021 runs' own settings by (layers, hidden): microbatch, layers per
/// virtual stage (0: not interleaved) and whether PyTorch's DDP overlapped the
/// gradient all-reduce with the backward (tests/fixtures/megatron/sc21_table_1.csv).
fn sc21_settings() -> std::collections::BTreeMap<(u64, u64), (u64, u64, bool)> {
    let text = include_str!("../fixtures/megatron/sc21_table_1.csv");
    let mut reader = csv::ReaderBuilder::new()
        .comment(Some(b'#'))
        .from_reader(text.as_bytes());
    reader
        .deserialize::<std::collections::BTreeMap<String, String>>()
        .map(|r| {
            let r = r.unwrap();
            let n = |k: &str| r[k].parse::<u64>().unwrap();
            let key = (n("layers"), n("hidden"));
            let lpv = n("layers_per_virtual_stage");
            (key, (n("micro_batch"), lpv, r["ddp"] == "torch"))
        })
        .collect()
}

/// Megatron-Core r0.8 as the H100 runs ran it (the README's table and
/// strong scaling): sequence parallelism, flash attention, the distributed
/// optimizer with its reduce-scatter and all-gather overlapped,
/// Transformer Engine's tensor-parallel overlap, Megatron's loss kernels.
const H100_MODE: &str = "sequence_parallel = true\nflash_attention = true\nzero = 1\noverlap_grad_reduce = true\noverlap_param_gather = true\ntp_comm_overlap = true\nunfused_cross_entropy = true";

/// Virtual stages of an H100 run: Megatron-Core's sources do not give them,
/// so the smallest of 2, 3, 5 that divides a stage's layers (interleaving
/// needs the microbatches to be a multiple of `pp`).
fn h100_virtual_stages(layers: u64, pp: u64, dp: u64, gb: u64) -> u64 {
    if pp > 1 && (gb / dp) % pp == 0 {
        [2, 3, 5]
            .into_iter()
            .find(|v| (layers / pp) % v == 0)
            .unwrap_or(1)
    } else {
        1
    }
}

fn strategy_text(tp: u64, pp: u64, dp: u64, gb: u64, mb: u64, v: u64, mode: &str) -> String {
    let schedule = if v > 1 { "interleaved" } else { "1f1b" };
    format!(
        "tp = {tp}\npp = {pp}\ndp = {dp}\nglobal_batch = {gb}\nmicro_batch = {mb}\nvirtual_stages = {v}\nschedule = \"{schedule}\"\n{mode}"
    )
}

/// The rows of tests/fixtures/megatron/megatron_training.csv with the
/// settings the sources used: A100 (Narayanan et al. 2021, their script's
/// microbatch, virtual stages and DDP per row) full recomputation, the
/// attention probabilities' dropout a kernel of its own after the fused
/// softmax, blocking pipeline sends (the 2021 code waits on them and
/// synchronizes); H100 (Megatron-Core r0.8) sequence parallelism, flash
/// attention, distributed optimizer (ZeRO-1) with its gradient
/// reduce-scatter and parameter all-gather overlapped, tensor-parallel
/// communication overlapped with the matmuls (Transformer Engine), no
/// recomputation, microbatch 1.
fn rows() -> Vec<Row> {
    let sc21 = sc21_settings();
    let text = include_str!("../fixtures/megatron/megatron_training.csv");
    let mut reader = csv::ReaderBuilder::new()
        .comment(Some(b'#'))
        .from_reader(text.as_bytes());
    reader
        .deserialize::<std::collections::BTreeMap<String, String>>()
        .map(|r| {
            let r = r.unwrap();
            let n = |k: &str| r[k].parse::<f64>().unwrap();
            let a100 = r["gpu"].starts_with("A100");
            let (l, h) = (n("layers") as u64, n("hidden") as u64);
            let model = ModelSpec::from_toml(&format!(
                "name = \"gpt-{}b\"\nlayers = {l}\nhidden = {h}\nheads = {}\nffn_hidden = {}\nvocab = {}\nseq = {}\nmlp = \"gelu\"\nnorm = \"layernorm\"\ndropout = {a100}\n",
                r["params_b"], n("heads"), 4 * h, n("vocab"), n("seq")
            ))
            .unwrap();
            let (tp, pp, dp, gb) = (n("tp") as u64, n("pp") as u64, n("dp") as u64, n("global_batch") as u64);
            let (mb, v, mode) = if a100 {
                let (mb, lpv, torch_ddp) = sc21[&(l, h)];
                let v = (l / pp).checked_div(lpv).unwrap_or(1);
                let mode = format!("recompute = \"full\"\nblocking_p2p = true\nseparate_attention_dropout = true\nunfused_cross_entropy = true\noverlap_grad_reduce = {torch_ddp}");
                (mb, v, mode)
            } else {
                let v = h100_virtual_stages(l, pp, dp, gb);
                (1, v, H100_MODE.to_string())
            };
            let strategy = strategy(&strategy_text(tp, pp, dp, gb, mb, v, &mode));
            Row {
                name: format!("{} {}B tp{tp} pp{pp} dp{dp}", r["gpu"], r["params_b"]),
                model,
                strategy,
                preset: if a100 { "dgx-a100" } else { "dgx-h100" },
                nodes: (n("gpus") / 8.0) as u32,
                measured: n("tflops_per_gpu"),
                count_recompute: a100,
            }
        })
        .collect()
}

/// Megatron-LM 2021's attention kernels (`separate_attention_dropout`):
/// the fused scale-mask-softmax writes the probabilities and PyTorch's
/// dropout reads them back, and in the backward dropout's gradient is
/// written and read back by the fused softmax gradient, where a compiler
/// fuses softmax and dropout (and, recomputing, the forward's softmax with
/// the backward's). At the table's memory rate (A100: 2,039 GB/s x 0.85),
/// with full recomputation: the forward writes and reads the probabilities
/// once more (4 bytes per score and layer) and launches the dropout kernel
/// (the table's launch per layer). The backward's rerun does the same, and
/// its softmax gradient reads the probabilities again and the dropout's
/// gradient is written and read: at least the 4 bytes of that gradient,
/// at most 4 + 2 + 4 plus the mask's 2 x 1. Flash attention has none of
/// these kernels: the flag changes nothing there.
#[test]
fn separate_attention_dropout_moves_the_probabilities_as_worked_by_hand() {
    let (layers, heads, seq, b, tp) = (2u64, 16u64, 2048u64, 4u64, 8u64);
    let model = gpt(layers, 2048, heads, seq);
    let topo = topology("dgx-a100", 1);
    let run = |extra: &str| {
        let s = strategy(&format!(
            "tp = {tp}\nmicro_batch = {b}\nglobal_batch = {b}\nrecompute = \"full\"\n{extra}"
        ));
        simulate_step(&model, &s, &topo, &model_timed_options()).unwrap()
    };
    let pass = |r: &shardsim::models::step::StepReport| {
        let c = &r.chunks[0];
        (
            c.forward.time_ps as f64 * 1e-12,
            c.backward.time_ps as f64 * 1e-12,
        )
    };
    let (fused, apart) = (
        pass(&run("")),
        pass(&run("separate_attention_dropout = true")),
    );
    // Seconds per byte per score of all layers.
    let per_byte = (layers * b * heads / tp * seq * seq) as f64 / (2039e9 * 0.85);
    let launch = model_timed_options().roofline["A100 SXM4 80GB"].launch_us * 1e-6;
    let (fwd, bwd) = (
        (apart.0 - fused.0 - layers as f64 * launch) / per_byte,
        (apart.1 - fused.1) / per_byte,
    );
    assert!(within(fwd, 4.0, 0.02), "forward: {fwd} bytes per score");
    assert!(
        (4.0..=12.0).contains(&bwd),
        "backward: {bwd} bytes per score"
    );
    let flash = |extra: &str| pass(&run(&format!("flash_attention = true\n{extra}")));
    assert_eq!(flash(""), flash("separate_attention_dropout = true"));
}

/// Megatron-LM's vocab-parallel cross-entropy (`unfused_cross_entropy`),
/// worked by hand per logit in 16-bit types: the forward copies the logits
/// to fp32 (`.float()`: reads 2, writes 4), then max (reads 4), subtract,
/// exp (each reads 4 and writes 4), sum (reads 4) and divide (reads 4,
/// writes 4) run as kernels of their own: 38 bytes, and 4 more here for the
/// target's logit, picked by a masked sum over the vocabulary where
/// Megatron gathers it by index; the fused softmax moves 4 (reads the
/// logits, writes the probabilities). The backward scales the fp32 softmax
/// in place (8) and converts it back (6): 14 bytes against the fused 4. The
/// softmax kept for the backward is fp32: 2 more bytes per logit. At the
/// table's memory rate (H100: 3,350 GB/s x 0.85), one GPU's 4,096 tokens
/// of a 131,072-word vocabulary.
#[test]
fn unfused_cross_entropy_moves_the_logits_as_worked_by_hand() {
    let model = ModelSpec::from_toml(
        "name = \"loss\"\nlayers = 1\nhidden = 1024\nheads = 8\nffn_hidden = 4096\nvocab = 131072\nseq = 4096\nmlp = \"gelu\"\nnorm = \"layernorm\"\n",
    )
    .unwrap();
    let topo = topology("dgx-h100", 1);
    let run = |extra: &str| {
        let s = strategy(&format!(
            "dp = 8\nglobal_batch = 8\nflash_attention = true\n{extra}"
        ));
        let r = simulate_step(&model, &s, &topo, &model_timed_options()).unwrap();
        let c = &r.chunks[0];
        (
            c.forward.time_ps as f64 * 1e-12,
            c.backward.time_ps as f64 * 1e-12,
            c.kept_bytes,
        )
    };
    let (fused, megatron) = (run(""), run("unfused_cross_entropy = true"));
    let logits = (4096 * 131072) as f64;
    let per_byte = logits / (3350e9 * 0.85);
    let (fwd, bwd) = (
        (megatron.0 - fused.0) / per_byte,
        (megatron.1 - fused.1) / per_byte,
    );
    assert!(
        within(fwd, 42.0 - 4.0, 0.02),
        "forward: {fwd} more bytes per logit"
    );
    assert!(
        within(bwd, 14.0 - 4.0, 0.02),
        "backward: {bwd} more bytes per logit"
    );
    assert_eq!(megatron.2 - fused.2, 2 * 4096 * 131072);
}

/// Rows not yet within 10%, the largest error they may show (a regression
/// guard) and why they miss.
const KNOWN_MISSES: &[(&str, f64, &str)] = &[
    (
        "H100-80GB 32B tp8 pp1 dp48",
        0.2,
        "4 microbatches per replica: the distributed optimizer's reduce-scatter and all-gather (7.7 GB each per GPU through the one NIC of a one-GPU-per-node group, 242 and 239 ms) outlast the last backward and first forward they overlap as Megatron-Core r0.8 issues them; at the NIC's line rate with no ring latency at all the row would still be at best -3.7% (bf16 gradients) and -18.5% (the fp32 reduction the table's commit forces); 810 us of each 96 MB bucket's 2.9 ms is the 48-node ring's step latency (NCCL's own model: 666 us; SHARP, not enabled by Megatron-LM at that commit: one step), README \"The 32B row audited\"",
    ),
];

#[test]
fn megatron_published_throughput_is_reproduced() {
    let mut report = Vec::new();
    let mut failures = Vec::new();
    for row in rows() {
        let topo = topology(row.preset, row.nodes);
        let r = simulate_step(&row.model, &row.strategy, &topo, &model_timed_options())
            .unwrap_or_else(|e| panic!("{}: {e}", row.name));
        let sim = if row.count_recompute {
            r.hardware_tflops_per_gpu
        } else {
            r.model_tflops_per_gpu
        };
        let err = sim / row.measured - 1.0;
        report.push(format!(
            "{}: {sim:.1} vs {:.1} ({:+.1}%)",
            row.name,
            row.measured,
            100.0 * err
        ));
        failures.extend(super::outside_bound(
            KNOWN_MISSES,
            &row.name.as_str(),
            0.10,
            &row.name,
            err,
        ));
    }
    println!("{}", report.join("\n"));
    assert!(
        failures.is_empty(),
        "{}\n{}",
        failures.join("\n"),
        report.join("\n")
    );
}

/// The line-rate floor of the distributed optimizer's data-parallel traffic,
/// worked by hand for the H100 32B row (tp 8 fills a node, so its 48-rank
/// data-parallel group has one GPU per node). NCCL 2.21 builds a
/// communicator's topology from its own ranks' GPUs only (`topo.cc`,
/// `ncclTopoGetSystem`), so with one GPU per node there is no PXN through a
/// neighbour: the ring leaves each node through that GPU's 400 Gb/s NIC
/// (50 GB/s). Each of the reduce-scatter and the parameter all-gather sends
/// (n - 1)/n of the flat buffer (parameters x 2 bytes; the gradients x 4
/// with fp32 reduction, which Megatron-LM at the table's commit forces for
/// bf16 in `arguments.py`) through it, whatever the algorithm (SHARP's
/// CollNet too sends the whole buffer into the switch). Under Megatron-Core
/// r0.8's overlap (reduce-scatter in the last microbatch's backward,
/// all-gather chained through the first forward) the step exposes at least
/// (RS - last backward)+ + (AG - first forward)+. The 16B row (tp 4: two
/// GPUs of each group per node, NCCL's channels leaving through either
/// GPU's NIC) carries the same parameters per GPU through two NICs: half
/// the floor, the asymmetry between the two rows.
#[test]
fn data_parallel_traffic_is_held_to_the_nic_line_rate() {
    const NIC: f64 = 400e9 / 8.0;
    let model = |l: u64, h: u64, a: u64| {
        ModelSpec::from_toml(&format!(
            "name = \"gpt\"\nlayers = {l}\nhidden = {h}\nheads = {a}\nffn_hidden = {}\nvocab = 131072\nseq = 4096\nmlp = \"gelu\"\nnorm = \"layernorm\"\n",
            4 * h
        ))
        .unwrap()
    };
    let run = |m: &ModelSpec, tp: u64, fp32: bool| {
        let s = strategy(&format!(
            "{}\naccumulate_allreduce_grads_in_fp32 = {fp32}",
            strategy_text(tp, 1, 48, 192, 1, 1, H100_MODE)
        ));
        let topo = topology("dgx-h100", (tp * 48 / 8) as u32);
        simulate_step(m, &s, &topo, &model_timed_options()).unwrap()
    };
    let s = |ps: u64| ps as f64 * 1e-12;
    let (m32, m16) = (model(48, 7168, 56), model(32, 6144, 48));
    for fp32 in [false, true] {
        let r = run(&m32, 8, fp32);
        let c = &r.chunks[0];
        let floor = |bytes: u64| (c.params * bytes) as f64 * 47.0 / 48.0 / NIC;
        let (rs, ag) = (floor(if fp32 { 4 } else { 2 }), floor(2));
        let (reduce, gather) = (s(c.reduce.time_ps), s(c.optimizer.time_ps));
        assert!(
            reduce >= rs,
            "fp32 {fp32}: reduce-scatter {reduce} s under the NIC's {rs} s"
        );
        assert!(
            gather >= ag,
            "fp32 {fp32}: all-gather {gather} s under the NIC's {ag} s"
        );
        let exposed = (rs - s(c.backward.time_ps)).max(0.0) + (ag - s(c.forward.time_ps)).max(0.0);
        let step = s(r.step_time_ps);
        assert!(
            step >= s(r.pipeline_ps) + exposed,
            "fp32 {fp32}: step {step} s under passes {} s + the line-rate exposure {exposed} s",
            s(r.pipeline_ps)
        );
    }
    let r = run(&m16, 4, false);
    let c = &r.chunks[0];
    let half = (c.params * 2) as f64 * 47.0 / 48.0 / NIC / 2.0;
    let reduce = s(c.reduce.time_ps);
    assert!(
        reduce >= half,
        "16B reduce-scatter {reduce} s under two NICs' {half} s"
    );
    assert!(
        reduce < 2.0 * half,
        "16B reduce-scatter {reduce} s: its rings should leave each node through both GPUs' NICs"
    );
}

/// Strong-scaling points not yet within 10% (GPU count), the largest error
/// they may show and why.
const STRONG_SCALING_MISSES: &[(u64, f64, &str)] = &[(
    96,
    0.20,
    "576 microbatches per replica, so neither the pipeline bubble nor the data-parallel reduction weighs: the passes themselves (59% of peak per 8-layer chunk, the last stage's head 11% more) run faster than the published 47% allows; at 2,304 GPUs the row's larger bubble and exposed reduction hide this",
)];

/// The strong-scaling endpoints of the table's 177B model
/// (tests/fixtures/megatron/megatron_strong_scaling.csv): the same passes at
/// 576 and at 12 microbatches per replica, so the published fall of MFU
/// from 47% to 42% separates what the passes cost from what scale adds
/// (bubble, data-parallel reduction). Each point within 10% unless listed.
#[test]
fn megatron_strong_scaling_separates_passes_from_scale() {
    let model = ModelSpec::from_toml(
        "name = \"gpt-177b\"\nlayers = 96\nhidden = 12288\nheads = 96\nffn_hidden = 49152\nvocab = 131072\nseq = 4096\nmlp = \"gelu\"\nnorm = \"layernorm\"\n",
    )
    .unwrap();
    let text = include_str!("../fixtures/megatron/megatron_strong_scaling.csv");
    let mut reader = csv::ReaderBuilder::new()
        .comment(Some(b'#'))
        .from_reader(text.as_bytes());
    let mut report = Vec::new();
    let mut failures = Vec::new();
    for r in reader.deserialize::<std::collections::BTreeMap<String, String>>() {
        let r = r.unwrap();
        let n = |k: &str| r[k].parse::<u64>().unwrap();
        let (gpus, tp, pp, dp, gb) = (n("gpus"), n("tp"), n("pp"), n("dp"), n("global_batch"));
        assert_eq!(tp * pp * dp, gpus, "{r:?}");
        let measured: f64 = r["mfu"].parse().unwrap();
        let v = h100_virtual_stages(model.layers, pp, dp, gb);
        let s = strategy(&strategy_text(tp, pp, dp, gb, 1, v, H100_MODE));
        let topo = topology("dgx-h100", (gpus / 8) as u32);
        let sim = simulate_step(&model, &s, &topo, &model_timed_options())
            .unwrap_or_else(|e| panic!("{gpus} GPUs: {e}"))
            .mfu;
        let err = sim / measured - 1.0;
        report.push(format!(
            "177B on {gpus} GPUs (dp {dp}, {} microbatches): MFU {:.1}% vs {:.0}% ({:+.1}%)",
            gb / dp,
            100.0 * sim,
            100.0 * measured,
            100.0 * err
        ));
        failures.extend(super::outside_bound(
            STRONG_SCALING_MISSES,
            &gpus,
            0.10,
            &format!("{gpus} GPUs"),
            err,
        ));
    }
    println!("{}", report.join("\n"));
    assert_eq!(report.len(), 3, "three published points");
    assert!(
        failures.is_empty(),
        "{}\n{}",
        failures.join("\n"),
        report.join("\n")
    );
}

#[test]
fn tied_embeddings_sum_their_gradient_between_the_first_and_last_stage() {
    // GPT ties its table: with pp 2 on two DGX nodes the first stage (node
    // 0) and the last (node 1) all-reduce each tensor-parallel shard over
    // one 400 Gb/s NIC: two halves of the shard, 2 x (S/2) / 50 GB/s.
    let model = gpt(4, 2048, 16, 1024);
    let s = strategy("tp = 8\npp = 2\nglobal_batch = 2");
    let r = simulate_step(&model, &s, &topology("dgx-h100", 2), &model_timed_options()).unwrap();
    let shard = (model.vocab / 8 * model.hidden * 2) as f64;
    let want = shard / 50e9;
    let got = r.embedding_sync_ps as f64 * 1e-12;
    assert!(within(got, want, 0.02), "{got} vs {want}");
    // A single stage holds the one table: nothing to sum.
    let one = strategy("tp = 8\nglobal_batch = 1");
    let r = simulate_step(
        &model,
        &one,
        &topology("dgx-h100", 1),
        &model_timed_options(),
    )
    .unwrap();
    assert_eq!(r.embedding_sync_ps, 0);
}

proptest::proptest! {
    /// The distributed optimizer's buffers (Megatron's flat buckets) hold
    /// every local gradient element: each bucket but the last holds at least
    /// the bucket size, each is padded to a multiple of `dp` by less than
    /// `dp`, and all are split over `tensor` by rows.
    #[test]
    fn optimizer_buffers_are_megatron_buckets(
        sizes in proptest::collection::vec((1u64..5_000_000, proptest::bool::ANY), 1..40),
        tp in 1u64..9,
        dp in 2u64..97,
    ) {
        use shardsim::models::optimizer::{bucket_elements, optimizer_buffers};
        let s = strategy(&format!("tp = {tp}\ndp = {dp}\nzero = 1\nglobal_batch = {dp}"));
        let weights: Vec<(Vec<u64>, Vec<&'static str>)> = sizes
            .iter()
            .map(|&(n, split)| {
                if split {
                    (vec![n, tp], vec!["", "tensor"])
                } else {
                    (vec![n], vec![""])
                }
            })
            .collect();
        let local: u64 = sizes.iter().map(|&(n, _)| n).sum();
        let buffers = optimizer_buffers(&weights, &s);
        let mut held = 0;
        for (i, (shape, dims)) in buffers.iter().enumerate() {
            proptest::prop_assert_eq!(shape.len(), 2);
            proptest::prop_assert_eq!(shape[0], tp);
            proptest::prop_assert_eq!(dims.clone(), vec!["tensor", ""]);
            proptest::prop_assert_eq!(shape[1] % dp, 0);
            if i + 1 < buffers.len() {
                proptest::prop_assert!(shape[1] >= bucket_elements(&s));
            }
            held += shape[1];
        }
        proptest::prop_assert!(held >= local && held < local + dp * buffers.len() as u64);
        // Without a distributed optimizer the weights themselves.
        let plain = strategy(&format!("tp = {tp}\ndp = {dp}\nglobal_batch = {dp}"));
        proptest::prop_assert_eq!(optimizer_buffers(&weights, &plain), weights);
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(12))]
    /// A stage's activations at the schedule's fullest lie between its most
    /// chunks in flight times the smallest and times the largest chunk's
    /// kept bytes (the head chunk, holding the logits, keeps far more), and
    /// never exceed every one of its chunks kept for every microbatch; with
    /// one chunk per stage they are exactly that chunk's times the count.
    #[test]
    fn held_activations_are_the_chunks_in_flight(
        pp in proptest::sample::select(vec![2u64, 4]),
        v in 1u64..4,
        k in 1u64..3,
    ) {
        let model = ModelSpec::from_toml(&format!(
            "name = \"gpt\"\nlayers = {}\nhidden = 64\nheads = 4\nffn_hidden = 256\nvocab = 8192\nseq = 128\nmlp = \"gelu\"\nnorm = \"layernorm\"\n",
            pp * v
        ))
        .unwrap();
        let schedule = if v > 1 { "interleaved" } else { "1f1b" };
        let s = strategy(&format!(
            "pp = {pp}\nglobal_batch = {}\nvirtual_stages = {v}\nschedule = \"{schedule}\"",
            k * pp
        ));
        let topo = load(&format!("ring:{pp}"), &[]).unwrap();
        let r = simulate_step(&model, &s, &topo, &model_timed_options()).unwrap();
        let kept: Vec<u64> = r.chunks.iter().map(|c| c.kept_bytes).collect();
        let (lo, hi) = (*kept.iter().min().unwrap(), *kept.iter().max().unwrap());
        let (m, n) = (r.memory.activation_bytes, r.memory.in_flight);
        proptest::prop_assert!(lo * n <= m && m <= hi * n, "{m} bytes for {n} chunks of {kept:?}");
        let st = r.memory.stage;
        let class = |g: u64| {
            r.chunks
                .iter()
                .find(|c| c.embed == (g == 0) && c.head == (g + 1 == pp * v))
                .unwrap()
                .kept_bytes
        };
        let all: u64 = (0..v).map(|c| class(c * pp + st)).sum::<u64>() * r.microbatches;
        proptest::prop_assert!(m <= all, "{m} bytes held, {all} if stage {st} kept everything");
        if v == 1 {
            proptest::prop_assert_eq!(m, n * class(st));
        }
    }
}

/// Rows of Meta's Llama 3 405B table not yet within 10%, their bound and why.
const LLAMA3_MISSES: &[((u64, u64), f64, &str)] = &[
    ((8192, 8192), 0.17, "the passes of hidden-16,384 layers run fast, as the 177B strong-scaling point's at 96 GPUs do (+19.6% MFU): README \"Llama 3 405B at 8,192 and 16,384 GPUs\""),
    ((16384, 8192), 0.15, "as at 8,192 GPUs"),
    ((16384, 131072), 0.20, "as at 8,192 GPUs, and the source's FLOP count at 131,072 is not given: counted as Megatron-LM counts (whole score matrix) attention is 57% of the step's FLOPs, and a causal count would halve that"),
];

/// Meta's Llama 3 405B pre-training (tests/fixtures/llama3/): the preset at
/// 8,192 and 16,384 GPUs with the pipeline split as the source describes it
/// (16 stages of 8 one-layer chunks, the embedding and the loss counted as
/// layers), the distributed optimizer and overlaps as Megatron-Core runs
/// them. Each row within 10% unless listed, and what scale costs at the
/// fixed 16M-token batch: 8,192 -> 16,384 GPUs halves the microbatches per
/// pipeline, and the published throughput falls 7.0% (430 -> 400).
#[test]
fn llama3_405b_pretraining_throughput_is_reproduced() {
    let rows = super::csv_rows(include_str!(
        "../fixtures/llama3/llama3_405b_pretraining.csv"
    ));
    let mut report = Vec::new();
    let mut failures = Vec::new();
    let mut at_8k = Vec::new();
    for r in &rows {
        let n = |k: &str| r[k].parse::<u64>().unwrap();
        let (gpus, tp, cp, pp, dp, seq, gb) = (
            n("gpus"),
            n("tp"),
            n("cp"),
            n("pp"),
            n("dp"),
            n("seq"),
            n("global_batch"),
        );
        assert_eq!(tp * cp * pp * dp, gpus, "{r:?}");
        let mut model = ModelSpec::preset("llama3-405b").unwrap();
        model.seq = seq;
        let s = strategy(&format!(
            "tp = {tp}\ncp = {cp}\npp = {pp}\ndp = {dp}\nglobal_batch = {gb}\nvirtual_stages = 8\nschedule = \"interleaved\"\nembedding_in_pipeline_split = true\nloss_in_pipeline_split = true\nzero = 1\nsequence_parallel = true\nflash_attention = true\noverlap_grad_reduce = true\noverlap_param_gather = true"
        ));
        let topo = topology("dgx-h100", (gpus / 8) as u32);
        let step = simulate_step(&model, &s, &topo, &model_timed_options())
            .unwrap_or_else(|e| panic!("{gpus} GPUs, sequence {seq}: {e}"));
        let measured: f64 = r["tflops_per_gpu"].parse().unwrap();
        let sim = step.model_tflops_per_gpu;
        let err = sim / measured - 1.0;
        report.push(format!(
            "405B on {gpus} GPUs (tp {tp} cp {cp} pp {pp} dp {dp}, sequence {seq}, {} microbatches): {sim:.1} vs {measured:.0} TFLOP/s ({:+.1}%), {:.1} GiB per GPU",
            step.microbatches,
            100.0 * err,
            step.memory.peak_bytes as f64 / (1u64 << 30) as f64
        ));
        failures.extend(super::outside_bound(
            LLAMA3_MISSES,
            &(gpus, seq),
            0.10,
            &format!("{gpus} GPUs, sequence {seq}"),
            err,
        ));
        if seq == 8192 {
            at_8k.push((sim, measured));
        }
    }
    println!("{}", report.join("\n"));
    assert_eq!(report.len(), 3, "three published rows");
    let (sim, published) = (at_8k[1].0 / at_8k[0].0, at_8k[1].1 / at_8k[0].1);
    println!("16,384 / 8,192 GPUs: {sim:.3} vs {published:.3}");
    assert!(
        (sim - published).abs() <= 0.03,
        "scaling 8,192 -> 16,384 GPUs: {sim:.3} against the published {published:.3}"
    );
    assert!(
        failures.is_empty(),
        "{}\n{}",
        failures.join("\n"),
        report.join("\n")
    );
}
