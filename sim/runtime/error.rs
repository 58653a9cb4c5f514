//! Errors of the session API.

use thiserror::Error;

use super::DRef;

#[derive(Debug, Clone, PartialEq, Error)]
pub enum SessionError {
    #[error("register {0:?} does not exist")]
    UnknownRef(DRef),
    #[error("worker {worker} does not exist (the session has {workers})")]
    NoSuchWorker { worker: usize, workers: usize },
    #[error("no function \"{0}\" is registered")]
    UnknownFunc(String),
    #[error("function {func} on worker {worker}: {message}")]
    Func {
        func: String,
        worker: usize,
        message: String,
    },
    #[error("init_ccl has not been called")]
    NoCcl,
    #[error("init_ccl: {0}")]
    Ccl(String),
    #[error("{op}: {message}")]
    Shape { op: &'static str, message: String },
    #[error("worker {worker}: {message}")]
    Worker { worker: usize, message: String },
    #[error("worker {worker} died: {detail}")]
    WorkerDied { worker: usize, detail: String },
    #[error("worker(s) {workers:?} sent nothing for {ms} ms: hung (the session stopped them)")]
    WorkerTimeout { ms: u64, workers: Vec<usize> },
    #[error("the session is unusable: {0}")]
    Broken(String),
    #[error("cannot start a worker: {0}")]
    Spawn(String),
    #[error("worker protocol: {0}")]
    Protocol(String),
    #[error("module: {0}")]
    Module(String),
    #[error(transparent)]
    Collective(#[from] crate::collective::CollectiveError),
    #[error(transparent)]
    Tensor(#[from] crate::tensor::TensorError),
    #[error(transparent)]
    Topology(#[from] crate::topology::TopologyError),
    #[error(transparent)]
    Net(#[from] crate::net::NetError),
    #[error(transparent)]
    Time(#[from] crate::engine::TimeOverflow),
}
