//! A tree allreduce's steps generated one at a time: the plan of
//! [`super::build`] with `Algorithm::Tree` holds `ranks x chunks` moves (16.7
//! million for 32 MiB over 65,536 ranks), but step `k` of a pipelined tree is
//! easy to derive from its shape: chunk `c` climbs from depth `d` at step
//! `height - d + c` and comes back down to depth `d` at step
//! `height + d - 1 + c` ([`super::blocks::tree_allreduce`]), so step `k`
//! holds, for each chunk `c` with `k - 2 height < c <= k`, the moves of the
//! positions of one depth. The trees of a plan run side by side (step `k` is
//! every tree's step `k`, in the plan's order), and the moves of a step come
//! in the plan's order: by chunk, then by position. The tuner's estimate and
//! the streamed timing (`stream.rs`) read these steps instead of the plan;
//! `tests/collective/streams.rs` checks them against the built plan.

use super::algorithms::{tree_conn, PlanOptions, TreeChannels};
use super::blocks::heap_parents;
use super::plan::{split_range, Move};

/// One pipelined tree: ranks by position, parents, positions by depth.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Tree {
    ranks: Vec<usize>,
    parents: Vec<Option<usize>>,
    /// Positions of each depth, ascending (depth 0 is the root).
    by_depth: Vec<Vec<usize>>,
    chunks: Vec<(u64, u64)>,
    /// The NIC lane of its moves ([`super::plan::Move::lane`]).
    lane: u32,
    /// Its index among the plan's trees (its connections,
    /// [`super::algorithms::tree_conn`]).
    index: u32,
}

impl Tree {
    fn new(ranks: Vec<usize>, parents: Vec<Option<usize>>, chunks: Vec<(u64, u64)>) -> Tree {
        let n = ranks.len();
        let mut depth = vec![0usize; n];
        let mut by_depth: Vec<Vec<usize>> = Vec::new();
        for i in 0..n {
            // Parents come before their children.
            if let Some(p) = parents[i] {
                depth[i] = depth[p] + 1;
            }
            if by_depth.len() <= depth[i] {
                by_depth.resize(depth[i] + 1, Vec::new());
            }
            by_depth[depth[i]].push(i);
        }
        Tree {
            ranks,
            parents,
            by_depth,
            chunks,
            lane: 0,
            index: 0,
        }
    }

    fn height(&self) -> usize {
        self.by_depth.len().saturating_sub(1)
    }

    /// Steps, some of them possibly empty (the plan drops those).
    fn len(&self) -> usize {
        let h = self.height();
        if h == 0 || self.chunks.is_empty() {
            return 0;
        }
        2 * h + self.chunks.len() - 1
    }

    fn step(&self, k: usize, out: &mut Vec<Move>) {
        let h = self.height();
        if k >= self.len() {
            return;
        }
        let first = (k + 1).saturating_sub(2 * h);
        let last = k.min(self.chunks.len() - 1);
        for c in first..=last {
            let (lo, hi) = self.chunks[c];
            if hi <= lo {
                continue;
            }
            let j = k - c;
            if j < h {
                // Up: reduce into the parent from depth h - j.
                for &i in &self.by_depth[h - j] {
                    let p = self.parents[i].unwrap_or(i);
                    out.push(Move {
                        lane: self.lane,
                        conn: tree_conn(self.index, true),
                        ..Move::reduce(self.ranks[i], self.ranks[p], lo, hi)
                    });
                }
            } else {
                // Down: copy from the parent to depth j - h + 1.
                for &i in &self.by_depth[j - h + 1] {
                    let p = self.parents[i].unwrap_or(i);
                    out.push(Move {
                        lane: self.lane,
                        conn: tree_conn(self.index, false),
                        ..Move::copy(self.ranks[p], self.ranks[i], lo, hi)
                    });
                }
            }
        }
    }
}

/// The trees of a tree allreduce, side by side.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeStream {
    trees: Vec<Tree>,
}

impl TreeStream {
    /// The trees [`super::build`] uses for an allreduce over `n` ranks of
    /// `total` elements in `chunks` pipeline chunks (the same three shapes:
    /// channels across nodes, a chain and its mirror in one node, two
    /// mirrored heaps without node information).
    pub fn allreduce(n: usize, total: u64, opts: &PlanOptions) -> TreeStream {
        let chunks = opts.chunks.max(1);
        let half = total / 2;
        let nodes = &opts.nodes;
        let covers = nodes.iter().flatten().count() == n;
        let mut trees = Vec::new();
        if covers && nodes.len() >= 2 {
            let shape = TreeChannels::of(nodes, chunks, opts);
            for c in 0..shape.channels {
                for (r, p, ch, lane) in shape.channel_trees(nodes, c, 0, half, total) {
                    trees.push(Tree {
                        lane,
                        index: trees.len() as u32,
                        ..Tree::new(r, p, ch)
                    });
                }
            }
        } else if covers && nodes.len() == 1 {
            let chain: Vec<usize> = nodes[0].clone();
            let mirror: Vec<usize> = chain.iter().rev().copied().collect();
            let parents: Vec<Option<usize>> = (0..n).map(|i| i.checked_sub(1)).collect();
            trees.push(Tree::new(
                chain,
                parents.clone(),
                split_range(0, half, chunks),
            ));
            trees.push(Tree {
                index: 1,
                ..Tree::new(mirror, parents, split_range(half, total, chunks))
            });
        } else {
            let all: Vec<usize> = (0..n).collect();
            let mirror: Vec<usize> = all.iter().rev().copied().collect();
            let heap = heap_parents(n);
            trees.push(Tree::new(all, heap.clone(), split_range(0, half, chunks)));
            trees.push(Tree {
                index: 1,
                ..Tree::new(mirror, heap, split_range(half, total, chunks))
            });
        }
        TreeStream { trees }
    }

    /// Channel `c` of a multi-node tree (its two trees).
    pub fn channel(shape: &TreeChannels, nodes: &[Vec<usize>], c: usize, total: u64) -> TreeStream {
        let base = shape.trees_per_channel() * c;
        let trees = shape
            .channel_trees(nodes, c, 0, total / 2, total)
            .into_iter()
            .enumerate()
            .map(|(t, (r, p, ch, lane))| Tree {
                lane,
                index: (base + t) as u32,
                ..Tree::new(r, p, ch)
            })
            .collect();
        TreeStream { trees }
    }

    /// Steps to ask for (some may be empty).
    pub fn len(&self) -> usize {
        self.trees.iter().map(Tree::len).max().unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Step `k`'s moves, appended to `out` in the plan's order.
    pub fn step(&self, k: usize, out: &mut Vec<Move>) {
        for t in &self.trees {
            t.step(k, out);
        }
    }

    /// The boundaries of every chunk its moves carry (each move reads and
    /// writes one chunk at the same offset), appended to `out`.
    pub fn bounds(&self, out: &mut Vec<u64>) {
        for t in &self.trees {
            for &(lo, hi) in &t.chunks {
                out.extend([lo, hi]);
            }
        }
    }

    /// The non-empty steps, materialised (what the plan holds).
    pub fn steps(&self) -> Vec<Vec<Move>> {
        let mut out = Vec::new();
        for k in 0..self.len() {
            let mut s = Vec::new();
            self.step(k, &mut s);
            if !s.is_empty() {
                out.push(s);
            }
        }
        out
    }
}
