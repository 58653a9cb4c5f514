//! The SPMD partitioner and the lockstep executor: every JAX fixture runs on
//! virtual devices and reproduces JAX's outputs and the reference interpreter;
//! its collectives move no more bytes than XLA's partitioned program; random
//! reshards and small programs keep their data; bad shardings are named.

mod bytes;
mod chosen;
mod cli;
mod conditionals;
mod errors;
mod fixtures;
mod manual_bodies;
mod means;
mod models;
mod module;
mod named;
mod props;
