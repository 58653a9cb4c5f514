//! `shardsim bench ...`: performance benchmarks, one subcommand per part
//! (figures for the issue notes, never timed tests).

use clap::{Args, Subcommand};

use super::{
    bench_collective, bench_engine, bench_exec, bench_fuzz, bench_parse, bench_pipeline,
    bench_propagate, bench_scale,
};

#[derive(Debug, Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub which: BenchCommand,
}

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Parse + verify a generated chain of dot_general/add/tanh ops.
    Parse(bench_parse::ParseBenchArgs),
    /// Parse + propagate a generated transformer-like module.
    Propagate(bench_propagate::BenchPropagateArgs),
    /// Event-queue throughput, a large ring allreduce, and memory versus devices.
    Engine(bench_engine::EngineBenchArgs),
    /// The nccl-tests sweep (8 B to 8 GiB) with auto on dgx-h100 --nodes 16.
    Collective(bench_collective::CollectiveBenchArgs),
    /// Partition and time (shape-only) a generated transformer-like program.
    Exec(bench_exec::BenchExecArgs),
    /// A GPT-3 175B training step partitioned and timed on 1,024-16,384 GPUs.
    Scale(bench_scale::BenchScaleArgs),
    /// Parse, inline, propagate and partition exported programs (e.g. a scanned
    /// and an unrolled GPT-3 training step).
    Pipeline(bench_pipeline::BenchPipelineArgs),
    /// Mutated inputs per input format through the parsers: throughput and
    /// panics (exit 1 if any).
    Fuzz(bench_fuzz::FuzzBenchArgs),
}

pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    match args.which {
        BenchCommand::Parse(a) => bench_parse::run(a),
        BenchCommand::Propagate(a) => bench_propagate::run(a),
        BenchCommand::Engine(a) => bench_engine::run(a),
        BenchCommand::Collective(a) => bench_collective::run(a),
        BenchCommand::Exec(a) => bench_exec::run(a),
        BenchCommand::Scale(a) => bench_scale::run(a),
        BenchCommand::Pipeline(a) => bench_pipeline::run(a),
        BenchCommand::Fuzz(a) => bench_fuzz::run(a),
    }
}
