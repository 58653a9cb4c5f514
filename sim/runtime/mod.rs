//! TVM Disco's programming model: a [`Session`] of N workers, [`DRef`]
//! registers that exist on every worker, global functions and loaded program
//! modules called on every worker, host copies and collectives between them.
//! Three backends implement it: [`SimSession`] (simulated devices: each call
//! returns its simulated time on the topology), [`ThreadedSession`] (worker
//! threads) and [`ProcessSession`] (worker processes over pipes); the last
//! two return measured wall time. Collectives run the same plan (the tuner's
//! choice on the session's topology) in every backend, so results are equal
//! bit for bit.

mod builtins;
pub mod collective_io;
mod error;
pub mod process;
pub mod protocol;
pub mod remote;
mod sim_session;
pub mod threaded;
mod value;
pub mod vm;
mod worker;

use std::path::Path;

pub use builtins::names as global_func_names;
pub use error::SessionError;
pub use process::{serve_stdio, ProcessSession};
pub use remote::{Remote, DEFAULT_TIMEOUT};
pub use sim_session::{SimSession, WorkerFunc};
pub use threaded::ThreadedSession;
pub use value::{Arg, Device, Value};

use crate::base::DType;
use crate::collective::{Calibration, Group};
use crate::engine::Time;
use crate::tensor::{CollectiveReduction, Tensor};
use crate::topology::Topology;

/// A register that exists on every worker (Disco's `DRef`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct DRef(pub u32);

/// A function on every worker (Disco's `DPackedFunc`): a register holding it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DPackedFunc(pub DRef);

impl DPackedFunc {
    /// Call it on every worker (`call_packed`).
    pub fn call(&self, s: &mut dyn Session, args: &[Arg]) -> Result<(DRef, Time), SessionError> {
        s.call_packed(self, args)
    }
}

/// A loaded module on every worker (Disco's `DModule`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DModule(pub DRef);

impl DModule {
    /// The module's function `name` (programs have one: `main`).
    pub fn get_function(
        &self,
        s: &mut dyn Session,
        name: &str,
    ) -> Result<DPackedFunc, SessionError> {
        s.module_function(self, name)
    }
}

/// Disco's session API. Every call returns the simulated (or measured) time it took.
pub trait Session {
    fn num_workers(&self) -> usize;
    /// Set up the collective library (`nccl`, `rccl`, `mpi`) on `device_ids`
    /// (one per worker).
    fn init_ccl(&mut self, ccl: &str, device_ids: &[u32]) -> Result<(), SessionError>;
    /// An uninitialised (zero) array of `shape` and `dtype` on every worker,
    /// in memory scope `device` of each worker's device (None: `global`).
    fn empty(
        &mut self,
        shape: &[u64],
        dtype: DType,
        device: Option<&str>,
    ) -> Result<DRef, SessionError>;
    /// Call a function by name on every worker with register `args`; its
    /// result goes to a new register (`get_global_func` + `call_packed`; the
    /// simulated session also has its own registered closures).
    fn call(&mut self, func: &str, args: &[DRef]) -> Result<(DRef, Time), SessionError>;
    /// A global function on every worker (see [`global_func_names`]).
    fn get_global_func(&mut self, name: &str) -> Result<DPackedFunc, SessionError>;
    /// Call `func` on every worker with integers, floats, strings, dtypes,
    /// devices and registers; the result goes to a new register.
    fn call_packed(
        &mut self,
        func: &DPackedFunc,
        args: &[Arg],
    ) -> Result<(DRef, Time), SessionError>;
    /// Load a program file (StableHLO + sdy text) on every worker: each
    /// propagates and partitions it and runs its own device's shard. The mesh
    /// must have as many devices as the session has workers.
    fn load_vm_module(
        &mut self,
        path: &Path,
        device: Option<&str>,
    ) -> Result<DModule, SessionError>;
    /// Function `name` of a loaded module (`main`): called with registers
    /// holding the global inputs, it leaves every worker a tuple of the global results.
    fn module_function(&mut self, m: &DModule, name: &str) -> Result<DPackedFunc, SessionError>;
    fn allreduce(
        &mut self,
        src: DRef,
        dst: DRef,
        op: CollectiveReduction,
    ) -> Result<Time, SessionError>;
    /// `dst` (first dimension n times `src`'s) gets every worker's `src` in worker order.
    fn allgather(&mut self, src: DRef, dst: DRef) -> Result<Time, SessionError>;
    fn broadcast_from_worker0(&mut self, src: DRef, dst: DRef) -> Result<Time, SessionError>;
    /// Worker 0's `from` cut along the first dimension; piece `w` to worker `w`'s `to`.
    fn scatter_from_worker0(&mut self, from: DRef, to: DRef) -> Result<Time, SessionError>;
    /// Every worker's `from`, stacked along the first dimension, into worker 0's `to`.
    fn gather_to_worker0(&mut self, from: DRef, to: DRef) -> Result<Time, SessionError>;
    /// Host array into worker 0's register.
    fn copy_to_worker_0(&mut self, host: &Tensor, remote: DRef) -> Result<Time, SessionError>;
    /// Worker 0's register to the host.
    fn copy_from_worker_0(&mut self, remote: DRef) -> Result<(Tensor, Time), SessionError>;
    /// Wait for worker 0; returns the session clock.
    fn sync_worker_0(&mut self) -> Result<Time, SessionError>;
    /// Any register's value on `worker`.
    fn debug_get_value(&mut self, r: DRef, worker: usize) -> Result<Value, SessionError>;
    /// An array register's value on `worker`.
    fn debug_get_from_remote(&mut self, r: DRef, worker: usize) -> Result<Tensor, SessionError> {
        match self.debug_get_value(r, worker)? {
            Value::Tensor(t) => Ok(t),
            v => Err(SessionError::Shape {
                op: "debug_get_from_remote",
                message: format!("register {} holds a {}, not an array", r.0, v.kind()),
            }),
        }
    }
    fn debug_copy_from(
        &mut self,
        r: DRef,
        worker: usize,
        value: &Tensor,
    ) -> Result<(), SessionError>;
    /// Stop every worker (also done on drop); later calls fail.
    fn shutdown(&mut self) -> Result<(), SessionError>;
}

/// `init_ccl`'s checks and the collective group every backend plans with.
pub(crate) fn init_ccl_group(
    topo: &Topology,
    workers: usize,
    ccl: &str,
    device_ids: &[u32],
) -> Result<(Group, Calibration), SessionError> {
    if !matches!(ccl, "nccl" | "rccl" | "mpi") {
        return Err(SessionError::Ccl(format!(
            "unknown library \"{ccl}\" (nccl, rccl, mpi)"
        )));
    }
    if device_ids.len() != workers {
        return Err(SessionError::Ccl(format!(
            "{} device ids for {} workers",
            device_ids.len(),
            workers
        )));
    }
    let group = Group::new(topo, device_ids.to_vec())?;
    let cal = Calibration::for_topology(topo, &group.device_model(topo))?;
    Ok((group, cal))
}
