//! Program IR: MLIR import/export round trips on every JAX fixture, the verifier
//! on bad programs, malformed texts and parser fuzzing.

mod cli;
mod errors;
mod fixtures;
mod fuzz;
mod inline;
mod interp;
mod props;
mod shardy_verify;
mod snippets;
