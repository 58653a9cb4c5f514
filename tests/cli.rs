//! The `shardsim` binary: the README's command works, user errors exit 2 with one line.

use crate::common::{shardsim, shardsim_json};

mod audit;

#[test]
fn readme_mesh_command_runs() {
    let out = shardsim(&["mesh", "--shape", "2,4", "--names", "x,y"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains(r#"mesh (Shardy):     <["x"=2, "y"=4]>"#),
        "{text}"
    );
    assert!(text.contains("device    5  pos    5  x=1 y=1"), "{text}");
}

#[test]
fn mesh_json_has_local_shapes() {
    let out = shardsim(&[
        "mesh",
        "--shape",
        "2,4",
        "--names",
        "x,y",
        "--sharding",
        r#"<@mesh, [{"x"}, {"y"}]>"#,
        "--tensor",
        "16x32",
        "--format",
        "json",
    ]);
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["devices"][5]["local_shape"], serde_json::json!([8, 8]));
    assert_eq!(
        v["devices"][5]["ranges"],
        serde_json::json!([[8, 16], [8, 16]])
    );
    assert_eq!(v["sharding"]["placement"], "S[0], S[1]");
}

#[test]
fn user_errors_exit_2_with_one_line() {
    for args in [
        vec!["mesh", "--shape", "2,x"],
        vec!["mesh", "--shape", "2,4", "--names", "x"],
        vec![
            "mesh",
            "--shape",
            "2,2",
            "--names",
            "x,y",
            "--device-ids",
            "0,0,1,2",
        ],
        vec![
            "mesh",
            "--shape",
            "2,4",
            "--names",
            "x,y",
            "--sharding",
            r#"<@mesh, [{"w"}]>"#,
            "--tensor",
            "8",
        ],
        vec![
            "mesh",
            "--shape",
            "2,4",
            "--names",
            "x,y",
            "--sharding",
            r#"<@mesh, [{"x"}]>"#,
            "--tensor",
            "8x8",
        ],
        vec!["mesh", "--bogus"],
    ] {
        let out = shardsim(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        if args[1] != "--bogus" {
            assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
            assert!(err.starts_with("error: "), "{err}");
        }
    }
}

/// One vocabulary: every subcommand that writes files spells it `--out`;
/// `collective` and `exec` take `--set` and `--format` like `run` and
/// `topology`.
#[test]
fn every_subcommand_speaks_the_same_flags() {
    for cmd in [
        "run",
        "sweep",
        "merge",
        "interp",
        "propagate",
        "partition",
        "exec",
        "plan",
        "collective",
    ] {
        let out = shardsim(&[cmd, "--help"]);
        assert!(out.status.success(), "{cmd} --help");
        let help = String::from_utf8(out.stdout).unwrap();
        assert!(help.contains("--out"), "{cmd} --help has no --out");
        assert!(
            !help.contains("--output"),
            "{cmd} --help still has --output"
        );
    }
    for cmd in ["collective", "exec", "run"] {
        let help = String::from_utf8(shardsim(&[cmd, "--help"]).stdout).unwrap();
        for flag in ["--set <KEY=VALUE>", "--format <FORMAT>"] {
            assert!(help.contains(flag), "{cmd} --help lacks {flag}:\n{help}");
        }
    }
    let help = String::from_utf8(shardsim(&["collective", "--help"]).stdout).unwrap();
    for kind in ["all_reduce", "all_gather", "reduce_scatter", "all_to_all"] {
        assert!(
            help.contains(kind),
            "collective --help does not name {kind}"
        );
    }
}

/// Collective kinds have the names outputs print (`all_reduce`, as timed
/// runs and scenarios print them); nccl-tests' spellings mean the same.
#[test]
fn collective_kinds_read_as_they_print() {
    let csv = |op: &str| {
        let out = shardsim(&[
            "collective",
            "--topology",
            "dgx-h100",
            "--op",
            op,
            "--sizes",
            "1MiB,64MiB",
            "--format",
            "csv",
        ]);
        assert!(
            out.status.success(),
            "{op}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    for (name, nccl) in [
        ("all_reduce", "allreduce"),
        ("all_gather", "allgather"),
        ("reduce_scatter", "reducescatter"),
        ("all_to_all", "alltoall"),
        ("collective_permute", "sendrecv"),
    ] {
        assert_eq!(csv(name), csv(nccl), "{name}");
    }
    assert_ne!(csv("all_reduce"), csv("all_gather"));
    // The text table starts with what ran, overrides included.
    let out = shardsim(&[
        "collective",
        "--topology",
        "dgx-h100",
        "--nodes",
        "2",
        "--set",
        "nic.bandwidth=800Gb/s",
        "--sizes",
        "1MiB",
    ]);
    let text = String::from_utf8(out.stdout).unwrap();
    let first = text.lines().next().unwrap();
    assert!(
        first.starts_with("all_reduce over 16 ranks (n0.gpu0..n1.gpu7) of dgx-h100 x 2 nodes")
            && first.contains("overrides: nic.bandwidth=800Gb/s"),
        "{first}"
    );
}

/// `exec --format json` is one document with the mesh, the overrides and
/// the timing; a faster NVLink override gives a shorter step.
#[test]
fn exec_json_records_mesh_and_overrides() {
    let program = crate::common::fixture("jax/megatron_mlp/before.mlir");
    let exec = |extra: &[&str]| -> serde_json::Value {
        let mut args = vec![
            "exec",
            program.to_str().unwrap(),
            "--topology",
            "dgx-h100",
            "--format",
            "json",
        ];
        args.extend_from_slice(extra);
        shardsim_json(&args)
    };
    let base = exec(&[]);
    let fast = exec(&["--set", "nvlink.bandwidth=4500GB/s"]);
    assert!(base["mesh"].as_str().unwrap().starts_with("<["), "{base}");
    assert_eq!(base["timed"]["mesh"], base["mesh"]);
    assert_eq!(base["timed"]["overrides"], serde_json::json!([]));
    assert_eq!(
        fast["timed"]["overrides"],
        serde_json::json!(["nvlink.bandwidth=4500GB/s"])
    );
    assert_eq!(base["shape_only"], "no --inputs given");
    let step = |v: &serde_json::Value| v["timed"]["step_time_ps"].as_u64().unwrap();
    assert!(
        step(&fast) < step(&base),
        "{} vs {}",
        step(&fast),
        step(&base)
    );
}

#[test]
fn partition_writes_with_out() {
    let program = crate::common::fixture("jax/megatron_mlp/before.mlir");
    let dir = std::env::temp_dir().join(format!("shardsim-cli-out-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("partitioned.mlir");
    let out = shardsim(&[
        "partition",
        program.to_str().unwrap(),
        "--out",
        file.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(std::fs::read_to_string(&file)
        .unwrap()
        .contains("func.func"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Wrong input to the flags of one vocabulary: exit 2, one line saying what.
#[test]
fn vocabulary_errors_exit_2_with_one_line() {
    let measured = crate::common::fixture("report/a100_1node_allreduce.csv");
    let not_a_curve = crate::common::fixture("scenario/tiny_sweep.toml");
    let m = measured.to_str().unwrap();
    let sweep = not_a_curve.to_str().unwrap();
    for (args, want) in [
        (
            vec!["collective", "--topology", "dgx-h100", "--op", "all_sum"],
            "unknown operation (expected all_reduce",
        ),
        (
            vec!["collective", "--topology", "dgx-h100", "--measured", m],
            "give --out too",
        ),
        (
            vec![
                "collective",
                "--topology",
                "dgx-h100",
                "--measured",
                sweep,
                "--out",
                "/tmp/shardsim-never-written",
            ],
            "tiny_sweep.toml",
        ),
        (
            vec![
                "collective",
                "--topology",
                "dgx-h100",
                "--set",
                "nvlink.speed=1",
            ],
            "nvlink.speed",
        ),
        (
            vec!["collective", "--topology", "dgx-h100", "--format", "yaml"],
            "yaml",
        ),
        (vec!["merge", "a.csv", "--out", "b.csv"], "--sweep"),
        (
            vec![
                "merge",
                "--sweep",
                sweep,
                "/nonexistent.csv",
                "--out",
                "/tmp/x.csv",
            ],
            "/nonexistent.csv",
        ),
    ] {
        let out = shardsim(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        if !err.contains("For more information") {
            assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        }
    }
    assert!(!std::path::Path::new("/tmp/shardsim-never-written").exists());
}

/// `run --set` takes topology overrides as `exec` and `collective` do
/// (`nvlink.bandwidth=...`), the same as the scenario key `set.nvlink.bandwidth`.
#[test]
fn run_set_takes_topology_overrides_as_exec_does() {
    let base = crate::common::fixture("scenario/tiny_base.toml");
    let dir = std::env::temp_dir().join(format!("shardsim-cli-runset-{}", std::process::id()));
    let run = |set: &str| -> serde_json::Value {
        let out = shardsim(&[
            "run",
            base.to_str().unwrap(),
            "--set",
            set,
            "--format",
            "json",
            "--no-plots",
            "--out",
            dir.to_str().unwrap(),
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let short = run("nvlink.bandwidth=100GB/s");
    let long = run("set.nvlink.bandwidth=100GB/s");
    assert_eq!(short, long);
    assert_eq!(
        short[0]["overrides"],
        serde_json::json!(["nvlink.bandwidth=100GB/s"])
    );
    assert!(short[0]["mesh"].as_str().unwrap().contains("\"data\"=2"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--strategy basic-conservative` reaches the conservative pass: a reshape that
/// would need a sub-axis of `a` gets it from `basic` and nothing from the
/// conservative strategy (Shardy's basic_propagation_conservative answer).
#[test]
fn propagate_strategy_basic_conservative_never_splits_an_axis() {
    let dir = std::env::temp_dir().join(format!("shardsim-conservative-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let program = dir.join("split.mlir");
    std::fs::write(
        &program,
        r#"module @m {
  sdy.mesh @m = <["a"=4, "b"=2]>
  func.func @main(%p: tensor<16xf32> {sdy.sharding = #sdy.sharding<@m, [{"a"}]>}) -> tensor<2x8xf32> {
    %r = stablehlo.reshape %p : (tensor<16xf32>) -> tensor<2x8xf32>
    return %r : tensor<2x8xf32>
  }
}
"#,
    )
    .unwrap();
    let sharding_of_r = |strategy: &str| {
        let path = program.to_str().unwrap();
        let v = shardsim_json(&[
            "propagate",
            path,
            "--strategy",
            strategy,
            "--format",
            "json",
        ]);
        let values = v["values"].as_array().unwrap();
        let r = values
            .iter()
            .find(|x| x["name"].as_str().unwrap().ends_with("%r"));
        r.unwrap()["sharding"].as_str().unwrap_or("").to_string()
    };
    let basic = sharding_of_r("basic");
    let conservative = sharding_of_r("basic-conservative");
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(basic.contains("\"a\":(1)2"), "basic: {basic}");
    assert!(
        !conservative.contains("\"a\""),
        "conservative: {conservative}"
    );
}

/// A user error: exit 2, one line on stderr that says `want`; no panic.
fn refused(args: &[&str], want: &str) {
    let out = shardsim(args);
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert!(!err.contains("panicked"), "{args:?}: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
    assert!(err.contains(want), "{args:?}: {err}");
}

/// Without `--topology` nothing is timed, so every flag of the timed run
/// would silently do nothing: each is refused by name.
#[test]
fn exec_timing_flags_without_a_topology_are_refused() {
    let program = crate::common::fixture("timed/chain.mlir");
    let p = program.to_str().unwrap();
    for (flag, value) in [
        ("--nodes", Some("2")),
        ("--set", Some("nvlink.bandwidth=900GB/s")),
        ("--seed", Some("7")),
        ("--jitter", Some("0.05")),
        ("--straggler", Some("3:1.5")),
        ("--on-oom", Some("continue")),
        ("--roofline", Some("x.toml")),
        ("--link-fault", Some("n0.gpu3->n0.nvswitch@2ms:0.5")),
        ("--random-stragglers", Some("2:1.5")),
        ("--random-link-failures", Some("2@5ms")),
        ("--no-symmetry", None),
        ("--trip-count", Some("3")),
    ] {
        let mut args = vec!["exec", p, "--shape-only", flag];
        args.extend(value);
        refused(&args, &format!("{flag} needs --topology"));
    }
}

/// `--separate-attention-dropout` splits a kernel out of unfused attention
/// with dropout: with flash attention, or for a model without dropout, the
/// flag would do nothing and is refused.
#[test]
fn train_separate_attention_dropout_that_would_do_nothing_is_refused() {
    let base = [
        "train",
        "gpt3-175b",
        "--tp",
        "8",
        "--global-batch",
        "1",
        "--seq",
        "64",
        "--separate-attention-dropout",
    ];
    let mut flash = base.to_vec();
    flash.push("--flash-attention");
    refused(&flash, "flash attention fuses the dropout");
    let mut llama = base.to_vec();
    llama[1] = "llama3-8b";
    refused(&llama, "`llama3-8b` has no attention dropout");
}

/// Output directories that exist as files, a results CSV that is a
/// directory and zero jobs are refused before any work, naming the flag.
#[test]
fn output_directories_onto_files_and_zero_jobs_are_refused_up_front() {
    let tmp = std::env::temp_dir().join(format!("shardsim_cli_outdir_{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let file = tmp.join("a_file");
    std::fs::write(&file, "keep me").unwrap();
    let f = file.to_str().unwrap();
    let add_relu = crate::common::fixture("jax/add_relu/lowered.mlir");
    let (in0, in1) = (
        crate::common::fixture("jax/add_relu/in0.npy"),
        crate::common::fixture("jax/add_relu/in1.npy"),
    );
    let inputs = format!("{},{}", in0.display(), in1.display());
    let p = add_relu.to_str().unwrap();
    let gpt = format!("{}/models/gpt3_mlp_block.mlir", env!("CARGO_MANIFEST_DIR"));
    let sweep = format!(
        "{}/scenarios/sweeps/nvlink_mesh_nodes.toml",
        env!("CARGO_MANIFEST_DIR")
    );
    let not_dir = format!("{f}: exists and is not a directory");
    for (args, want) in [
        (
            vec!["run", "--out", f, "--no-plots"],
            format!("--out {not_dir}"),
        ),
        (
            vec!["interp", p, "--inputs", &inputs, "--out", f],
            format!("--out {not_dir}"),
        ),
        (
            vec!["exec", p, "--inputs", &inputs, "--out", f],
            format!("--out {not_dir}"),
        ),
        (
            vec!["exec", &gpt, "--topology", "dgx-h100", "--trace", f],
            format!("--trace {not_dir}"),
        ),
        (
            vec![
                "collective",
                "--topology",
                "dgx-h100",
                "--sizes",
                "1MiB",
                "--out",
                f,
            ],
            format!("--out {not_dir}"),
        ),
        (
            vec!["infer", "llama3-8b", "--tp", "8", "--emit", f],
            format!("--emit {not_dir}"),
        ),
        (
            vec!["sweep", &sweep, "--out", tmp.to_str().unwrap()],
            "is a directory (expected the results CSV file)".to_string(),
        ),
        (
            vec!["sweep", &sweep, "--jobs", "0", "--out", "x.csv"],
            "--jobs 0".to_string(),
        ),
    ] {
        let out = shardsim(&args);
        // Refused before any work: nothing on stdout.
        assert!(out.stdout.is_empty(), "{args:?} printed before failing");
        refused(&args, &want);
    }
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep me");
    std::fs::remove_dir_all(&tmp).unwrap();
}

/// Same inputs, same bytes: `run` and `sweep` print no wall time on stdout
/// (it goes to a terminal's stderr only), so two runs print the same.
#[test]
fn run_and_sweep_print_the_same_bytes_twice() {
    let tmp = std::env::temp_dir().join(format!("shardsim_cli_twice_{}", std::process::id()));
    let sweep = format!(
        "{}/scenarios/sweeps/nvlink_mesh_nodes.toml",
        env!("CARGO_MANIFEST_DIR")
    );
    let twice = |args: &dyn Fn(usize) -> Vec<String>| {
        let outs: Vec<_> = (0..2)
            .map(|i| {
                let a = args(i);
                let out = shardsim(&a.iter().map(String::as_str).collect::<Vec<_>>());
                assert!(out.status.success(), "{a:?}");
                String::from_utf8(out.stdout)
                    .unwrap()
                    .replace(&format!("/{i}"), "/N")
            })
            .collect();
        assert_eq!(outs[0], outs[1]);
    };
    twice(&|i| {
        let dir = tmp.join(i.to_string());
        vec![
            "run".into(),
            "--no-plots".into(),
            "--out".into(),
            dir.display().to_string(),
        ]
    });
    twice(&|i| {
        let csv = tmp.join(i.to_string()).join("r.csv");
        vec![
            "sweep".into(),
            sweep.clone(),
            "--shard".into(),
            "3/50".into(),
            "--out".into(),
            csv.display().to_string(),
        ]
    });
    assert_eq!(
        std::fs::read(tmp.join("0/r.csv")).unwrap(),
        std::fs::read(tmp.join("1/r.csv")).unwrap()
    );
    std::fs::remove_dir_all(&tmp).unwrap();
}

/// Zero cases, ops, blocks or runs would measure nothing (or silently run
/// once): each benchmark refuses them.
#[test]
fn benchmarks_refuse_zero_work() {
    for (args, want) in [
        (
            vec!["bench", "fuzz", "--cases", "0"],
            "--cases must be at least 1",
        ),
        (vec!["bench", "propagate", "--ops", "0"], "--ops and --runs"),
        (
            vec!["bench", "propagate", "--ops", "10", "--runs", "0"],
            "--ops and --runs",
        ),
        (
            vec!["bench", "exec", "--blocks", "0"],
            "--blocks and --runs",
        ),
        (
            vec!["bench", "exec", "--blocks", "1", "--runs", "0"],
            "--blocks and --runs",
        ),
    ] {
        refused(&args, want);
    }
}

/// `calibrate --name` names the topology `--out` writes: alone it would do nothing.
#[test]
fn calibrate_name_without_out_is_refused() {
    refused(
        &[
            "calibrate",
            "--measured",
            "x.csv",
            "--topology",
            "dgx-a100",
            "--name",
            "mine",
        ],
        "--name names the topology file that --out DIR writes",
    );
}

/// `propagate --explain` prints its explanation as text instead of the
/// program: a `--format` with it would do nothing and is refused.
#[test]
fn propagate_explain_with_a_format_is_refused() {
    let p = crate::common::fixture("jax/wsc_to_other_axis/before.mlir");
    let p = p.to_str().unwrap();
    for format in ["json", "mlir"] {
        refused(
            &["propagate", p, "--explain", "%1", "--format", format],
            "cannot be used with",
        );
    }
    let out = shardsim(&["propagate", p, "--explain", "%1"]);
    assert!(out.status.success());
    assert!(String::from_utf8(out.stdout)
        .unwrap()
        .contains("final sharding: <@mesh, [{}, {\"y\"}]>"));
}

/// A `--set` value of the wrong type is reported with the `--set` that
/// brought it, not only the scenario file (where the value is not).
#[test]
fn run_set_value_errors_name_the_set() {
    refused(
        &["run", "--set", "run.seed=abc", "--out", "/nonexistent/x"],
        "(with --set run.seed=abc)",
    );
}

/// `--nodes N` is `--set nodes=N`: two different counts contradict each
/// other (the later one used to win silently); the same count is fine.
#[test]
fn nodes_and_set_nodes_that_contradict_are_refused() {
    refused(
        &[
            "topology", "show", "dgx-h100", "--nodes", "2", "--set", "nodes=4",
        ],
        "--nodes 2 and --set nodes=4 contradict each other",
    );
    refused(
        &[
            "collective",
            "--topology",
            "dgx-h100",
            "--nodes",
            "2",
            "--set",
            "nodes=4",
            "--sizes",
            "1MiB",
        ],
        "contradict",
    );
    let out = shardsim(&[
        "topology", "show", "dgx-h100", "--nodes", "2", "--set", "nodes=2",
    ]);
    assert!(out.status.success());
}

/// `--schedule` orders a pipeline's microbatches: with one stage it would
/// do nothing (or, interleaved, split a stage Megatron-LM would not), so
/// it is refused; with stages it runs.
#[test]
fn train_schedule_without_pipeline_stages_is_refused() {
    for k in ["gpipe", "1f1b", "interleaved"] {
        refused(
            &[
                "train",
                "llama3-8b",
                "--tp",
                "8",
                "--global-batch",
                "1",
                "--seq",
                "64",
                "--schedule",
                k,
            ],
            &format!("--schedule {k} needs pipeline stages"),
        );
    }
}

/// A results CSV that cannot be written says so ("cannot write"), not
/// "cannot read".
#[test]
fn sweep_output_that_cannot_be_written_says_write() {
    let sweep = format!(
        "{}/scenarios/sweeps/nvlink_mesh_nodes.toml",
        env!("CARGO_MANIFEST_DIR")
    );
    refused(
        &["sweep", &sweep, "--shard", "3/50", "--out", "/dev/full"],
        "cannot write /dev/full: No space left on device",
    );
}

/// A bad `--sizes` is named once ("--sizes: sizes: ..." before).
#[test]
fn a_bad_sizes_value_names_the_flag_once() {
    for (args, want) in [
        (
            vec!["collective", "--topology", "ring:8", "--sizes", "1XB"],
            "error: --sizes: '1XB' is not a size",
        ),
        (
            vec!["collective", "--topology", "ring:8", "--sizes", "8:4"],
            "error: --sizes: '8:4' should be START:END:xF",
        ),
    ] {
        refused(&args, want);
        let out = shardsim(&args);
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(err.matches("sizes:").count(), 1, "{err}");
    }
}

/// Under the default chooser (`nccl-algo` across nodes, README "NCCL's
/// tuning model as a chooser") every preset still runs `auto`: where NCCL's
/// model does not cover the machine (ring, mesh, switch, TPU torus, PCIe
/// box) the default is `model`, not the error a named `nccl-algo` is there.
#[test]
fn every_preset_runs_auto_under_the_default_chooser() {
    for (preset, text) in shardsim::topology::PRESETS {
        // Two nodes where the preset joins nodes as it is (NVSwitch nodes).
        let multi = text.contains("layout = \"nvswitch-node\"");
        for nodes in if multi { &["1", "2"][..] } else { &["1"][..] } {
            let out = shardsim(&[
                "collective",
                "--topology",
                preset,
                "--nodes",
                nodes,
                "--sizes",
                "1MiB",
            ]);
            assert!(
                out.status.success(),
                "{preset} x {nodes}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}

/// Every command that takes a node count builds the fat tree as `train`
/// does: 512 DGX H100 nodes on the file's 64-port switches in three levels
/// (pods of 128 nodes under a core layer in 8 rail planes), the radix kept; where even
/// three levels of the file's switches cannot join the nodes and the user
/// set no radix, with the smallest power-of-two radix that fits
/// (`collective`, `topology` and `run` had refused 512 nodes); a radix the
/// user sets is kept, and one too small is an error naming the numbers.
#[test]
fn node_counts_past_the_switch_radix_build_as_train_builds_them() {
    let out = crate::common::shardsim_stdout(&["topology", "show", "dgx-h100", "--nodes", "512"]);
    assert!(out.contains("4096 gpu"), "{out}");
    assert!(out.contains("8 core-switch"), "{out}");
    assert!(
        out.contains("network: rail-optimized fat tree, three levels: 16 leaves per rail x 8 rails in 4 pods (4 leaves per rail and 32 spines each) under 1024 cores in 8 rail planes; non-blocking"),
        "{out}"
    );
    let out = crate::common::shardsim_stdout(&[
        "collective",
        "--topology",
        "dgx-h100",
        "--nodes",
        "512",
        "--ranks",
        "local:0",
        "--sizes",
        "1MiB",
        "--set",
        "network.switch_radix=64",
        "--format",
        "csv",
    ]);
    assert_eq!(out.lines().count(), 2, "{out}");
    refused(
        &[
            "collective",
            "--topology",
            "dgx-h100",
            "--nodes",
            "129",
            "--set",
            "network.switch_radix=16",
            "--sizes",
            "1MiB",
        ],
        "129 nodes need 17 pods of 8 nodes but a core switch of radix 16 reaches at most 16",
    );
    // A file of 16-port switches at 129 nodes: built with radix 64 (two
    // levels: 256 nodes fit), as `train` would.
    let dir = std::env::temp_dir().join(format!("shardsim-radix-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("small-switches.toml");
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("topologies/dgx-h100.toml"),
    )
    .unwrap()
    .replace("switch_radix = 64", "switch_radix = 16");
    assert!(text.contains("switch_radix = 16"));
    std::fs::write(&file, text).unwrap();
    let out = crate::common::shardsim_stdout(&[
        "topology",
        "show",
        file.to_str().unwrap(),
        "--nodes",
        "129",
    ]);
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(out.contains("1032 gpu"), "{out}");
    assert!(!out.contains("core-switch"), "{out}");
    assert!(
        out.contains("network: rail-optimized fat tree, two levels: 5 leaves per rail x 8 rails under 32 spines; non-blocking"),
        "{out}"
    );
}
