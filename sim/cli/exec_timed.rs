//! The timed part of `shardsim exec`: `--topology NAME` runs the partitioned
//! program on the topology's virtual devices in the discrete-event engine,
//! prints the summary and, with `--trace DIR`, writes `trace.json` (Chrome
//! trace events, for Perfetto), `events.csv` and `summary.json`.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use clap::{Args, ValueEnum};

use shardsim::engine::log::write_atomically;
use shardsim::engine::perturb::draw_link_failures;
use shardsim::engine::{FaultKind, Jitter, LinkFault, Stragglers, Time};
use shardsim::exec::timed::{
    parse_roofline, report, run_timed_classes, trace, ClassTimeline, OomPolicy, TimedOptions,
};
use shardsim::partition::SpmdProgram;
use shardsim::topology::{Duration, Topology};

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
    /// Override a topology field, e.g. --set nvlink.bandwidth=900GB/s.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Write trace.json (Chrome trace events), events.csv and summary.json here.
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Seed of jitter and straggler draws.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Random spread of every step's duration (0.05: up to +-5%).
    #[arg(long)]
    pub jitter: Option<f64>,
    /// A device whose compute is slowed by a factor: DEVICE:FACTOR (repeatable).
    #[arg(long, value_name = "DEVICE:FACTOR")]
    pub straggler: Vec<String>,
    /// What to do when an allocation exceeds a memory scope's capacity.
    #[arg(long, value_enum, default_value_t = OnOom::Stop)]
    pub on_oom: OnOom,
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
    /// Iterations assumed for while loops whose bound is data-dependent
    /// (loops with static bounds, as scan and fori_loop give, use theirs).
    #[arg(long, value_name = "N")]
    pub trip_count: Option<u64>,
}

/// Split `text` at `sep` into a count and the rest, for `flag`'s error messages.
fn count_and<'a>(
    flag: &str,
    text: &'a str,
    sep: char,
    example: &str,
) -> anyhow::Result<(usize, &'a str)> {
    let Some((n, rest)) = text.split_once(sep) else {
        bail!("--{flag} {text}: expected {example}");
    };
    let n = n
        .trim()
        .parse()
        .with_context(|| format!("--{flag} {text}: bad count"))?;
    Ok((n, rest.trim()))
}

/// Parse `FROM->TO@TIME[:FRACTION]` against `topo`.
fn parse_fault(text: &str, topo: &Topology) -> anyhow::Result<LinkFault> {
    let bad = |why: &str| anyhow::anyhow!("--link-fault {text}: {why}");
    let (link, rest) = text
        .split_once('@')
        .ok_or_else(|| bad("expected FROM->TO@TIME[:FRACTION], e.g. n0.gpu3->n0.nvswitch@20us"))?;
    let (from, to) = link
        .split_once("->")
        .ok_or_else(|| bad("expected FROM->TO before @"))?;
    let (time, fraction) = match rest.split_once(':') {
        Some((t, f)) => (t, Some(f)),
        None => (rest, None),
    };
    let component = |name: &str| {
        topo.by_name(name.trim())
            .ok_or_else(|| bad(&format!("no component named {}", name.trim())))
    };
    let (a, b) = (component(from)?, component(to)?);
    let id = topo
        .out_links(a)
        .into_iter()
        .find(|&l| topo.link(l).to == b)
        .ok_or_else(|| bad("no link between these components"))?;
    let at = Duration::parse(time.trim()).map_err(|e| bad(&e.to_string()))?;
    let kind = match fraction {
        None => FaultKind::Fail,
        Some(f) => FaultKind::Degrade(
            f.trim()
                .parse()
                .map_err(|_| bad("the fraction must be a number in (0, 1]"))?,
        ),
    };
    let fault = LinkFault {
        link: id.0 as usize,
        at: Time(at.ps()),
        kind,
    };
    fault.validate().map_err(|e| bad(&e.to_string()))?;
    Ok(fault)
}

impl TimedArgs {
    fn options(&self, topo: &Topology, devices: u64) -> anyhow::Result<TimedOptions> {
        let mut opts = TimedOptions {
            seed: self.seed,
            on_oom: match self.on_oom {
                OnOom::Stop => OomPolicy::Stop,
                OnOom::Continue => OomPolicy::Continue,
            },
            trip_count: self.trip_count,
            ..TimedOptions::default()
        };
        if let Some(j) = self.jitter {
            opts.jitter = Some(Jitter::new(j)?);
        }
        let mut stragglers = Stragglers::new();
        for s in &self.straggler {
            let Some((d, f)) = s.split_once(':') else {
                bail!("--straggler {s}: expected DEVICE:FACTOR, e.g. 3:1.5");
            };
            let d: u64 = d
                .trim()
                .parse()
                .with_context(|| format!("--straggler {s}: bad device id"))?;
            let f: f64 = f
                .trim()
                .parse()
                .with_context(|| format!("--straggler {s}: bad factor"))?;
            stragglers.insert(d, f)?;
        }
        if let Some(text) = &self.random_stragglers {
            let (count, f) = count_and("random-stragglers", text, ':', "COUNT:FACTOR, e.g. 2:1.5")?;
            let f: f64 = f
                .parse()
                .with_context(|| format!("--random-stragglers {text}: bad factor"))?;
            for (d, f) in Stragglers::draw(self.seed, devices, count, f)?.iter() {
                stragglers.insert(d, f)?;
            }
        }
        opts.stragglers = stragglers;
        opts.faults = self
            .link_fault
            .iter()
            .map(|f| parse_fault(f, topo))
            .collect::<anyhow::Result<_>>()?;
        if let Some(text) = &self.random_link_failures {
            let example = "COUNT@WINDOW, e.g. 2@50us";
            let (count, window) = count_and("random-link-failures", text, '@', example)?;
            let window = Duration::parse(window)
                .map_err(|e| anyhow::anyhow!("--random-link-failures {text}: {e}"))?;
            let links = topo.links().len();
            opts.faults.extend(draw_link_failures(
                self.seed,
                links,
                count,
                Time(window.ps()),
            ));
        }
        if let Some(p) = &self.roofline {
            let text = std::fs::read_to_string(p)
                .with_context(|| format!("cannot read {}", p.display()))?;
            opts.roofline =
                parse_roofline(&text).map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))?;
        }
        Ok(opts)
    }
}

/// Write the trace files into `dir`.
fn write_trace(dir: &Path, t: &ClassTimeline, topo: &Topology) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let summary = report::summarize_classes(t, topo);
    let full = t.expand();
    let files = [
        ("trace.json", trace::chrome_trace(&full, topo)),
        ("events.csv", trace::events_csv(&full)),
        (
            "summary.json",
            serde_json::to_string_pretty(&summary)? + "\n",
        ),
    ];
    for (name, text) in files {
        let p = dir.join(name);
        write_atomically(&p, text.as_bytes())
            .with_context(|| format!("cannot write {}", p.display()))?;
    }
    Ok(())
}

/// Refuse option combinations that cannot work, before any work is done.
pub fn check_args(args: &TimedArgs) -> anyhow::Result<()> {
    if args.topology.is_none() && args.trace.is_some() {
        bail!("--trace needs --topology");
    }
    Ok(())
}

/// Time `program` when `--topology` was given; the summary text, else None.
pub fn run(program: &SpmdProgram, args: &TimedArgs) -> anyhow::Result<Option<String>> {
    check_args(args)?;
    let Some(name) = &args.topology else {
        return Ok(None);
    };
    let topo = super::output::load_topology(name, args.nodes, &args.set)?;
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
    let t = run_timed_classes(program, &topo, &opts)?;
    if let Some(dir) = &args.trace {
        write_trace(dir, &t, &topo)?;
    }
    let mut text = perturbations(&opts, &topo);
    text += &report::to_text(&report::summarize_classes(&t, &topo));
    Ok(Some(text))
}

/// The stragglers and link faults a run applies, one line each (drawn ones
/// included, so a seeded run says what it drew).
fn perturbations(opts: &TimedOptions, topo: &Topology) -> String {
    let mut text = String::new();
    for (d, f) in opts.stragglers.iter() {
        text += &format!("straggler: device {d} computes {f}x slower\n");
    }
    for f in &opts.faults {
        let link = topo.link(shardsim::topology::LinkId(f.link as u32));
        let name = |c| topo.component(c).name.clone();
        let what = match f.kind {
            FaultKind::Fail => "fails".to_string(),
            FaultKind::Degrade(x) => format!("degrades to {x} of its bandwidth"),
        };
        text += &format!(
            "link fault: {} -> {} {what} at {:.3} us\n",
            name(link.from),
            name(link.to),
            f.at.0 as f64 / 1e6
        );
    }
    text
}
