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
    /// id) to the second half, over all links; devices that do not forward
    /// carry no transit traffic. 0 with fewer than two devices.
    pub fn bisection_bandwidth(&self) -> Bandwidth {
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
        ComponentKind::NetworkSwitch { .. } => "spine-switch",
    }
}
