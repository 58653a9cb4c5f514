//! Collective algorithms as schedules on the simulated network.
//!
//! An algorithm builds a [`Plan`]: steps of point-to-point chunk moves (copy or
//! reduce a range of the sender's buffer into the receiver's) over the ranks
//! of a group. The same plan runs two ways: [`data::execute`] moves and
//! reduces real buffers with the tensor helpers (data mode), and
//! [`timing::simulate`] turns it into a `net::Schedule` of transfers over the
//! topology's routes and runs it on the flow-level network (timing mode, shape
//! only). Protocol overheads (NCCL's LL, LL128, Simple), base and per-hop
//! latencies and achievable link fractions come from a [`Calibration`];
//! [`tuner`] picks algorithm and protocol by the cost model, like NCCL's tuner.

pub mod algorithms;
pub mod blocks;
pub mod calibration;
pub mod channels;
pub mod collnet;
mod critical;
pub mod data;
mod grid_fabric;
pub mod groups;
pub mod kinds;
pub mod nccl_model;
pub mod nvls;
pub mod path_cache;
pub mod plan;
pub mod policy;
mod prune;
mod ring_groups;
pub mod rings;
pub mod sizes;
pub mod stream;
pub mod timing;
pub mod tree_stream;
pub mod tuner;

pub use algorithms::{algorithms_for, auto_algorithms, build, PlanOptions};
pub use calibration::{Calibration, ProtocolParams};
pub use channels::{nvls_tree_on_quotient, tree_on_quotient, TreeSpec};
pub use groups::{
    group_links, time_groups, time_groups_cached, time_groups_merged, time_groups_using,
    GroupsTiming,
};
pub use kinds::{Algorithm, CollectiveOp, Protocol};
pub use nccl_model::{nccl_choice, Chooser, NcclSystem, NcclVersion};
pub use path_cache::PathCache;
pub use plan::{Move, Plan, Via};
pub use policy::{Policy, Tuned, TunerRow};
pub use rings::{ring_on_units, RingSpec};
pub use timing::{simulate, simulate_with_faults, CollectiveTiming, Group};
pub use tuner::{
    choose, choose_unpruned, run_collective, time_collective, time_collective_cached,
    tree_chunk_bytes, Choice, CollectiveResult, TimedChoice, TreePeriod,
};

use thiserror::Error;

/// Errors of the collectives layer.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum CollectiveError {
    #[error("unknown {what} \"{name}\" (known: {known})")]
    Unknown {
        what: &'static str,
        name: String,
        known: &'static str,
    },
    #[error("{algo} {op}: {why}")]
    NotApplicable {
        op: &'static str,
        algo: &'static str,
        why: String,
    },
    #[error("collective.chooser = \"{chooser}\": {why}")]
    Chooser { chooser: &'static str, why: String },
    #[error("the group is empty")]
    EmptyGroup,
    #[error("rank {rank} is outside the group of {n} ranks")]
    BadRank { rank: usize, n: usize },
    #[error("rank {0} is the target of more than one pair")]
    DuplicateTarget(usize),
    #[error("buffers: {0}")]
    Buffers(String),
    #[error("calibration: {0}")]
    Calibration(String),
    /// A run setting (`[collective] algorithms`, `protocols`, `tuner`):
    /// where it was given, and what is wrong.
    #[error("{0}")]
    Setting(String),
    #[error("sizes: {0}")]
    Sizes(String),
    #[error("{transfers} transfers could not complete: link {link} ({name}) has failed (first stopped at {at})")]
    Undeliverable {
        transfers: usize,
        link: usize,
        name: String,
        at: crate::engine::Time,
    },
    #[error(transparent)]
    Tensor(#[from] crate::tensor::TensorError),
    #[error(transparent)]
    Topology(#[from] crate::topology::TopologyError),
    #[error(transparent)]
    Net(#[from] crate::net::NetError),
    #[error(transparent)]
    Time(#[from] crate::engine::TimeOverflow),
}
