//! Calibration against this machine: microbenchmarks run through a real
//! session (threads or processes) with warm-up and repeats (median and
//! spread), a least-squares fit of the link's per-message latency (alpha)
//! and per-byte time (beta) plus compute rates, predictions checked on sizes
//! the fit did not see, and a topology file describing the machine.
//!
//! Collectives are modelled from their plans: a call costs
//! `c0 + c1 * workers + alpha * messages + beta * bytes + gamma * reduced`,
//! where messages and bytes are what the plan moves between workers and
//! reduced the bytes receivers add into their buffers (the tuner's plan on the
//! session's topology, the one the session runs).

pub mod bench;
pub mod fit;
pub mod measured;
pub mod model;
pub mod stats;

pub use bench::{run_benchmarks, BenchConfig, Measured, Op};
pub use fit::{least_squares, relative_least_squares, FitError};
pub use measured::{
    collective_table, fit_measured, read_curve, FittedPoint, MeasuredCurve, MeasuredFit,
    MeasuredPoint, MeasuredSetup,
};
pub use model::{
    fit_machine, heldout_rows, median_heldout_error, topology_file, Fitted, HeldOutRow,
};
pub use stats::Stats;

/// Why a calibration could not be made.
#[derive(Debug, thiserror::Error)]
pub enum CalibrateError {
    #[error(transparent)]
    Session(#[from] crate::runtime::SessionError),
    #[error(transparent)]
    Collective(#[from] crate::collective::CollectiveError),
    #[error(transparent)]
    Fit(#[from] FitError),
    #[error("{0}")]
    Config(String),
    /// A measured curve that cannot be used (`file:line:col: ...`).
    #[error("{0}")]
    Measured(String),
}
