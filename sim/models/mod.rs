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
//! - [`ring`]: context parallelism's ring attention;
//! - [`moe`]: a mixture-of-experts MLP and expert parallelism;
//! - [`inference`]: prefill and decode steps with a key/value cache;
//! - [`analytic`]: the closed forms results are checked against (model
//!   FLOPs, ZeRO model-state bytes, activation memory).

pub mod analytic;
pub mod block;
pub mod chunk;
pub mod emit;
pub mod inference;
pub mod moe;
pub mod optimizer;
pub mod pipeline;
pub mod ring;
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
    /// A model or strategy file that is not TOML or has a wrong field:
    /// `line:col: model: message` (no location when TOML gives none).
    #[error("{0}")]
    Toml(String),
}

impl ModelError {
    /// A TOML error of the `what` file (`model` or `strategy`) located in `text`.
    pub(crate) fn toml(what: &str, e: &toml::de::Error, text: &str) -> ModelError {
        let message = e.message().trim().replace('\n', " ");
        ModelError::Toml(match e.span() {
            Some(span) => {
                let (line, col) = crate::base::cursor::line_col(text, span.start);
                format!("{line}:{col}: {what}: {message}")
            }
            None => format!("{what}: {message}"),
        })
    }

    /// The error read from `file`: `file:line:col: ...` when located, `file: ...` otherwise.
    pub fn in_file(&self, file: &str) -> String {
        match self {
            ModelError::Toml(t) if t.starts_with(|c: char| c.is_ascii_digit()) => {
                format!("{file}:{t}")
            }
            other => format!("{file}: {other}"),
        }
    }
}
