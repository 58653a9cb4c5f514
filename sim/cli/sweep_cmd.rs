//! `shardsim sweep SWEEP.toml [--jobs N] [--shard i/N] [--resume]`: run a
//! grid or list of scenario variants in parallel, one CSV row per point
//! (written atomically as points finish), then the sweep's plots and report.

use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};

use shardsim::report::sweep_report::write_sweep_report;
use shardsim::scenario::sweep::{parse_shard, run_sweep, Sweep, SweepOptions};

#[derive(Debug, Args)]
pub struct SweepArgs {
    /// The sweep file (format 1: scenario, [grid] or [[points]], [plots]).
    sweep: PathBuf,
    /// Points run at once (default: the number of CPUs).
    #[arg(long)]
    jobs: Option<usize>,
    /// Run one slice of N: every N-th point of a fixed shuffled order, from the i-th (e.g. a Slurm array task); join the slices with `shardsim merge`.
    #[arg(long, value_name = "i/N")]
    shard: Option<String>,
    /// Keep the points already in the output file and run the rest.
    #[arg(long)]
    resume: bool,
    /// The results CSV (default: reports/<sweep>/results.csv, or results.shard<i>of<N>.csv).
    #[arg(short, long = "out")]
    out: Option<PathBuf>,
    /// Write the CSV only (no plots, no report.html).
    #[arg(long)]
    no_plots: bool,
}

pub fn run(args: SweepArgs) -> anyhow::Result<()> {
    if args.jobs == Some(0) {
        anyhow::bail!(
            "--jobs 0: expected at least 1 point at a time (leave it out for one per CPU)"
        );
    }
    if let Some(out) = args.out.as_deref().filter(|o| o.is_dir()) {
        anyhow::bail!(
            "--out {}: is a directory (expected the results CSV file)",
            out.display()
        );
    }
    let sweep = Sweep::load(&args.sweep)?;
    let shard = args.shard.as_deref().map(parse_shard).transpose()?;
    let stem = args
        .sweep
        .file_stem()
        .map_or("sweep".into(), |s| s.to_string_lossy().into_owned());
    let out = args.out.clone().unwrap_or_else(|| {
        let name = match shard {
            Some((i, n)) => format!("results.shard{i}of{n}.csv"),
            None => "results.csv".into(),
        };
        PathBuf::from("reports").join(&stem).join(name)
    });
    if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let jobs = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let opts = SweepOptions {
        jobs,
        shard,
        out: out.clone(),
        resume: args.resume,
    };
    // No bar in CI logs or when stderr is not a terminal.
    let bar = if super::progress::enabled() {
        ProgressBar::new(0)
    } else {
        ProgressBar::hidden()
    };
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} points {elapsed} (eta {eta})")
            .map_err(|e| anyhow::anyhow!("{e}"))?,
    );
    let start = Instant::now();
    let rows = run_sweep(&sweep, &opts, &|done, total| {
        bar.set_length(total as u64);
        bar.set_position(done as u64);
    })?;
    bar.finish_and_clear();
    let header = sweep.header();
    let column = |name: &str| header.iter().position(|h| h == name);
    let (status, checks, error) = (column("status"), column("failed_checks"), column("error"));
    let cell = |row: &[String], at: Option<usize>| -> String {
        at.and_then(|i| row.get(i)).cloned().unwrap_or_default()
    };
    let broken: Vec<String> = rows
        .iter()
        .filter(|(_, r)| cell(r, status) == "error")
        .map(|(p, r)| format!("point {p}: {}", cell(r, error)))
        .collect();
    let failing: Vec<String> = rows
        .iter()
        .filter(|(_, r)| !cell(r, checks).is_empty())
        .map(|(p, _)| p.to_string())
        .collect();
    let shown = |points: &[String]| match points.len() {
        0..=10 => points.join(", "),
        n => format!("{}, ... ({} more)", points[..10].join(", "), n - 10),
    };
    let errors = broken.len();
    // Wall time and jobs only on a terminal's stderr: stdout (and a log's
    // stderr) stays byte-identical run to run.
    if super::progress::enabled() {
        eprintln!("{:.2} s with {jobs} jobs", start.elapsed().as_secs_f64());
    }
    outln!(
        "{} points ({} failed to run): {}",
        rows.len(),
        errors,
        out.display()
    )?;
    if shard.is_none() && !args.no_plots {
        let dir = out.parent().map(PathBuf::from).unwrap_or_default();
        let files = write_sweep_report(
            &dir,
            &sweep.header(),
            &rows,
            &sweep.keys,
            sweep.file.plots.heatmap.clone(),
            sweep.file.plots.scaling.clone(),
        )?;
        outln!(
            "plots: {} (SVG and PNG), report: {}",
            files.join(", "),
            dir.join("report.html").display()
        )?;
    }
    // The CSV and report keep every point; the exit code says whether the
    // sweep is whole: a point that could not run is a user error (2, as
    // for a scenario that does not run alone), a failed expectation that the
    // sweep sets 1 (as `run`). Out-of-memory points are results (status
    // `oom`), not failures.
    if let Some(first) = broken.first() {
        anyhow::bail!(
            "{errors} of {} points failed to run (first, {first}); their rows in {} say why",
            rows.len(),
            out.display()
        );
    }
    // Expectations the sweep itself sets (`expect.*` keys) are its checks;
    // the base scenario's own were written for the base and only reported.
    let sweep_expects = sweep.keys.iter().any(|k| k.starts_with("expect."));
    if sweep_expects && !failing.is_empty() {
        return Err(super::Failed(format!(
            "{} of {} points (point {}): their failed_checks in {}",
            failing.len(),
            rows.len(),
            shown(&failing),
            out.display()
        ))
        .into());
    }
    Ok(())
}
