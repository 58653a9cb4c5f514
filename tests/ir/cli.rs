//! `shardsim check` and `shardsim bench parse` as a user runs them.

use std::process::Command;

fn shardsim(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_shardsim"))
        .args(args)
        .output()
        .expect("run shardsim");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn check_summarizes_a_fixture_as_json() {
    let path = crate::common::fixture("jax/add_relu/after.mlir");
    let (code, out, err) = shardsim(&["check", path.to_str().unwrap(), "--format", "json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    // Counted by hand from the file: add, sdy.constant, broadcast_in_dim, maximum, return.
    let kinds = &v["ops_by_kind"];
    for k in [
        "stablehlo.add",
        "sdy.constant",
        "stablehlo.broadcast_in_dim",
        "stablehlo.maximum",
        "func.return",
    ] {
        assert_eq!(kinds[k], 1, "{k}: {out}");
    }
    assert_eq!(v["functions"][0]["name"], "main");
    assert_eq!(v["functions"][0]["sharded_args"], 2);
    assert_eq!(v["meshes"][0]["mesh"], "<[\"x\"=2, \"y\"=4]>");
    assert_eq!(v["meshes"][0]["devices"], 8);
    // Two args, %0, %2, %3 carry shardings; the constant %1 does not.
    assert_eq!(v["sharded_values"], 5);
    assert_eq!(v["ops_with_rules"], 3);
}

#[test]
fn check_reports_errors_with_file_line_col_and_exit_code_2() {
    let dir = std::env::temp_dir().join(format!("shardsim-ir-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.mlir");
    std::fs::write(
        &bad,
        "func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {\n  %0 = stablehlo.foo %arg0 : tensor<4xf32>\n  return %0 : tensor<4xf32>\n}\n",
    )
    .unwrap();
    let (code, _, err) = shardsim(&["check", bad.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("bad.mlir:2:8: expected a known op"), "{err}");
    assert!(err.contains("unknown op 'stablehlo.foo'"), "{err}");
    let (code, _, err) = shardsim(&["check", dir.join("missing.mlir").to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("cannot read"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn bench_parse_runs_on_a_small_module() {
    let (code, out, err) = shardsim(&["bench", "parse", "--ops", "300", "--runs", "1"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("parse+verify 300 ops"), "{out}");
    let (code, _, _) = shardsim(&["bench", "parse", "--ops", "0"]);
    assert_eq!(code, 2);
}
