//! Timing mode: turn a plan into a `net::Schedule` over the topology's routes
//! and run it on the flow-level network. Only sizes matter here (no data).
//!
//! Model, per protocol `p` (parameters from the [`Calibration`]):
//! - every link runs at `bandwidth x payload(p) x fraction(p, class)` (class:
//!   network links versus node-local NVLink/PCIe/ICI links), shared max-min
//!   fairly by the flows crossing it, and keeps its own latency;
//! - before each step a sender pays the protocol's per-hop latency (the
//!   network figure when one of its sends in that step leaves the node), after
//!   everything it sent and received in its previous step has arrived (NCCL's
//!   flag wait: a rank moves on when its slots are filled and freed); in a
//!   ring ([`Algorithm::pipelines_hops`]) the hop delays a piece's data only,
//!   not the sender's previous send, so it is paid along the data's path as
//!   NCCL's model charges it, and a rank's `j`-th send of a step waits only
//!   for its `j`-th of the last ([`Algorithm::per_channel_slots`]: rail
//!   rings are channels that progress apart), and a tree's send for its
//!   rank's last sends over the same connection only
//!   ([`Algorithm::per_connection_slots`], [`super::plan::Move::conn`]); with
//!   [`Calibration::send_on_departure`] the previous send gates by its
//!   departure (its transmission end), not its delivery: NCCL keeps several
//!   steps in flight per connection, so a sender does not pay the route's
//!   latency once per send;
//! - with [`Calibration::ring_slices`], a Simple ring step that crosses the
//!   network goes in two slices (NCCL's `SlicePerChunk`, [`ring_slices`]):
//!   the next rank forwards the first while the second is on the wire;
//! - the collective pays the protocol's base latency once.
//!
//! Reductions cost nothing extra: NCCL fuses them into the copy kernel, so
//! they are part of the achievable bandwidth.

use std::collections::{BTreeMap, HashMap};

use crate::engine::{LinkFault, Time};
use crate::net::{self, NetSim, Schedule, TaskId};
use crate::topology::{ComponentKind, LinkClass, LinkId, Topology};

use super::calibration::{us, Calibration};
use super::kinds::{Algorithm, Protocol};
use super::plan::{Plan, Via};
use super::CollectiveError;

/// The devices of a group: rank `r` runs on device `devices[r]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    pub devices: Vec<u32>,
}

impl Group {
    /// A group of distinct devices that exist in `topo`.
    pub fn new(topo: &Topology, devices: Vec<u32>) -> Result<Group, CollectiveError> {
        if devices.is_empty() {
            return Err(CollectiveError::EmptyGroup);
        }
        let mut seen = devices.clone();
        seen.sort_unstable();
        if let Some(w) = seen.windows(2).find(|w| w[0] == w[1]) {
            return Err(CollectiveError::Buffers(format!(
                "device {} appears twice in the group",
                w[0]
            )));
        }
        if let Some(&d) = devices.iter().find(|&&d| d >= topo.num_devices()) {
            return Err(crate::topology::TopologyError::NoSuchDevice(d, topo.num_devices()).into());
        }
        Ok(Group { devices })
    }

    /// A group from a mesh's device group (`Mesh::device_groups`), so a
    /// partitioned program's collectives run on the right devices.
    pub fn from_mesh_group(topo: &Topology, devices: &[u64]) -> Result<Group, CollectiveError> {
        let ids = devices
            .iter()
            .map(|&d| {
                u32::try_from(d).map_err(|_| {
                    crate::topology::TopologyError::NoSuchDevice(u32::MAX, topo.num_devices())
                })
            })
            .collect::<Result<Vec<u32>, _>>()?;
        Group::new(topo, ids)
    }

    /// The first `n` devices.
    pub fn first(topo: &Topology, n: u32) -> Result<Group, CollectiveError> {
        Group::new(topo, (0..n).collect())
    }

    pub fn len(&self) -> usize {
        self.devices.len()
    }

    pub fn is_empty(&self) -> bool {
        self.devices.is_empty()
    }

    /// Ranks grouped by the node of their device, in rank order of first
    /// appearance (for hierarchical algorithms and NCCL's trees); a device
    /// outside any node (a flat switch, a ring) is a node of its own, as a
    /// one-GPU server is to NCCL.
    pub fn nodes(&self, topo: &Topology) -> Vec<Vec<usize>> {
        let mut by_node: BTreeMap<(Option<u32>, usize), Vec<usize>> = BTreeMap::new();
        for (r, &d) in self.devices.iter().enumerate() {
            let node = topo.device(d).and_then(|c| topo.component(c).node);
            let alone = if node.is_none() { r } else { 0 };
            by_node.entry((node, alone)).or_default().push(r);
        }
        let mut nodes: Vec<Vec<usize>> = by_node.into_values().collect();
        nodes.sort_by_key(|g| g[0]);
        nodes
    }

    /// The device model of rank 0 (the calibration key).
    pub fn device_model(&self, topo: &Topology) -> String {
        topo.device(self.devices[0])
            .map(|c| topo.component(c).model.clone())
            .unwrap_or_default()
    }
}

/// What a timed run reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CollectiveTiming {
    pub time: Time,
    /// Point-to-point flows the network carried.
    pub flows: usize,
}

/// Routes between the group's devices, computed once per pair. A rank of a
/// ring or tree talks to a few peers: those pairs are found by a scan of the
/// rank's short list, the rest (all-pairs algorithms) in a hash map; routes
/// live in one flat array (a vector and a hashed key per pair cost a quarter
/// of a 65,536-rank run). The short lists are one flat array too, a cache
/// line per rank (a vector per rank cost two allocations per rank and
/// scattered the lists over the heap).
pub(crate) struct Routes<'a> {
    topo: &'a Topology,
    devices: &'a [u32],
    /// Rank `r`'s `(peer, route index)` pairs are
    /// `near[r * NEAR..r * NEAR + near_len[r]]`.
    near: Vec<(u32, u32)>,
    near_len: Vec<u8>,
    /// Only looked up, never iterated (so a hash map keeps runs deterministic).
    far: HashMap<(usize, usize), usize>,
    /// Route `i` is `links[offsets[i]..offsets[i + 1]]`.
    offsets: Vec<usize>,
    links: Vec<usize>,
    /// [`Self::switch_links`] by rank, filled as asked (`NO_SWITCH`: not
    /// yet): NVLS and NVLS-tree ask for every send, and each answer walks
    /// three routes.
    switch: Vec<(u32, u32)>,
    /// [`Self::net_paths`] by rank (empty: not yet asked).
    net: Vec<NetPath>,
}

/// A rank's links up to its aggregation root and down from it.
type NetPath = (Vec<usize>, Vec<usize>);

/// A send of a step: `(sender key, connection, order sent, task)`.
type SentTask = (usize, u32, usize, TaskId);
/// A receipt of a step: `(receiver, offset, len, task, reduces)`.
type WriteTask = (usize, u64, u64, TaskId, bool);

/// Transfers by the first link of their stretch (`StepScratch::net_fifo`).
type LinkTasks = BTreeMap<usize, Vec<TaskId>>;

const NEAR: usize = 8;

const NO_SWITCH: (u32, u32) = (u32::MAX, u32::MAX);

impl<'a> Routes<'a> {
    pub fn new(topo: &'a Topology, group: &'a Group) -> Routes<'a> {
        Routes {
            topo,
            devices: &group.devices,
            near: vec![(0, 0); group.devices.len() * NEAR],
            near_len: vec![0; group.devices.len()],
            far: HashMap::new(),
            offsets: vec![0],
            links: Vec::new(),
            switch: Vec::new(),
            net: Vec::new(),
        }
    }

    /// Rank `r`'s links up into the network's aggregation root for its rail
    /// and the root's links down to it ([`Via::InNetwork`], SHARP): the leaf
    /// switch its NIC hangs off where every rank of the group on that rail
    /// hangs off the same leaf, else a spine (the rail's, modulo the
    /// spines), which aggregates the leaves, or, where the rail's leaves
    /// are in several pods of a three-level tree, a core above the pods'
    /// spines (the rail's modulo a spine's cores). The switches must reduce
    /// (`network.in_switch_reduction`).
    pub fn net_paths(&mut self, r: usize) -> Result<(&[usize], &[usize]), CollectiveError> {
        if self.net.is_empty() {
            self.net = self.find_net_paths()?;
        }
        let (up, down) = &self.net[r];
        Ok((up, down))
    }

    /// The links an in-network move loads: its sender's route up (not for a
    /// multicast of a result held at the root) and its receiver's down (not
    /// for a reduction left at the root); none for other moves.
    pub fn net_move_links(
        &mut self,
        m: &super::plan::Move,
    ) -> Result<(Vec<usize>, Vec<usize>), CollectiveError> {
        let up = match m.via {
            Via::InNetwork | Via::NetworkReduce => self.net_paths(m.from)?.0.to_vec(),
            _ => Vec::new(),
        };
        let down = match m.via {
            Via::InNetwork | Via::NetworkMulticast => self.net_paths(m.to)?.1.to_vec(),
            _ => Vec::new(),
        };
        Ok((up, down))
    }

    fn find_net_paths(&mut self) -> Result<Vec<NetPath>, CollectiveError> {
        let no = |why: &str| CollectiveError::NotApplicable {
            op: "collective",
            algo: "collnet",
            why: why.into(),
        };
        let topo = self.topo;
        let n = self.devices.len();
        let place = |r: usize| {
            let c = topo.device(self.devices[r]).map(|c| topo.component(c));
            (c.and_then(|c| c.node), c.and_then(|c| c.rail))
        };
        let places: Vec<_> = (0..n).map(place).collect();
        // Per rail, its first rank and its first on another node than that:
        // every rank's peer across the network on its own rail.
        let mut firsts: BTreeMap<Option<u32>, Vec<usize>> = BTreeMap::new();
        for (r, &(node, rail)) in places.iter().enumerate() {
            let f = firsts.entry(rail).or_default();
            if f.len() < 2 && f.iter().all(|&q| places[q].0 != node) {
                f.push(r);
            }
        }
        if places.iter().all(|p| p.0 == places[0].0) {
            return Err(no("needs ranks on at least two nodes"));
        }
        let leaf = |c: crate::topology::ComponentId| match topo.component(c).kind {
            ComponentKind::NetworkSwitch {
                level: 0,
                in_switch_reduction,
            } => Some(in_switch_reduction),
            _ => None,
        };
        // Each rank's links to its leaf and from it, through its own NIC.
        let mut legs: Vec<(Vec<usize>, Vec<usize>, crate::topology::ComponentId)> = Vec::new();
        for r in 0..n {
            let (node, rail) = places[r];
            let q = firsts[&rail]
                .iter()
                .copied()
                .find(|&q| places[q].0 != node)
                .ok_or_else(|| {
                    no("needs a rank of the same local index (rail) on another node for every rank")
                })?;
            let there = self.get(r, q)?.to_vec();
            let back = self.get(q, r)?.to_vec();
            let links = topo.links();
            let i = there
                .iter()
                .position(|&l| leaf(links[l].to).is_some())
                .ok_or_else(|| no("needs a leaf switch between the nodes"))?;
            let k = back
                .iter()
                .rposition(|&l| leaf(links[l].from).is_some())
                .ok_or_else(|| no("needs a leaf switch between the nodes"))?;
            let sw = links[there[i]].to;
            if leaf(sw) != Some(true) {
                return Err(no(
                    "the network's switches do not reduce (network.in_switch_reduction = false)",
                ));
            }
            if links[back[k]].from != sw {
                return Err(no("a rank's route back leaves another leaf switch"));
            }
            legs.push((there[..=i].to_vec(), back[k..].to_vec(), sw));
        }
        // Per rail, one leaf for all its ranks, or a spine above them.
        let rail = |c: crate::topology::ComponentId| topo.component(c).rail.unwrap_or(0);
        let mut leaves: BTreeMap<u32, Vec<crate::topology::ComponentId>> = BTreeMap::new();
        for (_, _, sw) in &legs {
            let v = leaves.entry(rail(*sw)).or_default();
            if !v.contains(sw) {
                v.push(*sw);
            }
        }
        let links = topo.links();
        // A switch's link up to a switch of `level`: of the rail's plane
        // where the switches above are in rail planes (the first), else
        // the rail's modulo their count; the same index in every pod, so
        // the rail's spines of all pods reach the same core.
        let climb = |sw: crate::topology::ComponentId, level: u32, rail: u32| {
            let ups: Vec<usize> = topo
                .out_links(sw)
                .into_iter()
                .map(|l| l.0 as usize)
                .filter(|&l| {
                    matches!(
                        topo.component(links[l].to).kind,
                        ComponentKind::NetworkSwitch { level: x, .. } if x == level
                    )
                })
                .collect();
            let plane = ups
                .iter()
                .copied()
                .find(|&l| topo.component(links[l].to).rail == Some(rail));
            plane.or_else(|| (!ups.is_empty()).then(|| ups[rail as usize % ups.len()]))
        };
        let mut paths = Vec::with_capacity(n);
        // Per rail, the spines its leaves climb to: more than one where the
        // rail's leaves are in several pods (a three-level tree), and then
        // the cores above them aggregate.
        let mut rail_spines: BTreeMap<u32, Vec<crate::topology::ComponentId>> = BTreeMap::new();
        for (up, down, sw) in legs {
            if leaves[&rail(sw)].len() == 1 {
                paths.push((up, down, None));
                continue;
            }
            let to_spine = climb(sw, 1, rail(sw))
                .ok_or_else(|| no("needs a spine switch above the leaves"))?;
            let v = rail_spines.entry(rail(sw)).or_default();
            if !v.contains(&links[to_spine].to) {
                v.push(links[to_spine].to);
            }
            paths.push((up, down, Some((rail(sw), to_spine))));
        }
        let mut out = Vec::with_capacity(n);
        for (mut up, down, climbed) in paths {
            let Some((r, to_spine)) = climbed else {
                out.push((up, down));
                continue;
            };
            let mut root_up = vec![to_spine];
            if rail_spines[&r].len() > 1 {
                let to_core = climb(links[to_spine].to, 2, r)
                    .ok_or_else(|| no("needs a core switch above the pods' spines"))?;
                root_up.push(to_core);
            }
            let root = links[*root_up.last().expect("one link")].to;
            if !matches!(
                topo.component(root).kind,
                ComponentKind::NetworkSwitch {
                    in_switch_reduction: true,
                    ..
                }
            ) {
                return Err(no(
                    "the network's switches do not reduce (network.in_switch_reduction = false)",
                ));
            }
            let mut d: Vec<usize> = root_up
                .iter()
                .rev()
                .map(|&l| links[l].reverse.0 as usize)
                .collect();
            up.extend(root_up);
            d.extend(down);
            out.push((up, d));
        }
        Ok(out)
    }

    /// Route (network link indices) from rank `a` to rank `b`.
    pub fn get(&mut self, a: usize, b: usize) -> Result<&[usize], CollectiveError> {
        self.get_lane(a, b, 0)
    }

    /// Route from rank `a` to rank `b` through their NIC `lane`
    /// (`Topology::route_lane`; lanes past a GPU's NICs wrap around).
    pub fn get_lane(&mut self, a: usize, b: usize, lane: u32) -> Result<&[usize], CollectiveError> {
        let n = self.devices.len();
        // Lane `l`'s routes are kept as peer `b + l n`.
        let key = b + lane as usize * n;
        let i = match self.find(a, key) {
            Some(i) => i,
            None => {
                let (da, db) = (self.devices[a], self.devices[b]);
                // Flow 0: ECMP spreads pairs by their endpoints, alike on every
                // rail (a flow id from device ids would break the rails' symmetry).
                let r = self.topo.route_devices_lane(da, db, 0, lane)?;
                self.links.extend(r.iter().map(|l| l.0 as usize));
                let i = self.offsets.len() - 1;
                self.offsets.push(self.links.len());
                let k = usize::from(self.near_len[a]);
                // Group ranks are below 2^32 (device ids are `u32`); a route
                // index or lane key past that (never in practice) goes to the map.
                match (k < NEAR, u32::try_from(key), u32::try_from(i)) {
                    (true, Ok(b32), Ok(i32)) => {
                        self.near[a * NEAR + k] = (b32, i32);
                        self.near_len[a] += 1;
                    }
                    _ => {
                        self.far.insert((a, key), i);
                    }
                }
                i
            }
        };
        Ok(&self.links[self.offsets[i]..self.offsets[i + 1]])
    }

    fn find(&self, a: usize, b: usize) -> Option<usize> {
        let len = usize::from(*self.near_len.get(a)?);
        let near = &self.near[a * NEAR..a * NEAR + len];
        match near.iter().find(|p| p.0 as usize == b) {
            Some(p) => Some(p.1 as usize),
            // The map holds the rest once the list is full (or an index
            // past `u32`, which `get` also puts there).
            None if len == NEAR
                || self.offsets.len() > u32::MAX as usize
                || b > u32::MAX as usize =>
            {
                self.far.get(&(a, b)).copied()
            }
            None => None,
        }
    }

    /// Does the route leave the node (cross a network link)?
    pub fn crosses_network(&mut self, a: usize, b: usize) -> Result<bool, CollectiveError> {
        let topo = self.topo;
        Ok(self
            .get(a, b)?
            .iter()
            .any(|&l| topo.links()[l].class == LinkClass::Network))
    }

    /// Rank `r`'s link up to its NVSwitch and the switch's link down to it,
    /// when every rank of the group hangs off the same reducing NVSwitch.
    pub fn switch_links(&mut self, r: usize) -> Result<(usize, usize), CollectiveError> {
        if let Some(&(up, down)) = self.switch.get(r).filter(|&&l| l != NO_SWITCH) {
            return Ok((up as usize, down as usize));
        }
        let (up, down) = self.find_switch_links(r)?;
        if let (Ok(u), Ok(d)) = (u32::try_from(up), u32::try_from(down)) {
            if self.switch.is_empty() {
                self.switch = vec![NO_SWITCH; self.devices.len()];
            }
            self.switch[r] = (u, d);
        }
        Ok((up, down))
    }

    fn find_switch_links(&mut self, r: usize) -> Result<(usize, usize), CollectiveError> {
        let n = self.devices.len();
        let other = (r + 1) % n;
        let not_nvls = || CollectiveError::NotApplicable {
            op: "allreduce",
            algo: "nvls",
            why: "needs every rank on one NVSwitch with in-switch reduction".into(),
        };
        if n < 2 {
            return Err(not_nvls());
        }
        // A peer on the same switch: the next rank, or for the last rank of
        // a node (NVLS-tree's groups span nodes) the previous one.
        let mut other = other;
        if self.get(r, other)?.len() != 2 && n > 2 {
            other = (r + n - 1) % n;
        }
        let two = |l: &[usize]| <[usize; 2]>::try_from(l).ok();
        let up = two(self.get(r, other)?);
        let down = two(self.get(other, r)?);
        let (Some(up), Some(down)) = (up, down) else {
            return Err(not_nvls());
        };
        let links = self.topo.links();
        let sw = |l: usize, to: bool| {
            let c = if to { links[l].to } else { links[l].from };
            matches!(
                self.topo.component(c).kind,
                ComponentKind::NvSwitch {
                    in_switch_reduction: true
                }
            )
        };
        if !sw(up[0], true) || !sw(down[1], false) {
            return Err(not_nvls());
        }
        Ok((up[0], down[1]))
    }

    /// Check that every rank hangs off a reducing NVSwitch (NVLS-tree: one
    /// per node).
    pub fn check_switch_reduce(&mut self) -> Result<(), CollectiveError> {
        for r in 0..self.devices.len() {
            self.switch_links(r)
                .map_err(|_| CollectiveError::NotApplicable {
                    op: "allreduce",
                    algo: "nvls-tree",
                    why: "needs every rank on an NVSwitch with in-switch reduction, with a peer on it"
                        .into(),
                })?;
        }
        Ok(())
    }

    /// Check that every rank can use NVLS (same switch for all).
    pub fn check_nvls(&mut self) -> Result<(), CollectiveError> {
        let mut switch = None;
        for r in 0..self.devices.len() {
            let (up, _) = self.switch_links(r)?;
            let s = self.topo.links()[up].to;
            if *switch.get_or_insert(s) != s {
                return Err(CollectiveError::NotApplicable {
                    op: "allreduce",
                    algo: "nvls",
                    why: "the group spans more than one NVSwitch".into(),
                });
            }
        }
        Ok(())
    }
}

/// The network links of `topo` as the protocol sees them. A link the
/// topology marks never binding ([`Topology::never_binding`]: an adaptive
/// fat tree's layer links) gets [`UNBOUND`] times its capacity, so the flow
/// model's sharing never ties the flows that cross it together; their rates
/// are what they were, set by the links that feed it.
pub(crate) fn protocol_links(
    topo: &Topology,
    cal: &Calibration,
    algo: Algorithm,
    proto: Protocol,
) -> Vec<net::Link> {
    let rate = ProtocolRate::new(cal, algo, proto);
    topo.links()
        .iter()
        .map(|l| {
            let mut link = rate.link(l);
            if topo.never_binding(l.id) {
                link.capacity *= UNBOUND;
            }
            link
        })
        .collect()
}

/// How much wider than it is a never-binding link runs in the flow model.
const UNBOUND: f64 = 1e6;

/// What share of a link's bandwidth a protocol's payload gets, by class.
struct ProtocolRate {
    params: super::calibration::ProtocolParams,
    payload: f64,
}

impl ProtocolRate {
    fn new(cal: &Calibration, algo: Algorithm, proto: Protocol) -> ProtocolRate {
        let payload = if algo == Algorithm::Nvls {
            1.0
        } else {
            proto.payload_fraction()
        };
        ProtocolRate {
            params: cal.params(algo, proto),
            payload,
        }
    }

    /// Link `l` as the protocol sees it, at its capacity.
    fn link(&self, l: &crate::topology::Link) -> net::Link {
        let f = if l.class == LinkClass::Network {
            self.params.network_fraction
        } else {
            self.params.nvlink_fraction
        };
        net::Link::new(
            l.bandwidth_bytes_per_s() as f64 * self.payload * f,
            Time(l.latency_ps()),
        )
    }
}

/// The protocol's per-hop latency of a send inside a node or across the network.
pub(super) fn hop(p: &super::calibration::ProtocolParams, network: bool) -> Time {
    us(if network {
        p.network_hop_us
    } else {
        p.nvlink_hop_us
    })
}

/// Does a ring step of `algo` under `proto` go in two slices (NCCL's
/// `SlicePerChunk`)? NCCL's Simple ring runs `ProtoSimple<ALLREDUCE_CHUNKSTEPS
/// / ALLREDUCE_SLICESTEPS, ALLREDUCE_SLICESTEPS>` = 2 slices of 2 steps per
/// chunk (v2.21.5-1 src/device/all_reduce.h line 229, src/include/
/// collectives.h lines 13-14): the next rank forwards slice 0 while slice 1
/// is on the wire, so a step costs `max(c / BW, c / (2 BW) + hop)`, not
/// `c / BW + hop`. Trees run `ProtoSimple<1, 1>` (one slice), LL and LL128
/// have no slices. `network`: the ring's steps cross the network
/// ([`SLICE_IN_NODE`] says whether a ring inside a node is sliced too).
pub(crate) fn ring_slices(
    cal: &Calibration,
    algo: Algorithm,
    proto: Protocol,
    network: bool,
) -> bool {
    cal.ring_slices
        && algo == Algorithm::Ring
        && proto == Protocol::Simple
        && (network || SLICE_IN_NODE)
}

/// Whether rings inside a node are sliced too: no. The NVLink hop
/// (`nvlink_hop_us`, 6.66 us on A100) was fitted to NCCL's one-node curve
/// under whole steps and stands for what slicing hides there as well:
/// slicing one-node rings under it puts the A100 curve 28% fast at 16 MiB
/// and 13% at 64 MiB (176.8 and 514.4 us against NCCL's 245.1 and 589.5).
pub(crate) const SLICE_IN_NODE: bool = false;

/// NCCL's smallest slice: `stepSize * StepPerSlice / 32` with the Simple
/// buffer's 4 MiB over `NCCL_STEPS` = 8 steps (v2.21.5-1 src/device/
/// prims_simple.h line 196: `max(divUp(nelem, 16 * SlicePerChunk) * 16,
/// sliceSize / 32)`).
const MIN_SLICE_BYTES: u64 = (4 << 20) / 8 * 2 / 32;

/// A move of `len` elements in two slices: the first's and the second's
/// elements (the second empty when the move fits one slice).
pub(crate) fn slice_lens(len: u64, elem_bytes: u64) -> (u64, u64) {
    let min = MIN_SLICE_BYTES.div_ceil(elem_bytes.max(1));
    let first = (len.div_ceil(32) * 16).max(min).min(len);
    (first, len - first)
}

/// A load into the switch's reduction: its sender, offset and connection slot.
type SwitchLoad = (usize, u64, usize);

/// Where a timed plan's tasks go: a whole [`Schedule`], or a streamed one
/// (`stream.rs`) that holds only the tasks still to run.
pub(crate) trait TaskSink {
    fn transfer(
        &mut self,
        route: &[usize],
        bytes: u64,
        deps: &[TaskId],
    ) -> Result<TaskId, CollectiveError> {
        self.transfer_capped(route, bytes, f64::INFINITY, deps)
    }
    /// A transfer never faster than `cap` bytes/s (`f64::INFINITY`: none).
    fn transfer_capped(
        &mut self,
        route: &[usize],
        bytes: u64,
        cap: f64,
        deps: &[TaskId],
    ) -> Result<TaskId, CollectiveError>;
    fn compute(
        &mut self,
        device: u64,
        duration: Time,
        deps: &[TaskId],
    ) -> Result<TaskId, CollectiveError>;
}

impl TaskSink for Schedule {
    fn transfer_capped(
        &mut self,
        route: &[usize],
        bytes: u64,
        cap: f64,
        deps: &[TaskId],
    ) -> Result<TaskId, CollectiveError> {
        Ok(self.add_transfer_capped(route, bytes, cap, deps)?)
    }

    fn compute(
        &mut self,
        device: u64,
        duration: Time,
        deps: &[TaskId],
    ) -> Result<TaskId, CollectiveError> {
        Ok(self.add_compute(device, duration, deps)?)
    }
}

/// What a send waits for: the receipts that wrote the range it reads (data
/// dependencies, per rank) and the sender's sends of its previous step (NCCL's
/// buffer slots: a rank issues step s+1 once step s has left).
pub(crate) struct Deps {
    /// Per rank (one record: a run reaches 65,536 ranks in no order).
    ranks: Vec<RankDeps>,
    gating: Gating,
    /// Steps added so far (marks which step a rank's slot count is of).
    step: u32,
    /// Steps whose receipts were written so far (which step a receipt is of).
    epoch: u32,
}

#[derive(Clone, Default)]
struct RankDeps {
    /// Receipts `(offset, len, task, epoch)` sorted by `(offset, len)`; a
    /// write removes the ones it covers (a write of the same range replaces
    /// them), but a reduce not those of its own step (`epoch`): a later read
    /// waits for every reduce of a step into its range, a tree parent's from
    /// each of its children.
    /// Ordered by offset, so a send looks only at receipts that can overlap
    /// what it reads. A sorted vector, not a map: most ranks hold a few
    /// receipts, and 65,536 maps' nodes cost more than the rest of a run.
    writes: Vec<(u64, u64, TaskId, u32)>,
    /// The longest receipt so far (how far back an overlap starts).
    longest: u64,
    /// The sends of the last step this slot sent in (by rank, or by class in
    /// a quotient run). With per-channel slots: entry `j` is the last send
    /// in channel `j` ([`NO_TASK`] where there was none).
    last_sends: Vec<TaskId>,
    /// With per-channel slots: the step `next_slot` counts in, and this
    /// key's point-to-point moves in it so far (its next move's channel).
    slot_step: u32,
    next_slot: u32,
    /// With per-connection slots: the sends of the last step this key sent
    /// in over each connection, sorted by connection (`conns[i]` is
    /// `conn_sends[i]`'s), a connection's entries replaced when it sends.
    conns: Vec<u32>,
    conn_sends: Vec<TaskId>,
}

impl RankDeps {
    /// Where connection `conn`'s entries of `conns` / `conn_sends` are (an
    /// empty range at its place when it has none).
    fn conn_range(&self, conn: u32) -> (usize, usize) {
        let a = self.conns.partition_point(|&c| c < conn);
        (a, a + self.conns[a..].partition_point(|&c| c == conn))
    }
}

/// No send in a channel yet.
const NO_TASK: TaskId = TaskId::MAX;

/// How an algorithm's sends wait ([`Algorithm::pipelines_hops`],
/// [`Algorithm::per_channel_slots`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Gating {
    /// The hop waits for the data only, not the last sends.
    pub pipelined: bool,
    /// With `pipelined`: the last sends gate by their departure, not their
    /// delivery ([`Calibration::send_on_departure`]).
    pub departed: bool,
    /// A sender's `j`-th send of a step waits for its `j`-th of the last.
    pub per_channel: bool,
    /// A send waits for its sender's last sends over the same connection
    /// only ([`Algorithm::per_connection_slots`], [`super::plan::Move::conn`]).
    pub per_conn: bool,
}

impl Gating {
    pub(crate) fn of(algo: Algorithm, cal: &Calibration) -> Gating {
        Gating {
            pipelined: algo.pipelines_hops(),
            // CollNet's latency is NCCL's own figure, fitted to nothing
            // under delivery gating: its sends keep NCCL's FIFO of slots.
            departed: algo.pipelines_hops()
                && (cal.send_on_departure || algo == Algorithm::CollNet),
            per_channel: algo.per_channel_slots(),
            per_conn: algo.per_connection_slots(),
        }
    }
}

impl Deps {
    pub(crate) fn new(n: usize, gating: Gating) -> Deps {
        Deps {
            ranks: vec![RankDeps::default(); n],
            gating,
            step: 0,
            epoch: 0,
        }
    }

    /// A receipt of `[off, off + len)` at `r` by task `t`, combining with
    /// what is there (`reduce`) or overwriting it.
    fn write(&mut self, r: usize, off: u64, len: u64, t: TaskId, reduce: bool) {
        let epoch = self.epoch;
        let w = &mut self.ranks[r].writes;
        // The receipts starting in [off, off + len) that end by its end, but
        // a reduce's own step's (it combines with them).
        let end = off.saturating_add(len);
        let lo = w.partition_point(|&(o, _, _, _)| o < off);
        let hi = lo + w[lo..].partition_point(|&(o, _, _, _)| o < end);
        let mut keep = lo;
        for i in lo..hi {
            let (o, l, _, e) = w[i];
            if o + l > off + len || (reduce && e == epoch) {
                w[keep] = w[i];
                keep += 1;
            }
        }
        w.drain(keep..hi);
        let at = w.partition_point(|&(o, l, _, _)| (o, l) < (off, len));
        w.insert(at, (off, len, t, epoch));
        let rd = &mut self.ranks[r];
        rd.longest = rd.longest.max(len);
    }

    /// The channel of `key`'s next point-to-point move in the current step.
    fn next_slot(&mut self, key: usize) -> usize {
        let rd = &mut self.ranks[key];
        if rd.slot_step != self.step {
            rd.slot_step = self.step;
            rd.next_slot = 0;
        }
        rd.next_slot += 1;
        rd.next_slot as usize - 1
    }

    /// `key`'s sends over connections `conns` (sorted, each a run of
    /// `(conn, task)` in `sent` order) replace its last ones there.
    fn set_conn_sends(&mut self, key: usize, sent: &[(usize, u32, usize, TaskId)]) {
        let rd = &mut self.ranks[key];
        for run in sent.chunk_by(|a, b| a.1 == b.1) {
            let conn = run[0].1;
            let (a, b) = rd.conn_range(conn);
            rd.conns.splice(a..b, run.iter().map(|_| conn));
            rd.conn_sends
                .splice(a..b, run.iter().map(|&(_, _, _, t)| t));
        }
    }

    /// `t` is the last send of `key`'s channel `slot`.
    fn set_channel_send(&mut self, (key, slot): (usize, usize), t: TaskId) {
        let l = &mut self.ranks[key].last_sends;
        if l.len() <= slot {
            l.resize(slot + 1, NO_TASK);
        }
        l[slot] = t;
    }

    /// Tasks a send of `[off, off + len)` from `r` waits for, behind a
    /// compute task of the protocol's hop latency when it is non-zero.
    /// `key` is the sender's entry in `last_sends` (its rank, or its class
    /// in a quotient run), `slot` its channel there.
    #[allow(clippy::too_many_arguments)]
    fn gate<S: TaskSink>(
        &self,
        sched: &mut S,
        r: usize,
        (key, slot): (usize, usize),
        off: u64,
        len: u64,
        hop: Time,
    ) -> Result<Vec<TaskId>, CollectiveError> {
        let from = (off + 1).saturating_sub(self.ranks[r].longest);
        let w = &self.ranks[r].writes;
        let lo = w.partition_point(|&(o, _, _, _)| o < from);
        let end = off.saturating_add(len);
        // Room for a send's usual few waits (one allocation, reused below).
        let mut d: Vec<TaskId> = Vec::with_capacity(4);
        for &(o, l, t, _) in w[lo..].iter().take_while(|&&(o, _, _, _)| o < end) {
            if o + l > off {
                d.push(t);
            }
        }
        let last: &[TaskId] = if self.gating.per_channel {
            match self.ranks[key].last_sends.get(slot) {
                Some(t) if *t != NO_TASK => std::slice::from_ref(t),
                _ => &[],
            }
        } else if self.gating.per_conn {
            let rd = &self.ranks[key];
            let (a, b) = rd.conn_range(slot as u32);
            &rd.conn_sends[a..b]
        } else {
            &self.ranks[key].last_sends
        };
        if self.gating.pipelined {
            // A send waits a hop after its data came in, and for the
            // sender's previous send (in its channel) to have arrived, or
            // with `departed` only to have *left*: NCCL's connection FIFO
            // holds NCCL_STEPS = 8 slots (v2.21.5-1 src/include/device.h
            // line 22; the sender waits for a free one, src/device/
            // prims_simple.h line 130), so it posts its next step while the
            // last one is still on the wire, and each hop's latency is paid
            // along the data's path.
            // (`behind_hop`, in `d`'s own buffer.)
            if hop != Time::ZERO {
                let h = sched.compute(r as u64, hop, &d)?;
                d.clear();
                d.push(h);
            }
            if self.gating.departed {
                d.extend(last.iter().map(|&t| net::departure(t)));
            } else {
                d.extend_from_slice(last);
            }
            return Ok(d);
        }
        d.extend_from_slice(last);
        behind_hop(sched, r, hop, d)
    }
}

/// What a send of rank `r` waits for: `deps` themselves, or a compute task
/// of the protocol's hop latency behind them when it is non-zero.
pub(super) fn behind_hop<S: TaskSink>(
    sched: &mut S,
    r: usize,
    hop: Time,
    deps: Vec<TaskId>,
) -> Result<Vec<TaskId>, CollectiveError> {
    if hop == Time::ZERO {
        return Ok(deps);
    }
    Ok(vec![sched.compute(r as u64, hop, &deps)?])
}

/// Run `plan` over `group` on `topo` with elements of `elem_bytes` bytes.
pub fn simulate(
    topo: &Topology,
    group: &Group,
    plan: &Plan,
    elem_bytes: u64,
    algo: Algorithm,
    proto: Protocol,
    cal: &Calibration,
) -> Result<CollectiveTiming, CollectiveError> {
    simulate_with_faults(topo, group, plan, elem_bytes, algo, proto, cal, &[])
}

/// [`simulate`] with link faults (times from the collective's start; link
/// indices of `topo`). A flow stopped by a failed link takes the least-cost
/// detour that avoids every failed link ([`Topology::route_avoiding`]); when
/// there is none, the error names the link and counts the lost transfers.
#[allow(clippy::too_many_arguments)]
pub fn simulate_with_faults(
    topo: &Topology,
    group: &Group,
    plan: &Plan,
    elem_bytes: u64,
    algo: Algorithm,
    proto: Protocol,
    cal: &Calibration,
    faults: &[LinkFault],
) -> Result<CollectiveTiming, CollectiveError> {
    simulate_inner(
        topo, group, plan, elem_bytes, algo, proto, cal, faults, None, None,
    )
}

/// A plan that stands for a larger run with a symmetry (`channels.rs`): the
/// run's links and ranks fall into classes of `copies` each, one plan's
/// moves per class member; the plan's routes run on one link per class
/// (`link_class`, a link id of the class) and a rank's sends of one step gate
/// the next step of every rank of its class (`sender_class`), as the ranks of
/// the whole run carry one move of each copy. A link the symmetry maps onto
/// itself (or an orbit shorter than `copies`: a pod's spines' one link to
/// the cores of a three-level fat tree) carries the moves of `share` copies
/// at once, so the plan's run gives it `1 / share` of its capacity: by
/// symmetry the whole run's fair shares there are alike, and exactly that.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quotient {
    pub link_class: Vec<usize>,
    pub sender_class: Vec<usize>,
    pub copies: usize,
    /// Per link, how many copies share it (empty: every orbit is `copies`
    /// long, no link shared).
    pub share: Vec<u32>,
}

impl Quotient {
    /// How many copies' moves link `l` carries at once (1 but on shared links).
    pub fn share_of(&self, l: usize) -> u32 {
        self.share.get(l).copied().unwrap_or(1)
    }

    /// `links` as the plan's run sees them: shared links' capacity divided
    /// among the copies that share them.
    pub(crate) fn scale_links(&self, links: &mut [net::Link]) {
        for (link, &s) in links.iter_mut().zip(&self.share) {
            if s > 1 {
                link.capacity /= f64::from(s);
            }
        }
    }
}

/// Link `l`'s bandwidth as one copy of a quotient run has it (bytes/s).
pub(crate) fn copy_bandwidth(topo: &Topology, quotient: Option<&Quotient>, l: usize) -> u64 {
    let bw = topo.links()[l].bandwidth_bytes_per_s();
    quotient.map_or(bw, |q| bw / u64::from(q.share_of(l)))
}

/// What adding a plan's step to a schedule needs: the group's routes, the
/// data and slot dependencies so far, the protocol and the quotient.
pub(crate) struct StepCtx<'r, 'a> {
    pub routes: &'r mut Routes<'a>,
    pub deps: &'r mut Deps,
    pub params: super::calibration::ProtocolParams,
    pub quotient: Option<&'r Quotient>,
    pub elem_bytes: u64,
    /// A tree channel's payload rate at a rank, bytes/s
    /// ([`Calibration::tree_channel_rate`]): a send's flow never runs
    /// faster, whatever its links could give it.
    pub channel_rate: Option<f64>,
    /// Ring steps go in two slices where they cross the network
    /// ([`ring_slices`]; inside a node too with [`SLICE_IN_NODE`]).
    pub slices: bool,
    /// Buffers `add_step` reuses from step to step.
    pub scratch: StepScratch,
}

/// A step's sends and receipts, kept between steps so a run of thousands of
/// steps allocates them once (a map per step and a vector per sender cost
/// one allocation per send).
#[derive(Default)]
pub(crate) struct StepScratch {
    /// `(sender key, connection, order sent, task)` (connection 0 unless
    /// [`Gating::per_conn`]).
    sent: Vec<SentTask>,
    /// `(receiver, offset, len, task, reduces)`.
    writes: Vec<WriteTask>,
    /// A sliced step's second slice.
    second: Vec<super::plan::Move>,
    /// In-network operations: the transfers of the last step that used
    /// each switch-to-switch stretch (by its first link), and this step's.
    net_fifo: LinkTasks,
    net_fresh: LinkTasks,
    /// In-network reductions into one receiver: `(receiver, offset, len)`
    /// -> the transfers that brought the sum to the root, where a
    /// [`Via::NetworkMulticast`] of it starts.
    net_held: BTreeMap<(usize, u64, u64), Vec<TaskId>>,
}

impl StepCtx<'_, '_> {
    /// A sender's slots: its rank's, or its class's in a quotient run (a
    /// rank of the whole run sends for every copy) — but with connection
    /// slots its rank's still: a copy's connections are its own, so the
    /// whole run's rank `r` in copy `c` is the quotient's rank for copy 0,
    /// slot for slot.
    fn key(&self, r: usize) -> usize {
        match self.quotient {
            Some(q) if !self.deps.gating.per_conn => q.sender_class[r],
            _ => r,
        }
    }

    /// A link's class in a quotient run (the link itself otherwise).
    fn class(&self, l: usize) -> usize {
        self.quotient.map_or(l, |q| q.link_class[l])
    }

    /// A switch leg's gate: the sender's data and last sends, behind the
    /// NVLink hop (switch legs never leave the node).
    fn switch_gate<S: TaskSink>(
        &mut self,
        sched: &mut S,
        from: usize,
        src: u64,
        len: u64,
        conn: usize,
    ) -> Result<Vec<TaskId>, CollectiveError> {
        let key = self.key(from);
        self.deps
            .gate(sched, from, (key, conn), src, len, hop(&self.params, false))
    }

    /// One in-network operation ([`Via::InNetwork`]): every sender's data
    /// up its route to the aggregation root, then the result down to every
    /// receiver. A link shared by several routes (a leaf's link to the
    /// spine) carries the range once, when every route into its start has
    /// delivered (the switch reduces, then forwards one copy); going down, a
    /// shared link's copy is forwarded once to every route below it. Each
    /// stretch of links with the same routes through it is one transfer
    /// (cut through, as a point-to-point route, up to the next network
    /// switch). A stretch out of a network switch starts once the last
    /// step's transfers over it have left (`fifo`; this step's go to
    /// `fresh`): the
    /// switches forward operations in order, so the chunks stream through
    /// them (transfers sharing a link evenly would all finish at the end and
    /// the legs below would wait for them). Returns the transfers added.
    #[allow(clippy::too_many_arguments)]
    fn add_in_network<S: TaskSink>(
        &mut self,
        sched: &mut S,
        (dst, len): (u64, u64),
        (senders, kind): (&[(usize, u64, usize)], Via),
        receivers: &[usize],
        (sent, writes): (&mut Vec<SentTask>, &mut Vec<WriteTask>),
        (fifo, fresh): (&LinkTasks, &mut LinkTasks),
        net_held: &mut BTreeMap<(usize, u64, u64), Vec<TaskId>>,
    ) -> Result<usize, CollectiveError> {
        let bytes = len * self.elem_bytes;
        let topo: &Topology = self.routes.topo;
        let links = topo.links();
        // A held result goes nowhere up: it is at the root already.
        let held = kind == Via::NetworkMulticast;
        let mut ups: Vec<Vec<usize>> = Vec::with_capacity(senders.len());
        for &(from, _, _) in senders.iter().filter(|_| !held) {
            ups.push(self.routes.net_paths(from)?.0.to_vec());
        }
        let mut downs: Vec<Vec<usize>> = Vec::with_capacity(receivers.len());
        for &to in receivers {
            downs.push(self.routes.net_paths(to)?.1.to_vec());
        }
        let mut flows = 0;
        // Up: stretches in order of how many routes share them (a route's
        // stretches share more the nearer the root).
        let at_switch = |l: usize| {
            matches!(
                topo.component(links[l].from).kind,
                ComponentKind::NetworkSwitch { .. }
            )
        };
        let up_stretches = stretches(&ups, at_switch, false);
        let mut into: BTreeMap<usize, Vec<TaskId>> = BTreeMap::new();
        let mut first_sent: Vec<Option<TaskId>> = vec![None; senders.len()];
        for st in &up_stretches {
            let start = links[st.links[0]].from.0 as usize;
            let deps = match st.first_of {
                Some(i) => {
                    let (from, src, conn) = senders[i];
                    let key = self.key(from);
                    self.deps
                        .gate(sched, from, (key, conn), src, len, hop(&self.params, true))?
                }
                None => into.get(&start).cloned().unwrap_or_default(),
            };
            let switched = at_switch(st.links[0]);
            let mut deps = deps;
            if switched {
                deps.extend(departed(fifo, st.links[0]));
            }
            let route: Vec<usize> = st.links.iter().map(|&l| self.class(l)).collect();
            let t = sched.transfer(&route, bytes, &deps)?;
            flows += 1;
            if let Some(i) = st.first_of {
                first_sent[i] = Some(t);
            }
            if switched {
                fresh.entry(st.links[0]).or_default().push(t);
            }
            let end = links[*st.links.last().expect("a stretch has links")].to.0 as usize;
            into.entry(end).or_default().push(t);
        }
        for (i, t) in first_sent.into_iter().enumerate() {
            if let Some(t) = t {
                let (from, _, conn) = senders[i];
                sent.push((self.key(from), conn as u32, sent.len(), t));
            }
        }
        // The root: where every route up ends.
        let root = ups
            .first()
            .and_then(|u| u.last())
            .map(|&l| links[l].to.0 as usize);
        let mut at_root = root.and_then(|r| into.get(&r)).cloned().unwrap_or_default();
        if held {
            // Where the reduction that left it there arrived (else, the
            // sender's own copy of the range: as late, never earlier).
            for &(from, src, conn) in senders {
                match net_held.get(&(from, src, len)) {
                    Some(t) => at_root.extend_from_slice(t),
                    None => {
                        let key = self.key(from);
                        let gate =
                            self.deps
                                .gate(sched, from, (key, conn), src, len, Time::ZERO)?;
                        at_root.extend(gate);
                    }
                }
            }
        } else if kind == Via::NetworkReduce {
            // The sum stays at the root: the receivers' ranges are written
            // (for reads' dependencies) when it got there.
            for &to in receivers {
                net_held.insert((to, dst, len), at_root.clone());
                let t = sched.compute(to as u64, Time::ZERO, &at_root)?;
                writes.push((to, dst, len, t, false));
            }
            return Ok(flows);
        }
        // Down: stretches nearest the root first.
        let down_stretches = stretches(&downs, at_switch, true);
        let mut out_of: BTreeMap<usize, TaskId> = BTreeMap::new();
        for st in &down_stretches {
            let start = links[st.links[0]].from.0 as usize;
            let mut deps = match out_of.get(&start) {
                Some(&t) => vec![t],
                None => at_root.clone(),
            };
            let switched = at_switch(st.links[0]);
            if switched {
                deps.extend(departed(fifo, st.links[0]));
            }
            let route: Vec<usize> = st.links.iter().map(|&l| self.class(l)).collect();
            let t = sched.transfer(&route, bytes, &deps)?;
            flows += 1;
            if switched {
                fresh.entry(st.links[0]).or_default().push(t);
            }
            let end = links[*st.links.last().expect("a stretch has links")].to.0 as usize;
            out_of.insert(end, t);
            if let Some(i) = st.last_of {
                writes.push((receivers[i], dst, len, t, false));
            }
        }
        Ok(flows)
    }

    /// A move's slot among its sender's connections (0 unless
    /// [`Gating::per_conn`]).
    fn conn_slot(&self, m: &super::plan::Move) -> usize {
        if self.deps.gating.per_conn {
            m.conn as usize
        } else {
            0
        }
    }

    /// Add one step's tasks to `sched`, in two slices where the ring is
    /// sliced ([`ring_slices`]): every move's first part, then its second,
    /// as two steps (a sender's slice 1 then waits for its slice 0 to have
    /// left, its next step's slice 0 for its slice 1; a slice's forward
    /// waits for the same slice's receipt).
    pub(crate) fn add_step<S: TaskSink>(
        &mut self,
        sched: &mut S,
        step: &[super::plan::Move],
    ) -> Result<usize, CollectiveError> {
        if !self.slices || !self.step_is_sliced(step)? {
            return self.add_one_step(sched, step);
        }
        let mut second = std::mem::take(&mut self.scratch.second);
        second.clear();
        let mut first = Vec::with_capacity(step.len());
        for m in step {
            let (a, b) = slice_lens(m.len, self.elem_bytes);
            let mut m0 = *m;
            m0.len = a;
            let mut m1 = *m;
            m1.src += a;
            m1.dst += a;
            m1.len = b;
            first.push(m0);
            second.push(m1);
        }
        let flows = self.add_one_step(sched, &first)? + self.add_one_step(sched, &second)?;
        self.scratch.second = second;
        Ok(flows)
    }

    /// A ring step is sliced where it crosses the network (or always with
    /// [`SLICE_IN_NODE`]).
    fn step_is_sliced(&mut self, step: &[super::plan::Move]) -> Result<bool, CollectiveError> {
        if SLICE_IN_NODE {
            return Ok(true);
        }
        for m in step {
            if m.via == Via::P2p && m.from != m.to && self.routes.crosses_network(m.from, m.to)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    fn add_one_step<S: TaskSink>(
        &mut self,
        sched: &mut S,
        step: &[super::plan::Move],
    ) -> Result<usize, CollectiveError> {
        let elem_bytes = self.elem_bytes;
        let mut flows = 0usize;
        let mut scratch = std::mem::take(&mut self.scratch);
        let StepScratch {
            sent,
            writes,
            net_fifo,
            net_fresh,
            net_held,
            ..
        } = &mut scratch;
        sent.clear();
        writes.clear();
        let per_channel = self.deps.gating.per_channel;
        let per_conn = self.deps.gating.per_conn;
        if per_channel {
            self.deps.step = self.deps.step.wrapping_add(1).max(1);
        }
        // Switch groups: (receiver, offset, len) for reduce; (sender, ...) for multicast.
        let mut reduce_groups: BTreeMap<(usize, u64, u64), Vec<SwitchLoad>> = BTreeMap::new();
        let mut multicast_groups: BTreeMap<(usize, u64, u64, usize), Vec<usize>> = BTreeMap::new();
        // In-network operations by (receiver range, connection): senders
        // (rank, offset, slot) and receivers, each once, in plan order.
        // (senders, receivers, which kind of in-network move).
        type NetGroup = (Vec<(usize, u64, usize)>, Vec<usize>, Via);
        let mut net_groups: BTreeMap<(u64, u64, u32), NetGroup> = BTreeMap::new();
        for m in step {
            // Empty moves count for the slots: ring `j`'s send is a rank's
            // `j`-th whether or not an earlier ring's piece was empty.
            let slot = if per_channel && m.via == Via::P2p && m.from != m.to {
                let key = self.key(m.from);
                self.deps.next_slot(key)
            } else {
                self.conn_slot(m)
            };
            let bytes = m.len * elem_bytes;
            if bytes == 0 {
                continue;
            }
            match m.via {
                Via::P2p => {
                    if m.from == m.to {
                        continue;
                    }
                    let net = self.routes.crosses_network(m.from, m.to)?;
                    let key = (self.key(m.from), slot);
                    let gate =
                        self.deps
                            .gate(sched, m.from, key, m.src, m.len, hop(&self.params, net))?;
                    // The channel's thread block moves the chunk no faster
                    // than its own rate: the flow's cap (what it leaves of
                    // its links goes to other flows).
                    let cap = self.channel_rate.unwrap_or(f64::INFINITY);
                    let t = match self.quotient {
                        Some(q) => {
                            let route: Vec<usize> = self
                                .routes
                                .get_lane(m.from, m.to, m.lane)?
                                .iter()
                                .map(|&l| q.link_class[l])
                                .collect();
                            sched.transfer_capped(&route, bytes, cap, &gate)?
                        }
                        None => sched.transfer_capped(
                            self.routes.get_lane(m.from, m.to, m.lane)?,
                            bytes,
                            cap,
                            &gate,
                        )?,
                    };
                    flows += 1;
                    if per_channel {
                        // Its channel's slot (unique in the step: no later
                        // send of this step reads it).
                        self.deps.set_channel_send(key, t);
                    } else {
                        sent.push((key.0, slot as u32, sent.len(), t));
                    }
                    writes.push((m.to, m.dst, m.len, t, m.reduce));
                }
                Via::SwitchReduce => reduce_groups
                    .entry((m.to, m.dst, m.len))
                    .or_default()
                    .push((m.from, m.src, self.conn_slot(m))),
                Via::SwitchMulticast => multicast_groups
                    .entry((m.from, m.src, m.len, self.conn_slot(m)))
                    .or_default()
                    .push(m.to),
                Via::InNetwork | Via::NetworkReduce | Via::NetworkMulticast => {
                    let g = net_groups
                        .entry((m.dst, m.len, m.conn))
                        .or_insert_with(|| (Vec::new(), Vec::new(), m.via));
                    if !g.0.iter().any(|s: &(usize, u64, usize)| s.0 == m.from) {
                        g.0.push((m.from, m.src, self.conn_slot(m)));
                    }
                    if !g.1.contains(&m.to) {
                        g.1.push(m.to);
                    }
                }
            }
        }
        let net = !net_groups.is_empty();
        for ((dst, len, _), (senders, receivers, kind)) in net_groups {
            let fifo = (&*net_fifo, &mut *net_fresh);
            flows += self.add_in_network(
                sched,
                (dst, len),
                (&senders, kind),
                &receivers,
                (sent, writes),
                fifo,
                net_held,
            )?;
        }
        if net {
            net_fifo.append(net_fresh);
        }
        for ((to, dst, len), senders) in reduce_groups {
            let bytes = len * elem_bytes;
            let mut ups = Vec::with_capacity(senders.len());
            for (from, src, conn) in senders {
                let (up, _) = self.routes.switch_links(from)?;
                let up = self.class(up);
                let gate = self.switch_gate(sched, from, src, len, conn)?;
                let t = sched.transfer(&[up], bytes, &gate)?;
                sent.push((self.key(from), conn as u32, sent.len(), t));
                ups.push(t);
            }
            let (_, down) = self.routes.switch_links(to)?;
            let down = self.class(down);
            let t = sched.transfer(&[down], bytes, &ups)?;
            writes.push((to, dst, len, t, false));
            flows += ups.len() + 1;
        }
        for ((from, src, len, conn), receivers) in multicast_groups {
            let bytes = len * elem_bytes;
            let (up, _) = self.routes.switch_links(from)?;
            let up = self.class(up);
            let gate = self.switch_gate(sched, from, src, len, conn)?;
            let u = sched.transfer(&[up], bytes, &gate)?;
            sent.push((self.key(from), conn as u32, sent.len(), u));
            for to in receivers {
                let (_, down) = self.routes.switch_links(to)?;
                let down = self.class(down);
                let t = sched.transfer(&[down], bytes, &[u])?;
                writes.push((to, src, len, t, false));
                flows += 1;
            }
            flows += 1;
        }
        // Writes land after the step's reads (a step reads its start state).
        self.deps.epoch = self.deps.epoch.wrapping_add(1);
        for &(r, off, len, t, reduce) in writes.iter() {
            self.deps.write(r, off, len, t, reduce);
        }
        // Each sender's sends in the order sent, senders in ascending order;
        // a sender's list is refilled in place (per connection: that
        // connection's).
        sent.sort_unstable_by_key(|&(k, c, i, _)| (k, c, i));
        for run in sent.chunk_by(|a, b| a.0 == b.0) {
            if per_conn {
                self.deps.set_conn_sends(run[0].0, run);
                continue;
            }
            let last = &mut self.deps.ranks[run[0].0].last_sends;
            last.clear();
            last.extend(run.iter().map(|&(_, _, _, t)| t));
        }
        self.scratch = scratch;
        Ok(flows)
    }
}

/// The departures of the last step's transfers over `link`'s stretch.
fn departed(fifo: &LinkTasks, link: usize) -> impl Iterator<Item = TaskId> + '_ {
    fifo.get(&link)
        .into_iter()
        .flatten()
        .map(|&t| net::departure(t))
}

/// A run of links that the same routes of an in-network operation share,
/// within one switch's reach (a stretch never passes a network switch).
struct Stretch {
    links: Vec<usize>,
    /// How many routes take it.
    shared: usize,
    /// Its first link's place on the route that found it.
    depth: usize,
    /// The route it starts (its first links), if any.
    first_of: Option<usize>,
    /// The route it ends, if any.
    last_of: Option<usize>,
}

/// `routes` cut into stretches (each once): where the number of routes
/// taking the next link changes, and at every network switch (`at_switch`:
/// does a link leave one?). Up an aggregation tree (`down` false) the
/// sharers only grow: fewest first, then nearest the route's start, so a
/// stretch's inputs come before it; down it the reverse order of sharers.
fn stretches(routes: &[Vec<usize>], at_switch: impl Fn(usize) -> bool, down: bool) -> Vec<Stretch> {
    let mut count: BTreeMap<usize, usize> = BTreeMap::new();
    for r in routes {
        for &l in r {
            *count.entry(l).or_default() += 1;
        }
    }
    let mut seen: BTreeMap<usize, ()> = BTreeMap::new();
    let mut out: Vec<Stretch> = Vec::new();
    for (i, r) in routes.iter().enumerate() {
        let mut k = 0;
        while k < r.len() {
            let shared = count[&r[k]];
            let mut e = k + 1;
            while e < r.len() && count[&r[e]] == shared && !at_switch(r[e]) {
                e += 1;
            }
            if seen.insert(r[k], ()).is_none() {
                out.push(Stretch {
                    links: r[k..e].to_vec(),
                    shared,
                    depth: k,
                    first_of: (k == 0).then_some(i),
                    last_of: (e == r.len()).then_some(i),
                });
            }
            k = e;
        }
    }
    if down {
        out.sort_by_key(|s| (std::cmp::Reverse(s.shared), s.depth));
    } else {
        out.sort_by_key(|s| (s.shared, s.depth));
    }
    out
}

/// [`simulate_with_faults`], optionally on a quotient (no faults then);
/// `steps`: filled with each step's completion (the last of its tasks to
/// finish, from the collective's start, without the base latency).
#[allow(clippy::too_many_arguments)]
pub(crate) fn simulate_inner(
    topo: &Topology,
    group: &Group,
    plan: &Plan,
    elem_bytes: u64,
    algo: Algorithm,
    proto: Protocol,
    cal: &Calibration,
    faults: &[LinkFault],
    quotient: Option<&Quotient>,
    steps: Option<&mut Vec<Time>>,
) -> Result<CollectiveTiming, CollectiveError> {
    let n = group.len();
    if plan.ranks != n {
        return Err(CollectiveError::Buffers(format!(
            "plan for {} ranks on a group of {n}",
            plan.ranks
        )));
    }
    let params = cal.params(algo, proto);
    let mut routes = Routes::new(topo, group);
    if algo == Algorithm::Nvls {
        routes.check_nvls()?;
    }
    if algo == Algorithm::NvlsTree {
        routes.check_switch_reduce()?;
    }
    let mut sched = Schedule::new();
    let mut deps = Deps::new(n, Gating::of(algo, cal));
    let mut flows = 0usize;
    let mut ctx = StepCtx {
        routes: &mut routes,
        deps: &mut deps,
        params,
        quotient,
        elem_bytes,
        channel_rate: cal.tree_channel_rate(algo, proto),
        slices: ring_slices(cal, algo, proto, true),
        scratch: Default::default(),
    };
    // Where each step's tasks end (task ids are in generation order).
    let mut ends = Vec::new();
    for step in &plan.steps {
        flows += ctx.add_step(&mut sched, step)?;
        if steps.is_some() {
            ends.push(sched.len());
        }
    }
    let mut links = protocol_links(topo, cal, algo, proto);
    // A failed or degraded link binds whatever it stood for.
    let rate = ProtocolRate::new(cal, algo, proto);
    for f in faults {
        if let Some(l) = topo.links().get(f.link) {
            links[f.link] = rate.link(l);
        }
    }
    if let Some(q) = quotient {
        q.scale_links(&mut links);
    }
    let mut sim: NetSim<TaskId> = NetSim::new(&links, 0)?;
    if !faults.is_empty() {
        for f in faults {
            sim.add_fault(*f)?;
        }
        // The callback outlives this borrow of `topo`: it gets its own copy.
        let detour = topo.clone();
        sim.set_reroute(Box::new(move |req| {
            let (first, last) = (*req.route.first()?, *req.route.last()?);
            let src = detour.links().get(first)?.from;
            let dst = detour.links().get(last)?.to;
            let avoid: Vec<LinkId> = req.failed_links.iter().map(|&l| LinkId(l as u32)).collect();
            let r = detour.route_avoiding(src, dst, &avoid)?;
            Some(r.into_iter().map(|l| l.0 as usize).collect())
        }));
    }
    let report = sched.run(&mut sim)?;
    if let Some((_, u)) = report.undeliverable.first() {
        let l = &topo.links()[u.link];
        return Err(CollectiveError::Undeliverable {
            transfers: report.undeliverable.len(),
            link: u.link,
            name: format!(
                "{} -> {}",
                topo.component(l.from).name,
                topo.component(l.to).name
            ),
            at: u.at,
        });
    }
    if !report.undeliverable.is_empty() || !report.not_run.is_empty() {
        return Err(CollectiveError::Buffers(format!(
            "{} transfers undeliverable, {} tasks not run",
            report.undeliverable.len(),
            report.not_run.len()
        )));
    }
    if let Some(out) = steps {
        out.clear();
        let mut from = 0;
        for &to in &ends {
            let done = report.finish[from..to].iter().flatten().max();
            out.push(done.copied().unwrap_or(Time::ZERO));
            from = to;
        }
    }
    let time = report.makespan.checked_add(us(params.base_us))?;
    let flows = flows * quotient.map_or(1, |q| q.copies);
    Ok(CollectiveTiming { time, flows })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A rank with more peers than its short list holds: every route, asked
    /// for twice in a scrambled order, is the topology's, and each pair is
    /// routed once (the pairs past the list come back from the map).
    #[test]
    fn routes_past_a_ranks_short_list_come_from_the_map_and_are_routed_once() {
        let topo = crate::topology::load("switch:20", &[]).unwrap();
        let group = Group::first(&topo, 20).unwrap();
        let mut routes = Routes::new(&topo, &group);
        let pairs: Vec<(usize, usize)> = (0..20)
            .flat_map(|a| (0..20).map(move |b| (a, (b * 7 + a) % 20)))
            .filter(|&(a, b)| a != b)
            .collect();
        for _ in 0..2 {
            for &(a, b) in &pairs {
                let want: Vec<usize> = topo
                    .route_devices(a as u32, b as u32, 0)
                    .unwrap()
                    .iter()
                    .map(|l| l.0 as usize)
                    .collect();
                assert_eq!(routes.get(a, b).unwrap(), &want[..], "{a} -> {b}");
            }
        }
        assert_eq!(routes.offsets.len() - 1, pairs.len());
        assert!(routes.near_len.iter().all(|&k| usize::from(k) == NEAR));
        assert_eq!(routes.far.len(), 20 * (19 - NEAR));
    }
}
