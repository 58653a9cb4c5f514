//! Subcommands of the `shardsim` binary: argument parsing (clap derive) and
//! dispatch. Each subcommand lives in its own module.

/// `println!` that returns an error instead of panicking when stdout fails
/// (a full disk, a closed pipe): use it as `outln!(...)?`.
macro_rules! outln {
    ($($arg:tt)*) => {
        crate::cli::output::print_out(&(format!($($arg)*) + "\n"))
    };
}

mod bench_cmd;
mod bench_collective;
mod bench_engine;
mod bench_exec;
mod bench_fuzz;
mod bench_parse;
mod bench_pipeline;
mod bench_propagate;
mod bench_scale;
mod calibrate_cmd;
mod calibrate_measured;
mod check_cmd;
mod collective_cmd;
mod exec_timed;
mod infer_cmd;
mod interp_cmd;
mod merge_cmd;
mod mesh_cmd;
mod output;
mod partition_cmd;
mod plan_cmd;
mod progress;
mod propagate_cmd;
mod run_cmd;
mod scale_model;
mod sweep_cmd;
mod topology_cmd;
mod train_cmd;
mod worker_cmd;

use clap::{Parser, Subcommand};

/// Deterministic simulator and cost-model testbed for sharded (SPMD) tensor programs.
#[derive(Debug, Parser)]
#[command(name = "shardsim", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// Refuse input files larger than this (programs, TOML, CSV, .npy).
    #[arg(long, global = true, value_name = "SIZE", default_value = "256MiB")]
    pub max_input_size: shardsim::topology::units::ByteSize,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run scenarios (default: a GPT-style training step on 2 x dgx-h100): summary
    /// table, reports/<scenario>/ (CSV/JSON, Chrome trace, plots, report.html);
    /// exit 1 when an expectation fails.
    Run(run_cmd::RunArgs),
    /// Run a grid or list of scenario variants in parallel, one CSV row per point.
    Sweep(sweep_cmd::SweepArgs),
    /// Join the CSVs of `sweep --shard i/N` runs into one.
    Merge(merge_cmd::MergeArgs),
    /// Show a device mesh in Shardy, TF DTensor and TVM form, every device's
    /// coordinates and, with --sharding and --tensor, each device's shard.
    Mesh(mesh_cmd::MeshArgs),
    /// Parse and verify an MLIR program; print functions, ops by kind, meshes, sharded values.
    Check(check_cmd::CheckArgs),
    /// Evaluate a program on one device (the numerics reference) and write out<i>.npy.
    Interp(interp_cmd::InterpArgs),
    /// Complete a program's shardings as Shardy (JAX's propagator) would.
    Propagate(propagate_cmd::PropagateArgs),
    /// Propagate, then partition into one per-device program with explicit collectives.
    Partition(partition_cmd::PartitionArgs),
    /// Propagate, partition and run on virtual devices; write out<i>.npy, print the error vs the interpreter.
    Exec(partition_cmd::ExecArgs),
    /// Hardware topologies: list presets, show one, route between components.
    Topology(topology_cmd::TopologyArgs),
    /// Device planning: where values live, and the device copies between memory scopes.
    Plan(plan_cmd::PlanArgs),
    /// Performance benchmarks (figures for the issue notes; not tests).
    Bench(bench_cmd::BenchArgs),
    /// nccl-tests in simulation: time a collective over a sweep of sizes.
    Collective(collective_cmd::CollectiveArgs),
    /// Simulate one training step of a model under a parallel strategy: step
    /// time, pipeline idle fraction, TFLOP/s per GPU, MFU, tokens/s, memory per GPU.
    Train(train_cmd::TrainArgs),
    /// Simulate serving a model: prefill and decode with a key/value cache;
    /// time to first token, decode step time, tokens/s, memory per GPU.
    Infer(infer_cmd::InferArgs),
    /// Measure this machine with real worker threads or processes, fit link
    /// latency/bandwidth and compute efficiency, write a topology file and
    /// print predicted vs measured on held-out sizes.
    Calibrate(calibrate_cmd::CalibrateArgs),
    /// A process-session worker (started by the session; speaks the worker protocol on stdin/stdout).
    #[command(hide = true)]
    Worker(worker_cmd::WorkerArgs),
}

/// Run a parsed command line.
pub fn run(cli: Cli) -> anyhow::Result<()> {
    shardsim::base::files::set_input_limit(cli.max_input_size.0);
    match cli.command {
        Command::Run(args) => run_cmd::run(args),
        Command::Sweep(args) => sweep_cmd::run(args),
        Command::Merge(args) => merge_cmd::run(args),
        Command::Mesh(args) => mesh_cmd::run(args),
        Command::Interp(args) => interp_cmd::run(args),
        Command::Propagate(args) => propagate_cmd::run(args),
        Command::Plan(args) => plan_cmd::run(args),
        Command::Bench(args) => bench_cmd::run(args),
        Command::Topology(args) => topology_cmd::run(args),
        Command::Check(args) => check_cmd::run(args),
        Command::Collective(args) => collective_cmd::run(args),
        Command::Partition(args) => partition_cmd::run_partition(args),
        Command::Exec(args) => partition_cmd::run_exec(args),
        Command::Train(args) => train_cmd::run(args),
        Command::Infer(args) => infer_cmd::run(args),
        Command::Calibrate(args) => calibrate_cmd::run(args),
        Command::Worker(args) => worker_cmd::run(args),
    }
}

/// Expectations that did not hold (exit code 1, unlike user errors' 2).
#[derive(Debug)]
pub struct Failed(pub String);

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "expectations failed: {}", self.0)
    }
}

impl std::error::Error for Failed {}

/// A run that does not fit in memory (exit code 3, after its report is printed).
#[derive(Debug)]
pub struct OutOfMemory(pub String);

impl std::fmt::Display for OutOfMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "out of memory: {}", self.0)
    }
}

impl std::error::Error for OutOfMemory {}

impl OutOfMemory {
    /// The first out-of-memory report of a timed run in one line (and how
    /// many more there were), or `None` when everything fit.
    pub fn first_of(t: &shardsim::exec::timed::report::Summary) -> Option<String> {
        let first = t.ooms.first()?;
        let more = (t.ooms.len() - 1) as u64 + t.ooms_dropped;
        Some(format!(
            "device {} scope {}: {} needs {} bytes with {} of {} in use{}",
            first.device,
            first.scope,
            first.value,
            first.bytes,
            first.in_use,
            first.capacity,
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            }
        ))
    }
}
