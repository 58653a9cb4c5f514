//! The tree walk's fabric ([`Fabric`]) on a grid topology (ring, 2-D mesh,
//! torus: dimension-order routing), from its geometry instead of its routes.
//! A heap-shaped tree over a ring of n ranks has routes of up to n / 2
//! links (n^2 / 4 links in all per chunk): following them link by link is
//! quadratic in ranks. Here a route is up to one arc per dimension, along
//! one line of links in one direction; a step's loads are summed over
//! arcs with difference arrays, and a move's busiest link is a range
//! maximum (a sparse table per step) and its latency a difference of prefix
//! sums: O(links log links) per step.
//!
//! The figures are those of the routes exactly (integer loads and
//! latencies, the same division per link class), where every link a route
//! can use has one bandwidth and class; elsewhere [`GridFabric::new`]
//! declines. `auto` uses the walk on it as a lower bound of the tree's
//! estimate (`tuner.rs`): the choice stays the walk's.

use crate::topology::{LinkClass, RoutingPolicy, Topology};

use super::calibration::Calibration;
use super::critical::{walk_stream, Fabric, Paths};
use super::kinds::{Algorithm, Protocol};
use super::plan::{Move, Via};
use super::stream::StepSource;
use super::CollectiveError;

/// A grid's lines of links (per dimension, per line of devices along it,
/// per direction: a "lane"), their step loads and latencies.
pub(crate) struct GridFabric {
    /// Per dimension: (size, stride), dimension 0 first (routed first).
    dims: Vec<(usize, usize)>,
    wrap: bool,
    /// Rank -> device index (a grid position).
    devices: Vec<usize>,
    /// Per dimension, its first lane.
    lane_base: Vec<usize>,
    /// Per lane, its first link in the flat arrays (`start..start + size`).
    lane_start: Vec<usize>,
    /// Per lane, prefix sums of its links' latencies (`size + 1` entries
    /// from `lane_start[lane] + lane`).
    lat_prefix: Vec<u64>,
    /// The step's difference array (same layout as `lat_prefix`).
    diff: Vec<u64>,
    /// Sparse table of the step's loads: level `j`, entry `i` is the
    /// largest load of links `i..i + 2^j` (flat link order).
    table: Vec<Vec<u64>>,
    /// Every usable link's bandwidth and class.
    bandwidth: u64,
    network: bool,
    touched: bool,
    /// Scratch: a route's arcs.
    arcs: Vec<Span>,
}

/// A route's arc on one lane: link positions `lo..hi` on it.
#[derive(Clone, Copy)]
struct Span {
    lane: usize,
    lo: usize,
    hi: usize,
}

impl GridFabric {
    /// The fabric of `devices` (rank -> device id) on `topo`, or `None`
    /// where the topology is not routed by dimension order or its usable
    /// links differ in bandwidth or class (or a hop is not one link).
    pub(crate) fn new(topo: &Topology, devices: &[u32]) -> Option<GridFabric> {
        let RoutingPolicy::DimensionOrder { dims, wrap } = topo.routing() else {
            return None;
        };
        let wrap = *wrap;
        let n: usize = dims.iter().map(|&d| d as usize).product();
        if n != topo.num_devices() as usize || n == 0 {
            return None;
        }
        // Row-major: the last dimension has stride 1.
        let mut strides = vec![1usize; dims.len()];
        for i in (0..dims.len().saturating_sub(1)).rev() {
            strides[i] = strides[i + 1] * dims[i + 1] as usize;
        }
        let dims: Vec<(usize, usize)> = dims.iter().map(|&d| d as usize).zip(strides).collect();
        let links = topo.links();
        let (mut lane_base, mut lane_start) = (Vec::new(), Vec::new());
        let mut lat_prefix = Vec::new();
        let mut flat = 0usize;
        let mut kind: Option<(u64, bool)> = None;
        let mut seen = vec![false; links.len()];
        for &(size, stride) in &dims {
            lane_base.push(lane_start.len());
            for line in 0..n / size {
                // The line's first device: `line` counts the positions of the
                // other dimensions, row-major.
                let first = (line % stride) + (line / stride) * stride * size;
                for up in [true, false] {
                    lane_start.push(flat);
                    flat += size;
                    lat_prefix.push(0u64);
                    for c in 0..size {
                        // The hops a route can take: up but at a mesh's
                        // last position, down but at its first or on a
                        // torus of two (ties go up).
                        let usable = match (wrap, up) {
                            (false, true) => c + 1 < size,
                            (false, false) => c > 0,
                            (true, true) => size >= 2,
                            (true, false) => size >= 3,
                        };
                        let mut lat = 0;
                        if usable {
                            let next = if up {
                                (c + 1) % size
                            } else {
                                (c + size - 1) % size
                            };
                            let (a, b) = (first + c * stride, first + next * stride);
                            let r = topo.route_devices(a as u32, b as u32, 0).ok()?;
                            let [l] = r.as_slice() else {
                                return None;
                            };
                            let link = &links[l.0 as usize];
                            if std::mem::replace(&mut seen[l.0 as usize], true) {
                                return None;
                            }
                            let k = (
                                link.bandwidth_bytes_per_s(),
                                link.class == LinkClass::Network,
                            );
                            if *kind.get_or_insert(k) != k {
                                return None;
                            }
                            lat = link.latency_ps();
                        }
                        let last = *lat_prefix.last().unwrap_or(&0);
                        lat_prefix.push(last + lat);
                    }
                }
            }
        }
        let (bandwidth, network) = kind?;
        let devices = devices.iter().map(|&d| d as usize).collect();
        Some(GridFabric {
            dims,
            wrap,
            devices,
            lane_base,
            diff: vec![0; lat_prefix.len()],
            lat_prefix,
            lane_start,
            table: vec![vec![0; flat]],
            bandwidth,
            network,
            touched: false,
            arcs: Vec::new(),
        })
    }

    /// The arcs of the route from device `a` to device `b` (as
    /// `Topology::route` walks it), to `f`.
    fn route_arcs(&self, a: usize, b: usize, mut f: impl FnMut(Span)) {
        let mut cur = a;
        for (k, &(size, stride)) in self.dims.iter().enumerate() {
            let c = (cur / stride) % size;
            let target = (b / stride) % size;
            if c == target {
                continue;
            }
            let up = (target + size - c) % size;
            let go_up = if self.wrap {
                up <= size - up
            } else {
                target > c
            };
            let len = if go_up { up } else { size - up };
            let line = (cur % stride) + (cur / (stride * size)) * stride;
            let lane = self.lane_base[k] + 2 * line + usize::from(!go_up);
            // Up from `c`: links c..c + len; down: c + 1 - len..=c
            // (a link's position is its tail's), either maybe wrapping.
            let (lo, hi) = if go_up {
                (c, c + len)
            } else {
                (c + size + 1 - len, c + size + 1)
            };
            let (lo, hi) = if !go_up && lo >= size {
                (lo - size, hi - size)
            } else {
                (lo, hi)
            };
            if hi <= size {
                f(Span { lane, lo, hi });
            } else {
                f(Span { lane, lo, hi: size });
                f(Span {
                    lane,
                    lo: 0,
                    hi: hi - size,
                });
            }
            cur = cur - c * stride + target * stride;
        }
    }

    /// The largest load of links `lo..hi` (flat, non-empty).
    fn range_max(&self, lo: usize, hi: usize) -> u64 {
        let j = (usize::BITS - 1 - (hi - lo).leading_zeros()) as usize;
        let t = &self.table[j];
        t[lo].max(t[hi - (1 << j)])
    }
}

impl Fabric for GridFabric {
    fn add(&mut self, m: &Move, bytes: u64) -> Result<bool, CollectiveError> {
        if m.via != Via::P2p {
            // Grids have no reducing switches.
            return Err(CollectiveError::Buffers(
                "a switch move on a grid fabric".into(),
            ));
        }
        let (a, b) = (self.devices[m.from], self.devices[m.to]);
        let mut arcs = std::mem::take(&mut self.arcs);
        arcs.clear();
        self.route_arcs(a, b, |arc| arcs.push(arc));
        for arc in &arcs {
            let base = self.lane_start[arc.lane] + arc.lane;
            self.diff[base + arc.lo] = self.diff[base + arc.lo].wrapping_add(bytes);
            self.diff[base + arc.hi] = self.diff[base + arc.hi].wrapping_sub(bytes);
        }
        let any = !arcs.is_empty();
        self.arcs = arcs;
        self.touched |= any;
        Ok(any && self.network)
    }

    fn settle(&mut self) {
        if !self.touched {
            return;
        }
        // Loads from the differences, per lane.
        let mut level0 = std::mem::take(&mut self.table[0]);
        for (lane, &start) in self.lane_start.iter().enumerate() {
            let end = self
                .lane_start
                .get(lane + 1)
                .copied()
                .unwrap_or(level0.len());
            let mut acc = 0u64;
            for (i, x) in level0[start..end].iter_mut().enumerate() {
                acc = acc.wrapping_add(self.diff[start + lane + i]);
                *x = acc;
            }
        }
        self.table[0] = level0;
        // Levels up to the longest lane.
        let longest = self.dims.iter().map(|d| d.0).max().unwrap_or(1);
        let levels = (usize::BITS - longest.leading_zeros()) as usize;
        self.table.resize_with(levels.max(1), Vec::new);
        for j in 1..levels {
            let (lower, upper) = self.table.split_at_mut(j);
            let prev = &lower[j - 1];
            let half = 1 << (j - 1);
            let next = &mut upper[0];
            next.clear();
            next.extend((0..prev.len().saturating_sub(half)).map(|i| prev[i].max(prev[i + half])));
        }
    }

    fn cost(
        &mut self,
        m: &Move,
        by_bw: &mut Vec<(bool, u64, u64)>,
    ) -> Result<u64, CollectiveError> {
        by_bw.clear();
        let (a, b) = (self.devices[m.from], self.devices[m.to]);
        let (mut lat, mut most, mut any) = (0u64, 0u64, false);
        self.route_arcs(a, b, |arc| {
            let base = self.lane_start[arc.lane] + arc.lane;
            lat += self.lat_prefix[base + arc.hi] - self.lat_prefix[base + arc.lo];
            let s = self.lane_start[arc.lane];
            most = most.max(self.range_max(s + arc.lo, s + arc.hi));
            any = true;
        });
        if any {
            by_bw.push((self.network, self.bandwidth, most));
        }
        Ok(lat)
    }

    fn clear<'m>(&mut self, _moves: impl Iterator<Item = &'m Move>) -> Result<(), CollectiveError> {
        if std::mem::take(&mut self.touched) {
            self.diff.fill(0);
        }
        Ok(())
    }
}

/// The best estimate over `protos` (picoseconds, base latency included) of
/// `source`'s streamed walk ([`super::critical::streamed_path`]) for
/// `algo`, computed on the grid's geometry (the same paths to the bit);
/// `None` where the topology is not a grid [`GridFabric`] takes.
#[allow(clippy::too_many_arguments)]
pub(crate) fn streamed_grid_path(
    topo: &Topology,
    devices: &[u32],
    source: &dyn StepSource,
    elem_bytes: u64,
    cal: &Calibration,
    algo: Algorithm,
    protos: &[Protocol],
) -> Result<Option<Paths>, CollectiveError> {
    let Some(mut fabric) = GridFabric::new(topo, devices) else {
        return Ok(None);
    };
    walk_stream(
        &mut fabric,
        devices.len(),
        source,
        elem_bytes,
        cal,
        algo,
        protos,
    )
    .map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::critical::streamed_path;
    use crate::collective::timing::{Group, Routes};
    use crate::collective::tree_stream::TreeStream;
    use crate::collective::tuner::plan_options;
    use crate::topology::{load, Override};

    fn topo(preset: &str, set: &[(&str, &str)]) -> Topology {
        let over: Vec<Override> = set
            .iter()
            .map(|&(k, v)| Override {
                key: k.into(),
                value: v.into(),
            })
            .collect();
        load(preset, &over).unwrap()
    }

    /// The geometric walk equals the route-by-route walk to the bit, on
    /// rings (odd and even: ties go up), meshes and tori, over all devices
    /// in order, reversed and in a scattered order, and over a part of
    /// them, 8 B to 64 MiB.
    #[test]
    fn grid_walk_equals_the_route_walk() {
        let cases: [(&str, &[(&str, &str)]); 7] = [
            ("ring:12", &[]),
            ("ring:13", &[]),
            ("ring:64", &[]),
            ("mesh2d", &[("dims", "[3, 5]")]),
            ("mesh2d", &[("dims", "[4, 4]")]),
            ("tpu-v4", &[]),
            ("tpu-v4", &[("dims", "[2, 3, 4]")]),
        ];
        let mut checked = 0;
        for (preset, set) in cases {
            let t = topo(preset, set);
            let n = t.num_devices();
            let in_order: Vec<u32> = (0..n).collect();
            let reversed: Vec<u32> = (0..n).rev().collect();
            // A stride coprime with n visits every device once.
            let step = (1..n)
                .rev()
                .find(|s| gcd(*s, n) == 1 && *s > n / 3)
                .unwrap_or(1);
            let scattered: Vec<u32> = (0..n).map(|i| (i * step + 1) % n).collect();
            // A part of the grid (routes between its ranks still cross
            // the devices left out).
            let part: Vec<u32> = (0..n).filter(|d| d % 3 != 1).collect();
            for devices in [in_order, reversed, scattered, part] {
                let g = Group::new(&t, devices).unwrap();
                let cal = Calibration::for_model(&g.device_model(&t)).unwrap();
                let mut routes = Routes::new(&t, &g);
                for k in (3..=26).step_by(4) {
                    let total = (1u64 << k) / 4;
                    let opts = plan_options(&t, &g, &cal, total * 4);
                    let stream = TreeStream::allreduce(g.len(), total, &opts);
                    let protos = Protocol::ALL;
                    let a = Algorithm::Tree;
                    let walk =
                        streamed_path(&t, &mut routes, g.len(), &stream, 4, &cal, a, &protos)
                            .unwrap();
                    let want = walk.path.map(f64::to_bits);
                    let got = streamed_grid_path(&t, &g.devices, &stream, 4, &cal, a, &protos)
                        .unwrap()
                        .map(|p| p.path.map(f64::to_bits));
                    assert!(got.is_some(), "{preset} {set:?}: not a grid fabric");
                    assert_eq!(
                        got,
                        Some(want),
                        "{preset} {set:?} {:?}, {} B: {got:?} vs {want:?}",
                        &g.devices[..4],
                        total * 4
                    );
                    checked += 1;
                }
            }
        }
        assert_eq!(checked, 7 * 4 * 6);
    }

    fn gcd(a: u32, b: u32) -> u32 {
        if b == 0 {
            a
        } else {
            gcd(b, a % b)
        }
    }

    /// Topologies not routed by dimension order have no grid fabric.
    #[test]
    fn switches_and_fat_trees_are_not_grids() {
        for preset in ["switch:8", "dgx-h100"] {
            let t = topo(preset, &[]);
            let devices: Vec<u32> = (0..t.num_devices()).collect();
            assert!(GridFabric::new(&t, &devices).is_none(), "{preset}");
        }
    }
}
