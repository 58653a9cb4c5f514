//! The network model's parts beyond tests/engine.rs: per-flow rate caps,
//! departure dependencies.

mod departure;
mod rate_cap;
