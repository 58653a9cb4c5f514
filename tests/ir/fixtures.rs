//! Every fixture (lowered/before/after) parses, verifies and round-trips.

use std::path::PathBuf;

use shardsim::ir::mlir::{parse_and_verify, parse_module, print_canonical, print_module};

/// Every `*.mlir` file under `tests/fixtures/jax/<case>/`, sorted.
pub fn fixture_files() -> Vec<PathBuf> {
    let root = crate::common::fixture("jax");
    let mut out = Vec::new();
    for entry in std::fs::read_dir(&root).expect("fixtures/jax") {
        let dir = entry.unwrap().path();
        if !dir.is_dir() {
            continue;
        }
        for name in ["lowered.mlir", "before.mlir", "after.mlir"] {
            let p = dir.join(name);
            if p.exists() {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

#[test]
fn every_fixture_parses_verifies_and_round_trips() {
    let files = fixture_files();
    assert!(files.len() >= 24, "expected the JAX fixtures, found {}", files.len());
    let mut failures = Vec::new();
    for p in &files {
        let text = std::fs::read_to_string(p).unwrap();
        let m = match parse_and_verify(&text) {
            Ok(m) => m,
            Err(e) => {
                failures.push(e.in_file(&p.display().to_string()));
                continue;
            }
        };
        let printed = print_module(&m);
        let m2 = match parse_and_verify(&printed) {
            Ok(m) => m,
            Err(e) => {
                failures.push(format!("{} (printed): {e}\n{printed}", p.display()));
                continue;
            }
        };
        if print_canonical(&m) != print_canonical(&m2) {
            failures.push(format!("{}: round trip changed the module", p.display()));
        }
        // Printing is a fixed point after one round.
        if printed != print_module(&m2) {
            failures.push(format!("{}: printing is not a fixed point", p.display()));
        }
        assert!(parse_module(&printed).is_ok());
    }
    assert!(failures.is_empty(), "{} of {} files failed:\n{}", failures.len(), files.len(), failures.join("\n"));
}
