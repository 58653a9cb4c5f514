//! Rings timed on one symmetry unit (`collective::time_collective`) against
//! the detailed plan on the whole network (`run_collective`): same choice,
//! same time, same flow count, on single rings (one node, a switch, a ring
//! topology) and on rail rings across nodes, for sizes that divide evenly
//! (the fast path) and sizes that do not (the plan itself).

use shardsim::collective::{
    algorithms_for, run_collective, time_collective, Algorithm, Calibration, CollectiveOp, Group,
    Protocol,
};
use shardsim::topology::{self, Override};

fn cal_for(topo: &topology::Topology) -> Calibration {
    let c = topo.device(0).unwrap();
    Calibration::for_model(&topo.component(c).model)
        .or_else(|_| Calibration::for_model("default"))
        .unwrap()
}

fn check(topo: &topology::Topology, ranks: u32, label: &str) {
    let n = u64::from(ranks);
    // Divisible by ranks x 8 rails (fast path), then not (plan).
    check_sizes(
        topo,
        ranks,
        label,
        &[n * 8, n * 8 * 1024, n * 8 * 333_333, n * 8 + 3, 5],
    );
}

fn check_sizes(topo: &topology::Topology, ranks: u32, label: &str, sizes: &[u64]) {
    check_sizes_with(topo, ranks, label, sizes, &cal_for(topo))
}

fn check_sizes_with(
    topo: &topology::Topology,
    ranks: u32,
    label: &str,
    sizes: &[u64],
    cal: &Calibration,
) {
    let cal = *cal;
    let group = Group::first(topo, ranks).unwrap();
    let ops = [
        CollectiveOp::AllReduce,
        CollectiveOp::AllGather,
        CollectiveOp::ReduceScatter,
    ];
    for op in &ops {
        for &elems in sizes {
            for proto in [None, Some(Protocol::Simple), Some(Protocol::Ll)] {
                let algo = Some(Algorithm::Ring);
                let slow = run_collective(topo, &group, op, elems, 4, &cal, algo, proto).unwrap();
                let fast = time_collective(topo, &group, op, elems, 4, &cal, algo, proto).unwrap();
                let what = format!("{label}: {op:?} of {elems} with {proto:?}");
                assert_eq!(fast.time, slow.time, "{what}");
                assert_eq!(fast.flows, slow.flows, "{what}");
                assert_eq!((fast.algo, fast.proto), (slow.algo, slow.proto), "{what}");
            }
            // Auto choice among ring, tree and NVLS agrees too.
            let slow = run_collective(topo, &group, op, elems, 2, &cal, None, None).unwrap();
            let fast = time_collective(topo, &group, op, elems, 2, &cal, None, None).unwrap();
            assert_eq!(
                (fast.time, fast.flows, fast.algo, fast.proto),
                (slow.time, slow.flows, slow.algo, slow.proto),
                "{label}: auto {op:?} of {elems}"
            );
        }
    }
}

#[test]
fn rings_timed_on_one_unit_equal_the_whole_plan() {
    let one = topology::load("dgx-h100", &[]).unwrap();
    check(&one, 8, "dgx-h100");
    check(&one, 5, "dgx-h100 first 5");
    for nodes in ["2", "3", "4"] {
        let o = Override {
            key: "nodes".into(),
            value: nodes.into(),
        };
        let topo = topology::load("dgx-h100", &[o]).unwrap();
        check(&topo, topo.num_devices(), &format!("dgx-h100 x{nodes}"));
    }
    let a100 = topology::load(
        "dgx-a100",
        &[Override {
            key: "nodes".into(),
            value: "2".into(),
        }],
    )
    .unwrap();
    check(&a100, 16, "dgx-a100 x2");
    // Two leaves per rail: the boundaries through a spine make two classes
    // of units, timed as the slowest class's ring.
    let spine = topology::load(
        "dgx-h100",
        &[
            Override {
                key: "nodes".into(),
                value: "16".into(),
            },
            Override {
                key: "network.switch_radix".into(),
                value: "16".into(),
            },
        ],
    )
    .unwrap();
    check_sizes(
        &spine,
        128,
        "dgx-h100 x16, two leaves per rail",
        &[128 * 8 * 32],
    );
    for t in ["ring:12", "switch:16"] {
        let topo = topology::load(t, &[]).unwrap();
        check(&topo, topo.num_devices(), t);
    }
}

/// NCCL's steps in flight (`Calibration::send_on_departure`: a position's
/// next send waits for its last one to have left) and Simple ring slices
/// across the network (`Calibration::ring_slices`: each step in two
/// slices): the unit shortcuts, even and uneven, still equal the whole plan
/// to the picosecond with the same flow count (sliced steps count twice),
/// and across two nodes slicing makes a large Simple ring faster than
/// whole steps, never slower.
#[test]
fn rings_in_flight_and_sliced_timed_on_one_unit_equal_the_whole_plan() {
    let two = |preset: &str| {
        let o = Override {
            key: "nodes".into(),
            value: "2".into(),
        };
        topology::load(preset, &[o]).unwrap()
    };
    let a100 = two("dgx-a100");
    let mut on = cal_for(&a100);
    on.send_on_departure = true;
    on.ring_slices = true;
    let n = 16u64;
    let sizes = [n * 8, n * 8 * 1024, n * 8 * 333_333, n * 8 + 3, 5];
    check_sizes_with(&a100, 16, "dgx-a100 x2 in flight", &sizes, &on);
    let h100 = two("dgx-h100");
    check_sizes_with(&h100, 16, "dgx-h100 x2 in flight", &sizes[1..3], &on);
    let ring = topology::load("ring:12", &[]).unwrap();
    check_sizes_with(&ring, 12, "ring:12 in flight", &[96, 96 * 1024, 101], &on);
    let g = Group::first(&a100, 16).unwrap();
    let time = |c: &Calibration| {
        let (ring, simple) = (Some(Algorithm::Ring), Some(Protocol::Simple));
        let op = CollectiveOp::AllReduce;
        time_collective(&a100, &g, &op, 16 << 20, 4, c, ring, simple)
            .unwrap()
            .time
    };
    let mut whole = on;
    whole.ring_slices = false;
    assert!(time(&on) < time(&whole));
}

/// One switch of 64 and 256 GPUs: every algorithm of allreduce, all-gather
/// and reduce-scatter, timed without its plan where a fast path applies
/// (rings even and uneven, whose pieces repeat every `n / gcd(n, total)`
/// positions, some empty below `n` elements), equals the whole plan's run to
/// the picosecond, with the same flow count and choice.
#[test]
fn switch_collectives_without_their_plan_equal_the_whole_plan() {
    for n in [64u64, 256] {
        let topo = topology::load(&format!("switch:{n}"), &[]).unwrap();
        let cal = cal_for(&topo);
        let group = Group::first(&topo, n as u32).unwrap();
        let sizes = [1, 7, n - 1, n + 1, 2 * n + 6, 1000 * n + 24, 1 << 20];
        for op in [
            CollectiveOp::AllReduce,
            CollectiveOp::AllGather,
            CollectiveOp::ReduceScatter,
        ] {
            let algos: Vec<Option<Algorithm>> = std::iter::once(None)
                .chain(algorithms_for(&op).iter().copied().map(Some))
                .collect();
            for &elems in &sizes {
                for &algo in &algos {
                    for proto in [None, Some(Protocol::Simple)] {
                        let what = format!("switch:{n} {op:?} of {elems} by {algo:?} {proto:?}");
                        let slow = run_collective(&topo, &group, &op, elems, 4, &cal, algo, proto);
                        let fast = time_collective(&topo, &group, &op, elems, 4, &cal, algo, proto);
                        match (slow, fast) {
                            (Ok(s), Ok(f)) => assert_eq!(
                                (f.time, f.flows, f.algo, f.proto),
                                (s.time, s.flows, s.algo, s.proto),
                                "{what}"
                            ),
                            (Err(s), Err(f)) => assert_eq!(s, f, "{what}"),
                            (s, f) => panic!("{what}: {:?} vs {:?}", s.err(), f.err()),
                        }
                    }
                }
            }
        }
    }
}
