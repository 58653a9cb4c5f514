//! Several NICs per GPU (`[nic] count`, `PlanOptions::lanes`) and NICs shared
//! by GPUs: the shortcuts (rings timed on one unit, tree channels on the
//! quotient by the node rotation) against the whole plan on the whole
//! network, to the picosecond, and how trees and NVLS-tree spread over a
//! GPU's NICs against NCCL's channel-to-NIC choice (NVIDIA/nccl, `src/graph/
//! search.cc`: `ncclTopoSearchRecNet` cycles channels over the NICs,
//! `nets[(nChannels + i) % netCount]`, at v2.19.3 and on master 5067397c;
//! NVLS heads take one NIC each, `getNvlsNetDev`).

use shardsim::collective::{
    build, ring_on_units, run_collective, time_collective, tree_on_quotient, tuner::plan_options,
    Algorithm, Calibration, CollectiveOp, Group, Protocol,
};

use super::load;

/// OCI BM.GPU4.8 (16 x 100 Gb/s, two NICs per GPU) and a NIC per GPU pair
/// (4 x 400 Gb/s), on 2 and 3 nodes.
fn layouts() -> Vec<(String, shardsim::topology::Topology)> {
    let mut out = Vec::new();
    for nodes in ["2", "3"] {
        for (count, bw) in [("16", "100Gb/s"), ("4", "400Gb/s")] {
            let t = load(
                "dgx-a100",
                &[
                    ("nodes", nodes),
                    ("nic.count", count),
                    ("nic.bandwidth", bw),
                ],
            );
            out.push((format!("dgx-a100 x{nodes}, {count} NICs"), t));
        }
    }
    out
}

/// Rail rings over two NICs per GPU (two copies of every ring, one per NIC)
/// and over shared NICs, timed without their plan where they can be, equal
/// the whole plan's run: allreduce, all-gather and reduce-scatter, every
/// protocol, a size that splits into equal moves and one that does not (the
/// plan). On 2 and 3 nodes the ring's wrap from the last node to the first
/// changes rail, so its units fall into two classes and the plan is timed
/// (the one-step form gives the estimate); on 8 nodes of 8 the wrap keeps
/// the rail and one unit is timed (checked to apply), the lanes' copies
/// included.
#[test]
fn multi_nic_rings_on_one_unit_equal_the_whole_plan() {
    let mut all = layouts();
    for (count, bw) in [("16", "100Gb/s"), ("4", "400Gb/s")] {
        let t = load(
            "dgx-a100",
            &[("nodes", "8"), ("nic.count", count), ("nic.bandwidth", bw)],
        );
        all.push((format!("dgx-a100 x8, {count} NICs"), t));
    }
    for (label, t) in all {
        let g = Group::first(&t, t.num_devices()).unwrap();
        let cal = Calibration::for_model(&g.device_model(&t)).unwrap();
        let n = g.len() as u64;
        let eight = label.starts_with("dgx-a100 x8");
        let ops: &[CollectiveOp] = if eight {
            &[CollectiveOp::AllReduce]
        } else {
            &[
                CollectiveOp::AllReduce,
                CollectiveOp::AllGather,
                CollectiveOp::ReduceScatter,
            ]
        };
        let protos: &[Protocol] = if eight {
            &[Protocol::Simple, Protocol::Ll128]
        } else {
            &Protocol::ALL
        };
        for op in ops {
            let sizes: &[(u64, bool)] = if eight {
                &[(n * 16 * 1024, true)]
            } else {
                &[(n * 16 * 1024, false), (n * 16 * 1024 + 3, false)]
            };
            for &(elems, fast) in sizes {
                assert_eq!(
                    ring_on_units(&t, &g, op, elems, 4, &cal).unwrap(),
                    fast,
                    "{label} {op:?} of {elems}: one unit expected {fast}"
                );
                for &proto in protos {
                    let algo = Some(Algorithm::Ring);
                    let quick =
                        time_collective(&t, &g, op, elems, 4, &cal, algo, Some(proto)).unwrap();
                    let full =
                        run_collective(&t, &g, op, elems, 4, &cal, algo, Some(proto)).unwrap();
                    assert_eq!(
                        (quick.time, quick.flows),
                        (full.time, full.flows),
                        "{label} {op:?} of {elems} {proto:?}"
                    );
                }
            }
        }
    }
}

/// Tree channels over two NICs per GPU (tree A on a GPU's first NIC, B on
/// its second, the same in every channel) are images of channel 0 under the
/// node rotation, so they are timed on the quotient, equal to the whole run;
/// a NIC shared by a GPU pair breaks the rotation (GPUs 0 and 1 share a NIC,
/// 1 and 2 do not), so the plan is timed there.
#[test]
fn multi_nic_tree_channels_on_the_quotient_equal_the_whole_run() {
    for (label, t) in layouts() {
        let g = Group::first(&t, t.num_devices()).unwrap();
        let cal = Calibration::for_model(&g.device_model(&t)).unwrap();
        let op = CollectiveOp::AllReduce;
        let shared = label.ends_with(" 4 NICs");
        for (bytes, even) in [(4u64 << 20, true), (16 << 20, true), ((5 << 20) + 8, false)] {
            let total = bytes / 4;
            let fast = even && !shared;
            assert_eq!(
                tree_on_quotient(&t, &g, total, 4, &cal).unwrap(),
                fast,
                "{label} {bytes} B: quotient expected {fast}"
            );
            for proto in Protocol::ALL {
                let algo = Some(Algorithm::Tree);
                let quick =
                    time_collective(&t, &g, &op, total, 4, &cal, algo, Some(proto)).unwrap();
                let full = run_collective(&t, &g, &op, total, 4, &cal, algo, Some(proto)).unwrap();
                assert_eq!(
                    (quick.time, quick.flows),
                    (full.time, full.flows),
                    "{label} {bytes} B {proto:?}"
                );
            }
        }
    }
}

/// Bytes crossing nodes per NIC lane in a tree allreduce's plan.
fn network_bytes_per_lane(t: &shardsim::topology::Topology, bytes: u64) -> Vec<u64> {
    let g = Group::first(t, t.num_devices()).unwrap();
    let cal = Calibration::for_model(&g.device_model(t)).unwrap();
    let opts = plan_options(t, &g, &cal, bytes);
    let m = opts.nodes[0].len();
    let plan = build(
        &CollectiveOp::AllReduce,
        Algorithm::Tree,
        g.len(),
        bytes / 4,
        &opts,
    )
    .unwrap();
    let mut per = vec![0u64; opts.lanes];
    for mv in plan.steps.iter().flatten() {
        if mv.from / m != mv.to / m {
            per[mv.lane as usize] += mv.len;
        }
    }
    per
}

/// Trees over 4 and 3 NICs per GPU: NCCL's search gives each NIC its own
/// channels (both trees of a channel on its NIC), so every NIC carries the
/// same share; ours splits a channel over sub-channels whose trees take
/// every NIC once each (`algorithms::tree_subs`): the bytes crossing nodes
/// are equal on every lane (they were on lanes 0 and 1 only). With 4 x 50
/// Gb/s per GPU the tree then times at least as fast as over 8 x 200 Gb/s
/// (the same rate per GPU; 1 GiB: 233.1 against 217.8 GB/s busbw, its trees
/// twice as many, each under the per-channel tree rate, as NCCL's channels
/// are; 148.7 when two of the four NICs carried it), under the NICs' bound.
#[test]
fn trees_spread_over_every_nic_of_a_gpu() {
    for (count, lanes) in [("32", 4usize), ("24", 3)] {
        let t = load("dgx-a100", &[("nodes", "2"), ("nic.count", count)]);
        // 48 MiB: every sub-channel's part the same length.
        let per = network_bytes_per_lane(&t, 48 << 20);
        assert_eq!(per.len(), lanes, "{count} NICs");
        assert!(
            per[0] > 0 && per.iter().all(|&b| b == per[0]),
            "{count} NICs: network elements per lane {per:?}"
        );
    }
    let op = CollectiveOp::AllReduce;
    let s: u64 = 1 << 30;
    let busbw = |t: &shardsim::topology::Topology| {
        let g = Group::first(t, 16).unwrap();
        let cal = Calibration::for_model(&g.device_model(t)).unwrap();
        let simple = Some(Protocol::Simple);
        let r = time_collective(t, &g, &op, s / 4, 4, &cal, Some(Algorithm::Tree), simple).unwrap();
        (
            s as f64 / (r.time.ps() as f64 * 1e-12) * op.busbw_factor(16),
            cal.simple.network_fraction,
        )
    };
    let four = load(
        "dgx-a100",
        &[
            ("nodes", "2"),
            ("nic.count", "32"),
            ("nic.bandwidth", "50Gb/s"),
        ],
    );
    let (tree4, fraction) = busbw(&four);
    let (tree1, _) = busbw(&load("dgx-a100", &[("nodes", "2")]));
    let bound = 32.0 * 6.25e9 * fraction * op.busbw_factor(16);
    assert!(
        tree4 <= bound && tree4 >= 0.98 * tree1,
        "tree busbw {:.1} GB/s over 4 NICs per GPU, {:.1} over one, bound {:.1}",
        tree4 / 1e9,
        tree1 / 1e9,
        bound / 1e9
    );
}

/// NVLS-tree: NCCL's NVLS search takes one NIC per head GPU (master
/// 5067397c, `search.cc` `ncclTopoSearchRecNet`: "check whether there is
/// duplicate head when one GPU connects with multiple NICs"; at v2.19.3
/// `getNvlsNetDev` returns the NIC of the head's first channel), so a
/// GPU's second NIC carries none of its network legs: two DGX H100 with 16
/// x 200 Gb/s time NVLS-tree as with 8 x 200 Gb/s (to the picosecond), not
/// as with 8 x 400 Gb/s.
#[test]
fn nvls_tree_takes_one_nic_per_head_as_nccl() {
    let op = CollectiveOp::AllReduce;
    let time = |set: &[(&str, &str)]| {
        let t = load("dgx-h100", set);
        let g = Group::first(&t, 16).unwrap();
        let cal = Calibration::for_model(&g.device_model(&t)).unwrap();
        let algo = Some(Algorithm::NvlsTree);
        time_collective(&t, &g, &op, (1 << 30) / 4, 4, &cal, algo, None)
            .unwrap()
            .time
    };
    let sixteen = time(&[
        ("nodes", "2"),
        ("nic.count", "16"),
        ("nic.bandwidth", "200Gb/s"),
    ]);
    let eight = time(&[("nodes", "2"), ("nic.bandwidth", "200Gb/s")]);
    let wide = time(&[("nodes", "2"), ("nic.bandwidth", "400Gb/s")]);
    assert_eq!(sixteen, eight);
    assert!(wide < eight, "{wide:?} against {eight:?}");
}

/// A ring over two NICs per GPU is estimated as one step's cost repeated,
/// its hops along the data's path (`Hops::Ring`), as over one NIC per GPU:
/// on OCI BM.GPU4.8 (16 x 100 Gb/s) and as 8 x 200 Gb/s the two rings time
/// alike (64 MiB-8 GiB within 0.05%, README), so their estimates must err
/// alike at every size from 1 MiB to 8 GiB (within 1% of each other's
/// ratio). The plan's estimate (a size one element past an even split: the
/// plan is built) paid a network hop at every step, 26.25 x (14.0 - 6.66)
/// us more on Simple. Prints estimate against time per size (`--nocapture`).
#[test]
fn multi_nic_ring_estimate_errs_as_over_one_nic_per_gpu() {
    let op = CollectiveOp::AllReduce;
    let sixteen = load(
        "dgx-a100",
        &[
            ("nodes", "2"),
            ("nic.count", "16"),
            ("nic.bandwidth", "100Gb/s"),
        ],
    );
    let eight = load("dgx-a100", &[("nodes", "2")]);
    let ring = Some(Algorithm::Ring);
    let simple = Some(Protocol::Simple);
    let row = |t: &shardsim::topology::Topology, total: u64| {
        let g = Group::first(t, 16).unwrap();
        let cal = Calibration::for_model(&g.device_model(t)).unwrap();
        let est = shardsim::collective::choose(t, &g, &op, total, 4, &cal, ring, simple)
            .unwrap()
            .0
            .estimate_ps;
        let plan_est = shardsim::collective::choose(t, &g, &op, total + 1, 4, &cal, ring, simple)
            .unwrap()
            .0
            .estimate_ps;
        let time = time_collective(t, &g, &op, total, 4, &cal, ring, simple)
            .unwrap()
            .time
            .ps() as f64;
        (est, plan_est, time)
    };
    println!("size, 16 NICs: estimate / plan's estimate / time (us), 8 NICs: estimate / time");
    let mut bytes: u64 = 1 << 20;
    while bytes <= 8 << 30 {
        let (e16, p16, t16) = row(&sixteen, bytes / 4);
        let (e8, _, t8) = row(&eight, bytes / 4);
        println!(
            "{bytes:>11} {:>10.1} {:>10.1} {:>10.1} ({:+.1}%, plan's {:+.1}%)  {:>10.1} {:>10.1} ({:+.1}%)",
            e16 / 1e6,
            p16 / 1e6,
            t16 / 1e6,
            (e16 / t16 - 1.0) * 100.0,
            (p16 / t16 - 1.0) * 100.0,
            e8 / 1e6,
            t8 / 1e6,
            (e8 / t8 - 1.0) * 100.0
        );
        assert!(
            (e16 / t16 - e8 / t8).abs() < 0.01,
            "{bytes} B: estimate/time {:.4} over 16 NICs, {:.4} over 8",
            e16 / t16,
            e8 / t8
        );
        bytes *= 2;
    }
}
