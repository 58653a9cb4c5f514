//! Timed execution: a partitioned program on the virtual devices of a
//! topology, in the discrete-event engine.
//!
//! Every device has a compute stream and a communication stream, each running
//! its steps in program order (as CUDA streams do), so a collective overlaps
//! with independent compute. A compute step (a local op, or a local
//! `all_slice`) starts when its stream is free and its operands exist on the
//! device; it takes its roofline time ([`cost`]). A collective starts, per
//! device group, once every member's communication stream has reached it with
//! its input; it takes the time of the collective algorithm chosen by the
//! collectives layer for all groups at once ([`crate::collective::time_groups`]).
//! Memory is tracked per device and scope ([`memory`]): arguments (owned by
//! the caller, not donated) and results stay for the whole run; every other
//! buffer lives from the start of its producer to the end of its last reader.
//!
//! Only shapes matter here: the numbers a program computes do not depend on
//! time, so numerics come from the lockstep [`super::Executor`] over the same
//! program, and large programs are timed without materializing any data.
//!
//! Events are processed in (time, sequence) order; jitter and stragglers come
//! from per-component seeded streams, so the same inputs and seed give the
//! same timeline.

mod acyclic;
pub mod classes;
mod comm;
pub mod cost;
pub mod fusion;
pub mod memory;
mod options;
pub mod report;
mod run;
mod timeline;
pub mod trace;
pub mod unroll;

use crate::collective::CollectiveError;
use crate::engine::{EngineError, Time};

pub use comm::CommMemo;
pub use cost::{
    parse_roofline, step_cost, AttentionPass, DeviceRoofline, Gemm, OpCost, RooflineParams,
    ROOFLINE_TOML,
};
pub use memory::{LiveBuffer, MemorySample, MemoryTracker, OomReport, ScopePeak};
pub use options::{OomPolicy, ProgressHook, RunProgress, TimedOptions, PROGRESS_EVERY};
pub use run::{run_timed, run_timed_classes, value_scopes, MAX_OOM_REPORTS};
pub use timeline::{ClassTimeline, LinkBusy, Span, StreamKind, Timeline};

/// Why a timed run failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TimedError {
    #[error("roofline table: {0}")]
    Roofline(String),
    #[error("device {0} is not in the topology ({1} devices)")]
    NoSuchDevice(u32, u32),
    #[error("the mesh has {mesh} devices but the topology only {topology} (try --nodes)")]
    TooFewDevices { mesh: u64, topology: u32 },
    #[error("step {step} ({what}): {cause}")]
    Collective {
        step: usize,
        what: &'static str,
        cause: Box<CollectiveError>,
    },
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error("the run stalled at {0} with steps left (a dependency that never resolves)")]
    Stalled(Time),
    /// A loop the run cannot expand (no static trip count, or too large).
    #[error("{0}")]
    Loop(String),
}

impl From<crate::engine::TimeOverflow> for TimedError {
    fn from(e: crate::engine::TimeOverflow) -> Self {
        TimedError::Engine(EngineError::Time(e))
    }
}
