//! The topology file format (TOML, version 1). Every preset under
//! `topologies/` is such a file; users copy and edit them. Unknown fields are
//! errors (`deny_unknown_fields`), quantities are strings with units.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::base::DType;

use super::units::{Bandwidth, ByteSize, Duration, FlopRate};

/// The only format version this build reads.
pub const FORMAT_VERSION: u32 = 1;

/// A whole topology file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopologyFile {
    /// Format version; must be 1.
    pub format: u32,
    /// Short name (the preset name).
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// Where the figures come from.
    #[serde(default)]
    pub sources: Vec<String>,
    /// How the components are laid out (see [`Layout`]).
    pub layout: Layout,
    /// Devices per dimension: `[gpus]` for node layouts, `[n]` for ring and
    /// switch, `[rows, cols]` for mesh2d, `[x, y, z]` for a torus. Ignored by `explicit`.
    #[serde(default)]
    pub dims: Vec<u32>,
    /// Number of nodes joined by a rail-optimized two-level fat tree (node layouts).
    #[serde(default = "one")]
    pub nodes: u32,
    /// The accelerator every device component is.
    pub device: DeviceSpec,
    /// Device-to-device links of GPUs (NVLink): to the NVSwitch, or between neighbours.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvlink: Option<FabricSpec>,
    /// Device-to-device links of TPUs (inter-chip interconnect).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ici: Option<FabricSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcie: Option<PcieSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<HostSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nic: Option<NicSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkSpec>,
    /// Explicit layout only: the components.
    #[serde(default, rename = "component", skip_serializing_if = "Vec::is_empty")]
    pub components: Vec<ComponentSpec>,
    /// Explicit layout only: the links (each full-duplex link gives two directed links).
    #[serde(default, rename = "link", skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<LinkSpec>,
    /// This machine's own collective calibration (the format of
    /// `sim/collective/calibration.toml`, one table per device model), as
    /// `shardsim calibrate --measured` writes it; read by the collectives
    /// layer in place of the compiled-in table. Kept as TOML here because the
    /// topology part sits below the collectives that interpret it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collective: Option<toml::Table>,
}

/// The `[collective]` key naming how `auto` chooses (`"model"`, `"nccl"`
/// or `"nccl-algo"`, read by the collectives layer); checked when a file is
/// built.
pub const CHOOSER_KEY: &str = "chooser";
/// Its values.
pub const CHOOSERS: [&str; 3] = ["model", "nccl", "nccl-algo"];

/// The `[collective]` key naming the NCCL release a run used (`"2.19"`,
/// `"2.21"` or `"2.23"`, a patch release such as `"2.19.3"` too; read by
/// the collectives layer: NCCL's model's tables, NCCL 2.19's tree chunks);
/// checked when a file is built.
pub const NCCL_VERSION_KEY: &str = "nccl_version";
/// The `[collective]` key that enables CollNet (NCCL_COLLNET_ENABLE): a
/// boolean, false by default as in NCCL; true only where the network's
/// switches reduce (`network.in_switch_reduction`, SHARP). Checked when a
/// file is built.
pub const COLLNET_KEY: &str = "collnet";

/// Is CollNet enabled in a `[collective]` table?
pub fn collnet_enabled(collective: Option<&toml::Table>) -> bool {
    collective
        .and_then(|t| t.get(COLLNET_KEY))
        .and_then(toml::Value::as_bool)
        .unwrap_or(false)
}

/// The releases whose tables the collectives layer has.
pub const NCCL_VERSIONS: [&str; 3] = ["2.19", "2.21", "2.23"];

/// The release (one of [`NCCL_VERSIONS`]) a `nccl_version` value names: a
/// string `"2.19"` or `"2.19.3"`, or the number `2.19` (`--set
/// collective.nccl_version=2.19` reads as one); `None` for anything else.
pub fn nccl_release(v: &toml::Value) -> Option<&'static str> {
    let text = match v {
        toml::Value::String(s) => s.trim().to_string(),
        toml::Value::Float(f) => format!("{f}"),
        _ => return None,
    };
    let mut parts = text.split('.');
    let release = match (parts.next(), parts.next()) {
        (Some(major), Some(minor)) => format!("{major}.{minor}"),
        _ => return None,
    };
    // At most a patch number after the release.
    let patch_ok = match (parts.next(), parts.next()) {
        (None, _) => true,
        (Some(p), None) => !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()),
        _ => false,
    };
    NCCL_VERSIONS
        .iter()
        .copied()
        .find(|r| *r == release)
        .filter(|_| patch_ok)
}

fn one() -> u32 {
    1
}
fn one_lane() -> u32 {
    1
}
fn yes() -> bool {
    true
}

/// How components are generated from the parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Layout {
    /// GPUs on one NVSwitch per node, PCIe switches to the host and NICs, rail-aligned NICs.
    NvswitchNode,
    /// GPUs behind PCIe switches under one host, no NVLink.
    PcieNode,
    /// Devices in a bidirectional ring (1-D torus).
    Ring,
    /// Devices on one switch.
    Switch,
    /// Devices in a 2-D grid without wrap-around.
    Mesh2d,
    /// Devices in a torus of any rank, wrap-around in every dimension.
    Torus,
    /// Components and links listed in the file.
    Explicit,
}

/// The kind of accelerator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeviceKind {
    Gpu,
    Tpu,
    Cpu,
}

/// One accelerator model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceSpec {
    pub kind: DeviceKind,
    pub model: String,
    /// Peak dense FLOP/s per element type.
    pub flops: BTreeMap<DType, FlopRate>,
    /// Memory scopes on the device (`global` = HBM, `shared` = on-chip).
    pub memory: Vec<MemorySpec>,
}

/// A memory scope: name, capacity, bandwidth.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemorySpec {
    pub scope: String,
    pub capacity: ByteSize,
    pub bandwidth: Bandwidth,
}

/// Device-to-device link bundle.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FabricSpec {
    /// Bandwidth of one link bundle per direction (all lanes together).
    pub bandwidth: Bandwidth,
    #[serde(default = "one_lane")]
    pub lanes: u32,
    pub latency: Duration,
    /// The switch reduces in the network (NVLS / SHARP); switch layouts only.
    #[serde(default)]
    pub in_switch_reduction: bool,
}

/// PCIe links and switches.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PcieSpec {
    /// Per direction of one x`lanes` link.
    pub bandwidth: Bandwidth,
    #[serde(default = "sixteen")]
    pub lanes: u32,
    pub latency: Duration,
    /// GPUs (and as many NICs) under each PCIe switch.
    pub devices_per_switch: u32,
}

fn sixteen() -> u32 {
    16
}

/// The host (CPUs and their DRAM), one per node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostSpec {
    pub model: String,
    pub memory: ByteSize,
    pub memory_bandwidth: Bandwidth,
    #[serde(default)]
    pub flops: BTreeMap<DType, FlopRate>,
}

/// Network interfaces of a node, each its own port on its own rail: by
/// default one per GPU; `count` NICs spread evenly over the GPUs (16 on 8
/// GPUs: two per GPU; 4 on 8: each shared by two GPUs), or `gpus` naming
/// the local GPU (or GPUs) each NIC serves, in NIC order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NicSpec {
    pub model: String,
    /// One NIC's speed (per direction).
    pub bandwidth: Bandwidth,
    /// Latency of the NIC-to-leaf link.
    pub latency: Duration,
    /// The latency the network plugin reports to NCCL
    /// (`ncclNetProperties_t.latency`, NCCL's `latencyInter`), which NCCL's
    /// tuning model adds to each network step (twice with Simple): only the
    /// `nccl` / `nccl-algo` choosers read it, no transfer waits for it.
    /// aws-ofi-nccl reports 75 us on p4d, p4de and p5; absent: InfiniBand's 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reported_latency: Option<Duration>,
    /// NICs per node (default: one per GPU, or as many as `gpus` lists).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u32>,
    /// Per NIC, the local GPU index it serves or a list of them (a NIC two
    /// GPUs share): `[0, 0, 1, 1, ...]` or `[[0, 1], [2, 3], ...]`. Every GPU
    /// must have as many NICs as every other, every NIC as many GPUs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpus: Vec<toml::Spanned<toml::Value>>,
}

/// The fat tree joining nodes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkSpec {
    /// Ports per switch; a leaf uses half down, half up (non-blocking).
    pub switch_radix: u32,
    /// Latency of a leaf-to-spine link.
    pub latency: Duration,
    /// Switches reduce in the network (SHARP).
    #[serde(default)]
    pub in_switch_reduction: bool,
    /// How routes spread over the spines (`adaptive` by default).
    #[serde(default, skip_serializing_if = "NetworkRouting::is_default")]
    pub routing: NetworkRouting,
    /// A leaf's downlinks per uplink (`2`: a 2:1 taper, half the uplinks
    /// and spines); 1, the default, is non-blocking.
    #[serde(default = "non_blocking", skip_serializing_if = "is_non_blocking")]
    pub oversubscription: f64,
    /// A three-level tree's taper between the pods and the cores: a pod
    /// spine's leaf downlinks per core uplink (`7`: Meta's 1:7 above its
    /// 3,072-GPU pods). 1, the default, keeps as many core uplinks as leaf
    /// downlinks; anything else needs three levels.
    #[serde(default = "non_blocking", skip_serializing_if = "is_non_blocking")]
    pub core_oversubscription: f64,
}

fn non_blocking() -> f64 {
    1.0
}

fn is_non_blocking(x: &f64) -> bool {
    *x == 1.0
}

/// How a fat tree spreads routes over its spines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NetworkRouting {
    /// Adaptive routing: switches send each packet up the least-loaded of
    /// the spines (InfiniBand with AR, which OpenSM's default `ar_updn`
    /// engine configures and NCCL turns on for IB by default, `net_ib.cc`
    /// at v2.21.5-1; EFA's SRD sprays packets over many paths alike). The
    /// spine layer is built as one switch whose link to each leaf carries
    /// the bandwidth of all the leaf's uplinks: flows between leaves share
    /// the whole layer and never collide on one spine.
    #[default]
    Adaptive,
    /// InfiniBand's static routing (adaptive routing off; OpenSM's
    /// fat-tree and D-mod-k engines): the spine is the destination's port
    /// on its leaf modulo the spines, so each spine-to-leaf link carries
    /// one destination's traffic; flows from one leaf to destinations of
    /// the same port meet on its uplink.
    Destination,
    /// Ethernet's per-flow hash (ECMP, as RoCE fabrics route): flows to
    /// one destination may meet on a spine's down-link.
    Ecmp,
}

impl NetworkRouting {
    fn is_default(&self) -> bool {
        *self == NetworkRouting::default()
    }
}

/// A component of an explicit layout.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ComponentSpec {
    pub name: String,
    pub kind: ComponentKindSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<u32>,
    /// Switches only: reduces in the network.
    #[serde(default)]
    pub in_switch_reduction: bool,
    /// Whether traffic may pass through it (default: devices no, everything else yes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forwards: Option<bool>,
}

/// Component kinds as written in files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ComponentKindSpec {
    /// An accelerator with the `[device]` figures.
    Device,
    Host,
    Nvswitch,
    PcieSwitch,
    Nic,
    NetworkSwitch,
}

/// A link of an explicit layout.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkSpec {
    pub from: toml::Spanned<String>,
    pub to: toml::Spanned<String>,
    pub class: LinkClassSpec,
    pub bandwidth: Bandwidth,
    #[serde(default = "one_lane")]
    pub lanes: u32,
    pub latency: Duration,
    #[serde(default = "yes")]
    pub full_duplex: bool,
}

/// Link classes as written in files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LinkClassSpec {
    Nvlink,
    Ici,
    Pcie,
    Network,
}
