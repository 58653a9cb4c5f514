//! `shardsim train` and `shardsim infer` as a user meets them: a preset with
//! a strategy prints its figures (JSON has them all), a faster NVLink makes
//! a tensor-parallel step faster, a step that cannot fit says so (exit 1),
//! and wrong input exits 2 with the numbers.

use crate::common::shardsim;

fn json(args: &[&str]) -> serde_json::Value {
    let out = shardsim(args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn train_reports_a_step_and_follows_the_machine() {
    let base = [
        "train",
        "llama3-8b",
        "--tp",
        "8",
        "--dp",
        "2",
        "--global-batch",
        "4",
        "--seq",
        "2048",
        "--sequence-parallel",
        "--flash-attention",
        "--format",
        "json",
    ];
    let r = json(&base);
    assert_eq!(r["gpus"], 16);
    assert_eq!(r["microbatches"], 2);
    let time = r["step_time_ps"].as_u64().unwrap();
    assert!(time > 0 && r["mfu"].as_f64().unwrap() > 0.05);
    assert!(r["memory"]["fits"].as_bool().unwrap());
    let mut faster = base.to_vec();
    faster.extend(["--set", "nvlink.bandwidth=1800GB/s"]);
    let f = json(&faster);
    assert!(f["step_time_ps"].as_u64().unwrap() < time);
}

#[test]
fn train_says_when_a_step_does_not_fit() {
    let out = shardsim(&[
        "train",
        "llama3-70b",
        "--tp",
        "8",
        "--dp",
        "2",
        "--global-batch",
        "2",
    ]);
    // The report is printed, and the exit code (3) says the step does not fit.
    assert_eq!(out.status.code(), Some(3));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        String::from_utf8_lossy(&out.stderr).starts_with("error: out of memory: stage"),
        "{out:?}"
    );
    assert!(
        text.contains("OUT OF MEMORY") && text.contains("the device has 80 GiB"),
        "{text}"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("out of memory"));
}

#[test]
fn train_refuses_what_does_not_divide() {
    for (args, says) in [
        (
            vec!["train", "llama3-70b", "--tp", "16"],
            "do not split over tp = 16",
        ),
        (vec!["train", "gpt3-175b", "--pp", "7"], "96 layers"),
        (vec!["train", "no-such-model"], "no model preset"),
        (
            vec!["train", "gpt3-175b", "--tp", "3", "--dp", "1"],
            "vocab 51200 does not split over tp = 3",
        ),
        (
            vec![
                "train",
                "gpt3-175b",
                "--tp",
                "4",
                "--dp",
                "1",
                "--topology",
                "dgx-h100",
            ],
            "not a whole number",
        ),
    ] {
        let out = shardsim(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

#[test]
fn infer_reports_ttft_decode_and_memory_and_follows_the_machine() {
    let base = [
        "infer",
        "llama3-70b",
        "--tp",
        "8",
        "--batch",
        "4",
        "--prompt",
        "1024",
        "--generate",
        "16",
        "--format",
        "json",
    ];
    let r = json(&base);
    assert_eq!(r["gpus"], 8);
    let ttft = r["ttft_ps"].as_u64().unwrap();
    let first = r["decode_first"]["time_ps"].as_u64().unwrap();
    let last = r["decode_last"]["time_ps"].as_u64().unwrap();
    // A longer cache is read at the last step; the prefill of 1,024 tokens
    // costs more than one decode step.
    assert!(ttft > first && last > first, "{r}");
    assert_eq!(
        r["memory"]["kv_cache_bytes"].as_u64().unwrap(),
        80 * 2 * 4 * (1024 + 15) * 128 * 2
    );
    // Faster HBM, faster decode; faster NVLink, faster tensor-parallel prefill.
    let mut hbm = base.to_vec();
    hbm.extend(["--set", "device.memory.global.bandwidth=6700GB/s"]);
    let h = json(&hbm);
    assert!(
        h["decode_first"]["time_ps"].as_u64().unwrap() < first,
        "{h}"
    );
    let mut nvl = base.to_vec();
    nvl.extend(["--set", "nvlink.bandwidth=1800GB/s"]);
    assert!(json(&nvl)["ttft_ps"].as_u64().unwrap() < ttft);
    // Two replicas serve twice the tokens in the same time.
    let mut two = base.to_vec();
    two.extend(["--dp", "2"]);
    let t = json(&two);
    assert_eq!(t["gpus"], 16);
    let ratio =
        t["decode_tokens_per_s"].as_f64().unwrap() / r["decode_tokens_per_s"].as_f64().unwrap();
    assert!((ratio - 2.0).abs() < 1e-9, "{ratio}");
}

#[test]
fn infer_says_when_the_cache_does_not_fit_and_refuses_bad_layouts() {
    let out = shardsim(&[
        "infer",
        "llama3-8b",
        "--batch",
        "512",
        "--prompt",
        "8192",
        "--generate",
        "2",
    ]);
    assert_eq!(out.status.code(), Some(3));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("OUT OF MEMORY"), "{text}");
    for (args, says) in [
        (
            vec!["infer", "llama3-70b", "--tp", "3"],
            "do not split over tp = 3",
        ),
        (
            vec!["infer", "llama3-70b", "--pp", "3"],
            "80 layers do not split over pp = 3",
        ),
        (
            vec!["infer", "llama3-8b", "--batch", "0"],
            "batch must be positive",
        ),
        (
            vec!["infer", "llama3-8b", "--prompt", "99999999999"],
            "batch 1 with prompt 99999999999 and generate",
        ),
        (
            vec!["infer", "llama3-8b", "--tp", "4", "--dp", "3"],
            "not a whole number",
        ),
        (vec!["infer", "llama3-8b", "--batch", "-1"], "'-1'"),
        (
            vec!["infer", "mixtral-8x7b", "--dp", "6", "--ep", "3"],
            "8 experts do not split over ep = 3",
        ),
        (
            vec!["infer", "llama3-8b", "--dp", "2", "--ep", "2"],
            "ep = 2 needs a mixture-of-experts model",
        ),
        (
            vec![
                "infer",
                "llama3-8b",
                "--set",
                "device.memory.bandwidth=1TB/s",
            ],
            "name an entry by its scope",
        ),
    ] {
        let out = shardsim(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

/// Expert parallelism from the command line: Mixtral 8x7B that does not fit
/// 64 GPUs with its experts replicated fits with `--ep 8` (fewer parameters
/// per GPU), and an `--ep` that does not divide the experts exits 2 naming
/// the numbers.
#[test]
fn train_splits_experts_with_ep() {
    let args = |ep: &'static str| {
        vec![
            "train",
            "mixtral-8x7b",
            "--tp",
            "2",
            "--dp",
            "32",
            "--ep",
            ep,
            "--seq",
            "1024",
            "--global-batch",
            "32",
            "--sequence-parallel",
            "--flash-attention",
            "--zero",
            "1",
            "--format",
            "json",
        ]
    };
    let out = shardsim(&args("1"));
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r = json(&args("8"));
    assert!(r["memory"]["fits"].as_bool().unwrap());
    let whole: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let (split, all) = (
        r["memory"]["params"].as_u64().unwrap(),
        whole["memory"]["params"].as_u64().unwrap(),
    );
    assert!(split * 5 < all, "{split} vs {all} parameters per GPU");
    let bad = shardsim(&args("3"));
    assert_eq!(bad.status.code(), Some(2));
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("8 experts do not split over ep = 3"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

/// A strategy that does not fill whole nodes (here the defaults: one GPU of
/// an 8-GPU DGX) is one line, exit 2, naming the product and the flags that
/// set it.
#[test]
fn train_names_the_flags_when_the_strategy_does_not_fill_whole_nodes() {
    let out = shardsim(&["train", "llama3-8b"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("(tp 1 x pp 1 x dp 1 x cp 1) uses 1 device, not a whole number of 8-device")
            && err
                .contains("set --tp, --pp, --dp and --cp so that their product is a multiple of 8"),
        "{err}"
    );
    let out = shardsim(&["train", "llama3-8b", "--tp", "4", "--dp", "3"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("uses 12 devices"));
}

/// `infer --ep`: Mixtral 8x7B serves with one expert per GPU on one DGX,
/// the header names the expert parallelism.
#[test]
fn infer_splits_experts_with_ep() {
    let out = shardsim(&[
        "infer",
        "mixtral-8x7b",
        "--dp",
        "8",
        "--ep",
        "8",
        "--prompt",
        "256",
        "--generate",
        "4",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("(tp 1, pp 1, dp 8, ep 8)"), "{text}");
}

#[test]
fn infer_refuses_routed_experts_on_a_dense_model() {
    // `--routed` must not be silently ignored where there are no experts.
    for mode in ["gather", "dispatch"] {
        let out = shardsim(&["infer", "llama3-8b", "--routed", mode]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains(&format!("routed = \"{mode}\"")), "{err}");
        assert!(err.contains("llama3-8b has no experts"), "{err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    }
    let out = shardsim(&["infer", "llama3-8b", "--routed", "auto", "--generate", "2"]);
    assert_eq!(out.status.code(), Some(0));
}

/// Llama 3 405B's 126 layers on 16 stages: refused with the way out named,
/// run with either uneven split; `--emit` writes a program per chunk size
/// where one role has several (a first stage of 2 layers over 2 virtual
/// stages leaves a middle chunk of 1 beside the middle chunks of 6).
#[test]
fn train_splits_stages_unevenly_and_emits_each_chunk_size() {
    let base = [
        "train",
        "llama3-405b",
        "--tp",
        "8",
        "--pp",
        "16",
        "--dp",
        "2",
        "--zero",
        "1",
        "--recompute",
        "full",
    ];
    let out = shardsim(&base);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("126 layers do not split into pp x virtual_stages = 16 x 1 chunks (first_stage_layers / last_stage_layers or embedding_in_pipeline_split"),
        "{err}"
    );
    let steps: Vec<serde_json::Value> = [
        &["--first-stage-layers", "7", "--last-stage-layers", "7"][..],
        &["--embedding-in-pipeline-split", "--loss-in-pipeline-split"],
    ]
    .iter()
    .map(|split| json(&[&base[..], split, &["--format", "json"]].concat()))
    .collect();
    assert_eq!(steps[0]["step_time_ps"], steps[1]["step_time_ps"]);
    assert_eq!(steps[0]["strategy"]["first_stage_layers"], 7);
    assert_eq!(steps[1]["strategy"]["loss_in_pipeline_split"], true);
    let dir = std::env::temp_dir().join(format!("shardsim-uneven-{}", std::process::id()));
    let model = dir.with_extension("toml");
    std::fs::write(
        &model,
        "name = \"m14\"\nlayers = 14\nhidden = 256\nheads = 4\nffn_hidden = 1024\nvocab = 512\nseq = 64\nmlp = \"gelu\"\nnorm = \"layernorm\"\n",
    )
    .unwrap();
    let out = shardsim(&[
        "train",
        model.to_str().unwrap(),
        "--pp",
        "2",
        "--dp",
        "4",
        "--virtual-stages",
        "2",
        "--schedule",
        "interleaved",
        "--first-stage-layers",
        "2",
        "--global-batch",
        "8",
        "--emit",
        dir.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with("_forward.mlir"))
        .collect();
    names.sort();
    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::remove_file(&model).unwrap();
    assert_eq!(
        names,
        [
            "first_forward.mlir",
            "last_forward.mlir",
            "middle1_forward.mlir",
            "middle6_forward.mlir"
        ]
    );
}
