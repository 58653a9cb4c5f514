//! Context parallelism (ring attention) against closed forms: the bytes a
//! GPU sends per layer, the activations it keeps, and that a step with
//! `cp` runs from the library, the CLI and is refused with the numbers when
//! the sequence does not split. The programs themselves are checked against
//! the interpreter in `programs.rs`.

use shardsim::ir::DeviceCollective;
use shardsim::models::chunk::{backward_program, forward_program, ChunkKind};
use shardsim::models::step::{kept_activation_bytes, model_timed_options, simulate_step};
use shardsim::models::{ModelSpec, Strategy};
use shardsim::partition::program::CollectiveKind;
use shardsim::topology::load_nodes;

use crate::common::shardsim_json;

fn llama(layers: u64) -> ModelSpec {
    ModelSpec::from_toml(&format!(
        "name = \"llama\"\nlayers = {layers}\nhidden = 1024\nheads = 16\nkv_heads = 8\nffn_hidden = 2816\nvocab = 8192\nseq = 2048\nmlp = \"swiglu\"\nnorm = \"rmsnorm\"\nrope = true\n"
    ))
    .unwrap()
}

fn strategy(text: &str) -> Strategy {
    Strategy::from_toml(text).unwrap()
}

const MIDDLE: ChunkKind = ChunkKind {
    layers: 1,
    first_layer: 1,
    embed: false,
    head: false,
};

/// Point-to-point bytes one GPU sends in a partitioned program, and whether
/// every collective of the program is a point-to-point send.
fn sends(text: &str) -> (u64, bool) {
    let mut m = shardsim::ir::mlir::parse_and_verify(text).unwrap();
    shardsim::propagate::propagate_module(&mut m, shardsim::propagate::Strategy::default())
        .unwrap();
    let p = shardsim::partition::partition(&m).unwrap();
    let mut bytes = 0;
    let mut only = true;
    for c in p.collectives() {
        match &c.kind {
            CollectiveKind::Device {
                op: DeviceCollective::CollectivePermute { .. },
                ..
            } => bytes += c.bytes,
            // Moves no data.
            CollectiveKind::Relabel | CollectiveKind::AllSlice(_) => {}
            _ => only = false,
        }
    }
    (bytes, only)
}

/// Forward: the local keys and values (`2 b (kv / tp) (s / cp) d` elements)
/// go around the ring in `cp - 1` sends; backward: the keys and values again
/// and their gradients as many times.
#[test]
fn ring_attention_sends_the_closed_form_bytes_per_layer() {
    let model = llama(2);
    let d = model.head_dim();
    for (cp, tp, b) in [(2, 1, 1), (4, 1, 1), (8, 1, 2), (2, 2, 1), (4, 2, 2)] {
        let s = strategy(&format!(
            "cp = {cp}\ntp = {tp}\nmicro_batch = {b}\nglobal_batch = {b}"
        ));
        let kv = 2 * b * (model.kv_heads() / tp) * (model.seq / cp) * d * 2;
        let want = (cp - 1) * kv;
        let (fwd, f_only) = sends(&forward_program(&model, &s, MIDDLE));
        let (bwd, b_only) = sends(&backward_program(&model, &s, MIDDLE));
        assert_eq!(fwd, want, "cp={cp} tp={tp} b={b}: forward");
        assert_eq!(bwd, 2 * want, "cp={cp} tp={tp} b={b}: backward");
        // Without tensor parallelism the ring is all a layer sends (its
        // weight gradients stay partial sums per context rank).
        if tp == 1 {
            assert!(f_only && b_only, "cp={cp}: only point-to-point sends");
        }
    }
}

/// A layer's kept activations per GPU divide by `cp`: those of one GPU
/// without context parallelism with a flash-attention kernel (ring
/// attention keeps no probabilities either), plus the softmax's
/// log-sum-exp (`b heads s` values), all split over the context ranks.
#[test]
fn kept_activations_divide_by_cp() {
    let model = llama(2);
    let kind = |layers| ChunkKind { layers, ..MIDDLE };
    let per_layer = |s: &Strategy| {
        kept_activation_bytes(&model, s, kind(2)).unwrap()
            - kept_activation_bytes(&model, s, kind(1)).unwrap()
    };
    for (tp, sp) in [(1, false), (2, true)] {
        let flash = strategy(&format!(
            "tp = {tp}\nsequence_parallel = {sp}\nflash_attention = true\nglobal_batch = 1"
        ));
        let lse = model.heads / tp * model.seq * 2;
        let whole = per_layer(&flash) + lse;
        for cp in [2, 4, 8] {
            let s = strategy(&format!(
                "cp = {cp}\ntp = {tp}\nsequence_parallel = {sp}\nglobal_batch = 1"
            ));
            assert_eq!(per_layer(&s) * cp, whole, "cp={cp} tp={tp}");
        }
    }
}

/// A step with `cp` runs; twice the context ranks on twice the GPUs hold
/// fewer activations, and the strategy's refusals name the numbers.
#[test]
fn a_context_parallel_step_runs_and_bad_splits_are_refused() {
    let model = llama(4);
    let run = |text: &str, gpus: u32| {
        let topo = load_nodes("dgx-h100", gpus.div_ceil(8), &[]).unwrap();
        simulate_step(&model, &strategy(text), &topo, &model_timed_options()).unwrap()
    };
    let one = run(
        "tp = 8\nsequence_parallel = true\nflash_attention = true\nglobal_batch = 1",
        8,
    );
    let two = run(
        "tp = 8\ncp = 2\nsequence_parallel = true\nglobal_batch = 1",
        16,
    );
    assert_eq!(two.gpus, 16);
    assert!(two.step_time_ps > 0);
    // Half the activations in flight (and the log-sum-exp), the same model
    // states: context ranks hold every weight.
    let lse = 4 * model.heads / 8 * model.seq * 2;
    assert_eq!(
        2 * two.memory.activation_bytes,
        one.memory.activation_bytes + lse
    );
    assert_eq!(two.memory.model_state_bytes, one.memory.model_state_bytes);
    for (text, says) in [
        (
            "cp = 3\nglobal_batch = 1",
            "sequence 2048 does not split into 2 x cp = 2 x 3",
        ),
        (
            "cp = 2\ntp = 2\nsequence_parallel = true\ntp_comm_overlap = true\nglobal_batch = 1",
            "tp_comm_overlap is not built with cp = 2",
        ),
    ] {
        let err = strategy(text).check(&model).unwrap_err().to_string();
        assert!(err.contains(says), "{text}: {err}");
    }
}

#[test]
fn train_takes_cp_from_the_command_line() {
    let r = shardsim_json(&[
        "train",
        "llama3-8b",
        "--tp",
        "8",
        "--cp",
        "2",
        "--seq",
        "8192",
        "--sequence-parallel",
        "--format",
        "json",
    ]);
    assert_eq!(r["gpus"], 16);
    assert!(r["tokens_per_s"].as_f64().unwrap() > 0.0);
}
