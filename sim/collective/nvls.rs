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

use super::blocks::{heap_parents, tree_allreduce};
use super::plan::{push_at, split_range, Move, Via};

/// Steps between a chunk's arrival at a rank and the rank's next move of
/// it across the other fabric (switch to network, network to switch). A
/// rank's sends of a step wait for its sends of the step before (`Deps`),
/// so with one step the network send would sit between two NVLink steps;
/// two steps let NVLink and NIC traffic of different chunks overlap, as
/// NCCL's separate NVLS and network warps do.
const LAG: usize = 2;

/// The plan's steps over `nodes` (the group's ranks by node, every node the
/// same count, at least two nodes) for a message of `total` elements cut into
/// one part per local rank and `chunks` pipeline chunks per part.
pub fn nvls_tree_allreduce(nodes: &[Vec<usize>], total: u64, chunks: usize) -> Vec<Vec<Move>> {
    let m = nodes.first().map_or(0, Vec::len);
    let n_nodes = nodes.len();
    let parents = heap_parents(n_nodes);
    let mut steps: Vec<Vec<Move>> = Vec::new();
    for (a, &(plo, phi)) in split_range(0, total, m).iter().enumerate() {
        let parts: Vec<(u64, u64)> = split_range(plo, phi, chunks.max(1))
            .into_iter()
            .filter(|(lo, hi)| hi > lo)
            .collect();
        if parts.is_empty() {
            continue;
        }
        // Odd rails run the tree over the nodes in reverse order, so the
        // roots (whose NICs carry one edge less) alternate, as NCCL's
        // double binary tree balances its two trees.
        let mut order: Vec<usize> = (0..n_nodes).collect();
        if a % 2 == 1 {
            order.reverse();
        }
        let owners: Vec<usize> = order.iter().map(|&k| nodes[k][a]).collect();
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
        let tree = tree_allreduce(&owners, &parents, &parts);
        // The step after which each owner holds the final value of each
        // chunk: its last receive of the chunk in the tree.
        let mut done: Vec<Vec<usize>> = vec![vec![0; parts.len()]; n_nodes];
        for (s, step) in tree.iter().enumerate() {
            for mv in step {
                push_at(&mut steps, s + LAG, *mv);
                let c = parts.partition_point(|p| p.0 < mv.dst);
                if let Some(k) = owners.iter().position(|&o| o == mv.to) {
                    if c < parts.len() && parts[c].0 == mv.dst {
                        done[k][c] = done[k][c].max(s + LAG);
                    }
                }
            }
        }
        for (k, &owner) in owners.iter().enumerate() {
            let g = &nodes[order[k]];
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
