//! `shardsim partition` and `shardsim exec` on a JAX fixture.

use crate::common::{shardsim, shardsim_json};

fn case(name: &str, file: &str) -> String {
    crate::common::fixture(&format!("jax/{name}/{file}"))
        .display()
        .to_string()
}

#[test]
fn partition_json_lists_the_all_reduce_of_a_contracting_sharded_matmul() {
    let v = shardsim_json(&[
        "partition",
        &case("matmul_contracting_sharded", "before.mlir"),
        "--format",
        "json",
    ]);
    let c = &v["collectives"][0];
    assert_eq!(c["op"], "all_reduce");
    assert_eq!(c["axes"], serde_json::json!(["y"]));
    assert_eq!(c["groups"], serde_json::json!([[0, 1, 2, 3], [4, 5, 6, 7]]));
    assert_eq!(c["dtype"], "f32");
    assert_eq!(c["bytes"], 512);
    assert_eq!(c["at"], "%0");
    assert_eq!(v["local_shapes"]["%arg0"], serde_json::json!([8, 8]));
    // Ring all-reduce over 4 devices: each sends 2 * 512 * 3/4 bytes.
    assert_eq!(v["per_device_bytes_sent"]["0"], 768);
}

#[test]
fn partition_mlir_prints_sdy_collectives() {
    let out = shardsim(&[
        "partition",
        &case("matmul_contracting_sharded", "before.mlir"),
    ]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains(r#"sdy.all_reduce {"y"} %0 out_sharding=<@mesh, [{}, {}]>"#),
        "{text}"
    );
}

#[test]
fn exec_writes_outputs_and_reports_the_error() {
    let dir = std::env::temp_dir().join(format!("shardsim-exec-{}", std::process::id()));
    let inputs = format!(
        "{},{}",
        case("matmul_contracting_sharded", "in0.npy"),
        case("matmul_contracting_sharded", "in1.npy")
    );
    let out = shardsim(&[
        "exec",
        &case("matmul_contracting_sharded", "before.mlir"),
        "--inputs",
        &inputs,
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("8 devices, 1 collectives, 512 bytes per device"),
        "{text}"
    );
    assert!(
        text.contains("out0.npy: tensor<8x16xf32>  max abs error"),
        "{text}"
    );
    let got = shardsim::tensor::npy::read_npy(&dir.join("out0.npy")).unwrap();
    let want = shardsim::tensor::npy::read_npy(std::path::Path::new(&case(
        "matmul_contracting_sharded",
        "out0.npy",
    )))
    .unwrap();
    assert!(shardsim::tensor::allclose(&got, &want, 1e-4, 1e-5).unwrap());
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn exec_with_missing_inputs_exits_2() {
    let out = shardsim(&[
        "exec",
        &case("matmul_contracting_sharded", "before.mlir"),
        "--out",
        "/tmp/none",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("takes 2 arguments but 0 inputs"));
}

#[test]
fn exec_runs_jax_exports_that_call_private_functions() {
    let dir = std::env::temp_dir().join(format!("shardsim-exec-lowered-{}", std::process::id()));
    let out = shardsim(&[
        "exec",
        &case("argmax_sharded", "lowered.mlir"),
        "--inputs",
        &case("argmax_sharded", "in0.npy"),
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("out1.npy: tensor<16xi32>  max abs error 0e0"),
        "{text}"
    );
    for i in 0..2 {
        let got = shardsim::tensor::npy::read_npy(&dir.join(format!("out{i}.npy"))).unwrap();
        let want = shardsim::tensor::npy::read_npy(std::path::Path::new(&case(
            "argmax_sharded",
            &format!("out{i}.npy"),
        )))
        .unwrap();
        assert_eq!(got, want);
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn avg_means_prints_an_averaging_all_reduce() {
    let out = shardsim(&["partition", &case("row_mean", "before.mlir"), "--avg-means"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let line = text
        .lines()
        .find(|l| l.contains("sdy.all_reduce"))
        .expect("an all_reduce");
    assert!(line.contains(r#"shardsim.reduction = "avg""#), "{line}");
    // Each device divides its partial sum by its own count, 32 / 4.
    assert!(text.contains("dense<8.000000e+00>"), "{text}");
}
