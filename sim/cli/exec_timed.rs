//! The timed part of `shardsim exec`: `--topology NAME` runs the partitioned
//! program on the topology's virtual devices in the discrete-event engine,
//! prints the summary and, with `--trace DIR`, writes `trace.json` (Chrome
//! trace events, for Perfetto), `events.csv` and `summary.json`.

use std::path::{Path, PathBuf};

use anyhow::bail;
use clap::{Args, ValueEnum};

use serde::Serialize;

use shardsim::exec::timed::{report, run_timed_classes, trace, ClassTimeline, TimedOptions};
use shardsim::partition::SpmdProgram;
use shardsim::scenario::options::{describe_perturbations, timed_options};
use shardsim::scenario::spec::RunSpec;
use shardsim::topology::Topology;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OnOom {
    /// Stop at the first out-of-memory report.
    Stop,
    /// Report every allocation that does not fit and go on.
    Continue,
}

#[derive(Debug, Args)]
pub struct TimedArgs {
    /// Time the program on this topology (preset name such as dgx-h100, or a .toml file).
    #[arg(long)]
    pub topology: Option<String>,
    /// Join N nodes of the topology (same as --set nodes=N).
    #[arg(long)]
    pub nodes: Option<u32>,
    /// Override a topology field, e.g. --set nvlink.bandwidth=900GB/s;
    /// --set collective.chooser=model makes `auto` pick by our own estimate (nccl, the default, takes NCCL's
    /// algorithm and protocol where its model covers the machine, nccl-algo its algorithm only; model | nccl | nccl-algo);
    /// --set collective.nccl_version=2.19 names the NCCL release the run used (2.19 | 2.21 | 2.23; 2.21's
    /// tables where not given; 2.19 also cuts trees across nodes in its smaller chunks).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// A tuner table (NCCL's example tuner plugin's CSV rows: collective,
    /// min_bytes, max_bytes, algorithm, protocol, channels, nNodes, nRanks)
    /// whose first matching row overrides `auto` (same as --set
    /// collective.tuner_file=FILE).
    #[arg(long, value_name = "FILE.csv")]
    pub tuner: Option<PathBuf>,
    /// Write trace.json (Chrome trace events), events.csv and summary.json here.
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Seed of jitter and straggler draws [default: 0].
    #[arg(long)]
    pub seed: Option<u64>,
    /// Random spread of every step's duration (0.05: up to +-5%).
    #[arg(long)]
    pub jitter: Option<f64>,
    /// A device whose compute is slowed by a factor: DEVICE:FACTOR (repeatable).
    #[arg(long, value_name = "DEVICE:FACTOR")]
    pub straggler: Vec<String>,
    /// What to do when an allocation exceeds a memory scope's capacity [default: stop].
    #[arg(long, value_enum)]
    pub on_oom: Option<OnOom>,
    /// Roofline parameters (TOML: [model] compute_efficiency, memory_efficiency, launch_us).
    #[arg(long)]
    pub roofline: Option<PathBuf>,
    /// A link fault FROM->TO@TIME (fails) or FROM->TO@TIME:FRACTION (degrades),
    /// e.g. n0.gpu3->n0.nvswitch@20us; repeatable.
    #[arg(long, value_name = "FROM->TO@TIME[:FRACTION]")]
    pub link_fault: Vec<String>,
    /// COUNT devices, drawn from --seed, whose compute is slowed by FACTOR
    /// (added to --straggler), e.g. 2:1.5.
    #[arg(long, value_name = "COUNT:FACTOR")]
    pub random_stragglers: Option<String>,
    /// COUNT link failures, links and times (in [0, WINDOW)) drawn from
    /// --seed (added to --link-fault), e.g. 2@50us.
    #[arg(long, value_name = "COUNT@WINDOW")]
    pub random_link_failures: Option<String>,
    /// Simulate every device on its own instead of one device per class of
    /// devices with identical timelines (the results are the same, byte for
    /// byte; slower; for checking that).
    #[arg(long)]
    pub no_symmetry: bool,
    /// Iterations assumed for while loops whose bound is data-dependent
    /// (loops with static bounds, as scan and fori_loop give, use theirs).
    #[arg(long, value_name = "N")]
    pub trip_count: Option<u64>,
}

impl TimedArgs {
    /// The perturbations as a scenario's `[run]` section, so `exec` and
    /// `run` parse them with the same code ([`timed_options`]).
    fn run_spec(&self) -> RunSpec {
        RunSpec {
            seed: self.seed.unwrap_or(0),
            jitter: self.jitter,
            stragglers: self.straggler.clone(),
            random_stragglers: self.random_stragglers.clone(),
            link_faults: self.link_fault.clone(),
            random_link_failures: self.random_link_failures.clone(),
            numerics: false,
            continue_on_oom: self.on_oom == Some(OnOom::Continue),
        }
    }

    fn options(&self, topo: &Topology, devices: u64) -> anyhow::Result<TimedOptions> {
        let mut opts = timed_options(&self.run_spec(), topo, devices)?;
        opts.trip_count = self.trip_count;
        opts.per_device = self.no_symmetry;
        if let Some(p) = &self.roofline {
            opts.roofline = super::output::read_roofline(p)?;
        }
        Ok(opts)
    }
}

/// What `exec --topology` ran on and what it gave: the run's context
/// (nodes, overrides, mesh, seed, perturbations) and the timing summary,
/// flattened so `summary.json` keeps the timing fields at the top level.
#[derive(Debug, Serialize)]
pub struct TimedSummary {
    pub nodes: Option<u32>,
    /// Every `--set` override applied, `key=value`.
    pub overrides: Vec<String>,
    /// The program's mesh in Shardy's syntax.
    pub mesh: String,
    pub seed: u64,
    pub perturbations: Vec<String>,
    #[serde(flatten)]
    pub timing: report::Summary,
}

impl TimedSummary {
    /// The text `exec` prints: perturbations, the run's context, the timing.
    pub fn to_text(&self) -> String {
        let mut text: String = self
            .perturbations
            .iter()
            .map(|p| p.clone() + "\n")
            .collect();
        text += &format!(
            "mesh {}, overrides: {}\n",
            self.mesh,
            if self.overrides.is_empty() {
                "none".to_string()
            } else {
                self.overrides.join(" ")
            }
        );
        text + &report::to_text(&self.timing)
    }
}

/// Write the trace files into `dir`.
fn write_trace(
    dir: &Path,
    t: &ClassTimeline,
    topo: &Topology,
    summary: &TimedSummary,
) -> anyhow::Result<()> {
    crate::cli::output::create_out_dir(dir, "--trace")?;
    let full = t.expand();
    let files = [
        ("trace.json", trace::chrome_trace(&full, topo)),
        ("events.csv", trace::events_csv(&full)),
        (
            "summary.json",
            serde_json::to_string_pretty(summary)? + "\n",
        ),
    ];
    let mut set = shardsim::base::files::OutputSet::new();
    for (name, text) in files {
        set.write(&dir.join(name), text.as_bytes())?;
    }
    Ok(set.commit()?)
}

/// Refuse option combinations that cannot work, before any work is done.
pub fn check_args(args: &TimedArgs) -> anyhow::Result<()> {
    if args.topology.is_some() {
        if let Some(dir) = &args.trace {
            super::output::check_out_dir(dir, "--trace")?;
        }
        return Ok(());
    }
    // Without a topology nothing is timed: a timing flag would do nothing.
    let given = [
        ("--nodes", args.nodes.is_some()),
        ("--set", !args.set.is_empty()),
        ("--tuner", args.tuner.is_some()),
        ("--trace", args.trace.is_some()),
        ("--seed", args.seed.is_some()),
        ("--jitter", args.jitter.is_some()),
        ("--straggler", !args.straggler.is_empty()),
        ("--on-oom", args.on_oom.is_some()),
        ("--roofline", args.roofline.is_some()),
        ("--link-fault", !args.link_fault.is_empty()),
        ("--random-stragglers", args.random_stragglers.is_some()),
        (
            "--random-link-failures",
            args.random_link_failures.is_some(),
        ),
        ("--no-symmetry", args.no_symmetry),
        ("--trip-count", args.trip_count.is_some()),
    ];
    if let Some((flag, _)) = given.iter().find(|(_, on)| *on) {
        bail!("{flag} needs --topology (it changes the timed run, and without a topology nothing is timed)");
    }
    Ok(())
}

/// Time `program` when `--topology` was given; its summary, else None.
pub fn run(program: &SpmdProgram, args: &TimedArgs) -> anyhow::Result<Option<TimedSummary>> {
    check_args(args)?;
    let Some(name) = &args.topology else {
        return Ok(None);
    };
    let set = super::output::with_tuner(&args.set, args.tuner.as_deref())?;
    let topo = super::output::load_topology(name, args.nodes, &set)?;
    let (mesh, devices) = (program.num_devices(), u64::from(topo.num_devices()));
    if mesh != devices {
        // A smaller mesh would leave devices idle without saying so.
        bail!(
            "the mesh has {mesh} devices but {name}{} has {devices}: \
             change the mesh or --nodes so that they match",
            args.nodes
                .map_or(String::new(), |n| format!(" x {n} nodes"))
        );
    }
    let opts = args.options(&topo, program.num_devices())?;
    let perturbations = describe_perturbations(&opts, &topo);
    let bar = super::progress::TimedBar::new("timed run");
    let opts = TimedOptions {
        progress: Some(bar.hook()),
        ..opts
    };
    // A failed run still says what it drew, so a seeded failure can be reproduced.
    let t = run_timed_classes(program, &topo, &opts).map_err(|e| {
        if perturbations.is_empty() {
            anyhow::Error::from(e)
        } else {
            anyhow::anyhow!("{e} (perturbations: {})", perturbations.join("; "))
        }
    })?;
    drop(bar);
    let summary = TimedSummary {
        nodes: args.nodes,
        overrides: set.iter().map(|s| s.trim().to_string()).collect(),
        mesh: program.mesh.to_string(),
        seed: args.seed.unwrap_or(0),
        perturbations,
        timing: report::summarize_classes(&t, &topo),
    };
    if let Some(dir) = &args.trace {
        write_trace(dir, &t, &topo, &summary)?;
    }
    Ok(Some(summary))
}
