//! Tree channels timed once on the quotient by the node rotation
//! (`collective::channels`) against the whole plan on the whole network
//! (`run_collective`): same time to the picosecond, same flow count, on
//! DGX H100 and A100 clusters of 2-8 nodes, every protocol, sizes whose chunks
//! split evenly over the channels (the fast path, checked to apply) and sizes
//! that do not (the plan itself).

use shardsim::collective::{
    run_collective, time_collective, tree_on_quotient, Algorithm, Calibration, CollectiveOp, Group,
    Protocol,
};
use shardsim::topology;

fn check(preset: &str, nodes: u32, sizes: &[(u64, bool)]) {
    check_with(preset, nodes, &[], sizes)
}

fn check_with(preset: &str, nodes: u32, set: &[(&str, &str)], sizes: &[(u64, bool)]) {
    let mut over = vec![topology::Override {
        key: "nodes".into(),
        value: nodes.to_string(),
    }];
    over.extend(set.iter().map(|&(k, v)| topology::Override {
        key: k.into(),
        value: v.into(),
    }));
    let t = topology::load(preset, &over).unwrap();
    let g = Group::first(&t, t.num_devices()).unwrap();
    let cal = Calibration::for_model(&g.device_model(&t)).unwrap();
    let op = CollectiveOp::AllReduce;
    for &(bytes, fast) in sizes {
        let total = bytes / 4;
        assert_eq!(
            tree_on_quotient(&t, &g, total, 4, &cal).unwrap(),
            fast,
            "{preset} x{nodes} {bytes} B: fast path expected {fast}"
        );
        for proto in Protocol::ALL {
            let quick = time_collective(
                &t,
                &g,
                &op,
                total,
                4,
                &cal,
                Some(Algorithm::Tree),
                Some(proto),
            )
            .unwrap();
            let full = run_collective(
                &t,
                &g,
                &op,
                total,
                4,
                &cal,
                Some(Algorithm::Tree),
                Some(proto),
            )
            .unwrap();
            assert_eq!(
                (quick.time, quick.flows),
                (full.time, full.flows),
                "{preset} x{nodes} {bytes} B {proto:?}"
            );
        }
    }
}

#[test]
fn tree_channels_on_the_quotient_equal_the_whole_run() {
    // 4 MiB: 8 chunks, one per channel; 16 MiB: 4 per channel; 5 MiB + 8 B:
    // uneven channel parts (plan); 256 KiB: one chunk, one channel (plan).
    let sizes = [
        (4 << 20, true),
        (16 << 20, true),
        ((5 << 20) + 8, false),
        (256 << 10, false),
    ];
    check("dgx-h100", 2, &sizes);
    check("dgx-h100", 3, &sizes[..2]);
    check("dgx-a100", 4, &sizes[..2]);
    // Two leaves per rail under 8 spines (as dgx-h100 from 64 nodes on):
    // ECMP treats rails alike, so the fast path still applies.
    check_with(
        "dgx-h100",
        9,
        &[("network.switch_radix", "16")],
        &sizes[..2],
    );
    // Three levels (3 pods of 8 nodes): a pod's spine layer has one link
    // to the cores, which every rail's copy crosses (a shared link of the
    // quotient, at an eighth of its capacity per copy); static routing
    // sends every rail of a pair through the same spine and core.
    for routing in ["adaptive", "destination"] {
        check_with(
            "dgx-h100",
            24,
            &[("network.switch_radix", "16"), ("network.routing", routing)],
            &sizes[..2],
        );
    }
}

#[test]
fn tree_channels_use_every_nic() {
    // Two DGX H100 nodes with 200 Gb/s NICs: the rail rings are NIC-bound
    // (busbw at most 8 x 25 GB/s), while the trees, over every NIC, move half
    // the ring's network bytes on two nodes and put the rest on NVLink
    // (NCCL's maintainers: on two nodes the tree exceeds the network
    // bandwidth, NVIDIA/nccl issue 837). Every GPU sends across nodes.
    let over = [
        topology::Override {
            key: "nodes".into(),
            value: "2".into(),
        },
        topology::Override {
            key: "nic.bandwidth".into(),
            value: "200Gb/s".into(),
        },
    ];
    let t = topology::load("dgx-h100", &over).unwrap();
    let g = Group::first(&t, 16).unwrap();
    let cal = Calibration::for_model(&g.device_model(&t)).unwrap();
    let op = CollectiveOp::AllReduce;
    let total = (1u64 << 30) / 4;
    let simple = Some(Protocol::Simple);
    let tree = run_collective(&t, &g, &op, total, 4, &cal, Some(Algorithm::Tree), simple).unwrap();
    let nodes = g.nodes(&t);
    let senders: std::collections::BTreeSet<usize> = tree
        .plan
        .steps
        .iter()
        .flatten()
        .filter(|m| {
            nodes
                .iter()
                .any(|n| n.contains(&m.from) && !n.contains(&m.to))
        })
        .map(|m| m.from)
        .collect();
    assert_eq!(
        senders.len(),
        16,
        "every GPU sends across nodes on its own NIC"
    );
    let ring = run_collective(&t, &g, &op, total, 4, &cal, Some(Algorithm::Ring), simple).unwrap();
    let nic_bound = 8.0 * 25e9 * 0.94;
    let busbw = |ps: u64| (total * 4) as f64 / (ps as f64 * 1e-12) * op.busbw_factor(16);
    assert!(
        busbw(ring.time.ps()) <= nic_bound * 1.001,
        "ring above the NICs"
    );
    assert!(
        busbw(tree.time.ps()) > 1.25 * busbw(ring.time.ps()),
        "tree {} vs ring {}",
        tree.time,
        ring.time
    );
    // H100's NVSwitch reduces, so auto may also take NVLS-tree (same NIC
    // bytes as the tree); never the NIC-bound ring. Without in-switch
    // reduction the tree.
    let auto = time_collective(&t, &g, &op, total, 4, &cal, None, None).unwrap();
    assert!(
        matches!(auto.algo, Algorithm::Tree | Algorithm::NvlsTree),
        "{:?}",
        auto.algo
    );
    let mut off = over.to_vec();
    off.push(topology::Override {
        key: "nvlink.in_switch_reduction".into(),
        value: "false".into(),
    });
    let t = topology::load("dgx-h100", &off).unwrap();
    let auto = time_collective(&t, &g, &op, total, 4, &cal, None, None).unwrap();
    assert_eq!(auto.algo, Algorithm::Tree);
}

/// An adaptive fat tree's layer links never bind (`Topology::never_binding`:
/// as wide as the NIC links that feed or drain them), so the flow model runs
/// them unbounded; a fault on a link gives it back its capacity. Degrading
/// every such link by a factor of 1 (no change but its capacity) leaves a
/// tree allreduce of one GPU per node, and of all GPUs, as it was: two
/// leaves per rail (64 nodes) and three levels (24 nodes on 16-port
/// switches; the pods' links up to the cores too), to the picosecond.
#[test]
fn never_binding_links_leave_the_times_as_they_were() {
    use shardsim::collective::{build, simulate, simulate_with_faults, tuner::plan_options};
    use shardsim::engine::{FaultKind, LinkFault, Time};
    for set in [
        vec![("nodes", "64")],
        vec![("nodes", "24"), ("network.switch_radix", "16")],
    ] {
        let t = super::load("dgx-h100", &set);
        let marked: Vec<usize> = (0..t.links().len())
            .filter(|&l| t.never_binding(topology::LinkId(l as u32)))
            .collect();
        assert!(!marked.is_empty(), "{set:?}");
        let faults: Vec<LinkFault> = marked
            .iter()
            .map(|&link| LinkFault {
                link,
                at: Time::ZERO,
                kind: FaultKind::Degrade(1.0),
            })
            .collect();
        let nodes = t.num_devices() / 8;
        for devices in [
            (0..nodes).map(|k| 8 * k).collect::<Vec<u32>>(),
            (0..t.num_devices()).collect(),
        ] {
            let g = Group::new(&t, devices).unwrap();
            let cal = Calibration::for_model(&g.device_model(&t)).unwrap();
            let total = 4u64 << 20;
            let opts = plan_options(&t, &g, &cal, total * 4);
            let plan = build(
                &CollectiveOp::AllReduce,
                Algorithm::Tree,
                g.len(),
                total,
                &opts,
            )
            .unwrap();
            let a = simulate(&t, &g, &plan, 4, Algorithm::Tree, Protocol::Simple, &cal).unwrap();
            let b = simulate_with_faults(
                &t,
                &g,
                &plan,
                4,
                Algorithm::Tree,
                Protocol::Simple,
                &cal,
                &faults,
            )
            .unwrap();
            assert_eq!(
                (a.time, a.flows),
                (b.time, b.flows),
                "{set:?}, {} ranks",
                g.len()
            );
        }
    }
}
