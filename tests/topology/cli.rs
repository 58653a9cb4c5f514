//! `shardsim topology list|show|route` end to end.

use std::process::Command;

use shardsim::topology;

fn shardsim(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_shardsim"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn list_names_every_preset() {
    let (code, out, _) = shardsim(&["topology", "list", "--format", "json"]);
    assert_eq!(code, 0);
    let rows: serde_json::Value = serde_json::from_str(&out).unwrap();
    let names: Vec<&str> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, topology::preset_names());
}

#[test]
fn show_works_for_every_preset_in_every_format() {
    for name in topology::preset_names() {
        for format in ["text", "json", "dot"] {
            let (code, out, err) = shardsim(&["topology", "show", name, "--format", format]);
            assert_eq!(code, 0, "{name} {format}: {err}");
            match format {
                "json" => {
                    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
                    assert_eq!(v["name"], name);
                    assert!(v["summary"]["bisection"].as_str().unwrap().ends_with("B/s"));
                }
                "dot" => assert!(out.starts_with("graph ") && out.trim_end().ends_with('}')),
                _ => assert!(out.contains("bisection bandwidth") && out.contains("memory scopes")),
            }
        }
    }
}

#[test]
fn show_reports_neighbour_bandwidth_and_what_ifs() {
    let (code, out, _) = shardsim(&["topology", "show", "dgx-h100", "--nodes", "2"]);
    assert_eq!(code, 0);
    assert!(
        out.contains("bisection bandwidth (devices 0..8 -> 8..16, one direction): 400GB/s"),
        "{out}"
    );
    assert!(out.contains("nvlink      7 peers"), "{out}");
    let (_, out, _) = shardsim(&[
        "topology",
        "show",
        "dgx-h100",
        "--set",
        "nvlink.bandwidth=900GB/s",
        "--format",
        "json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["links"][0]["bandwidth"], "900GB/s");
    assert_eq!(v["summary"]["bisection"], "3.726TB/s");
}

#[test]
fn route_prints_the_links() {
    let (code, out, _) = shardsim(&["topology", "route", "tpu-v4:4x4x4", "0", "63"]);
    assert_eq!(code, 0);
    assert!(
        out.starts_with("tpu0 -> tpu63: 3 hops, latency 3us, bottleneck 50GB/s"),
        "{out}"
    );
    let (code, out, _) = shardsim(&[
        "topology", "route", "dgx-h100", "n0.gpu0", "n0.host", "--format", "json",
    ]);
    assert_eq!(code, 0);
    let hops: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(hops.as_array().unwrap().len(), 2);
    assert_eq!(hops[0]["latency_ps"], 250_000);
}

#[test]
fn user_errors_exit_2_with_a_located_message() {
    let bad = crate::common::fixture("topology/bad/unit_typo.toml");
    let (code, _, err) = shardsim(&["topology", "show", bad.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(
        err.contains("unit_typo.toml:17:11: field `nvlink.latency`"),
        "{err}"
    );
    let (code, _, err) = shardsim(&["topology", "route", "ring:4", "0", "gpu9"]);
    assert_eq!(code, 2);
    assert!(err.contains("no component \"gpu9\""), "{err}");
    let (code, _, err) = shardsim(&["topology", "show", "tpu-v5"]);
    assert_eq!(code, 2);
    assert!(err.contains("unknown topology \"tpu-v5\""), "{err}");
}
