//! Helpers shared by the integration tests.

use std::path::{Path, PathBuf};

use shardsim::tensor::{npy, Tensor};

/// Path of a file under `tests/fixtures/`.
#[allow(dead_code)]
pub fn fixture(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel)
}

/// Inputs or outputs of a fixture case: `prefix0.npy`, `prefix1.npy`, ...
#[allow(dead_code)]
pub fn numbered(dir: &Path, prefix: &str) -> Vec<Tensor> {
    (0..)
        .map(|i| dir.join(format!("{prefix}{i}.npy")))
        .take_while(|p| p.exists())
        .map(|p| npy::read_npy(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
        .collect()
}

/// Every JAX fixture case folder that has inputs, sorted.
#[allow(dead_code)]
pub fn jax_cases_with_data() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(fixture("jax"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("in0.npy").exists() && p.join("before.mlir").exists())
        .collect();
    v.sort();
    v
}

/// Run the `shardsim` binary with `args`.
pub fn shardsim(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_shardsim"))
        .args(args)
        .output()
        .expect("binary runs")
}

/// Run the `shardsim` binary with `args`, require success (showing stderr
/// otherwise) and return its stdout.
pub fn shardsim_stdout(args: &[&str]) -> String {
    let out = shardsim(args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("stdout is UTF-8")
}

/// [`shardsim_stdout`] read as JSON.
pub fn shardsim_json(args: &[&str]) -> serde_json::Value {
    serde_json::from_str(&shardsim_stdout(args)).expect("stdout is JSON")
}
