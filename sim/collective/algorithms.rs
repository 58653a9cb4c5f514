//! Algorithms: each builds a [`Plan`] for one operation over `n` ranks and a
//! message of `total` elements (nccl-tests' size S / element size).

use super::blocks::*;
use super::collnet::collnet_steps;
use super::kinds::{Algorithm, CollectiveOp};
use super::nvls::nvls_tree_allreduce;
use super::plan::{buffer_len, parallel, piece, push_at, split_range, Move, Plan, Via};
use super::CollectiveError;

/// What an algorithm may need besides the operation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PlanOptions {
    /// Pipeline chunks for trees and chains (at least 1).
    pub chunks: usize,
    /// Pipeline chunks of each channel of a multi-node tree when it runs a
    /// channel per local rank (0: `chunks` shared by the channels). NCCL
    /// cuts each channel's share into its own chunks, so a large message
    /// keeps the pipeline full however many channels carry it.
    pub channel_chunks: usize,
    /// Pipeline chunks of each part of NVLS-tree (NCCL's chunk size,
    /// `nvls::pipeline_chunks`; 0: `channel_chunks`, else `chunks`).
    pub nvls_chunks: usize,
    /// `channel_chunks` for trees (NVLS-tree has `nvls_chunks`): each
    /// tree of a channel (both trees of the double binary tree) is an NCCL
    /// channel cutting its half of the channel's share in its own chunks.
    /// 0: `channel_chunks`.
    pub tree_chunks: usize,
    /// The group's ranks by node, for hierarchical algorithms (each node's
    /// ranks must be consecutive; every node the same count).
    pub nodes: Vec<Vec<usize>>,
    /// NICs per GPU that channels across nodes spread over (at least 1):
    /// rings run `lanes` times as many channels, channel `c` on NIC `c /
    /// rails`, and a tree channel's trees take NICs 0 and 1 (past two NICs,
    /// its sub-channels take every NIC: [`tree_lane`], [`tree_subs`]), as
    /// NCCL cycles a GPU's NICs over its channels (`ncclTopoSelectNets`).
    pub lanes: usize,
    /// The most channels a multi-node tree runs for this message (0: no
    /// more than `chunks`): NCCL keeps a channel only while it has enough
    /// work (`computeColl`'s thread threshold, [`tree_channel_cap`]).
    pub tree_channel_cap: usize,
    /// CollNet's reduce-scatter and all-gather: the message's chunks of
    /// NCCL's step, each rail's pieces streamed through the switches one
    /// chunk after another (0: `chunks`). Their plans grow with ranks, not
    /// ranks squared, per chunk, so they take more than the trees' budget.
    pub collnet_chunks: usize,
}

impl PlanOptions {
    /// Pipeline chunks per part of NVLS-tree.
    pub fn nvls_tree_chunks(&self) -> usize {
        [self.nvls_chunks, self.channel_chunks, self.chunks]
            .into_iter()
            .find(|&c| c > 0)
            .unwrap_or(1)
    }

    /// Pipeline chunks of each channel of a multi-node tree.
    pub fn tree_channel_chunks(&self) -> usize {
        if self.tree_chunks > 0 {
            self.tree_chunks
        } else {
            self.channel_chunks
        }
    }
}

/// The bytes of a message each NCCL channel of a tree needs before NCCL
/// opens another: 64 bytes per thread (`NCCL_SIMPLE_THREAD_THRESHOLD`) x
/// 512 threads (`computeColl`, src/enqueue.cc lines 1590-1593 at v2.21.5-1:
/// channels drop while `nBytes < nc x nt x threshold`). LL and LL128 keep
/// channels on less (4 and 5 KiB); the plan is cut before its protocol is
/// known, so Simple's figure stands for all.
pub const TREE_CHANNEL_MIN_BYTES: u64 = 512 * 64;

/// The most tree channels (ours: one per local rank, each two NCCL
/// channels, one per tree of the double binary tree) NCCL runs for a
/// message of `bytes`: at least one.
pub fn tree_channel_cap(bytes: u64) -> usize {
    usize::try_from(bytes.div_ceil(2 * TREE_CHANNEL_MIN_BYTES))
        .unwrap_or(usize::MAX)
        .max(1)
}

/// The algorithms that exist for `op` (whether they apply to a group is
/// checked by [`build`]).
pub fn algorithms_for(op: &CollectiveOp) -> &'static [Algorithm] {
    use Algorithm::*;
    match op {
        CollectiveOp::AllReduce => &[
            Ring,
            Tree,
            HalvingDoubling,
            RecursiveDoubling,
            Direct,
            Nvls,
            NvlsTree,
            Hierarchical,
            CollNet,
        ],
        CollectiveOp::AllGather => &[Ring, RecursiveDoubling, Direct, Hierarchical, CollNet],
        CollectiveOp::ReduceScatter => &[Ring, HalvingDoubling, Direct, Hierarchical, CollNet],
        CollectiveOp::Broadcast { .. } | CollectiveOp::Reduce { .. } => &[Ring, Tree],
        CollectiveOp::Scatter { .. } | CollectiveOp::Gather { .. } => &[Tree, Direct],
        CollectiveOp::AllToAll => &[Pairwise, Direct],
        CollectiveOp::Permute { .. } => &[Direct],
    }
}

/// The algorithms `auto` chooses among: those NCCL ships for the operation
/// (ring, tree, NVLS and NVLS-tree for allreduce, the NVLS ones only where
/// the NVSwitches reduce; ring for all-gather, reduce-scatter,
/// broadcast and reduce; point-to-point for the rest), so `auto` predicts what
/// nccl-tests measures. The others (halving-doubling, recursive doubling,
/// one-shot direct, hierarchical) are there to be asked for by name.
pub fn auto_algorithms(op: &CollectiveOp) -> &'static [Algorithm] {
    use Algorithm::*;
    match op {
        CollectiveOp::AllReduce => &[Ring, Tree, Nvls, NvlsTree],
        CollectiveOp::AllGather | CollectiveOp::ReduceScatter => &[Ring],
        CollectiveOp::Broadcast { .. } | CollectiveOp::Reduce { .. } => &[Ring],
        CollectiveOp::Scatter { .. } | CollectiveOp::Gather { .. } => &[Direct],
        CollectiveOp::AllToAll => &[Pairwise],
        CollectiveOp::Permute { .. } => &[Direct],
    }
}

/// [`auto_algorithms`] on `topo`: with CollNet as well for allreduce,
/// all-gather and reduce-scatter where the run enables it
/// (`[collective] collnet = true`, NCCL_COLLNET_ENABLE; NCCL leaves it
/// off by default even over a SHARP network).
pub fn auto_algorithms_on(topo: &crate::topology::Topology, op: &CollectiveOp) -> Vec<Algorithm> {
    let mut algos = auto_algorithms(op).to_vec();
    let collnet = crate::topology::collnet_enabled(topo.collective_calibration());
    if collnet && algorithms_for(op).contains(&Algorithm::CollNet) {
        algos.push(Algorithm::CollNet);
    }
    algos
}

fn not_applicable(op: &CollectiveOp, algo: Algorithm, why: &str) -> CollectiveError {
    CollectiveError::NotApplicable {
        op: op.name(),
        algo: algo.name(),
        why: why.to_string(),
    }
}

/// Build the plan of `op` with `algo` over `n` ranks.
pub fn build(
    op: &CollectiveOp,
    algo: Algorithm,
    n: usize,
    total: u64,
    opts: &PlanOptions,
) -> Result<Plan, CollectiveError> {
    if n == 0 {
        return Err(CollectiveError::EmptyGroup);
    }
    if !algorithms_for(op).contains(&algo) {
        return Err(not_applicable(
            op,
            algo,
            "no such algorithm for this operation",
        ));
    }
    if let Some(root) = root_of(op) {
        if root >= n {
            return Err(CollectiveError::BadRank { rank: root, n });
        }
    }
    let all: Vec<usize> = (0..n).collect();
    let pieces: Vec<(u64, u64)> = (0..n).map(|i| piece(total, n, i)).collect();
    let chunks = opts.chunks.max(1);
    let pow2 = n.is_power_of_two();
    use Algorithm::*;
    let mut reduced = Vec::new();
    let steps = match (op, algo) {
        (
            CollectiveOp::AllGather | CollectiveOp::ReduceScatter | CollectiveOp::AllReduce,
            CollNet,
        ) => {
            if op.reduces() {
                reduced = match op {
                    CollectiveOp::AllReduce => (0..n).map(|r| (r, 0, total)).collect(),
                    _ => (0..n)
                        .map(|r| (r, pieces[r].0, pieces[r].1 - pieces[r].0))
                        .collect(),
                };
            }
            let (nodes, _) = check_nodes(op, algo, n, opts)?;
            let chunks = match (op, opts.collnet_chunks) {
                (CollectiveOp::AllReduce, _) | (_, 0) => chunks,
                (_, c) => c,
            };
            collnet_steps(op, &nodes, total, &pieces, chunks)
        }
        (CollectiveOp::AllReduce, _) => {
            reduced = (0..n).map(|r| (r, 0, total)).collect();
            allreduce(op, algo, &all, total, &pieces, chunks, opts)?
        }
        (CollectiveOp::AllGather, Ring) => match rail_rings(&opts.nodes) {
            Some(rings) if rings[0].len() == n => {
                multi_ring(&rings, &pieces, false, true, opts.lanes)
            }
            _ => ring_all_gather(&all, &pieces),
        },
        (CollectiveOp::AllGather, RecursiveDoubling) if pow2 => {
            recursive_doubling_gather(&all, &pieces)
        }
        (CollectiveOp::AllGather, Direct) => vec![all_pairs(n, |i, _| pieces[i], false)],
        (CollectiveOp::AllGather, Hierarchical) => {
            let (nodes, m) = check_nodes(op, algo, n, opts)?;
            let node_ranges: Vec<(u64, u64)> = nodes
                .iter()
                .map(|g| (pieces[g[0]].0, pieces[g[m - 1]].1))
                .collect();
            let mut steps = parallel(
                nodes
                    .iter()
                    .map(|g| ring_all_gather(g, &g.iter().map(|&r| pieces[r]).collect::<Vec<_>>()))
                    .collect(),
            );
            steps.extend(parallel(
                (0..m)
                    .map(|a| {
                        let col: Vec<usize> = nodes.iter().map(|g| g[a]).collect();
                        ring_all_gather(&col, &node_ranges)
                    })
                    .collect(),
            ));
            steps
        }
        (CollectiveOp::ReduceScatter, _) => {
            reduced = (0..n)
                .map(|r| (r, pieces[r].0, pieces[r].1 - pieces[r].0))
                .collect();
            match algo {
                Ring => match rail_rings(&opts.nodes) {
                    Some(rings) if rings[0].len() == n => {
                        multi_ring(&rings, &pieces, true, false, opts.lanes)
                    }
                    _ => ring_reduce_scatter(&all, &pieces),
                },
                HalvingDoubling if pow2 => recursive_halving(&all, &pieces),
                Direct => vec![all_pairs(n, |_, j| pieces[j], true)],
                Hierarchical => {
                    let (nodes, m) = check_nodes(op, algo, n, opts)?;
                    let node_ranges: Vec<(u64, u64)> = nodes
                        .iter()
                        .map(|g| (pieces[g[0]].0, pieces[g[m - 1]].1))
                        .collect();
                    let mut steps = parallel(
                        (0..m)
                            .map(|a| {
                                let col: Vec<usize> = nodes.iter().map(|g| g[a]).collect();
                                ring_reduce_scatter(&col, &node_ranges)
                            })
                            .collect(),
                    );
                    steps.extend(parallel(
                        nodes
                            .iter()
                            .map(|g| {
                                let r: Vec<(u64, u64)> = g.iter().map(|&x| pieces[x]).collect();
                                ring_reduce_scatter(g, &r)
                            })
                            .collect(),
                    ));
                    steps
                }
                _ => return Err(not_applicable(op, algo, "needs a power-of-two group")),
            }
        }
        (CollectiveOp::Broadcast { root }, _) | (CollectiveOp::Reduce { root }, _) => {
            let reduce = matches!(op, CollectiveOp::Reduce { .. });
            if reduce {
                reduced = vec![(*root, 0, total)];
            }
            let order: Vec<usize> = (0..n).map(|v| (v + root) % n).collect();
            match (algo, reduce) {
                (Ring, _) => chain(&order, &split_range(0, total, chunks), reduce),
                (Tree, false) => binomial_broadcast(&order, 0, total),
                (Tree, true) => binomial_reduce(&order, 0, total),
                _ => unreachable!("checked by algorithms_for"),
            }
        }
        (CollectiveOp::Scatter { root }, _) | (CollectiveOp::Gather { root }, _) => {
            let gather = matches!(op, CollectiveOp::Gather { .. });
            let actual = |v: usize| (v + root) % n;
            let ranges_of = |v0: usize, v1: usize| -> Vec<(u64, u64)> {
                // Pieces of relative ranks v0..v1 as contiguous actual ranges.
                let mut out: Vec<(u64, u64)> = Vec::new();
                for v in v0..v1 {
                    let p = pieces[actual(v)];
                    match out.last_mut() {
                        Some(last) if last.1 == p.0 => last.1 = p.1,
                        _ => out.push(p),
                    }
                }
                out
            };
            let mk = |from: usize, to: usize, v0: usize, v1: usize, step: &mut Vec<Move>| {
                for (lo, hi) in ranges_of(v0, v1) {
                    if hi > lo {
                        step.push(Move::copy(actual(from), actual(to), lo, hi));
                    }
                }
            };
            match algo {
                Direct => {
                    let mut step = Vec::new();
                    for v in 1..n {
                        if gather {
                            mk(v, 0, v, v + 1, &mut step);
                        } else {
                            mk(0, v, v, v + 1, &mut step);
                        }
                    }
                    vec![step]
                }
                _ => {
                    let mut ds = Vec::new();
                    let mut d = 1;
                    while d < n {
                        ds.push(d);
                        d <<= 1;
                    }
                    if !gather {
                        ds.reverse();
                    }
                    ds.into_iter()
                        .map(|d| {
                            let mut step = Vec::new();
                            for v in (0..n).filter(|v| v % (2 * d) == 0 && v + d < n) {
                                let hi = (v + 2 * d).min(n);
                                if gather {
                                    mk(v + d, v, v + d, hi, &mut step);
                                } else {
                                    mk(v, v + d, v + d, hi, &mut step);
                                }
                            }
                            step
                        })
                        .collect()
                }
            }
        }
        (CollectiveOp::AllToAll, _) => {
            // Equal pieces of total / n (as nccl-tests' per-peer count); a
            // remainder of fewer than n elements is not exchanged.
            let k = total / n as u64;
            let mv = |i: usize, j: usize| Move {
                from: i,
                to: j,
                src: j as u64 * k,
                dst: total + i as u64 * k,
                len: k,
                reduce: false,
                via: Via::P2p,
                lane: 0,
                conn: 0,
            };
            let own: Vec<Move> = (0..n).map(|i| mv(i, i)).collect();
            match algo {
                Direct => {
                    let mut step = own;
                    step.extend(
                        (0..n)
                            .flat_map(|i| (0..n).filter(move |&j| j != i).map(move |j| (i, j)))
                            .map(|(i, j)| mv(i, j)),
                    );
                    vec![step]
                }
                _ => {
                    let mut steps = vec![own];
                    steps.extend((1..n).map(|k| (0..n).map(|i| mv(i, (i + k) % n)).collect()));
                    steps
                }
            }
        }
        (CollectiveOp::Permute { pairs }, _) => {
            let mut seen = vec![false; n];
            let mut step = Vec::new();
            for &(s, t) in pairs {
                if s >= n || t >= n {
                    return Err(CollectiveError::BadRank { rank: s.max(t), n });
                }
                if std::mem::replace(&mut seen[t], true) {
                    return Err(CollectiveError::DuplicateTarget(t));
                }
                step.push(Move {
                    from: s,
                    to: t,
                    src: 0,
                    dst: total,
                    len: total,
                    reduce: false,
                    via: Via::P2p,
                    lane: 0,
                    conn: 0,
                });
            }
            vec![step]
        }
        _ => return Err(not_applicable(op, algo, "needs a power-of-two group")),
    };
    Ok(Plan {
        ranks: n,
        buffer_len: buffer_len(op, total),
        steps: steps.into_iter().filter(|s| !s.is_empty()).collect(),
        reduced,
    })
}

fn root_of(op: &CollectiveOp) -> Option<usize> {
    match op {
        CollectiveOp::Broadcast { root }
        | CollectiveOp::Reduce { root }
        | CollectiveOp::Scatter { root }
        | CollectiveOp::Gather { root } => Some(*root),
        _ => None,
    }
}

/// One step in which every rank `i` sends `range(i, j)` to every other `j`.
fn all_pairs(n: usize, range: impl Fn(usize, usize) -> (u64, u64), reduce: bool) -> Vec<Move> {
    let mut step = Vec::new();
    for j in 0..n {
        for i in (0..n).filter(|&i| i != j) {
            let (lo, hi) = range(i, j);
            if hi > lo {
                step.push(if reduce {
                    Move::reduce(i, j, lo, hi)
                } else {
                    Move::copy(i, j, lo, hi)
                });
            }
        }
    }
    step
}

fn check_nodes(
    op: &CollectiveOp,
    algo: Algorithm,
    n: usize,
    opts: &PlanOptions,
) -> Result<(Vec<Vec<usize>>, usize), CollectiveError> {
    let nodes = &opts.nodes;
    let m = nodes.first().map_or(0, Vec::len);
    let consecutive = nodes.iter().flatten().copied().eq(0..n);
    if nodes.len() < 2 || m == 0 || nodes.iter().any(|g| g.len() != m) || !consecutive {
        return Err(not_applicable(
            op,
            algo,
            "needs at least 2 nodes with the same number of consecutive ranks each",
        ));
    }
    Ok((nodes.clone(), m))
}

fn allreduce(
    op: &CollectiveOp,
    algo: Algorithm,
    all: &[usize],
    total: u64,
    pieces: &[(u64, u64)],
    chunks: usize,
    opts: &PlanOptions,
) -> Result<Vec<Vec<Move>>, CollectiveError> {
    let n = all.len();
    use Algorithm::*;
    Ok(match algo {
        Ring => match rail_rings(&opts.nodes) {
            // One ring per rail across nodes, as NCCL's channels.
            Some(rings) if rings[0].len() == n => {
                multi_ring(&rings, pieces, true, true, opts.lanes)
            }
            _ => {
                let mut s = ring_reduce_scatter(all, pieces);
                s.extend(ring_all_gather(all, pieces));
                s
            }
        },
        Tree => {
            // Two trees, each carrying half the message, as NCCL's double
            // binary tree. Several nodes: NCCL's shape, a chain in each node
            // and a binary tree over the nodes, the second tree over the
            // nodes in reverse order with the chains reversed; one channel
            // per local rank (rail) when the nodes are alike, channel `c`'s
            // chains starting at local rank `c` so its tree crosses the
            // network on NIC `c` only (every NIC carries 1/m of the bytes).
            // One node: NCCL's tree inside a node is a chain (and its mirror).
            // No node information: two mirrored heap-shaped trees.
            let half = total / 2;
            let nodes = &opts.nodes;
            let covers = nodes.iter().flatten().count() == n;
            if covers && nodes.len() >= 2 {
                tree_channels(nodes, 0, half, total, chunks, opts)
            } else if covers && nodes.len() == 1 {
                let chain: Vec<usize> = nodes[0].clone();
                let mirror: Vec<usize> = chain.iter().rev().copied().collect();
                let parents: Vec<Option<usize>> = (0..n).map(|i| i.checked_sub(1)).collect();
                parallel(vec![
                    on_conns(
                        tree_allreduce(&chain, &parents, &split_range(0, half, chunks)),
                        0,
                    ),
                    on_conns(
                        tree_allreduce(&mirror, &parents, &split_range(half, total, chunks)),
                        1,
                    ),
                ])
            } else {
                let mirror: Vec<usize> = all.iter().rev().copied().collect();
                let heap = heap_parents(n);
                parallel(vec![
                    on_conns(tree_allreduce(all, &heap, &split_range(0, half, chunks)), 0),
                    on_conns(
                        tree_allreduce(&mirror, &heap, &split_range(half, total, chunks)),
                        1,
                    ),
                ])
            }
        }
        HalvingDoubling => halving_doubling_allreduce(all, 0, total),
        RecursiveDoubling => recursive_doubling_allreduce(all, 0, total),
        Direct => vec![all_pairs(n, |_, _| (0, total), true)],
        Nvls => {
            // Chunk c of every piece is reduced in the switch at step c and
            // multicast back at step c + 1, so both directions of each link
            // stay busy (up: reduce loads then stores; down: the reverse).
            let mut steps = Vec::new();
            for (j, &(plo, phi)) in pieces.iter().enumerate() {
                for (c, &(lo, hi)) in split_range(plo, phi, chunks).iter().enumerate() {
                    if hi <= lo {
                        continue;
                    }
                    for i in 0..n {
                        let up = Move::reduce(i, j, lo, hi);
                        push_at(
                            &mut steps,
                            c,
                            Move {
                                via: Via::SwitchReduce,
                                conn: NVLS_UP_CONN,
                                ..up
                            },
                        );
                        let down = Move::copy(j, i, lo, hi);
                        push_at(
                            &mut steps,
                            c + 1,
                            Move {
                                via: Via::SwitchMulticast,
                                conn: NVLS_DOWN_CONN,
                                ..down
                            },
                        );
                    }
                }
            }
            steps
        }
        NvlsTree => {
            let (nodes, _) = check_nodes(op, algo, n, opts)?;
            nvls_tree_allreduce(&nodes, total, opts.nvls_tree_chunks())
        }
        Hierarchical => {
            let (nodes, m) = check_nodes(op, algo, n, opts)?;
            // Within a node, local rank a owns the a-th part of the message.
            let local = split_range(0, total, m);
            let mut steps = parallel(
                nodes
                    .iter()
                    .map(|g| ring_reduce_scatter(g, &local))
                    .collect(),
            );
            steps.extend(parallel(
                (0..m)
                    .map(|a| {
                        let col: Vec<usize> = nodes.iter().map(|g| g[a]).collect();
                        let sub = split_range(local[a].0, local[a].1, col.len());
                        let mut s = ring_reduce_scatter(&col, &sub);
                        s.extend(ring_all_gather(&col, &sub));
                        s
                    })
                    .collect(),
            ));
            steps.extend(parallel(
                nodes.iter().map(|g| ring_all_gather(g, &local)).collect(),
            ));
            steps
        }
        Pairwise | CollNet => return Err(not_applicable(op, algo, "not an allreduce algorithm")),
    })
}

/// NCCL's double binary tree across nodes over every NIC: with `m` ranks in
/// every node, `m` channels (fewer when the message has fewer chunks); channel
/// `c` carries part `c` of each half (`[lo, mid)` on tree A, `[mid, hi)` on
/// tree B) in `chunks / channels` pipeline chunks (at least one), so the
/// chunk size is that of a single channel. Tree A: chains `g[c], g[c+1], ...`
/// under a heap over the nodes in order; tree B: chains `g[c], g[c-1], ...`
/// under a heap over the nodes in reverse order. Nodes of different sizes run
/// one channel (chains in the given order).
fn tree_channels(
    nodes: &[Vec<usize>],
    lo: u64,
    mid: u64,
    hi: u64,
    chunks: usize,
    opts: &PlanOptions,
) -> Vec<Vec<Move>> {
    let shape = TreeChannels::of(nodes, chunks, opts);
    parallel(
        (0..shape.channels)
            .map(|c| shape.channel_on_lanes(nodes, c, lo, mid, hi))
            .collect(),
    )
}

/// The NIC lane of tree `t` of a tree channel (`t = 2 j + 0/1`: sub-channel
/// `j`'s tree A or B, [`TreeChannels::subs`]): lane `t mod lanes`, so with
/// `k` NICs per GPU every NIC carries one tree A and one tree B of each
/// channel (`k` even: `k / 2` sub-channels on NICs `2j, 2j + 1`; `k` odd:
/// `k` sub-channels, `2 j mod k` running over every lane once). NCCL's
/// search cycles a GPU's NICs over its channels (`ncclTopoSearchRecNet`,
/// `nets[(nChannels + i) % netCount]`, search.cc at v2.19.3) and runs both
/// trees of a channel on its NIC: the same bytes on every NIC.
pub fn tree_lane(t: usize, lanes: usize) -> u32 {
    (t % lanes.max(1)) as u32
}

/// Sub-channels per tree channel over `lanes` NICs per GPU: one pair of
/// trees per two NICs (`lanes / gcd(lanes, 2)`; 1 for one or two NICs).
pub fn tree_subs(lanes: usize) -> usize {
    let k = lanes.max(1);
    if k % 2 == 0 {
        k / 2
    } else if k == 1 {
        1
    } else {
        k
    }
}

/// `steps` (one tree allreduce's, [`tree_allreduce`]) on tree `tree`'s two
/// connections ([`Move::conn`]): its reduces up on `2 tree`, its copies down
/// on `2 tree + 1`.
pub(crate) fn on_conns(mut steps: Vec<Vec<Move>>, tree: u32) -> Vec<Vec<Move>> {
    for m in steps.iter_mut().flatten() {
        m.conn = tree_conn(tree, m.reduce);
    }
    steps
}

/// The connection of tree `tree`'s reduces (`up`) or copies ([`on_conns`]).
pub(crate) fn tree_conn(tree: u32, up: bool) -> u32 {
    2 * tree + u32::from(!up)
}

/// NVLS's connections ([`Move::conn`]): a rank's loads into the switch's
/// reduction, and its multicast stores of the pieces it owns (NCCL's NVLS
/// runs them in separate warp groups, each over its own slots).
const NVLS_UP_CONN: u32 = 0;
const NVLS_DOWN_CONN: u32 = 1;

/// `steps` with every move on `lane`.
fn on_lane(mut steps: Vec<Vec<Move>>, lane: u32) -> Vec<Vec<Move>> {
    if lane != 0 {
        steps.iter_mut().flatten().for_each(|m| m.lane = lane);
    }
    steps
}

/// How [`tree_channels`] cuts a message: channels, chunks per tree, and the
/// NIC lanes each channel's trees spread over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TreeChannels {
    pub channels: usize,
    pub per: usize,
    /// NICs per GPU ([`PlanOptions::lanes`]).
    pub lanes: usize,
    /// Sub-channels of each channel ([`tree_subs`]): sub-channel `j`
    /// carries part `j` of the channel's part of each half, its trees on
    /// lanes `2j` and `2j + 1` (mod `lanes`).
    pub subs: usize,
}

impl TreeChannels {
    /// The channels a plan's options give a tree over `nodes` of `chunks`
    /// pipeline chunks ([`Self::new`] with the options' per-channel chunks,
    /// NIC lanes and channel cap).
    pub fn of(nodes: &[Vec<usize>], chunks: usize, opts: &PlanOptions) -> TreeChannels {
        TreeChannels::new(
            nodes,
            chunks,
            opts.tree_channel_chunks(),
            opts.lanes,
            opts.tree_channel_cap,
        )
    }

    /// A channel per local rank over alike nodes (one where nodes differ), at
    /// most `cap` of them (or `chunks` where `cap` is 0), each cutting its
    /// share in `channel_chunks` chunks when every local rank runs one.
    pub fn new(
        nodes: &[Vec<usize>],
        chunks: usize,
        channel_chunks: usize,
        lanes: usize,
        cap: usize,
    ) -> TreeChannels {
        let m = nodes.first().map_or(1, Vec::len);
        let alike = nodes.iter().all(|g| g.len() == m);
        // NCCL runs fewer channels on small messages: `cap` where the
        // message's size gives one ([`tree_channel_cap`]), else never more
        // channels than pipeline chunks.
        let limit = if cap > 0 { cap } else { chunks.max(1) };
        let channels = if alike { m.clamp(1, limit) } else { 1 };
        let shared = (chunks / channels).max(1);
        // A channel per local rank cuts its share in its own chunks
        // (`channel_chunks`: each of its two trees is an NCCL channel with
        // chunks of `chunk_bytes`, fewer than the shared count would give);
        // one GPU per node too (the message's count would halve its trees'
        // chunks).
        let per = if channels == m && channel_chunks > 0 {
            channel_chunks
        } else {
            shared
        };
        let lanes = lanes.max(1);
        TreeChannels {
            channels,
            per,
            lanes,
            subs: tree_subs(lanes),
        }
    }

    /// Channel `c`'s steps (every sub-channel's two trees, each on its NIC
    /// lane), as [`tree_channels`] builds it.
    pub fn channel_on_lanes(
        &self,
        nodes: &[Vec<usize>],
        c: usize,
        lo: u64,
        mid: u64,
        hi: u64,
    ) -> Vec<Vec<Move>> {
        let base = self.trees_per_channel() * c;
        parallel(
            self.channel_trees(nodes, c, lo, mid, hi)
                .into_iter()
                .enumerate()
                .map(|(t, (r, p, ch, lane))| {
                    on_conns(
                        on_lane(tree_allreduce(&r, &p, &ch), lane),
                        (base + t) as u32,
                    )
                })
                .collect(),
        )
    }

    /// Trees in each channel ([`Self::channel_trees`]): every sub-channel's
    /// tree A and tree B.
    pub fn trees_per_channel(&self) -> usize {
        2 * self.subs.max(1)
    }

    /// Channel `c`'s trees (sub-channel `j`'s tree A, then its tree B, for
    /// each `j`): ranks by position, parents, pipeline chunks, NIC lane.
    #[allow(clippy::type_complexity)]
    pub fn channel_trees(
        &self,
        nodes: &[Vec<usize>],
        c: usize,
        lo: u64,
        mid: u64,
        hi: u64,
    ) -> Vec<(Vec<usize>, Vec<Option<usize>>, Vec<(u64, u64)>, u32)> {
        let (a, b) = self.ranges(c, lo, mid, hi);
        let fwd: Vec<Vec<usize>> = nodes
            .iter()
            .map(|g| (0..g.len()).map(|j| g[(c + j) % g.len()]).collect())
            .collect();
        let back: Vec<Vec<usize>> = nodes
            .iter()
            .rev()
            .map(|g| {
                (0..g.len())
                    .map(|j| g[(c + g.len() - j) % g.len()])
                    .collect()
            })
            .collect();
        let (ra, pa) = node_tree_parents(&fwd);
        let (rb, pb) = node_tree_parents(&back);
        let subs = self.subs.max(1);
        let (sa, sb) = (split_range(a.0, a.1, subs), split_range(b.0, b.1, subs));
        let mut out = Vec::with_capacity(2 * subs);
        for j in 0..subs {
            out.push((
                ra.clone(),
                pa.clone(),
                split_range(sa[j].0, sa[j].1, self.per),
                tree_lane(2 * j, self.lanes),
            ));
            out.push((
                rb.clone(),
                pb.clone(),
                split_range(sb[j].0, sb[j].1, self.per),
                tree_lane(2 * j + 1, self.lanes),
            ));
        }
        out
    }

    /// Channel `c`'s part of each half.
    pub fn ranges(&self, c: usize, lo: u64, mid: u64, hi: u64) -> ((u64, u64), (u64, u64)) {
        (
            split_range(lo, mid, self.channels)[c],
            split_range(mid, hi, self.channels)[c],
        )
    }
}
