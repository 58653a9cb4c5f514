//! CollNet Direct (NCCL's `COLLNET_DIRECT`): the network's switches reduce
//! and multicast (SHARP), so the nodes exchange each byte once each way
//! instead of a ring's `n - 1` steps.
//!
//! Every node has `m` ranks, each with its own NIC (a head, as on DGX and
//! HGX nodes). Allreduce: local rank `j` owns part `j` of the message; per
//! pipeline chunk of a part, every other local rank sends it to the head
//! over NVLink (the head reduces), the heads of part `j` (one per node, all
//! on rail `j`) reduce it in the network into one of them (in turn per
//! chunk) and multicasts the sum from the switch to them all
//! ([`Via::NetworkReduce`], [`Via::NetworkMulticast`]: one SHARP operation
//! as two steps of moves, `2 N` moves, not every head's to every other),
//! and each head copies it to its node's other ranks. Reduce-scatter:
//! head `j` collects (reduces) the pieces of every rank with local index
//! `j`, and the network reduces each piece into its owner. All-gather: each
//! rank's piece goes up once and the network multicasts it to the heads of
//! its rail, which copy it to their nodes. So a NIC carries `S / m` each way
//! (allreduce), `S / m` up and `S / n` down (reduce-scatter), the reverse
//! for all-gather; NCCL's tuning has the same shape (`tuning.cc`:
//! allreduce through the heads, reduce-scatter and all-gather at `ppn`
//! times a NIC's rate, only where every rank has its own NIC).
//!
//! The legs (scatter, network, gather) are connections of their own and
//! chunk `c`'s network leg runs a step after its scatter, so NVLink and NIC
//! traffic of different chunks overlap, as NCCL's separate warps do.

use super::kinds::CollectiveOp;
use super::plan::{push_at, split_range, Move, Via};

/// A leg's connection: the scatter to the heads, the network's reduction,
/// the gather from the heads.
const SCATTER_CONN: u32 = 0;
const NET_CONN: u32 = 1;
const GATHER_CONN: u32 = 2;
/// The network's multicast of an allreduce's sum.
const NET_DOWN_CONN: u32 = 3;

/// The plan's steps of `op` over `nodes` (the group's ranks by node, at
/// least two nodes of `m` each), `pieces` each rank's piece of `total`
/// elements, `chunks` pipeline chunks per part (allreduce) or piece.
pub fn collnet_steps(
    op: &CollectiveOp,
    nodes: &[Vec<usize>],
    total: u64,
    pieces: &[(u64, u64)],
    chunks: usize,
) -> Vec<Vec<Move>> {
    let m = nodes.first().map_or(0, Vec::len);
    let mut steps = Vec::new();
    let chunks = chunks.max(1);
    match op {
        CollectiveOp::AllReduce => {
            for (j, &(plo, phi)) in split_range(0, total, m).iter().enumerate() {
                let heads: Vec<usize> = nodes.iter().map(|g| g[j]).collect();
                for (c, (lo, hi)) in split_range(plo, phi, chunks).into_iter().enumerate() {
                    if hi <= lo {
                        continue;
                    }
                    node_leg(&mut steps, c, nodes, (j, true), (lo, hi));
                    // Reduced into one head (in turn, its own share by a
                    // move to itself), multicast from the switch to all.
                    let root = heads[c % heads.len()];
                    for &h in &heads {
                        let up = on(Move::reduce(h, root, lo, hi), Via::NetworkReduce, NET_CONN);
                        push_at(&mut steps, c + 1, up);
                        let down = Move::copy(root, h, lo, hi);
                        let down = on(down, Via::NetworkMulticast, NET_DOWN_CONN);
                        push_at(&mut steps, c + 2, down);
                    }
                    node_leg(&mut steps, c + 3, nodes, (j, false), (lo, hi));
                }
            }
        }
        CollectiveOp::ReduceScatter => {
            for j in 0..m {
                let heads: Vec<usize> = nodes.iter().map(|g| g[j]).collect();
                for (c, owner, lo, hi) in piece_chunks(&heads, pieces, total, chunks) {
                    node_leg(&mut steps, c, nodes, (j, true), (lo, hi));
                    network_reduce(&mut steps, c + 1, &heads, &[owner], lo, hi);
                }
            }
        }
        CollectiveOp::AllGather => {
            for j in 0..m {
                let heads: Vec<usize> = nodes.iter().map(|g| g[j]).collect();
                for (c, owner, lo, hi) in piece_chunks(&heads, pieces, total, chunks) {
                    for &h in heads.iter().filter(|&&h| h != owner) {
                        let mv = Move::copy(owner, h, lo, hi);
                        push_at(&mut steps, c, on(mv, Via::InNetwork, NET_CONN));
                    }
                    node_leg(&mut steps, c + 1, nodes, (j, false), (lo, hi));
                }
            }
        }
        _ => {}
    }
    steps.retain(|s| !s.is_empty());
    steps
}

/// The chunks of a rail's pieces (each head's), one after another: `(step,
/// owner, lo, hi)`, each piece in chunks of about `total / chunks` elements (at
/// least one per piece), so the pipeline runs over the pieces in turn with
/// the chunk size of the whole message.
fn piece_chunks(
    heads: &[usize],
    pieces: &[(u64, u64)],
    total: u64,
    chunks: usize,
) -> Vec<(usize, usize, u64, u64)> {
    let chunk = total.div_ceil(chunks as u64).max(1);
    let mut out = Vec::new();
    for &h in heads {
        let (plo, phi) = pieces[h];
        let k = usize::try_from((phi - plo).div_ceil(chunk).max(1)).unwrap_or(usize::MAX);
        for (lo, hi) in split_range(plo, phi, k) {
            if hi > lo {
                out.push((out.len(), h, lo, hi));
            }
        }
    }
    out
}

/// At step `k`, every node's other ranks reduce `[lo, hi)` into their head
/// `j` over NVLink (`into_head`), or the head copies it to them.
fn node_leg(
    steps: &mut Vec<Vec<Move>>,
    k: usize,
    nodes: &[Vec<usize>],
    (j, into_head): (usize, bool),
    (lo, hi): (u64, u64),
) {
    for g in nodes {
        for &r in g.iter().filter(|&&r| r != g[j]) {
            let mv = if into_head {
                on(Move::reduce(r, g[j], lo, hi), Via::P2p, SCATTER_CONN)
            } else {
                on(Move::copy(g[j], r, lo, hi), Via::P2p, GATHER_CONN)
            };
            push_at(steps, k, mv);
        }
    }
}

fn on(mv: Move, via: Via, conn: u32) -> Move {
    Move { via, conn, ..mv }
}

/// One in-network reduction at step `k`: every sender's `[lo, hi)` summed
/// into every receiver's. Each receiver takes the other senders' values
/// (its own is already in place); a sender that is the only receiver
/// states its own contribution with a move to itself.
fn network_reduce(
    steps: &mut Vec<Vec<Move>>,
    k: usize,
    senders: &[usize],
    receivers: &[usize],
    lo: u64,
    hi: u64,
) {
    for &to in receivers {
        for &from in senders.iter().filter(|&&s| s != to) {
            push_at(
                steps,
                k,
                on(Move::reduce(from, to, lo, hi), Via::InNetwork, NET_CONN),
            );
        }
    }
    if let [only] = receivers {
        if senders.contains(only) {
            let own = Move::reduce(*only, *only, lo, hi);
            push_at(steps, k, on(own, Via::InNetwork, NET_CONN));
        }
    }
}
