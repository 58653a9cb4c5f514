//! `shardsim calibrate`: measure this machine through a threaded or process
//! session (point-to-point, all-reduce, all-gather, GEMM, elementwise; warm-up,
//! repeats, median and spread), fit the link's alpha/beta and the compute rates
//! on every other size, print predicted vs measured with the held-out error,
//! and with `--out DIR` write DIR/topology.toml (a topology file like the
//! presets), DIR/points.csv and DIR/heldout.csv.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, ValueEnum};

use shardsim::calibrate::{
    self, fit_machine, heldout_rows, median_heldout_error, topology_file, BenchConfig,
};
use shardsim::collective::sizes::parse_sizes;
use shardsim::engine::log::write_atomically;
use shardsim::runtime::{ProcessSession, Session, ThreadedSession};

use super::output::{load_topology, parse_u64_list};
use super::progress::Progress;

/// Which real backend runs the benchmarks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Backend {
    /// Worker threads in this process.
    Threads,
    /// Worker processes (this binary re-executed) over pipes.
    Processes,
}

impl Backend {
    fn name(self) -> &'static str {
        match self {
            Backend::Threads => "threads",
            Backend::Processes => "processes",
        }
    }
}

#[derive(Debug, Args)]
pub struct CalibrateArgs {
    /// Measure this machine through a real session backend.
    #[arg(
        long,
        value_enum,
        required_unless_present = "measured",
        conflicts_with = "measured"
    )]
    pub backend: Option<Backend>,
    /// Fit the collective calibration of the machine --topology describes to
    /// a measured nccl-tests-like curve (CSV: `size_bytes` and `time_us`,
    /// `algbw_gbs` or `busbw_gbs`; `#` comments); repeatable; `OP=FILE.csv`
    /// names the file's operation (default --op).
    #[arg(long, value_name = "FILE.csv")]
    pub measured: Vec<PathBuf>,
    /// The operation the measured files timed (all_reduce, all_gather, ...);
    /// with --measured only.
    #[arg(long)]
    pub op: Option<String>,
    /// Nodes of the measured machine (DGX/HGX presets); with --measured only.
    #[arg(long)]
    pub nodes: Option<u32>,
    /// Override a topology field (`nvlink.bandwidth=900GB/s`); with --measured only.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// A tuner table (NCCL's example tuner plugin's CSV rows: collective,
    /// min_bytes, max_bytes, algorithm, protocol, channels, nNodes, nRanks)
    /// whose first matching row overrides `auto` (same as --set
    /// collective.tuner_file=FILE); with --measured only.
    #[arg(long, value_name = "FILE.csv")]
    pub tuner: Option<PathBuf>,
    /// The topology: with --backend the one the session plans its collectives
    /// on (default `switch`); with --measured the machine the curves were
    /// measured on (required).
    #[arg(long)]
    pub topology: Option<String>,
    /// With --backend: worker counts for the collectives, comma-separated
    /// (default 2,4; point-to-point uses 2). With --measured: the ranks the
    /// curves ran on (default every device of the topology).
    #[arg(long)]
    pub ranks: Option<String>,
    /// Message sizes: START:END:xF or a comma-separated list (fit on every
    /// other size from the smallest, error reported on the rest); default
    /// 4KiB:1MiB:x2. With --backend only.
    #[arg(long, conflicts_with = "measured")]
    pub sizes: Option<String>,
    /// GEMM dimensions m (m x m by m x m, f32), comma-separated; default
    /// 16,32,48,64,96,128. With --backend only.
    #[arg(long, conflicts_with = "measured")]
    pub gemm: Option<String>,
    /// Warm-up runs per point (default 2). With --backend only.
    #[arg(long, conflicts_with = "measured")]
    pub warmup: Option<usize>,
    /// Timed runs per point (default 9). With --backend only.
    #[arg(long, conflicts_with = "measured")]
    pub repeats: Option<usize>,
    /// Seed of the measurement order (default 0). With --backend only.
    #[arg(long, conflicts_with = "measured")]
    pub seed: Option<u64>,
    /// Write DIR/topology.toml and the points (DIR/points.csv and
    /// DIR/heldout.csv with --backend, DIR/fit.csv with --measured).
    #[arg(short, long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Name of the written topology (default `calibrated`, or the measured
    /// topology's name with `-measured` appended).
    #[arg(long)]
    pub name: Option<String>,
}

/// Total memory of this machine (Linux /proc/meminfo), or 16 GiB when unknown.
fn host_memory() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| {
            let line = t.lines().find(|l| l.starts_with("MemTotal:"))?;
            let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
            Some(kib * 1024)
        })
        .unwrap_or(16 << 30)
}

pub fn run(args: CalibrateArgs) -> anyhow::Result<()> {
    if let Some(dir) = &args.out {
        super::output::check_out_dir(dir, "--out")?;
    }
    if args.name.is_some() && args.out.is_none() {
        anyhow::bail!("--name names the topology file that --out DIR writes: give --out too");
    }
    let Some(backend) = args.backend else {
        return super::calibrate_measured::run(&args);
    };
    // These describe a measured machine; a real backend measures this one.
    for (flag, given) in [
        ("--op", args.op.is_some()),
        ("--nodes", args.nodes.is_some()),
        ("--set", !args.set.is_empty()),
        ("--tuner", args.tuner.is_some()),
    ] {
        if given {
            anyhow::bail!(
                "{flag} goes with --measured (the machine a curve was measured on), not --backend"
            );
        }
    }
    let repeats = args.repeats.unwrap_or(9);
    if repeats == 0 {
        anyhow::bail!("--repeats 0: need at least one");
    }
    let topo = load_topology(args.topology.as_deref().unwrap_or("switch"), None, &[])?;
    let ranks: Vec<usize> = parse_u64_list(args.ranks.as_deref().unwrap_or("2,4"), "--ranks")?
        .into_iter()
        .map(|r| r as usize)
        .collect();
    let gemm_dims = parse_u64_list(
        args.gemm.as_deref().unwrap_or("16,32,48,64,96,128"),
        "--gemm",
    )?;
    let sizes = parse_sizes(args.sizes.as_deref().unwrap_or("4KiB:1MiB:x2"))
        .map_err(crate::cli::output::sizes_error)?;
    for (what, n) in [("--sizes", sizes.len()), ("--gemm", gemm_dims.len())] {
        if n < 4 {
            anyhow::bail!("{what}: {n} values; need at least 4 (half fit, half held out)");
        }
    }
    if gemm_dims.iter().any(|&m| m == 0 || m > 1024) {
        anyhow::bail!("--gemm: dimensions must be 1 to 1024");
    }
    let cfg = BenchConfig {
        sizes,
        ranks,
        gemm_dims,
        warmup: args.warmup.unwrap_or(2),
        repeats,
        seed: args.seed.unwrap_or(0),
    };
    let exe =
        std::env::current_exe().context("locating the shardsim binary for worker processes")?;
    let session_topo = topo.clone();
    let mut start = move |n: usize| -> Result<Box<dyn Session>, shardsim::runtime::SessionError> {
        Ok(match backend {
            Backend::Threads => Box::new(ThreadedSession::start_threads(session_topo.clone(), n)?),
            Backend::Processes => Box::new(ProcessSession::start_processes(
                session_topo.clone(),
                n,
                &exe,
            )?),
        })
    };
    let mut bar: Option<Progress> = None;
    let mut progress = |done: usize, total: usize| {
        bar.get_or_insert_with(|| Progress::new(total as u64, "calibrate"))
            .inc();
        let _ = done;
    };
    let points = calibrate::run_benchmarks(&cfg, &topo, &mut start, &mut progress)?;
    let fitted = fit_machine(&points)?;
    let rows = heldout_rows(&fitted, &points);

    outln!(
        "calibrate --backend {}: {} points, {} repeats each after {} warm-up",
        backend.name(),
        points.len(),
        cfg.repeats,
        cfg.warmup
    )?;
    outln!(
        "fit: call {:.1} us + {:.2} us/worker, alpha {:.2} us/message, beta {:.4} ns/byte ({:.3} GB/s), gamma {:.4} ns/reduced byte; GEMM {:.3} GFLOP/s; elementwise {:.3} GB/s",
        fitted.call_s * 1e6,
        fitted.per_worker_s * 1e6,
        fitted.alpha_s * 1e6,
        fitted.beta_s_per_byte * 1e9,
        1.0 / fitted.beta_s_per_byte / 1e9,
        fitted.gamma_s_per_byte * 1e9,
        fitted.gemm_flops / 1e9,
        fitted.elementwise_bytes_per_s / 1e9
    )?;
    outln!(
        "{:<12} {:>5} {:>10} {:>12} {:>7} {:>12} {:>7} {:>5}",
        "op",
        "ranks",
        "size",
        "measured_us",
        "spread",
        "predicted_us",
        "error",
        "set"
    )?;
    for r in &rows {
        outln!(
            "{:<12} {:>5} {:>10} {:>12.1} {:>6.1}% {:>12.1} {:>6.1}% {:>5}",
            r.op,
            r.ranks,
            r.size,
            r.measured_us,
            r.spread * 100.0,
            r.predicted_us,
            r.error * 100.0,
            if r.held_out { "held" } else { "fit" }
        )?;
    }
    for op in ["p2p", "all_reduce", "all_gather", "gemm", "elementwise"] {
        if let Some(e) = median_heldout_error(&rows, op) {
            outln!("median held-out error {op}: {:.1}%", e * 100.0)?;
        }
    }

    if let Some(dir) = &args.out {
        crate::cli::output::create_out_dir(dir, "--out")?;
        let devices = topo.num_devices();
        let file = topology_file(
            &fitted,
            devices,
            args.name.as_deref().unwrap_or("calibrated"),
            backend.name(),
            host_memory(),
        )
        .map_err(|e| anyhow::anyhow!(e))?;
        let text = format!(
            "# Written by `shardsim calibrate --backend {}`; load it with --topology {}.\n{}",
            backend.name(),
            dir.join("topology.toml").display(),
            toml::to_string(&file).context("writing the topology")?
        );
        // The file must be one the rest of the tool reads.
        shardsim::topology::load_text(&text, "topology.toml", &[])
            .map_err(|e| anyhow::anyhow!("the fitted topology does not load: {e}"))?;
        let path = dir.join("topology.toml");
        write_atomically(&path, text.as_bytes())
            .with_context(|| format!("writing {}", path.display()))?;
        write_csv(&dir.join("heldout.csv"), &rows)?;
        let flat: Vec<PointRow> = points.iter().map(PointRow::of).collect();
        write_csv(&dir.join("points.csv"), &flat)?;
        outln!("wrote {}", path.display())?;
    }
    Ok(())
}

/// A measured point as a CSV row.
#[derive(serde::Serialize)]
struct PointRow {
    op: &'static str,
    ranks: usize,
    size: u64,
    median_us: f64,
    spread: f64,
    min_us: f64,
    max_us: f64,
    repeats: usize,
    messages: u64,
    moved_bytes: u64,
    reduced_bytes: u64,
    work: f64,
}

impl PointRow {
    fn of(p: &calibrate::Measured) -> PointRow {
        PointRow {
            op: p.op.name(),
            ranks: p.ranks,
            size: p.size,
            median_us: p.stats.median_s * 1e6,
            spread: p.stats.spread,
            min_us: p.stats.min_s * 1e6,
            max_us: p.stats.max_s * 1e6,
            repeats: p.stats.repeats,
            messages: p.messages,
            moved_bytes: p.moved_bytes,
            reduced_bytes: p.reduced_bytes,
            work: p.work,
        }
    }
}

pub(super) fn write_csv<T: serde::Serialize>(
    path: &std::path::Path,
    rows: &[T],
) -> anyhow::Result<()> {
    let mut w = csv::Writer::from_writer(Vec::new());
    for r in rows {
        w.serialize(r)?;
    }
    let bytes = w.into_inner().map_err(|e| anyhow::anyhow!("{e}"))?;
    write_atomically(path, &bytes).with_context(|| format!("writing {}", path.display()))
}
