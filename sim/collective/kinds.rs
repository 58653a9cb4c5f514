//! The vocabulary of collectives: which operation, which algorithm, which NCCL
//! protocol, and how nccl-tests turns a time into algbw and busbw.

use std::fmt;
use std::str::FromStr;

use super::CollectiveError;

/// A collective operation over a group of `n` ranks.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CollectiveOp {
    AllReduce,
    AllGather,
    ReduceScatter,
    /// From `root` to every rank.
    Broadcast {
        root: usize,
    },
    /// Onto `root`.
    Reduce {
        root: usize,
    },
    /// Piece `r` of `root`'s buffer to rank `r`.
    Scatter {
        root: usize,
    },
    /// Piece `r` from rank `r` onto `root`.
    Gather {
        root: usize,
    },
    AllToAll,
    /// Arbitrary `(source, target)` pairs (each target receives at most once);
    /// nccl-tests' sendrecv is the shift `r -> r+1`.
    Permute {
        pairs: Vec<(usize, usize)>,
    },
}

impl CollectiveOp {
    /// Parse a CLI name (`allreduce`, `sendrecv`, ...); rooted ops get root 0
    /// and `sendrecv` the ring shift over `n` ranks.
    pub fn parse(name: &str, n: usize) -> Result<CollectiveOp, CollectiveError> {
        Ok(match name {
            "allreduce" => CollectiveOp::AllReduce,
            "allgather" => CollectiveOp::AllGather,
            "reducescatter" => CollectiveOp::ReduceScatter,
            "broadcast" => CollectiveOp::Broadcast { root: 0 },
            "reduce" => CollectiveOp::Reduce { root: 0 },
            "scatter" => CollectiveOp::Scatter { root: 0 },
            "gather" => CollectiveOp::Gather { root: 0 },
            "alltoall" => CollectiveOp::AllToAll,
            "sendrecv" => CollectiveOp::Permute {
                pairs: (0..n).map(|r| (r, (r + 1) % n)).collect(),
            },
            _ => {
                return Err(CollectiveError::Unknown {
                    what: "operation",
                    name: name.to_string(),
                    known: "allreduce, allgather, reducescatter, broadcast, reduce, scatter, gather, alltoall, sendrecv",
                })
            }
        })
    }

    pub fn name(&self) -> &'static str {
        match self {
            CollectiveOp::AllReduce => "allreduce",
            CollectiveOp::AllGather => "allgather",
            CollectiveOp::ReduceScatter => "reducescatter",
            CollectiveOp::Broadcast { .. } => "broadcast",
            CollectiveOp::Reduce { .. } => "reduce",
            CollectiveOp::Scatter { .. } => "scatter",
            CollectiveOp::Gather { .. } => "gather",
            CollectiveOp::AllToAll => "alltoall",
            CollectiveOp::Permute { .. } => "sendrecv",
        }
    }

    /// Does the operation combine values (and so take a reduction)?
    pub fn reduces(&self) -> bool {
        matches!(
            self,
            CollectiveOp::AllReduce | CollectiveOp::ReduceScatter | CollectiveOp::Reduce { .. }
        )
    }

    /// nccl-tests' bus-bandwidth factor (doc/PERFORMANCE.md): allreduce
    /// 2(n-1)/n; allgather, reducescatter, alltoall, gather, scatter (n-1)/n;
    /// broadcast, reduce, sendrecv 1.
    pub fn busbw_factor(&self, n: usize) -> f64 {
        let n = n.max(1) as f64;
        match self {
            CollectiveOp::AllReduce => 2.0 * (n - 1.0) / n,
            CollectiveOp::AllGather
            | CollectiveOp::ReduceScatter
            | CollectiveOp::AllToAll
            | CollectiveOp::Gather { .. }
            | CollectiveOp::Scatter { .. } => (n - 1.0) / n,
            CollectiveOp::Broadcast { .. }
            | CollectiveOp::Reduce { .. }
            | CollectiveOp::Permute { .. } => 1.0,
        }
    }
}

/// How the collective moves data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Algorithm {
    /// Ring (allreduce = reduce-scatter + all-gather); chain for broadcast/reduce.
    Ring,
    /// Double binary tree (allreduce); binomial tree (broadcast, reduce, scatter, gather).
    Tree,
    /// Recursive halving-doubling (Rabenseifner allreduce; recursive halving
    /// reduce-scatter).
    HalvingDoubling,
    /// Recursive doubling (allreduce of whole buffers; all-gather).
    RecursiveDoubling,
    /// Every rank sends straight to every rank that needs its data (one shot);
    /// pairwise exchange for all-to-all is `Pairwise`.
    Direct,
    /// All-to-all in n-1 rounds of pairwise exchange.
    Pairwise,
    /// In-switch reduction and multicast (NVLS), where the NVSwitch supports it.
    Nvls,
    /// NVLS inside each node and a tree over the nodes' NICs (NCCL's
    /// NVLS_TREE), where the NVSwitches reduce.
    NvlsTree,
    /// Intra-node reduce-scatter, inter-node allreduce, intra-node all-gather.
    Hierarchical,
    /// NCCL's CollNet Direct, where the network's switches reduce (SHARP):
    /// inside each node every rank sends each head (local rank `j`, with its
    /// own NIC) part `j`, the heads of part `j` reduce it in the network,
    /// which multicasts the sum back, and each head hands it to its node
    /// (`collnet.rs`).
    CollNet,
}

impl Algorithm {
    pub const ALL: [Algorithm; 10] = [
        Algorithm::Ring,
        Algorithm::Tree,
        Algorithm::HalvingDoubling,
        Algorithm::RecursiveDoubling,
        Algorithm::Direct,
        Algorithm::Pairwise,
        Algorithm::Nvls,
        Algorithm::NvlsTree,
        Algorithm::Hierarchical,
        Algorithm::CollNet,
    ];

    /// Does a send pay the protocol's hop after its data arrived only,
    /// while its sender's previous send may still be on the wire (rather than
    /// after both)? Rings: NCCL charges a ring's hop latency along the data's
    /// path (tuning.cc: `nInterSteps` network hops, the rest NVLink), not on
    /// every rank's every step; a rank's next send waits for its slot (its
    /// previous send in the channel) without paying the hop again. Trees
    /// too: NCCL's tree latency is a hop per level of the tree, not per
    /// chunk (Simple keeps 8 steps in flight, so a chunk's flag wait overlaps
    /// the last chunk's data). With links alone this made trees too fast on
    /// two nodes; with each tree channel's own rate
    /// (`Calibration::tree_channel_gbs`) the chunks' fill is what the
    /// two-node curves show. NVLS-tree pipelines them too: NCCL runs its
    /// switch, network and multicast legs on separate warps, each with its
    /// own connection slots (`src/device/all_reduce.h`,
    /// `NCCL_ALGO_NVLS_TREE`), so a chunk's hops are latency on its path, not
    /// a stall of every step (README, *NVLS-tree timing*).
    pub fn pipelines_hops(self) -> bool {
        matches!(
            self,
            Algorithm::Ring
                | Algorithm::Tree
                | Algorithm::NvlsTree
                | Algorithm::Nvls
                | Algorithm::CollNet
        )
    }

    /// Is the tuner's estimate the longest path through the moves
    /// (`critical.rs`) rather than a sum of step costs? Trees, NVLS and
    /// NVLS-tree, whose chunks at different levels (legs) move at once.
    pub fn estimated_by_path(self) -> bool {
        matches!(
            self,
            Algorithm::Tree | Algorithm::NvlsTree | Algorithm::Nvls | Algorithm::CollNet
        )
    }

    /// Do a rank's sends of one step use separate slots (channels), each
    /// waiting only for the rank's previous send in the same slot? Rings
    /// side by side (rail rings): the `j`-th send of a rank in a step is
    /// its send in ring `j`, and NCCL's channels progress independently.
    /// Elsewhere a rank's next step waits for all its sends of the last.
    pub fn per_channel_slots(self) -> bool {
        matches!(self, Algorithm::Ring)
    }

    /// Does a send wait only for its sender's last send over the same
    /// connection ([`super::plan::Move::conn`])? Trees: NCCL runs each tree
    /// of a channel in its own thread block, and a split tree's reduce-up and
    /// broadcast-down in separate thread groups with their own connections
    /// (v2.19.3-1 `src/device/all_reduce.h` `runTreeSplit`), so a rank's chunk
    /// in one tree or direction never waits for its sends in another: a
    /// level's hop is paid once along a chunk's path, not once per chunk by
    /// every rank in turn. NVLS likewise: its loads into the switch's
    /// reduction and its multicast stores run in warp groups of their own;
    /// CollNet's scatter, network and gather legs too.
    pub fn per_connection_slots(self) -> bool {
        matches!(self, Algorithm::Tree | Algorithm::Nvls | Algorithm::CollNet)
    }

    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Ring => "ring",
            Algorithm::Tree => "tree",
            Algorithm::HalvingDoubling => "halving-doubling",
            Algorithm::RecursiveDoubling => "recursive-doubling",
            Algorithm::Direct => "direct",
            Algorithm::Pairwise => "pairwise",
            Algorithm::Nvls => "nvls",
            Algorithm::NvlsTree => "nvls-tree",
            Algorithm::Hierarchical => "hierarchical",
            Algorithm::CollNet => "collnet",
        }
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Algorithm {
    type Err = CollectiveError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Algorithm::ALL
            .into_iter()
            .find(|a| a.name() == s)
            .ok_or_else(|| CollectiveError::Unknown {
                what: "algorithm",
                name: s.to_string(),
                known: "ring, tree, halving-doubling, recursive-doubling, direct, pairwise, nvls, nvls-tree, hierarchical, collnet",
            })
    }
}

/// NCCL's wire protocols.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Protocol {
    /// 8 bytes of data + 8 bytes of flag per 16 B line: 50% payload, lowest latency.
    Ll,
    /// 120 bytes of data per 128 B line.
    Ll128,
    /// Full payload in large chunks, with a fence per chunk (highest latency).
    Simple,
}

impl Protocol {
    pub const ALL: [Protocol; 3] = [Protocol::Ll, Protocol::Ll128, Protocol::Simple];

    /// Fraction of the bytes on the wire that are payload.
    pub fn payload_fraction(self) -> f64 {
        match self {
            Protocol::Ll => 0.5,
            Protocol::Ll128 => 120.0 / 128.0,
            Protocol::Simple => 1.0,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Protocol::Ll => "LL",
            Protocol::Ll128 => "LL128",
            Protocol::Simple => "Simple",
        }
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Protocol {
    type Err = CollectiveError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "ll" => Ok(Protocol::Ll),
            "ll128" => Ok(Protocol::Ll128),
            "simple" => Ok(Protocol::Simple),
            _ => Err(CollectiveError::Unknown {
                what: "protocol",
                name: s.to_string(),
                known: "LL, LL128, Simple",
            }),
        }
    }
}
