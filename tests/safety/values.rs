//! Bad values: rates, capacities and latencies that are zero are refused with
//! the field named; `.npy` inputs are checked magic first; text formats locate
//! their errors; the silent wrong answers of issue 19 are errors or warnings;
//! an out-of-memory run exits 3.

use std::path::Path;

use shardsim::report::collective_plot::measured_curve_from;
use shardsim::tensor::npy;

use super::{scratch, user_error};
use crate::common::{fixture, shardsim};

fn add_relu() -> String {
    fixture("jax/add_relu/lowered.mlir").display().to_string()
}

#[test]
fn zero_rates_capacities_and_latencies_are_refused_with_the_field_named() {
    for (set, field) in [
        ("device.flops.bf16=0TFLOP/s", "device.flops.bf16"),
        ("nvlink.bandwidth=0GB/s", "nvlink.bandwidth"),
        ("nvlink.latency=0us", "nvlink.latency"),
        ("nic.latency=0ns", "nic.latency"),
        ("nic.bandwidth=0Gb/s", "nic.bandwidth"),
        ("host.memory=0GB", "host.memory"),
        (
            "device.memory=[{scope=\"global\",capacity=\"0GiB\",bandwidth=\"1TB/s\"}]",
            "device.memory.capacity",
        ),
    ] {
        for cmd in [
            vec!["topology", "show", "dgx-h100", "--set", set],
            vec!["exec", &add_relu(), "--topology", "dgx-h100", "--set", set],
            vec!["run", "--set", set],
            vec!["train", "llama3-8b", "--tp", "8", "--set", set],
            vec!["collective", "--topology", "dgx-h100", "--set", set],
        ] {
            let err = user_error(&cmd, field);
            // Said once: an error whose message carries its cause (`topology:
            // {0}`) is not followed by that cause again.
            assert_eq!(err.matches("must be positive").count(), 1, "{cmd:?}: {err}");
        }
    }
    // Negative and non-finite values do not parse as quantities at all.
    for (set, field) in [
        ("nvlink.bandwidth=-1GB/s", "nvlink.bandwidth"),
        ("nvlink.bandwidth=NaNGB/s", "nvlink.bandwidth"),
        ("nvlink.bandwidth=infGB/s", "nvlink.bandwidth"),
        ("device.flops.bf16=-5TFLOP/s", "device.flops.bf16"),
    ] {
        user_error(&["topology", "show", "dgx-h100", "--set", set], field);
    }
}

/// The AWS presets' EFA latency is a `nic.latency` like any other: a zero,
/// negative, unitless or non-numeric value is one line naming the `--set`
/// and the field, exit 2 (in a file: tests/fixtures/topology/bad/nic_latency_*).
#[test]
fn bad_efa_nic_latencies_are_refused_with_the_field_named() {
    for preset in ["aws-p5", "aws-p4de"] {
        for (value, says) in [
            ("0us", "must be positive"),
            ("-23us", "must not be negative"),
            ("11.5", "needs a unit"),
            ("fast", "nic.latency"),
        ] {
            let set = format!("nic.latency={value}");
            let err = user_error(
                &[
                    "collective",
                    "--topology",
                    preset,
                    "--nodes",
                    "2",
                    "--set",
                    &set,
                ],
                says,
            );
            assert!(err.contains("nic.latency") && err.contains(&set), "{err}");
        }
    }
}

#[test]
fn bad_perturbation_values_are_refused() {
    let a = add_relu();
    for (flag, value, says) in [
        ("--straggler", "99:2", "there are 8 devices"),
        ("--straggler", "1:0", "straggler factor"),
        ("--straggler", "1:inf", "straggler factor"),
        ("--jitter", "nan", "jitter"),
        ("--jitter", "1.5", "jitter"),
        // Drawn failures are a list: a count of billions aborted on its allocation.
        (
            "--random-link-failures",
            "4294967296@1us",
            "at most 1000000 failures can be drawn",
        ),
        ("--random-stragglers", "4294967296:2", "among 8 devices"),
    ] {
        user_error(&["exec", &a, "--topology", "ring:8", flag, value], says);
    }
}

fn npy_bytes(header: &str) -> Vec<u8> {
    let mut h = header.to_string();
    while (10 + h.len() + 1) % 64 != 0 {
        h.push(' ');
    }
    h.push('\n');
    let mut b = b"\x93NUMPY\x01\x00".to_vec();
    b.extend_from_slice(&(h.len() as u16).to_le_bytes());
    b.extend_from_slice(h.as_bytes());
    b
}

#[test]
fn npy_inputs_are_checked_magic_first_then_header_then_size() {
    let dir = scratch("npy");
    let write = |name: &str, bytes: &[u8]| {
        let p = dir.join(name);
        std::fs::write(&p, bytes).unwrap();
        p
    };
    // /dev/zero fails on its magic at once (it used to be read whole).
    let err = npy::read_npy(Path::new("/dev/zero"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("magic"), "{err}");
    let cases = [
        ("text.npy", b"hello world, not numpy".to_vec(), "magic"),
        ("short.npy", b"\x93NUM".to_vec(), "magic"),
        (
            "version.npy",
            b"\x93NUMPY\x09\x00\x10\x00".to_vec(),
            "version 9.0",
        ),
        (
            "header.npy",
            b"\x93NUMPY\x01\x00\xff\x7f{'descr'".to_vec(),
            "header of 32767 bytes",
        ),
        (
            "dtype.npy",
            npy_bytes("{'descr': '<c32', 'fortran_order': False, 'shape': (2,), }"),
            "'<c32' is not supported",
        ),
        (
            "huge.npy",
            npy_bytes(
                "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999, 99999999999), }",
            ),
            "elements",
        ),
        (
            "trunc.npy",
            npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }"),
            "needs 16 bytes, found 0",
        ),
    ];
    for (name, bytes, says) in cases {
        let p = write(name, &bytes);
        let err = npy::read_npy(&p).unwrap_err().to_string();
        assert!(err.starts_with(&p.display().to_string()), "{err}");
        assert!(err.contains(says), "{name}: {err}");
        // And through the command line: one line, exit 2, the same words.
        user_error(
            &[
                "interp",
                &add_relu(),
                "--inputs",
                &format!("{},{}", p.display(), p.display()),
                "--out",
                dir.join("o").to_str().unwrap(),
            ],
            says,
        );
    }
    // A file larger than the cap is refused before its data is read.
    let mut big = npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1048576,), }");
    big.resize(big.len() + (4 << 20), 0);
    let p = write("big.npy", &big);
    user_error(
        &[
            "interp",
            &add_relu(),
            "--inputs",
            &format!("{0},{0}", p.display()),
            "--out",
            dir.join("o").to_str().unwrap(),
            "--max-input-size",
            "1MiB",
        ],
        "input size limit",
    );
}

#[test]
fn measured_csv_errors_carry_line_and_column() {
    let err = measured_curve_from(b"size_bytes,busbw_gbs\n1024,3.5\n2048,abc\n", "m.csv", "m")
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("m.csv:3:6:"), "{err}");
    let err = measured_curve_from(b"# c\nsize_bytes,busbw_gbs\n1024,3.5,9\n", "m.csv", "m")
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("m.csv:3:1:"), "{err}");
    let err = measured_curve_from(b"size,bw\n1,2\n", "m.csv", "m")
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("m.csv:1:1:") && err.contains("size_bytes"),
        "{err}"
    );
    let ok = measured_curve_from(b"size_bytes,busbw_gbs\n1024,3.5\n", "m.csv", "m").unwrap();
    assert_eq!(ok.1, vec![(1024.0, 3.5)]);
}

#[test]
fn clap_errors_are_one_line_and_exit_2() {
    for (args, says) in [
        (vec!["frobnicate"], "unrecognized subcommand"),
        (vec!["check"], "<INPUT>"),
        (vec!["check", "x.mlir", "--bogus"], "--bogus"),
        (
            vec!["check", "x.mlir", "--format", "xml"],
            "possible values",
        ),
        (
            vec!["mesh", "--shape", "2", "--max-input-size", "12"],
            "--max-input-size",
        ),
        (vec![], "subcommand"),
    ] {
        let err = user_error(&args, says);
        assert!(
            !err.contains("Usage:") && !err.contains("For more information"),
            "{err}"
        );
    }
}

#[test]
fn silent_wrong_answers_are_errors() {
    // A device list that does not cover the mesh was dropped.
    user_error(
        &["mesh", "--shape", "2,4", "--device-ids", "0,1,2"],
        "device_ids lists 3",
    );
    // A mesh smaller than the machine left devices idle.
    user_error(
        &[
            "exec",
            &add_relu(),
            "--topology",
            "dgx-h100",
            "--nodes",
            "4",
        ],
        "has 32",
    );
    // Inputs a shape-only run would ignore.
    let case = fixture("jax/add_relu");
    let inputs = format!(
        "{},{}",
        case.join("in0.npy").display(),
        case.join("in1.npy").display()
    );
    user_error(
        &["exec", &add_relu(), "--shape-only", "--inputs", &inputs],
        "would be ignored",
    );
    user_error(
        &[
            "exec",
            &add_relu(),
            "--inputs",
            &inputs,
            "--max-data-bytes",
            "1",
        ],
        "would be ignored",
    );
}

#[test]
fn mesh_device_ids_are_any_distinct_ids_and_duplicates_are_refused() {
    // TVM's DeviceMesh takes any distinct ids (the second half of a machine):
    // the CLI keeps them in mesh order, prints TVM's list form and shards on them.
    let out = shardsim(&[
        "mesh",
        "--shape",
        "2,2",
        "--names",
        "x,y",
        "--device-ids",
        "9,3,100,7",
        "--sharding",
        r#"<@mesh, [{"x"}, {"y"}]>"#,
        "--tensor",
        "4x4",
        "--format",
        "json",
    ]);
    assert!(out.status.success(), "{out:?}");
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["tvm"], "R.device_mesh((2, 2), [9, 3, 100, 7])");
    let devices: Vec<u64> = r["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["device"].as_u64().unwrap())
        .collect();
    assert_eq!(devices, [9, 3, 100, 7]);
    // Device 100 (position 2: x=1, y=0) holds rows 2..4, columns 0..2.
    assert_eq!(
        r["devices"][2]["ranges"],
        serde_json::json!([[2, 4], [0, 2]])
    );
    assert!(r["shardy"].as_str().unwrap().starts_with("(none"), "{r}");
    // Consecutive ids print as a Range; a permutation of 0..n stays Shardy's.
    let out = shardsim(&["mesh", "--shape", "4", "--device-ids", "8,9,10,11"]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("I.Range(8, 12)"),
        "{out:?}"
    );
    let out = shardsim(&[
        "mesh",
        "--shape",
        "3,2",
        "--names",
        "a,b",
        "--device-ids",
        "0,2,4,1,3,5",
    ]);
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .contains(r#"<["a"=3, "b"=2], device_ids=[0, 2, 4, 1, 3, 5]>"#),
        "{out:?}"
    );
    // Duplicates, negatives and a wrong count are one-line errors.
    user_error(
        &["mesh", "--shape", "2,2", "--device-ids", "5,6,5,7"],
        "--device-ids: device id 5 is listed twice",
    );
    user_error(
        &["mesh", "--shape", "2", "--device-ids", "3,-1"],
        "not a non-negative integer",
    );
    user_error(
        &["mesh", "--shape", "2,2", "--device-ids", "8,9,10"],
        "device_ids lists 3",
    );
}

#[test]
fn a_sweep_point_that_cannot_be_built_is_refused_before_anything_runs() {
    // A misspelt key or a value of the wrong type gave an error row and exit 0.
    let dir = scratch("sweeppoint");
    for (grid, says) in [
        (
            r#""topology.nodez" = [2]"#,
            "point 0 (topology.nodez = 2): default.toml: unknown field `nodez`",
        ),
        (
            r#""topology.nodes" = [2, "x"]"#,
            "point 1 (topology.nodes = x): default.toml: invalid type",
        ),
    ] {
        let sweep = dir.join("s.toml");
        std::fs::write(
            &sweep,
            format!("format = 1\nscenario = \"default\"\n[grid]\n{grid}\n"),
        )
        .unwrap();
        let out = dir.join("r.csv");
        user_error(
            &[
                "sweep",
                sweep.to_str().unwrap(),
                "--out",
                out.to_str().unwrap(),
            ],
            says,
        );
        assert!(!out.exists());
    }
}

#[test]
fn an_out_of_memory_run_exits_3_after_its_report() {
    let tiny = "device.memory=[{scope=\"global\",capacity=\"1KiB\",bandwidth=\"1TB/s\"}]";
    let out = shardsim(&[
        "exec",
        fixture("jax/megatron_mlp/lowered.mlir").to_str().unwrap(),
        "--topology",
        "ring:8",
        "--set",
        tiny,
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.starts_with("error: out of memory: device "), "{err}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("OUT OF MEMORY"));
}

#[test]
fn a_failed_run_still_says_what_it_drew() {
    // Fail every link early: the collectives cannot finish, and the error
    // names the links drawn, so the seed's draw can be reproduced.
    let out = shardsim(&[
        "exec",
        fixture("jax/megatron_mlp/lowered.mlir").to_str().unwrap(),
        "--topology",
        "ring:8",
        "--random-link-failures",
        "16@1ns",
    ]);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    // Every ring link fails within 1 ns: the first all-reduce cannot finish.
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("could not complete"), "{err}");
    // All 16 draws are named, and the same seed draws the same.
    assert_eq!(err.matches("link fault: ").count(), 16, "{err}");
    let again = shardsim(&[
        "exec",
        fixture("jax/megatron_mlp/lowered.mlir").to_str().unwrap(),
        "--topology",
        "ring:8",
        "--random-link-failures",
        "16@1ns",
    ]);
    assert_eq!(String::from_utf8_lossy(&again.stderr), err);
}

#[test]
fn roofline_figures_that_would_speed_compute_up_are_refused() {
    use shardsim::exec::timed::parse_roofline;
    let base = "[default]\ncompute_efficiency = 0.75\nmemory_efficiency = 0.85\nlaunch_us = 2.0\n";
    assert!(parse_roofline(base).is_ok());
    for (extra, says) in [
        ("k_half = -100.0\n", "k_half"),
        ("k_half = nan\n", "k_half"),
        ("k_half = inf\n", "k_half"),
    ] {
        let err = parse_roofline(&format!("{base}{extra}"))
            .unwrap_err()
            .to_string();
        assert!(err.contains(says), "{extra}: {err}");
    }
    for (field, value) in [
        ("compute_efficiency", "0.0"),
        ("compute_efficiency", "nan"),
        ("memory_efficiency", "-0.5"),
        ("launch_us", "-1.0"),
        ("launch_us", "inf"),
    ] {
        let text = base
            .lines()
            .map(|l| {
                if l.starts_with(field) {
                    format!("{field} = {value}")
                } else {
                    l.to_string()
                }
            })
            .collect::<Vec<_>>()
            .join("\n");
        assert!(parse_roofline(&text).is_err(), "{field} = {value}");
    }
    // TOML errors in it are located.
    let err = parse_roofline("[default]\ncompute_efficiency = \n")
        .unwrap_err()
        .to_string();
    assert!(err.contains("2:22"), "{err}");
}

/// The tiny-memory override every OOM test uses (1 KiB of device memory).
const TINY_MEMORY: &str =
    "device.memory=[{scope=\"global\",capacity=\"1KiB\",bandwidth=\"1TB/s\"}]";

/// A copy of a repository scenario in `dir` with its program path made
/// absolute and `expect` replacing its expectations.
fn scenario_copy(dir: &std::path::Path, name: &str, expect: &str) -> String {
    let repo = env!("CARGO_MANIFEST_DIR");
    let text = std::fs::read_to_string(format!("{repo}/scenarios/{name}")).unwrap();
    let body = text.split("[expect]").next().unwrap();
    let body = body.replace("\"../models/", &format!("\"{repo}/models/"));
    let p = dir.join(name);
    std::fs::write(&p, format!("{body}[expect]\n{expect}\n")).unwrap();
    p.to_str().unwrap().to_string()
}

#[test]
fn an_out_of_memory_scenario_run_exits_3_unless_it_expects_ooms() {
    let dir = super::scratch("run-oom");
    let out_dir = dir.join("reports");
    let run = |scenario: &str| {
        shardsim(&[
            "run",
            scenario,
            "--no-plots",
            "-o",
            out_dir.to_str().unwrap(),
            "--set",
            TINY_MEMORY,
        ])
    };
    let plain = scenario_copy(&dir, "gpt_tiny_pcie_box.toml", "");
    let out = run(&plain);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(
        err.starts_with("error: out of memory: scenario gpt_tiny_pcie_box: device 0 scope global:"),
        "{err}"
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("OUT OF MEMORY"));
    // A failed expectation in the same run does not hide the OOM.
    let timed = scenario_copy(
        &dir,
        "gpt_tiny_pcie_box.toml",
        "step_time = { value = \"1ms\" }",
    );
    let out = run(&timed);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.contains("1 expectation(s) failed too"), "{err}");
    // A scenario that expects OOMs passes when they happen...
    let expects = scenario_copy(&dir, "gpt_tiny_pcie_box.toml", "ooms = { min = 1 }");
    let out = run(&expects);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // ...and without the override (no OOM) its expectation fails (exit 1).
    let out = shardsim(&[
        "run",
        &expects,
        "--no-plots",
        "-o",
        out_dir.to_str().unwrap(),
    ]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn model_and_strategy_toml_errors_read_file_line_col() {
    let dir = super::scratch("model-toml");
    let model = dir.join("m.toml");
    std::fs::write(&model, "name = \"m\"\nlayers = \"many\"\n").unwrap();
    let m = model.to_str().unwrap();
    let err = super::user_error(&["train", m], "model:");
    assert!(
        err.starts_with(&format!("error: {m}:2:10: model: ")),
        "{err}"
    );
    let strategy = dir.join("s.toml");
    std::fs::write(&strategy, "tp = 2\npp = -1\n").unwrap();
    let s = strategy.to_str().unwrap();
    let err = super::user_error(&["train", "llama3-8b", "--strategy", s], "strategy:");
    assert!(
        err.starts_with(&format!("error: {s}:2:6: strategy: ")),
        "{err}"
    );
    // Not TOML at all: still located.
    std::fs::write(&strategy, "tp = [\n").unwrap();
    let err = super::user_error(&["train", "llama3-8b", "--strategy", s], "strategy:");
    assert!(
        err.starts_with(&format!("error: {s}:1:7: strategy: ")),
        "{err}"
    );
}
