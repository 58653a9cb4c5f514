//! `shardsim worker` (hidden): the process a `ProcessSession` starts for each
//! worker. It serves the worker protocol on stdin/stdout until shut down.

use clap::Args;

#[derive(Debug, Args)]
pub struct WorkerArgs {
    /// This worker's index.
    #[arg(long)]
    pub index: usize,
    /// Workers in the session.
    #[arg(long)]
    pub workers: usize,
}

pub fn run(args: WorkerArgs) -> anyhow::Result<()> {
    if args.index >= args.workers {
        anyhow::bail!("--index {} with --workers {}", args.index, args.workers);
    }
    shardsim::runtime::serve_stdio(args.index, args.workers);
    Ok(())
}
