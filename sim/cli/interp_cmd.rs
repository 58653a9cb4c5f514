//! `shardsim interp`: run a program on one device with the reference interpreter.

use std::path::PathBuf;

use clap::Args;

use shardsim::ir::interp::interpret;
use shardsim::tensor::{npy, Tensor};

use super::output::read_module;

#[derive(Debug, Args)]
pub struct InterpArgs {
    /// The program (StableHLO + sdy text).
    input: PathBuf,
    /// Input arrays, one .npy file per function argument, comma-separated.
    #[arg(long, value_delimiter = ',')]
    inputs: Vec<PathBuf>,
    /// Directory for the outputs out0.npy, out1.npy, ...
    #[arg(long)]
    out: PathBuf,
}

/// Read `.npy` inputs, naming the file in errors.
pub fn read_inputs(paths: &[PathBuf]) -> anyhow::Result<Vec<Tensor>> {
    paths.iter().map(|p| Ok(npy::read_npy(p)?)).collect()
}

/// Write `out<i>.npy` files into `dir` (created if missing) as one unit: when
/// one cannot be written, none is (no partial outputs, no temporary files).
/// A `!stablehlo.token` result holds no data and gets no file (its number is
/// skipped, so `out<i>` stays result `i`).
pub fn write_outputs(dir: &std::path::Path, outs: &[Tensor]) -> anyhow::Result<Vec<PathBuf>> {
    crate::cli::output::create_out_dir(dir, "--out")?;
    let mut set = shardsim::base::files::OutputSet::new();
    let mut paths = Vec::new();
    for (i, t) in outs.iter().enumerate() {
        let p = dir.join(format!("out{i}.npy"));
        if t.tensor_type().is_token() {
            paths.push(p);
            continue;
        }
        let bytes = npy::to_npy_bytes(t).map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))?;
        set.write(&p, &bytes)?;
        paths.push(p);
    }
    set.commit()?;
    Ok(paths)
}

pub fn run(args: InterpArgs) -> anyhow::Result<()> {
    super::output::check_out_dir(&args.out, "--out")?;
    let module = read_module(&args.input)?;
    let inputs = read_inputs(&args.inputs)?;
    let outs = interpret(&module, &inputs)?;
    for (p, t) in write_outputs(&args.out, &outs)?.iter().zip(&outs) {
        if t.tensor_type().is_token() {
            outln!(
                "{}: !stablehlo.token (holds no data, not written)",
                p.display()
            )?;
            continue;
        }
        outln!(
            "{}: tensor<{}x{}>",
            p.display(),
            t.shape()
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join("x"),
            t.dtype()
        )?;
    }
    Ok(())
}
