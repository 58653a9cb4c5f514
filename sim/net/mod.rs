//! The flow-level network model and its driver.
//!
//! Model (see `network`): a network is a list of directed links (capacity in
//! bytes/s, latency in ps). A flow has a route (a list of link indices), a size in
//! bytes and a start time. Active flows share every link max-min fairly
//! (progressive filling), recomputed only for the connected component of flows
//! that a start, finish or link change touches. A flow of `b` bytes that runs
//! at piecewise-constant rates finishes transmitting when its bytes integrate
//! away, and is delivered `sum(latency of its links)` later:
//! `time = sum(latency) + integral of bytes / bottleneck share`, which for a
//! single rate is `sum(latency) + ceil(b * 1e12 / rate)` ps (the engine's
//! rounding rule). With store-and-forward packets of size `p`, a flow over `h`
//! hops is delivered `(h - 1) * ceil(min(p, b) / slowest capacity)` later still.
//!
//! `NetSim` drives the model with the engine's event queue, applies jitter and
//! faults, and hands the caller one `Occurrence` at a time; `schedule` runs a
//! dependency graph of transfers and computations on it; `patterns` builds
//! reference schedules (ring allreduce).

pub mod link;
pub mod netsim;
pub mod network;
pub mod patterns;
pub mod schedule;
mod spans;

pub use link::{Link, LinkId};
pub use netsim::{NetSim, Occurrence, RerouteRequest, Undeliverable};
pub use network::{Blocked, FlowSlot, NetStats, NetTimer, Network, TxDone};
pub use schedule::{departure, split_dependency, Schedule, ScheduleReport, TaskId, TaskKind};

use thiserror::Error;

use crate::engine::{EngineError, PerturbError, TimeOverflow};

/// Errors of the network model and its driver.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum NetError {
    #[error("link {link}: capacity must be finite and > 0 bytes/s, got {capacity}")]
    BadCapacity { link: LinkId, capacity: f64 },
    #[error("route names link {link} but the network has {links} links")]
    UnknownLink { link: LinkId, links: usize },
    #[error("route crosses link {link} twice")]
    RepeatedLink { link: LinkId },
    #[error("route crosses link {link}, which has failed")]
    FailedLink { link: LinkId },
    #[error("a flow's rate cap must be > 0 bytes/s (or infinite for none), got {0}")]
    BadRateCap(f64),
    #[error("{0} links: the network model takes fewer than 2^31 - 1")]
    TooManyLinks(usize),
    #[error("link degradation fraction must be in (0, 1], got {0}")]
    BadFraction(f64),
    #[error("task {task} depends on task {dep}, which does not come before it")]
    BadDependency { task: usize, dep: usize },
    #[error("{0} overflows 64 bits")]
    Overflow(&'static str),
    #[error(transparent)]
    Time(#[from] TimeOverflow),
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error(transparent)]
    Perturb(#[from] PerturbError),
}
