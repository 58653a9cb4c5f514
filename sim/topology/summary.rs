//! Figures that describe a topology at a glance: bisection bandwidth, what a
//! device reaches over which link classes at what bandwidth, and its memory scopes.

use std::collections::BTreeMap;

use petgraph::algo::dinics;
use petgraph::graph::{DiGraph, NodeIndex};
use serde::Serialize;

use super::graph::{ComponentId, ComponentKind, LinkClass, RoutingPolicy};
use super::units::{Bandwidth, Duration};
use super::{Topology, TopologyError};

/// The peers of one device that are reached the same way.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NeighbourClass {
    /// The slowest class crossed (network > pcie > ici > nvlink).
    pub class: LinkClass,
    /// Every class on the route, in order of first use.
    pub path_classes: Vec<LinkClass>,
    pub hops: u32,
    /// How many devices are reached this way.
    pub peers: u32,
    /// Bottleneck (slowest link) of the route, per direction.
    pub bandwidth: Bandwidth,
    /// Sum of link latencies of the route.
    pub latency: Duration,
}

/// What a route crosses: its link classes in order of first use, hop count,
/// bottleneck bandwidth and summed latency.
#[derive(Debug, Clone, Default)]
struct PathFigures {
    classes: Vec<LinkClass>,
    hops: u32,
    bandwidth: Option<Bandwidth>,
    latency: Duration,
}

impl PathFigures {
    fn extend(&mut self, link: &super::graph::Link) {
        if !self.classes.contains(&link.class) {
            self.classes.push(link.class);
        }
        self.hops += 1;
        self.bandwidth = Some(
            self.bandwidth
                .map_or(link.bandwidth, |b| b.min(link.bandwidth)),
        );
        self.latency = Duration(self.latency.0 + link.latency.0);
    }
}

/// The at-a-glance figures of a topology.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Summary {
    pub devices: u32,
    /// Components by kind name.
    pub component_counts: BTreeMap<String, u32>,
    /// Directed links by class.
    pub link_counts: BTreeMap<LinkClass, u32>,
    /// Maximum flow, one direction, from devices `0..n/2` to `n/2..n`.
    pub bisection: Bandwidth,
    /// How device 0 reaches every other device.
    pub neighbours: Vec<NeighbourClass>,
}

impl Topology {
    /// Summarize the topology (routes from device 0, max-flow bisection).
    pub fn summary(&self) -> Result<Summary, TopologyError> {
        let mut component_counts = BTreeMap::new();
        for c in &self.components {
            *component_counts
                .entry(kind_name(&c.kind).to_string())
                .or_insert(0) += 1;
        }
        let mut link_counts = BTreeMap::new();
        for l in &self.links {
            *link_counts.entry(l.class).or_insert(0) += 1;
        }
        Ok(Summary {
            devices: self.num_devices(),
            component_counts,
            link_counts,
            bisection: self.bisection_bandwidth(),
            neighbours: self.neighbour_classes(0)?,
        })
    }

    /// How device `from` reaches each other device, grouped by (classes, hops, bandwidth).
    pub fn neighbour_classes(&self, from: u32) -> Result<Vec<NeighbourClass>, TopologyError> {
        let mut groups: BTreeMap<(LinkClass, Vec<LinkClass>, u32, Bandwidth, Duration), u32> =
            BTreeMap::new();
        let grid = match self.routing() {
            RoutingPolicy::DimensionOrder { dims, wrap } if from < self.num_devices() => {
                Some(self.dimension_order_paths(from, dims, *wrap)?)
            }
            _ => None,
        };
        for to in 0..self.num_devices() {
            if to == from {
                continue;
            }
            let path = match &grid {
                Some(paths) => paths[to as usize].clone(),
                None => {
                    let mut p = PathFigures::default();
                    for l in self.route_devices(from, to, 0)? {
                        p.extend(self.link(l));
                    }
                    p
                }
            };
            let class = *path
                .classes
                .iter()
                .max()
                .expect("distinct devices have a non-empty route");
            let bandwidth = path.bandwidth.expect("non-empty");
            *groups
                .entry((class, path.classes, path.hops, bandwidth, path.latency))
                .or_insert(0) += 1;
        }
        Ok(groups
            .into_iter()
            .map(
                |((class, path_classes, hops, bandwidth, latency), peers)| NeighbourClass {
                    class,
                    path_classes,
                    hops,
                    peers,
                    bandwidth,
                    latency,
                },
            )
            .collect())
    }

    /// The figures of every dimension-order route from device `from`,
    /// without walking each route: the route to `b` is the route to the
    /// device before `b` on it plus one link (the last hop moves the last
    /// dimension where `from` and `b` differ one step, and one step short of
    /// `b` that dimension still goes the same way), so each device extends
    /// an already known route. Linear in devices where walking every route
    /// is quadratic on a ring. `route_devices` gives the same routes (tested).
    fn dimension_order_paths(
        &self,
        from: u32,
        dims: &[u32],
        wrap: bool,
    ) -> Result<Vec<PathFigures>, TopologyError> {
        let strides = super::build::strides(dims);
        let before = |b: u32| -> u32 {
            let coord = |x: u32, k: usize| (x / strides[k]) % dims[k];
            let Some(k) = (0..dims.len())
                .rev()
                .find(|&k| coord(from, k) != coord(b, k))
            else {
                return from;
            };
            let (size, c, t) = (dims[k], coord(from, k), coord(b, k));
            let up = (t + size - c) % size;
            let go_up = if wrap { up <= size - up } else { t > c };
            let back = if go_up {
                (t + size - 1) % size
            } else {
                (t + 1) % size
            };
            b - t * strides[k] + back * strides[k]
        };
        let n = self.num_devices() as usize;
        let mut paths: Vec<Option<PathFigures>> = vec![None; n];
        paths[from as usize] = Some(PathFigures::default());
        let mut chain = Vec::new();
        for b in 0..n as u32 {
            chain.clear();
            let mut x = b;
            while paths[x as usize].is_none() {
                chain.push(x);
                x = before(x);
            }
            for &y in chain.iter().rev() {
                let prev = before(y);
                let link = match self.fabric_link(prev, y) {
                    Some(l) => l,
                    // No such link: the route search reports it.
                    None => {
                        return Err(self
                            .route_devices(from, y, 0)
                            .err()
                            .unwrap_or(TopologyError::NoSuchDevice(y, self.num_devices())))
                    }
                };
                let mut p = paths[prev as usize].clone().expect("filled before");
                p.extend(self.link(link));
                paths[y as usize] = Some(p);
            }
        }
        Ok(paths.into_iter().map(|p| p.unwrap_or_default()).collect())
    }

    /// Maximum flow in one direction from the first half of the devices (by
    /// id) to the second half, over all links; devices carry no transit
    /// traffic (flow never enters the sending half or leaves the receiving
    /// half). 0 with fewer than two devices.
    ///
    /// Computed on a contracted graph, exact (equal to
    /// [`Self::bisection_bandwidth_reference`], tested): every sending device
    /// is one with the source (its only way in is the source's unbounded
    /// edge) and every receiving one with the sink; parallel edges add up;
    /// then, until nothing changes, components with no way in or no way out
    /// or with a single neighbour are dropped and components with the same edges in and out (same
    /// neighbours, same capacities) merge into one with the summed
    /// capacities (an even split of a flow on the merged graph is a flow on
    /// the original one, and summing maps back). A star, an NVSwitch node of
    /// any size, a ring or a torus contract to a handful of nodes; each pass
    /// costs O(E log E). Irregular graphs keep what does not contract.
    pub fn bisection_bandwidth(&self) -> Bandwidth {
        let n = self.num_devices() as usize;
        if n < 2 {
            return Bandwidth(0);
        }
        const SOURCE: u32 = 0;
        const SINK: u32 = 1;
        let mut node = vec![u32::MAX; self.components.len()];
        for (i, &c) in self.devices.iter().enumerate() {
            node[c.0 as usize] = if i < n / 2 { SOURCE } else { SINK };
        }
        let mut nodes = 2u32;
        for v in node.iter_mut().filter(|v| **v == u32::MAX) {
            *v = nodes;
            nodes += 1;
        }
        let mut edges: Vec<(u32, u32, u128)> = self
            .links
            .iter()
            .map(|l| {
                (
                    node[l.from.0 as usize],
                    node[l.to.0 as usize],
                    l.bandwidth.0 as u128,
                )
            })
            .collect();
        let graph = contract(&mut edges, nodes);
        let source = NodeIndex::new(SOURCE as usize);
        let sink = NodeIndex::new(SINK as usize);
        let (flow, _) = dinics(&graph, source, sink);
        Bandwidth(flow.min(u64::MAX as u128) as u64)
    }

    /// [`Self::bisection_bandwidth`] as a plain max flow over every
    /// component and link, uncontracted: the reference the contracted
    /// computation must equal (tests compare them). Quadratic on a star.
    pub fn bisection_bandwidth_reference(&self) -> Bandwidth {
        let n = self.num_devices() as usize;
        if n < 2 {
            return Bandwidth(0);
        }
        let side: BTreeMap<ComponentId, bool> = self
            .devices
            .iter()
            .enumerate()
            .map(|(i, &c)| (c, i < n / 2))
            .collect();
        let mut g: DiGraph<(), u128> = DiGraph::new();
        for _ in &self.components {
            g.add_node(());
        }
        let source = g.add_node(());
        let sink = g.add_node(());
        let infinite = u64::MAX as u128;
        for l in &self.links {
            // Flow never needs to enter the sending half or leave the receiving half.
            if side.get(&l.to) == Some(&true) || side.get(&l.from) == Some(&false) {
                continue;
            }
            g.add_edge(
                NodeIndex::new(l.from.0 as usize),
                NodeIndex::new(l.to.0 as usize),
                l.bandwidth.0 as u128,
            );
        }
        for (&c, &first) in &side {
            let c = NodeIndex::new(c.0 as usize);
            if first {
                g.add_edge(source, c, infinite);
            } else {
                g.add_edge(c, sink, infinite);
            }
        }
        let (flow, _) = dinics(&g, source, sink);
        Bandwidth(flow.min(u64::MAX as u128) as u64)
    }
}

/// A component's edges in and out: (other end, capacity), sorted.
type Signature = (Vec<(u32, u128)>, Vec<(u32, u128)>);

/// A component's colour and, per (direction in, neighbouring colour), the
/// capacity summed over its edges.
type ColourSignature = (u32, Vec<(bool, u32, u128)>);

/// Contract the flow graph `edges` (node 0 the source, 1 the sink, `nodes`
/// nodes) as [`Topology::bisection_bandwidth`] describes, and build it with
/// the source and sink as nodes 0 and 1.
fn contract(edges: &mut Vec<(u32, u32, u128)>, nodes: u32) -> DiGraph<(), u128> {
    // Nothing flows into the source or out of the sink.
    edges.retain(|&(a, b, _)| a != b && b != 0 && a != 1);
    let mut label: Vec<u32> = (0..nodes).collect();
    loop {
        merge_parallel(edges);
        const NONE: u32 = u32::MAX;
        const MANY: u32 = u32::MAX - 1;
        let mut ins = vec![0u32; nodes as usize];
        let mut outs = vec![0u32; nodes as usize];
        // The one neighbour of each component, or NONE / MANY.
        let mut neighbour = vec![NONE; nodes as usize];
        for &(a, b, _) in edges.iter() {
            outs[a as usize] += 1;
            ins[b as usize] += 1;
            for (v, w) in [(a, b), (b, a)] {
                let n = &mut neighbour[v as usize];
                *n = if *n == NONE || *n == w { w } else { MANY };
            }
        }
        // A component with no way in or no way out carries nothing, nor
        // does a dead end whose only neighbour is one component (flow into
        // it can only go back: a cycle).
        let dead = |v: u32| {
            v > 1
                && (ins[v as usize] == 0 || outs[v as usize] == 0 || neighbour[v as usize] != MANY)
        };
        let before = edges.len();
        edges.retain(|&(a, b, _)| !dead(a) && !dead(b));
        if edges.len() != before {
            continue;
        }
        // Components with the same edges in and out (no edge joins two of
        // them: a component is never its own neighbour) merge.
        let mut signature: BTreeMap<u32, Signature> = BTreeMap::new();
        for &(a, b, c) in edges.iter() {
            if a > 1 {
                signature.entry(a).or_default().1.push((b, c));
            }
            if b > 1 {
                signature.entry(b).or_default().0.push((a, c));
            }
        }
        let mut first: BTreeMap<Signature, u32> = BTreeMap::new();
        let mut merged = false;
        for (v, mut sig) in signature {
            sig.0.sort_unstable();
            sig.1.sort_unstable();
            let rep = *first.entry(sig).or_insert(v);
            if rep != v {
                label[v as usize] = rep;
                merged = true;
            }
        }
        if !merged {
            break;
        }
        for e in edges.iter_mut() {
            e.0 = label[e.0 as usize];
            e.1 = label[e.1 as usize];
        }
    }
    equitable_quotient(edges, nodes);
    // Renumber what is left densely, source and sink first.
    let mut index = vec![u32::MAX; nodes as usize];
    index[0] = 0;
    index[1] = 1;
    let mut next = 2;
    for &(a, b, _) in edges.iter() {
        for v in [a, b] {
            if index[v as usize] == u32::MAX {
                index[v as usize] = next;
                next += 1;
            }
        }
    }
    let mut g: DiGraph<(), u128> = DiGraph::with_capacity(next as usize, edges.len());
    for _ in 0..next {
        g.add_node(());
    }
    for &(a, b, c) in edges.iter() {
        g.add_edge(
            NodeIndex::new(index[a as usize] as usize),
            NodeIndex::new(index[b as usize] as usize),
            c,
        );
    }
    g
}

/// Replace the flow graph `edges` (node 0 the source, 1 the sink) by its
/// quotient under the coarsest weighted equitable partition: components
/// are refined by their colour and, per direction and neighbouring colour,
/// the capacity summed over their edges, until no class splits. Every
/// member of a class then has the same capacity to and from every other
/// class, so a flow between classes spreads over the members in proportion
/// to capacity and the quotient's max flow is the graph's (and it is at
/// most it, summing a flow class by class). A fat tree's thousands of alike
/// nodes and links become a few classes (8,192 DGX nodes: 10 s -> well
/// under one). Edges inside a class become loops, which carry nothing.
fn equitable_quotient(edges: &mut Vec<(u32, u32, u128)>, nodes: u32) {
    let n = nodes as usize;
    let mut colour: Vec<u32> = (0..n).map(|v| (v as u32).min(2)).collect();
    let mut classes = 3usize.min(n);
    let mut by_vertex: Vec<Vec<(bool, u32, u128)>> = vec![Vec::new(); n];
    loop {
        for v in by_vertex.iter_mut() {
            v.clear();
        }
        for &(a, b, c) in edges.iter() {
            by_vertex[a as usize].push((false, colour[b as usize], c));
            by_vertex[b as usize].push((true, colour[a as usize], c));
        }
        let mut ids: BTreeMap<ColourSignature, u32> = BTreeMap::new();
        let mut next = Vec::with_capacity(n);
        for (v, adj) in by_vertex.iter_mut().enumerate() {
            adj.sort_unstable();
            // Capacities summed per (direction, neighbouring colour).
            let mut sig: Vec<(bool, u32, u128)> = Vec::with_capacity(adj.len());
            for &(d, k, c) in adj.iter() {
                match sig.last_mut() {
                    Some(last) if (last.0, last.1) == (d, k) => last.2 += c,
                    _ => sig.push((d, k, c)),
                }
            }
            // The source and sink keep colours of their own.
            let key = if v < 2 {
                (v as u32, Vec::new())
            } else {
                (colour[v] + 2, sig)
            };
            let len = ids.len() as u32;
            next.push(*ids.entry(key).or_insert(len));
        }
        // Dense colours in key order, so the result does not depend on the
        // order vertices were met in.
        let order: BTreeMap<u32, u32> = ids
            .values()
            .enumerate()
            .map(|(rank, &id)| (id, rank as u32))
            .collect();
        let refined: Vec<u32> = next.iter().map(|id| order[id]).collect();
        let count = ids.len();
        colour = refined;
        if count == classes {
            break;
        }
        classes = count;
    }
    for e in edges.iter_mut() {
        *e = (colour[e.0 as usize], colour[e.1 as usize], e.2);
    }
    edges.retain(|&(a, b, _)| a != b);
    merge_parallel(edges);
}

/// Sort `edges` and add up the capacities of edges with the same ends.
fn merge_parallel(edges: &mut Vec<(u32, u32, u128)>) {
    edges.sort_unstable();
    let mut out: Vec<(u32, u32, u128)> = Vec::with_capacity(edges.len());
    for &(a, b, c) in edges.iter() {
        match out.last_mut() {
            Some(last) if (last.0, last.1) == (a, b) => last.2 += c,
            _ => out.push((a, b, c)),
        }
    }
    *edges = out;
}

/// A short name for a component kind (`gpu`, `nvswitch`, `leaf`, ...).
pub fn kind_name(k: &ComponentKind) -> &'static str {
    match k {
        ComponentKind::Device { kind, .. } => match kind {
            super::DeviceKind::Gpu => "gpu",
            super::DeviceKind::Tpu => "tpu",
            super::DeviceKind::Cpu => "cpu",
        },
        ComponentKind::Host => "host",
        ComponentKind::NvSwitch { .. } => "nvswitch",
        ComponentKind::PcieSwitch => "pcie-switch",
        ComponentKind::Nic => "nic",
        ComponentKind::NetworkSwitch { level: 0, .. } => "leaf-switch",
        ComponentKind::NetworkSwitch { level: 1, .. } => "spine-switch",
        ComponentKind::NetworkSwitch { .. } => "core-switch",
    }
}
