//! A collective as data: steps of point-to-point moves between the ranks of a
//! group, each move copying or reducing a range of elements of the sender's
//! buffer into a range of the receiver's. Both the data executor (`data`) and
//! the timing model (`timing`) read the same plan, so what is timed is what
//! computes the numbers.
//!
//! Semantics of a step: every move reads the sender's buffer as it was when the
//! step began (so exchanges within one step are safe), then the receivers apply
//! the moves in list order. Buffer layout per operation: see [`buffer_len`].

use super::kinds::CollectiveOp;

/// How a move travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Via {
    /// Over the topology's route from sender to receiver.
    P2p,
    /// Up to the NVSwitch, which reduces all moves of the step with the same
    /// receiver and range and sends one result down (NVLS `ld_reduce`). A move
    /// with `from == to` is the receiver's own contribution (timing only).
    SwitchReduce,
    /// One copy up to the NVSwitch, which multicasts it down to every receiver
    /// of the step with the same sender and range (NVLS `multimem.st`).
    SwitchMulticast,
    /// Up the sender's route into the network's aggregation switches
    /// (SHARP), which combine every move of the step over the same receiver
    /// range and connection (reduce moves: the sum of the distinct senders;
    /// copy moves: the one sender's data) and multicast the result down to
    /// every receiver of those moves: each link of the aggregation tree
    /// carries the range once per direction. A move with `from == to` is a
    /// sender's own contribution (timing only). A plan puts one such
    /// operation per range and connection in a step.
    InNetwork,
    /// As [`Via::InNetwork`] up to the aggregation root, where the result
    /// stays for a [`Via::NetworkMulticast`] of a later step to deliver
    /// (the receiver of these moves included): nothing comes down. With it,
    /// SHARP's allreduce is two steps of moves into one receiver and out of
    /// it, `2 (N - 1)` moves, not every sender's to every receiver.
    NetworkReduce,
    /// The result a [`Via::NetworkReduce`] left at the sender's aggregation
    /// root (the sender's range) multicast from there down to every receiver
    /// of the step's moves over the same range, the sender itself by a move
    /// to itself: nothing goes up.
    NetworkMulticast,
}

/// One point-to-point chunk movement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Move {
    pub from: usize,
    pub to: usize,
    /// Element offset in the sender's buffer.
    pub src: u64,
    /// Element offset in the receiver's buffer.
    pub dst: u64,
    /// Number of elements.
    pub len: u64,
    /// Combine into the receiver's elements with the reduction (else overwrite).
    pub reduce: bool,
    pub via: Via,
    /// Which of the sender's (and receiver's) NICs a move that crosses the
    /// network takes, modulo their NICs (`Topology::route_lane`): the lane
    /// of its channel, 0 unless a GPU has several NICs.
    pub lane: u32,
    /// The sender's connection the move goes over: a tree's reduce (up) and
    /// broadcast (down) of each of its trees, and NVLS's loads and multicast
    /// stores, are connections of their own, each with its own slots (NCCL's
    /// channels and thread groups,
    /// [`super::kinds::Algorithm::per_connection_slots`]); 0 elsewhere.
    pub conn: u32,
}

impl Move {
    pub fn copy(from: usize, to: usize, lo: u64, hi: u64) -> Move {
        Move {
            from,
            to,
            src: lo,
            dst: lo,
            len: hi - lo,
            reduce: false,
            via: Via::P2p,
            lane: 0,
            conn: 0,
        }
    }

    pub fn reduce(from: usize, to: usize, lo: u64, hi: u64) -> Move {
        Move {
            reduce: true,
            ..Move::copy(from, to, lo, hi)
        }
    }
}

/// Steps of moves over `ranks` ranks, each holding `buffer_len` elements.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub ranks: usize,
    pub buffer_len: u64,
    pub steps: Vec<Vec<Move>>,
    /// `(rank, offset, len)` regions that hold a finished reduction (where
    /// `avg` divides by the group size at the end).
    pub reduced: Vec<(usize, u64, u64)>,
}

impl Plan {
    /// Number of moves that cross between different ranks.
    pub fn num_transfers(&self) -> usize {
        self.steps
            .iter()
            .map(|s| s.iter().filter(|m| m.from != m.to && m.len > 0).count())
            .sum()
    }
}

/// Elements per rank buffer for `op` with `total` elements (nccl-tests' size
/// S / element size): allreduce, broadcast, reduce: the message; all-gather,
/// reduce-scatter, scatter, gather: the full `total` (piece `r` at
/// `bounds(r)`); all-to-all and permute: `2 * total` (send half, then receive half).
pub fn buffer_len(op: &CollectiveOp, total: u64) -> u64 {
    match op {
        CollectiveOp::AllToAll | CollectiveOp::Permute { .. } => 2 * total,
        _ => total,
    }
}

/// Start of piece `i` of `total` elements cut into `n` balanced pieces.
pub fn bound(total: u64, n: usize, i: usize) -> u64 {
    ((total as u128 * i as u128) / n.max(1) as u128) as u64
}

/// The `[lo, hi)` of piece `i`.
pub fn piece(total: u64, n: usize, i: usize) -> (u64, u64) {
    (bound(total, n, i), bound(total, n, i + 1))
}

/// Pieces of `[lo, hi)` cut into `n` balanced parts.
pub fn split_range(lo: u64, hi: u64, n: usize) -> Vec<(u64, u64)> {
    (0..n)
        .map(|i| {
            let (a, b) = piece(hi - lo, n, i);
            (lo + a, lo + b)
        })
        .collect()
}

/// Run step lists side by side: step `k` of the result is the union of step
/// `k` of every list.
pub fn parallel(lists: Vec<Vec<Vec<Move>>>) -> Vec<Vec<Move>> {
    let len = lists.iter().map(Vec::len).max().unwrap_or(0);
    let mut out: Vec<Vec<Move>> = vec![Vec::new(); len];
    for list in lists {
        for (k, step) in list.into_iter().enumerate() {
            out[k].extend(step);
        }
    }
    out
}

/// Put a step at index `k`, growing the list.
pub fn push_at(steps: &mut Vec<Vec<Move>>, k: usize, m: Move) {
    if steps.len() <= k {
        steps.resize(k + 1, Vec::new());
    }
    steps[k].push(m);
}
