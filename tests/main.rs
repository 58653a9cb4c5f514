//! The single integration-test binary (one binary, one link step): each module
//! tests one part of shardsim against data in `tests/fixtures/`.

mod architecture;
mod calibrate;
mod cli;
mod collective;
mod common;
mod engine;
mod ir;
mod mesh;
mod models;
mod net;
mod partition;
mod propagate;
mod runtime;
mod safety;
mod scenario;
mod seeds;
mod sharding;
mod strategies;
mod tensor;
mod timed;
mod topology;
