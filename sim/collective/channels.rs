//! NCCL's tree channels timed once: across nodes of `m` ranks, a tree
//! allreduce runs `m` channels ([`TreeChannels`]), channel `c` the image of
//! channel 0 under the rotation `sigma^c` of every node's local ranks
//! (`g[p] -> g[p + 1 mod m]`). When the topology carries that rotation too
//! (every route of an image pair is the image of the route, link for link, with
//! the same capacity, latency and class; a rail-optimized fabric whose ECMP
//! choices happen to agree), the whole run is invariant under it: every
//! channel's flows get the rates and times of channel 0's. Channel 0 alone is
//! then simulated on the quotient: one link per orbit of links (each orbit of
//! exactly `m` links, so a link's load in the whole run is the load channel 0
//! puts on its orbit), and a rank's sends of one step gate the next step of
//! every rank of its node (a rank of the whole run sends for every channel).
//! The estimate is the same walk on the quotient (per-step link loads are
//! integers, so equal to the whole plan's). Exactness is tested against the
//! full simulation (`tests/collective/channels.rs`, to the picosecond).

use std::collections::BTreeMap;

use crate::topology::Topology;

use super::algorithms::{PlanOptions, TreeChannels};
use super::kinds::CollectiveOp;
use super::path_cache::PathCache;
use super::plan::{buffer_len, Plan, Via};
use super::timing::{Quotient, Routes};
use super::CollectiveError;

/// A multi-node tree allreduce whose channels are images of channel 0.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeSpec {
    pub nodes: Vec<Vec<usize>>,
    pub shape: TreeChannels,
    pub total: u64,
}

impl TreeSpec {
    /// The channel form of `op` with `Algorithm::Tree` over `n` ranks, when
    /// it has a channel per local rank, all carrying equal chunks.
    pub fn new(op: &CollectiveOp, n: usize, total: u64, opts: &PlanOptions) -> Option<TreeSpec> {
        if *op != CollectiveOp::AllReduce {
            return None;
        }
        let nodes = &opts.nodes;
        let m = nodes.first()?.len();
        // With several NICs per GPU every channel's tree `t` takes its
        // ranks' NIC lane `t`: channel `c + 1` is still channel `c`'s image
        // (lane `l` of local rank `p` -> lane `l` of `p + 1`), which
        // `rotation_quotient` checks route by route, lanes included.
        if nodes.len() < 2 || m < 2 || nodes.iter().flatten().count() != n {
            return None;
        }
        let shape = TreeChannels::of(nodes, opts.chunks.max(1), opts);
        if shape.channels != m {
            return None;
        }
        // Every channel's chunks as long as channel 0's.
        let half = total / 2;
        let lens = |c: usize| {
            let (a, b) = shape.ranges(c, 0, half, total);
            (a.1 - a.0, b.1 - b.0)
        };
        let first = lens(0);
        // (Each sub-channel's part, too: `subs` equal parts of `per` chunks.)
        let even = |len: u64| len % (shape.per * shape.subs) as u64 == 0 && len > 0;
        if (1..m).any(|c| lens(c) != first) || !even(first.0) || !even(first.1) {
            return None;
        }
        Some(TreeSpec {
            nodes: nodes.clone(),
            shape,
            total,
        })
    }

    /// Channel 0's plan (the whole run's step structure, one channel's moves).
    pub fn channel_plan(&self, n: usize) -> Plan {
        let half = self.total / 2;
        Plan {
            ranks: n,
            buffer_len: buffer_len(&CollectiveOp::AllReduce, self.total),
            steps: self
                .shape
                .channel_on_lanes(&self.nodes, 0, 0, half, self.total),
            reduced: (0..n).map(|r| (r, 0, self.total)).collect(),
        }
    }

    /// The quotient by the node rotation, when the topology carries it
    /// (`None`: time the whole plan).
    pub(crate) fn quotient(
        &self,
        topo: &Topology,
        routes: &mut Routes,
        plan0: &Plan,
    ) -> Result<Option<Quotient>, CollectiveError> {
        rotation_quotient(topo, routes, &self.nodes, plan0)
    }
}

/// The quotient of `plan0` (one channel or part, whose images under the
/// rotation of every node's local ranks make the whole run) by that
/// rotation, when the topology carries it: every route of an image pair
/// (a switch move's up and down links included) the image of the route,
/// link for link, with the same capacity, latency and class, and every
/// orbit of links `m` long or a divisor of it (a link the rotation maps
/// onto itself is shared: [`Quotient::share`]; `None`: time the whole plan).
pub(crate) fn rotation_quotient(
    topo: &Topology,
    routes: &mut Routes,
    nodes: &[Vec<usize>],
    plan0: &Plan,
) -> Result<Option<Quotient>, CollectiveError> {
    quotient_of(topo, routes, nodes, plan0.ranks, &quotient_key(plan0))
}

/// What a plan's quotient depends on (with the topology and the nodes):
/// its point-to-point pairs with their NIC lane (a lane's routes map to the
/// same lane's of the image pair) and the ranks of its switch moves,
/// sorted, each once. Plans of one algorithm at different sizes share it, so a sweep
/// finds the quotient once ([`rotation_quotient_cached`]).
pub(crate) type QuotientKey = (Vec<(usize, usize, u32)>, Vec<usize>);

fn quotient_key(plan0: &Plan) -> QuotientKey {
    let mut pairs: Vec<(usize, usize, u32)> = Vec::new();
    // Ranks of switch moves: their up and down links map to their images'.
    let mut switched: Vec<usize> = Vec::new();
    for mv in plan0.steps.iter().flatten() {
        if mv.len == 0 {
            continue;
        }
        match mv.via {
            Via::P2p if mv.from != mv.to => pairs.push((mv.from, mv.to, mv.lane)),
            Via::P2p => {}
            Via::SwitchReduce
            | Via::SwitchMulticast
            | Via::InNetwork
            | Via::NetworkReduce
            | Via::NetworkMulticast => switched.extend([mv.from, mv.to]),
        }
    }
    pairs.sort_unstable();
    pairs.dedup();
    switched.sort_unstable();
    switched.dedup();
    (pairs, switched)
}

/// [`rotation_quotient`] in a sweep: `cache` (one topology and group)
/// keeps the quotient of each [`QuotientKey`] met.
pub(crate) fn rotation_quotient_cached(
    topo: &Topology,
    routes: &mut Routes,
    nodes: &[Vec<usize>],
    plan0: &Plan,
    cache: Option<&mut PathCache>,
) -> Result<Option<Quotient>, CollectiveError> {
    let Some(cache) = cache else {
        return rotation_quotient(topo, routes, nodes, plan0);
    };
    let key = quotient_key(plan0);
    if let Some(q) = cache.quotient(plan0.ranks, &key) {
        return Ok(q.clone());
    }
    let q = quotient_of(topo, routes, nodes, plan0.ranks, &key)?;
    cache.record_quotient(plan0.ranks, key, q.clone());
    Ok(q)
}

fn quotient_of(
    topo: &Topology,
    routes: &mut Routes,
    nodes: &[Vec<usize>],
    n: usize,
    (pairs, switched): &QuotientKey,
) -> Result<Option<Quotient>, CollectiveError> {
    let m = nodes.first().map_or(0, Vec::len);
    if m == 0 || nodes.iter().flatten().count() != n {
        return Ok(None);
    }
    let mut sigma = vec![usize::MAX; n];
    let mut node_of = vec![0usize; n];
    for (i, g) in nodes.iter().enumerate() {
        if g.len() != m {
            return Ok(None);
        }
        for (p, &r) in g.iter().enumerate() {
            sigma[r] = g[(p + 1) % m];
            node_of[r] = i;
        }
    }
    let items = pairs
        .iter()
        .map(|&(a, b, lane)| (a, Some(b), lane))
        .chain(switched.iter().map(|&r| (r, None, 0)));
    // phi: link -> its image, from every channel's routes to the next's.
    let links = topo.links();
    let mut phi: BTreeMap<usize, usize> = BTreeMap::new();
    let mut inverse: BTreeMap<usize, usize> = BTreeMap::new();
    for (a0, b0, lane) in items {
        let (mut a, mut b) = (a0, b0);
        let mut route = orbit_route(routes, (a, b), lane)?;
        for _ in 0..m {
            let (na, nb) = (sigma[a], b.map(|b| sigma[b]));
            let next = orbit_route(routes, (na, nb), lane)?;
            if next.len() != route.len() {
                return Ok(None);
            }
            for (&l, &k) in route.iter().zip(&next) {
                let (x, y) = (&links[l], &links[k]);
                if x.bandwidth_bytes_per_s() != y.bandwidth_bytes_per_s()
                    || x.latency_ps() != y.latency_ps()
                    || x.class != y.class
                {
                    return Ok(None);
                }
                if *phi.entry(l).or_insert(k) != k || *inverse.entry(k).or_insert(l) != l {
                    return Ok(None);
                }
            }
            (a, b, route) = (na, nb, next);
        }
    }
    // Every orbit's length divides m (m: links of m copies; shorter: a
    // link m / length copies share); its class is its smallest link id.
    let mut link_class: Vec<usize> = (0..links.len()).collect();
    let mut share: Vec<u32> = Vec::new();
    for &l in phi.keys() {
        let mut orbit = vec![l];
        let mut k = phi[&l];
        while k != l {
            if orbit.len() >= m {
                return Ok(None);
            }
            orbit.push(k);
            k = match phi.get(&k) {
                Some(&x) => x,
                None => return Ok(None),
            };
        }
        if m % orbit.len() != 0 {
            return Ok(None);
        }
        if orbit.len() < m {
            if share.is_empty() {
                share = vec![1; links.len()];
            }
            share[l] = u32::try_from(m / orbit.len()).unwrap_or(u32::MAX);
        }
        link_class[l] = orbit.iter().copied().min().unwrap_or(l);
    }
    Ok(Some(Quotient {
        link_class,
        sender_class: node_of,
        copies: m,
        share,
    }))
}

/// A route [`rotation_quotient`] follows around its orbit: a pair's
/// `(a, Some(b))` on NIC `lane`, or a rank's up and down links to its
/// switch `(a, None)`.
fn orbit_route(
    routes: &mut Routes,
    (a, b): (usize, Option<usize>),
    lane: u32,
) -> Result<Vec<usize>, CollectiveError> {
    Ok(match b {
        Some(b) => routes.get_lane(a, b, lane)?.to_vec(),
        None => {
            let (up, down) = routes.switch_links(a)?;
            vec![up, down]
        }
    })
}

/// Whether [`super::time_collective`] times a tree allreduce of `total`
/// elements on `group` on its quotient (the channel fast path applies).
pub fn tree_on_quotient(
    topo: &Topology,
    group: &super::Group,
    total: u64,
    elem_bytes: u64,
    cal: &super::Calibration,
) -> Result<bool, CollectiveError> {
    let opts = super::tuner::plan_options(topo, group, cal, total * elem_bytes);
    let Some(spec) = TreeSpec::new(&CollectiveOp::AllReduce, group.len(), total, &opts) else {
        return Ok(false);
    };
    let mut routes = Routes::new(topo, group);
    let plan0 = spec.channel_plan(group.len());
    Ok(spec.quotient(topo, &mut routes, &plan0)?.is_some())
}

/// Whether [`super::time_collective`] times an NVLS-tree allreduce of
/// `total` elements on `group` on its quotient (part 0 stands for every
/// part).
pub fn nvls_tree_on_quotient(
    topo: &Topology,
    group: &super::Group,
    total: u64,
    elem_bytes: u64,
    cal: &super::Calibration,
) -> Result<bool, CollectiveError> {
    let opts = super::tuner::plan_options(topo, group, cal, total * elem_bytes);
    let op = CollectiveOp::AllReduce;
    let Some(plan0) = super::nvls::part_plan(&op, group.len(), total, &opts) else {
        return Ok(false);
    };
    let mut routes = Routes::new(topo, group);
    if routes.check_switch_reduce().is_err() {
        return Ok(false);
    }
    Ok(rotation_quotient(topo, &mut routes, &opts.nodes, &plan0)?.is_some())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::critical::pipelined_path;
    use crate::collective::kinds::{Algorithm, Protocol};
    use crate::collective::{build, Calibration, Group};

    /// The tuner's estimate of NVLS-tree walked on part 0 over the quotient
    /// is the whole plan's, bit for bit, with and without the bytes (the
    /// path cache's bounds read both).
    #[test]
    fn nvls_tree_walk_on_the_quotient_equals_the_whole_plans() {
        for (nodes, bytes) in [(2, 64u64 << 20), (2, 4096), (3, 8 << 20), (5, 1 << 20)] {
            let over = [crate::topology::Override {
                key: "nodes".into(),
                value: nodes.to_string(),
            }];
            let topo = crate::topology::load("dgx-h100", &over).unwrap();
            let group = Group::first(&topo, topo.num_devices()).unwrap();
            let cal = Calibration::for_model(&group.device_model(&topo)).unwrap();
            let (op, algo, total) = (CollectiveOp::AllReduce, Algorithm::NvlsTree, bytes / 4);
            let opts = super::super::tuner::plan_options(&topo, &group, &cal, bytes);
            let full = build(&op, algo, group.len(), total, &opts).unwrap();
            let part = super::super::nvls::part_plan(&op, group.len(), total, &opts).unwrap();
            let mut routes = Routes::new(&topo, &group);
            let q = rotation_quotient(&topo, &mut routes, &opts.nodes, &part)
                .unwrap()
                .unwrap();
            let protos = [Protocol::Simple];
            let walk = |plan: &Plan, q: Option<&Quotient>, routes: &mut Routes| {
                let p =
                    pipelined_path(&topo, routes, plan, 4, &cal, algo, &protos, true, q).unwrap();
                (p.path.map(f64::to_bits), p.zero_bw.map(f64::to_bits))
            };
            assert_eq!(
                walk(&part, Some(&q), &mut routes),
                walk(&full, None, &mut routes),
                "dgx-h100 x{nodes} {bytes} B"
            );
        }
    }
}
