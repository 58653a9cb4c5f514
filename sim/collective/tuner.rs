//! The tuner: estimate every applicable (algorithm, protocol) by the cost
//! model and pick the cheapest, as NCCL's tuner does; then time the choice on
//! the simulated network.
//!
//! The estimate walks the plan step by step: a step costs the protocol's hop
//! latency plus the route's link latencies plus the busiest link's bytes over
//! its protocol bandwidth (no max-min sharing, no overlap between steps).
//! Trees and NVLS-tree ([`Algorithm::estimated_by_path`]) are estimated by
//! the longest path through their moves instead (`critical.rs`).

use std::collections::BTreeSet;

use crate::engine::Time;
use crate::topology::{LinkClass, Topology};

use super::algorithms::{algorithms_for, auto_algorithms, build, PlanOptions};
use super::calibration::Calibration;
use super::channels::{rotation_quotient, TreeSpec};
use super::critical::{pipelined_path, streamed_chain_bound, streamed_path};
use super::grid_fabric::streamed_grid_path;
use super::kinds::{Algorithm, CollectiveOp, Protocol};
use super::path_cache::{PathCache, Shape};
use super::plan::{Plan, Via};
use super::prune::lower_bound_ps;
use super::rings::RingSpec;
use super::stream::time_stream;
use super::timing::{simulate, simulate_inner, Group, Quotient, Routes};
use super::tree_stream::TreeStream;
use super::CollectiveError;

/// An algorithm and protocol with the estimated time (picoseconds).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Choice {
    pub algo: Algorithm,
    pub proto: Protocol,
    pub estimate_ps: f64,
}

/// A timed collective.
#[derive(Debug, Clone, PartialEq)]
pub struct CollectiveResult {
    pub algo: Algorithm,
    pub proto: Protocol,
    pub time: Time,
    pub flows: usize,
    pub plan: Plan,
}

/// Per step, what the estimate needs (independent of the protocol).
#[derive(Debug, Clone, Copy, Default)]
struct StepCost {
    /// Busiest node-local link: bytes / bandwidth (seconds).
    local: f64,
    /// Busiest network link.
    network: f64,
    crosses_network: bool,
    route_latency_ps: u64,
}

/// `classes`: link classes of a quotient plan (`channels.rs`), whose loads
/// are those of every link of the class in the whole run.
fn step_costs(
    topo: &Topology,
    routes: &mut Routes,
    plan: &Plan,
    elem_bytes: u64,
    classes: Option<&[usize]>,
) -> Result<Vec<StepCost>, CollectiveError> {
    let mut walk = CostWalk::new(topo);
    plan.steps
        .iter()
        .map(|step| walk.cost(routes, step, elem_bytes, classes))
        .collect()
}

/// Per-link bytes of a step, dense, with the links it touched (the maxima
/// below do not depend on the order links are visited in).
struct CostWalk<'t> {
    topo: &'t Topology,
    load: Vec<u64>,
    touched: Vec<usize>,
}

impl<'t> CostWalk<'t> {
    fn new(topo: &'t Topology) -> CostWalk<'t> {
        CostWalk {
            topo,
            load: vec![0; topo.links().len()],
            touched: Vec::new(),
        }
    }

    fn add(&mut self, l: usize, b: u64) {
        if self.load[l] == 0 {
            self.touched.push(l);
        }
        self.load[l] += b;
    }

    fn cost(
        &mut self,
        routes: &mut Routes,
        step: &[super::plan::Move],
        elem_bytes: u64,
        classes: Option<&[usize]>,
    ) -> Result<StepCost, CollectiveError> {
        let links = self.topo.links();
        let mut c = StepCost::default();
        let mut down_done: BTreeSet<(usize, u64, u64, bool)> = BTreeSet::new();
        for m in step {
            let bytes = m.len * elem_bytes;
            if bytes == 0 {
                continue;
            }
            match m.via {
                Via::P2p => {
                    if m.from == m.to {
                        continue;
                    }
                    let route = routes.get(m.from, m.to)?;
                    let mut lat = 0;
                    for &l in route {
                        let l = classes.map_or(l, |c| c[l]);
                        if self.load[l] == 0 {
                            self.touched.push(l);
                        }
                        self.load[l] += bytes;
                        lat += links[l].latency_ps();
                        c.crosses_network |= links[l].class == LinkClass::Network;
                    }
                    c.route_latency_ps = c.route_latency_ps.max(lat);
                }
                Via::SwitchReduce | Via::SwitchMulticast => {
                    let reduce = m.via == Via::SwitchReduce;
                    let (up, _) = routes.switch_links(m.from)?;
                    let (_, down) = routes.switch_links(m.to)?;
                    // Reduce: every sender's up link, the receiver's down link once.
                    // Multicast: the sender's up link once, every receiver's down link.
                    let key = if reduce { m.to } else { m.from };
                    let once = down_done.insert((key, m.src, bytes, reduce));
                    if reduce || once {
                        self.add(up, bytes);
                    }
                    if !reduce || once {
                        self.add(down, bytes);
                    }
                    let lat = links[up].latency_ps() + links[down].latency_ps();
                    c.route_latency_ps = c.route_latency_ps.max(lat);
                }
            }
        }
        for l in self.touched.drain(..) {
            let b = std::mem::take(&mut self.load[l]);
            let t = b as f64 / links[l].bandwidth_bytes_per_s() as f64;
            if links[l].class == LinkClass::Network {
                c.network = c.network.max(t);
            } else {
                c.local = c.local.max(t);
            }
        }
        Ok(c)
    }
}

/// `path`: a pipelined plan's longest path ([`pipelined_path`]), which is
/// then the estimate with the base latency (not the step costs).
/// How an estimate pays the protocol's hops.
#[derive(Debug, Clone, Copy)]
enum Hops {
    /// One per step (the network figure where the step crosses it).
    PerStep,
    /// A pipelined plan's longest path ([`pipelined_path`]): the estimate
    /// itself, with the base latency (not the step costs).
    Path([f64; 3]),
    /// A ring, pipelined ([`Algorithm::pipelines_hops`]): the hops along the
    /// data's path, of which `network` (fractional) cross the network, as
    /// NCCL's model charges `nInterSteps` network hops; the steps' costs
    /// without a hop.
    Ring { network: f64 },
}

fn estimate(
    costs: &[StepCost],
    hops: Hops,
    cal: &Calibration,
    algo: Algorithm,
    proto: Protocol,
) -> f64 {
    let p = cal.params(algo, proto);
    let payload = if algo == Algorithm::Nvls {
        1.0
    } else {
        proto.payload_fraction()
    };
    let mut total = p.base_us * 1e6;
    if let Hops::Path(path) = hops {
        return total + path[Protocol::ALL.iter().position(|&q| q == proto).unwrap_or(0)];
    }
    if let Hops::Ring { network } = hops {
        let steps = costs.len() as f64;
        total += ((steps - network) * p.nvlink_hop_us + network * p.network_hop_us) * 1e6;
    }
    for c in costs {
        let hop = match hops {
            Hops::Ring { .. } => 0.0,
            _ if c.crosses_network => p.network_hop_us,
            _ => p.nvlink_hop_us,
        };
        let bw = (c.local / (payload * p.nvlink_fraction))
            .max(c.network / (payload * p.network_fraction));
        total += hop * 1e6 + c.route_latency_ps as f64 + bw * 1e12;
    }
    total
}

/// Plan options for a message of `bytes` on `group`.
pub fn plan_options(topo: &Topology, group: &Group, cal: &Calibration, bytes: u64) -> PlanOptions {
    let nodes = group.nodes(topo);
    // A tree channel per local rank carries 1/m of the message in its own
    // chunks. Simulation budget: at most `max_chunks` x 16 rank-chunks per
    // channel (two 8-GPU nodes get `max_chunks` each), never fewer than the
    // channels' share of `max_chunks`, so large clusters cost what they did.
    let m = nodes.first().map_or(1, Vec::len).max(1);
    let chunks = cal.chunks_for(bytes);
    let budget = (cal.max_chunks * 16 / group.len().max(1)).max(chunks / m);
    // NVLS-tree: NCCL's chunks, within the same budget.
    let nvls_chunks = if nodes.len() >= 2 {
        super::nvls::pipeline_chunks(bytes, nodes.len(), m, budget)
    } else {
        0
    };
    PlanOptions {
        chunks,
        channel_chunks: cal.chunks_for(bytes / m as u64).min(budget),
        nvls_chunks,
        nodes,
    }
}

/// Protocols an algorithm runs with (NVLS and NVLS-tree only on Simple).
pub fn protocols_for(algo: Algorithm) -> &'static [Protocol] {
    if matches!(algo, Algorithm::Nvls | Algorithm::NvlsTree) {
        &[Protocol::Simple]
    } else {
        &Protocol::ALL
    }
}

/// A chosen algorithm's schedule: its plan, or (a ring whose moves are all
/// equal) its ring form, whose plan is built only when asked for.
#[derive(Debug, Clone, PartialEq)]
pub enum Candidate {
    Plan(Plan),
    Ring(RingSpec),
    /// A tree whose channels are images of channel 0, or an NVLS-tree whose
    /// parts are images of part 0: that plan and the quotient.
    Channels(Box<(Plan, Quotient)>),
    /// A tree allreduce, its steps generated when asked for.
    Tree(TreeStream),
}

impl Candidate {
    /// The plan: built now for a ring (its candidate kept only the spec).
    #[allow(clippy::too_many_arguments)]
    fn into_plan(
        self,
        topo: &Topology,
        group: &Group,
        op: &CollectiveOp,
        algo: Algorithm,
        total: u64,
        elem_bytes: u64,
        cal: &Calibration,
    ) -> Result<Plan, CollectiveError> {
        match self {
            Candidate::Plan(p) => Ok(p),
            Candidate::Ring(_) | Candidate::Channels(_) | Candidate::Tree(_) => {
                let opts = plan_options(topo, group, cal, total * elem_bytes);
                build(op, algo, group.len(), total, &opts)
            }
        }
    }
}

/// Pick the cheapest applicable (algorithm, protocol) by the estimate, among
/// `algo` (or NCCL's algorithms for the operation: [`auto_algorithms`]) and
/// `proto` (or all).
#[allow(clippy::too_many_arguments)]
pub fn choose(
    topo: &Topology,
    group: &Group,
    op: &CollectiveOp,
    total: u64,
    elem_bytes: u64,
    cal: &Calibration,
    algo: Option<Algorithm>,
    proto: Option<Protocol>,
) -> Result<(Choice, Plan), CollectiveError> {
    choose_inner(topo, group, op, total, elem_bytes, cal, algo, proto, true)
}

/// [`choose`] with every candidate's plan built and estimated (no lower-bound
/// pruning): the same choice, for checks.
#[allow(clippy::too_many_arguments)]
pub fn choose_unpruned(
    topo: &Topology,
    group: &Group,
    op: &CollectiveOp,
    total: u64,
    elem_bytes: u64,
    cal: &Calibration,
    algo: Option<Algorithm>,
    proto: Option<Protocol>,
) -> Result<(Choice, Plan), CollectiveError> {
    choose_inner(topo, group, op, total, elem_bytes, cal, algo, proto, false)
}

#[allow(clippy::too_many_arguments)]
fn choose_inner(
    topo: &Topology,
    group: &Group,
    op: &CollectiveOp,
    total: u64,
    elem_bytes: u64,
    cal: &Calibration,
    algo: Option<Algorithm>,
    proto: Option<Protocol>,
    prune: bool,
) -> Result<(Choice, Plan), CollectiveError> {
    let mut routes = Routes::new(topo, group);
    let (choice, cand) = choose_candidate_with(
        topo,
        group,
        &mut routes,
        op,
        total,
        elem_bytes,
        cal,
        algo,
        proto,
        prune,
        None,
    )?;
    let plan = cand.into_plan(topo, group, op, choice.algo, total, elem_bytes, cal)?;
    Ok((choice, plan))
}

/// [`choose`] without building a ring's plan ([`RingSpec`]): its estimate
/// is one step's cost repeated, which equals the plan's step by step.
#[allow(clippy::too_many_arguments)]
pub(crate) fn choose_candidate(
    topo: &Topology,
    group: &Group,
    routes: &mut Routes,
    op: &CollectiveOp,
    total: u64,
    elem_bytes: u64,
    cal: &Calibration,
    algo: Option<Algorithm>,
    proto: Option<Protocol>,
) -> Result<(Choice, Candidate), CollectiveError> {
    choose_candidate_with(
        topo, group, routes, op, total, elem_bytes, cal, algo, proto, true, None,
    )
}

/// [`choose_candidate`]; `prune`: skip a candidate whose lower bound is
/// above the best estimate so far (`false` for the checks that it changes
/// nothing); `cache`: a sweep's earlier walks, for bounds from them
/// (`path_cache.rs`), and where this call's walks go.
#[allow(clippy::too_many_arguments)]
fn choose_candidate_with(
    topo: &Topology,
    group: &Group,
    routes: &mut Routes,
    op: &CollectiveOp,
    total: u64,
    elem_bytes: u64,
    cal: &Calibration,
    algo: Option<Algorithm>,
    proto: Option<Protocol>,
    prune: bool,
    mut cache: Option<&mut PathCache>,
) -> Result<(Choice, Candidate), CollectiveError> {
    // `collective.chooser = "nccl"`: NCCL's model picks, ours times it (our
    // own pick where the simulator cannot run NCCL's).
    if let Some((a, p)) = super::nccl_model::pick(topo, group, op, total * elem_bytes, algo, proto)?
    {
        let forced = choose_candidate_with(
            topo,
            group,
            routes,
            op,
            total,
            elem_bytes,
            cal,
            Some(a),
            p,
            prune,
            cache.as_deref_mut(),
        );
        if forced.is_ok() {
            return forced;
        }
    }
    let opts = plan_options(topo, group, cal, total * elem_bytes);
    let algos: Vec<Algorithm> = match algo {
        Some(a) => vec![a],
        None => auto_algorithms(op).to_vec(),
    };
    // Estimated in this order, chosen by (estimate, place in `algos`): the
    // tree before the ring, whose bound (`prune.rs`) then rules it out at
    // small sizes without walking its plan.
    // A ring of equal moves costs one step's estimate: it goes first, and
    // its estimate then bounds the tree's walk (its chain bound, below).
    let mut order: Vec<usize> = (0..algos.len()).collect();
    if let (Some(r), Some(t)) = (
        algos.iter().position(|&a| a == Algorithm::Ring),
        algos.iter().position(|&a| a == Algorithm::Tree),
    ) {
        if RingSpec::new(op, group.len(), total, &opts).is_none() {
            order.swap(r, t);
        }
    }
    let mut best: Option<(Choice, Candidate, usize)> = None;
    let mut last_err = None;
    for place in order {
        let a = algos[place];
        let spec = if a == Algorithm::Ring {
            match RingSpec::new(op, group.len(), total, &opts) {
                Some(s) => Some(s),
                // Uneven pieces: one step's cost is the largest piece's
                // when the positions are alike and link-disjoint.
                None => match RingSpec::uneven(op, group.len(), total, &opts) {
                    Some(s) if s.positions_alike(topo, routes)? => Some(s),
                    _ => None,
                },
            }
        } else {
            None
        };
        // Empty where `proto` does not apply (skipped once the candidate's
        // own errors had their say).
        let protos: Vec<Protocol> = match proto {
            Some(p) if protocols_for(a).contains(&p) => vec![p],
            Some(_) => Vec::new(),
            None => protocols_for(a).to_vec(),
        };
        // `auto` only: a candidate whose lower bound is above the best so far
        // cannot win (ties keep the earlier one), so its plan is not built.
        if prune && algo.is_none() && *op == CollectiveOp::AllReduce {
            if let Some((b, _, _)) = &best {
                let bytes = total * elem_bytes;
                let nodes = &opts.nodes;
                let n = group.len();
                if let Some(lb) = lower_bound_ps(topo, routes, n, nodes, a, &protos, bytes, cal)? {
                    if lb * (1.0 - 1e-9) > b.estimate_ps {
                        continue;
                    }
                }
                let shape = cache
                    .as_ref()
                    .and_then(|_| shape_of(group, &opts, a, elem_bytes, &protos));
                if let (Some(c), Some(sh)) = (cache.as_deref(), shape) {
                    if let Some(lb) = c.bound(&sh, total, cal) {
                        if lb * (1.0 - 1e-9) > b.estimate_ps {
                            continue;
                        }
                    }
                }
            }
        }
        let (cand, costs, hops) = match spec {
            Some(spec) => {
                let step = Plan {
                    ranks: group.len(),
                    buffer_len: total,
                    steps: vec![spec.one_step()],
                    reduced: Vec::new(),
                };
                let one = step_costs(topo, routes, &step, elem_bytes, None)?[0];
                // The data's path visits `steps` ring positions in a row:
                // the ring's share of network crossings.
                let n = spec.rings[0].len();
                let mut crossings = 0usize;
                for m in &step.steps[0][..n] {
                    crossings += usize::from(routes.crosses_network(m.from, m.to)?);
                }
                let network = spec.steps as f64 * crossings as f64 / n as f64;
                (
                    Candidate::Ring(spec.clone()),
                    vec![one; spec.steps],
                    Hops::Ring { network },
                )
            }
            None => {
                // NVLS's plan is quadratic in ranks: check the switch first
                // (after the operation, so the error is the one build gives).
                if algorithms_for(op).contains(&a) {
                    let check = match a {
                        Algorithm::Nvls => routes.check_nvls(),
                        Algorithm::NvlsTree => routes.check_switch_reduce(),
                        _ => Ok(()),
                    };
                    if let Err(e) = check {
                        last_err = Some(e);
                        continue;
                    }
                }
                // Trees and NVLS-tree: channel or part 0, timed on the
                // quotient by the node rotation where the topology carries it.
                let plan0 = match a {
                    Algorithm::Tree => TreeSpec::new(op, group.len(), total, &opts)
                        .map(|spec| spec.channel_plan(group.len())),
                    Algorithm::NvlsTree => super::nvls::part_plan(op, group.len(), total, &opts),
                    _ => None,
                };
                let quotient = match plan0 {
                    Some(plan0) => {
                        rotation_quotient(topo, routes, &opts.nodes, &plan0)?.map(|q| (plan0, q))
                    }
                    None => None,
                };
                match quotient {
                    Some((plan0, q)) => {
                        // A pipelined plan's estimate is its path, not its steps.
                        let costs = if a.estimated_by_path() {
                            Vec::new()
                        } else {
                            step_costs(topo, routes, &plan0, elem_bytes, Some(&q.link_class))?
                        };
                        let hops = if a.estimated_by_path() {
                            // NVLS-tree's walk bounds larger sizes in a
                            // sweep, as its whole plan's would.
                            let shape = cache.as_ref().and_then(|_| {
                                shape_of(group, &opts, a, elem_bytes, &protos)
                                    .and_then(|sh| sh.exact(total))
                            });
                            let paths = pipelined_path(
                                topo,
                                routes,
                                &plan0,
                                elem_bytes,
                                cal,
                                a,
                                &protos,
                                shape.is_some(),
                                Some(&q),
                            )?;
                            if let (Some(c), Some(sh)) = (cache.as_deref_mut(), shape) {
                                c.record(sh, total, paths);
                            }
                            Hops::Path(paths.path)
                        } else {
                            Hops::PerStep
                        };
                        (Candidate::Channels(Box::new((plan0, q))), costs, hops)
                    }
                    None if a == Algorithm::Tree && *op == CollectiveOp::AllReduce => {
                        let stream = TreeStream::allreduce(group.len(), total, &opts);
                        // `auto`: one rank's chain of steps bounds the walk
                        // (on a ring topology, routes of up to n / 2 links).
                        if let (true, None, Some((b, _, _))) = (prune, algo, &best) {
                            let lb = streamed_chain_bound(
                                topo,
                                routes,
                                group.len(),
                                &stream,
                                elem_bytes,
                                cal,
                                a,
                                &protos,
                            )?;
                            if lb.is_some_and(|lb| lb * (1.0 - 1e-9) > b.estimate_ps) {
                                continue;
                            }
                        }
                        // Trees pipeline: the estimate is the stream's path.
                        // On a grid it is walked on the geometry (the same
                        // paths, n log n instead of n^2 route links);
                        // `choose_unpruned` keeps the route walk, so the
                        // prune tests compare the two.
                        let on_grid = if prune {
                            streamed_grid_path(
                                topo,
                                &group.devices,
                                &stream,
                                elem_bytes,
                                cal,
                                a,
                                &protos,
                            )?
                        } else {
                            None
                        };
                        let path = match on_grid {
                            Some(paths) => paths.path,
                            None => {
                                streamed_path(
                                    topo,
                                    routes,
                                    group.len(),
                                    &stream,
                                    elem_bytes,
                                    cal,
                                    a,
                                    &protos,
                                )?
                                .path
                            }
                        };
                        (Candidate::Tree(stream), Vec::new(), Hops::Path(path))
                    }
                    None => {
                        let plan = match build(op, a, group.len(), total, &opts) {
                            Ok(p) => p,
                            Err(e) => {
                                last_err = Some(e);
                                continue;
                            }
                        };
                        let costs = if a.estimated_by_path() {
                            Vec::new()
                        } else {
                            step_costs(topo, routes, &plan, elem_bytes, None)?
                        };
                        let hops = if a.estimated_by_path() {
                            // A sweep keeps the walk (and its zero-bandwidth
                            // path) where the shape bounds larger sizes.
                            let shape = cache.as_ref().and_then(|_| {
                                shape_of(group, &opts, a, elem_bytes, &protos)
                                    .and_then(|sh| sh.exact(total))
                            });
                            let paths = pipelined_path(
                                topo,
                                routes,
                                &plan,
                                elem_bytes,
                                cal,
                                a,
                                &protos,
                                shape.is_some(),
                                None,
                            )?;
                            if let (Some(c), Some(sh)) = (cache.as_deref_mut(), shape) {
                                c.record(sh, total, paths);
                            }
                            Hops::Path(paths.path)
                        } else {
                            Hops::PerStep
                        };
                        (Candidate::Plan(plan), costs, hops)
                    }
                }
            }
        };
        if protos.is_empty() {
            continue;
        }
        // This algorithm's cheapest protocol (the first of equal ones), then
        // against the others: the candidate moves, it is never copied.
        let mut mine: Option<Choice> = None;
        for &p in &protos {
            let e = estimate(&costs, hops, cal, a, p);
            if mine.map_or(true, |b| e < b.estimate_ps) {
                mine = Some(Choice {
                    algo: a,
                    proto: p,
                    estimate_ps: e,
                });
            }
        }
        if let Some(c) = mine {
            if best.as_ref().map_or(true, |(b, _, bp)| {
                c.estimate_ps < b.estimate_ps || (c.estimate_ps == b.estimate_ps && place < *bp)
            }) {
                best = Some((c, cand, place));
            }
        }
    }
    best.map(|(c, cand, _)| (c, cand)).ok_or_else(|| {
        last_err.unwrap_or(CollectiveError::NotApplicable {
            op: op.name(),
            algo: algo.map_or("auto", Algorithm::name),
            why: "no algorithm applies".into(),
        })
    })
}

/// The plan shape of NVLS-tree over `group` (the one algorithm a sweep's
/// [`PathCache`] bounds) estimated under `protos`.
fn shape_of(
    group: &Group,
    opts: &PlanOptions,
    algo: Algorithm,
    elem_bytes: u64,
    protos: &[Protocol],
) -> Option<Shape> {
    if algo != Algorithm::NvlsTree || opts.nodes.len() < 2 {
        return None;
    }
    let per = opts.nvls_tree_chunks();
    Some(Shape {
        algo,
        ranks: group.len(),
        parts: opts.nodes[0].len(),
        per,
        elem_bytes,
        protos: protos.to_vec(),
    })
}

/// What [`time_collective`] reports: the choice and its timing.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TimedChoice {
    pub algo: Algorithm,
    pub proto: Protocol,
    pub time: Time,
    pub flows: usize,
}

/// [`run_collective`]'s time without its plan: a ring whose moves are all
/// equal and whose units are alike ([`RingSpec::symmetric`]) is timed on one
/// unit; anything else builds the plan and simulates it. Same figures.
#[allow(clippy::too_many_arguments)]
pub fn time_collective(
    topo: &Topology,
    group: &Group,
    op: &CollectiveOp,
    total: u64,
    elem_bytes: u64,
    cal: &Calibration,
    algo: Option<Algorithm>,
    proto: Option<Protocol>,
) -> Result<TimedChoice, CollectiveError> {
    let mut cache = PathCache::new();
    time_collective_cached(
        topo, group, op, total, elem_bytes, cal, algo, proto, &mut cache,
    )
}

/// [`time_collective`] in a sweep over one topology, group and calibration:
/// `cache` keeps the walks of earlier sizes, whose bounds let `auto` skip
/// NVLS-tree where it cannot win (`path_cache.rs`; the same choice).
#[allow(clippy::too_many_arguments)]
pub fn time_collective_cached(
    topo: &Topology,
    group: &Group,
    op: &CollectiveOp,
    total: u64,
    elem_bytes: u64,
    cal: &Calibration,
    algo: Option<Algorithm>,
    proto: Option<Protocol>,
    cache: &mut PathCache,
) -> Result<TimedChoice, CollectiveError> {
    let mut routes = Routes::new(topo, group);
    let (choice, cand) = choose_candidate_with(
        topo,
        group,
        &mut routes,
        op,
        total,
        elem_bytes,
        cal,
        algo,
        proto,
        true,
        Some(cache),
    )?;
    if let Candidate::Ring(spec) = &cand {
        if let Some(t) = spec.time_units(
            topo,
            &mut routes,
            elem_bytes,
            choice.algo,
            choice.proto,
            cal,
        )? {
            return Ok(TimedChoice {
                algo: choice.algo,
                proto: choice.proto,
                time: t.time,
                flows: t.flows,
            });
        }
    }
    if let Candidate::Channels(c) = &cand {
        let (plan0, q) = &**c;
        let t = simulate_inner(
            topo,
            group,
            plan0,
            elem_bytes,
            choice.algo,
            choice.proto,
            cal,
            &[],
            Some(q),
        )?;
        return Ok(TimedChoice {
            algo: choice.algo,
            proto: choice.proto,
            time: t.time,
            flows: t.flows,
        });
    }
    if let Candidate::Tree(stream) = &cand {
        let t = time_stream(
            topo,
            &mut routes,
            group.len(),
            stream,
            elem_bytes,
            choice.algo,
            choice.proto,
            cal,
            None,
        )?;
        return Ok(TimedChoice {
            algo: choice.algo,
            proto: choice.proto,
            time: t.time,
            flows: t.flows,
        });
    }
    let plan = cand.into_plan(topo, group, op, choice.algo, total, elem_bytes, cal)?;
    let t = simulate(
        topo,
        group,
        &plan,
        elem_bytes,
        choice.algo,
        choice.proto,
        cal,
    )?;
    Ok(TimedChoice {
        algo: choice.algo,
        proto: choice.proto,
        time: t.time,
        flows: t.flows,
    })
}

/// Choose (or take) the algorithm and protocol, then time it on the network.
#[allow(clippy::too_many_arguments)]
pub fn run_collective(
    topo: &Topology,
    group: &Group,
    op: &CollectiveOp,
    total: u64,
    elem_bytes: u64,
    cal: &Calibration,
    algo: Option<Algorithm>,
    proto: Option<Protocol>,
) -> Result<CollectiveResult, CollectiveError> {
    let (choice, plan) = choose(topo, group, op, total, elem_bytes, cal, algo, proto)?;
    let t = simulate(
        topo,
        group,
        &plan,
        elem_bytes,
        choice.algo,
        choice.proto,
        cal,
    )?;
    Ok(CollectiveResult {
        algo: choice.algo,
        proto: choice.proto,
        time: t.time,
        flows: t.flows,
        plan,
    })
}
