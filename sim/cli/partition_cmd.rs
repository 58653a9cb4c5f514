//! `shardsim partition`: propagate, then partition into a per-device program
//! with explicit collectives; `shardsim exec`: run it on virtual devices.

use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};
use serde::Serialize;

use shardsim::exec::execute;
use shardsim::ir::inline;
use shardsim::ir::interp::{complete_inputs, interpret};
use shardsim::partition::{partition_with, text, PartitionOptions, SpmdProgram};
use shardsim::propagate::{propagate_module, Strategy};
use shardsim::tensor::{max_abs_rel_error, Tensor};

use super::exec_timed::TimedSummary;
use super::interp_cmd::read_inputs;
use super::output::{read_module, write_output, Format};

#[derive(Debug, Clone, Copy, ValueEnum)]
enum PartitionFormat {
    /// Shardy's syntax: the function with explicit sdy collectives.
    Mlir,
    /// Collectives (op, axes, groups, dtype, bytes, at), bytes sent per device, local shapes.
    Json,
}

/// The user's partitioning choices.
#[derive(Debug, Args)]
pub struct PartitionFlags {
    /// Finish means over evenly sharded dims (a sum divided by its count)
    /// with an averaging all-reduce (NCCL's avg) instead of sum then divide.
    #[arg(long)]
    avg_means: bool,
}

impl PartitionFlags {
    fn options(&self) -> PartitionOptions {
        PartitionOptions {
            avg_means: self.avg_means,
        }
    }
}

#[derive(Debug, Args)]
pub struct PartitionArgs {
    /// The program (StableHLO + sdy text).
    input: PathBuf,
    #[command(flatten)]
    partition: PartitionFlags,
    #[arg(long, value_enum, default_value_t = PartitionFormat::Mlir)]
    format: PartitionFormat,
    /// Write the output here instead of stdout.
    #[arg(short, long)]
    out: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct ExecArgs {
    /// The program (StableHLO + sdy text).
    input: PathBuf,
    #[command(flatten)]
    partition: PartitionFlags,
    /// Input arrays, one .npy file per function argument, comma-separated
    /// (without them, --topology times the program in shape-only mode).
    #[arg(long, value_delimiter = ',')]
    inputs: Vec<PathBuf>,
    /// Directory for the gathered outputs out0.npy, out1.npy, ...
    #[arg(short, long)]
    out: Option<PathBuf>,
    /// text, or json (one document: mesh, numerics, and with --topology the
    /// timed summary with its overrides).
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Time shapes only, without running the numerics.
    #[arg(long)]
    shape_only: bool,
    /// Above this many bytes of device buffers (all devices), run shape-only.
    #[arg(long, default_value_t = 1 << 30)]
    max_data_bytes: u64,
    #[command(flatten)]
    timed: super::exec_timed::TimedArgs,
}

/// Read, propagate and partition a program file; with `keep_original`, also
/// the module as read (the interpreter's reference: a copy of the whole
/// program, so only runs that compute numerics keep it).
fn load(
    path: &Path,
    opts: &PartitionOptions,
    keep_original: bool,
) -> anyhow::Result<(Option<shardsim::ir::Module>, SpmdProgram)> {
    let mut module = read_module(path)?;
    // Programs as JAX exports them call private functions: inline them as XLA does.
    if inline::has_calls(&module) {
        module = inline::inline_calls(&module)
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    }
    let original = keep_original.then(|| module.clone());
    propagate_module(&mut module, Strategy::default())
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    let program =
        partition_with(&module, opts).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    Ok((original, program))
}

pub fn run_partition(args: PartitionArgs) -> anyhow::Result<()> {
    let (_, program) = load(&args.input, &args.partition.options(), false)?;
    let out = match args.format {
        PartitionFormat::Mlir => text::to_mlir(&program),
        PartitionFormat::Json => serde_json::to_string_pretty(&text::summary(&program))? + "\n",
    };
    write_output(args.out.as_deref(), &out)
}

/// Write `out<i>.npy` into `dir` as one unit (temporary files and renames;
/// nothing is kept when one fails).
fn write_outputs(dir: &Path, outs: &[Tensor]) -> anyhow::Result<()> {
    super::interp_cmd::write_outputs(dir, outs).map(|_| ())
}

/// One output's error against the single-device interpreter.
#[derive(Debug, Serialize)]
struct OutputError {
    output: String,
    tensor_type: String,
    max_abs_error: f64,
    max_rel_error: f64,
}

/// Everything `exec` found, as `--format json` prints it.
#[derive(Debug, Serialize)]
struct ExecReport {
    program: String,
    /// The program's mesh in Shardy's syntax.
    mesh: String,
    devices: u64,
    collectives: usize,
    collective_bytes_per_device: u64,
    /// Why the numerics did not run, when they did not.
    shape_only: Option<String>,
    numerics: Vec<OutputError>,
    timed: Option<TimedSummary>,
}

impl ExecReport {
    fn to_text(&self) -> String {
        let mut text = String::new();
        if let Some(why) = &self.shape_only {
            text += &format!("shape-only: {why}\n");
        } else {
            text += &format!(
                "{} devices, {} collectives, {} bytes per device\n",
                self.devices, self.collectives, self.collective_bytes_per_device
            );
        }
        for o in &self.numerics {
            text += &format!(
                "{}: {}  max abs error {:e}, max rel error {:e} vs the reference interpreter\n",
                o.output, o.tensor_type, o.max_abs_error, o.max_rel_error
            );
        }
        if let Some(t) = &self.timed {
            text += &t.to_text();
        }
        text
    }
}

pub fn run_exec(args: ExecArgs) -> anyhow::Result<()> {
    super::exec_timed::check_args(&args.timed)?;
    if let Some(dir) = &args.out {
        super::output::check_out_dir(dir, "--out")?;
    }
    // Why the run is shape-only whatever the program (then it never
    // interprets it, so the input module is not kept as a reference).
    let shape_only_anyway = if args.shape_only {
        Some("--shape-only".to_string())
    } else if args.inputs.is_empty() && args.timed.topology.is_some() {
        Some("no --inputs given".to_string())
    } else {
        None
    };
    let (original, program) = load(
        &args.input,
        &args.partition.options(),
        shape_only_anyway.is_none(),
    )?;
    let data_bytes: u64 = program
        .values
        .iter()
        .map(|v| v.local_bytes().saturating_mul(program.num_devices()))
        .fold(0, u64::saturating_add);
    let shape_only = shape_only_anyway.or_else(|| {
        (data_bytes > args.max_data_bytes).then(|| {
            format!(
                "device buffers would take {data_bytes} bytes (--max-data-bytes {})",
                args.max_data_bytes
            )
        })
    });
    // Inputs a shape-only run would not read are an error, not silently dropped.
    if let (Some(why), false) = (&shape_only, args.inputs.is_empty()) {
        anyhow::bail!(
            "--inputs given but this run is shape-only ({why}), so they would be ignored: drop --inputs or --shape-only, or raise --max-data-bytes"
        );
    }
    let mut numerics = Vec::new();
    if let (None, Some(original)) = (&shape_only, &original) {
        let inputs = read_inputs(&args.inputs)?;
        // Token arguments hold no data: inputs may leave them out, as for `interp`.
        let inputs = match original.entry() {
            Some(func) => complete_inputs(func, &inputs),
            None => inputs,
        };
        let outs = execute(&program, &inputs)?;
        let reference = interpret(original, &inputs)?;
        if let Some(dir) = &args.out {
            write_outputs(dir, &outs)?;
        }
        for (i, (o, r)) in outs.iter().zip(&reference).enumerate() {
            let (abs, rel) = max_abs_rel_error(o, r)?;
            numerics.push(OutputError {
                output: format!("out{i}.npy"),
                tensor_type: o.tensor_type().to_string(),
                max_abs_error: abs,
                max_rel_error: rel,
            });
        }
    } else if args.out.is_some() {
        anyhow::bail!("--out needs the numerics, which this run does not compute (shape-only)");
    }
    let report = ExecReport {
        program: args.input.display().to_string(),
        mesh: program.mesh.to_string(),
        devices: program.num_devices(),
        collectives: program
            .collectives()
            .filter(|c| c.kind.moves_data())
            .count(),
        collective_bytes_per_device: program.total_collective_bytes(),
        shape_only,
        numerics,
        timed: super::exec_timed::run(&program, &args.timed)?,
    };
    let text = match args.format {
        Format::Text => report.to_text(),
        Format::Json => serde_json::to_string_pretty(&report)? + "\n",
    };
    write_output(None, &text)?;
    // The report lists every out-of-memory event; the exit code says it too.
    if let Some(line) = report
        .timed
        .as_ref()
        .and_then(|t| super::OutOfMemory::first_of(&t.timing))
    {
        return Err(super::OutOfMemory(line).into());
    }
    Ok(())
}
