//! Sharding rules and propagation, against Shardy's own output in the JAX fixtures.

mod cases;
mod core;
mod fixtures;
mod lit;
mod props;
