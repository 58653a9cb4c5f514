//! TVM Disco's programming model over simulated devices: a [`Session`] of N
//! workers, [`DRef`] registers that exist on every worker, and collectives
//! between them. [`SimSession`] runs every collective's plan on real buffers
//! (data mode) and times the same plan on the topology (timing mode); each
//! call returns its simulated duration and advances the session clock.
//! Real-hardware backends implement the same [`Session`] trait.

mod error;
mod sim_session;

pub use error::SessionError;
pub use sim_session::{SimSession, WorkerFunc};

use crate::base::DType;
use crate::engine::Time;
use crate::tensor::{CollectiveReduction, Tensor};

/// A register that exists on every worker (Disco's `DRef`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DRef(pub u32);

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
    /// Call a registered function on every worker with `args`; its result goes
    /// to a new register.
    fn call(&mut self, func: &str, args: &[DRef]) -> Result<(DRef, Time), SessionError>;
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
    fn debug_get_from_remote(&self, r: DRef, worker: usize) -> Result<Tensor, SessionError>;
    fn debug_copy_from(
        &mut self,
        r: DRef,
        worker: usize,
        value: &Tensor,
    ) -> Result<(), SessionError>;
}
