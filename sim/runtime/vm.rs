//! `load_vm_module`: a program file in our IR (StableHLO + sdy text) that
//! every worker reads, propagates and partitions the same way, then runs on
//! its own device's shard. In a distributed run each worker computes only its
//! device's local steps; at a collective it swaps the collective's input
//! buffers with every peer and runs the collective as the lockstep executor
//! does, keeping its own output; so results equal [`crate::exec::execute`]'s.

use std::path::Path;

use crate::exec::{DeviceState, ExecError, Executor};
use crate::ir::{inline, mlir::parse_and_verify};
use crate::partition::{partition_with, Collective, PartitionOptions, SpmdProgram};
use crate::propagate::{propagate_module, Strategy};
use crate::tensor::Tensor;

use super::collective_io::Peers;

/// Read, inline, propagate and partition the program at `path`.
pub fn load(path: &Path) -> Result<SpmdProgram, String> {
    let name = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {name}: {e}"))?;
    let mut module = parse_and_verify(&text).map_err(|e| e.in_file(&name).to_string())?;
    if inline::has_calls(&module) {
        module = inline::inline_calls(&module).map_err(|e| format!("{name}: {e}"))?;
    }
    propagate_module(&mut module, Strategy::default()).map_err(|e| format!("{name}: {e}"))?;
    partition_with(&module, &PartitionOptions::default()).map_err(|e| format!("{name}: {e}"))
}

/// Check that `workers` workers can run `program` (one device each).
pub fn check_workers(program: &SpmdProgram, workers: usize) -> Result<(), String> {
    let devices = program.num_devices();
    if devices != workers as u64 {
        return Err(format!(
            "the program's mesh has {devices} devices; the session has {workers} workers"
        ));
    }
    Ok(())
}

/// The lockstep run (the simulated backend): global results.
pub fn run_lockstep(program: &SpmdProgram, inputs: &[Tensor]) -> Result<Vec<Tensor>, String> {
    crate::exec::execute(program, inputs).map_err(|e| e.to_string())
}

fn exchange_err(device: u64, message: String) -> ExecError {
    ExecError::Step {
        step: 0,
        what: "exchange".into(),
        device,
        message,
    }
}

/// Send this worker's buffers of `slots` to every peer and take theirs.
fn swap_slots(
    me: usize,
    slots: &[usize],
    devices: &mut [DeviceState],
    peers: &mut dyn Peers,
) -> Result<(), ExecError> {
    let n = devices.len();
    let dev = devices[me].device;
    for &s in slots {
        let mine = devices[me].buffers[s]
            .clone()
            .ok_or_else(|| exchange_err(dev, format!("value slot {s} has no buffer")))?;
        for p in (0..n).filter(|&p| p != me) {
            peers
                .send(p, mine.clone())
                .map_err(|e| exchange_err(dev, e))?;
        }
    }
    for &s in slots {
        for p in (0..n).filter(|&p| p != me) {
            let t = peers.recv(p).map_err(|e| exchange_err(dev, e))?;
            devices[p].buffers[s] = Some(t);
        }
    }
    Ok(())
}

/// Worker `me`'s run of `program` on the global `inputs`; every worker ends
/// with the global results (the result blocks are swapped at the end).
pub fn run_as(
    program: &SpmdProgram,
    inputs: &[Tensor],
    me: usize,
    peers: &mut dyn Peers,
) -> Result<Vec<Tensor>, String> {
    let mut ex = Executor::new(program, inputs).map_err(|e| e.to_string())?;
    let mut exchange = |c: &Collective, devices: &mut [DeviceState]| {
        let mut slots = vec![c.input];
        slots.extend(&c.extra_inputs);
        swap_slots(me, &slots, devices, &mut *peers)
    };
    while ex.step_as(me, &mut exchange).map_err(|e| e.to_string())? {}
    swap_slots(me, &program.results, ex.devices_mut(), peers).map_err(|e| e.to_string())?;
    ex.gather_results().map_err(|e| e.to_string())
}
