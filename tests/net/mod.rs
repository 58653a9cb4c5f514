//! The network model's parts beyond tests/engine.rs: per-flow rate caps.

mod rate_cap;
