//! `shardsim bench ...`: performance benchmarks, one subcommand per part.

use clap::{Args, Subcommand};

use super::{bench_engine, bench_propagate};

#[derive(Debug, Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub which: BenchCommand,
}

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Event-queue throughput, a large ring allreduce, and memory versus devices.
    Engine(bench_engine::EngineBenchArgs),
    /// Parse + propagate a generated transformer-like module.
    Propagate(bench_propagate::BenchPropagateArgs),
}

pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    match args.which {
        BenchCommand::Engine(a) => bench_engine::run(a),
        BenchCommand::Propagate(a) => bench_propagate::run(a),
    }
}
