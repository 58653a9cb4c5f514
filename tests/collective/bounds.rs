//! On ideal links (a switch of 450 GB/s per direction, 0.3 us per link, no
//! protocol latency, full bandwidth) every algorithm's time is at least the
//! alpha-beta lower bound of its collective, and the ring allreduce of a large
//! message is within 1% of 2(n-1)/n S/B + 2(n-1) alpha.

use shardsim::collective::{
    algorithms_for, build, simulate, Algorithm, Calibration, CollectiveOp, Group, PlanOptions,
    Protocol,
};
use shardsim::topology::{self, Topology};

const B: f64 = 450e9;
/// GPU -> switch -> GPU.
const ALPHA_US: f64 = 0.6;

fn ideal(n: usize) -> (Topology, Group) {
    let t = topology::load(&format!("switch:{n}"), &[]).unwrap();
    let g = Group::first(&t, n as u32).unwrap();
    (t, g)
}

/// Plan options of `chunks` pipeline chunks on `g`'s nodes, one NIC lane,
/// no per-channel chunking or channel cap.
fn chunked(t: &Topology, g: &Group, chunks: usize) -> PlanOptions {
    PlanOptions {
        chunks,
        nodes: g.nodes(t),
        lanes: 1,
        tree_channel_cap: 0,
        collnet_chunks: 0,
        channel_chunks: 0,
        nvls_chunks: 0,
        tree_chunks: 0,
    }
}

fn time_us(t: &Topology, g: &Group, op: &CollectiveOp, algo: Algorithm, bytes: u64) -> Option<f64> {
    let opts = chunked(t, g, 4);
    let plan = build(op, algo, g.len(), bytes / 4, &opts).ok()?;
    let r = simulate(
        t,
        g,
        &plan,
        4,
        algo,
        Protocol::Simple,
        &Calibration::ideal(),
    )
    .ok()?;
    Some(r.time.ps() as f64 / 1e6)
}

/// Bytes every rank (or the root) must send or receive, over B.
fn bandwidth_bound_us(op: &CollectiveOp, n: usize, s: f64) -> f64 {
    let n_f = n as f64;
    let bytes = match op {
        CollectiveOp::AllReduce => 2.0 * (n_f - 1.0) / n_f * s,
        CollectiveOp::AllGather
        | CollectiveOp::ReduceScatter
        | CollectiveOp::AllToAll
        | CollectiveOp::Scatter { .. }
        | CollectiveOp::Gather { .. } => (n_f - 1.0) / n_f * s,
        CollectiveOp::Broadcast { .. }
        | CollectiveOp::Reduce { .. }
        | CollectiveOp::Permute { .. } => s,
    };
    bytes / B * 1e6
}

#[test]
fn every_algorithm_respects_the_alpha_beta_lower_bound() {
    let mut checked = 0;
    for n in [2usize, 3, 5, 8, 16] {
        let (t, g) = ideal(n);
        for s in [4096u64, 1 << 20, 64 << 20] {
            let ops = [
                CollectiveOp::AllReduce,
                CollectiveOp::AllGather,
                CollectiveOp::ReduceScatter,
                CollectiveOp::Broadcast { root: 0 },
                CollectiveOp::Reduce { root: 1 % n },
                CollectiveOp::Scatter { root: 0 },
                CollectiveOp::Gather { root: 0 },
                CollectiveOp::AllToAll,
                CollectiveOp::Permute {
                    pairs: (0..n).map(|r| (r, (r + 1) % n)).collect(),
                },
            ];
            for op in &ops {
                for &algo in algorithms_for(op) {
                    let Some(got) = time_us(&t, &g, op, algo, s) else {
                        continue;
                    };
                    // NVLS reduces in the switch: each rank still sends its S bytes up.
                    let bw = if algo == Algorithm::Nvls {
                        s as f64 / B * 1e6
                    } else {
                        bandwidth_bound_us(op, n, s as f64)
                    };
                    let bound = bw.max(ALPHA_US);
                    assert!(
                        got >= bound * (1.0 - 1e-9),
                        "{} {algo} n={n} S={s}: {got} us < bound {bound} us",
                        op.name()
                    );
                    checked += 1;
                }
            }
        }
    }
    assert!(checked > 300, "{checked}");
}

#[test]
fn ring_allreduce_matches_the_closed_form_within_one_percent() {
    for n in [2usize, 4, 7, 8, 16] {
        let (t, g) = ideal(n);
        for s in [256u64 << 20, 1 << 30] {
            let got = time_us(&t, &g, &CollectiveOp::AllReduce, Algorithm::Ring, s).unwrap();
            let nf = n as f64;
            let want = 2.0 * (nf - 1.0) / nf * s as f64 / B * 1e6 + 2.0 * (nf - 1.0) * ALPHA_US;
            let err = (got - want).abs() / want;
            assert!(
                err < 0.01,
                "n={n} S={s}: {got} us vs closed form {want} us ({err:.4})"
            );
        }
    }
}

/// `algo`'s allreduce of 16 chunks over every device of `t`, timed on
/// ideal links with a hop of 0 and of `hop` us (set by `set_hop`), in us.
fn with_and_without_hop(
    t: &Topology,
    algo: Algorithm,
    bytes: u64,
    hop: f64,
    set_hop: fn(&mut Calibration, f64),
) -> (f64, f64) {
    let g = Group::first(t, t.num_devices()).unwrap();
    let opts = chunked(t, &g, 16);
    let plan = build(&CollectiveOp::AllReduce, algo, g.len(), bytes / 4, &opts).unwrap();
    let time = |hop_us: f64| {
        let mut cal = Calibration::ideal();
        set_hop(&mut cal, hop_us);
        let r = simulate(t, &g, &plan, 4, algo, Protocol::Simple, &cal).unwrap();
        r.time.ps() as f64 / 1e6
    };
    (time(0.0), time(hop))
}

/// A tree's ranks send over connections of their own, one per tree and
/// direction (NCCL's channels, its split tree's reduce and broadcast thread
/// groups), so a chunk's per-hop latency is paid once per level along its
/// path, not by every rank for every chunk: with a hop `H` far above the
/// transfers, a tree of height `h` (4 ranks without nodes: two mirrored
/// heaps of height 2) in 16 chunks takes `2 h H` plus about its hop-free
/// time, where ranks stepping together (each chunk's hop paid in turn)
/// would take `(16 + 2 h - 1) H`. The `2 h` hops also need a parent's
/// reduces from both its children behind its send, not the last one alone.
#[test]
fn a_tree_pays_each_level_s_hop_once_along_a_chunk_s_path() {
    let (t, _) = ideal(4);
    let (hop, height) = (1000.0, 2.0);
    let (free, with) = with_and_without_hop(&t, Algorithm::Tree, 16 << 20, hop, |c, h| {
        c.simple.nvlink_hop_us = h
    });
    assert!(
        with >= 2.0 * height * hop && with <= 2.0 * height * hop + 2.0 * free,
        "{with:.1} us with a {hop} us hop, {free:.1} us without"
    );
}

/// NVLS's loads into the switch's reduction and its multicast stores run
/// over connections of their own (NCCL's NVLS warp groups), each chunk's
/// hop paid along its path: with an NVLink hop `H` far above the transfers,
/// one DGX H100's NVLS allreduce in 16 chunks takes `2 H` (the reduce leg's,
/// then the multicast's) plus about its hop-free time, where steps taken
/// together would pay `(16 + 1) H`.
#[test]
fn nvls_pays_each_leg_s_hop_once_along_a_chunk_s_path() {
    let t = topology::load("dgx-h100", &[]).unwrap();
    let hop = 1000.0;
    let (free, with) = with_and_without_hop(&t, Algorithm::Nvls, 64 << 20, hop, |c, h| {
        c.nvls.nvlink_hop_us = h
    });
    assert!(
        with >= 2.0 * hop && with <= 2.0 * hop + 2.0 * free,
        "{with:.1} us with a {hop} us hop, {free:.1} us without"
    );
}
