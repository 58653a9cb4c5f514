//! `shardsim merge OUT SHARD.csv...`: join the CSVs of `sweep --shard i/N`
//! runs into the file a single run writes (same header, every point once,
//! sorted by point).

use std::path::PathBuf;

use clap::Args;

use shardsim::engine::log::write_atomically;
use shardsim::scenario::sweep::{merge, to_csv};

#[derive(Debug, Args)]
pub struct MergeArgs {
    /// The shard results.
    #[arg(required = true)]
    inputs: Vec<PathBuf>,
    /// The merged CSV.
    #[arg(short, long = "out")]
    out: PathBuf,
}

pub fn run(args: MergeArgs) -> anyhow::Result<()> {
    let (header, rows) = merge(&args.inputs)?;
    let bytes = to_csv(&header, &rows)?;
    write_atomically(&args.out, &bytes)
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", args.out.display()))?;
    println!(
        "{} points from {} files: {}",
        rows.len(),
        args.inputs.len(),
        args.out.display()
    );
    Ok(())
}
