//! NVLS-tree allreduce (NCCL's `NVLS_TREE`): inside each node the NVSwitch
//! reduces and multicasts (NVLS), across nodes a tree over the NICs.
//!
//! Local rank `a` of every node owns part `a` of the message. Per pipeline
//! chunk of a part: the node's switch reduces the chunk from every local rank
//! into the owner (each rank's up link carries its chunk once, the owner's
//! down link the sum once); the owners of part `a` (one per node, all on rail
//! `a`) allreduce it with a binary tree over the nodes; each owner then
//! multicasts the result through the switch (its up link once, every local
//! rank's down link once). So per rank NVLink carries S + S/m up and
//! S/m + S down, and each NIC S/m per tree edge and direction.
//!
//! NCCL's shape (read at v2.21.5 and v2.23.4). Chunks: one pipeline chunk
//! of a part here is one NCCL chunk of each of its 16 NVLS channels, which
//! run side by side over the same links ([`nccl_chunk_bytes`],
//! [`pipeline_chunks`]). Trees: channel `c` climbs tree `c % 2` of the double
//! binary tree over the nodes (`src/graph/connect.cc` line 304 at v2.21.5,
//! 309 at v2.23.4: `channel->nvls.treeUp = treeUp[c%2]`), so the first half
//! of each chunk climbs the heap over the nodes in order and the second half
//! the heap over the nodes reversed, at the same steps. The reversed heap's
//! inner nodes are the first one's leaves, so each NIC carries at most
//! 2 S/m per direction (one tree per part: 3 S/m at an inner node). Hops:
//! NCCL's legs run on separate warps, so the timing pays them along the
//! data's path ([`super::kinds::Algorithm::pipelines_hops`]).

use super::algorithms::PlanOptions;
use super::blocks::{heap_parents, tree_allreduce};
use super::kinds::CollectiveOp;
use super::plan::{buffer_len, push_at, split_range, Move, Plan, Via};

/// Steps between a chunk's arrival at a rank and the rank's next move of
/// it across the other fabric (switch to network, network to switch). A
/// rank's sends of a step wait for its sends of the step before (`Deps`),
/// so with one step the network send would sit between two NVLink steps;
/// two steps let NVLink and NIC traffic of different chunks overlap, as
/// NCCL's separate NVLS and network warps do.
const LAG: usize = 2;

/// The first step of the plan at which every leg of the pipeline is busy
/// for a tree of `height` levels over the nodes: step `k` reduces chunk `k`
/// in the switch, carries chunks `k - LAG - s` at tree step `s` of `2h`,
/// and multicasts chunk `k - (2h - 1 + 2 LAG)` out of its deepest owner's
/// switch (the last leg of a chunk). So from this step on each step ends
/// one chunk ([`super::tuner::TreePeriod`] reads the period there).
pub fn pipeline_full_from(height: usize) -> usize {
    (2 * height).saturating_sub(1) + 2 * LAG
}

/// NCCL's NVLS channels: `NCCL_NVLS_NCHANNELS`, default 16
/// (`src/transport/nvls.cc` line 232 at v2.21.5, 145 at v2.23.4).
pub const NCCL_NVLS_CHANNELS: u64 = 16;

/// NCCL's NVLS chunk: `NCCL_NVLS_CHUNKSIZE`, default 128 KiB
/// (`src/transport/nvls.cc` line 233 at v2.21.5, 146 at v2.23.4; 2.20 and
/// earlier used the Simple step, `NCCL_BUFFSIZE` / 8).
pub const NCCL_NVLS_CHUNK_BYTES: u64 = 128 * 1024;

/// NCCL's NVLS-tree chunk (bytes per channel and head) for a message of
/// `bytes` over `nodes` nodes with `heads` NVLS heads per node
/// (`computeCollChunkInfo`, `src/enqueue.cc` lines 1751-1762 at v2.21.5,
/// 2038-2050 at v2.23.4): at most 64 KiB from 4 nodes, then halved to
/// 256/128/64/32 KiB while the message is under 32/16/4/1 waves of
/// `16 x heads` chunks.
pub fn nccl_chunk_bytes(bytes: u64, nodes: usize, heads: u64) -> u64 {
    let ops = NCCL_NVLS_CHANNELS * heads.max(1);
    let mut chunk = NCCL_NVLS_CHUNK_BYTES;
    if nodes >= 4 {
        chunk = chunk.min(64 * 1024);
    }
    for (waves, limit) in [
        (32, 256 * 1024),
        (16, 128 * 1024),
        (4, 64 * 1024),
        (1, 32 * 1024),
    ] {
        if bytes < waves * ops * chunk && chunk > limit {
            chunk = limit;
        }
    }
    chunk
}

/// Pipeline chunks per part of an NVLS-tree message of `bytes` over
/// `nodes` nodes of `heads` local ranks: one per NCCL chunk of every
/// channel (`16 x` [`nccl_chunk_bytes`] of each part), at most `budget` (the
/// simulation's; beyond it the chunks grow and the pipeline's fill with them).
pub fn pipeline_chunks(bytes: u64, nodes: usize, heads: usize, budget: usize) -> usize {
    let heads = heads.max(1) as u64;
    let wave = NCCL_NVLS_CHANNELS * nccl_chunk_bytes(bytes, nodes, heads);
    let per = bytes.div_ceil(heads).div_ceil(wave).max(1);
    usize::try_from(per)
        .unwrap_or(usize::MAX)
        .min(budget.max(1))
}

/// The plan's steps over `nodes` (the group's ranks by node, every node the
/// same count, at least two nodes) for a message of `total` elements cut into
/// one part per local rank and `chunks` pipeline chunks per part.
pub fn nvls_tree_allreduce(nodes: &[Vec<usize>], total: u64, chunks: usize) -> Vec<Vec<Move>> {
    let m = nodes.first().map_or(0, Vec::len);
    nvls_tree_parts(nodes, total, chunks, m)
}

/// Part 0's plan of an NVLS-tree allreduce of `total` elements over `n`
/// ranks (the whole plan's steps, part 0's moves), when every part is the
/// image of part 0 under rotating every node's local ranks: `n` ranks in
/// consecutive nodes of `m >= 2` each, `total` a multiple of `m` (equal
/// parts, equal chunks). `channels.rs` times it on the quotient.
pub fn part_plan(op: &CollectiveOp, n: usize, total: u64, opts: &PlanOptions) -> Option<Plan> {
    let nodes = &opts.nodes;
    let m = nodes.first().map_or(0, Vec::len);
    let consecutive = nodes.iter().flatten().copied().eq(0..n);
    if *op != CollectiveOp::AllReduce
        || nodes.len() < 2
        || m < 2
        || nodes.iter().any(|g| g.len() != m)
        || !consecutive
        || total % m as u64 != 0
    {
        return None;
    }
    let steps = nvls_tree_parts(nodes, total, opts.nvls_tree_chunks(), 1);
    Some(Plan {
        ranks: n,
        buffer_len: buffer_len(op, total),
        steps: steps.into_iter().filter(|s| !s.is_empty()).collect(),
        reduced: (0..n).map(|r| (r, 0, total)).collect(),
    })
}

/// The moves of parts `0..upto` (of one per local rank), at the whole
/// plan's steps.
fn nvls_tree_parts(nodes: &[Vec<usize>], total: u64, chunks: usize, upto: usize) -> Vec<Vec<Move>> {
    let m = nodes.first().map_or(0, Vec::len);
    let n_nodes = nodes.len();
    let parents = heap_parents(n_nodes);
    let mut steps: Vec<Vec<Move>> = Vec::new();
    for (a, &(plo, phi)) in split_range(0, total, m).iter().enumerate().take(upto) {
        let parts: Vec<(u64, u64)> = split_range(plo, phi, chunks.max(1))
            .into_iter()
            .filter(|(lo, hi)| hi > lo)
            .collect();
        if parts.is_empty() {
            continue;
        }
        // Each chunk stands for one chunk of every NCCL channel, and channel
        // `c` climbs tree `c % 2`: the chunk's first half climbs the heap
        // over the nodes in order, its second half the heap over the nodes
        // reversed, at the same steps (so both directions of every NIC carry
        // data in every step, as NCCL's channels side by side do).
        let orders: [Vec<usize>; 2] = [(0..n_nodes).collect(), (0..n_nodes).rev().collect()];
        let owners: Vec<usize> = (0..n_nodes).map(|k| nodes[k][a]).collect();
        // Chunk c is reduced in the switch at step c, its tree starts at
        // c + LAG.
        for (c, &(lo, hi)) in parts.iter().enumerate() {
            for g in nodes {
                for &r in g {
                    push_at(
                        &mut steps,
                        c,
                        Move {
                            via: Via::SwitchReduce,
                            ..Move::reduce(r, g[a], lo, hi)
                        },
                    );
                }
            }
        }
        let mut tree: Vec<Vec<Move>> = Vec::new();
        for (t, order) in orders.iter().enumerate() {
            let halves: Vec<(u64, u64)> = parts
                .iter()
                .map(|&(lo, hi)| {
                    let mid = lo + (hi - lo) / 2;
                    if t == 0 {
                        (lo, mid)
                    } else {
                        (mid, hi)
                    }
                })
                .collect();
            let ranks: Vec<usize> = order.iter().map(|&k| owners[k]).collect();
            for (s, step) in tree_allreduce(&ranks, &parents, &halves)
                .into_iter()
                .enumerate()
            {
                for mv in step {
                    push_at(&mut tree, s, mv);
                }
            }
        }
        // The step after which each owner holds the final value of each
        // chunk: its last receive of the chunk in its tree.
        let mut done: Vec<Vec<usize>> = vec![vec![0; parts.len()]; n_nodes];
        for (s, step) in tree.iter().enumerate() {
            for mv in step {
                push_at(&mut steps, s + LAG, *mv);
                // The chunk holding the move's range (a half of it).
                let c = parts.partition_point(|p| p.1 <= mv.dst);
                if let Some(k) = owners.iter().position(|&o| o == mv.to) {
                    if c < parts.len() {
                        done[k][c] = done[k][c].max(s + LAG);
                    }
                }
            }
        }
        for (k, &owner) in owners.iter().enumerate() {
            let g = &nodes[k];
            for (c, &(lo, hi)) in parts.iter().enumerate() {
                for &r in g {
                    push_at(
                        &mut steps,
                        done[k][c] + LAG,
                        Move {
                            via: Via::SwitchMulticast,
                            ..Move::copy(owner, r, lo, hi)
                        },
                    );
                }
            }
        }
    }
    steps
}
