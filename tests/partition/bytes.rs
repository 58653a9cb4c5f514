//! Communication against XLA: per fixture, the bytes our collectives move per
//! device (sum of each collective's larger buffer) against the same count
//! over the collectives of XLA's partitioned program (`spmd.hlo`).

use shardsim::ir::mlir::parse_and_verify;
use shardsim::partition::{partition, xla};
use shardsim::propagate::{propagate_module, Strategy};

/// Per case: (name, ours, xla).
pub fn table() -> Vec<(String, u64, u64)> {
    let mut dirs: Vec<_> = std::fs::read_dir(crate::common::fixture("jax"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("spmd.hlo").exists() && p.join("before.mlir").exists())
        .collect();
    dirs.sort();
    dirs.iter()
        .map(|dir| {
            let name = dir.file_name().unwrap().to_string_lossy().to_string();
            let text = std::fs::read_to_string(dir.join("before.mlir")).unwrap();
            let mut module = parse_and_verify(&text).unwrap();
            propagate_module(&mut module, Strategy::default()).unwrap();
            let ours = partition(&module).unwrap().total_collective_bytes();
            let hlo = std::fs::read_to_string(dir.join("spmd.hlo")).unwrap();
            let theirs = xla::total_bytes(&hlo).unwrap_or_else(|e| panic!("{name}/spmd.hlo:{e}"));
            (name, ours, theirs)
        })
        .collect()
}

#[test]
fn print_table() {
    let mut at_or_below = 0;
    let t = table();
    for (n, o, x) in &t {
        if o <= x { at_or_below += 1; }
        println!("{n:45} {o:8} {x:8} {}", if o <= x { "" } else { "EXCEEDS" });
    }
    println!("{at_or_below} of {} at or below XLA", t.len());
}
