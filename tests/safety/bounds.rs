//! Resource bounds: input size caps, checked shape arithmetic, mesh sizes,
//! nesting and call depth, priorities whose cost does not grow with their value.

use super::{scratch, user_error};
use crate::common::{fixture, shardsim};

fn add_relu_text() -> String {
    std::fs::read_to_string(fixture("jax/add_relu/lowered.mlir")).unwrap()
}

/// Write `text` as `name` in a scratch folder; returns its path.
fn program(dir: &std::path::Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

/// `cmd FILE`, with the `--out` that `interp` needs.
fn with_out<'a>(cmd: &'a str, file: &'a str, dir: &std::path::Path) -> Vec<String> {
    let mut v = vec![cmd.to_string(), file.to_string()];
    if cmd == "interp" {
        v.extend(["--out".to_string(), dir.join("out").display().to_string()]);
    }
    v
}

/// `depth` nested `stablehlo.case` ops, each holding the next in its region.
fn nested_cases(depth: usize) -> String {
    let mut s = String::from(
        "module {\n  func.func public @main(%i: tensor<i32>, %a: tensor<f32>) -> tensor<f32> {\n",
    );
    for k in 0..depth {
        s += &format!("    %r{k} = \"stablehlo.case\"(%i) ({{\n");
    }
    s += "      stablehlo.return %a : tensor<f32>\n";
    for k in (0..depth).rev() {
        s += "    }) : (tensor<i32>) -> tensor<f32>\n";
        if k > 0 {
            s += &format!("      stablehlo.return %r{k} : tensor<f32>\n");
        }
    }
    s + "    return %r0 : tensor<f32>\n  }\n}\n"
}

/// `@main` calling `@f0` calling ... `@f<depth-1>`.
fn call_chain(depth: usize) -> String {
    let mut s = String::from("module {\n  func.func public @main(%a: tensor<f32>) -> tensor<f32> {\n    %0 = call @f0(%a) : (tensor<f32>) -> tensor<f32>\n    return %0 : tensor<f32>\n  }\n");
    for i in 0..depth {
        let body = if i + 1 < depth {
            format!("    %0 = call @f{}(%a) : (tensor<f32>) -> tensor<f32>\n    return %0 : tensor<f32>\n", i + 1)
        } else {
            "    return %a : tensor<f32>\n".to_string()
        };
        s += &format!("  func.func private @f{i}(%a: tensor<f32>) -> tensor<f32> {{\n{body}  }}\n");
    }
    s + "}\n"
}

#[test]
fn a_huge_mesh_is_refused_before_anything_is_allocated() {
    user_error(&["mesh", "--shape", "100000,100000"], "at most 65536");
    user_error(
        &["mesh", "--shape", "9223372036854775807,4"],
        "overflows 64 bits",
    );
    let dir = scratch("bigmesh");
    for (size, says) in [
        ("4294967296", "at most 65536"),
        ("1000000000", "at most 65536"),
        ("9223372036854775807", "overflows 64 bits"),
    ] {
        let p = program(
            &dir,
            "m.mlir",
            &add_relu_text().replace("\"x\"=2", &format!("\"x\"={size}")),
        );
        for cmd in ["check", "propagate", "partition"] {
            let err = user_error(&[cmd, &p], says);
            assert!(err.contains("m.mlir:2:20:"), "{err}");
        }
    }
}

#[test]
fn shapes_whose_size_overflows_are_refused_at_their_line_and_column() {
    let dir = scratch("bigshape");
    for dims in [
        "99999999999x99999999999",
        "4294967296x4294967296",
        "9223372036854775807x2",
    ] {
        let p = program(&dir, "s.mlir", &add_relu_text().replace("16x8", dims));
        for cmd in ["check", "propagate", "partition", "interp"] {
            let err = user_error(&with_out(cmd, &p, &dir), "fit in a signed 64-bit integer");
            assert!(err.contains("s.mlir:3:33:"), "{cmd}: {err}");
        }
    }
    user_error(
        &[
            "mesh",
            "--shape",
            "2",
            "--names",
            "x",
            "--sharding",
            "<@mesh, [{\"x\"}, {}]>",
            "--tensor",
            "99999999999x99999999999",
        ],
        "too large",
    );
}

#[test]
fn deeply_nested_regions_are_an_error_not_a_stack_overflow() {
    let dir = scratch("nest");
    let deep = program(&dir, "deep.mlir", &nested_cases(50_000));
    for cmd in ["check", "propagate", "partition", "interp", "exec", "plan"] {
        let err = user_error(&with_out(cmd, &deep, &dir), "levels of nested regions");
        assert!(err.contains("deep.mlir:67:5:"), "{cmd}: {err}");
    }
    // The deepest accepted program runs through every walk.
    let ok = program(
        &dir,
        "ok.mlir",
        &nested_cases(shardsim::ir::mlir::MAX_REGION_DEPTH - 1),
    );
    for cmd in ["check", "propagate", "partition"] {
        let out = shardsim(&[cmd, &ok]);
        assert!(out.status.success(), "{cmd}: {out:?}");
    }
}

#[test]
fn long_call_chains_and_recursion_are_errors() {
    let dir = scratch("calls");
    let long = program(&dir, "long.mlir", &call_chain(20_000));
    for cmd in ["check", "propagate", "partition", "interp", "exec", "plan"] {
        user_error(&with_out(cmd, &long, &dir), "calls nest more than 64 deep");
    }
    let ok = program(
        &dir,
        "ok.mlir",
        &call_chain(shardsim::ir::verify::MAX_CALL_DEPTH),
    );
    assert!(shardsim(&["check", &ok]).status.success());
    let rec = program(
        &dir,
        "rec.mlir",
        "module {\n  func.func public @main(%a: tensor<f32>) -> tensor<f32> {\n    %0 = call @main(%a) : (tensor<f32>) -> tensor<f32>\n    return %0 : tensor<f32>\n  }\n}\n",
    );
    for cmd in ["check", "interp", "exec"] {
        let err = user_error(&with_out(cmd, &rec, &dir), "recursively");
        assert!(err.contains("rec.mlir:3:5:"), "{err}");
    }
}

#[test]
fn a_huge_priority_costs_one_level_and_means_what_a_small_one_means() {
    // Only the order of priorities matters: p4294967295 must give exactly
    // what p1 gives (it used to run four billion propagation levels).
    let dir = scratch("prio");
    let text = add_relu_text();
    let small = program(
        &dir,
        "p1.mlir",
        &text.replace("[{\"x\"}, {\"y\"}]", "[{\"x\"}p1, {\"y\"}]"),
    );
    let huge = program(
        &dir,
        "p2.mlir",
        &text.replace("[{\"x\"}, {\"y\"}]", "[{\"x\"}p4294967295, {\"y\"}]"),
    );
    let a = shardsim(&["propagate", &small]);
    let b = shardsim(&["propagate", &huge]);
    assert!(a.status.success() && b.status.success(), "{b:?}");
    let (a, b) = (
        String::from_utf8(a.stdout).unwrap(),
        String::from_utf8(b.stdout).unwrap(),
    );
    assert_eq!(a.replace("p1", "pN"), b.replace("p4294967295", "pN"));
}

#[test]
fn input_files_are_capped() {
    let dir = scratch("cap");
    let p = program(&dir, "add.mlir", &add_relu_text());
    user_error(
        &["check", &p, "--max-input-size", "100B"],
        "larger than the input size limit of 100 bytes",
    );
    assert!(shardsim(&["check", &p, "--max-input-size", "1MiB"])
        .status
        .success());
    // An endless device is cut at the cap, not read until memory runs out.
    user_error(
        &["check", "/dev/zero", "--max-input-size", "1MiB"],
        "input size limit",
    );
    user_error(
        &["run", "/dev/zero", "--max-input-size", "1MiB"],
        "input size limit",
    );
    user_error(
        &["topology", "show", "/dev/zero", "--max-input-size", "1MiB"],
        "",
    );
    user_error(&["check", dir.to_str().unwrap()], "is a directory");
    // `merge` read shard CSVs whole, without the cap (one endless field).
    let sweep = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scenarios/sweeps/nvlink_mesh_nodes.toml");
    let out = dir.join("merged.csv");
    user_error(
        &[
            "merge",
            "--sweep",
            sweep.to_str().unwrap(),
            "/dev/zero",
            "--out",
            out.to_str().unwrap(),
            "--max-input-size",
            "1MiB",
        ],
        "input size limit",
    );
    assert!(!out.exists());
}

#[test]
fn invalid_utf8_is_located() {
    let dir = scratch("utf8");
    let p = dir.join("bad.mlir");
    std::fs::write(&p, b"module {\n  func.func @f() {\xff\n").unwrap();
    let err = user_error(&["check", p.to_str().unwrap()], "invalid UTF-8");
    assert!(err.contains("bad.mlir:2:19:"), "{err}");
    let t = dir.join("bad.toml");
    std::fs::write(&t, b"format = 1\nname = \"a\xc3\"\n").unwrap();
    let err = user_error(&["run", t.to_str().unwrap()], "invalid UTF-8");
    assert!(err.contains("bad.toml:2:10:"), "{err}");
    let err = user_error(&["topology", "show", t.to_str().unwrap()], "invalid UTF-8");
    assert!(err.contains("bad.toml:2:10:"), "{err}");
}

#[test]
fn an_empty_program_is_an_error() {
    let dir = scratch("empty");
    for (name, text) in [
        ("empty.mlir", ""),
        ("blank.mlir", "\n  \n"),
        ("module.mlir", "module {\n}\n"),
    ] {
        let p = program(&dir, name, text);
        user_error(&["check", &p], "has no func.func");
    }
}

/// The largest sizes the bounds let through still run, and give their
/// answers (the fuzzer found each taking minutes): `partition` on a mesh axis
/// of 65,536 (one all-gather over every device), `topology show` of a
/// 65,536-GPU ring, and `collective` on a 4,096-rank ring with the ring
/// algorithm at 1 MiB.
#[test]
fn the_largest_allowed_sizes_run_and_answer() {
    let dir = scratch("largest");
    let p = program(
        &dir,
        "axis.mlir",
        "sdy.mesh @m = <[\"x\"=65536]>\nfunc.func @main(%a: tensor<65536x4xf32> {sdy.sharding = #sdy.sharding<@m, [{\"x\"}, {}]>}) -> (tensor<65536x4xf32> {sdy.sharding = #sdy.sharding<@m, [{}, {}]>}) {\n  %0 = stablehlo.add %a, %a : tensor<65536x4xf32>\n  return %0 : tensor<65536x4xf32>\n}\n",
    );
    let j = crate::common::shardsim_json(&["partition", &p, "--format", "json"]);
    let colls = j["collectives"].as_array().unwrap();
    assert_eq!(colls.len(), 1, "{j}");
    assert_eq!(colls[0]["op"], "all_gather");
    assert_eq!(colls[0]["groups"][0].as_array().unwrap().len(), 65536);
    let ring =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/topologies/ring.toml"))
            .unwrap()
            .replace("dims = [8]", "dims = [65536]");
    let t = program(&dir, "ring.toml", &ring);
    let out = shardsim(&["topology", "show", &t]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("components: 65536 gpu"), "{text}");
    let out = shardsim(&[
        "collective",
        "--topology",
        "ring:4096",
        "--algo",
        "ring",
        "--sizes",
        "1MiB",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("over 4096 ranks"), "{text}");
    assert!(
        text.lines()
            .any(|l| l.trim_start().starts_with("1048576") && l.contains("ring")),
        "{text}"
    );
}
