//! Model builders: whole LLM training steps at any size and parallel
//! strategy, written as programs in this project's IR so the same
//! propagate -> partition -> timed pipeline runs them.
//!
//! - [`spec`]: a model as data (`models/*.toml`) and its presets;
//! - [`strategy`]: data, tensor, pipeline, context and expert parallelism,
//!   ZeRO, recomputation, schedule; checked against the model;
//! - [`emit`]: a typed writer of StableHLO + Shardy text;
//! - [`block`], [`chunk`]: one transformer block and one model chunk
//!   (forward and backward programs of a microbatch);
//! - [`inference`]: prefill and decode steps with a key/value cache;
//! - [`analytic`]: the closed forms results are checked against (model
//!   FLOPs, ZeRO model-state bytes, activation memory).

pub mod analytic;
pub mod block;
pub mod chunk;
pub mod emit;
pub mod inference;
pub mod optimizer;
pub mod pipeline;
pub mod spec;
pub mod step;
pub mod strategy;

pub use spec::ModelSpec;
pub use strategy::{Recompute, Schedule, Strategy};

/// What a model build or run can refuse.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("model: {0}")]
    Spec(String),
    #[error("strategy: {0}")]
    Strategy(String),
    #[error("model program: {0}")]
    Program(String),
}
