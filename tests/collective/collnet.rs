//! CollNet Direct (SHARP, `collnet.rs`): the bytes each NIC carries against
//! the closed form, a reduce-scatter over one GPU per node at its NIC's line
//! rate however many nodes (two leaves per rail aggregate through a spine,
//! whose link carries one copy), `auto` taking it only where the run enables
//! CollNet, and the errors for a network that does not reduce.
//! (Its numerics: `numerics::every_algorithm_matches_the_single_device_result`
//! runs every algorithm of every operation, CollNet's included.)

use std::collections::BTreeSet;

use shardsim::collective::{
    build, time_collective, Algorithm, Calibration, CollectiveOp, Group, PlanOptions, Protocol, Via,
};

use super::load;
use crate::common::shardsim;

/// Elements up from and down to each rank through the network's switches:
/// per in-network operation (receiver range and connection), every distinct
/// sender sends the range once (not a multicast of a result held at the
/// root) and every distinct receiver takes it once (not while it is held).
fn network_loads(op: &CollectiveOp, nodes: &[Vec<usize>], total: u64) -> (Vec<u64>, Vec<u64>) {
    let n: usize = nodes.iter().map(Vec::len).sum();
    let opts = PlanOptions {
        chunks: 4,
        nodes: nodes.to_vec(),
        lanes: 1,
        ..PlanOptions::default()
    };
    let plan = build(op, Algorithm::CollNet, n, total, &opts).unwrap();
    let (mut up, mut down) = (vec![0; n], vec![0; n]);
    for step in &plan.steps {
        let mut senders = BTreeSet::new();
        let mut receivers = BTreeSet::new();
        for m in step {
            let (goes_up, comes_down) = match m.via {
                Via::InNetwork => (true, true),
                Via::NetworkReduce => (true, false),
                Via::NetworkMulticast => (false, true),
                _ => continue,
            };
            if goes_up && senders.insert((m.dst, m.len, m.conn, m.from)) {
                up[m.from] += m.len;
            }
            if comes_down && receivers.insert((m.dst, m.len, m.conn, m.to)) {
                down[m.to] += m.len;
            }
        }
    }
    (up, down)
}

/// Each rank is a head with its own NIC: allreduce sends and takes `S / m`
/// (its part, once each way), reduce-scatter sends `S / m` (the pieces of
/// its rail, its own included) and takes `S / n`, all-gather the reverse of
/// that less its own piece.
#[test]
fn each_nic_carries_the_closed_form_bytes() {
    for (nodes, m) in [(2usize, 8usize), (3, 4), (4, 1)] {
        let n = nodes * m;
        let groups: Vec<Vec<usize>> = (0..nodes).map(|k| (k * m..(k + 1) * m).collect()).collect();
        let total = 96 * n as u64;
        let (s_m, s_n) = (total / m as u64, total / n as u64);
        let want = [
            (CollectiveOp::AllReduce, s_m, s_m),
            (CollectiveOp::ReduceScatter, s_m, s_n),
            (CollectiveOp::AllGather, s_n, (nodes as u64 - 1) * s_n),
        ];
        for (op, up, down) in want {
            let (u, d) = network_loads(&op, &groups, total);
            assert_eq!(u, vec![up; n], "{} {nodes} x {m}: up", op.name());
            assert_eq!(d, vec![down; n], "{} {nodes} x {m}: down", op.name());
        }
    }
}

/// One GPU per DGX H100 node (a data-parallel group under tensor
/// parallelism 8): a 96 MiB bf16 reduce-scatter sends the whole buffer
/// through each GPU's one 400 Gb/s NIC, an allreduce the whole buffer each
/// way, an all-gather takes all but its own piece: CollNet runs at the NIC's
/// line rate at the protocol's network fraction (plus the chunks' fill and
/// one network step) on 16 nodes (one leaf per rail) and on 48 (two leaves
/// per rail under a spine: the leaf's link up carries one reduced copy and
/// the spine's link down one multicast copy, else the time would multiply)
/// and on 512 (three levels: the pods' spines reduce into a core), while
/// the ring pays a step per node.
#[test]
fn collnet_runs_at_the_nics_line_rate_whatever_the_nodes() {
    let bytes: u64 = 96 << 20;
    let cal = Calibration::for_model("H100 SXM5 80GB").unwrap();
    let time = |op: &CollectiveOp, nodes: u32, algo: Algorithm| {
        let topo = load("dgx-h100", &[("nodes", &nodes.to_string())]);
        let group = Group::new(&topo, (0..nodes).map(|k| 8 * k).collect()).unwrap();
        let t = time_collective(
            &topo,
            &group,
            op,
            bytes / 2,
            2,
            &cal,
            Some(algo),
            Some(Protocol::Simple),
        )
        .unwrap();
        t.time.0 as f64 * 1e-6
    };
    let nic = 400e9 / 8.0 * cal.simple.network_fraction;
    for op in [
        CollectiveOp::ReduceScatter,
        CollectiveOp::AllReduce,
        CollectiveOp::AllGather,
    ] {
        let mut times = Vec::new();
        for nodes in [16u32, 48, 512] {
            let share = if op == CollectiveOp::AllGather {
                (nodes - 1) as f64 / nodes as f64
            } else {
                1.0
            };
            let line = bytes as f64 * share / nic * 1e6;
            let t = time(&op, nodes, Algorithm::CollNet);
            assert!(
                t >= line && t <= 1.10 * line,
                "{} on {nodes} nodes: {t:.1} us against the line rate's {line:.1}",
                op.name()
            );
            times.push(t);
        }
        let ring = time(&op, 48, Algorithm::Ring);
        assert!(
            ring > 1.2 * times[1],
            "{}: ring {ring:.1} us, CollNet {:.1}",
            op.name(),
            times[1]
        );
    }
}

/// `auto` (NCCL's model by default) takes CollNet only where the run
/// enables it (`collective.collnet`, NCCL_COLLNET_ENABLE): the 48-node
/// reduce-scatter above then runs CollNet (NCCL's 31 us against the ring's
/// 47 network steps), else the ring.
#[test]
fn auto_takes_collnet_only_where_the_run_enables_it() {
    let cal = Calibration::for_model("H100 SXM5 80GB").unwrap();
    let pick = |enabled: &str| {
        let topo = load(
            "dgx-h100",
            &[("nodes", "48"), ("collective.collnet", enabled)],
        );
        let group = Group::new(&topo, (0..48).map(|k| 8 * k).collect()).unwrap();
        let op = CollectiveOp::ReduceScatter;
        time_collective(&topo, &group, &op, 48 << 20, 2, &cal, None, None)
            .unwrap()
            .algo
    };
    assert_eq!(pick("true"), Algorithm::CollNet);
    assert_eq!(pick("false"), Algorithm::Ring);
}

/// CollNet where the network does not reduce, on one node, on LL, over
/// nodes with different numbers of ranks, or a setting that is not a
/// boolean or asks for it over such a network: clear errors, exit code 2.
#[test]
fn collnet_without_a_reducing_network_is_a_clear_error() {
    let cases: [(&[&str], &str); 6] = [
        (
            &[
                "--nodes",
                "2",
                "--algo",
                "collnet",
                "--set",
                "network.in_switch_reduction=false",
            ],
            "do not reduce",
        ),
        (&["--algo", "collnet"], "needs at least 2 nodes"),
        (
            &["--nodes", "2", "--algo", "collnet", "--proto", "LL"],
            "runs Simple only, not LL",
        ),
        (
            &["--nodes", "2", "--ranks", "0,1,8", "--algo", "collnet"],
            "the same number of consecutive ranks",
        ),
        (
            &["--nodes", "2", "--set", "collective.collnet=yes"],
            "expected true or false",
        ),
        (
            &[
                "--nodes",
                "2",
                "--set",
                "collective.collnet=true",
                "--set",
                "network.in_switch_reduction=false",
            ],
            "needs a network whose switches reduce",
        ),
    ];
    for (extra, want) in cases {
        let mut args = vec!["collective", "--topology", "dgx-h100", "--sizes", "1MiB"];
        args.extend_from_slice(extra);
        let out = shardsim(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {err}");
        assert!(err.contains(want), "{extra:?}: {err}");
    }
}
