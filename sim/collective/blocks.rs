//! Building blocks shared by the algorithms: rings, recursive doubling and
//! halving, binomial and binary trees, over a list of ranks (positions in the
//! list are the algorithm's ranks; values are the group's ranks).

use super::plan::{push_at, Move};

type Steps = Vec<Vec<Move>>;

/// Ring reduce-scatter: position `i` ends with `ranges[i]` reduced over all.
pub fn ring_reduce_scatter(ranks: &[usize], ranges: &[(u64, u64)]) -> Steps {
    let m = ranks.len();
    (0..m.saturating_sub(1))
        .map(|s| {
            (0..m)
                .filter_map(|i| {
                    let (lo, hi) = ranges[(i + 2 * m - s - 1) % m];
                    (hi > lo).then(|| Move::reduce(ranks[i], ranks[(i + 1) % m], lo, hi))
                })
                .collect()
        })
        .collect()
}

/// Ring all-gather: position `i` starts with `ranges[i]`; all end with all.
pub fn ring_all_gather(ranks: &[usize], ranges: &[(u64, u64)]) -> Steps {
    let m = ranks.len();
    (0..m.saturating_sub(1))
        .map(|s| {
            (0..m)
                .filter_map(|i| {
                    let (lo, hi) = ranges[(i + m - s) % m];
                    (hi > lo).then(|| Move::copy(ranks[i], ranks[(i + 1) % m], lo, hi))
                })
                .collect()
        })
        .collect()
}

/// NCCL-style rings over a group spread across nodes of `m` ranks each
/// (`nodes[i]` lists node `i`'s ranks by local index, i.e. by rail): ring `k`
/// enters node `i` at local rank `(k + i) % m` and leaves it from local rank
/// `(k + i + 1) % m`, where it enters node `i + 1`, so each node boundary is
/// crossed on one rail and the `m` rings together use every NIC. `None`
/// unless there are at least two nodes of the same size `m >= 2`.
pub fn rail_rings(nodes: &[Vec<usize>]) -> Option<Vec<Vec<usize>>> {
    let m = nodes.first()?.len();
    if nodes.len() < 2 || m < 2 || nodes.iter().any(|g| g.len() != m) {
        return None;
    }
    Some(
        (0..m)
            .map(|k| {
                let mut order = Vec::with_capacity(m * nodes.len());
                for (i, g) in nodes.iter().enumerate() {
                    let (enter, leave) = ((k + i) % m, (k + i + 1) % m);
                    order.push(g[enter]);
                    order.extend(
                        (1..m)
                            .map(|j| (enter + j) % m)
                            .filter(|&l| l != leave)
                            .map(|l| g[l]),
                    );
                    order.push(g[leave]);
                }
                order
            })
            .collect(),
    )
}

/// Rings side by side, ring `c` carrying part `c` (of `rings.len()` x
/// `lanes`) of every rank's piece: `reduce_scatter` then/or `all_gather` as
/// asked. With `lanes > 1` the rings run `lanes` times, copy `l` on each
/// rank's NIC `l` (`Move::lane`), as NCCL cycles a GPU's NICs over its
/// channels. `pieces` is indexed by rank; every rank ends (reduce-scatter)
/// or starts (all-gather) with its own piece, as with one ring.
pub fn multi_ring(
    rings: &[Vec<usize>],
    pieces: &[(u64, u64)],
    reduce_scatter: bool,
    all_gather: bool,
    lanes: usize,
) -> Steps {
    let lanes = lanes.max(1);
    let channels = rings.len() * lanes;
    super::plan::parallel(
        (0..channels)
            .map(|c| {
                let ring = &rings[c % rings.len()];
                let ranges: Vec<(u64, u64)> = ring
                    .iter()
                    .map(|&r| {
                        let (lo, hi) = pieces[r];
                        super::plan::split_range(lo, hi, channels)[c]
                    })
                    .collect();
                let mut steps = Vec::new();
                if reduce_scatter {
                    steps.extend(ring_reduce_scatter(ring, &ranges));
                }
                if all_gather {
                    steps.extend(ring_all_gather(ring, &ranges));
                }
                let lane = (c / rings.len()) as u32;
                if lane != 0 {
                    steps.iter_mut().flatten().for_each(|m| m.lane = lane);
                }
                steps
            })
            .collect(),
    )
}

/// Largest power of two `<= n` (n >= 1).
pub fn pow2_floor(n: usize) -> usize {
    1 << (usize::BITS - 1 - n.leading_zeros())
}

/// Recursive doubling allreduce of `[lo, hi)`: non-powers of two fold the
/// `n - p` extra ranks into the first ones first and send the result back last.
pub fn recursive_doubling_allreduce(ranks: &[usize], lo: u64, hi: u64) -> Steps {
    fold_around(ranks, lo, hi, |core| {
        let p = core.len();
        let mut steps = Vec::new();
        let mut d = 1;
        while d < p {
            steps.push(
                (0..p)
                    .map(|i| Move::reduce(core[i], core[i ^ d], lo, hi))
                    .collect(),
            );
            d <<= 1;
        }
        steps
    })
}

/// Rabenseifner: recursive-halving reduce-scatter then recursive-doubling
/// all-gather on the power-of-two core, with the same fold for extras.
pub fn halving_doubling_allreduce(ranks: &[usize], lo: u64, hi: u64) -> Steps {
    fold_around(ranks, lo, hi, |core| {
        let p = core.len();
        let ranges = super::plan::split_range(lo, hi, p);
        let mut steps = recursive_halving(core, &ranges);
        steps.extend(recursive_doubling_gather(core, &ranges));
        steps
    })
}

/// Recursive halving reduce-scatter over a power-of-two list: position `i`
/// ends with `ranges[i]` reduced.
pub fn recursive_halving(core: &[usize], ranges: &[(u64, u64)]) -> Steps {
    let p = core.len();
    let mut steps = Vec::new();
    let mut d = p / 2;
    while d >= 1 {
        let mut step = Vec::new();
        for i in 0..p {
            // Position i keeps the half of its current block that holds i and
            // sends the other half (the partner's) to i ^ d.
            let j = i ^ d;
            let block = i & !(2 * d - 1);
            let (first, last) = if j & d == 0 {
                (block, block + d)
            } else {
                (block + d, block + 2 * d)
            };
            let (a, b) = (ranges[first].0, ranges[last - 1].1);
            if b > a {
                step.push(Move::reduce(core[i], core[j], a, b));
            }
        }
        steps.push(step);
        d /= 2;
    }
    steps
}

/// Recursive doubling all-gather over a power-of-two list: position `i`
/// starts with `ranges[i]`.
pub fn recursive_doubling_gather(core: &[usize], ranges: &[(u64, u64)]) -> Steps {
    let p = core.len();
    let mut steps = Vec::new();
    let mut d = 1;
    while d < p {
        let mut step = Vec::new();
        for i in 0..p {
            let block = i & !(d - 1);
            let (a, b) = (ranges[block].0, ranges[block + d - 1].1);
            if b > a {
                step.push(Move::copy(core[i], core[i ^ d], a, b));
            }
        }
        steps.push(step);
        d <<= 1;
    }
    steps
}

/// Fold ranks beyond the largest power of two `p` onto the first `n - p`
/// (reduce), run `core` on the first `p`, then copy the result back.
fn fold_around(ranks: &[usize], lo: u64, hi: u64, core: impl Fn(&[usize]) -> Steps) -> Steps {
    let n = ranks.len();
    if n <= 1 || hi <= lo {
        return Vec::new();
    }
    let p = pow2_floor(n);
    let mut steps = Vec::new();
    if n > p {
        steps.push(
            (p..n)
                .map(|i| Move::reduce(ranks[i], ranks[i - p], lo, hi))
                .collect(),
        );
    }
    steps.extend(core(&ranks[..p]));
    if n > p {
        steps.push(
            (p..n)
                .map(|i| Move::copy(ranks[i - p], ranks[i], lo, hi))
                .collect(),
        );
    }
    steps
}

/// Binomial-tree broadcast of `[lo, hi)` from position 0.
pub fn binomial_broadcast(ranks: &[usize], lo: u64, hi: u64) -> Steps {
    let n = ranks.len();
    let mut steps = Vec::new();
    let mut d = 1;
    while d < n {
        steps.push(
            (0..d.min(n - d))
                .map(|v| Move::copy(ranks[v], ranks[v + d], lo, hi))
                .collect(),
        );
        d <<= 1;
    }
    steps
}

/// Binomial-tree reduce of `[lo, hi)` onto position 0.
pub fn binomial_reduce(ranks: &[usize], lo: u64, hi: u64) -> Steps {
    let n = ranks.len();
    let mut steps = Vec::new();
    let mut d = 1;
    while d < n {
        steps.push(
            (0..n)
                .filter(|v| v % (2 * d) == d)
                .map(|v| Move::reduce(ranks[v], ranks[v - d], lo, hi))
                .collect(),
        );
        d <<= 1;
    }
    steps
}

/// Pipelined chain: chunk `c` leaves position `i` at step `i + c` (broadcast
/// from position 0), or, reducing, moves from the last position toward 0.
pub fn chain(ranks: &[usize], chunks: &[(u64, u64)], reduce: bool) -> Steps {
    let n = ranks.len();
    let mut steps = Vec::new();
    for (c, &(lo, hi)) in chunks.iter().enumerate() {
        if hi <= lo {
            continue;
        }
        for i in 0..n.saturating_sub(1) {
            let m = if reduce {
                Move::reduce(ranks[n - 1 - i], ranks[n - 2 - i], lo, hi)
            } else {
                Move::copy(ranks[i], ranks[i + 1], lo, hi)
            };
            push_at(&mut steps, i + c, m);
        }
    }
    steps
}

/// A heap-shaped binary tree over positions: parent of `i` is `(i - 1) / 2`.
pub fn heap_parents(n: usize) -> Vec<Option<usize>> {
    (0..n).map(|i| (i > 0).then(|| (i - 1) / 2)).collect()
}

/// NCCL's multi-node tree: a chain inside each node (ranks in the given
/// order, the first one the node's leader) and a heap-shaped binary tree
/// over the nodes' leaders. Positions index the concatenation of `nodes`.
pub fn node_tree_parents(nodes: &[Vec<usize>]) -> (Vec<usize>, Vec<Option<usize>>) {
    let mut ranks = Vec::new();
    let mut leader_pos = Vec::new();
    let mut parents = Vec::new();
    for (b, g) in nodes.iter().enumerate() {
        leader_pos.push(ranks.len());
        for (a, &r) in g.iter().enumerate() {
            let parent = if a > 0 {
                Some(ranks.len() - 1)
            } else if b > 0 {
                Some(leader_pos[(b - 1) / 2])
            } else {
                None
            };
            ranks.push(r);
            parents.push(parent);
        }
    }
    (ranks, parents)
}

/// A pipelined tree allreduce over `ranks` with `parents` (positions; the
/// root has none, parents come before children): chunk `c` climbs one level
/// per step and comes back down as soon as the root has it, while later
/// chunks still climb (NCCL's split tree: reduce and broadcast run at once
/// on separate warps, so a link's two directions both stay busy).
pub fn tree_allreduce(ranks: &[usize], parents: &[Option<usize>], chunks: &[(u64, u64)]) -> Steps {
    let n = ranks.len();
    let mut depth = vec![0usize; n];
    for i in 0..n {
        if let Some(p) = parents[i] {
            depth[i] = depth[p] + 1;
        }
    }
    let height = depth.iter().copied().max().unwrap_or(0);
    // The broadcast of chunk 0 starts once the root has reduced it.
    let down = height;
    let mut steps = Vec::new();
    for (c, &(lo, hi)) in chunks.iter().enumerate() {
        if hi <= lo {
            continue;
        }
        for i in 0..n {
            let Some(p) = parents[i] else { continue };
            let d = depth[i];
            push_at(
                &mut steps,
                height - d + c,
                Move::reduce(ranks[i], ranks[p], lo, hi),
            );
            push_at(
                &mut steps,
                down + (d - 1) + c,
                Move::copy(ranks[p], ranks[i], lo, hi),
            );
        }
    }
    steps
}
