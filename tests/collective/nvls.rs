//! NVLS-tree (NVLS inside each node, a tree over the NICs across nodes):
//! bytes moved against the closed form, the time against the NVLink and NIC
//! bounds, `auto` using it only where the NVSwitches reduce, and its parts
//! timed once on the quotient by the node rotation against the whole plan.

use std::collections::BTreeSet;

use shardsim::collective::{
    build, nvls_tree_on_quotient, run_collective, time_collective, Algorithm, Calibration,
    CollectiveOp, Group, PlanOptions, Protocol, Via,
};
use shardsim::topology::Topology;

use super::load;

/// Per rank: bytes up to its switch, down from it, and sent over P2p
/// between nodes; with the number of P2p moves inside a node.
struct Loads {
    up: Vec<u64>,
    down: Vec<u64>,
    net_sent: Vec<u64>,
    net_recv: Vec<u64>,
    local_p2p: usize,
}

fn loads(nodes: &[Vec<usize>], total: u64, chunks: usize) -> Loads {
    let n: usize = nodes.iter().map(Vec::len).sum();
    let node_of = |r: usize| nodes.iter().position(|g| g.contains(&r)).unwrap();
    let opts = PlanOptions {
        chunks,
        channel_chunks: 0,
        nvls_chunks: 0,
        tree_chunks: 0,
        nodes: nodes.to_vec(),
        lanes: 1,
        tree_channel_cap: 0,
        collnet_chunks: 0,
    };
    let plan = build(
        &CollectiveOp::AllReduce,
        Algorithm::NvlsTree,
        n,
        total,
        &opts,
    )
    .unwrap();
    let mut l = Loads {
        up: vec![0; n],
        down: vec![0; n],
        net_sent: vec![0; n],
        net_recv: vec![0; n],
        local_p2p: 0,
    };
    for step in &plan.steps {
        // The switch sends a reduction down once per receiver and range, and
        // takes a multicast up once per sender and range.
        let mut reduced = BTreeSet::new();
        let mut multicast = BTreeSet::new();
        for m in step {
            match m.via {
                Via::SwitchReduce => {
                    l.up[m.from] += m.len;
                    if reduced.insert((m.to, m.dst, m.len)) {
                        l.down[m.to] += m.len;
                    }
                }
                Via::SwitchMulticast => {
                    l.down[m.to] += m.len;
                    if multicast.insert((m.from, m.src, m.len)) {
                        l.up[m.from] += m.len;
                    }
                }
                Via::InNetwork | Via::NetworkReduce | Via::NetworkMulticast => {
                    unreachable!("NVLS-tree moves no data through the network's switches")
                }
                Via::P2p => {
                    if node_of(m.from) == node_of(m.to) {
                        l.local_p2p += 1;
                    } else {
                        l.net_sent[m.from] += m.len;
                        l.net_recv[m.to] += m.len;
                    }
                }
            }
        }
    }
    l
}

fn by_node(n_nodes: usize, m: usize) -> Vec<Vec<usize>> {
    (0..n_nodes)
        .map(|k| (k * m..(k + 1) * m).collect())
        .collect()
}

#[test]
fn nvls_tree_sends_each_byte_to_the_switch_once_and_back_once() {
    // S elements over N nodes of m: every rank's up link carries S (its
    // contribution) + S/m (the multicast of its part), its down link S/m
    // (the reduced part) + S (everyone's parts); the tree over the nodes
    // moves each part once up and once down every edge: 2 (N - 1) S over
    // the network in all, nothing point-to-point inside a node.
    for (n_nodes, m) in [(2usize, 8usize), (3, 4), (4, 8), (5, 2)] {
        let total = (m * 960) as u64;
        for chunks in [1usize, 4, 7] {
            let l = loads(&by_node(n_nodes, m), total, chunks);
            let part = total / m as u64;
            for r in 0..n_nodes * m {
                assert_eq!(l.up[r], total + part, "{n_nodes}x{m} rank {r} up");
                assert_eq!(l.down[r], part + total, "{n_nodes}x{m} rank {r} down");
            }
            assert_eq!(l.local_p2p, 0);
            let net: u64 = l.net_sent.iter().sum();
            assert_eq!(net, 2 * (n_nodes as u64 - 1) * total, "{n_nodes}x{m}");
            // Two nodes: one edge per part, each owner sends its part once.
            if n_nodes == 2 {
                assert!(l.net_sent.iter().all(|&b| b == part), "{:?}", l.net_sent);
            }
        }
    }
}

#[test]
fn nvls_tree_nics_carry_at_most_twice_their_part_as_nccls_double_tree() {
    // NCCL's NVLS channels alternate the two trees of its double binary tree
    // (connect.cc: `channel->nvls.treeUp = treeUp[c%2]`), so half of every
    // chunk takes each; a node is an inner node of at most one of them, so
    // its NIC sends (and receives) at most part/2 x (1 + 2) in one tree and
    // part/2 in the other: 2 x part. With one tree per part an inner node's
    // NIC would carry 3 x part (the 128-node NVLS-tree's bottleneck).
    for (n_nodes, m) in [(3usize, 4usize), (4, 8), (7, 2), (8, 4), (16, 2)] {
        // Even chunks, so a chunk's two halves are equal.
        let total = (m * 1024) as u64;
        let part = total / m as u64;
        for chunks in [1usize, 4, 8] {
            let l = loads(&by_node(n_nodes, m), total, chunks);
            for r in 0..n_nodes * m {
                assert!(
                    l.net_sent[r] <= 2 * part && l.net_recv[r] <= 2 * part,
                    "{n_nodes}x{m}, {chunks} chunks, rank {r}: sent {} received {} of part {part}",
                    l.net_sent[r],
                    l.net_recv[r]
                );
            }
            // From 7 nodes some NIC carries exactly 2 x part (node 1: an
            // inner node of the first tree with two children, a leaf of the
            // second).
            if n_nodes >= 7 {
                assert_eq!(l.net_sent.iter().max(), Some(&(2 * part)), "{n_nodes}x{m}");
            }
        }
    }
}

#[test]
fn nvls_tree_chunks_follow_nccls_chunk_size() {
    // NCCL 2.21-2.23 `computeCollChunkInfo` for NVLS_TREE, worked by hand:
    // 16 channels x 8 heads = 128 concurrent chunks; start at NVLS_CHUNKSIZE
    // (128 KiB), at most 64 KiB from 4 nodes; 64 KiB below 4 x 128 x 128 KiB
    // = 64 MiB, 32 KiB below 1 x 128 x 64 KiB = 8 MiB. A part's pipeline
    // chunk here is 16 of NCCL's (one per channel).
    use shardsim::collective::nvls::{nccl_chunk_bytes, pipeline_chunks};
    let kib = 1024u64;
    let mib = 1024 * kib;
    for (bytes, nodes, heads, chunk) in [
        (mib, 2usize, 8u64, 32 * kib),
        (8 * mib - 1, 2, 8, 32 * kib),
        (8 * mib, 2, 8, 64 * kib),
        (64 * mib - 1, 2, 8, 64 * kib),
        (64 * mib, 2, 8, 128 * kib),
        (16 << 30, 2, 8, 128 * kib),
        (8 * mib, 4, 8, 64 * kib),
        (8 * mib - 1, 4, 8, 32 * kib),
        (8 << 30, 128, 8, 64 * kib),
        // 4 heads: 64 concurrent chunks, thresholds halve.
        (32 * mib, 2, 4, 128 * kib),
        (4 * mib, 2, 4, 64 * kib),
    ] {
        assert_eq!(
            nccl_chunk_bytes(bytes, nodes, heads),
            chunk,
            "{bytes} B, {nodes} nodes"
        );
    }
    // 64 MiB over 2 x 8: 8 MiB a part, 2 MiB a wave of 16 channels: 4.
    assert_eq!(pipeline_chunks(64 * mib, 2, 8, 64), 4);
    assert_eq!(pipeline_chunks(1 << 30, 2, 8, 64), 64);
    // 16 GiB would be 1,024 (128 KiB chunks): the simulation's budget.
    assert_eq!(pipeline_chunks(16 << 30, 2, 8, 64), 64);
    assert_eq!(pipeline_chunks(8, 2, 8, 64), 1);
}

#[test]
fn nvls_tree_approaches_the_nvlink_and_nic_bounds() {
    // Two DGX H100 (8 x 400 Gb/s): per rank the NVLink up link carries
    // S (1 + 1/m) at the NVLS fraction of 450 GB/s, each NIC S/m per
    // direction at the network fraction of 50 (or 25) GB/s. algbw is at
    // most the smaller of the two; 8 GiB gets within 15% of it (pipeline
    // fill and latencies): 263.6 of 284.0 GB/s at 400 Gb/s (NVLink-bound),
    // 179.9 of 188.0 at 200 Gb/s (NIC-bound).
    for nic in ["400Gb/s", "200Gb/s"] {
        let t = load("dgx-h100", &[("nodes", "2"), ("nic.bandwidth", nic)]);
        let g = Group::first(&t, 16).unwrap();
        let cal = Calibration::for_model(&g.device_model(&t)).unwrap();
        let s: u64 = 8 << 30;
        let r = time_collective(
            &t,
            &g,
            &CollectiveOp::AllReduce,
            s / 4,
            4,
            &cal,
            Some(Algorithm::NvlsTree),
            None,
        )
        .unwrap();
        assert_eq!(r.proto, Protocol::Simple);
        let m = 8.0;
        let nic_bps = if nic == "400Gb/s" { 50e9 } else { 25e9 };
        let nvlink = 450e9 * cal.nvls.nvlink_fraction / (1.0 + 1.0 / m);
        let network = m * nic_bps * cal.nvls.network_fraction;
        let bound = nvlink.min(network);
        let algbw = s as f64 / (r.time.ps() as f64 * 1e-12);
        assert!(
            algbw <= bound * (1.0 + 1e-9) && algbw > 0.85 * bound,
            "{nic}: algbw {:.1} GB/s, bound {:.1}",
            algbw / 1e9,
            bound / 1e9
        );
    }
}

#[test]
fn nvls_tree_needs_reducing_switches_and_several_nodes() {
    let op = CollectiveOp::AllReduce;
    let a100 = load("dgx-a100", &[("nodes", "2")]);
    let g = Group::first(&a100, 16).unwrap();
    let cal = Calibration::for_model(&g.device_model(&a100)).unwrap();
    // NVLS-tree forced on the first `ranks` of `t`: the error it gives.
    let forced_error = |t: &Topology, ranks: u32| {
        let g = Group::first(t, ranks).unwrap();
        let forced = Some(Algorithm::NvlsTree);
        time_collective(t, &g, &op, 1 << 28, 4, &cal, forced, None)
            .unwrap_err()
            .to_string()
    };
    // A100's NVSwitch does not reduce: asked for, a clear error; auto never picks it.
    let e = forced_error(&a100, 16);
    assert!(e.contains("in-switch reduction"), "{e}");
    for s in [1u64 << 20, 1 << 30] {
        let r = time_collective(&a100, &g, &op, s / 4, 4, &cal, None, None).unwrap();
        assert_ne!(r.algo, Algorithm::NvlsTree);
    }
    // One node: NVLS itself, NVLS-tree does not apply.
    let e = forced_error(&load("dgx-h100", &[]), 8);
    assert!(e.contains("at least 2 nodes"), "{e}");
    // The switch attribute decides: the same two H100 nodes without in-switch
    // reduction never run it.
    let off = load(
        "dgx-h100",
        &[("nodes", "2"), ("nvlink.in_switch_reduction", "false")],
    );
    let e = forced_error(&off, 16);
    assert!(e.contains("in-switch reduction"), "{e}");
}

#[test]
fn auto_takes_nvls_tree_where_it_is_fastest() {
    // Two DGX H100 with 400 Gb/s NICs at 8 GiB: NVLS-tree (NVLink-bound,
    // about 490 GB/s busbw) beats the tree (about 390) and the NIC-bound
    // ring; auto's choice is timed exactly as the forced run.
    let t = load("dgx-h100", &[("nodes", "2")]);
    let g = Group::first(&t, 16).unwrap();
    let cal = Calibration::for_model(&g.device_model(&t)).unwrap();
    let op = CollectiveOp::AllReduce;
    let total = (8u64 << 30) / 4;
    let auto = time_collective(&t, &g, &op, total, 4, &cal, None, None).unwrap();
    assert_eq!(auto.algo, Algorithm::NvlsTree);
    let forced =
        time_collective(&t, &g, &op, total, 4, &cal, Some(Algorithm::NvlsTree), None).unwrap();
    assert_eq!(auto.time, forced.time);
    for other in [Algorithm::Tree, Algorithm::Ring] {
        let o = time_collective(&t, &g, &op, total, 4, &cal, Some(other), None).unwrap();
        assert!(auto.time < o.time, "{other}: {} vs {}", o.time, auto.time);
    }
}

/// NVLS-tree's part 0 timed on the quotient by the node rotation
/// (`time_collective`) against the whole plan on the whole network
/// (`run_collective`): the same time to the picosecond and the same flow
/// count, where the fast path applies (checked) and where it does not
/// (a message that does not split evenly over the parts).
#[test]
fn nvls_tree_parts_on_the_quotient_equal_the_whole_run() {
    // (nodes, overrides, bytes, fast path expected)
    type Case<'a> = (u32, &'a [(&'a str, &'a str)], u64, bool);
    let mib = 1u64 << 20;
    let cases: &[Case] = &[
        (2, &[], 64 * mib, true),
        (2, &[], 256 * mib, true),
        (2, &[], 4096, true),
        (2, &[], 64 * mib + 4, false),
        (2, &[("nic.bandwidth", "200Gb/s")], 16 * mib, true),
        (3, &[], 8 * mib, true),
        (5, &[], 32 * mib, true),
        (5, &[], 32 * mib + 12, false),
        // Two leaves per rail under 8 spines (as dgx-h100 from 64 nodes).
        (9, &[("network.switch_radix", "16")], 16 * mib, true),
        // Three levels (3 pods of 8 nodes): each pod's spine layer has one
        // link to the cores, shared by every part (the quotient's shared
        // links), or, routed statically, every rail through the same spine.
        (24, &[("network.switch_radix", "16")], 16 * mib, true),
        (
            24,
            &[
                ("network.switch_radix", "16"),
                ("network.routing", "destination"),
            ],
            16 * mib,
            true,
        ),
    ];
    let op = CollectiveOp::AllReduce;
    let algo = Some(Algorithm::NvlsTree);
    for &(nodes, set, bytes, fast) in cases {
        let n = nodes.to_string();
        let mut over = vec![("nodes", n.as_str())];
        over.extend_from_slice(set);
        let t = load("dgx-h100", &over);
        let g = Group::first(&t, t.num_devices()).unwrap();
        let cal = Calibration::for_model(&g.device_model(&t)).unwrap();
        let total = bytes / 4;
        let what = format!("dgx-h100 x{nodes} {set:?} {bytes} B");
        assert_eq!(
            nvls_tree_on_quotient(&t, &g, total, 4, &cal).unwrap(),
            fast,
            "{what}: fast path expected {fast}"
        );
        let quick = time_collective(&t, &g, &op, total, 4, &cal, algo, None).unwrap();
        let full = run_collective(&t, &g, &op, total, 4, &cal, algo, None).unwrap();
        assert_eq!((quick.time, quick.flows), (full.time, full.flows), "{what}");
    }
}
