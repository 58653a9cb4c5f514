//! Figures that describe a topology at a glance: bisection bandwidth, what a
//! device reaches over which link classes at what bandwidth, and its memory scopes.

use std::collections::BTreeMap;

use petgraph::algo::dinics;
use petgraph::graph::{DiGraph, NodeIndex};
use serde::Serialize;

use super::graph::{ComponentId, ComponentKind, LinkClass};
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
        for to in 0..self.num_devices() {
            if to == from {
                continue;
            }
            let route = self.route_devices(from, to, 0)?;
            let mut path_classes: Vec<LinkClass> = Vec::new();
            for &l in &route {
                let c = self.link(l).class;
                if !path_classes.contains(&c) {
                    path_classes.push(c);
                }
            }
            let class = *path_classes
                .iter()
                .max()
                .expect("distinct devices have a non-empty route");
            let bandwidth = route
                .iter()
                .map(|&l| self.link(l).bandwidth)
                .min()
                .expect("non-empty");
            let latency = Duration(route.iter().map(|&l| self.link(l).latency.0).sum());
            *groups
                .entry((class, path_classes, route.len() as u32, bandwidth, latency))
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
