//! Mixture-of-experts blocks and expert parallelism: the programs match the
//! interpreter (with and without expert and tensor parallelism, shared
//! experts, every recomputation mode), each all-to-all moves the closed-form
//! bytes, presets have their published parameter counts, and model states
//! follow the analytic count with expert weights reduced over `dp / ep`.

use shardsim::ir::mlir::parse_and_verify;
use shardsim::models::analytic::model_state_bytes;
use shardsim::models::chunk::{backward_program, forward_program, ChunkKind};
use shardsim::models::inference::{
    serving_program, simulate_inference, Part, Phase, RoutedExperts, Serving,
};
use shardsim::models::step::{model_timed_options, simulate_step};
use shardsim::models::strategy::Precision;
use shardsim::models::{ModelSpec, Recompute, Strategy};
use shardsim::partition::{partition, SpmdProgram, Traffic};
use shardsim::propagate::{propagate_module, Strategy as Propagation};
use shardsim::topology::load_nodes;

use super::programs::check;

fn tiny_moe(shared: u64) -> ModelSpec {
    tiny_moe_dense(shared, 0)
}

/// As [`tiny_moe`] with its first `dense` layers dense (24 wide).
fn tiny_moe_dense(shared: u64, dense: u64) -> ModelSpec {
    ModelSpec::from_toml(&format!(
        "name = \"tiny-moe\"\nlayers = 2\nhidden = 16\nheads = 4\nkv_heads = 2\nffn_hidden = 24\nvocab = 16\nseq = 8\nmlp = \"swiglu\"\nnorm = \"rmsnorm\"\nrope = true\n[moe]\nexperts = 4\ntop_k = 2\nexpert_ffn_hidden = 8\nshared_experts = {shared}\ndense_layers = {dense}\n"
    ))
    .unwrap()
}

fn strategy(tp: u64, ep: u64, recompute: Recompute, sp: bool) -> Strategy {
    Strategy {
        tp,
        dp: ep,
        ep,
        micro_batch: 2,
        global_batch: 2 * ep,
        recompute,
        sequence_parallel: sp,
        precision: Precision::F32,
        ..Strategy::from_toml("global_batch = 2").unwrap()
    }
}

const MIDDLE: ChunkKind = ChunkKind {
    layers: 1,
    first_layer: 1,
    embed: false,
    head: false,
};

const FIRST: ChunkKind = ChunkKind {
    layers: 1,
    first_layer: 0,
    embed: true,
    head: false,
};

const LAST: ChunkKind = ChunkKind {
    layers: 1,
    first_layer: 1,
    embed: false,
    head: true,
};

const WHOLE: ChunkKind = ChunkKind {
    layers: 2,
    first_layer: 0,
    embed: true,
    head: true,
};

#[test]
fn moe_programs_match_the_interpreter() {
    for shared in [0, 1] {
        let model = tiny_moe(shared);
        for (tp, ep, sp) in [
            (1, 1, false),
            (2, 1, true),
            (1, 2, false),
            (2, 2, false),
            (2, 2, true),
        ] {
            for recompute in [Recompute::None, Recompute::Full] {
                let s = strategy(tp, ep, recompute, sp);
                s.check(&model).unwrap();
                for kind in [MIDDLE, FIRST, LAST, WHOLE] {
                    let what =
                        format!("shared={shared} tp={tp} ep={ep} sp={sp} {recompute:?} {kind:?}");
                    if let Ok(dir) = std::env::var("MOE_DUMP") {
                        std::fs::write(format!("{dir}/f.mlir"), forward_program(&model, &s, kind))
                            .unwrap();
                        std::fs::write(format!("{dir}/b.mlir"), backward_program(&model, &s, kind))
                            .unwrap();
                    }
                    check(
                        &forward_program(&model, &s, kind),
                        &format!("forward {what}"),
                    );
                    check(
                        &backward_program(&model, &s, kind),
                        &format!("backward {what}"),
                    );
                }
            }
        }
    }
}

/// Context parallelism with experts: each context rank routes its own
/// tokens (`[cp, b s / cp]` routing groups) through every expert inside a
/// computation manual over `context`; the chunk programs (cp 2 and 4, with
/// tensor and sequence parallelism, shared experts, a first dense layer,
/// each recomputation mode) equal the interpreter, and the expert weights'
/// gradients are each rank's partial sums on a leading `context` dimension.
#[test]
fn context_parallel_moe_programs_match_the_interpreter() {
    for (shared, dense) in [(0, 0), (1, 1)] {
        let model = tiny_moe_dense(shared, dense);
        for (cp, tp, sp) in [(2, 1, false), (2, 2, true), (4, 1, false)] {
            for recompute in [Recompute::None, Recompute::Selective, Recompute::Full] {
                let s = Strategy {
                    cp,
                    dp: 1,
                    ep: 1,
                    global_batch: 2,
                    ..strategy(tp, 1, recompute, sp)
                };
                s.check(&model).unwrap();
                for kind in [MIDDLE, FIRST, LAST, WHOLE] {
                    let what = format!(
                        "shared={shared} dense={dense} cp={cp} tp={tp} sp={sp} {recompute:?} {kind:?}"
                    );
                    let backward = backward_program(&model, &s, kind);
                    check(
                        &forward_program(&model, &s, kind),
                        &format!("forward {what}"),
                    );
                    check(&backward, &format!("backward {what}"));
                    // The router's gradient accumulator: `[cp, h, experts]`
                    // (in chunks that hold an expert layer).
                    let experts = kind.first_layer + kind.layers > dense;
                    assert_eq!(
                        backward.contains(&format!("tensor<{cp}x16x4xf32>")),
                        experts,
                        "{what}: stacked router gradient"
                    );
                }
            }
        }
    }
}

/// A first dense layer (DeepSeek's): chunks holding it, alone or before an
/// expert layer, match the interpreter with expert and tensor parallelism.
#[test]
fn a_first_dense_layer_matches_the_interpreter() {
    let model = tiny_moe_dense(1, 1);
    for (tp, ep) in [(1, 2), (2, 2)] {
        let s = strategy(tp, ep, Recompute::None, false);
        for kind in [FIRST, WHOLE] {
            let what = format!("dense first layer tp={tp} ep={ep} {kind:?}");
            let f = forward_program(&model, &s, kind);
            // The dense layer's MLP is the 24-wide one, no router.
            assert!(f.contains("x24x"), "{what}");
            check(&f, &format!("forward {what}"));
            check(
                &backward_program(&model, &s, kind),
                &format!("backward {what}"),
            );
        }
    }
    // More dense layers than leave an expert layer is refused.
    let err = ModelSpec::from_toml(
        "name = \"m\"\nlayers = 2\nhidden = 16\nheads = 4\nffn_hidden = 24\nvocab = 16\nseq = 8\nmlp = \"swiglu\"\nnorm = \"rmsnorm\"\n[moe]\nexperts = 4\ntop_k = 2\nexpert_ffn_hidden = 8\ndense_layers = 2\n",
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("dense_layers 2"), "{err}");
}

fn spmd(text: &str) -> SpmdProgram {
    let mut m = parse_and_verify(text).unwrap();
    propagate_module(&mut m, Propagation::default()).unwrap();
    partition(&m).unwrap()
}

/// Each all-to-all (dispatch and combine, forward and backward) moves
/// `tokens x top_k x hidden x bytes x (ep - 1) / ep / tp` per device: a
/// replica's token slots (balanced routing at capacity factor 1), each
/// tensor-parallel rank sending its slice of the hidden width.
#[test]
fn each_all_to_all_moves_the_closed_form_bytes() {
    let model = tiny_moe(1);
    for (tp, ep) in [(1, 2), (1, 4), (2, 2), (2, 4)] {
        let s = strategy(tp, ep, Recompute::None, false);
        let tokens = s.micro_batch * model.seq;
        let m = model.moe.unwrap();
        let want = tokens * m.top_k * model.hidden * 4 * (ep - 1) / ep / tp;
        for (pass, text, count) in [
            ("forward", forward_program(&model, &s, MIDDLE), 2),
            ("backward", backward_program(&model, &s, MIDDLE), 2),
        ] {
            let p = spmd(&text);
            let a2a: Vec<u64> = p
                .collectives()
                .filter(|c| matches!(c.kind.traffic(), Traffic::AllToAll))
                .map(|c| {
                    // Each device keeps its own piece of the buffer.
                    let n = c.groups.iter().next().unwrap().len() as u64;
                    assert_eq!(
                        n, ep,
                        "tp={tp} ep={ep}: an all-to-all over the expert replicas"
                    );
                    c.bytes * (n - 1) / n
                })
                .collect();
            assert_eq!(a2a.len(), count, "tp={tp} ep={ep} {pass}: {a2a:?}");
            for b in a2a {
                assert_eq!(b, want, "tp={tp} ep={ep} {pass}");
            }
        }
    }
}

#[test]
fn moe_presets_have_their_published_parameter_counts() {
    let within = |got: u64, want: f64, rel: f64| (got as f64 / want - 1.0).abs() <= rel;
    // Mixtral 8x7B: 46.7B parameters, 12.9B active (Jiang et al. 2024).
    let m = ModelSpec::preset("mixtral-8x7b").unwrap();
    assert!(within(m.params(), 46.7e9, 0.01), "{}", m.params());
    assert!(
        within(m.active_params(), 12.9e9, 0.01),
        "{}",
        m.active_params()
    );
    // DeepSeek-MoE 16B: 16.4B, 2.8B activated (Dai et al. 2024), its
    // first layer dense (10944 wide).
    let d = ModelSpec::preset("deepseek-moe-16b").unwrap();
    assert!(within(d.params(), 16.4e9, 0.005), "{}", d.params());
    assert!(
        within(d.active_params(), 2.8e9, 0.02),
        "{}",
        d.active_params()
    );
}

/// Parameters, gradients and optimizer states per GPU: dense weights
/// follow ZeRO's bytes per parameter over `dp`, routed experts' over
/// `dp / ep` (their gradients are reduced only among the replicas holding
/// the same experts).
#[test]
fn moe_model_states_follow_the_analytic_count() {
    // Two expert layers; then a dense first layer before two expert layers
    // (a chunk timed as its dense part plus two expert layers' increments).
    let model_of = |layers: u64, dense: u64| {
        ModelSpec::from_toml(&format!(
        "name = \"moe\"\nlayers = {layers}\nhidden = 1024\nheads = 8\nffn_hidden = 4096\nvocab = 32000\nseq = 256\nmlp = \"swiglu\"\nnorm = \"rmsnorm\"\nrope = true\n[moe]\nexperts = 8\ntop_k = 2\nexpert_ffn_hidden = 2048\nshared_experts = 1\ndense_layers = {dense}\n",
    ))
    .unwrap()
    };
    let topo = load_nodes("dgx-h100", 1, &[]).unwrap();
    for (tp, dp, ep, zero, layers, dense) in [
        (1, 8, 8, 0, 2, 0),
        (1, 8, 8, 1, 2, 0),
        (2, 4, 2, 0, 2, 0),
        (2, 4, 4, 1, 2, 0),
        (1, 8, 2, 1, 2, 0),
        (1, 8, 8, 0, 3, 1),
        (2, 4, 4, 1, 3, 1),
    ] {
        let model = model_of(layers, dense);
        let s = Strategy::from_toml(&format!(
            "tp = {tp}\ndp = {dp}\nep = {ep}\nzero = {zero}\nglobal_batch = {dp}"
        ))
        .unwrap();
        let r = simulate_step(&model, &s, &topo, &model_timed_options()).unwrap();
        let want = model_state_bytes(&model, &s);
        let got = r.memory.model_state_bytes as f64;
        assert!(
            (got / want - 1.0).abs() <= 0.05,
            "tp={tp} dp={dp} ep={ep} zero={zero} dense={dense}: {got} vs {want}"
        );
        // More expert parallelism, fewer experts per GPU.
        assert!(r.memory.params > 0);
    }
}

#[test]
fn strategies_that_do_not_divide_the_experts_are_refused_naming_the_numbers() {
    let model = ModelSpec::preset("mixtral-8x7b").unwrap();
    let err = |text: &str| {
        Strategy::from_toml(text)
            .unwrap()
            .check(&model)
            .unwrap_err()
            .to_string()
    };
    assert!(err("dp = 6\nep = 3\nglobal_batch = 6").contains("8 experts do not split over ep = 3"));
    assert!(err("dp = 4\nep = 8\nglobal_batch = 8").contains("ep = 8 must divide dp = 4"));
    assert!(err("tp = 3\nglobal_batch = 1").contains("do not split over tp = 3"));
    assert!(err("cp = 2\ndp = 8\nep = 8\nglobal_batch = 8")
        .contains("cp = 2 with ep = 8 (`mixtral-8x7b`): expert parallelism over context-parallel ranks is not built"));
    let bad = ModelSpec::from_toml(
        "name = \"m\"\nlayers = 1\nhidden = 8\nheads = 2\nffn_hidden = 8\nvocab = 8\nseq = 8\nmlp = \"swiglu\"\nnorm = \"rmsnorm\"\n[moe]\nexperts = 2\ntop_k = 3\nexpert_ffn_hidden = 8\n",
    )
    .unwrap_err()
    .to_string();
    assert!(bad.contains("top_k (3) <= experts (2)"), "{bad}");
}

/// Serving an MoE model: prefill and decode run, and the weights per GPU
/// are every expert's (no expert parallelism when serving).
#[test]
fn moe_models_serve() {
    for dense in [0, 1] {
        serve_tiny(dense);
    }
}

fn serve_tiny(dense: u64) {
    let model = tiny_moe_dense(1, dense);
    let serving = Serving {
        tp: 2,
        pp: 1,
        dp: 1,
        ep: 1,
        batch: 4,
        prompt: 8,
        generate: 4,
        precision: Precision::Bf16,
        routed: RoutedExperts::Auto,
    };
    let topo = load_nodes("dgx-h100", 1, &[]).unwrap();
    let r = simulate_inference(&model, &serving, &topo, &model_timed_options()).unwrap();
    assert!(r.ttft_ps > 0 && r.decode_first.time_ps > 0);
    let (dense, experts) = shardsim::models::analytic::params_per_device(
        &model,
        &Strategy::from_toml("tp = 2\nglobal_batch = 1").unwrap(),
    );
    let want = (dense + experts) * 2.0;
    let got = r.memory.weight_bytes as f64;
    assert!(
        (got / want - 1.0).abs() < 0.01,
        "dense={dense}: {got} vs {want}"
    );
}

/// Serving with expert parallelism: each replica's prefill and decode
/// programs (manual over `expert`, tokens exchanged by all-to-all) match
/// the interpreter, with tensor parallelism and a first dense layer; the
/// weights per GPU are the analytic count with `experts / ep` routed
/// experts per layer.
#[test]
fn expert_parallel_serving_matches_the_interpreter_and_the_weight_count() {
    for (tp, ep, dense) in [(1, 2, 0), (2, 2, 1)] {
        let model = tiny_moe_dense(1, dense);
        let sv = Serving {
            tp,
            pp: 1,
            dp: ep,
            ep,
            batch: 2,
            prompt: 4,
            generate: 3,
            precision: Precision::F32,
            routed: RoutedExperts::Auto,
        };
        sv.check(&model).unwrap();
        for phase in [Phase::Prefill, Phase::Decode { context: 5 }] {
            for part in [
                Part {
                    layers: 2,
                    embed: true,
                    head: true,
                },
                Part {
                    layers: 1,
                    embed: false,
                    head: false,
                },
            ] {
                let what = format!("tp={tp} ep={ep} dense={dense} {phase:?} {part:?}");
                let text = serving_program(&model, &sv, phase, part);
                assert!(text.contains("stablehlo.all_to_all"), "{what}");
                check(&text, &what);
            }
        }
        let topo = load_nodes("dgx-h100", 1, &[]).unwrap();
        let sv = Serving {
            precision: Precision::Bf16,
            ..sv
        };
        let r = simulate_inference(&model, &sv, &topo, &model_timed_options()).unwrap();
        let (d, x) = shardsim::models::analytic::params_per_device(
            &model,
            &Strategy::from_toml(&format!(
                "tp = {tp}\ndp = {ep}\nep = {ep}\nglobal_batch = {ep}"
            ))
            .unwrap(),
        );
        let want = (d + x) * 2.0;
        let got = r.memory.weight_bytes as f64;
        assert!(
            (got / want - 1.0).abs() < 0.01,
            "tp={tp} ep={ep}: {got} vs {want}"
        );
    }
    // A layout that does not split the experts or the replicas is refused.
    let model = tiny_moe(0);
    let sv = |dp, ep| Serving {
        tp: 1,
        pp: 1,
        dp,
        ep,
        batch: 1,
        prompt: 4,
        generate: 2,
        precision: Precision::Bf16,
        routed: RoutedExperts::Auto,
    };
    let err = sv(3, 3).check(&model).unwrap_err().to_string();
    assert!(err.contains("4 experts do not split over ep = 3"), "{err}");
    let err = sv(2, 4).check(&model).unwrap_err().to_string();
    assert!(err.contains("ep = 4 must divide dp = 2"), "{err}");
}

/// Mixtral 8x7B decoding a large batch with one expert per GPU (ep = 8):
/// every expert gets tokens, so a step reads each GPU's whole weights (its
/// attention, router and tables plus its expert of every layer) and the
/// cache; the step is at least that roofline, and within 25% of it
/// without the all-to-alls' exposed time (which they add on NVLink).
#[test]
fn expert_parallel_decode_follows_the_roofline_at_a_large_batch() {
    expert_parallel_decode_follows_the_roofline(256, 512, 1.25);
}

/// Routed decode with expert parallelism at batch 1 per replica (8
/// replicas, 16 token slots over 8 experts): the dispatch reads each GPU's
/// whole weights once, so the step is the memory roofline `(weights +
/// cache) / HBM`, at least it and within 5% of it less the exposed
/// all-to-alls; `routed = "gather"` with ep > 1 is refused naming the
/// numbers.
#[test]
fn expert_parallel_decode_follows_the_roofline_at_batch_one() {
    // 1.05 until the timed fusion stopped joining kernels on a cycle
    // (session 35: 1.055 after it).
    expert_parallel_decode_follows_the_roofline(1, 2048, 1.07);
    let model = ModelSpec::preset("mixtral-8x7b").unwrap();
    let sv = Serving {
        tp: 1,
        pp: 1,
        dp: 8,
        ep: 8,
        batch: 1,
        prompt: 2048,
        generate: 2,
        precision: Precision::Bf16,
        routed: RoutedExperts::Gather,
    };
    let err = sv.check(&model).unwrap_err().to_string();
    assert!(
        err.contains(
            "routed = \"gather\" with ep = 8: each replica's 1 local experts (8 experts / ep 8)"
        ),
        "{err}"
    );
}

fn expert_parallel_decode_follows_the_roofline(batch: u64, prompt: u64, bound: f64) {
    let table =
        shardsim::exec::timed::parse_roofline(shardsim::models::step::KERNELS_TOML).unwrap();
    let p = &table["H100 SXM5 80GB"];
    let (bw, flops) = (3.35e12 * p.memory_efficiency, 989e12 * p.compute_efficiency);
    let model = ModelSpec::preset("mixtral-8x7b").unwrap();
    let sv = Serving {
        tp: 1,
        pp: 1,
        dp: 8,
        ep: 8,
        batch,
        prompt,
        generate: 2,
        precision: Precision::Bf16,
        routed: RoutedExperts::Auto,
    };
    let topo = load_nodes("dgx-h100", 1, &[]).unwrap();
    let r = simulate_inference(&model, &sv, &topo, &model_timed_options()).unwrap();
    let (d, x) = shardsim::models::analytic::params_per_device(
        &model,
        &Strategy::from_toml("dp = 8\nep = 8\nglobal_batch = 8").unwrap(),
    );
    let weights = 2.0 * (d + x);
    assert_eq!(r.memory.weight_bytes as f64, weights.round());
    let kv = (model.layers
        * shardsim::models::inference::kv_cache_bytes_per_layer(&model, &sv, sv.prompt))
        as f64;
    // Multiply-adds per GPU: its batch through the dense weights and, with
    // balanced routing, `batch x top_k` token slots through its expert.
    let m = model.moe.unwrap();
    let expert = 3.0 * (model.hidden * m.expert_ffn_hidden) as f64;
    let dense_macs = d - 2.0 * (model.vocab * model.hidden) as f64;
    let macs = sv.batch as f64 * (dense_macs + (model.vocab * model.hidden) as f64)
        + (sv.batch * m.top_k) as f64 * expert * model.layers as f64;
    let roof = (weights / bw).max(2.0 * macs / flops) + kv / bw;
    let got = r.decode_first.time_ps as f64 * 1e-12;
    // The step less its exposed all-to-all time is the roofline within 25%
    // (kernels each at their own bound, the dispatch and combine einsums).
    let exposed = (model.layers * r.decode_first.layer.exposed_comm_ps) as f64 * 1e-12;
    assert!(
        got >= roof,
        "batch {batch}: {got:.6} s vs roofline {roof:.6} s"
    );
    assert!(
        got - exposed <= bound * roof,
        "batch {batch}: {got:.6} s less {exposed:.6} s of all-to-all vs roofline {roof:.6} s"
    );
}

/// Decoding one sequence (2 token slots, 4 experts), each slot's expert is
/// gathered by index: the program reads the routed experts' weights only,
/// partitions and equals the interpreter (tp 1 and 2, shared experts, a
/// dense first layer), and gives the capacity dispatch's logits and keys
/// (nothing is dropped at batch 1). From 2 sequences on (4 slots) `auto`
/// dispatches.
#[test]
fn decode_gathers_the_routed_experts_and_equals_the_dispatch() {
    for (tp, shared, dense) in [(1, 0, 0), (2, 1, 1)] {
        let model = tiny_moe_dense(shared, dense);
        let sv = Serving {
            tp,
            pp: 1,
            dp: 1,
            ep: 1,
            batch: 1,
            prompt: 4,
            generate: 2,
            precision: Precision::F32,
            routed: RoutedExperts::Auto,
        };
        let phase = Phase::Decode { context: 5 };
        let part = Part {
            layers: 2,
            embed: true,
            head: true,
        };
        let what = format!("tp={tp} shared={shared} dense={dense}");
        let gathered = serving_program(&model, &sv, phase, part);
        // The embedding's lookup and one per expert matrix of each layer
        // (`serving_program`'s layers follow the dense ones).
        let gathers = gathered.matches("\"stablehlo.gather\"(").count();
        assert_eq!(gathers, 1 + 2 * 2, "{what}");
        check(&gathered, &what);
        let dispatch = Serving {
            routed: RoutedExperts::Dispatch,
            ..sv.clone()
        };
        let dispatched = serving_program(&model, &dispatch, phase, part);
        assert_eq!(
            dispatched.matches("\"stablehlo.gather\"(").count(),
            1,
            "{what}"
        );
        let module = parse_and_verify(&gathered).unwrap();
        let inputs = shardsim::scenario::runner::random_inputs(&module, 5).unwrap();
        let a = shardsim::ir::interp::interpret(&module, &inputs).unwrap();
        let b = shardsim::ir::interp::interpret(&parse_and_verify(&dispatched).unwrap(), &inputs)
            .unwrap();
        for (i, (x, y)) in a.iter().zip(&b).enumerate() {
            let (x, y) = (x.to_f64_vec(), y.to_f64_vec());
            let big = y.iter().map(|v| v.abs()).fold(1.0, f64::max);
            for (p, q) in x.iter().zip(&y) {
                assert!(
                    (p - q).abs() <= 1e-5 * big,
                    "{what}: result {i}: {p} vs {q}"
                );
            }
        }
        let two = Serving { batch: 2, ..sv };
        let layer = Part {
            layers: 1,
            embed: false,
            head: false,
        };
        let text = serving_program(&model, &two, phase, layer);
        assert!(
            !text.contains("stablehlo.gather"),
            "{what}: batch 2 dispatches"
        );
    }
    // Gathering needs every expert local.
    let model = tiny_moe(0);
    let sv = Serving {
        tp: 1,
        pp: 1,
        dp: 2,
        ep: 2,
        batch: 1,
        prompt: 4,
        generate: 2,
        precision: Precision::F32,
        routed: RoutedExperts::Gather,
    };
    let err = sv.check(&model).unwrap_err().to_string();
    assert!(
        err.contains("with ep = 2: each replica's 2 local experts (4 experts / ep 2)"),
        "{err}"
    );
}

/// Mixtral 8x7B decoding one sequence at tp 2: a step reads the attention,
/// router and head weights and only the 2 routed experts of each layer (of
/// 8), and the cache, so it follows the active-weights roofline: at least
/// `(active weights + cache) / HBM` and, less its exposed tensor-parallel
/// all-reduces, within 5% of it. Dispatching reads all 8 experts: at least
/// the all-weights roofline.
#[test]
fn batch_one_decode_reads_only_the_routed_experts() {
    let table =
        shardsim::exec::timed::parse_roofline(shardsim::models::step::KERNELS_TOML).unwrap();
    let bw = 3.35e12 * table["H100 SXM5 80GB"].memory_efficiency;
    let model = ModelSpec::preset("mixtral-8x7b").unwrap();
    let m = model.moe.unwrap();
    let sv = Serving {
        tp: 2,
        pp: 1,
        dp: 1,
        ep: 1,
        batch: 1,
        prompt: 4096,
        generate: 2,
        precision: Precision::Bf16,
        routed: RoutedExperts::Auto,
    };
    let topo = load_nodes("dgx-h100", 1, &[]).unwrap();
    let (h, tp) = (model.hidden, sv.tp);
    let d = model.head_dim();
    let attention = h * (model.heads + 2 * model.kv_heads()) * d + model.heads * d * h;
    let expert = 3 * h * m.expert_ffn_hidden;
    // Per GPU: its share of attention and experts, the replicated router
    // and norms, its share of the head (the embedding reads one row).
    let layer = |experts: u64| (attention + experts * expert) / tp + h * m.experts + 2 * h;
    let weights = |experts: u64| 2 * (model.layers * layer(experts) + model.vocab * h / tp + h);
    let kv =
        model.layers * shardsim::models::inference::kv_cache_bytes_per_layer(&model, &sv, 4096);
    let roof = |experts: u64| (weights(experts) + kv) as f64 / bw;
    let r = simulate_inference(&model, &sv, &topo, &model_timed_options()).unwrap();
    let got = r.decode_first.time_ps as f64 * 1e-12;
    let exposed = (model.layers * r.decode_first.layer.exposed_comm_ps) as f64 * 1e-12;
    let active = roof(m.top_k);
    assert!(got >= active, "{got:.6} s vs roofline {active:.6} s");
    // 1.05 until the timed fusion stopped joining kernels on a cycle
    // (session 35: 1.069 after it).
    assert!(
        got - exposed <= 1.08 * active,
        "{got:.6} s less {exposed:.6} s of all-reduces vs roofline {active:.6} s"
    );
    let all = Serving {
        routed: RoutedExperts::Dispatch,
        ..sv
    };
    let r = simulate_inference(&model, &all, &topo, &model_timed_options()).unwrap();
    let got = r.decode_first.time_ps as f64 * 1e-12;
    assert!(
        got >= roof(m.experts),
        "{got:.6} s vs {:.6} s",
        roof(m.experts)
    );
}
