//! Every chunk program the builders write (first, middle and last chunks;
//! GPT-style and Llama-style blocks; each recomputation mode, with and
//! without sequence parallelism) parses, propagates, partitions onto a
//! tensor-parallel mesh, and its partitioned run equals the interpreter.

use shardsim::exec::execute;
use shardsim::ir::interp::interpret;
use shardsim::ir::mlir::parse_and_verify;
use shardsim::models::chunk::{backward_program, forward_program, ChunkKind};
use shardsim::models::strategy::Precision;
use shardsim::models::{ModelSpec, Recompute, Strategy};
use shardsim::partition::partition;
use shardsim::propagate::{propagate_module, Strategy as Propagation};
use shardsim::scenario::runner::random_inputs;

fn tiny(llama: bool) -> ModelSpec {
    let text = if llama {
        "name = \"tiny-llama\"\nlayers = 2\nhidden = 16\nheads = 4\nkv_heads = 2\nffn_hidden = 24\nvocab = 16\nseq = 8\nmlp = \"swiglu\"\nnorm = \"rmsnorm\"\nrope = true\n"
    } else {
        "name = \"tiny-gpt\"\nlayers = 2\nhidden = 16\nheads = 4\nffn_hidden = 32\nvocab = 16\nseq = 8\nmlp = \"gelu\"\nnorm = \"layernorm\"\ndropout = true\n"
    };
    ModelSpec::from_toml(text).unwrap()
}

fn strategy(recompute: Recompute, sp: bool) -> Strategy {
    Strategy {
        tp: 2,
        micro_batch: 2,
        global_batch: 2,
        recompute,
        sequence_parallel: sp,
        precision: Precision::F32,
        ..Strategy::from_toml("global_batch = 2").unwrap()
    }
}

/// Partitioned run vs interpreter on seeded inputs.
pub(super) fn check(text: &str, what: &str) {
    let module = parse_and_verify(text).unwrap_or_else(|e| panic!("{what}: {e}\n{text}"));
    let inputs = random_inputs(&module, 7).unwrap();
    let reference = interpret(&module, &inputs).unwrap_or_else(|e| panic!("{what}: interp: {e}"));
    let mut m = module.clone();
    propagate_module(&mut m, Propagation::default()).unwrap_or_else(|e| panic!("{what}: {e}"));
    let program = partition(&m).unwrap_or_else(|e| panic!("{what}: partition: {e}"));
    let outs = execute(&program, &inputs).unwrap_or_else(|e| panic!("{what}: exec: {e}"));
    assert_eq!(outs.len(), reference.len(), "{what}");
    for (i, (o, r)) in outs.iter().zip(&reference).enumerate() {
        // Relative to the result's largest magnitude: sums split over
        // devices add in another order (random weights make values large).
        let (a, b) = (o.to_f64_vec(), r.to_f64_vec());
        let worst = a
            .iter()
            .zip(&b)
            .map(|(x, y)| (x - y).abs())
            .fold(0.0, f64::max);
        let big = b.iter().map(|y| y.abs()).fold(1.0, f64::max);
        assert!(
            worst <= 1e-5 * big,
            "{what}: result {i} differs from the interpreter by up to {worst} (largest value {big})"
        );
    }
}

#[test]
fn chunk_programs_partition_and_match_the_interpreter() {
    let kinds = [
        ChunkKind {
            layers: 2,
            first_layer: 0,
            embed: true,
            head: true,
        },
        ChunkKind {
            layers: 1,
            first_layer: 0,
            embed: true,
            head: false,
        },
        ChunkKind {
            layers: 1,
            first_layer: 1,
            embed: false,
            head: false,
        },
        ChunkKind {
            layers: 1,
            first_layer: 1,
            embed: false,
            head: true,
        },
    ];
    for llama in [false, true] {
        let model = tiny(llama);
        for recompute in [Recompute::None, Recompute::Selective, Recompute::Full] {
            for sp in [false, true] {
                // Without sequence parallelism the attention's dropout runs
                // apart from its softmax (Megatron-LM 2021's kernels).
                let s = Strategy {
                    separate_attention_dropout: !sp,
                    // Megatron-LM's fp32 loss, kernel by kernel, with
                    // sequence parallelism.
                    unfused_cross_entropy: sp,
                    ..strategy(recompute, sp)
                };
                for kind in kinds {
                    let what = format!(
                        "{} {recompute:?} sp={sp} separate dropout={} {kind:?}",
                        model.name, !sp
                    );
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

/// Tensor-parallel overlap (Megatron-Core with Transformer Engine) splits
/// each sequence-parallel all-gather and reduce-scatter into pieces that
/// overlap the matmuls: the programs still equal the interpreter, move no
/// more bytes, in more and smaller collectives, and the backward reorders input
/// and weight gradients without changing them.
#[test]
fn tensor_parallel_overlap_programs_match_the_interpreter_and_move_the_same_bytes() {
    let kinds = [
        ChunkKind {
            layers: 2,
            first_layer: 0,
            embed: true,
            head: true,
        },
        ChunkKind {
            layers: 1,
            first_layer: 1,
            embed: false,
            head: false,
        },
    ];
    let spmd = |text: &str| {
        let mut m = parse_and_verify(text).unwrap();
        propagate_module(&mut m, Propagation::default()).unwrap();
        partition(&m).unwrap()
    };
    for llama in [false, true] {
        let model = tiny(llama);
        for recompute in [Recompute::None, Recompute::Full] {
            let plain = strategy(recompute, true);
            let overlap = Strategy {
                tp_comm_overlap: true,
                ..plain.clone()
            };
            for kind in kinds {
                let what = format!("{} {recompute:?} overlap {kind:?}", model.name);
                for (pass, build) in [
                    ("forward", forward_program as fn(&_, &_, _) -> String),
                    ("backward", backward_program),
                ] {
                    let text = build(&model, &overlap, kind);
                    check(&text, &format!("{pass} {what}"));
                    let (a, b) = (spmd(&text), spmd(&build(&model, &plain, kind)));
                    assert!(
                        a.total_collective_bytes() <= b.total_collective_bytes(),
                        "{pass} {what}: the pieces move {} bytes, the whole {}",
                        a.total_collective_bytes(),
                        b.total_collective_bytes()
                    );
                    let count = |p: &shardsim::partition::SpmdProgram| {
                        p.steps
                            .iter()
                            .filter(|s| matches!(s, shardsim::partition::Step::Collective(_)))
                            .count()
                    };
                    // The backward's pieces are checked by value and bytes:
                    // its count also changes with what the early gathers
                    // let the partitioner share.
                    assert!(
                        pass == "backward" || count(&a) > count(&b),
                        "{pass} {what}: {} collectives with overlap, {} without",
                        count(&a),
                        count(&b)
                    );
                }
            }
        }
    }
}

/// Context parallelism: the sequence split over `context` ranks (two chunks
/// each), attention as ring attention with point-to-point sends; every
/// chunk program equals the interpreter (GPT and Llama blocks, with and
/// without tensor and sequence parallelism, each recomputation mode).
#[test]
fn context_parallel_programs_match_the_interpreter() {
    let kinds = [
        ChunkKind {
            layers: 1,
            first_layer: 0,
            embed: true,
            head: true,
        },
        ChunkKind {
            layers: 1,
            first_layer: 1,
            embed: false,
            head: false,
        },
    ];
    for llama in [false, true] {
        let model = tiny(llama);
        for (cp, tp, sp) in [(2, 1, false), (2, 2, true), (4, 1, false)] {
            for recompute in [Recompute::None, Recompute::Selective, Recompute::Full] {
                let s = Strategy {
                    cp,
                    tp,
                    ..strategy(recompute, sp)
                };
                s.check(&model).unwrap();
                for kind in kinds {
                    let what = format!("{} cp={cp} tp={tp} {recompute:?} {kind:?}", model.name);
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

/// The head's loss is the mean cross-entropy, fused or unfused: with every
/// input zero the logits are zero and the loss is ln(vocab) exactly (the
/// fused form had counted each token's log-sum-exp once per vocabulary
/// entry), and on seeded inputs both forms give the same loss.
#[test]
fn head_loss_is_the_mean_cross_entropy_fused_or_unfused() {
    use shardsim::tensor::Tensor;
    let head = ChunkKind {
        layers: 1,
        first_layer: 1,
        embed: false,
        head: true,
    };
    for llama in [false, true] {
        let model = tiny(llama);
        let mut losses = Vec::new();
        for unfused in [false, true] {
            let s = Strategy {
                unfused_cross_entropy: unfused,
                ..strategy(Recompute::None, true)
            };
            let module = parse_and_verify(&forward_program(&model, &s, head)).unwrap();
            let random = random_inputs(&module, 11).unwrap();
            let zeros: Vec<Tensor> = random
                .iter()
                .map(|t| Tensor::zeros(t.shape().to_vec(), t.dtype()).unwrap())
                .collect();
            let at_zero = interpret(&module, &zeros).unwrap()[0].to_f64_vec()[0];
            let expected = (model.vocab as f64).ln();
            assert!(
                (at_zero - expected).abs() < 1e-5,
                "{} unfused={unfused}: loss {at_zero} at zero inputs, ln(vocab) = {expected}",
                model.name
            );
            losses.push(interpret(&module, &random).unwrap()[0].to_f64_vec()[0]);
        }
        assert!(
            (losses[0] - losses[1]).abs() <= 1e-5 * losses[1].abs().max(1.0),
            "{}: fused loss {} vs unfused {}",
            model.name,
            losses[0],
            losses[1]
        );
    }
}
