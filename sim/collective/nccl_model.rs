//! NCCL's own tuning model as a chooser: the (algorithm, protocol) NCCL
//! would pick for a collective, from the graphs its topology search would
//! find (`src/graph/search.cc`), its bandwidth/latency table
//! (`src/graph/tuning.cc`, `ncclTopoTuneModel`) and its per-call timing
//! (`ncclTopoGetAlgoTime`, `topoGetAlgoInfo` in `src/enqueue.cc`), as read
//! at NCCL 2.19.3, 2.21.5 and 2.23.4. Written from the model's description,
//! not from its code.
//!
//! What follows NCCL and what approximates it:
//! - The machine is NCCL's view of an NVSwitch node: every GPU's NVLinks to
//!   the switch as one link of `nvlinks` x NCCL's per-link figure (20 GB/s,
//!   20.6 on Hopper from 2.20), each GPU's path to its NIC as the smaller of
//!   NCCL's PCIe figure (lanes x 0.75 GB/s x 2^(gen-3)) and the NIC's speed
//!   (Gb/s / 8), with as many NICs per GPU as the layout attaches (two on
//!   OCI BM.GPU4.8), or one NIC shared by several GPUs. Other layouts get
//!   no NCCL choice.
//! - The search is not run link by link: for a speed, the channels that fit
//!   are counted in closed form (per NIC: its speed over the channel's
//!   speed, as NCCL subtracts a channel's speed from its NIC; per GPU's
//!   NVLink: rings and chains whose ends rotate over the GPUs, so a GPU
//!   forwards on (m - 1)/m of the channels across nodes and on all of a
//!   one-node ring; NVLS: every channel through every GPU plus its head
//!   role). The passes are NCCL's: start at the fastest speed of the
//!   architecture's speed array under the GPU-to-NIC (or GPU-to-GPU) path,
//!   keep the best channels x speed, step down while the next speed is above
//!   0.49 of the best; channel duplication; pass 2 raises a ring's speed,
//!   a tree's intra speed (up to twice the inter speed) and NVLS's inter
//!   speed while the search still succeeds with as many channels.
//! - Trees are NCCL's balanced tree where a second GPU shares the NIC's
//!   PCIe switch (`pcie.devices_per_switch` >= 2), else on Hopper the plain
//!   tree NCCL falls back to (its bandwidth x 0.85 in the table).
//! - The network latency the net plugin reports (`latencyInter`) is the
//!   topology's `nic.reported_latency` (aws-ofi-nccl's 75 us on the AWS
//!   presets), else 0, as InfiniBand's plugin reports; the host's vendor
//!   comes from `host.model` (AMD: the ring's per-step network overhead is
//!   2 us, else 1 us).
//! - CollNet is not modelled (no CollNet algorithm in the simulator), so
//!   `collNetSupport` is 0: NVLS runs on one node only, NVLS-tree across
//!   nodes, as NCCL's enable rules say.
//! - Ties: the first (algorithm, protocol) in NCCL's order (tree, ring,
//!   NVLS, NVLS-tree; LL, LL128, Simple) with the smallest time wins.
//! - The release is the one the topology's `[collective] nccl_version`
//!   names ([`NcclVersion::of`], 2.21 where none is named). Under 2.19 the
//!   tuner's trees across nodes also take 2.19's tree/Simple chunk rule
//!   ([`NcclSystem::tree_chunk_bytes`], [`tree_chunk`]), gone from 2.20.

use crate::topology::Layout;
use crate::topology::Topology;

use super::algorithms::auto_algorithms_on;
use super::kinds::{Algorithm, CollectiveOp, Protocol};
use super::policy::Policy;
use super::timing::Group;
use super::tuner::protocols_for;
use super::CollectiveError;

/// How `auto` picks the (algorithm, protocol) it then times: by the
/// simulator's own estimate (`model`) or by NCCL's tuning model (`nccl`,
/// `nccl-algo`); the topology's `[collective] chooser`
/// (`--set collective.chooser=nccl-algo`), `nccl` where it is not given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Chooser {
    Model,
    /// NCCL's algorithm and protocol.
    Nccl,
    /// NCCL's algorithm, the protocol by the simulator's estimate (whose
    /// protocol calibration is fitted to measured curves, not to NCCL's
    /// protocol model).
    NcclAlgo,
}

impl Chooser {
    /// The default where the topology does not say: NCCL's algorithm and
    /// protocol, which fit the published curves best since LL128 was fitted
    /// where NCCL runs it (session 38; `NcclAlgo` before) and match NCCL's
    /// reported picks on one H100 node (README, "NCCL's tuning model as a
    /// chooser").
    /// For NCCL's NVLS-tree beyond two nodes, and where NCCL's model does not
    /// cover the machine or the group, the default is `model` (see [`pick`];
    /// a named chooser is an error on an uncovered machine instead).
    pub const DEFAULT: Chooser = Chooser::Nccl;

    /// The topology's chooser (its value was checked when it was loaded).
    pub fn of(topo: &Topology) -> Chooser {
        Chooser::named(topo).unwrap_or(Chooser::DEFAULT)
    }

    /// The chooser the topology names, if it names one.
    pub fn named(topo: &Topology) -> Option<Chooser> {
        match topo
            .collective_calibration()
            .and_then(|t| t.get(crate::topology::CHOOSER_KEY))
            .and_then(|v| v.as_str())
        {
            Some("nccl") => Some(Chooser::Nccl),
            Some("nccl-algo") => Some(Chooser::NcclAlgo),
            Some("model") => Some(Chooser::Model),
            _ => None,
        }
    }
}

/// `auto`'s hook: NCCL's pick for `op` of `bytes` on `group` where the
/// topology's chooser is `nccl` or `nccl-algo`, `algo` is not forced and
/// NCCL's model covers the machine; among the simulator's `auto` candidates
/// the run's settings enable (NCCL_ALGO, NCCL_PROTO: NCCL's model skips
/// what they disable) and `proto` if one was asked for. The protocol is
/// None (`proto` as asked) under `nccl-algo`. A machine NCCL's model does
/// not cover is an error under a named `nccl`/`nccl-algo` (the setting
/// would otherwise do nothing); under the default, `model` decides there
/// and where NCCL picks NVLS-tree on more than two nodes. (Within one node
/// too until session 37, while our NVLS paid each chunk's hop in turn and
/// ran below our ring at 16-128 MiB, where NCCL takes it.)
pub(crate) fn pick(
    topo: &Topology,
    group: &Group,
    op: &CollectiveOp,
    bytes: u64,
    algo: Option<Algorithm>,
    proto: Option<Protocol>,
    policy: &Policy,
) -> Result<Option<(Algorithm, Option<Protocol>)>, CollectiveError> {
    let named = Chooser::named(topo);
    let chooser = named.unwrap_or(Chooser::DEFAULT);
    if algo.is_some() || chooser == Chooser::Model {
        return Ok(None);
    }
    let Some(sys) = system_of(topo, group) else {
        if named.is_none() {
            return Ok(None);
        }
        return Err(CollectiveError::Chooser {
            chooser: if chooser == Chooser::Nccl { "nccl" } else { "nccl-algo" },
            why: "NCCL's tuning model here covers groups of equal NVSwitch nodes of V100/A100/H100-class GPUs with their \
                  NVLink, PCIe and (across nodes) NIC described; this topology or group is not one (use chooser = \"model\")"
                .to_string(),
        });
    };
    let ours = auto_algorithms_on(topo, op);
    let allowed = |a: Algorithm, p: Protocol| {
        ours.contains(&a)
            && protocols_for(a).contains(&p)
            && policy.allowed(op, a, p)
            && proto.map_or(true, |q| q == p)
    };
    let Some((a, p, _)) = nccl_choice(&sys, NcclVersion::of(topo), op, bytes, allowed) else {
        return Ok(None);
    };
    // The default leaves NVLS-tree beyond two nodes to `model`: our NVLS-tree
    // is checked against measurements on two nodes only (p5, OCI H100). It
    // was timed far below NCCL's own figure from 16 nodes until it was timed
    // by its period (128 nodes at 8 GiB now 160.8 GB/s, NCCL's ~160); whether
    // to drop this fallback is open (README, "NCCL's tuning model as a
    // chooser").
    if named.is_none() && a == Algorithm::NvlsTree && sys.nodes > 2 {
        return Ok(None);
    }
    Ok(Some((
        a,
        if chooser == Chooser::Nccl {
            Some(p)
        } else {
            proto
        },
    )))
}

/// Which NCCL release's tables (and, for 2.19, its tree chunks).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NcclVersion {
    /// 2.19.x: tree/Simple 28 us per NVLink step, NVLS 23 us, ring/LL at a
    /// quarter of the bus bandwidth across nodes, 2 N network steps per
    /// ring; tree/Simple chunks shrink on smaller messages
    /// ([`NcclSystem::tree_chunk_bytes`]).
    V2_19,
    /// 2.21.x (2.20 for the NVLink figure): NVLS 25 us, ring/LL at half,
    /// Hopper's LL caps raised. The chooser's default.
    V2_21,
    /// 2.23.x: tree/Simple 8.4 us base and 4 us per NVLink step, 2 (N - 1)
    /// network steps per ring allreduce.
    V2_23,
}

impl NcclVersion {
    /// Where a run does not say which release it used: the 2.21 tables, and
    /// chunks of the calibration's `chunk_bytes` (NCCL's Simple step).
    pub const DEFAULT: NcclVersion = NcclVersion::V2_21;

    /// The release the topology's `[collective] nccl_version` names (its
    /// value was checked when it was loaded), else [`Self::DEFAULT`].
    pub fn of(topo: &Topology) -> NcclVersion {
        NcclVersion::named(topo).unwrap_or(NcclVersion::DEFAULT)
    }

    /// The release the topology names, if it names one.
    pub fn named(topo: &Topology) -> Option<NcclVersion> {
        let v = topo
            .collective_calibration()?
            .get(crate::topology::NCCL_VERSION_KEY)?;
        match crate::topology::nccl_release(v)? {
            "2.19" => Some(NcclVersion::V2_19),
            "2.21" => Some(NcclVersion::V2_21),
            "2.23" => Some(NcclVersion::V2_23),
            _ => None,
        }
    }
}

/// NCCL's view of the machine and the communicator.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NcclSystem {
    pub nodes: usize,
    pub gpus_per_node: usize,
    /// Compute capability x 10 (70, 80, 90).
    pub cc: u32,
    /// NVLinks from each GPU to the NVSwitch.
    pub nvlinks: u32,
    /// NCCL's PCIe figure of a GPU's (and NIC's) x16 link, GB/s.
    pub pci_gbs: f64,
    /// One NIC's speed, GB/s (0: none).
    pub nic_gbs: f64,
    /// NICs per GPU (`[nic] count` / `gpus`; 1 where GPUs share NICs).
    pub nics_per_gpu: u32,
    /// GPUs per NIC (1 unless GPUs share NICs, e.g. 4 NICs for 8 GPUs).
    pub gpus_per_nic: u32,
    /// A second GPU shares the NIC's PCIe switch (balanced trees).
    pub shared_pci_switch: bool,
    pub amd_host: bool,
    /// NVLS (NVSwitch multicast and reduction) available.
    pub nvls: bool,
    /// The latency the net plugin reports (`latencyInter`), us: added to
    /// every network step's latency, twice with Simple (0 for InfiniBand).
    pub latency_inter_us: f64,
}

/// The search patterns this model covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pattern {
    Ring,
    BalancedTree,
    Tree,
    Nvls,
}

/// A graph as NCCL's search leaves it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Graph {
    pub pattern: Pattern,
    pub channels: u32,
    pub bw_intra: f64,
    pub bw_inter: f64,
}

/// The ring, tree and NVLS graphs (NVLS-tree uses the NVLS graph).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Graphs {
    pub ring: Graph,
    pub tree: Graph,
    pub nvls: Option<Graph>,
}

/// One entry of NCCL's table: latency (us) and bandwidth (GB/s, algorithm
/// bandwidth; 0 = disabled).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Entry {
    pub algo: Algorithm,
    pub proto: Protocol,
    pub lat_us: f64,
    pub bw_gbs: f64,
}

const MAXCHANNELS: u32 = 32;
const SPEED_INTRA: [f64; 13] = [
    40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0,
];
const SPEED_INTER: [f64; 19] = [
    48.0, 30.0, 28.0, 24.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.4, 1.2,
    0.24, 0.12,
];
const SM90_SPEED_INTRA: [f64; 10] = [60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 6.0, 3.0];
const SM90_SPEED_INTER: [f64; 17] = [
    48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4, 1.2, 0.24,
    0.12,
];

/// Tree correction factors per protocol (LL, LL128, Simple), powers of two
/// from 64 B to 256 MiB (the same table from 2.10 to 2.23).
const TREE_CORRECTION: [[f64; 23]; 3] = [
    [
        1.0, 1.0, 1.0, 1.0, 0.9, 0.8, 0.7, 0.7, 0.7, 0.7, 0.6, 0.5, 0.4, 0.4, 0.5, 0.6, 0.7, 0.8,
        0.9, 1.0, 1.0, 1.0, 1.0,
    ],
    [
        1.0, 1.0, 1.0, 1.0, 1.0, 0.9, 0.8, 0.8, 0.8, 0.7, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6, 0.8, 0.9,
        0.9, 0.9, 0.9, 1.0, 1.0,
    ],
    [
        0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.8, 0.7, 0.6, 0.6, 0.5, 0.5, 0.5, 0.5, 0.6, 0.7, 0.8,
        0.7, 0.7, 0.8, 0.9, 0.9,
    ],
];

fn proto_index(p: Protocol) -> usize {
    match p {
        Protocol::Ll => 0,
        Protocol::Ll128 => 1,
        Protocol::Simple => 2,
    }
}

/// Architecture row of NCCL's per-arch tables: Volta, Ampere, Hopper.
fn arch_index(cc: u32) -> usize {
    if cc >= 90 {
        2
    } else if cc >= 80 {
        1
    } else {
        0
    }
}

/// `floor(x / s)` with a tolerance for NCCL's float subtractions.
fn fit(x: f64, s: f64) -> u32 {
    if s <= 0.0 {
        return 0;
    }
    ((x / s) + 1e-6).floor().max(0.0) as u32
}

impl NcclSystem {
    /// NCCL's bandwidth of a GPU's NVLinks to the switch (GB/s).
    pub fn nvlink_gbs(&self, v: NcclVersion) -> f64 {
        let per_link = if self.cc >= 90 && v != NcclVersion::V2_19 {
            20.6
        } else {
            20.0
        };
        self.nvlinks as f64 * per_link
    }

    fn multi_node(&self) -> bool {
        self.nodes > 1
    }

    /// Bandwidth of a GPU's path to its NIC (NCCL's `maxBw` across nodes).
    fn net_path_gbs(&self) -> f64 {
        self.pci_gbs.min(self.nic_gbs)
    }

    fn speeds(&self) -> &'static [f64] {
        match (self.cc >= 90, self.multi_node()) {
            (true, true) => &SM90_SPEED_INTER,
            (true, false) => &SM90_SPEED_INTRA,
            (false, true) => &SPEED_INTER,
            (false, false) => &SPEED_INTRA,
        }
    }

    /// Channels of `pattern` that fit at these speeds (closed form).
    fn channels_at(&self, v: NcclVersion, pattern: Pattern, intra: f64, inter: f64) -> u32 {
        let m = self.gpus_per_node as f64;
        let nvl = self.nvlink_gbs(v);
        let by_nvlink = match pattern {
            _ if self.gpus_per_node < 2 => MAXCHANNELS,
            // Each channel through every GPU (up and down), and a head's
            // share once more: (c + ceil(c / m)) x speed <= NVLink.
            Pattern::Nvls => (0..=MAXCHANNELS)
                .take_while(|&c| {
                    let heads = (c as f64 / m).ceil();
                    (c as f64 + heads) * intra <= nvl + 1e-6
                })
                .last()
                .unwrap_or(0),
            // A closed ring inside one node: every GPU forwards on every
            // channel.
            Pattern::Ring if !self.multi_node() => fit(nvl, intra),
            // Rings and chains whose ends rotate over the GPUs.
            _ => fit(nvl * m / (m - 1.0), intra),
        };
        if !self.multi_node() {
            return by_nvlink;
        }
        // One channel's speed taken from its NIC and from the GPU's PCIe
        // path: a GPU's channels fit its NICs together and its own PCIe
        // link; a NIC two GPUs share carries the channels of both.
        let by_nic = if self.gpus_per_nic > 1 {
            let nics = (self.gpus_per_node as u32).div_ceil(self.gpus_per_nic);
            fit(self.nic_gbs, inter).min(fit(self.pci_gbs, inter)) * nics
        } else {
            let per_gpu =
                (fit(self.nic_gbs, inter) * self.nics_per_gpu.max(1)).min(fit(self.pci_gbs, inter));
            per_gpu * self.gpus_per_node as u32
        };
        if pattern == Pattern::Nvls {
            // NVLS heads: at most one channel per NIC.
            return by_nvlink.min(by_nic.min(self.gpus_per_node as u32));
        }
        by_nvlink.min(by_nic)
    }

    /// NCCL's graph search for `pattern` with `min..=max` channels.
    fn search(&self, v: NcclVersion, pattern: Pattern, min: u32, max: u32) -> Option<Graph> {
        let speeds = self.speeds();
        let nvl = self.nvlink_gbs(v);
        let m = self.gpus_per_node as f64;
        let max_bw = if self.multi_node() {
            self.net_path_gbs()
        } else {
            nvl
        };
        let mut total_bw = nvl.max(self.pci_gbs);
        if self.gpus_per_node == 1 || pattern != Pattern::Ring {
            total_bw *= m / (m - 1.0).max(1.0);
        }
        let mut i = speeds
            .iter()
            .position(|&s| s <= max_bw && s * min as f64 <= total_bw)
            .unwrap_or(speeds.len() - 1);
        let mut best: Option<Graph> = None;
        // Pass 1: the first speed that fits, then lower ones while they
        // could still be better.
        loop {
            let s = speeds[i];
            let c = self.channels_at(v, pattern, s, s).min(max);
            let mut perfect = false;
            if c >= min && c > 0 {
                let better = match best {
                    None => true,
                    Some(b) if pattern == Pattern::Nvls => {
                        c > b.channels || c as f64 * s > b.channels as f64 * b.bw_inter
                    }
                    Some(b) => c as f64 * s > b.channels as f64 * b.bw_intra,
                };
                if better {
                    best = Some(Graph {
                        pattern,
                        channels: c,
                        bw_intra: s,
                        bw_inter: s,
                    });
                    perfect = c == max;
                }
            }
            if perfect {
                break;
            }
            if let Some(b) = best {
                if b.channels as f64 * b.bw_inter >= total_bw {
                    break;
                }
            }
            let next_ok = match best {
                None => true,
                Some(b) => i + 1 < speeds.len() && speeds[i + 1] / b.bw_inter > 0.49,
            };
            if i + 1 < speeds.len() && next_ok {
                i += 1;
            } else {
                break;
            }
        }
        let mut g = best?;
        // Channel duplication (not NVLS).
        if pattern != Pattern::Nvls
            && g.bw_intra >= 25.0
            && !(self.cc > 80 && g.bw_intra < 50.0 && g.channels > 4)
        {
            let dup = (g.channels * 2).min(max);
            let div = dup.div_ceil(g.channels) as f64;
            g = Graph {
                channels: dup,
                bw_intra: g.bw_intra / div,
                bw_inter: g.bw_inter / div,
                ..g
            };
        }
        // Pass 2: raise speeds with as many channels.
        let mut i = speeds
            .iter()
            .position(|&s| s <= g.bw_inter)
            .unwrap_or(speeds.len() - 1);
        while i > 0 {
            let s = speeds[i - 1];
            match pattern {
                Pattern::Ring => {
                    // Every higher speed is tried; the fastest that fits wins.
                    if self.channels_at(v, pattern, s, s) >= g.channels {
                        g.bw_intra = s;
                        g.bw_inter = s;
                    }
                }
                Pattern::Nvls => {
                    if g.bw_inter >= 2.0 * g.bw_intra
                        || self.channels_at(v, pattern, g.bw_intra, s) < g.channels
                        || s > max_bw
                    {
                        break;
                    }
                    g.bw_inter = s;
                }
                Pattern::Tree | Pattern::BalancedTree => {
                    if g.bw_intra >= 2.0 * g.bw_inter
                        || self.channels_at(v, pattern, s, g.bw_inter) < g.channels
                    {
                        break;
                    }
                    g.bw_intra = s;
                }
            }
            i -= 1;
        }
        Some(g)
    }

    /// The graphs NCCL's search would find.
    pub fn graphs(&self, v: NcclVersion) -> Option<Graphs> {
        let ring = self.search(v, Pattern::Ring, 1, MAXCHANNELS / 2)?;
        let tree_pattern = if self.shared_pci_switch || self.cc < 90 || !self.multi_node() {
            Pattern::BalancedTree
        } else {
            Pattern::Tree
        };
        let tree = self.search(v, tree_pattern, ring.channels, ring.channels)?;
        let nvls = if self.nvls && self.cc >= 90 {
            let n = self.gpus_per_node as u32;
            let (min, max) = if self.multi_node() { (1, n) } else { (n, n) };
            self.search(v, Pattern::Nvls, min, max)
        } else {
            None
        };
        Some(Graphs { ring, tree, nvls })
    }

    /// NCCL's latency/bandwidth table for `op` (only the algorithms NCCL
    /// runs for it, enabled ones with a bandwidth above 0).
    pub fn table(&self, v: NcclVersion, g: &Graphs, op: &CollectiveOp) -> Vec<Entry> {
        let n = (self.nodes * self.gpus_per_node) as f64;
        let nodes = self.nodes as f64;
        let m = self.gpus_per_node as f64;
        let (nsteps, ninter) = match op {
            CollectiveOp::AllReduce => {
                let inter = match (self.multi_node(), v) {
                    (false, _) => 0.0,
                    (true, NcclVersion::V2_23) => 2.0 * (nodes - 1.0),
                    (true, _) => 2.0 * nodes,
                };
                (2.0 * (n - 1.0), inter)
            }
            CollectiveOp::AllGather | CollectiveOp::ReduceScatter => (n - 1.0, nodes - 1.0),
            CollectiveOp::Broadcast { .. } | CollectiveOp::Reduce { .. } => (n, nodes),
            _ => return Vec::new(),
        };
        let arch = arch_index(self.cc);
        let index2 = if self.nodes <= 2 { self.nodes - 1 } else { 2 };
        let ll_row = if self.nodes == 1 {
            arch
        } else if self.amd_host {
            1
        } else {
            0
        };
        let ll_max: f64 = match (ll_row, v) {
            (2, NcclVersion::V2_19) => [87.7, 22.5, 19.0][index2],
            (2, _) => [141.0, 45.0, 35.0][index2],
            (1, _) => [87.7, 22.5, 19.0][index2],
            _ => [39.0, 39.0, 20.4][index2],
        };
        let ring_ll128_cap = [[20.0; 3], [20.0; 3], [36.7; 3]][arch][index2];
        let tree_ll128_cap = [[20.0; 3], [20.0; 3], [36.7, 36.7, 29.0]][arch][index2];
        let tree_cap = [[26.5, 18.5, 10.0], [24.0, 23.6, 17.8], [38.7, 41.4, 36.0]][arch][index2];
        let nvls_lat = if v == NcclVersion::V2_19 { 23.0 } else { 25.0 };
        let tree_simple_intra = if v == NcclVersion::V2_23 { 4.0 } else { 28.0 };
        let tree_simple_net = if v == NcclVersion::V2_23 { 14.0 } else { 28.0 };
        let tree_simple_base = if v == NcclVersion::V2_23 { 8.4 } else { 0.0 };
        // hwLat[NVLink or NET][algo][proto] and baseLat, NCCL's figures.
        let hw = |net: bool, a: Algorithm, p: Protocol| -> f64 {
            let i = proto_index(p);
            match (net, a) {
                (false, Algorithm::Tree) => [0.6, 1.25, tree_simple_intra][i],
                (false, Algorithm::Ring) => [0.6, 1.9, 3.4][i],
                (false, Algorithm::CollNet) => [0.0, 0.0, 3.7][i],
                (false, _) => [0.0, 0.0, nvls_lat][i],
                (true, Algorithm::Tree) => [5.0, 8.5, tree_simple_net][i],
                (true, Algorithm::Ring) => [2.7, 4.0, 14.0][i],
                (true, Algorithm::Nvls) => [0.0, 0.0, 18.0][i],
                (true, Algorithm::CollNet) => [0.0, 0.0, 31.0][i],
                (true, _) => [0.0, 0.0, 14.0][i],
            }
        };
        let base = |a: Algorithm, p: Protocol| -> f64 {
            match a {
                Algorithm::Tree => [6.8, 14.0, tree_simple_base][proto_index(p)],
                Algorithm::Ring => [6.6, 14.0, 8.4][proto_index(p)],
                _ => 0.0,
            }
        };
        let ppn = m;
        let ll128_ok = matches!(self.cc, 70 | 80 | 90);
        let mut out = Vec::new();
        let algos: &[Algorithm] = match op {
            CollectiveOp::AllReduce => &[
                Algorithm::Tree,
                Algorithm::Ring,
                Algorithm::CollNet,
                Algorithm::Nvls,
                Algorithm::NvlsTree,
            ],
            CollectiveOp::AllGather | CollectiveOp::ReduceScatter => {
                &[Algorithm::Ring, Algorithm::CollNet, Algorithm::Nvls]
            }
            _ => &[Algorithm::Ring],
        };
        for &a in algos {
            // CollNet's own graph (NCCL searches one per pattern) is
            // stood for by the ring's channels and rates (its allreduce).
            let graph = match a {
                Algorithm::Tree => g.tree,
                Algorithm::Ring | Algorithm::CollNet => g.ring,
                _ => match g.nvls {
                    Some(x) => x,
                    None => continue,
                },
            };
            // Enable rules: NVLS-tree needs several nodes, NVLS one node
            // without CollNet; NVLS all-gather/reduce-scatter one node.
            if a == Algorithm::NvlsTree && !self.multi_node() {
                continue;
            }
            if a == Algorithm::Nvls && self.multi_node() {
                continue;
            }
            // CollNet across nodes only; its all-gather and reduce-scatter
            // with a NIC per rank.
            if a == Algorithm::CollNet && (!self.multi_node() || self.nic_gbs <= 0.0) {
                continue;
            }
            for &p in &Protocol::ALL {
                if matches!(
                    a,
                    Algorithm::Nvls | Algorithm::NvlsTree | Algorithm::CollNet
                ) && p != Protocol::Simple
                {
                    continue;
                }
                if p == Protocol::Ll128 && !ll128_ok {
                    continue;
                }
                let ch = graph.channels as f64;
                let mut bw = if self.nodes <= 2 {
                    graph.bw_intra
                } else {
                    graph.bw_inter
                };
                if a == Algorithm::Nvls {
                    bw = graph.bw_intra.min(graph.bw_inter);
                }
                if a == Algorithm::NvlsTree {
                    let inter = if self.nodes <= 2 {
                        graph.bw_inter
                    } else {
                        graph.bw_inter / 2.0
                    };
                    bw = graph.bw_intra.min(inter);
                }
                // CollNet: allreduce at the graph's intra-node rate;
                // all-gather and reduce-scatter at one channel's rate of
                // its own graph (not searched here), taken as a NIC's
                // speed, one NIC per rank.
                let collnet_split = a == Algorithm::CollNet
                    && matches!(op, CollectiveOp::AllGather | CollectiveOp::ReduceScatter);
                if a == Algorithm::CollNet {
                    bw = if collnet_split {
                        self.nic_gbs
                    } else {
                        graph.bw_intra
                    };
                }
                let mut bus = ch * bw;
                // CollNet Direct (tuning.cc): all-gather and reduce-scatter
                // at `ppn` times that rate with a corrective 0.95 at one
                // rank per node down to 0.85 at eight; allreduce through the
                // heads, slower where ranks outnumber channels, and 0.85 on
                // Hopper.
                if collnet_split {
                    let w = (ppn - 1.0) / 7.0;
                    bus = ppn * bw * (w * 0.85 + (1.0 - w) * 0.95);
                } else if a == Algorithm::CollNet {
                    let mut factor = ppn / ch;
                    factor -= (factor - 1.0) / 2.0;
                    bus /= factor;
                    if self.cc >= 90 {
                        bus *= 0.85;
                    }
                }
                if a == Algorithm::Ring && p == Protocol::Ll {
                    let f = if v == NcclVersion::V2_19 {
                        if self.multi_node()
                            || matches!(op, CollectiveOp::AllReduce | CollectiveOp::Reduce { .. })
                        {
                            0.25
                        } else {
                            1.0 / 3.0
                        }
                    } else {
                        0.5
                    };
                    bus = ll_max.min(bus * f);
                }
                if a == Algorithm::Ring && p == Protocol::Ll128 {
                    let f = if ppn < 2.0 { 0.7 } else { 0.92 };
                    bus = (bus * f).min(ch * ring_ll128_cap);
                }
                if a == Algorithm::Tree {
                    bus = (bus * 0.92).min(ch * tree_cap);
                    if p == Protocol::Ll {
                        bus = (bus / 3.8).min(ll_max);
                    }
                    if p == Protocol::Ll128 {
                        let f = if self.nodes == 1 {
                            7.0 / 9.0
                        } else {
                            120.0 / 128.0
                        };
                        bus = (bus * f).min(ch * tree_ll128_cap);
                    }
                    if graph.pattern == Pattern::Tree {
                        bus *= 0.85;
                    }
                }
                let ratio = match a {
                    Algorithm::Ring => n / nsteps,
                    Algorithm::Nvls | Algorithm::NvlsTree => 5.0 / 6.0,
                    _ => 0.5,
                };
                let bw_alg = if collnet_split { bus } else { bus * ratio };
                // Latency: base + per-step hops.
                let intra_lat = hw(false, a, p);
                // The plugin's reported latency, once more with Simple
                // (NCCL's "flush extra latency").
                let reported = if p == Protocol::Simple {
                    2.0 * self.latency_inter_us
                } else {
                    self.latency_inter_us
                };
                let inter_lat = hw(true, a, p) + reported;
                let mut lat = base(a, p);
                match a {
                    Algorithm::Ring => {
                        if matches!(
                            op,
                            CollectiveOp::Broadcast { .. } | CollectiveOp::Reduce { .. }
                        ) {
                            let l = if p == Protocol::Simple {
                                hw(self.multi_node(), Algorithm::Tree, p)
                            } else {
                                hw(self.multi_node(), a, p)
                            };
                            lat += nsteps * l;
                        } else {
                            let overhead = match (self.multi_node(), self.amd_host) {
                                (false, _) => 0.0,
                                (true, amd) => {
                                    let o = if amd { 2.0 } else { 1.0 };
                                    if p == Protocol::Simple {
                                        3.0 * o
                                    } else {
                                        o
                                    }
                                }
                            };
                            let intra = intra_lat.max(overhead);
                            lat += (nsteps - ninter) * intra + ninter * inter_lat;
                        }
                    }
                    Algorithm::Tree => {
                        lat += 2.0 * ((m - 1.0) * intra_lat + log2i(self.nodes) * inter_lat);
                    }
                    Algorithm::Nvls => {
                        lat = intra_lat;
                    }
                    Algorithm::CollNet => {
                        // 0.4 us of arity serialization per extra local rank.
                        lat += 2.0 * ((m - 1.0).min(1.0) * intra_lat + (m - 1.0) * 0.4) + inter_lat;
                    }
                    _ => {
                        lat += intra_lat + 2.0 * log2i(self.nodes) * inter_lat;
                    }
                }
                out.push(Entry {
                    algo: a,
                    proto: p,
                    lat_us: lat,
                    bw_gbs: bw_alg,
                });
            }
        }
        out
    }

    /// The communicator's channels (both graphs' common count, doubled once
    /// more after connection, at most 32), for the ring's plateau rule.
    fn comm_channels(&self, g: &Graphs) -> f64 {
        (2 * g.ring.channels.min(g.tree.channels)).min(MAXCHANNELS) as f64
    }

    /// The depth NCCL gives every tree channel: `nRanks / nNodes - 1 +
    /// log2i(nNodes)` (`connectTrees`, src/graph/connect.cc line 135 at
    /// v2.19.3-1; "not an exact value but a good approximation").
    pub fn tree_depth(&self) -> u64 {
        (self.gpus_per_node as u64).saturating_sub(1) + log2i(self.nodes) as u64
    }

    /// The channels NCCL runs a tree/Simple allreduce of `bytes` on: the
    /// communicator's ([`Self::comm_channels`]: 32 on OCI BM.GPU4.8, 16
    /// search channels doubled), fewer while `bytes` is below channels x
    /// threads x threshold (`topoGetAlgoInfo`, src/enqueue.cc lines
    /// 1205-1230 at v2.19.3-1: 512 threads, NCCL_SIMPLE_MAX_NTHREADS, and
    /// 64 bytes per thread, NCCL_SIMPLE_THREAD_THRESHOLD; tuning.cc lines
    /// 124 and 361), i.e. 32 KiB per channel.
    pub fn tree_channels(&self, g: &Graphs, bytes: u64) -> u64 {
        const PER_CHANNEL: u64 = 512 * 64;
        let comm = self.comm_channels(g) as u64;
        (bytes / PER_CHANNEL).clamp(1, comm.max(1))
    }

    /// NCCL's tree/Simple pipeline chunk for an allreduce of `bytes` under
    /// release `v`, from its Simple step `step` (`NCCL_BUFFSIZE / 8`, the
    /// calibration's `chunk_bytes`). NCCL 2.19 (src/enqueue.cc lines
    /// 1334-1339 at v2.19.3-1, `computeColl`, pattern TreeUpDown) halves
    /// the chunk while a channel's share holds fewer than `depth x 8`
    /// chunks (down to 128 KiB), then `depth x 4` (down to 64 KiB), then
    /// `depth` (down to 32 KiB), the share being `bytes / (channels x
    /// chunk)` in integers ([`Self::tree_channels`], [`Self::tree_depth`]).
    /// From 2.20 the rule is gone (`computeCollChunkInfo` at v2.20.3-1 and
    /// v2.21.5-1, `calcCollChunking` at v2.23.4-1 shrink CollNet's,
    /// NVLS's, NVLS-tree's and tree/LL128's chunks only): the step.
    pub fn tree_chunk_bytes(&self, v: NcclVersion, g: &Graphs, bytes: u64, step: u64) -> u64 {
        if v != NcclVersion::V2_19 {
            return step;
        }
        let channels = self.tree_channels(g, bytes);
        let depth = self.tree_depth();
        let mut chunk = step;
        for (per_channel, floor) in [(8, 128 << 10), (4, 64 << 10), (1, 32 << 10)] {
            while chunk > floor && bytes / (channels * chunk) < depth * per_channel {
                chunk /= 2;
            }
        }
        chunk
    }

    /// NCCL's time (us) of `e` for a message of `bytes`.
    pub fn time_us(&self, g: &Graphs, op: &CollectiveOp, e: &Entry, bytes: u64) -> f64 {
        let mut bw = e.bw_gbs;
        let log = log2i_u64(bytes >> 6);
        if e.algo == Algorithm::Tree && (0..23).contains(&log) {
            bw *= TREE_CORRECTION[proto_index(e.proto)][log as usize];
        }
        let mut lat = e.lat_us;
        let n = (self.nodes * self.gpus_per_node) as f64;
        if e.algo == Algorithm::Ring
            && e.proto == Protocol::Simple
            && self.multi_node()
            && matches!(op, CollectiveOp::AllReduce)
            && bytes as f64 / (self.comm_channels(g) * n) >= 64.0
        {
            lat *= if self.cc < 80 { 1.9 } else { 1.4 };
        }
        lat + bytes as f64 / (1000.0 * bw)
    }
}

fn log2i(n: usize) -> f64 {
    if n == 0 {
        0.0
    } else {
        (usize::BITS - 1 - n.leading_zeros()) as f64
    }
}

/// floor(log2(x)), -1 for 0.
fn log2i_u64(x: u64) -> i64 {
    if x == 0 {
        -1
    } else {
        (u64::BITS - 1 - x.leading_zeros()) as i64
    }
}

/// What NCCL's model picks for `op` on `bytes`, among the (algorithm,
/// protocol) pairs `allowed` accepts (the simulator's candidates), with its
/// time in microseconds; None where the model has nothing to say.
pub fn nccl_choice(
    sys: &NcclSystem,
    v: NcclVersion,
    op: &CollectiveOp,
    bytes: u64,
    allowed: impl Fn(Algorithm, Protocol) -> bool,
) -> Option<(Algorithm, Protocol, f64)> {
    if sys.nodes * sys.gpus_per_node < 2 {
        return None;
    }
    let g = sys.graphs(v)?;
    let mut best: Option<(Algorithm, Protocol, f64)> = None;
    for e in sys.table(v, &g, op) {
        if e.bw_gbs <= 0.0 || !allowed(e.algo, e.proto) {
            continue;
        }
        let t = sys.time_us(&g, op, &e, bytes);
        // Strictly less: the first in NCCL's order keeps a tie.
        if best.map_or(true, |b| t < b.2) {
            best = Some((e.algo, e.proto, t));
        }
    }
    best
}

/// The pipeline chunk of a tree allreduce of `bytes` on `group` across
/// nodes under the release the topology names
/// ([`NcclSystem::tree_chunk_bytes`], from NCCL's Simple step `step`):
/// `None` where it is the step (any release but 2.19, one node, a machine
/// NCCL's model does not cover).
pub fn tree_chunk(topo: &Topology, group: &Group, bytes: u64, step: u64) -> Option<u64> {
    let v = NcclVersion::named(topo)?;
    if v != NcclVersion::V2_19 {
        return None;
    }
    let sys = system_of(topo, group)?;
    if sys.nodes < 2 {
        return None;
    }
    let g = sys.graphs(v)?;
    Some(sys.tree_chunk_bytes(v, &g, bytes, step))
}

/// NCCL's view of `group` on `topo`: NVSwitch nodes of equal size, GPUs
/// with a known architecture; None for anything else.
pub fn system_of(topo: &Topology, group: &Group) -> Option<NcclSystem> {
    let file = topo.file()?;
    if file.layout != Layout::NvswitchNode {
        return None;
    }
    let nodes = group.nodes(topo);
    let m = nodes.first()?.len();
    if nodes.iter().any(|n| n.len() != m) {
        return None;
    }
    let model = file.device.model.to_ascii_uppercase();
    let cc = if ["H100", "H200", "H800", "GH200"]
        .iter()
        .any(|k| model.contains(k))
    {
        90
    } else if ["A100", "A800", "A30"].iter().any(|k| model.contains(k)) {
        80
    } else if model.contains("V100") {
        70
    } else {
        return None;
    };
    let nvlink = file.nvlink.as_ref()?;
    let pci = file.pcie.as_ref()?;
    // NCCL's PCIe figure: lanes x 0.75 GB/s x 2^(gen - 3), the generation
    // from the per-lane rate (0.985 GB/s at gen 3).
    let per_lane = pci.bandwidth.bytes_per_s() as f64 / 1e9 / pci.lanes.max(1) as f64;
    let gen = (per_lane / 0.985).log2().round();
    let pci_gbs = pci.lanes as f64 * 0.75 * 2f64.powf(gen);
    let nic_gbs = file
        .nic
        .as_ref()
        .map_or(0.0, |n| n.bandwidth.bytes_per_s() as f64 / 1e9);
    if nodes.len() > 1 && nic_gbs <= 0.0 {
        return None;
    }
    // NICs per GPU as the node layout attaches them (the group's fewest),
    // and how many GPUs share the first rank's first NIC.
    let nics_per_gpu = topo.nic_lanes(&group.devices);
    let gpus_per_nic = topo
        .device(group.devices[0])
        .map(|c| topo.component(c))
        .filter(|c| !c.nic_rails.is_empty())
        .map_or(1, |first| {
            topo.components()
                .iter()
                .filter(|c| {
                    matches!(c.kind, crate::topology::ComponentKind::Device { .. })
                        && c.node == first.node
                        && c.nic_rails.first() == first.nic_rails.first()
                })
                .count() as u32
        });
    let amd_host = file.host.as_ref().is_some_and(|h| {
        let h = h.model.to_ascii_uppercase();
        h.contains("AMD") || h.contains("EPYC")
    });
    Some(NcclSystem {
        nodes: nodes.len(),
        gpus_per_node: m,
        cc,
        nvlinks: nvlink.lanes,
        pci_gbs,
        nic_gbs,
        nics_per_gpu,
        gpus_per_nic,
        shared_pci_switch: pci.devices_per_switch >= 2,
        amd_host,
        nvls: nvlink.in_switch_reduction,
        latency_inter_us: file
            .nic
            .as_ref()
            .and_then(|n| n.reported_latency)
            .map_or(0.0, |d| d.0 as f64 * 1e-6),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dgx(cc: u32, nodes: usize, nic_gbs: f64, amd: bool) -> NcclSystem {
        NcclSystem {
            nodes,
            gpus_per_node: 8,
            cc,
            nvlinks: if cc >= 90 { 18 } else { 12 },
            pci_gbs: if cc >= 90 { 48.0 } else { 24.0 },
            nic_gbs,
            nics_per_gpu: 1,
            gpus_per_nic: 1,
            shared_pci_switch: true,
            amd_host: amd,
            nvls: cc >= 90,
            latency_inter_us: 0.0,
        }
    }

    /// Two OCI BM.GPU4.8 nodes: A100s on AMD hosts, 16 x 100 Gb/s (two
    /// NICs per GPU).
    fn oci_bm_gpu4_8() -> NcclSystem {
        NcclSystem {
            nic_gbs: 12.5,
            nics_per_gpu: 2,
            ..dgx(80, 2, 12.5, true)
        }
    }

    fn entry(t: &[Entry], a: Algorithm, p: Protocol) -> Entry {
        *t.iter().find(|e| e.algo == a && e.proto == p).unwrap()
    }

    /// NCCL's CollNet Direct entries (tuning.cc at v2.21.5-1), worked by
    /// hand: one GPU per node on 48 H100 nodes with a 400 Gb/s NIC each,
    /// reduce-scatter at `ppn x` one NIC x 0.95 and one 31 us network step
    /// (no intra-node hop at one rank per node; the plugin reports no
    /// latency here); eight per node, allreduce pays two intra-node hops of
    /// 3.7 us, 7 x 0.4 us of arity and the network step: 44.0 us. One
    /// node has no CollNet entry; only Simple has one.
    #[test]
    fn collnet_entries_follow_nccls_tuning() {
        let v = NcclVersion::V2_21;
        let one_per_node = NcclSystem {
            gpus_per_node: 1,
            ..dgx(90, 48, 50.0, false)
        };
        let g = one_per_node.graphs(v).unwrap();
        let t = one_per_node.table(v, &g, &CollectiveOp::ReduceScatter);
        let e = entry(&t, Algorithm::CollNet, Protocol::Simple);
        assert!((e.bw_gbs - 50.0 * 0.95).abs() < 1e-9, "{e:?}");
        assert!((e.lat_us - 31.0).abs() < 1e-9, "{e:?}");
        assert!(!t
            .iter()
            .any(|e| e.algo == Algorithm::CollNet && e.proto != Protocol::Simple));
        let eight = dgx(90, 2, 50.0, false);
        let g = eight.graphs(v).unwrap();
        let t = eight.table(v, &g, &CollectiveOp::AllReduce);
        let e = entry(&t, Algorithm::CollNet, Protocol::Simple);
        assert!(
            (e.lat_us - (2.0 * (3.7 + 7.0 * 0.4) + 31.0)).abs() < 1e-9,
            "{e:?}"
        );
        let single = dgx(90, 1, 50.0, false);
        let g = single.graphs(v).unwrap();
        let t = single.table(v, &g, &CollectiveOp::AllReduce);
        assert!(!t.iter().any(|e| e.algo == Algorithm::CollNet));
    }

    /// README's hand-worked figures (NCCL 2.23 tables, two nodes of 8,
    /// Simple, Intel hosts): tree 8.4 + 2 (7 x 4.0 + 1 x 14) = 92.4 us,
    /// ring (8.4 + 28 x 3.4 + 2 x 14) x 1.4 = 184.2 us at a large size.
    #[test]
    fn two_node_simple_latencies_match_the_hand_worked_figures() {
        let s = dgx(90, 2, 50.0, false);
        let v = NcclVersion::V2_23;
        let g = s.graphs(v).unwrap();
        let t = s.table(v, &g, &CollectiveOp::AllReduce);
        let tree = entry(&t, Algorithm::Tree, Protocol::Simple);
        assert!((tree.lat_us - 92.4).abs() < 1e-9, "{}", tree.lat_us);
        let ring = entry(&t, Algorithm::Ring, Protocol::Simple);
        assert!((ring.lat_us - 131.6).abs() < 1e-9, "{}", ring.lat_us);
        // The plateau factor applies from 64 B per channel and rank.
        let big = s.time_us(&g, &CollectiveOp::AllReduce, &ring, 1 << 30);
        let bw_us = (1u64 << 30) as f64 / (1000.0 * ring.bw_gbs);
        assert!((big - bw_us - 131.6 * 1.4).abs() < 1e-6, "{}", big - bw_us);
        // 2.21: the ring pays 2 N network steps, the tree 28 us per step,
        // and on AMD hosts the ring's per-step overhead is 6 us.
        let v = NcclVersion::V2_21;
        let t = s.table(v, &g, &CollectiveOp::AllReduce);
        let tree = entry(&t, Algorithm::Tree, Protocol::Simple);
        assert!((tree.lat_us - 2.0 * (7.0 * 28.0 + 28.0)).abs() < 1e-9);
        let ring = entry(&t, Algorithm::Ring, Protocol::Simple);
        assert!((ring.lat_us - (8.4 + 26.0 * 3.4 + 4.0 * 14.0)).abs() < 1e-9);
        let amd = dgx(80, 2, 25.0, true);
        let g = amd.graphs(v).unwrap();
        let t = amd.table(v, &g, &CollectiveOp::AllReduce);
        let ring = entry(&t, Algorithm::Ring, Protocol::Simple);
        assert!((ring.lat_us - (8.4 + 26.0 * 6.0 + 4.0 * 14.0)).abs() < 1e-9);
    }

    /// The graphs worked by hand from the search's rules (one NIC per GPU).
    #[test]
    fn graphs_follow_the_search_passes() {
        let v = NcclVersion::V2_21;
        // Two DGX A100, 200 Gb/s: rings at the PCIe path's 24 GB/s, one per
        // NIC; trees raise their intra speed to 30 (8 x 30 x 7/8 fits 240
        // GB/s of NVLink, 48 does not).
        let g = dgx(80, 2, 25.0, false).graphs(v).unwrap();
        assert_eq!(
            (g.ring.channels, g.ring.bw_intra, g.ring.bw_inter),
            (8, 24.0, 24.0)
        );
        assert_eq!(
            (g.tree.channels, g.tree.bw_intra, g.tree.bw_inter),
            (8, 30.0, 24.0)
        );
        assert_eq!(g.nvls, None);
        // Two DGX H100 at 400 Gb/s: 48 GB/s per channel (PCIe Gen5), no
        // duplication on Hopper below 50; NVLS: 40 GB/s for 8 heads (9 x 40
        // = 360 <= 370.8), then the inter speed raised to 48.
        let g = dgx(90, 2, 50.0, false).graphs(v).unwrap();
        assert_eq!((g.ring.channels, g.ring.bw_intra), (8, 48.0));
        assert_eq!((g.tree.channels, g.tree.bw_intra), (8, 48.0));
        let nvls = g.nvls.unwrap();
        assert_eq!(
            (nvls.channels, nvls.bw_intra, nvls.bw_inter),
            (8, 40.0, 48.0)
        );
        // One DGX A100: 6 rings at 40 duplicated to 12 at 20; trees must
        // match 12 channels, which fits at 20.
        let g = dgx(80, 1, 25.0, false).graphs(v).unwrap();
        assert_eq!((g.ring.channels, g.ring.bw_intra), (12, 20.0));
        assert_eq!((g.tree.channels, g.tree.bw_intra), (12, 20.0));
    }

    /// Closed forms of the table: ring busbw x n / (2 (n - 1)); the tree's
    /// 0.92 and per-channel cap, halved; NVLS-tree min(intra, inter) x 5/6.
    #[test]
    fn table_bandwidths_follow_the_closed_forms() {
        let v = NcclVersion::V2_21;
        let s = dgx(80, 2, 25.0, false);
        let g = s.graphs(v).unwrap();
        let t = s.table(v, &g, &CollectiveOp::AllReduce);
        let ring = entry(&t, Algorithm::Ring, Protocol::Simple).bw_gbs;
        assert!((ring - 8.0 * 24.0 * 16.0 / 30.0).abs() < 1e-9);
        let tree = entry(&t, Algorithm::Tree, Protocol::Simple).bw_gbs;
        assert!((tree - (8.0 * 30.0 * 0.92f64).min(8.0 * 23.6) * 0.5).abs() < 1e-9);
        let s = dgx(90, 2, 50.0, false);
        let g = s.graphs(v).unwrap();
        let t = s.table(v, &g, &CollectiveOp::AllReduce);
        let nt = entry(&t, Algorithm::NvlsTree, Protocol::Simple).bw_gbs;
        assert!((nt - 8.0 * 40.0 * 5.0 / 6.0).abs() < 1e-9);
        assert!(!t.iter().any(|e| e.algo == Algorithm::Nvls));
    }

    /// NCCL's choices at large sizes: on two A100 nodes with 200 Gb/s NICs
    /// the ring (102.4 GB/s against the tree's 94.4), on four the ring
    /// (both at the inter speed), on two H100 nodes at 400 Gb/s NVLS-tree,
    /// at 200 Gb/s without NVLS the tree (its intra speed doubled).
    #[test]
    fn large_size_choices() {
        let v = NcclVersion::V2_21;
        // A run without CollNet (NCCL_COLLNET_ENABLE unset).
        let all = |a: Algorithm, _: Protocol| a != Algorithm::CollNet;
        let op = CollectiveOp::AllReduce;
        let pick = |s: NcclSystem, b: u64| nccl_choice(&s, v, &op, b, all).unwrap();
        assert_eq!(pick(dgx(80, 2, 25.0, false), 1 << 30).0, Algorithm::Ring);
        assert_eq!(pick(dgx(80, 4, 25.0, false), 1 << 30).0, Algorithm::Ring);
        assert_eq!(
            pick(dgx(90, 2, 50.0, false), 1 << 30).0,
            Algorithm::NvlsTree
        );
        let a3 = NcclSystem {
            nvls: false,
            ..dgx(90, 2, 25.0, false)
        };
        assert_eq!(pick(a3, 1 << 30).0, Algorithm::Tree);
        // Small messages: LL (ring on one node, where it is cheapest).
        let (a, p, t) = pick(dgx(80, 1, 25.0, false), 64);
        assert_eq!((a, p), (Algorithm::Ring, Protocol::Ll));
        assert!((t - (6.6 + 14.0 * 0.6) - 64.0 / (1000.0 * 87.7 * 8.0 / 14.0)).abs() < 1e-9);
        // OCI BM.GPU4.8 as it is (16 x 100 Gb/s, two NICs per GPU, AMD
        // hosts) rather than as the simulator's 8 x 200 Gb/s: 16 ring
        // channels at 12 GB/s (the same 192 GB/s), trees with their intra
        // speed raised to 15 (16 x 18 x 7/8 is over 240 GB/s of NVLink):
        // tree 16 x 15 x 0.92 / 2 = 110.4 GB/s against the ring's 102.4, so
        // NCCL's model takes the tree at 1 GiB, as the measured curve does,
        // and the ring with 8 x 200 Gb/s.
        let oci = oci_bm_gpu4_8();
        let g = oci.graphs(v).unwrap();
        assert_eq!((g.ring.channels, g.ring.bw_intra), (16, 12.0));
        assert_eq!(
            (g.tree.channels, g.tree.bw_intra, g.tree.bw_inter),
            (16, 15.0, 12.0)
        );
        assert_eq!(pick(oci, 1 << 30).0, Algorithm::Tree);
        assert_eq!(pick(dgx(80, 2, 25.0, true), 1 << 30).0, Algorithm::Ring);
        // The same from the topology: `[nic] count = 16` at 100 Gb/s on
        // dgx-a100 (AMD hosts) is two NICs per GPU.
        let load = |set: &[(&str, &str)]| {
            let over: Vec<crate::topology::Override> = set
                .iter()
                .map(|&(k, v)| crate::topology::Override {
                    key: k.into(),
                    value: v.into(),
                })
                .collect();
            crate::topology::load("dgx-a100", &over).unwrap()
        };
        let t = load(&[
            ("nodes", "2"),
            ("nic.count", "16"),
            ("nic.bandwidth", "100Gb/s"),
        ]);
        let g = Group::first(&t, 16).unwrap();
        let sys = system_of(&t, &g).unwrap();
        assert_eq!((sys.nics_per_gpu, sys.gpus_per_nic), (2, 1));
        assert_eq!(sys, oci);
        // p4de's 4 x 100 Gb/s, each NIC shared by two GPUs: one 12 GB/s
        // ring channel per NIC (4 x 12 = 48 GB/s, as 8 x 50 Gb/s's 8 x 6).
        let t = load(&[
            ("nodes", "2"),
            ("nic.count", "4"),
            ("nic.bandwidth", "100Gb/s"),
        ]);
        let sys = system_of(&t, &Group::first(&t, 16).unwrap()).unwrap();
        assert_eq!((sys.nics_per_gpu, sys.gpus_per_nic), (1, 2));
        let g = sys.graphs(v).unwrap();
        assert_eq!((g.ring.channels, g.ring.bw_intra), (4, 12.0));
        // A filter that refuses the winner gets the next one.
        let (a, _, _) = nccl_choice(&dgx(90, 2, 50.0, false), v, &op, 1 << 30, |a, _| {
            a != Algorithm::NvlsTree
        })
        .unwrap();
        assert_eq!(a, Algorithm::Ring);
    }

    /// NCCL 2.19's tree/Simple chunk (src/enqueue.cc lines 1334-1339 at
    /// v2.19.3-1), worked by hand. OCI BM.GPU4.8 (16 ring and tree search
    /// channels, doubled to 32; depth 8 - 1 + log2i(2) = 8): at 64 MiB a
    /// channel's 2 MiB is 4 chunks of 512 KiB, 8 of 256 KiB, 16 of 128 KiB
    /// (the first loop's floor; 16 < 64), then 32 of 64 KiB (32 is not
    /// below depth x 4 = 32): 64 KiB. 128 MiB: 8, 16, 32 chunks at 128
    /// KiB, not below 32: 128 KiB. 256 MiB: 16, 32, 64 at 128 KiB: 128
    /// KiB. 512 MiB: 32, 64 at 256 KiB: 256 KiB. 1 GiB: 64 at 512 KiB. Two
    /// DGX A100 (8 x 200 Gb/s: 8 channels doubled to 16) at 64 MiB: 8, 16,
    /// 32 at 128 KiB, not below 32: 128 KiB. Small messages run on fewer
    /// channels (32 KiB each at 512 threads x 64 B) and the third loop
    /// takes the chunk down to 32 KiB. Later releases keep the step.
    #[test]
    fn nccl_2_19_tree_chunks_shrink_as_worked_by_hand() {
        let v = NcclVersion::V2_19;
        let oci = oci_bm_gpu4_8();
        let g = oci.graphs(v).unwrap();
        assert_eq!((g.ring.channels, g.tree.channels), (16, 16));
        assert_eq!(oci.tree_depth(), 8);
        assert_eq!(oci.tree_channels(&g, 64 << 20), 32);
        let step = 512 << 10;
        let chunk = |b: u64| oci.tree_chunk_bytes(v, &g, b, step) >> 10;
        assert_eq!(
            [64u64, 128, 256, 512, 1024].map(|mib| chunk(mib << 20)),
            [64, 128, 128, 256, 512]
        );
        assert_eq!(chunk(8 << 30), 512);
        // 1 MiB: 32 channels of 32 KiB, under depth chunks each: 32 KiB.
        assert_eq!(oci.tree_channels(&g, 1 << 20), 32);
        assert_eq!(chunk(1 << 20), 32);
        // 64 KiB: 2 channels; 8 KiB: 1.
        assert_eq!(oci.tree_channels(&g, 64 << 10), 2);
        assert_eq!(oci.tree_channels(&g, 8 << 10), 1);
        let dgx2 = dgx(80, 2, 25.0, false);
        let g2 = dgx2.graphs(v).unwrap();
        assert_eq!(dgx2.tree_channels(&g2, 64 << 20), 16);
        assert_eq!(dgx2.tree_chunk_bytes(v, &g2, 64 << 20, step), 128 << 10);
        // A larger step (NCCL_BUFFSIZE=8 MiB: 1 MiB) halves further.
        assert_eq!(oci.tree_chunk_bytes(v, &g, 1 << 30, 1 << 20), 512 << 10);
        for later in [NcclVersion::V2_21, NcclVersion::V2_23] {
            assert_eq!(oci.tree_chunk_bytes(later, &g, 64 << 20, step), step);
        }
    }
}
