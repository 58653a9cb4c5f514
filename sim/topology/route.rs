//! Routing: every route is a list of directed link ids from `src` to `dst`,
//! and the same arguments always give the same route.
//!
//! - Grids (ring, 2-D mesh, torus) use dimension-order routing between devices:
//!   dimension 0 first; on a wrapped dimension the shorter way, ties going up.
//! - Everything else uses least-cost paths, a link costing `1e15 / bandwidth`
//!   (wide links first; among equal links, fewer hops), and a link into or out
//!   of a host 4 times that, so peer-to-peer through a CPU root complex is the
//!   last resort (it is the only way in a PCIe box). Components that do not
//!   forward (GPUs in an NVSwitch node) are only ever the first or last hop.
//!   Among equal-cost next hops the lowest link id wins, or with ECMP (fat
//!   trees) a hash of `(flow_id, src, dst, hop)` picks one, so one flow stays
//!   on one path. The hash sees a GPU or NIC on a rail as its node, its kind
//!   and the rail offset to the other end (modulo the rails), not its id, so
//!   rails are treated alike: rotating every node's rails rotates the routes
//!   (what lets NCCL's tree channels be timed once, `collective::channels`).
//!   Rail-aligned first: among equal next hops, those on the source's rail
//!   win, then those on the destination's rail (GPU `k` uses NIC `k`, as NCCL
//!   assigns them). A GPU with several NICs is on its first NIC's rail; a
//!   route on `lane` prefers the rail of the GPU's NIC `lane mod k` instead
//!   (NCCL's channels cycle over a GPU's NICs).

use std::cell::RefCell;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use petgraph::graph::NodeIndex;
use petgraph::Direction;

use super::graph::{ComponentId, ComponentKind, LinkClass, LinkId, RoutingPolicy, Topology};
use super::spec::NetworkRouting;
use super::TopologyError;

impl Topology {
    /// The route from `src` to `dst` for flow `flow_id` (empty when `src == dst`).
    pub fn route(
        &self,
        src: ComponentId,
        dst: ComponentId,
        flow_id: u64,
    ) -> Result<Vec<LinkId>, TopologyError> {
        self.route_lane(src, dst, flow_id, 0)
    }

    /// [`Self::route`] for a channel that leaves a device through its NIC
    /// `lane` (modulo its NICs; see [`super::Component::nic_rails`]): the
    /// rail preference follows that NIC's rail instead of the device's first.
    /// Lane 0 is [`Self::route`].
    pub fn route_lane(
        &self,
        src: ComponentId,
        dst: ComponentId,
        flow_id: u64,
        lane: u32,
    ) -> Result<Vec<LinkId>, TopologyError> {
        let n = self.components.len() as u32;
        for c in [src, dst] {
            if c.0 >= n {
                return Err(TopologyError::NoSuchComponent(format!("#{}", c.0)));
            }
        }
        if src == dst {
            return Ok(Vec::new());
        }
        if let RoutingPolicy::DimensionOrder { dims, wrap } = &self.routing {
            if let (Some(a), Some(b)) = (self.device_index(src), self.device_index(dst)) {
                return self.dimension_order(a, b, dims, *wrap);
            }
        }
        let ecmp = matches!(self.routing, RoutingPolicy::ShortestPath { ecmp: true, .. });
        // Without ECMP the flow id picks nothing.
        // A lane past a device's NICs is the same as its remainder.
        let lane = self.lane_of(src, dst, lane);
        let key = (src.0, dst.0, if ecmp { flow_id } else { 0 }, lane);
        if let Some(r) = self.route_cache.get(key) {
            return Ok(r);
        }
        let (r, settled) = self.shortest(src, dst, flow_id, ecmp, lane)?;
        // A search that settles a handful of components (every route on one
        // switch) costs about what a lookup does: caching it would only grow
        // the table (65,536 ranks on a switch route 330k pairs, none twice).
        if settled >= CACHE_MIN_SETTLED {
            self.route_cache.insert(key, &r);
        }
        Ok(r)
    }

    /// Route between device ids (the index of a device, as a mesh names it).
    pub fn route_devices(
        &self,
        src: u32,
        dst: u32,
        flow_id: u64,
    ) -> Result<Vec<LinkId>, TopologyError> {
        self.route_devices_lane(src, dst, flow_id, 0)
    }

    /// [`Self::route_devices`] through NIC `lane` of each end
    /// ([`Self::route_lane`]).
    pub fn route_devices_lane(
        &self,
        src: u32,
        dst: u32,
        flow_id: u64,
        lane: u32,
    ) -> Result<Vec<LinkId>, TopologyError> {
        let s = self
            .device(src)
            .ok_or(TopologyError::NoSuchDevice(src, self.num_devices()))?;
        let d = self
            .device(dst)
            .ok_or(TopologyError::NoSuchDevice(dst, self.num_devices()))?;
        self.route_lane(s, d, flow_id, lane)
    }

    /// NICs per device for channels (the fewest any device of `devices`
    /// has; 1 where a device has none): how many lanes a channel set
    /// spreads over.
    pub fn nic_lanes(&self, devices: &[u32]) -> u32 {
        devices
            .iter()
            .filter_map(|&d| self.device(d))
            .map(|c| self.component(c).nic_rails.len() as u32)
            .min()
            .unwrap_or(0)
            .max(1)
    }

    /// `lane` reduced modulo the NICs of the end that has more of them (0
    /// when neither has two).
    fn lane_of(&self, src: ComponentId, dst: ComponentId, lane: u32) -> u32 {
        let k = self
            .component(src)
            .nic_rails
            .len()
            .max(self.component(dst).nic_rails.len()) as u32;
        if k < 2 {
            0
        } else {
            lane % k
        }
    }

    /// The rail a route prefers at `c` on `lane`: its NIC `lane`'s rail for
    /// a device with NICs, else its own.
    fn lane_rail(&self, c: ComponentId, lane: u32) -> Option<u32> {
        let comp = self.component(c);
        match comp.nic_rails.len() {
            0 => comp.rail,
            k => Some(comp.nic_rails[lane as usize % k]),
        }
    }

    /// The route of a copy between two memory scopes of device `device` (e.g.
    /// `host` -> `global`): from where the source scope lives to where the
    /// target scope lives; empty when both live on the device itself.
    pub fn copy_route(
        &self,
        device: u32,
        from_scope: &str,
        to_scope: &str,
        flow_id: u64,
    ) -> Result<Vec<LinkId>, TopologyError> {
        let d = self
            .device(device)
            .ok_or(TopologyError::NoSuchDevice(device, self.num_devices()))?;
        let at = |scope: &str| {
            self.memory_scope(d, scope)
                .map(|m| m.location)
                .ok_or_else(|| {
                    let known: Vec<&str> = self
                        .component(d)
                        .memory
                        .iter()
                        .map(|m| m.scope.as_str())
                        .collect();
                    TopologyError::NoSuchScope {
                        device: self.component(d).name.clone(),
                        scope: scope.to_string(),
                        known: known.join(", "),
                    }
                })
        };
        self.route(at(from_scope)?, at(to_scope)?, flow_id)
    }

    /// Device id of component `c`, if it is a device.
    pub fn device_index(&self, c: ComponentId) -> Option<u32> {
        match self.component(c).kind {
            ComponentKind::Device { index, .. } => Some(index),
            _ => None,
        }
    }

    fn dimension_order(
        &self,
        a: u32,
        b: u32,
        dims: &[u32],
        wrap: bool,
    ) -> Result<Vec<LinkId>, TopologyError> {
        let strides = super::build::strides(dims);
        let mut cur = a;
        let mut path = Vec::new();
        for (&size, &stride) in dims.iter().zip(&strides) {
            let target = (b / stride) % size;
            loop {
                let c = (cur / stride) % size;
                if c == target {
                    break;
                }
                let up = (target + size - c) % size;
                let go_up = if wrap { up <= size - up } else { target > c };
                let next_c = if go_up {
                    (c + 1) % size
                } else {
                    (c + size - 1) % size
                };
                let next = cur - c * stride + next_c * stride;
                let link = self
                    .fabric_link(cur, next)
                    .ok_or_else(|| TopologyError::NoRoute {
                        from: self.component(self.devices[a as usize]).name.clone(),
                        to: self.component(self.devices[b as usize]).name.clone(),
                    })?;
                path.push(link);
                cur = next;
            }
        }
        Ok(path)
    }

    /// The lowest-id device-fabric link from device `a` to device `b`.
    pub(super) fn fabric_link(&self, a: u32, b: u32) -> Option<LinkId> {
        let to = self.devices[b as usize];
        self.out_links(self.devices[a as usize])
            .into_iter()
            .find(|&l| {
                let link = self.link(l);
                link.to == to && matches!(link.class, LinkClass::Nvlink | LinkClass::Ici)
            })
    }

    fn shortest(
        &self,
        src: ComponentId,
        dst: ComponentId,
        flow_id: u64,
        ecmp: bool,
        lane: u32,
    ) -> Result<(Vec<LinkId>, usize), TopologyError> {
        SCRATCH.with(|cell| {
            let mut guard = cell.borrow_mut();
            let [fwd, bwd, dist] = &mut *guard;
            let n = self.components.len();
            for c in [&mut *fwd, &mut *bwd, &mut *dist] {
                c.start(n);
            }
            let settled = self.costs_on_paths(src, dst, fwd, bwd, dist);
            let flow = ecmp.then_some(flow_id);
            let r = self.shortest_with(src, dst, flow, lane, |c| dist.get(c), true)?;
            Ok((r, settled))
        })
    }

    /// The least-cost walk from `src` to `dst` over costs to `dst` (exact on
    /// every least-cost route, at least the true cost elsewhere). `flow`:
    /// the flow id where ECMP picks among equal next hops, else None.
    fn shortest_with(
        &self,
        src: ComponentId,
        dst: ComponentId,
        flow: Option<u64>,
        lane: u32,
        dist: impl Fn(u32) -> u64,
        relays_only: bool,
    ) -> Result<Vec<LinkId>, TopologyError> {
        let cost = |c: ComponentId| dist(c.0);
        let no_route = || TopologyError::NoRoute {
            from: self.component(src).name.clone(),
            to: self.component(dst).name.clone(),
        };
        if cost(src) == u64::MAX {
            return Err(no_route());
        }
        let (ecmp, flow_id) = (flow.is_some(), flow.unwrap_or(0));
        let key = if ecmp { self.ecmp_key(src, dst) } else { 0 };
        let mut cur = src;
        let mut path = Vec::new();
        while cur != dst {
            let d = cost(cur);
            // Only links into relays or `dst` can match (the reference scans all).
            let out = if relays_only {
                let mut v = Vec::new();
                self.passable_out(cur, src, dst, |l| v.push(l));
                v.sort_unstable();
                v
            } else {
                self.out_links(cur)
            };
            let all: Vec<LinkId> = out
                .into_iter()
                .filter(|&l| {
                    let to = self.link(l).to;
                    cost(to) != u64::MAX
                        && cost(to) + self.link_cost(l) == d
                        && (to == dst || self.component(to).forwards)
                })
                .collect();
            let candidates = self.rail_preferred(all, src, dst, lane);
            let pick = if ecmp && candidates.len() > 1 {
                let i = match self.spine_by_destination(cur, &candidates, dst) {
                    Some(i) => i,
                    None => mix(flow_id ^ key ^ mix(path.len() as u64 + 1)),
                };
                candidates[(i % candidates.len() as u64) as usize]
            } else {
                *candidates.first().ok_or_else(no_route)?
            };
            path.push(pick);
            cur = self.link(pick).to;
        }
        Ok(path)
    }

    /// Destination-based up-routing in a fat tree (`network.routing =
    /// "destination"`: InfiniBand's static routing, OpenSM's fat-tree /
    /// D-mod-k engines): from a leaf, the
    /// spine is the destination's port on its own leaf (its node) modulo
    /// the spines, so every spine-to-leaf link carries the traffic of one
    /// destination and flows never collide on the way down; from a spine
    /// up to the cores, the node divided by the spines, modulo the cores.
    /// `None` where the hop is not a switch's choice of an upper switch or
    /// `dst` is in no node.
    fn spine_by_destination(
        &self,
        cur: ComponentId,
        candidates: &[LinkId],
        dst: ComponentId,
    ) -> Option<u64> {
        if !matches!(
            self.routing,
            RoutingPolicy::ShortestPath {
                spines: NetworkRouting::Destination,
                ..
            }
        ) {
            return None;
        }
        let level = |c: ComponentId| match self.component(c).kind {
            ComponentKind::NetworkSwitch { level, .. } => Some(level),
            _ => None,
        };
        let here = level(cur)?;
        let up = candidates
            .iter()
            .all(|&l| level(self.link(l).to).is_some_and(|s| s > here));
        let node = u64::from(self.component(dst).node?);
        // From a spine up to the cores (three levels): the next digit of
        // the destination, as D-mod-k takes it; the leaf took the node
        // modulo the pod's spines, as many as a leaf below has uplinks.
        let digit = if here == 0 {
            node
        } else {
            let leaf = self
                .out_links(cur)
                .into_iter()
                .map(|l| self.link(l).to)
                .find(|&c| level(c) == Some(0));
            let spines = leaf.map_or(1, |leaf| {
                self.out_links(leaf)
                    .into_iter()
                    .filter(|&l| level(self.link(l).to) == Some(here))
                    .count()
            });
            node / spines.max(1) as u64
        };
        up.then_some(digit)
    }

    /// The endpoints' part of the ECMP hash, the same for every rotation of
    /// the rails: a component on a rail inside a node counts as (node, kind),
    /// plus the rail offset from `src` to `dst`; anything else by its id.
    fn ecmp_key(&self, src: ComponentId, dst: ComponentId) -> u64 {
        let (a, b) = (self.component(src), self.component(dst));
        let end = |c: &super::graph::Component| match (c.node, c.rail) {
            (Some(node), Some(_)) => {
                let kind = match c.kind {
                    ComponentKind::Device { .. } => 1,
                    ComponentKind::Nic => 2,
                    _ => 3,
                };
                (1 << 63) | (u64::from(node) << 2) | kind
            }
            _ => u64::from(c.id.0),
        };
        let offset = match (a.rail, b.rail) {
            (Some(x), Some(y)) if self.rails > 0 => (y + self.rails - x) % self.rails,
            _ => 0,
        };
        mix(mix(mix(end(a)) ^ end(b)) ^ u64::from(offset))
    }

    /// The candidates on `src`'s rail, else on `dst`'s rail, else all.
    fn rail_preferred(
        &self,
        all: Vec<LinkId>,
        src: ComponentId,
        dst: ComponentId,
        lane: u32,
    ) -> Vec<LinkId> {
        for rail in [self.lane_rail(src, lane), self.lane_rail(dst, lane)]
            .into_iter()
            .flatten()
        {
            let on: Vec<LinkId> = all
                .iter()
                .copied()
                .filter(|&l| self.component(self.link(l).to).rail == Some(rail))
                .collect();
            if !on.is_empty() {
                return on;
            }
        }
        all
    }

    /// The least-cost route from `src` to `dst` that crosses none of `avoid`
    /// (failed links), through forwarding components only; `None` when every
    /// path crosses a failed link. Ties go to the lower link id, so the
    /// detour is deterministic.
    pub fn route_avoiding(
        &self,
        src: ComponentId,
        dst: ComponentId,
        avoid: &[LinkId],
    ) -> Option<Vec<LinkId>> {
        let n = self.components.len();
        if src.0 as usize >= n || dst.0 as usize >= n {
            return None;
        }
        let mut dist = vec![u64::MAX; n];
        let mut via: Vec<Option<LinkId>> = vec![None; n];
        dist[src.0 as usize] = 0;
        let mut heap = BinaryHeap::from([Reverse((0u64, src))]);
        while let Some(Reverse((d, c))) = heap.pop() {
            if d > dist[c.0 as usize] || c == dst || (c != src && !self.component(c).forwards) {
                continue;
            }
            for l in self.out_links(c) {
                if avoid.contains(&l) {
                    continue;
                }
                let to = self.link(l).to;
                let nd = d.saturating_add(self.link_cost(l));
                if nd < dist[to.0 as usize] {
                    dist[to.0 as usize] = nd;
                    via[to.0 as usize] = Some(l);
                    heap.push(Reverse((nd, to)));
                }
            }
        }
        if src == dst {
            return Some(Vec::new());
        }
        let mut path = Vec::new();
        let mut cur = dst;
        while cur != src {
            let l = via[cur.0 as usize]?;
            path.push(l);
            cur = self.link(l).from;
        }
        path.reverse();
        Some(path)
    }

    /// Least costs to `dst` of every component whose cost is at most
    /// `src`'s (Dijkstra stopped once `src` and its cost level are settled):
    /// exactly the costs a least-cost walk from `src` reads, without touching
    /// the rest of a large machine. Entries above `src`'s cost may be
    /// tentative (too high) and never match a least-cost step. Looked up by
    /// key only, never iterated.
    fn costs_to_until(&self, dst: ComponentId, src: ComponentId) -> HashMap<u32, u64> {
        let mut dist: HashMap<u32, u64> = HashMap::new();
        dist.insert(dst.0, 0);
        let mut heap = BinaryHeap::from([Reverse((0u64, dst))]);
        let mut limit = u64::MAX;
        while let Some(Reverse((d, c))) = heap.pop() {
            if d > limit {
                break;
            }
            if d > dist.get(&c.0).copied().unwrap_or(u64::MAX) {
                continue;
            }
            if c == src {
                limit = d;
            }
            if c != dst && !self.component(c).forwards {
                continue;
            }
            for l in self.in_links(c) {
                let link = self.link(l);
                let nd = d + self.link_cost(l);
                let e = dist.entry(link.from.0).or_insert(u64::MAX);
                if nd < *e {
                    *e = nd;
                    heap.push(Reverse((nd, link.from)));
                }
            }
        }
        dist
    }

    /// [`Self::route`] computed from a full reverse search (every component
    /// at most as far from `dst` as `src` is): the plain reference the
    /// goal-directed search must equal (tests compare them), uncached.
    pub fn route_reference(
        &self,
        src: ComponentId,
        dst: ComponentId,
        flow_id: u64,
    ) -> Result<Vec<LinkId>, TopologyError> {
        if src == dst {
            return Ok(Vec::new());
        }
        if let RoutingPolicy::DimensionOrder { dims, wrap } = &self.routing {
            if let (Some(a), Some(b)) = (self.device_index(src), self.device_index(dst)) {
                return self.dimension_order(a, b, dims, *wrap);
            }
        }
        let ecmp = matches!(self.routing, RoutingPolicy::ShortestPath { ecmp: true, .. });
        let dist = self.costs_to_until(dst, src);
        self.shortest_with(
            src,
            dst,
            ecmp.then_some(flow_id),
            0,
            |c| dist.get(&c).copied().unwrap_or(u64::MAX),
            false,
        )
    }

    /// Each link out of `c` into a component a route from `src` to `dst` may
    /// enter: relays, and the two ends (each link once, any order; read in
    /// place, nothing allocated: a search visits these once per component).
    fn passable_out(
        &self,
        c: ComponentId,
        src: ComponentId,
        dst: ComponentId,
        mut visit: impl FnMut(LinkId),
    ) {
        self.relay_out[c.0 as usize].iter().for_each(|&l| visit(l));
        let pair = [src, dst];
        let ends = if src == dst { &pair[..1] } else { &pair[..] };
        for &end in ends {
            if !self.component(end).forwards {
                self.graph
                    .edges_directed(NodeIndex::new(end.0 as usize), Direction::Incoming)
                    .map(|e| *e.weight())
                    .filter(|&l| self.link(l).from == c)
                    .for_each(&mut visit);
            }
        }
    }

    /// Each link into `c` from a component a route from `src` to `dst` may
    /// leave: relays, and the two ends (each link once, any order).
    fn passable_in(
        &self,
        c: ComponentId,
        src: ComponentId,
        dst: ComponentId,
        mut visit: impl FnMut(LinkId),
    ) {
        self.relay_in[c.0 as usize].iter().for_each(|&l| visit(l));
        let pair = [src, dst];
        let ends = if src == dst { &pair[..1] } else { &pair[..] };
        for &end in ends {
            if !self.component(end).forwards {
                self.graph
                    .edges_directed(NodeIndex::new(end.0 as usize), Direction::Outgoing)
                    .map(|e| *e.weight())
                    .filter(|&l| self.link(l).to == c)
                    .for_each(&mut visit);
            }
        }
    }

    /// May a least-cost route pass through `c` from `src` to `dst`? Only
    /// forwarding components, besides the two ends.
    fn passable(&self, c: ComponentId, src: ComponentId, dst: ComponentId) -> bool {
        c == src || c == dst || self.component(c).forwards
    }

    /// Exact least costs to `dst` of every component on a least-cost route
    /// from `src` (the only ones a least-cost walk from `src` matches; any
    /// other entry is at least its true cost, so it never matches), found
    /// by a reverse A* search whose estimate of the rest of the way is the
    /// cost from `src`, known exactly up to a radius `r` (a bidirectional
    /// search's forward half) and taken as `r` beyond: consistent, so what it
    /// settles is exact, and it settles only components within the least
    /// cost `D` by cost-to-`dst` + estimate. On a fat tree of thousands of
    /// devices that is the spines and the two ends' surroundings instead of
    /// every component within `D` of `dst`. Costs land in `dist` (`fwd` and
    /// `bwd` are the forward half's scratch), all three started empty; returns
    /// how many heap entries both searches took (their work).
    fn costs_on_paths(
        &self,
        src: ComponentId,
        dst: ComponentId,
        fwd: &mut Costs,
        bwd: &mut Costs,
        dist: &mut Costs,
    ) -> usize {
        let (radius, mut popped) = self.forward_half(src, dst, fwd, bwd);
        let ahead = &*fwd;
        let estimate = |c: u32| ahead.get(c).min(radius);
        dist.set(dst.0, 0);
        let mut heap = BinaryHeap::from([Reverse((estimate(dst.0), 0u64, dst))]);
        let mut limit = u64::MAX;
        while let Some(Reverse((f, g, c))) = heap.pop() {
            popped += 1;
            if f > limit {
                break;
            }
            if g > dist.get(c.0) {
                continue;
            }
            if c == src {
                limit = f;
            }
            if c != dst && !self.component(c).forwards {
                continue;
            }
            // Relaxation order does not matter: the heap's order is total.
            self.passable_in(c, src, dst, |l| {
                let from = self.link(l).from;
                if !self.passable(from, src, dst) {
                    return;
                }
                let ng = g + self.link_cost(l);
                if ng < dist.get(from.0) {
                    dist.set(from.0, ng);
                    heap.push(Reverse((ng.saturating_add(estimate(from.0)), ng, from)));
                }
            });
        }
        popped
    }

    /// The forward half of a bidirectional least-cost search from `src` to
    /// `dst`, run until the two halves prove the least cost: costs from
    /// `src` in `fwd` (tentative entries are at least the true cost; `bwd`
    /// is the backward half's scratch), and the radius below which every
    /// cost from `src` is settled (`u64::MAX` when the forward half ran out:
    /// everything reachable is settled), and how many heap entries it took.
    fn forward_half(
        &self,
        src: ComponentId,
        dst: ComponentId,
        fwd: &mut Costs,
        bwd: &mut Costs,
    ) -> (u64, usize) {
        let mut popped = 0;
        fwd.set(src.0, 0);
        bwd.set(dst.0, 0);
        let mut fheap = BinaryHeap::from([Reverse((0u64, src))]);
        let mut bheap = BinaryHeap::from([Reverse((0u64, dst))]);
        let mut best = if src == dst { 0 } else { u64::MAX };
        while let (Some(&Reverse((tf, _))), Some(&Reverse((tb, _)))) = (fheap.peek(), bheap.peek())
        {
            if tf.saturating_add(tb) >= best {
                break;
            }
            let forward = tf <= tb;
            let (heap, own, other) = if forward {
                (&mut fheap, &mut *fwd, &*bwd)
            } else {
                (&mut bheap, &mut *bwd, &*fwd)
            };
            let Some(Reverse((d, c))) = heap.pop() else {
                break;
            };
            popped += 1;
            if d > own.get(c.0) {
                continue;
            }
            let start = if forward { src } else { dst };
            if c != start && !self.component(c).forwards {
                continue;
            }
            let mut relax = |l: LinkId| {
                let link = self.link(l);
                let next = if forward { link.to } else { link.from };
                if !self.passable(next, src, dst) {
                    return;
                }
                let nd = d + self.link_cost(l);
                if nd < own.get(next.0) {
                    own.set(next.0, nd);
                    heap.push(Reverse((nd, next)));
                    // An entry never holds u64::MAX: absent and MAX read alike.
                    let o = other.get(next.0);
                    if o != u64::MAX {
                        best = best.min(nd.saturating_add(o));
                    }
                }
            };
            if forward {
                self.passable_out(c, src, dst, &mut relax);
            } else {
                self.passable_in(c, src, dst, &mut relax);
            }
        }
        (fheap.peek().map_or(u64::MAX, |&Reverse((d, _))| d), popped)
    }

    /// Routing cost of a link: inversely proportional to its bandwidth, four
    /// times that when it touches a host.
    pub(crate) fn link_cost(&self, l: LinkId) -> u64 {
        let link = self.link(l);
        let base = 1_000_000_000_000_000u64.div_ceil(link.bandwidth.0.max(1));
        let host = |c: ComponentId| matches!(self.component(c).kind, ComponentKind::Host);
        if host(link.from) || host(link.to) {
            base * 4
        } else {
            base
        }
    }
}

/// Routes whose searches took fewer heap entries than this are not cached.
const CACHE_MIN_SETTLED: usize = 16;

/// Least costs by component for one search, in place of a map per route: an
/// entry is current when its stamp is the search's epoch, so starting a
/// search clears nothing and a search touches only what it reaches. Absent
/// entries read as `u64::MAX` (a map's `unwrap_or(u64::MAX)`).
#[derive(Default)]
struct Costs {
    stamp: Vec<u32>,
    value: Vec<u64>,
    epoch: u32,
}

impl Costs {
    /// Empty, for components `0..n`.
    fn start(&mut self, n: usize) {
        if self.stamp.len() < n {
            self.stamp.resize(n, 0);
            self.value.resize(n, u64::MAX);
        }
        self.epoch = self.epoch.wrapping_add(1);
        if self.epoch == 0 {
            self.stamp.fill(0);
            self.epoch = 1;
        }
    }

    fn get(&self, c: u32) -> u64 {
        let i = c as usize;
        if self.stamp[i] == self.epoch {
            self.value[i]
        } else {
            u64::MAX
        }
    }

    fn set(&mut self, c: u32, v: u64) {
        let i = c as usize;
        self.stamp[i] = self.epoch;
        self.value[i] = v;
    }
}

thread_local! {
    /// Per thread (routes are searched from rayon workers too): the forward,
    /// backward and final cost tables of `Topology::shortest`.
    static SCRATCH: RefCell<[Costs; 3]> = RefCell::new(Default::default());
}

/// SplitMix64 finalizer: a fixed, platform-independent hash for ECMP.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
