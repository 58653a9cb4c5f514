//! Timed execution (`shardsim::exec::timed`): closed forms for compute and
//! collectives, overlap, memory and out-of-memory reports, determinism, every
//! JAX fixture on a DGX H100, kernel fusion with shared constants and
//! without cycles, and the `exec --topology --trace` command line.

mod cli;
mod closed_forms;
mod cycles;
mod faults;
mod fixtures;
mod fusion;
mod kernels;
pub mod memory;
mod models;
mod symmetry;

use shardsim::ir::mlir::parse_and_verify;
use shardsim::partition::{partition, SpmdProgram};
use shardsim::propagate::{propagate_module, Strategy};
use shardsim::topology::{self, Topology};

/// Propagate and partition a program file under `tests/fixtures/`.
pub fn program(rel: &str) -> SpmdProgram {
    let path = crate::common::fixture(rel);
    let text = std::fs::read_to_string(&path).unwrap();
    let mut module = parse_and_verify(&text).unwrap_or_else(|e| panic!("{rel}: {e}"));
    propagate_module(&mut module, Strategy::default()).unwrap();
    partition(&module).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

pub fn dgx_h100() -> Topology {
    topology::load("dgx-h100", &[]).unwrap()
}
