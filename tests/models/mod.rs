//! Model builders: the programs they write run through the whole pipeline
//! and match the single-device interpreter; strategies and presets are
//! checked; analytic closed forms hold.

mod ci;
mod cli;
mod context;
mod inference;
mod memory;
mod moe;
mod pipeline;
mod programs;
mod step;
