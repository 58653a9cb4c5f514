//! `shardsim exec --topology NAME --trace DIR`: numerics and timing in one
//! run, the three trace files, byte-identical reruns, shape-only models, and
//! user errors (exit 2, one line).

use crate::common::{shardsim, shardsim_stdout};
use std::path::PathBuf;

fn temp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("shardsim-timed-{name}-{}", std::process::id()))
}

fn inputs(case: &str) -> String {
    let dir = crate::common::fixture(&format!("jax/{case}"));
    (0..)
        .map(|i| dir.join(format!("in{i}.npy")))
        .take_while(|p| p.exists())
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(",")
}

#[test]
fn exec_with_a_topology_reports_numerics_time_and_memory_and_writes_traces() {
    let program = crate::common::fixture("jax/megatron_mlp/before.mlir");
    let (a, b) = (temp("a"), temp("b"));
    let run = |dir: &PathBuf| {
        shardsim(&[
            "exec",
            program.to_str().unwrap(),
            "--inputs",
            &inputs("megatron_mlp"),
            "--topology",
            "dgx-h100",
            "--trace",
            dir.to_str().unwrap(),
        ])
    };
    let out = run(&a);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    for want in [
        "max abs error",
        "simulated step time",
        "on dgx-h100 (8 devices",
        "peak memory global",
        "all_reduce",
    ] {
        assert!(text.contains(want), "{want} missing from:\n{text}");
    }
    let trace: serde_json::Value =
        serde_json::from_slice(&std::fs::read(a.join("trace.json")).unwrap()).unwrap();
    let events = trace["traceEvents"].as_array().unwrap();
    assert!(events
        .iter()
        .any(|e| e["ph"] == "X" && e["cat"] == "compute"));
    assert!(events
        .iter()
        .any(|e| e["ph"] == "X" && e["cat"] == "communication"));
    assert!(events.iter().any(|e| e["ph"] == "X" && e["cat"] == "link"));
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(a.join("summary.json")).unwrap()).unwrap();
    assert!(summary["step_time_ps"].as_u64().unwrap() > 0);
    let csv = std::fs::read_to_string(a.join("events.csv")).unwrap();
    assert!(csv.starts_with("start_ps,end_ps,device,stream,step,op,value,flops,bytes,detail\n"));
    // A second run writes the same bytes.
    assert!(run(&b).status.success());
    for f in ["trace.json", "events.csv", "summary.json"] {
        assert_eq!(
            std::fs::read(a.join(f)).unwrap(),
            std::fs::read(b.join(f)).unwrap(),
            "{f}"
        );
    }
    let _ = std::fs::remove_dir_all(&a);
    let _ = std::fs::remove_dir_all(&b);
}

#[test]
fn a_large_model_runs_shape_only_with_a_step_time_above_its_compute_bound() {
    let model = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("models/gpt3_mlp_block.mlir");
    let out = shardsim(&["exec", model.to_str().unwrap(), "--topology", "dgx-h100"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("shape-only"), "{text}");
    // Two bf16 matmuls of 8192 x 12288 x 12288 per device at 989 TFLOP/s peak.
    let bound_ms = 2.0 * 2.0 * 8192.0 * 12288.0 * 12288.0 / 989e12 * 1e3;
    let ms: f64 = text
        .split("simulated step time ")
        .nth(1)
        .and_then(|r| r.strip_suffix_ms())
        .expect("step time in ms");
    assert!(
        ms > bound_ms && ms < 3.0 * bound_ms,
        "{ms} ms vs bound {bound_ms} ms"
    );
    // With inputs too large to materialize it still only times.
    let big = shardsim(&[
        "exec",
        model.to_str().unwrap(),
        "--topology",
        "dgx-h100",
        "--max-data-bytes",
        "1",
    ]);
    assert!(big.status.success());
}

trait StepTime {
    fn strip_suffix_ms(&self) -> Option<f64>;
}

impl StepTime for str {
    /// `8.114 ms on ...` -> 8.114.
    fn strip_suffix_ms(&self) -> Option<f64> {
        let (num, rest) = self.split_once(' ')?;
        rest.starts_with("ms").then(|| num.parse().ok()).flatten()
    }
}

#[test]
fn user_errors_exit_2_with_one_line() {
    let program = crate::common::fixture("timed/chain.mlir");
    let p = program.to_str().unwrap();
    for (args, want) in [
        (
            vec!["exec", p, "--topology", "dgx-h100", "--straggler", "3"],
            "DEVICE:FACTOR",
        ),
        (
            vec!["exec", p, "--topology", "no-such-machine"],
            "no-such-machine",
        ),
        (
            vec!["exec", p, "--trace", "/tmp/x"],
            "--trace needs --topology",
        ),
        (vec!["exec", p], "but 0 inputs"),
        (
            vec!["exec", p, "--topology", "ring:4"],
            "the mesh has 8 devices",
        ),
        (
            vec!["exec", p, "--topology", "dgx-h100", "--jitter=-1"],
            "jitter",
        ),
    ] {
        let out = shardsim(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(err.contains(want), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
    }
}

/// Stragglers and link failures drawn from the seed: the run names what it
/// drew, the same seed draws the same, and a straggler lengthens the step.
#[test]
fn seeded_stragglers_and_link_failures_are_reported_and_reproducible() {
    let model = crate::common::fixture("../../models/gpt3_mlp_block.mlir");
    let run = |seed: &str, extra: &[&str]| {
        let mut args = vec![
            "exec",
            model.to_str().unwrap(),
            "--topology",
            "dgx-h100",
            "--seed",
            seed,
        ];
        args.extend_from_slice(extra);
        shardsim_stdout(&args)
    };
    let step_us = |text: &str| -> f64 {
        let line = text
            .lines()
            .find(|l| l.starts_with("simulated step time"))
            .unwrap();
        let v: Vec<&str> = line.split_whitespace().collect();
        let x: f64 = v[3].parse().unwrap();
        if v[4] == "ms" {
            x * 1000.0
        } else {
            x
        }
    };
    let plain = run("7", &[]);
    let a = run(
        "7",
        &[
            "--random-stragglers",
            "2:1.5",
            "--random-link-failures",
            "2@5ms",
        ],
    );
    let b = run(
        "7",
        &[
            "--random-stragglers",
            "2:1.5",
            "--random-link-failures",
            "2@5ms",
        ],
    );
    assert_eq!(a, b);
    let drawn = |t: &str, what: &str| t.lines().filter(|l| l.starts_with(what)).count();
    assert_eq!(drawn(&a, "straggler: device "), 2, "{a}");
    assert_eq!(drawn(&a, "link fault: "), 2, "{a}");
    assert!(step_us(&a) > step_us(&plain), "{a}\n{plain}");
    let others: Vec<String> = ["8", "9", "10"]
        .iter()
        .map(|s| run(s, &["--random-stragglers", "2:1.5"]))
        .collect();
    assert!(others
        .iter()
        .any(|o| o.lines().take(3).ne(a.lines().take(3))));
    // Bad forms are user errors.
    for bad in [
        ["--random-stragglers", "9:1.5"],
        ["--random-link-failures", "2"],
    ] {
        let out = shardsim(&[
            "exec",
            model.to_str().unwrap(),
            "--topology",
            "dgx-h100",
            bad[0],
            bad[1],
        ]);
        assert_eq!(out.status.code(), Some(2));
    }
}

#[test]
fn exec_no_symmetry_writes_the_same_files_as_the_reduced_run() {
    let program = crate::common::fixture("jax/megatron_mlp/before.mlir");
    let (a, b) = (temp("sym-a"), temp("sym-b"));
    let run = |dir: &PathBuf, extra: &[&str]| {
        let mut args = vec![
            "exec",
            program.to_str().unwrap(),
            "--shape-only",
            "--topology",
            "dgx-h100",
            "--straggler",
            "2:1.5",
            "--link-fault",
            "n0.gpu0->n0.nvswitch@1us:0.5",
            "--format",
            "json",
            "--trace",
            dir.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let out = shardsim(&args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    };
    assert_eq!(run(&a, &[]), run(&b, &["--no-symmetry"]), "stdout");
    for f in ["trace.json", "events.csv", "summary.json"] {
        let (x, y) = (
            std::fs::read(a.join(f)).unwrap(),
            std::fs::read(b.join(f)).unwrap(),
        );
        assert!(x == y, "{f} differs");
    }
    let _ = std::fs::remove_dir_all(&a);
    let _ = std::fs::remove_dir_all(&b);
}
