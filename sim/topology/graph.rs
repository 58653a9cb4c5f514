//! The built topology: components (nodes) and directed links (edges) in a
//! petgraph `DiGraph` whose node and edge indices equal the component and link
//! ids, plus the accelerators in device-id order and the routing policy.

use std::collections::BTreeMap;
use std::fmt;

use petgraph::graph::{DiGraph, NodeIndex};
use serde::Serialize;

use crate::base::DType;

use super::spec::DeviceKind;
use super::units::{Bandwidth, ByteSize, Duration, FlopRate};

/// Index of a component in [`Topology::components`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct ComponentId(pub u32);

/// Index of a directed link in [`Topology::links`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct LinkId(pub u32);

impl fmt::Display for LinkId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "L{}", self.0)
    }
}

/// What a component is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "type")]
pub enum ComponentKind {
    /// An accelerator (or CPU used as a device); `index` is its device id.
    Device {
        kind: DeviceKind,
        index: u32,
    },
    /// A node's CPUs and DRAM.
    Host,
    /// An NVLink switch (one logical switch per node).
    NvSwitch {
        in_switch_reduction: bool,
    },
    PcieSwitch,
    Nic,
    /// A network switch; level 0 = leaf, 1 = spine.
    NetworkSwitch {
        level: u32,
        in_switch_reduction: bool,
    },
}

/// A memory scope reachable from a device (TVM's `memory_scope`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MemoryScope {
    /// `global` (HBM), `shared` (on-chip), `host` (pinned host DRAM).
    pub scope: String,
    pub capacity: ByteSize,
    /// Bandwidth of the memory itself.
    pub bandwidth: Bandwidth,
    /// Where the memory is: the device itself, or the host for `host`.
    pub location: ComponentId,
}

/// A node of the graph.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Component {
    pub id: ComponentId,
    /// Unique name, e.g. `n0.gpu3`, `n1.nic0`, `leaf2`.
    pub name: String,
    pub kind: ComponentKind,
    /// Model name (GPU model, NIC model...).
    pub model: String,
    /// The node (server) it belongs to; `None` for network switches.
    pub node: Option<u32>,
    /// Whether traffic between other components may pass through it.
    pub forwards: bool,
    /// Rail of a rail-optimized cluster: GPU `k` of a node, its NIC `k` and
    /// the leaf switches of rail `k` (None elsewhere).
    pub rail: Option<u32>,
    /// A device's NICs by their rails, in the order its channels take them
    /// (channel `c` leaves the node through `nic_rails[c % len]`, as NCCL
    /// cycles a GPU's local NICs over its channels); empty without NICs.
    #[serde(skip_serializing_if = "at_most_one")]
    pub nic_rails: Vec<u32>,
    /// Peak dense FLOP/s per element type (devices and hosts).
    pub flops: BTreeMap<DType, FlopRate>,
    /// Memory scopes (devices: global, shared, host; hosts: their DRAM as `global`).
    pub memory: Vec<MemoryScope>,
}

/// Shown (`topology show --format json`) only where a device has several
/// NICs: with one, `rail` says it.
fn at_most_one(rails: &[u32]) -> bool {
    rails.len() <= 1
}

/// The class of a link, which says what technology a mesh axis crosses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LinkClass {
    Nvlink,
    Ici,
    Pcie,
    Network,
}

impl fmt::Display for LinkClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LinkClass::Nvlink => "nvlink",
            LinkClass::Ici => "ici",
            LinkClass::Pcie => "pcie",
            LinkClass::Network => "network",
        })
    }
}

/// One direction of a physical link.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Link {
    pub id: LinkId,
    pub from: ComponentId,
    pub to: ComponentId,
    pub class: LinkClass,
    /// Bytes per second in this direction, all lanes together.
    pub bandwidth: Bandwidth,
    /// Lanes bundled in this link (NVLink links, PCIe lanes, ...).
    pub lanes: u32,
    pub latency: Duration,
    /// The opposite direction of the same physical link.
    pub reverse: LinkId,
    /// False when both directions share one capacity (half duplex): a network
    /// simulator must then count the two directions against one budget.
    pub full_duplex: bool,
}

impl Link {
    /// Bytes per second (the network simulator's unit).
    pub fn bandwidth_bytes_per_s(&self) -> u64 {
        self.bandwidth.0
    }
    /// Latency in picoseconds.
    pub fn latency_ps(&self) -> u64 {
        self.latency.0
    }
}

/// How routes are chosen.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "policy")]
pub enum RoutingPolicy {
    /// Least cost (a link costs 1e15 / bandwidth); ties broken by lowest
    /// link id, or by flow hash when `ecmp`, except that a leaf climbing to
    /// a spine picks by the destination's node under `destination` routing
    /// (`spines`, as the fat tree was built: adaptive has one spine).
    ShortestPath {
        ecmp: bool,
        spines: super::spec::NetworkRouting,
    },
    /// Devices on a grid of `dims` (device id = row-major coordinates): correct
    /// dimension 0 first, then 1, ...; on a torus the shorter way round, ties going up.
    DimensionOrder { dims: Vec<u32>, wrap: bool },
}

/// A built topology.
#[derive(Debug, Clone)]
pub struct Topology {
    pub name: String,
    pub description: String,
    pub sources: Vec<String>,
    pub(crate) components: Vec<Component>,
    pub(crate) links: Vec<Link>,
    /// Device id -> component.
    pub(crate) devices: Vec<ComponentId>,
    pub(crate) graph: DiGraph<ComponentId, LinkId>,
    pub(crate) routing: RoutingPolicy,
    pub(crate) by_name: BTreeMap<String, ComponentId>,
    /// Rails of a rail-optimized cluster (one past the highest rail; 0 when
    /// none): ECMP keys a flow by its rail offset modulo this.
    pub(crate) rails: u32,
    /// Per component, its links to (out) and from (in) forwarding
    /// components, in link-id order: a least-cost search passes through
    /// nothing else, so a switch of thousands of GPUs costs its few relays
    /// per step, not its every port.
    pub(crate) relay_out: Vec<Vec<LinkId>>,
    pub(crate) relay_in: Vec<Vec<LinkId>>,
    /// Least-cost routes already computed (see [`RouteCache`]).
    pub(crate) route_cache: RouteCache,
    /// The file it was built from (overrides applied), when built from one.
    pub(crate) file: Option<std::sync::Arc<super::spec::TopologyFile>>,
    /// The run's collective settings (`[collective] algorithms`, ...).
    pub(crate) collective_settings: std::sync::Arc<super::settings::CollectiveSettings>,
    /// The file's name and text, when built from one (for errors found in
    /// it later, with their line and column).
    pub(crate) source: Option<std::sync::Arc<(String, String)>>,
    /// Per directed link: whether no traffic can fill it before the links
    /// that feed it or drain it are full (an adaptive fat tree's layer
    /// links, as wide as the NIC links below them).
    pub(crate) never_binding: Vec<bool>,
}

/// Routes by `(source, destination, ECMP flow id, NIC lane)`: a collective routes the
/// same device pairs again and again, and a least-cost search on a machine of
/// thousands of devices costs far more than a lookup. Only looked up, never
/// iterated; a copy of the topology starts empty. Bounded: cleared when full.
/// The routes lie end to end in one list (a map entry is where its route
/// starts and ends there), not one allocation per route.
#[derive(Default)]
pub(crate) struct RouteCache(std::sync::Mutex<RouteTable>);

#[derive(Default)]
struct RouteTable {
    spans: std::collections::HashMap<(u32, u32, u64, u32), (u32, u32)>,
    links: Vec<LinkId>,
}

impl RouteCache {
    const MAX_ENTRIES: usize = 1 << 20;
    /// Links held in all (spans index the list with `u32`; 64 MiB).
    const MAX_LINKS: usize = 1 << 24;

    pub(crate) fn get(&self, key: (u32, u32, u64, u32)) -> Option<Vec<LinkId>> {
        let t = self.0.lock().ok()?;
        let &(a, b) = t.spans.get(&key)?;
        Some(t.links[a as usize..b as usize].to_vec())
    }

    pub(crate) fn insert(&self, key: (u32, u32, u64, u32), route: &[LinkId]) {
        if let Ok(mut t) = self.0.lock() {
            if t.spans.len() >= Self::MAX_ENTRIES || t.links.len() + route.len() > Self::MAX_LINKS {
                t.spans.clear();
                t.links.clear();
            }
            let a = t.links.len() as u32;
            t.links.extend_from_slice(route);
            let b = t.links.len() as u32;
            t.spans.insert(key, (a, b));
        }
    }
}

impl Clone for RouteCache {
    fn clone(&self) -> Self {
        RouteCache::default()
    }
}

impl std::fmt::Debug for RouteCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RouteCache")
    }
}

impl Topology {
    /// Every component, indexed by [`ComponentId`].
    pub fn components(&self) -> &[Component] {
        &self.components
    }
    /// Every directed link, indexed by [`LinkId`].
    pub fn links(&self) -> &[Link] {
        &self.links
    }
    pub fn component(&self, id: ComponentId) -> &Component {
        &self.components[id.0 as usize]
    }
    pub fn link(&self, id: LinkId) -> &Link {
        &self.links[id.0 as usize]
    }
    /// Number of accelerators.
    pub fn num_devices(&self) -> u32 {
        self.devices.len() as u32
    }
    /// The topology file's own collective calibration (`[collective]`), if any.
    pub fn collective_calibration(&self) -> Option<&toml::Table> {
        self.file.as_ref()?.collective.as_ref()
    }
    /// The name and text of the file this was built from, if any (overrides
    /// not applied): where a later reader of its tables locates an error.
    pub fn source(&self) -> Option<(&str, &str)> {
        self.source
            .as_deref()
            .map(|(f, t)| (f.as_str(), t.as_str()))
    }
    /// The run's collective settings with their origins (empty unless the
    /// file or an override states them).
    pub fn collective_settings(&self) -> &super::settings::CollectiveSettings {
        &self.collective_settings
    }
    /// The topology file this was built from, overrides applied (what a
    /// calibration writes back with its fit added).
    pub fn file(&self) -> Option<&super::spec::TopologyFile> {
        self.file.as_deref()
    }
    /// The fat tree joining the nodes, as it was built (`None`: one node,
    /// no network, or not built from a file).
    pub fn fat_tree(&self) -> Option<super::FatTree> {
        let f = self.file()?;
        let net = f.network.as_ref()?;
        if f.nodes < 2 || self.rails == 0 {
            return None;
        }
        super::FatTree::new(
            f.nodes,
            self.rails,
            net.switch_radix,
            net.oversubscription,
            net.core_oversubscription,
        )
        .ok()
    }
    /// Whether directed link `l` can never bound a flow: every flow it
    /// carries enters it from (or leaves it into) links whose capacities sum
    /// to at most its own, so max-min sharing freezes those flows elsewhere
    /// first (ties go to the lower link id, the links below). The flow model
    /// may leave it out of the sharing; its latency still counts.
    pub fn never_binding(&self, l: LinkId) -> bool {
        self.never_binding
            .get(l.0 as usize)
            .copied()
            .unwrap_or(false)
    }
    /// The component of device `index` (device ids are 0..num_devices).
    pub fn device(&self, index: u32) -> Option<ComponentId> {
        self.devices.get(index as usize).copied()
    }
    /// All device components in device-id order.
    pub fn devices(&self) -> &[ComponentId] {
        &self.devices
    }
    /// The component called `name`.
    pub fn by_name(&self, name: &str) -> Option<ComponentId> {
        self.by_name.get(name).copied()
    }
    pub fn routing(&self) -> &RoutingPolicy {
        &self.routing
    }
    /// The petgraph view (node weight = component id, edge weight = link id;
    /// indices coincide with the ids).
    pub fn graph(&self) -> &DiGraph<ComponentId, LinkId> {
        &self.graph
    }
    /// Outgoing links of `c`, in link-id order.
    pub fn out_links(&self, c: ComponentId) -> Vec<LinkId> {
        let mut v: Vec<LinkId> = self
            .graph
            .edges(NodeIndex::new(c.0 as usize))
            .map(|e| *e.weight())
            .collect();
        v.sort_unstable();
        v
    }
    /// Incoming links of `c`, in link-id order.
    pub fn in_links(&self, c: ComponentId) -> Vec<LinkId> {
        let mut v: Vec<LinkId> = self
            .graph
            .edges_directed(NodeIndex::new(c.0 as usize), petgraph::Direction::Incoming)
            .map(|e| *e.weight())
            .collect();
        v.sort_unstable();
        v
    }
    /// Memory scope `scope` of component `c`.
    pub fn memory_scope(&self, c: ComponentId, scope: &str) -> Option<&MemoryScope> {
        self.component(c).memory.iter().find(|m| m.scope == scope)
    }
}

/// Builds a [`Topology`] component by component (used by the layout generators).
#[derive(Debug, Default)]
pub(crate) struct Builder {
    components: Vec<Component>,
    links: Vec<Link>,
    devices: Vec<ComponentId>,
    never_binding: Vec<LinkId>,
}

/// The figures of one physical link.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LinkParams {
    pub class: LinkClass,
    pub bandwidth: Bandwidth,
    pub lanes: u32,
    pub latency: Duration,
    pub full_duplex: bool,
}

impl Builder {
    pub fn add(
        &mut self,
        name: String,
        kind: ComponentKind,
        model: &str,
        node: Option<u32>,
        forwards: bool,
    ) -> ComponentId {
        let id = ComponentId(self.components.len() as u32);
        if matches!(kind, ComponentKind::Device { .. }) {
            self.devices.push(id);
        }
        self.components.push(Component {
            id,
            name,
            kind,
            model: model.to_string(),
            node,
            forwards,
            rail: None,
            nic_rails: Vec::new(),
            flops: BTreeMap::new(),
            memory: Vec::new(),
        });
        id
    }

    pub fn component_mut(&mut self, id: ComponentId) -> &mut Component {
        &mut self.components[id.0 as usize]
    }

    pub fn num_devices(&self) -> u32 {
        self.devices.len() as u32
    }

    /// Add a physical link: two directed links `a->b` then `b->a`.
    pub fn connect(&mut self, a: ComponentId, b: ComponentId, p: LinkParams) -> LinkId {
        let ab = LinkId(self.links.len() as u32);
        let ba = LinkId(ab.0 + 1);
        for (id, from, to, reverse) in [(ab, a, b, ba), (ba, b, a, ab)] {
            self.links.push(Link {
                id,
                from,
                to,
                class: p.class,
                bandwidth: p.bandwidth,
                lanes: p.lanes,
                latency: p.latency,
                reverse,
                full_duplex: p.full_duplex,
            });
        }
        ab
    }

    /// Mark directed link `l` as one no traffic can fill before the links
    /// that feed it (or drain it) are full ([`Topology::never_binding`]).
    pub fn mark_never_binding(&mut self, l: LinkId) {
        self.never_binding.push(l);
    }

    pub fn finish(
        self,
        name: String,
        description: String,
        sources: Vec<String>,
        routing: RoutingPolicy,
    ) -> Topology {
        let mut graph = DiGraph::with_capacity(self.components.len(), self.links.len());
        for c in &self.components {
            graph.add_node(c.id);
        }
        for l in &self.links {
            graph.add_edge(
                NodeIndex::new(l.from.0 as usize),
                NodeIndex::new(l.to.0 as usize),
                l.id,
            );
        }
        let by_name = self
            .components
            .iter()
            .map(|c| (c.name.clone(), c.id))
            .collect();
        let rails = self
            .components
            .iter()
            .filter_map(|c| c.rail)
            .max()
            .map_or(0, |r| r + 1);
        let n = self.components.len();
        let (mut relay_out, mut relay_in) = (vec![Vec::new(); n], vec![Vec::new(); n]);
        for l in &self.links {
            if self.components[l.to.0 as usize].forwards {
                relay_out[l.from.0 as usize].push(l.id);
            }
            if self.components[l.from.0 as usize].forwards {
                relay_in[l.to.0 as usize].push(l.id);
            }
        }
        let mut never_binding = vec![false; self.links.len()];
        for l in &self.never_binding {
            never_binding[l.0 as usize] = true;
        }
        Topology {
            name,
            description,
            sources,
            rails,
            never_binding,
            relay_out,
            relay_in,
            components: self.components,
            links: self.links,
            devices: self.devices,
            graph,
            routing,
            by_name,
            route_cache: RouteCache::default(),
            file: None,
            collective_settings: Default::default(),
            source: None,
        }
    }
}
