//! `shardsim calibrate` (being written).
use clap::Args;
#[derive(Debug, Args)]
pub struct CalibrateArgs {}
pub fn run(_: CalibrateArgs) -> anyhow::Result<()> {
    anyhow::bail!("not yet")
}
