//! `shardsim topology list|show|route`: presets, a topology's components,
//! links and figures, and the route between two components.

use std::fmt::Write as _;

use anyhow::{bail, Context};
use clap::{Args, Subcommand, ValueEnum};
use serde::Serialize;

use shardsim::topology::{self, ComponentId, Topology};

#[derive(Debug, Args)]
pub struct TopologyArgs {
    #[command(subcommand)]
    command: TopologyCommand,
}

#[derive(Debug, Subcommand)]
enum TopologyCommand {
    /// List the presets (each is a TOML file under topologies/).
    List {
        #[arg(long, value_enum, default_value_t = ShowFormat::Text)]
        format: ShowFormat,
    },
    /// Show a preset or topology file: components, links, bisection bandwidth,
    /// what each GPU reaches at what bandwidth, memory scopes.
    Show {
        #[command(flatten)]
        source: SourceArgs,
        #[arg(long, value_enum, default_value_t = ShowFormat::Text)]
        format: ShowFormat,
    },
    /// The route between two components (names like n0.gpu0, or device ids).
    Route {
        #[command(flatten)]
        source: SourceArgs,
        /// From: a component name or a device id.
        a: String,
        /// To: a component name or a device id.
        b: String,
        /// Flow id (picks among equal paths on fat trees).
        #[arg(long, default_value_t = 0)]
        flow: u64,
        #[arg(long, value_enum, default_value_t = ShowFormat::Text)]
        format: ShowFormat,
    },
}

#[derive(Debug, Args)]
struct SourceArgs {
    /// Preset name (dgx-h100, ring:8, tpu-v4:4x4x4, ...) or path to a .toml file.
    name: String,
    /// Join N nodes through a rail-optimized fat tree (same as --set nodes=N).
    #[arg(long)]
    nodes: Option<u32>,
    /// Override a field for a what-if study, e.g. --set nvlink.bandwidth=900GB/s.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ShowFormat {
    Text,
    Json,
    /// Graphviz (show only).
    Dot,
}

impl SourceArgs {
    fn load(&self) -> anyhow::Result<Topology> {
        super::output::load_topology(&self.name, self.nodes, &self.set)
    }
}

pub fn run(args: TopologyArgs) -> anyhow::Result<()> {
    match args.command {
        TopologyCommand::List { format } => list(format),
        TopologyCommand::Show { source, format } => show(&source.load()?, format),
        TopologyCommand::Route {
            source,
            a,
            b,
            flow,
            format,
        } => route(&source.load()?, &a, &b, flow, format),
    }
}

#[derive(Serialize)]
struct PresetRow {
    name: String,
    devices: u32,
    description: String,
}

/// Write `text` to stdout (a full disk or closed pipe is an error, exit 2).
fn emit(text: &str) -> anyhow::Result<()> {
    super::output::print_out(text)
}

fn list(format: ShowFormat) -> anyhow::Result<()> {
    let mut out = String::new();
    let rows: Vec<PresetRow> = topology::preset_names()
        .into_iter()
        .map(|name| {
            let t = topology::load(name, &[]).with_context(|| format!("preset {name}"))?;
            Ok(PresetRow {
                name: name.to_string(),
                devices: t.num_devices(),
                description: t.description.clone(),
            })
        })
        .collect::<anyhow::Result<_>>()?;
    match format {
        ShowFormat::Json => writeln!(out, "{}", serde_json::to_string_pretty(&rows)?)?,
        ShowFormat::Text => {
            for r in rows {
                writeln!(
                    out,
                    "{:<10} {:>4} devices  {}",
                    r.name, r.devices, r.description
                )?;
            }
            writeln!(out, "\nParameters: NAME:DIMS (ring:16, tpu-v4:4x4x8, mesh2d:4x4, pcie-box:4), --nodes N, --set key=value")?;
        }
        ShowFormat::Dot => bail!("--format dot applies to `topology show`"),
    }
    emit(&out)
}

#[derive(Serialize)]
struct ShowReport<'a> {
    name: &'a str,
    description: &'a str,
    sources: &'a [String],
    routing: &'a topology::RoutingPolicy,
    /// The fat tree joining the nodes, where there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    fat_tree: Option<topology::FatTree>,
    summary: topology::Summary,
    components: &'a [topology::Component],
    links: &'a [topology::Link],
}

fn show(t: &Topology, format: ShowFormat) -> anyhow::Result<()> {
    let summary = t.summary()?;
    let mut out = String::new();
    match format {
        ShowFormat::Json => {
            let r = ShowReport {
                name: &t.name,
                description: &t.description,
                sources: &t.sources,
                routing: t.routing(),
                fat_tree: t.fat_tree(),
                summary,
                components: t.components(),
                links: t.links(),
            };
            writeln!(out, "{}", serde_json::to_string_pretty(&r)?)?;
        }
        ShowFormat::Dot => write!(out, "{}", dot(t))?,
        ShowFormat::Text => print_text(&mut out, t, &summary)?,
    }
    emit(&out)
}

/// A fat tree's shape in words: levels, pods, switches per layer, taper.
fn fat_tree_line(tree: &topology::FatTree) -> String {
    let leaves = format!(
        "{} leaves per rail x {} rails",
        tree.leaves_per_rail, tree.rails
    );
    let taper = match (tree.oversubscription, tree.core_oversubscription) {
        (1.0, 1.0) => "non-blocking".to_string(),
        (leaf, 1.0) => format!("leaves tapered {leaf}:1"),
        (1.0, core) => format!(
            "pods tapered {core}:1 to the cores ({} of {} core uplinks per spine)",
            tree.core_uplinks,
            tree.radix / 2
        ),
        (leaf, core) => format!(
            "leaves tapered {leaf}:1, pods {core}:1 to the cores ({} of {} core uplinks per spine)",
            tree.core_uplinks,
            tree.radix / 2
        ),
    };
    match tree.pods {
        None => format!(
            "rail-optimized fat tree, two levels: {leaves} under {} spines; {taper}",
            tree.spines
        ),
        Some(p) => format!(
            "rail-optimized fat tree, three levels: {leaves} in {} pods ({} leaves per rail and {} spines each) under {} cores{}; {taper}",
            p.count,
            p.per_rail,
            tree.spines,
            tree.cores,
            if tree.planes > 1 {
                format!(" in {} rail planes", tree.planes)
            } else {
                String::new()
            }
        ),
    }
}

fn print_text(out: &mut String, t: &Topology, s: &topology::Summary) -> std::fmt::Result {
    writeln!(out, "{}: {}", t.name, t.description)?;
    let routing = match t.routing() {
        topology::RoutingPolicy::ShortestPath { ecmp, spines } => {
            use topology::NetworkRouting::*;
            format!(
                "least cost (a link costs 1e15/bandwidth), ties by {}",
                match (*ecmp, *spines) {
                    (true, Adaptive) => "flow hash (ECMP); adaptive routing over the upper switches (one switch stands for each layer: the spines, of each pod where there are cores above them, and the cores)",
                    (true, Destination) => "the destination's node from a leaf to a spine and from a spine to a core (static routing, D-mod-k), else flow hash (ECMP)",
                    (true, Ecmp) => "flow hash (ECMP)",
                    (false, _) => "lowest link id",
                }
            )
        }
        topology::RoutingPolicy::DimensionOrder { dims, wrap } => format!(
            "dimension order over {} ({})",
            dims.iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join("x"),
            if *wrap { "torus" } else { "no wrap-around" }
        ),
    };
    writeln!(out, "routing: {routing}")?;
    if let Some(tree) = t.fat_tree() {
        writeln!(out, "network: {}", fat_tree_line(&tree))?;
    }
    let counts: Vec<String> = s
        .component_counts
        .iter()
        .map(|(k, v)| format!("{v} {k}"))
        .collect();
    writeln!(out, "components: {}", counts.join(", "))?;
    let links: Vec<String> = s
        .link_counts
        .iter()
        .map(|(k, v)| format!("{} {k}", v / 2))
        .collect();
    writeln!(out, "physical links: {}", links.join(", "))?;
    writeln!(
        out,
        "bisection bandwidth (devices 0..{} -> {}..{}, one direction): {}",
        s.devices / 2,
        s.devices / 2,
        s.devices,
        t_bw(s.bisection)
    )?;
    if let Some(d0) = t.device(0) {
        let c = t.component(d0);
        writeln!(out, "\ndevice: {} x {}", s.devices, c.model)?;
        let flops: Vec<String> = c.flops.iter().map(|(d, f)| format!("{d} {f}")).collect();
        writeln!(out, "  peak: {}", flops.join(", "))?;
        writeln!(out, "  memory scopes:")?;
        for m in &c.memory {
            writeln!(
                out,
                "    {:<7} {:>9}  {:>11}  at {}",
                m.scope,
                m.capacity.to_string(),
                m.bandwidth.to_string(),
                t.component(m.location).name
            )?;
        }
        writeln!(out, "  {} reaches:", c.name)?;
        for n in &s.neighbours {
            let path: Vec<String> = n.path_classes.iter().map(|c| c.to_string()).collect();
            writeln!(
                out,
                "    {:<8} {:>4} peers  {:>2} hops  {:>10}/dir  latency {:<8} via {}",
                n.class.to_string(),
                n.peers,
                n.hops,
                t_bw(n.bandwidth),
                n.latency.to_string(),
                path.join("+")
            )?;
        }
    }
    writeln!(
        out,
        "\nlinks (each both ways; L<id> is the first direction):"
    )?;
    for l in t.links().iter().filter(|l| l.id.0 < l.reverse.0) {
        writeln!(
            out,
            "  {:<6} {:<14} <-> {:<14} {:<7} {:>10} x{:<3} {}{}",
            l.id.to_string(),
            t.component(l.from).name,
            t.component(l.to).name,
            l.class.to_string(),
            t_bw(l.bandwidth),
            l.lanes,
            l.latency,
            if l.full_duplex { "" } else { "  half-duplex" }
        )?;
    }
    if !t.sources.is_empty() {
        writeln!(out, "\nsources:")?;
        for src in &t.sources {
            writeln!(out, "  - {src}")?;
        }
    }
    Ok(())
}

/// Bandwidth as bytes, with the bit rate for network-style figures.
fn t_bw(b: topology::Bandwidth) -> String {
    b.to_string()
}

fn dot(t: &Topology) -> String {
    let mut out = format!(
        "graph \"{}\" {{\n  node [shape=box, fontsize=10];\n",
        t.name
    );
    for c in t.components() {
        let shape = match c.kind {
            topology::ComponentKind::Device { .. } => "box",
            topology::ComponentKind::Host => "house",
            _ => "ellipse",
        };
        out.push_str(&format!(
            "  c{} [label=\"{}\", shape={shape}];\n",
            c.id.0, c.name
        ));
    }
    for l in t.links().iter().filter(|l| l.id.0 < l.reverse.0) {
        out.push_str(&format!(
            "  c{} -- c{} [label=\"{} {}\"];\n",
            l.from.0, l.to.0, l.class, l.bandwidth
        ));
    }
    out.push_str("}\n");
    out
}

fn component(t: &Topology, text: &str) -> anyhow::Result<ComponentId> {
    if let Some(c) = t.by_name(text) {
        return Ok(c);
    }
    if let Ok(i) = text.parse::<u32>() {
        return t.device(i).with_context(|| {
            format!(
                "no device {i} (the topology has devices 0..{})",
                t.num_devices()
            )
        });
    }
    let examples: Vec<&str> = t
        .components()
        .iter()
        .take(4)
        .map(|c| c.name.as_str())
        .collect();
    bail!(
        "no component \"{text}\" (expected a device id or a name such as {})",
        examples.join(", ")
    )
}

#[derive(Serialize)]
struct Hop {
    link: u32,
    from: String,
    to: String,
    class: topology::LinkClass,
    bandwidth: String,
    bandwidth_bytes_per_s: u64,
    latency: String,
    latency_ps: u64,
}

fn route(t: &Topology, a: &str, b: &str, flow: u64, format: ShowFormat) -> anyhow::Result<()> {
    let (src, dst) = (component(t, a)?, component(t, b)?);
    let path = t.route(src, dst, flow)?;
    let hops: Vec<Hop> = path
        .iter()
        .map(|&id| {
            let l = t.link(id);
            Hop {
                link: id.0,
                from: t.component(l.from).name.clone(),
                to: t.component(l.to).name.clone(),
                class: l.class,
                bandwidth: l.bandwidth.to_string(),
                bandwidth_bytes_per_s: l.bandwidth_bytes_per_s(),
                latency: l.latency.to_string(),
                latency_ps: l.latency_ps(),
            }
        })
        .collect();
    let latency = topology::Duration(path.iter().map(|&l| t.link(l).latency_ps()).sum());
    let bottleneck = path.iter().map(|&l| t.link(l).bandwidth).min();
    let mut out = String::new();
    match format {
        ShowFormat::Json => writeln!(out, "{}", serde_json::to_string_pretty(&hops)?)?,
        ShowFormat::Text => {
            writeln!(
                out,
                "{} -> {}: {} hops, latency {}, bottleneck {}",
                t.component(src).name,
                t.component(dst).name,
                hops.len(),
                latency,
                bottleneck
                    .map(|b| b.to_string())
                    .unwrap_or_else(|| "-".into())
            )?;
            for h in hops {
                writeln!(
                    out,
                    "  L{:<5} {:<14} -> {:<14} {:<7} {:>10} {}",
                    h.link,
                    h.from,
                    h.to,
                    h.class.to_string(),
                    h.bandwidth,
                    h.latency
                )?;
            }
        }
        ShowFormat::Dot => bail!("--format dot applies to `topology show`"),
    }
    emit(&out)
}
