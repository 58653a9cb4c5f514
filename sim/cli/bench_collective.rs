//! `shardsim bench collective`: the full nccl-tests-style sweep (8 B to 8 GiB,
//! x2) with `auto` on a large cluster; reports wall time per size and in all.

use std::time::Instant;

use clap::Args;

use super::collective_cmd::CollectiveArgs;

#[derive(Debug, Args)]
pub struct CollectiveBenchArgs {
    #[arg(long, default_value = "dgx-h100")]
    pub topology: String,
    #[arg(long, default_value_t = 16)]
    pub nodes: u32,
    #[arg(long, default_value = "all_reduce")]
    pub op: String,
    #[arg(long, default_value = "auto")]
    pub algo: String,
    #[arg(long, default_value = "8B:8GiB:x2")]
    pub sizes: String,
}

pub fn run(a: CollectiveBenchArgs) -> anyhow::Result<()> {
    let args = CollectiveArgs {
        topology: a.topology.clone(),
        nodes: Some(a.nodes),
        set: Vec::new(),
        tuner: None,
        op: a.op.clone(),
        algo: a.algo.clone(),
        proto: "auto".into(),
        ranks: None,
        sizes: a.sizes.clone(),
        dtype: "f32".into(),
        format: Default::default(),
        out: None,
        measured: Vec::new(),
    };
    let start = Instant::now();
    let sweep = args.sweep()?;
    let rows = sweep.rows()?;
    let wall = start.elapsed().as_secs_f64();
    use std::fmt::Write;
    let mut out = String::new();
    writeln!(
        out,
        "bench collective: {} {} on {} --nodes {} ({} ranks), {} sizes {}: {:.3} s wall",
        a.op,
        a.algo,
        a.topology,
        a.nodes,
        sweep.group.len(),
        rows.len(),
        a.sizes,
        wall
    )?;
    if let (Some(first), Some(last)) = (rows.first(), rows.last()) {
        writeln!(
            out,
            "  {} B: {:.2} us ({} {}); {} B: {:.2} us, busbw {:.2} GB/s ({} {})",
            first.size_bytes,
            first.time_us,
            first.algo,
            first.protocol,
            last.size_bytes,
            last.time_us,
            last.busbw_gbs,
            last.algo,
            last.protocol
        )?;
    }
    super::output::write_output(None, &out)
}
