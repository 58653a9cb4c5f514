//! `shardsim collective`: nccl-tests in simulation. One row per message size
//! with the time and nccl-tests' algbw (S / t) and busbw (algbw x the
//! operation's bus factor), the algorithm and the protocol used.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::{Args, ValueEnum};
use serde::Serialize;

use shardsim::base::DType;
use shardsim::collective::{
    self, sizes::parse_sizes, Algorithm, Calibration, CollectiveOp, Group, Protocol,
};
use shardsim::engine::log::write_atomically;
use shardsim::report::collective_plot::{measured_curve, BusBandwidth, Curve};
use shardsim::report::html::{page, table, Block};
use shardsim::topology::Topology;

use super::output::{load_topology, write_output};
use super::progress::Progress;

/// Output format of the sweep.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum SweepFormat {
    /// A table for people (the run's context first).
    #[default]
    #[value(alias = "table")]
    Text,
    /// nccl-tests-like rows, one per size.
    Csv,
    /// One document: the run's context (topology, overrides, ranks) and the rows.
    Json,
}

/// Collective kinds: the names timed runs and scenarios print
/// (`all_reduce`...) and nccl-tests' spellings, which are accepted too.
const OPS: [(&str, &str); 9] = [
    ("all_reduce", "allreduce"),
    ("all_gather", "allgather"),
    ("reduce_scatter", "reducescatter"),
    ("all_to_all", "alltoall"),
    ("collective_permute", "sendrecv"),
    ("broadcast", "broadcast"),
    ("reduce", "reduce"),
    ("scatter", "scatter"),
    ("gather", "gather"),
];

/// `--op`'s value as (the name outputs use, the collectives layer's name).
pub(super) fn op_names(text: &str) -> anyhow::Result<(&'static str, &'static str)> {
    let t = text.trim().to_ascii_lowercase().replace('-', "_");
    OPS.iter()
        .find(|(name, nccl)| t == *name || t == *nccl)
        .copied()
        .ok_or_else(|| {
            let names: Vec<&str> = OPS.iter().map(|o| o.0).collect();
            anyhow::anyhow!(
                "--op {text}: unknown operation (expected {}; nccl-tests' allreduce, sendrecv... also work)",
                names.join(", ")
            )
        })
}

#[derive(Debug, Args)]
pub struct CollectiveArgs {
    /// Topology preset or file (dgx-a100, dgx-h100, ...).
    #[arg(long)]
    pub topology: String,
    /// Join N nodes (same as --set nodes=N).
    #[arg(long)]
    pub nodes: Option<u32>,
    /// Override a topology field, e.g. --set nvlink.bandwidth=900GB/s (repeatable);
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
    /// all_reduce, all_gather, reduce_scatter, all_to_all, collective_permute
    /// (the ring shift r -> r+1, nccl-tests' sendrecv), broadcast, reduce,
    /// scatter, gather; nccl-tests' spellings (allreduce, ...) work too.
    #[arg(long, default_value = "all_reduce")]
    pub op: String,
    /// ring, tree, nvls, nvls-tree, halving-doubling, recursive-doubling, direct, pairwise, hierarchical, collnet
    /// (where the network reduces), auto.
    #[arg(long, default_value = "auto")]
    pub algo: String,
    /// LL, LL128, Simple or auto.
    #[arg(long, default_value = "auto")]
    pub proto: String,
    /// Ranks: N (the first N devices), a list of devices in rank order
    /// (`0,8,16,24`, ranges `0-3` allowed), or `local:K` (device K of every
    /// node: the mesh group with one GPU per node). Default: all devices.
    #[arg(long)]
    pub ranks: Option<String>,
    /// START:END:xF, or a comma-separated list (8B, 1MiB, 1048576, ...).
    #[arg(long, default_value = "8B:128MiB:x2")]
    pub sizes: String,
    /// Element type: f32, f16, bf16, f64, i32.
    #[arg(long, default_value = "f32")]
    pub dtype: String,
    #[arg(long, value_enum, default_value_t)]
    pub format: SweepFormat,
    /// Also write DIR/results.csv, DIR/summary.json, the bus bandwidth plot
    /// DIR/busbw.svg and .png, and DIR/report.html.
    #[arg(short, long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// A measured nccl-tests curve to overlay on the plot (CSV with
    /// size_bytes and busbw_gbs columns, `#` comments); repeatable; needs --out.
    #[arg(long, value_name = "FILE.csv")]
    pub measured: Vec<PathBuf>,
}

/// One row of the sweep.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub size_bytes: u64,
    pub count: u64,
    pub time_us: f64,
    pub algbw_gbs: f64,
    pub busbw_gbs: f64,
    pub algo: String,
    pub protocol: String,
}

/// Everything a sweep needs, parsed and checked.
pub struct Sweep {
    pub topo: Topology,
    pub group: Group,
    pub op: CollectiveOp,
    /// The operation's name as outputs print it (`all_reduce`).
    pub op_name: &'static str,
    pub algo: Option<Algorithm>,
    pub proto: Option<Protocol>,
    pub sizes: Vec<u64>,
    pub dtype: DType,
    pub cal: Calibration,
}

impl CollectiveArgs {
    pub fn sweep(&self) -> anyhow::Result<Sweep> {
        if !self.measured.is_empty() && self.out.is_none() {
            anyhow::bail!("--measured overlays the plot that --out DIR draws: give --out too");
        }
        let set = super::output::with_tuner(&self.set, self.tuner.as_deref())?;
        let topo = load_topology(&self.topology, self.nodes, &set)?;
        let group = match &self.ranks {
            None => Group::first(&topo, topo.num_devices())?,
            Some(text) => {
                let devices =
                    parse_ranks(text, &topo).map_err(|e| anyhow::anyhow!("--ranks {text}: {e}"))?;
                Group::new(&topo, devices).map_err(|e| anyhow::anyhow!("--ranks {text}: {e}"))?
            }
        };
        let n = group.len() as u32;
        let (op_name, nccl_name) = op_names(&self.op)?;
        let op = CollectiveOp::parse(nccl_name, n as usize)?;
        let algo = match self.algo.as_str() {
            "auto" => None,
            a => Some(a.parse::<Algorithm>()?),
        };
        let proto = match self.proto.as_str() {
            "auto" => None,
            p => Some(p.parse::<Protocol>()?),
        };
        // An --algo / --proto the run's settings disable: said once, before any size.
        collective::Policy::of(&topo)?.check_explicit(&op, algo, proto)?;
        let dtype: DType = self
            .dtype
            .parse()
            .map_err(|e: String| anyhow::anyhow!("--dtype: {e}"))?;
        if !matches!(
            dtype,
            DType::F32 | DType::F16 | DType::BF16 | DType::F64 | DType::I32
        ) {
            anyhow::bail!(
                "--dtype {}: expected f32, f16, bf16, f64 or i32",
                self.dtype
            );
        }
        let sizes = parse_sizes(&self.sizes).map_err(crate::cli::output::sizes_error)?;
        let cal = Calibration::for_topology(&topo, &group.device_model(&topo))?;
        Ok(Sweep {
            topo,
            group,
            op,
            op_name,
            algo,
            proto,
            sizes,
            dtype,
            cal,
        })
    }

    /// What ran, with the rows: the summary `--format json` prints and
    /// `--out` writes.
    fn summary(&self, sweep: &Sweep, rows: Vec<Row>) -> Summary {
        let name = |d: &u32| {
            sweep.topo.device(*d).map_or(format!("device {d}"), |c| {
                sweep.topo.component(c).name.clone()
            })
        };
        let mut notes = Vec::new();
        let network_reduces = sweep
            .topo
            .file()
            .and_then(|f| f.network.as_ref())
            .is_some_and(|n| n.in_switch_reduction);
        let collnet = shardsim::topology::collnet_enabled(sweep.topo.collective_calibration());
        if network_reduces && !collnet && sweep.group.nodes(&sweep.topo).len() > 1 {
            // A setting that changes nothing must say so: NCCL reaches SHARP
            // through CollNet only when NCCL_COLLNET_ENABLE is set.
            notes.push(
                "the network's switches reduce (network.in_switch_reduction, SHARP), which NCCL uses through \
                 CollNet only where it is enabled (NCCL_COLLNET_ENABLE): `--set collective.collnet=true` lets \
                 auto pick it (`--algo collnet` forces it)"
                    .to_string(),
            );
        }
        Summary {
            notes,
            topology: self.topology.clone(),
            nodes: self.nodes,
            overrides: self.set.iter().map(|s| s.trim().to_string()).collect(),
            op: sweep.op_name.to_string(),
            algo: self.algo.clone(),
            protocol: self.proto.clone(),
            dtype: self.dtype.clone(),
            ranks: sweep.group.len(),
            devices: sweep.group.devices.iter().map(name).collect(),
            rows,
        }
    }
}

/// A collective sweep as run: the context (topology, overrides, operation,
/// the ranks' devices) and one row per size.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub topology: String,
    pub nodes: Option<u32>,
    /// Every `--set` override applied, `key=value`.
    pub overrides: Vec<String>,
    pub op: String,
    /// As asked (`auto` or a name); each row says which ran.
    pub algo: String,
    pub protocol: String,
    pub dtype: String,
    pub ranks: usize,
    /// The ranks' devices, rank order.
    pub devices: Vec<String>,
    /// What the run could not take into account, one line each.
    pub notes: Vec<String>,
    pub rows: Vec<Row>,
}

impl Summary {
    /// One line naming what ran.
    fn context(&self) -> String {
        format!(
            "{} over {} ranks ({}{}) of {}{}, overrides: {}, dtype {}, algo {}, protocol {}",
            self.op,
            self.ranks,
            self.devices.first().map_or("", String::as_str),
            if self.ranks > 1 {
                format!("..{}", self.devices.last().map_or("", String::as_str))
            } else {
                String::new()
            },
            self.topology,
            self.nodes
                .map_or(String::new(), |n| format!(" x {n} nodes")),
            if self.overrides.is_empty() {
                "none".to_string()
            } else {
                self.overrides.join(" ")
            },
            self.dtype,
            self.algo,
            self.protocol
        )
    }
}

impl Sweep {
    /// Time every size (nccl-tests rounds a size down to whole elements).
    pub fn rows(&self) -> anyhow::Result<Vec<Row>> {
        let eb = self.dtype.size_bytes();
        let n = self.group.len();
        let mut rows = Vec::with_capacity(self.sizes.len());
        let mut bar = Progress::new(self.sizes.len() as u64, "sizes");
        // Walks of earlier sizes bound later ones (the same choices).
        let mut cache = collective::PathCache::new();
        for &size in &self.sizes {
            bar.message(format!("{size} B"));
            let count = size / eb;
            let bytes = count * eb;
            let r = collective::time_collective_cached(
                &self.topo,
                &self.group,
                &self.op,
                count,
                eb,
                &self.cal,
                self.algo,
                self.proto,
                &mut cache,
            )
            .with_context(|| format!("size {size}"))?;
            let secs = r.time.ps() as f64 * 1e-12;
            let algbw = if secs > 0.0 {
                bytes as f64 / secs / 1e9
            } else {
                0.0
            };
            rows.push(Row {
                size_bytes: bytes,
                count,
                time_us: secs * 1e6,
                algbw_gbs: algbw,
                busbw_gbs: algbw * self.op.busbw_factor(n),
                algo: r.algo.name().to_string(),
                protocol: r.proto.name().to_string(),
            });
            bar.inc();
        }
        Ok(rows)
    }
}

fn csv_rows(rows: &[Row]) -> String {
    let mut out = String::from("size_bytes,count,time_us,algbw_gbs,busbw_gbs,algo,protocol\n");
    for r in rows {
        out += &format!(
            "{},{},{:.3},{:.3},{:.3},{},{}\n",
            r.size_bytes, r.count, r.time_us, r.algbw_gbs, r.busbw_gbs, r.algo, r.protocol
        );
    }
    out
}

/// Render a sweep in `format`.
pub fn render(s: &Summary, format: SweepFormat) -> anyhow::Result<String> {
    use std::fmt::Write;
    Ok(match format {
        SweepFormat::Json => serde_json::to_string_pretty(s)? + "\n",
        SweepFormat::Csv => csv_rows(&s.rows),
        SweepFormat::Text => {
            let mut out = s.context() + "\n";
            for n in &s.notes {
                writeln!(out, "note: {n}")?;
            }
            writeln!(
                out,
                "{:>14} {:>12} {:>12} {:>10} {:>10}  {:<18} protocol",
                "size(B)", "count", "time(us)", "algbw", "busbw", "algo"
            )?;
            for r in &s.rows {
                writeln!(
                    out,
                    "{:>14} {:>12} {:>12.2} {:>10.2} {:>10.2}  {:<18} {}",
                    r.size_bytes, r.count, r.time_us, r.algbw_gbs, r.busbw_gbs, r.algo, r.protocol
                )?;
            }
            out
        }
    })
}

/// Write `dir/results.csv`, `dir/summary.json` and `dir/busbw.{svg,png}`
/// (the simulated curve and each measured one); returns the files written.
fn write_dir(dir: &Path, s: &Summary, measured: Vec<Curve>) -> anyhow::Result<Vec<String>> {
    crate::cli::output::create_out_dir(dir, "--out")?;
    let mut curves = vec![(
        format!("simulated ({} ranks, {})", s.ranks, s.topology),
        s.rows
            .iter()
            .map(|r| (r.size_bytes as f64, r.busbw_gbs))
            .collect(),
    )];
    curves.extend(measured);
    for (name, text) in [
        ("results.csv", csv_rows(&s.rows)),
        ("summary.json", serde_json::to_string_pretty(s)? + "\n"),
    ] {
        let p = dir.join(name);
        write_atomically(&p, text.as_bytes())
            .with_context(|| format!("cannot write {}", p.display()))?;
    }
    let plot = BusBandwidth {
        title: format!(
            "{} bus bandwidth on {}{}",
            s.op,
            s.topology,
            s.nodes.map_or(String::new(), |n| format!(" x {n} nodes"))
        ),
        curves,
    };
    let svg = shardsim::report::render(&plot, dir, "busbw")?;
    let rows: Vec<Vec<String>> = s
        .rows
        .iter()
        .map(|r| {
            vec![
                r.size_bytes.to_string(),
                format!("{:.2}", r.time_us),
                format!("{:.2}", r.algbw_gbs),
                format!("{:.2}", r.busbw_gbs),
                r.algo.clone(),
                r.protocol.clone(),
            ]
        })
        .collect();
    let context = s
        .notes
        .iter()
        .fold(s.context(), |c, n| format!("{c}. Note: {n}"));
    let blocks = [
        Block::Paragraph(context),
        Block::Svg(svg, plot.title.clone()),
        Block::Table(table(
            &[
                "size (B)",
                "time (us)",
                "algbw (GB/s)",
                "busbw (GB/s)",
                "algo",
                "protocol",
            ],
            &rows,
        )),
    ];
    let p = dir.join("report.html");
    write_atomically(&p, page("shardsim collective", &blocks).as_bytes())
        .with_context(|| format!("cannot write {}", p.display()))?;
    Ok([
        "results.csv",
        "summary.json",
        "busbw.svg",
        "busbw.png",
        "report.html",
    ]
    .iter()
    .map(|f| dir.join(f).display().to_string())
    .collect())
}

pub fn run(args: CollectiveArgs) -> anyhow::Result<()> {
    if let Some(dir) = &args.out {
        super::output::check_out_dir(dir, "--out")?;
    }
    let sweep = args.sweep()?;
    // Bad measured files are refused before the sweep runs.
    let measured = args
        .measured
        .iter()
        .map(|m| measured_curve(m))
        .collect::<Result<Vec<_>, _>>()?;
    let rows = sweep.rows()?;
    let summary = args.summary(&sweep, rows);
    write_output(None, &render(&summary, args.format)?)?;
    if let Some(dir) = &args.out {
        let files = write_dir(dir, &summary, measured)?;
        eprintln!("wrote {}", files.join(", "));
    }
    Ok(())
}

/// The devices `--ranks` names, in rank order (see [`CollectiveArgs::ranks`]).
fn parse_ranks(text: &str, topo: &Topology) -> Result<Vec<u32>, String> {
    let count = topo.num_devices();
    let exists = |d: u64| -> Result<u32, String> {
        u32::try_from(d)
            .ok()
            .filter(|&d| d < count)
            .ok_or_else(|| format!("device {d} does not exist (the topology has {count} devices)"))
    };
    let int = |t: &str| -> Result<u64, String> {
        t.trim()
            .parse::<u64>()
            .map_err(|_| format!("expected a device number, got \"{}\"", t.trim()))
    };
    if let Some(k) = text.strip_prefix("local:") {
        let k = int(k)?;
        let mut by_node: std::collections::BTreeMap<u32, Vec<u32>> = Default::default();
        for d in 0..count {
            let node = topo.device(d).and_then(|c| topo.component(c).node);
            let Some(node) = node else {
                return Err(format!("device {d} is in no node: local:K needs nodes"));
            };
            by_node.entry(node).or_default().push(d);
        }
        return by_node
            .values()
            .map(|devs| {
                devs.get(k as usize).copied().ok_or_else(|| {
                    format!(
                        "a node has {} devices, so local rank {k} does not exist",
                        devs.len()
                    )
                })
            })
            .collect();
    }
    if !text.contains(',') && !text.contains('-') {
        let n = int(text)?;
        if n == 0 || n > u64::from(count) {
            return Err(format!("the topology has {count} devices"));
        }
        return Ok((0..n as u32).collect());
    }
    let mut out = Vec::new();
    for item in text.split(',') {
        match item.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (exists(int(a)?)?, exists(int(b)?)?);
                if b < a {
                    return Err(format!("range {a}-{b} runs backwards"));
                }
                out.extend(a..=b);
            }
            None => out.push(exists(int(item)?)?),
        }
    }
    Ok(out)
}
