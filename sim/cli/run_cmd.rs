//! `shardsim run [SCENARIO...]`: run scenarios (the embedded default without
//! arguments), print a summary table each, write `reports/<scenario>/`, and
//! fail (exit 1) when an expectation does not hold, saying which and by how much.
//! A scenario that runs out of memory without expecting it (`expect.ooms`)
//! exits 3 after its report, as `exec` and `train` do.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use clap::Args;

use shardsim::report::run_report::{check_rows, summary_rows, write_run_report};
use shardsim::scenario::sweep::assign;
use shardsim::scenario::{run_scenario, ProgramCache, RunConfig, Scenario, DEFAULT_SCENARIO};

use super::output::{write_output, Format};

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Scenario files (scenarios/*.toml); none: the embedded default.
    scenarios: Vec<PathBuf>,
    /// Override a scenario field (--set topology.nodes=4, --set mesh.shape=[4,4],
    /// --set run.seed=3) or, for keys that name no scenario field, a topology
    /// field as exec and collective take it (--set nvlink.bandwidth=900GB/s).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// A tuner table (NCCL's example tuner plugin's CSV rows: collective,
    /// min_bytes, max_bytes, algorithm, protocol, channels, nNodes, nRanks)
    /// whose first matching row overrides `auto` (same as --set
    /// collective.tuner_file=FILE).
    #[arg(long, value_name = "FILE.csv")]
    tuner: Option<PathBuf>,
    /// Where the report directories go (one per scenario).
    #[arg(short, long = "out", default_value = "reports")]
    out: PathBuf,
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Write the data files only (no plots, no report.html).
    #[arg(long)]
    no_plots: bool,
}

/// A `--set KEY=VALUE` value as TOML (numbers, arrays, booleans) or a string.
pub fn set_value(text: &str) -> anyhow::Result<(String, toml::Value)> {
    let (k, v) = text
        .split_once('=')
        .with_context(|| format!("--set {text}: expected KEY=VALUE, e.g. topology.nodes=4"))?;
    let v = v.trim();
    let value = toml::from_str::<toml::Table>(&format!("v = {v}"))
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(v.to_string()));
    Ok((k.trim().to_string(), value))
}

/// Read a scenario (or the default) with `--set` overrides applied.
pub fn load_scenario(path: Option<&Path>, sets: &[String]) -> anyhow::Result<Scenario> {
    let (text, file, base) = match path {
        Some(p) => (
            super::output::read_text(p)?,
            p.display().to_string(),
            Some(p.parent().map(Path::to_path_buf).unwrap_or_default()),
        ),
        None => (
            DEFAULT_SCENARIO.to_string(),
            "default.toml".to_string(),
            None,
        ),
    };
    let sc = Scenario::parse(&text, &file, base.clone())?;
    if sets.is_empty() {
        return Ok(sc);
    }
    let mut table: toml::Table = toml::from_str(&text)?;
    for s in sets {
        let (k, v) = set_value(s)?;
        assign(&mut table, &k, v)?;
    }
    // The file itself parsed: an error now comes from a --set value, which
    // the file's name alone would not lead the user to.
    let mut edited = Scenario::from_table(&table, &file, base).map_err(|e| {
        anyhow::anyhow!(
            "{e} (with --set {})",
            sets.iter()
                .map(|s| s.trim())
                .collect::<Vec<_>>()
                .join(" --set ")
        )
    })?;
    edited.name = sc.name;
    Ok(edited)
}

fn text_table(rows: &[Vec<String>]) -> String {
    let w = rows.iter().map(|r| r[0].len()).max().unwrap_or(0);
    rows.iter()
        .map(|r| format!("{:<w$}  {}\n", r[0], r[1..].join("  ")))
        .collect()
}

pub fn run(args: RunArgs) -> anyhow::Result<()> {
    super::output::check_out_dir(&args.out, "--out")?;
    let paths: Vec<Option<&Path>> = if args.scenarios.is_empty() {
        vec![None]
    } else {
        args.scenarios.iter().map(|p| Some(p.as_path())).collect()
    };
    let cache = ProgramCache::new();
    let mut failed = Vec::new();
    let mut ooms = Vec::new();
    let mut json = Vec::new();
    let sets = super::output::with_tuner(&args.set, args.tuner.as_deref())?;
    let mut bar = super::progress::Progress::new(paths.len() as u64, "scenarios");
    for p in paths {
        let sc = load_scenario(p, &sets)?;
        bar.message(format!("scenario {}", sc.name));
        let start = Instant::now();
        // Memory over time only feeds the memory plot.
        let cfg = RunConfig {
            record_memory: !args.no_plots,
            ..RunConfig::default()
        };
        let r = run_scenario(&sc, &cache, cfg).with_context(|| format!("scenario {}", sc.name))?;
        let dir = args.out.join(&sc.name);
        let files = write_run_report(&r, &dir, !args.no_plots)?;
        let secs = start.elapsed().as_secs_f64();
        match args.format {
            Format::Text => {
                let mut text = text_table(&summary_rows(&r));
                for c in check_rows(&r) {
                    text += &format!("expect {}: {} (expected {}) {}\n", c[0], c[1], c[2], c[3]);
                }
                // Wall time only on a terminal's stderr: stdout (and a
                // log's stderr) stays byte-identical run to run.
                text += &format!("wrote {} ({} files)\n\n", dir.display(), files.len());
                bar.suspend(|| {
                    if super::progress::enabled() {
                        eprintln!("scenario {} ran in {secs:.2} s", sc.name);
                    }
                    write_output(None, &text)
                })?;
            }
            Format::Json => json.push(serde_json::to_value(&r.summary)?),
        }
        for c in r.summary.checks.iter().filter(|c| !c.ok) {
            failed.push(format!("{}: {}: {}", sc.name, c.what, c.message));
        }
        if sc.file.expect.ooms.is_none() {
            if let Some(line) = super::OutOfMemory::first_of(&r.summary.timing) {
                ooms.push(format!("scenario {}: {line}", sc.name));
            }
        }
        bar.inc();
    }
    drop(bar);
    if args.format == Format::Json {
        write_output(None, &(serde_json::to_string_pretty(&json)? + "\n"))?;
    }
    // An unexpected OOM explains the failed expectations after it: it decides the exit code.
    if !ooms.is_empty() {
        let also = match failed.len() {
            0 => String::new(),
            n => format!(" ({n} expectation(s) failed too)"),
        };
        return Err(super::OutOfMemory(ooms.join("; ") + &also).into());
    }
    if !failed.is_empty() {
        return Err(super::Failed(failed.join("; ")).into());
    }
    Ok(())
}
