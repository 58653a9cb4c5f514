//! Inference: a decode step against the key/value cache of a shorter
//! prefill gives what a prefill of the longer prompt gives for its last
//! token (the cache is right); the programs partition and match the
//! interpreter; decode time and cache memory follow the roofline closed
//! forms at batch 1 and at a large batch; bad layouts are refused.

use shardsim::base::DType;
use shardsim::exec::execute;
use shardsim::ir::interp::interpret;
use shardsim::ir::mlir::parse_and_verify;
use shardsim::models::inference::{
    kv_cache_bytes_per_layer, serving_program, simulate_inference, Part, Phase, RoutedExperts,
    Serving,
};
use shardsim::models::step::{model_timed_options, KERNELS_TOML};
use shardsim::models::strategy::Precision;
use shardsim::models::ModelSpec;
use shardsim::partition::partition;
use shardsim::propagate::{propagate_module, Strategy as Propagation};
use shardsim::scenario::runner::random_inputs;
use shardsim::tensor::{extract_block, Tensor};
use shardsim::topology::{load_nodes, Topology};

fn tiny(llama: bool) -> ModelSpec {
    let text = if llama {
        "name = \"tiny-llama\"\nlayers = 2\nhidden = 16\nheads = 4\nkv_heads = 2\nffn_hidden = 24\nvocab = 16\nseq = 8\nmlp = \"swiglu\"\nnorm = \"rmsnorm\"\nrope = true\n"
    } else {
        "name = \"tiny-gpt\"\nlayers = 2\nhidden = 16\nheads = 4\nffn_hidden = 32\nvocab = 16\nseq = 8\nmlp = \"gelu\"\nnorm = \"layernorm\"\ndropout = true\n"
    };
    ModelSpec::from_toml(text).unwrap()
}

fn serving(tp: u64, batch: u64, prompt: u64) -> Serving {
    Serving {
        tp,
        pp: 1,
        dp: 1,
        ep: 1,
        batch,
        prompt,
        generate: 2,
        precision: Precision::F32,
        routed: RoutedExperts::Auto,
    }
}

const WHOLE: Part = Part {
    layers: 2,
    embed: true,
    head: true,
};

fn run(text: &str, inputs: &[Tensor]) -> Vec<Tensor> {
    let module = parse_and_verify(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    interpret(&module, inputs).unwrap()
}

/// Rows `lo..hi` of dimension `dim`.
fn rows(t: &Tensor, dim: usize, lo: u64, hi: u64) -> Tensor {
    let ranges: Vec<(u64, u64)> = t
        .shape()
        .iter()
        .enumerate()
        .map(|(i, &n)| if i == dim { (lo, hi) } else { (0, n) })
        .collect();
    extract_block(t, &ranges).unwrap()
}

fn assert_close(got: &Tensor, want: &Tensor, what: &str) {
    assert_eq!(got.shape(), want.shape(), "{what}");
    let (a, b) = (got.to_f64_vec(), want.to_f64_vec());
    let big = b.iter().map(|y| y.abs()).fold(1.0, f64::max);
    for (x, y) in a.iter().zip(&b) {
        assert!((x - y).abs() <= 1e-4 * big, "{what}: {x} vs {y}");
    }
}

#[test]
fn a_decode_step_on_the_cache_equals_the_longer_prefill() {
    for llama in [false, true] {
        let model = tiny(llama);
        let (b, s) = (2, 6);
        let full_text = serving_program(&model, &serving(1, b, s), Phase::Prefill, WHOLE);
        let full_module = parse_and_verify(&full_text).unwrap();
        let inputs = random_inputs(&full_module, 11).unwrap();
        let full = interpret(&full_module, &inputs).unwrap();
        // Arguments: tokens, 2 x 4 weights, table(s), positions or RoPE tables.
        let weights = &inputs[1..9];
        let rest = &inputs[9..];
        let tables = if llama { &rest[..2] } else { &rest[..1] };
        let per_position = &rest[tables.len()..];
        // The prefill of the first s - 1 tokens.
        let mut short_in = vec![rows(&inputs[0], 1, 0, s - 1)];
        short_in.extend_from_slice(weights);
        short_in.extend_from_slice(tables);
        short_in.extend(per_position.iter().map(|t| rows(t, 0, 0, s - 1)));
        let short_text = serving_program(&model, &serving(1, b, s - 1), Phase::Prefill, WHOLE);
        let short = run(&short_text, &short_in);
        // Decode the last token against the short prefill's cache.
        let mut dec_in = vec![rows(&inputs[0], 1, s - 1, s)];
        for l in 0..2 {
            dec_in.extend_from_slice(&weights[4 * l..4 * l + 4]);
            dec_in.push(short[1 + 2 * l].clone());
            dec_in.push(short[2 + 2 * l].clone());
        }
        dec_in.extend_from_slice(tables);
        dec_in.extend(per_position.iter().map(|t| rows(t, 0, s - 1, s)));
        let dec_text = serving_program(
            &model,
            &serving(1, b, s - 1),
            Phase::Decode { context: s - 1 },
            WHOLE,
        );
        let dec = run(&dec_text, &dec_in);
        let name = &model.name;
        assert_close(&dec[0], &full[0], &format!("{name}: last-token logits"));
        for (i, what) in ["k0", "v0", "k1", "v1"].iter().enumerate() {
            let want = rows(&full[1 + i], 2, s - 1, s);
            assert_close(&dec[1 + i], &want, &format!("{name}: new {what}"));
            // The short prefill's cache is the longer one's first s - 1 rows.
            let want = rows(&full[1 + i], 2, 0, s - 1);
            assert_close(&short[1 + i], &want, &format!("{name}: cached {what}"));
        }
    }
}

#[test]
fn serving_programs_partition_and_match_the_interpreter() {
    for llama in [false, true] {
        let model = tiny(llama);
        let sv = serving(2, 2, 4);
        for phase in [Phase::Prefill, Phase::Decode { context: 5 }] {
            for part in [
                WHOLE,
                Part {
                    layers: 1,
                    embed: false,
                    head: false,
                },
            ] {
                let what = format!("{} {phase:?} {part:?}", model.name);
                let text = serving_program(&model, &sv, phase, part);
                let module = parse_and_verify(&text).unwrap();
                let inputs = random_inputs(&module, 3).unwrap();
                let reference = interpret(&module, &inputs).unwrap();
                let mut m = module.clone();
                propagate_module(&mut m, Propagation::default()).unwrap();
                let program = partition(&m).unwrap_or_else(|e| panic!("{what}: {e}"));
                let outs = execute(&program, &inputs).unwrap();
                for (o, r) in outs.iter().zip(&reference) {
                    assert_close(o, r, &what);
                }
            }
        }
    }
}

fn h100(gpus: u64) -> Topology {
    let nodes = gpus.div_ceil(8) as u32;
    load_nodes("dgx-h100", nodes, &[]).unwrap()
}

/// HBM bandwidth and matmul rate the kernel table gives an H100 (its
/// memory and compute efficiencies times the datasheet's 3.35 TB/s and 989
/// TFLOP/s).
fn h100_rates() -> (f64, f64) {
    let table = shardsim::exec::timed::parse_roofline(KERNELS_TOML).unwrap();
    let p = &table["H100 SXM5 80GB"];
    (3.35e12 * p.memory_efficiency, 989e12 * p.compute_efficiency)
}

fn llama8b(batch: u64, prompt: u64) -> (ModelSpec, Serving) {
    let model = ModelSpec::preset("llama3-8b").unwrap();
    let sv = Serving {
        precision: Precision::Bf16,
        ..serving(1, batch, prompt)
    };
    (model, sv)
}

/// Weights a decode step reads (every matrix but the embedding table, of
/// which it reads a row per sequence) and the multiply-adds it does per
/// sequence.
fn decode_weights(model: &ModelSpec) -> (f64, f64) {
    let params = (model.layers * model.block_params() + model.vocab * model.hidden) as f64;
    (2.0 * params, 2.0 * params)
}

#[test]
fn decode_follows_the_roofline_at_batch_one_and_at_a_large_batch() {
    let (bw, flops) = h100_rates();
    // Batch 1, a long context: memory-bound, weights plus cache over HBM.
    let (model, sv) = llama8b(1, 4096);
    let r = simulate_inference(&model, &sv, &h100(1), &model_timed_options()).unwrap();
    let (w, f) = decode_weights(&model);
    let kv = (model.layers * kv_cache_bytes_per_layer(&model, &sv, 4096)) as f64;
    let roof = (w + kv) / bw;
    let got = r.decode_first.time_ps as f64 * 1e-12;
    assert!(
        got >= roof && got <= 1.05 * roof,
        "batch 1: {got:.6} s vs roofline {roof:.6} s"
    );
    // Batch 1024, a short context: the weight matmuls are compute-bound,
    // the cache is still read at memory speed.
    let (model, sv) = llama8b(1024, 128);
    let r = simulate_inference(&model, &sv, &h100(1), &model_timed_options()).unwrap();
    let kv = (model.layers * kv_cache_bytes_per_layer(&model, &sv, 128)) as f64;
    let roof = (w / bw).max(1024.0 * f / flops) + kv / bw;
    let got = r.decode_first.time_ps as f64 * 1e-12;
    assert!(
        got >= roof && got <= 1.25 * roof,
        "batch 1024: {got:.6} s vs roofline {roof:.6} s"
    );
    // Twice the context adds the extra cache at memory speed (within 3%).
    let (model, sv) = llama8b(8, 2048);
    let short = simulate_inference(&model, &sv, &h100(1), &model_timed_options()).unwrap();
    let (model, sv2) = llama8b(8, 4096);
    let long = simulate_inference(&model, &sv2, &h100(1), &model_timed_options()).unwrap();
    let extra = (model.layers
        * (kv_cache_bytes_per_layer(&model, &sv2, 4096)
            - kv_cache_bytes_per_layer(&model, &sv, 2048))) as f64
        / bw;
    let got = (long.decode_first.time_ps - short.decode_first.time_ps) as f64 * 1e-12;
    assert!(
        (got - extra).abs() <= 0.03 * extra,
        "extra context: {got:.6} s vs {extra:.6} s"
    );
}

#[test]
fn the_cache_the_programs_take_is_the_closed_form() {
    // 2 (keys and values) x layers x batch x tokens x kv heads / tp x head
    // width x bytes, read off the partitioned decode program's arguments.
    let model = ModelSpec::preset("llama3-70b").unwrap();
    for (tp, batch, context) in [(1, 1, 4096), (8, 16, 1000), (4, 3, 77)] {
        let sv = Serving {
            tp,
            batch,
            precision: Precision::Bf16,
            ..serving(tp, batch, context)
        };
        let one = Part {
            layers: 1,
            embed: false,
            head: false,
        };
        let text = serving_program(&model, &sv, Phase::Decode { context }, one);
        let mut m = parse_and_verify(&text).unwrap();
        propagate_module(&mut m, Propagation::default()).unwrap();
        let p = partition(&m).unwrap();
        // Arguments: activations, 4 weights, the two caches, RoPE tables.
        let cache: u64 = p.args[5..7]
            .iter()
            .map(|&s| p.values[s].local_bytes())
            .sum();
        let want = 2 * batch * context * (8 / tp) * 128 * DType::BF16.size_bytes();
        assert_eq!(cache, want, "tp {tp}, batch {batch}, context {context}");
        assert_eq!(kv_cache_bytes_per_layer(&model, &sv, context), want);
        // A whole run reports the cache of every layer at its last step.
        let gen = Serving { generate: 9, ..sv };
        let r = simulate_inference(&model, &gen, &h100(tp), &model_timed_options()).unwrap();
        assert_eq!(
            r.memory.kv_cache_bytes,
            80 * 2 * batch * (context + 8) * (8 / tp) * 128 * 2
        );
    }
}

#[test]
fn serving_layouts_that_do_not_divide_the_model_are_refused() {
    let model = ModelSpec::preset("llama3-70b").unwrap();
    let opts = model_timed_options();
    let cases = [
        (
            serving(3, 1, 16),
            "64 heads (8 key/value heads) do not split over tp = 3",
        ),
        (
            Serving {
                pp: 3,
                ..serving(1, 1, 16)
            },
            "80 layers do not split over pp = 3",
        ),
        (
            Serving {
                batch: 0,
                ..serving(1, 1, 16)
            },
            "batch must be positive",
        ),
        (serving(16, 1, 16), "do not split over tp = 16"),
    ];
    for (sv, want) in cases {
        let err = simulate_inference(&model, &sv, &h100(8), &opts)
            .unwrap_err()
            .to_string();
        assert!(err.contains(want), "{err}");
    }
    // One node holds tp 8; two replicas need two.
    assert!(simulate_inference(&model, &serving(8, 1, 16), &h100(8), &opts).is_ok());
    let sv = Serving {
        dp: 2,
        ..serving(8, 1, 16)
    };
    let err = simulate_inference(&model, &sv, &h100(8), &opts)
        .unwrap_err()
        .to_string();
    assert!(err.contains("16 devices, the topology has 8"), "{err}");
}
