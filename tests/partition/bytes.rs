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

/// Every case moves at most what XLA's partitioned program moves (slices,
/// pads, reverses and concatenations by halo exchange, variadic reduces by
/// combining stacked partials).
#[test]
fn collectives_move_no_more_than_xla() {
    let t = table();
    assert!(t.len() >= 60);
    let wrong: Vec<String> = t
        .iter()
        .filter(|(_, ours, xla)| ours > xla)
        .map(|(name, ours, xla)| format!("{name}: {ours} bytes, XLA {xla}"))
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn xla_collectives_are_counted_by_their_larger_buffer() {
    // uneven_constraint: one all-gather f32[2,8] -> f32[8,8] (256 bytes).
    let hlo =
        std::fs::read_to_string(crate::common::fixture("jax/uneven_constraint/spmd.hlo")).unwrap();
    let c = xla::parse_collectives(&hlo).unwrap();
    assert_eq!(c.len(), 1);
    assert_eq!((c[0].op.as_str(), c[0].bytes), ("all-gather", 256));
    // matmul_contracting_sharded: one all-reduce of f32[8,16] (512 bytes).
    let hlo = std::fs::read_to_string(crate::common::fixture(
        "jax/matmul_contracting_sharded/spmd.hlo",
    ))
    .unwrap();
    let c = xla::parse_collectives(&hlo).unwrap();
    assert_eq!(
        c.iter()
            .map(|c| (c.op.as_str(), c.bytes))
            .collect::<Vec<_>>(),
        vec![("all-reduce", 512)]
    );
}
