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

use super::algorithms::{algorithms_for, auto_algorithms_on, build, PlanOptions};
use super::calibration::Calibration;
use super::channels::{rotation_quotient_cached, TreeSpec};
use super::critical::{pipelined_path, streamed_chain_bound, streamed_path};
use super::grid_fabric::streamed_grid_path;
use super::kinds::{Algorithm, CollectiveOp, Protocol};
use super::path_cache::{PathCache, PeriodKey, Shape};
use super::plan::{Plan, Via};
use super::policy::{Policy, Tuned};
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

/// `quotient`: the link classes of a quotient plan (`channels.rs`), whose
/// loads are those of every link of the class in the whole run (shared
/// links at their copy's share of the bandwidth).
fn step_costs(
    topo: &Topology,
    routes: &mut Routes,
    plan: &Plan,
    elem_bytes: u64,
    quotient: Option<&Quotient>,
) -> Result<Vec<StepCost>, CollectiveError> {
    let mut walk = CostWalk::new(topo);
    plan.steps
        .iter()
        .map(|step| walk.cost(routes, step, elem_bytes, quotient))
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
        quotient: Option<&Quotient>,
    ) -> Result<StepCost, CollectiveError> {
        let classes = quotient.map(|q| &q.link_class[..]);
        let links = self.topo.links();
        let mut c = StepCost::default();
        let mut down_done: BTreeSet<(usize, u64, u64, bool)> = BTreeSet::new();
        let mut net_done: BTreeSet<(usize, u64, u64)> = BTreeSet::new();
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
                    let route = routes.get_lane(m.from, m.to, m.lane)?;
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
                Via::InNetwork | Via::NetworkReduce | Via::NetworkMulticast => {
                    // Each link of the aggregation tree once per range
                    // (nothing up for a result held at the root).
                    let (up, down) = routes.net_move_links(m)?;
                    let mut lat = 0;
                    for l in up.into_iter().chain(down) {
                        let l = classes.map_or(l, |c| c[l]);
                        lat += links[l].latency_ps();
                        if net_done.insert((l, m.dst, bytes)) {
                            self.add(l, bytes);
                        }
                    }
                    c.crosses_network = true;
                    c.route_latency_ps = c.route_latency_ps.max(lat);
                }
            }
        }
        for l in self.touched.drain(..) {
            let b = std::mem::take(&mut self.load[l]);
            let t = b as f64 / super::timing::copy_bandwidth(self.topo, quotient, l) as f64;
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
    let sliced = |network: bool| super::timing::ring_slices(cal, algo, proto, network);
    if let Hops::Ring { network } = hops {
        let steps = costs.len() as f64;
        let hops = (steps - network) * p.nvlink_hop_us + network * p.network_hop_us;
        if sliced(network > 0.0) && steps > 0.0 {
            // A sliced ring step (`timing::ring_slices`): the sender's two
            // slices back to back, or one slice plus the hop (the ring's
            // hops spread over its steps) and the route's latency along the
            // data's path, whichever is longer.
            for c in costs {
                let bw = (c.local / (payload * p.nvlink_fraction))
                    .max(c.network / (payload * p.network_fraction));
                let path = hops / steps * 1e6 + c.route_latency_ps as f64;
                total += (bw * 1e12).max(bw * 0.5e12 + path);
            }
            return total;
        }
        total += hops * 1e6;
    }
    for c in costs {
        let hop = match hops {
            Hops::Ring { .. } => 0.0,
            _ if c.crosses_network => p.network_hop_us,
            _ => p.nvlink_hop_us,
        };
        let bw = (c.local / (payload * p.nvlink_fraction))
            .max(c.network / (payload * p.network_fraction));
        if matches!(hops, Hops::PerStep) && sliced(c.crosses_network) {
            // A sliced step of a walked ring plan, as above.
            let path = hop * 1e6 + c.route_latency_ps as f64;
            total += (bw * 1e12).max(bw * 0.5e12 + path);
            continue;
        }
        total += hop * 1e6 + c.route_latency_ps as f64 + bw * 1e12;
    }
    total
}

/// The pipeline chunk of each tree of a tree allreduce of `bytes` across
/// nodes: the calibration's `chunk_bytes` (NCCL's Simple step), or NCCL
/// 2.19's smaller chunk where the topology names that release
/// (`[collective] nccl_version`, [`super::nccl_model::tree_chunk`]), or the
/// chunk a period's run fixes.
pub fn tree_chunk_bytes(topo: &Topology, group: &Group, cal: &Calibration, bytes: u64) -> u64 {
    if let Some(c) = cal.tree_chunk_fixed {
        return c.max(1);
    }
    super::nccl_model::tree_chunk(topo, group, bytes, cal.chunk_bytes)
        .unwrap_or(cal.chunk_bytes)
        .max(1)
}

/// The most chunks of a CollNet reduce-scatter or all-gather (a 2 GiB
/// message in NCCL's 512 KiB steps; beyond it the chunks grow).
const COLLNET_MAX_CHUNKS: usize = 4096;

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
    let lanes = if nodes.len() > 1 {
        topo.nic_lanes(&group.devices) as usize
    } else {
        1
    };
    // Past two NICs per GPU a channel's share splits over sub-channels.
    let subs = super::algorithms::tree_subs(lanes) as u64;
    // Each of our tree channels runs both trees of the double binary tree,
    // each with half its share: two NCCL channels (NCCL doubles its
    // channels, the second half on the mirrored tree), each cutting its
    // half in chunks of `chunk_bytes` (NCCL 2.19: smaller ones on smaller
    // messages, `tree_chunk_bytes`).
    let tree_bytes = (bytes / m as u64 / subs).div_ceil(2);
    let tree_chunk = if nodes.len() >= 2 {
        tree_chunk_bytes(topo, group, cal, bytes)
    } else {
        cal.chunk_bytes
    };
    let tree_chunks = Calibration {
        chunk_bytes: tree_chunk,
        ..*cal
    }
    .chunks_for(tree_bytes);
    PlanOptions {
        chunks,
        channel_chunks: cal.chunks_for(bytes / m as u64).min(budget),
        nvls_chunks,
        tree_chunks: tree_chunks.min(budget),
        lanes,
        nodes,
        tree_channel_cap: super::algorithms::tree_channel_cap(bytes),
        collnet_chunks: usize::try_from(bytes.div_ceil(cal.chunk_bytes.max(1)))
            .unwrap_or(usize::MAX)
            .clamp(1, COLLNET_MAX_CHUNKS),
    }
}

/// A multi-node tree allreduce past the chunk budget, timed by its period:
/// a tree of equal chunks is periodic once its pipeline is full, so a tree
/// of `N` chunks of `c` ([`tree_chunk_bytes`]) per tree is timed from one run of the
/// same tree with `M < N` chunks of `c` and the completion times of its
/// steps. Step `k` carries chunk `k - j` at level `j` of `2h` (`h` the
/// tree's height), so steps `2h - 1` to `M - 1` run with the pipeline full,
/// each ending one chunk's last hop: the period `p` is their spacing (the
/// span from step `2h - 1` to step `M - 1` over `M - 2h` steps), the fill
/// what comes before, and the time is the run's (its drain included) plus
/// `(N - M) p`, pro rata in bytes (less, where `N < M`). `M` is the larger
/// of twice `K` (the budget's chunk count, at least the tree's height) and
/// `3h` (a full stretch of `h + 1` steps); a tree of fewer than `2h` chunks
/// (no full stretch of its own) is run with every chunk. So every size past
/// `2h` chunks needs the same run, which a sweep makes once ([`PathCache`]).
///
/// NVLS-tree past its budget likewise ([`TreePeriod::of`] with
/// [`Algorithm::NvlsTree`]): a part of `N` of NCCL's pipeline chunks
/// (`16 x` [`super::nvls::nccl_chunk_bytes`] each) is timed from a run of
/// `M` such chunks per part, whose pipeline is full from step `2h - 1 + 4`
/// ([`super::nvls::pipeline_full_from`]: the switch's reduce and multicast
/// around the tree over the nodes); `h` is that tree's height, `M` at least
/// twice the fill, and a part of at most `M` chunks is run whole.
/// The tuner ranks the tree by that time and times its rivals to rank them
/// alike ([`choose`]); data mode keeps the budgeted plan ([`plan_options`]).
#[derive(Debug, Clone, PartialEq)]
pub struct TreePeriod {
    /// The algorithm: the tree or NVLS-tree.
    pub algo: Algorithm,
    /// Elements of the run: `chunks` chunks of `chunk_bytes` per tree (per
    /// part for NVLS-tree).
    pub run_total: u64,
    /// Bytes per tree (part) of the real message and of the run.
    pub tree_bytes: u64,
    pub run_bytes: u64,
    /// The pipeline chunk: the release's tree chunk for a tree
    /// ([`tree_chunk_bytes`]: the calibration's `chunk_bytes` but under
    /// NCCL 2.19), NCCL's NVLS chunk times its 16 channels for NVLS-tree.
    pub chunk_bytes: u64,
    /// Chunks per tree in the run, and the tree's height.
    pub chunks: usize,
    pub height: usize,
    /// The first step with the pipeline full (`2h - 1` for a tree).
    pub full_from: usize,
    /// The calibration with a chunk budget that lets the run's chunks through.
    pub cal: Calibration,
}

impl TreePeriod {
    /// `Some` for a tree (or NVLS-tree) allreduce across alike nodes whose
    /// pipeline chunks outnumber the budget's.
    pub fn of(
        algo: Algorithm,
        topo: &Topology,
        group: &Group,
        op: &CollectiveOp,
        total: u64,
        elem_bytes: u64,
        cal: &Calibration,
    ) -> Option<TreePeriod> {
        if *op != CollectiveOp::AllReduce || elem_bytes == 0 {
            return None;
        }
        let bytes = total.checked_mul(elem_bytes)?;
        let opts = plan_options(topo, group, cal, bytes);
        let m = opts.nodes.first().map_or(1, Vec::len);
        let alike = opts.nodes.iter().all(|g| g.len() == m);
        let nodes = opts.nodes.len();
        if nodes < 2 || m < 1 || !alike {
            return None;
        }
        // A tree channel splits into sub-channels over a GPU's NICs past
        // two (`tree_subs`); NVLS-tree keeps one NIC per head.
        let subs = match algo {
            Algorithm::Tree => super::algorithms::tree_subs(opts.lanes),
            _ => 1,
        };
        // Per tree (part): its bytes, pipeline chunk, height, the budget's
        // chunks, the run's elements per chunk of every tree (part), and
        // the first step with the pipeline full.
        let (tree_bytes, cb, height, k, per_chunk) = match algo {
            Algorithm::Tree => {
                let cb = tree_chunk_bytes(topo, group, cal, bytes);
                // The height of a channel's trees: a heap over the nodes, a
                // chain in each node. Each tree of a (sub-)channel: half of
                // its share.
                let height = nodes.ilog2() as usize + m - 1;
                // The budget in rank-chunks bounds the run too, down to
                // 3h (M = 6h): one GPU per node gets the budget's floor of
                // a whole channel's chunks (`plan_options`), 64, which on
                // 256 nodes ran 128 chunks of 256 ranks per period run.
                let ranks = cal.max_chunks.saturating_mul(16) / group.len().max(1);
                let k = opts
                    .tree_channel_chunks()
                    .min(ranks.max(3 * height))
                    .max(height);
                (
                    (bytes / m as u64 / subs as u64).div_ceil(2),
                    cb,
                    height,
                    k,
                    2 * (m * subs) as u64,
                )
            }
            Algorithm::NvlsTree => {
                let cb = super::nvls::NCCL_NVLS_CHANNELS
                    * super::nvls::nccl_chunk_bytes(bytes, nodes, m as u64);
                // A heap over the nodes (and its mirror, as high).
                let height = nodes.ilog2() as usize;
                let k = opts.nvls_tree_chunks();
                (bytes.div_ceil(m as u64), cb, height, k, m as u64)
            }
            _ => return None,
        };
        if cb == 0 || cb % elem_bytes != 0 {
            return None;
        }
        let full_from = match algo {
            Algorithm::Tree => 2 * height - 1,
            _ => super::nvls::pipeline_full_from(height),
        };
        let k = k.max(1);
        let chunks = tree_bytes.div_ceil(cb);
        if chunks <= k as u64 {
            return None;
        }
        // The run: twice the budget's chunks, and a full stretch after the
        // fill. A tree: `h + 1` steps (`3h` in all). NVLS-tree: a stretch as
        // long as the fill (16 DGX H100 nodes: +0.9 to +2.2% at 16 chunks,
        // -0.3 to +0.1% at 24), and a message of no more chunks than the
        // run is run whole (read back from 24 chunks, 16 were 2.0% fast).
        let run = match algo {
            Algorithm::Tree => full_from + height + 1,
            _ => 2 * (full_from + 1),
        }
        .max(2 * k);
        let whole = match algo {
            Algorithm::Tree => full_from as u64,
            _ => run as u64,
        };
        let (run_total, run_bytes, chunks) = if chunks <= whole {
            (total, tree_bytes, chunks as usize)
        } else {
            (
                run as u64 * cb * per_chunk / elem_bytes,
                run as u64 * cb,
                run,
            )
        };
        let n = group.len().max(1);
        let max_chunks = cal
            .max_chunks
            .max(2 * m * subs * chunks)
            .max((chunks * n).div_ceil(16) + 1);
        let x = TreePeriod {
            algo,
            run_total,
            tree_bytes,
            run_bytes,
            chunk_bytes: cb,
            chunks,
            height,
            full_from,
            // The run's smaller message is cut in the message's chunks.
            cal: Calibration {
                max_chunks,
                tree_chunk_fixed: (algo == Algorithm::Tree).then_some(cb),
                ..*cal
            },
        };
        // NVLS-tree's chunk follows the message's size: the run must cut
        // its parts in the same chunks.
        if algo == Algorithm::NvlsTree {
            let o = plan_options(topo, group, &x.cal, run_total * elem_bytes);
            if o.nvls_tree_chunks() != chunks {
                return None;
            }
        }
        Some(x)
    }

    /// Whether the run is not the message's (the time read off its line).
    pub fn extrapolated(&self) -> bool {
        self.run_bytes != self.tree_bytes
    }

    /// The period over the run's full stretch as a fraction `(span, steps)`
    /// of picoseconds per chunk, from each step's completion (`None` where
    /// the run has no full stretch).
    pub fn period(&self, steps: &[Time]) -> Option<(u64, u64)> {
        let first = self.full_from;
        let last = self.chunks.checked_sub(1)?;
        if last <= first || steps.len() <= last {
            return None;
        }
        let span = steps[last].0.checked_sub(steps[first].0)?;
        Some((span, (last - first) as u64))
    }

    /// The message's time from the run's (`run`) and its period: the run
    /// plus (or, for a message of fewer chunks, less) the bytes between the
    /// two at `span / steps` per chunk of `chunk_bytes`, in integer
    /// picoseconds (rounded toward minus infinity).
    pub fn extend_time(&self, run: Time, (span, steps): (u64, u64)) -> Time {
        let extra = i128::from(self.tree_bytes) - i128::from(self.run_bytes);
        let per = i128::from(steps) * i128::from(self.chunk_bytes);
        let add = (i128::from(span) * extra).div_euclid(per.max(1));
        let t = i128::from(run.0) + add;
        Time(u64::try_from(t.max(0)).unwrap_or(u64::MAX))
    }
}

/// Protocols an algorithm runs with (NVLS, NVLS-tree and CollNet only on
/// Simple).
pub fn protocols_for(algo: Algorithm) -> &'static [Protocol] {
    if matches!(
        algo,
        Algorithm::Nvls | Algorithm::NvlsTree | Algorithm::CollNet
    ) {
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
    /// A tree past the chunk budget, timed by its period ([`TreePeriod`]).
    Period(Box<TimedChoice>),
    /// A candidate timed to be ranked against such a tree, with its timing.
    Timed(Box<(TimedChoice, Candidate)>),
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
            Candidate::Timed(b) => b.1.into_plan(topo, group, op, algo, total, elem_bytes, cal),
            Candidate::Ring(_)
            | Candidate::Channels(_)
            | Candidate::Tree(_)
            | Candidate::Period(_) => {
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
        true,
        None,
    )?;
    let plan = cand.into_plan(topo, group, op, choice.algo, total, elem_bytes, cal)?;
    Ok((choice, plan))
}

/// How close a runner-up's estimate must be to the best's for both to be
/// timed (`auto` across nodes): the tree's and NVLS-tree's estimates miss
/// their times by amounts up to 4.8% apart where they are close (16 DGX
/// H100 nodes, 64 MiB).
const NEAR: f64 = 0.05;

/// How far above the best time a rival's estimate may be for it to be
/// timed where a time ranks ([`TreePeriod`]): the estimates of rings and
/// NVLS-tree on 16-128 DGX H100 nodes from 64 MiB are 1-64% above their
/// times, so a rival estimated at more than 1.75 times the best time is
/// slower.
const FINALIST: f64 = 1.75;

/// A ranked candidate: its choice (the estimate, or its time where timed),
/// the candidate, its place in the algorithms' order (ties go to the first).
type Ranked = (Choice, Candidate, usize);

/// Whether `r` ranks ahead of `b`.
fn ahead(r: &Ranked, b: &Ranked) -> bool {
    r.0.estimate_ps < b.0.estimate_ps || (r.0.estimate_ps == b.0.estimate_ps && r.2 < b.2)
}

/// Put `r` in its rank among the best two.
fn rank(best: &mut Option<Ranked>, second: &mut Option<Ranked>, r: Ranked) {
    match best {
        Some(b) if !ahead(&r, b) => {
            if second.as_ref().map_or(true, |s| ahead(&r, s)) {
                *second = Some(r);
            }
        }
        _ => *second = best.replace(r),
    }
}

/// [`choose`] without building a ring's plan ([`RingSpec`]: its estimate
/// is one step's cost repeated, which equals the plan's step by step);
/// `prune`: skip a candidate whose lower bound is
/// above the best estimate so far (`false` for the checks that it changes
/// nothing); `timed`: the choice is for a group timed alone (a sweep's, or
/// each of groups that share no link, `groups.rs`), so a tree
/// past the chunk budget is timed by its period and `auto` ranks by times
/// where it must ([`TreePeriod`], near ties); `false` where the budgeted
/// plan itself is then timed (`groups.rs`, groups at once over shared
/// links or faults): the
/// estimates of the plans that run rank them; `cache`: a sweep's earlier
/// walks, for bounds from them (`path_cache.rs`), and where this call's
/// walks and period runs go.
#[allow(clippy::too_many_arguments)]
pub(crate) fn choose_candidate_with(
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
    timed: bool,
    mut cache: Option<&mut PathCache>,
) -> Result<(Choice, Candidate), CollectiveError> {
    let opts = plan_options(topo, group, cal, total * elem_bytes);
    // The run's settings: what `auto` may pick, and a tuner table's pick.
    let policy = Policy::of(topo)?;
    policy.check_explicit(op, algo, proto)?;
    let mut proto = proto;
    let tuned = match algo {
        None if !policy.rows.is_empty() => tuner_pick(
            topo,
            &policy,
            group,
            routes,
            &opts,
            op,
            total * elem_bytes,
            proto,
        ),
        _ => None,
    };
    // The chooser (`collective.chooser`; `nccl` by default): NCCL's
    // model picks among what the run's NCCL_ALGO/NCCL_PROTO enable, ours
    // times it (our own pick where the simulator cannot run NCCL's). A tuner
    // table's matching row wins over it, as NCCL's tuner plugin overrides
    // NCCL's own model.
    let nccl = match tuned {
        Some(_) => None,
        None => super::nccl_model::pick(topo, group, op, total * elem_bytes, algo, proto, &policy)?,
    };
    if let Some((a, p)) = nccl {
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
            timed,
            cache.as_deref_mut(),
        );
        if forced.is_ok() {
            return forced;
        }
    }
    let algos: Vec<Algorithm> = match algo {
        Some(a) => vec![a],
        None => match tuned {
            Some(t) => {
                proto = Some(t.proto);
                vec![t.algo]
            }
            None => auto_algorithms_on(topo, op)
                .into_iter()
                .filter(|&a| {
                    policy.algo_allowed(op, a)
                        && protocols_for(a)
                            .iter()
                            .any(|&p| policy.proto_allowed(op, p) && proto.map_or(true, |q| q == p))
                })
                .collect(),
        },
    };
    if algos.is_empty() {
        let ours: Vec<&str> = auto_algorithms_on(topo, op)
            .iter()
            .map(|a| a.name())
            .collect();
        return Err(policy.nothing_left(
            op,
            &format!("its algorithms in the simulator: {}", ours.join(", ")),
        ));
    }
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
    // A tree or NVLS-tree past the chunk budget: timed by its period
    // (where it runs: NVLS-tree on reducing switches).
    let periods: Vec<Option<TreePeriod>> = algos
        .iter()
        .map(|&a| {
            let x = timed
                .then(|| TreePeriod::of(a, topo, group, op, total, elem_bytes, cal))
                .flatten()?;
            let runs = a != Algorithm::NvlsTree || routes.check_switch_reduce().is_ok();
            runs.then_some(x)
        })
        .collect();
    // `auto` with such a tree: it is ranked by its time (its period), so
    // every rival its bound does not rule out is ranked by its time too (an
    // estimate and a time do not compare: the ring's estimate is 25-64%
    // above its time on 128 DGX H100 nodes); those trees go first (in
    // their order), so their times bound the rivals.
    let by_time = timed && algo.is_none() && tuned.is_none() && periods.iter().any(Option::is_some);
    if by_time {
        order.sort_by_key(|&p| periods[p].is_none());
    }
    let mut best: Option<Ranked> = None;
    let mut second: Option<Ranked> = None;
    // Near ties are timed (below): `auto` across nodes, where no time ranks.
    let near = timed && !by_time && algo.is_none() && tuned.is_none() && opts.nodes.len() >= 2;
    // A bound rules a candidate out only past what a near tie would time.
    let slack = if near { 1.0 + NEAR } else { 1.0 };
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
            None => protocols_for(a)
                .iter()
                .copied()
                .filter(|&p| policy.proto_allowed(op, p))
                .collect(),
        };
        // `auto` only: a candidate whose lower bound is above the best so far
        // cannot win (ties keep the earlier one), so its plan is not built.
        if prune && algo.is_none() && *op == CollectiveOp::AllReduce {
            if let Some((b, _, _)) = &best {
                let bytes = total * elem_bytes;
                let nodes = &opts.nodes;
                let n = group.len();
                if let Some(lb) = lower_bound_ps(topo, routes, n, nodes, a, &protos, bytes, cal)? {
                    if lb * (1.0 - 1e-9) > b.estimate_ps * slack {
                        continue;
                    }
                }
                // The walks bound estimates, not a period's time.
                let shape = cache
                    .as_ref()
                    .filter(|_| periods[place].is_none())
                    .and_then(|_| shape_of(group, &opts, a, elem_bytes, &protos));
                if let (Some(c), Some(sh)) = (cache.as_deref(), shape) {
                    if let Some(lb) = c.bound(&sh, total, cal) {
                        if lb * (1.0 - 1e-9) > b.estimate_ps * slack {
                            continue;
                        }
                    }
                }
            }
        }
        // A tree past the chunk budget: timed by its period, and ranked by
        // that time (the figure `time_collective` then reports).
        if let Some(x) = &periods[place] {
            if protos.is_empty() {
                continue;
            }
            let only = (protos.len() == 1).then(|| protos[0]);
            let t = match time_period(
                topo,
                group,
                routes,
                op,
                elem_bytes,
                x,
                only.or(proto),
                prune,
                cache.as_deref_mut(),
            ) {
                Ok(t) => t,
                Err(e) => {
                    last_err = Some(e);
                    continue;
                }
            };
            let c = Choice {
                algo: a,
                proto: t.proto,
                estimate_ps: t.time.0 as f64,
            };
            rank(
                &mut best,
                &mut second,
                (c, Candidate::Period(Box::new(t)), place),
            );
            continue;
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
                        Algorithm::CollNet => build(op, a, group.len(), 0, &opts)
                            .and_then(|_| routes.net_paths(0).map(|_| ())),
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
                    Some(plan0) => rotation_quotient_cached(
                        topo,
                        routes,
                        &opts.nodes,
                        &plan0,
                        cache.as_deref_mut(),
                    )?
                    .map(|q| (plan0, q)),
                    None => None,
                };
                match quotient {
                    Some((plan0, q)) => {
                        let (costs, hops) = estimate_inputs(
                            topo,
                            routes,
                            group,
                            &opts,
                            (&plan0, Some(&q)),
                            total,
                            elem_bytes,
                            cal,
                            a,
                            &protos,
                            cache.as_deref_mut(),
                        )?;
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
                            if lb.is_some_and(|lb| lb * (1.0 - 1e-9) > b.estimate_ps * slack) {
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
                        let (costs, hops) = estimate_inputs(
                            topo,
                            routes,
                            group,
                            &opts,
                            (&plan, None),
                            total,
                            elem_bytes,
                            cal,
                            a,
                            &protos,
                            cache.as_deref_mut(),
                        )?;
                        (Candidate::Plan(plan), costs, hops)
                    }
                }
            }
        };
        if protos.is_empty() {
            // A protocol asked for that the algorithm does not run: say so
            // where nothing else failed.
            if let (Some(p), None) = (proto, &last_err) {
                let runs: Vec<&str> = protocols_for(a).iter().map(|p| p.name()).collect();
                last_err = Some(CollectiveError::NotApplicable {
                    op: op.name(),
                    algo: a.name(),
                    why: format!("runs {} only, not {p}", runs.join(", ")),
                });
            }
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
            // A rival within `FINALIST` of the best time is timed; one past
            // it keeps its estimate, which loses either way.
            let finalist = best
                .as_ref()
                .map_or(true, |b| c.estimate_ps <= b.0.estimate_ps * FINALIST);
            let (c, cand) = if by_time && finalist {
                let t = time_candidate(
                    topo, group, routes, op, total, elem_bytes, cal, c, &cand, None,
                )?;
                let c = Choice {
                    estimate_ps: t.time.0 as f64,
                    ..c
                };
                (c, Candidate::Timed(Box::new((t, cand))))
            } else {
                (c, cand)
            };
            rank(&mut best, &mut second, (c, cand, place));
        }
    }
    // A near tie across nodes: estimates of different algorithms miss their
    // times by different amounts (16 DGX H100 nodes at 64 MiB: the tree's
    // +7.0%, NVLS-tree's +2.2%), so where the runner-up's estimate is within
    // `NEAR` of the best's, both are timed and the faster is taken.
    if near {
        if let (Some(b), Some(r)) = (&best, &second) {
            if r.0.estimate_ps <= b.0.estimate_ps * (1.0 + NEAR) {
                let mut timed = |(c, cand, place): Ranked| -> Result<Ranked, CollectiveError> {
                    let t = time_candidate(
                        topo, group, routes, op, total, elem_bytes, cal, c, &cand, None,
                    )?;
                    let c = Choice {
                        estimate_ps: t.time.0 as f64,
                        ..c
                    };
                    Ok((c, Candidate::Timed(Box::new((t, cand))), place))
                };
                let (b, r) = (best.take(), second.take());
                let (b, r) = (
                    b.map(&mut timed).transpose()?,
                    r.map(&mut timed).transpose()?,
                );
                best = b;
                let mut none = None;
                if let Some(r) = r {
                    rank(&mut best, &mut none, r);
                }
            }
        }
    }
    if best.is_none() && algo.is_none() && tuned.is_none() && policy.restricts(op) {
        let why = last_err.map_or("no algorithm applies".to_string(), |e| e.to_string());
        return Err(policy.nothing_left(op, &why));
    }
    best.map(|(c, cand, _)| (c, cand)).ok_or_else(|| {
        last_err.unwrap_or(CollectiveError::NotApplicable {
            op: op.name(),
            algo: algo.map_or("auto", Algorithm::name),
            why: "no algorithm applies".into(),
        })
    })
}

/// The first tuner row (`policy.rs`) that matches this call and names a
/// pair the simulator runs here (NVLS only where the switch reduces,
/// NVLS-tree only across nodes whose switches reduce, as NCCL enables them)
/// and, with `--proto`, that protocol.
#[allow(clippy::too_many_arguments)]
fn tuner_pick(
    topo: &Topology,
    policy: &Policy,
    group: &Group,
    routes: &mut Routes,
    opts: &PlanOptions,
    op: &CollectiveOp,
    bytes: u64,
    proto: Option<Protocol>,
) -> Option<Tuned> {
    let nodes = opts.nodes.len();
    let mut nvls_ok = None;
    let mut tree_ok = None;
    let mut net_ok = None;
    let enabled = auto_algorithms_on(topo, op);
    policy.tuned(op, bytes, nodes, group.len(), |a, p| {
        let runs = match a {
            Algorithm::Nvls => *nvls_ok.get_or_insert_with(|| routes.check_nvls().is_ok()),
            Algorithm::NvlsTree => {
                nodes > 1 && *tree_ok.get_or_insert_with(|| routes.check_switch_reduce().is_ok())
            }
            Algorithm::CollNet => *net_ok.get_or_insert_with(|| routes.net_paths(0).is_ok()),
            _ => true,
        };
        runs && enabled.contains(&a)
            && protocols_for(a).contains(&p)
            && proto.map_or(true, |q| q == p)
    })
}

/// What a built plan's estimate needs: its step costs, or, for an algorithm
/// estimated by its path (a pipelined plan), that path, the walk kept in a
/// sweep's cache where the shape bounds larger sizes (with its
/// zero-bandwidth path). With a quotient the plan is part 0 (or channel 0),
/// walked on the rotation's link classes.
#[allow(clippy::too_many_arguments)]
fn estimate_inputs(
    topo: &Topology,
    routes: &mut Routes,
    group: &Group,
    opts: &PlanOptions,
    (plan, quotient): (&Plan, Option<&Quotient>),
    total: u64,
    elem_bytes: u64,
    cal: &Calibration,
    a: Algorithm,
    protos: &[Protocol],
    cache: Option<&mut PathCache>,
) -> Result<(Vec<StepCost>, Hops), CollectiveError> {
    if !a.estimated_by_path() {
        return Ok((
            step_costs(topo, routes, plan, elem_bytes, quotient)?,
            Hops::PerStep,
        ));
    }
    let shape = cache
        .as_ref()
        .and_then(|_| shape_of(group, opts, a, elem_bytes, protos).and_then(|sh| sh.exact(total)));
    let paths = pipelined_path(
        topo,
        routes,
        plan,
        elem_bytes,
        cal,
        a,
        protos,
        shape.is_some(),
        quotient,
    )?;
    let path = paths.path;
    if let (Some(c), Some(sh)) = (cache, shape) {
        c.record(sh, total, paths);
    }
    Ok((Vec::new(), Hops::Path(path)))
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
        true,
        Some(cache),
    )?;
    time_candidate(
        topo,
        group,
        &mut routes,
        op,
        total,
        elem_bytes,
        cal,
        choice,
        &cand,
        None,
    )
}

/// A tree past the chunk budget timed by its period ([`TreePeriod`]): one
/// run of the tree's chunks of `chunk_bytes` (the protocol the run's
/// estimate picks among `proto`); a sweep's `cache` keeps the run and its
/// period for the later sizes that need the same run.
#[allow(clippy::too_many_arguments)]
fn time_period(
    topo: &Topology,
    group: &Group,
    routes: &mut Routes,
    op: &CollectiveOp,
    elem_bytes: u64,
    x: &TreePeriod,
    proto: Option<Protocol>,
    prune: bool,
    cache: Option<&mut PathCache>,
) -> Result<TimedChoice, CollectiveError> {
    let key = PeriodKey {
        algo: x.algo,
        run_total: x.run_total,
        chunk_bytes: x.chunk_bytes,
        elem_bytes,
        proto,
    };
    let cached = cache.as_ref().and_then(|c| c.period(&key));
    let (t, period) = match cached {
        Some(r) => r,
        None => {
            let (c, cand) = choose_candidate_with(
                topo,
                group,
                routes,
                op,
                x.run_total,
                elem_bytes,
                &x.cal,
                Some(x.algo),
                proto,
                prune,
                false,
                None,
            )?;
            let mut steps = Vec::new();
            let t = time_candidate(
                topo,
                group,
                routes,
                op,
                x.run_total,
                elem_bytes,
                &x.cal,
                c,
                &cand,
                Some(&mut steps),
            )?;
            // Kept whether or not this size needs it: a later size may
            // need the same run (one of `M` chunks) extrapolated.
            let period = x.period(&steps);
            if let Some(c) = cache {
                c.record_period(key, (t, period));
            }
            (t, period)
        }
    };
    if !x.extrapolated() {
        return Ok(t);
    }
    let period = period.ok_or_else(|| {
        CollectiveError::Buffers(format!(
            "a {} run of {} chunks has no full stretch for its period",
            x.algo.name(),
            x.chunks
        ))
    })?;
    // Every chunk carries the same moves: flows pro rata in chunks.
    let n = u128::from(x.tree_bytes.div_ceil(x.chunk_bytes));
    let flows = (t.flows as u128 * n / x.chunks.max(1) as u128) as usize;
    Ok(TimedChoice {
        time: x.extend_time(t.time, period),
        flows,
        ..t
    })
}

/// A tree (or NVLS-tree, `algo`) allreduce's run with each step's
/// completion (the ground for [`TreePeriod`]; for tests): the plan
/// `time_collective` runs for `--algo tree` (`nvls-tree`) with `cal` as
/// given (no period).
#[allow(clippy::too_many_arguments)]
pub fn time_tree_steps(
    topo: &Topology,
    group: &Group,
    algo: Algorithm,
    total: u64,
    elem_bytes: u64,
    cal: &Calibration,
    proto: Option<Protocol>,
) -> Result<(TimedChoice, Vec<Time>), CollectiveError> {
    let op = CollectiveOp::AllReduce;
    let mut routes = Routes::new(topo, group);
    let (c, cand) = choose_candidate_with(
        topo,
        group,
        &mut routes,
        &op,
        total,
        elem_bytes,
        cal,
        Some(algo),
        proto,
        true,
        false,
        None,
    )?;
    if let Candidate::Period(_) = cand {
        return Err(CollectiveError::Sizes(format!(
            "the {} is past the chunk budget: raise max_chunks for every step",
            algo.name()
        )));
    }
    let mut steps = Vec::new();
    let t = time_candidate(
        topo,
        group,
        &mut routes,
        &op,
        total,
        elem_bytes,
        cal,
        c,
        &cand,
        Some(&mut steps),
    )?;
    Ok((t, steps))
}

/// Time a chosen candidate (`total` and `cal` those it was chosen under).
#[allow(clippy::too_many_arguments)]
fn time_candidate(
    topo: &Topology,
    group: &Group,
    routes: &mut Routes,
    op: &CollectiveOp,
    total: u64,
    elem_bytes: u64,
    cal: &Calibration,
    choice: Choice,
    cand: &Candidate,
    mut steps: Option<&mut Vec<Time>>,
) -> Result<TimedChoice, CollectiveError> {
    if let Candidate::Period(t) = cand {
        return Ok(**t);
    }
    if let Candidate::Timed(b) = cand {
        return Ok(b.0);
    }
    if let Candidate::Ring(spec) = cand {
        if let Some(t) =
            spec.time_units(topo, routes, elem_bytes, choice.algo, choice.proto, cal)?
        {
            return Ok(TimedChoice {
                algo: choice.algo,
                proto: choice.proto,
                time: t.time,
                flows: t.flows,
            });
        }
    }
    if let Candidate::Channels(c) = cand {
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
            steps,
        )?;
        return Ok(TimedChoice {
            algo: choice.algo,
            proto: choice.proto,
            time: t.time,
            flows: t.flows,
        });
    }
    if let Candidate::Tree(stream) = cand {
        let t = time_stream(
            topo,
            routes,
            group.len(),
            stream,
            elem_bytes,
            choice.algo,
            choice.proto,
            cal,
            None,
            steps,
        )?;
        return Ok(TimedChoice {
            algo: choice.algo,
            proto: choice.proto,
            time: t.time,
            flows: t.flows,
        });
    }
    let built;
    let plan = match cand {
        Candidate::Plan(p) => p,
        _ => {
            let opts = plan_options(topo, group, cal, total * elem_bytes);
            built = build(op, choice.algo, group.len(), total, &opts)?;
            &built
        }
    };
    let t = simulate_inner(
        topo,
        group,
        plan,
        elem_bytes,
        choice.algo,
        choice.proto,
        cal,
        &[],
        None,
        steps.take(),
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
        true,
        None,
    )?;
    // A tree past the chunk budget was timed by its period, a rival ranked
    // against it by its own timing: neither is timed again (the plan is the
    // budgeted one, for data mode).
    let timed = match &cand {
        Candidate::Period(t) => Some(**t),
        Candidate::Timed(b) => Some(b.0),
        _ => None,
    };
    let plan = cand.into_plan(topo, group, op, choice.algo, total, elem_bytes, cal)?;
    let (time, flows) = match timed {
        Some(t) => (t.time, t.flows),
        None => {
            let t = simulate(
                topo,
                group,
                &plan,
                elem_bytes,
                choice.algo,
                choice.proto,
                cal,
            )?;
            (t.time, t.flows)
        }
    };
    Ok(CollectiveResult {
        algo: choice.algo,
        proto: choice.proto,
        time,
        flows,
        plan,
    })
}
