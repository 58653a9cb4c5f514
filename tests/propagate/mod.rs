//! Sharding rules and propagation, against Shardy's own output in the JAX fixtures.

mod callee_reshards;
mod cases;
mod clones;
mod core;
mod custom_calls;
mod fft;
mod fixtures;
mod linalg;
mod lit;
mod props;
mod tokens;
mod unreduced;
