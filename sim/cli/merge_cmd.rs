//! `shardsim merge --sweep SWEEP.toml SHARD.csv... --out CSV`: join the CSVs
//! of `sweep --shard i/N` runs into the file a single run writes (same
//! header, every point of the sweep once, sorted by point); missing points
//! are named.

use std::path::PathBuf;

use clap::Args;

use shardsim::engine::log::write_atomically;
use shardsim::scenario::sweep::{merge, to_csv, Sweep};

#[derive(Debug, Args)]
pub struct MergeArgs {
    /// The shard results (`sweep --shard i/N` outputs, any order).
    #[arg(required = true)]
    inputs: Vec<PathBuf>,
    /// The sweep file the shards ran: it says how many points there are
    /// and what each one sets.
    #[arg(long, value_name = "SWEEP.toml")]
    sweep: PathBuf,
    /// The merged CSV.
    #[arg(short, long = "out")]
    out: PathBuf,
}

pub fn run(args: MergeArgs) -> anyhow::Result<()> {
    let sweep = Sweep::load(&args.sweep)?;
    let (header, rows) = merge(&sweep, &args.inputs)?;
    let bytes = to_csv(&header, &rows)?;
    write_atomically(&args.out, &bytes)
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", args.out.display()))?;
    outln!(
        "{} points from {} files: {}",
        rows.len(),
        args.inputs.len(),
        args.out.display()
    )?;
    Ok(())
}
