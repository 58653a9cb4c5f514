//! Tree allreduces generated step by step (`collective::tree_stream`) and
//! timed streamed (`collective::stream`) against the built plan on the whole
//! network: the same steps move for move, in the plan's order, for flat
//! groups (two heaps), one node (a chain and its mirror) and several nodes
//! (channels), chunks that divide and do not, messages with empty chunks;
//! the same time to the picosecond and the same flow count, every protocol,
//! whatever the lookahead (a run that starts a task too late says so).

use proptest::prelude::*;
use shardsim::collective::stream::time_tree_streamed;
use shardsim::collective::tree_stream::TreeStream;
use shardsim::collective::{
    build, run_collective, time_collective, Algorithm, Calibration, CollectiveOp, Group,
    PlanOptions, Protocol,
};

fn nodes_of(layout: &[usize]) -> Vec<Vec<usize>> {
    let mut next = 0;
    layout
        .iter()
        .map(|&m| {
            let g: Vec<usize> = (next..next + m).collect();
            next += m;
            g
        })
        .collect()
}

fn same_steps(n: usize, total: u64, opts: &PlanOptions) {
    let plan = build(&CollectiveOp::AllReduce, Algorithm::Tree, n, total, opts).unwrap();
    let stream = TreeStream::allreduce(n, total, opts);
    assert_eq!(
        stream.steps(),
        plan.steps,
        "{n} ranks, {total} elements, {opts:?}"
    );
}

#[test]
fn tree_stream_steps_equal_the_built_plan() {
    let layouts: Vec<Vec<usize>> = vec![
        vec![],
        vec![1; 7],
        vec![1; 16],
        vec![5],
        vec![8],
        vec![4, 4],
        vec![2, 2, 2],
        vec![8; 5],
        vec![3, 2, 3],
    ];
    for layout in &layouts {
        let n = if layout.is_empty() {
            13
        } else {
            layout.iter().sum()
        };
        for chunks in [1, 2, 3, 8] {
            for channel_chunks in [0, 2, 5] {
                for tree_channel_cap in [0, 1, 3] {
                    for total in [0, 1, 3, 7, 64, 1000, 4099] {
                        let opts = PlanOptions {
                            chunks,
                            channel_chunks,
                            nvls_chunks: 0,
                            tree_chunks: 0,
                            nodes: nodes_of(layout),
                            lanes: 1,
                            tree_channel_cap,
                            collnet_chunks: 0,
                        };
                        same_steps(n, total, &opts);
                    }
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn tree_stream_steps_equal_the_plan_on_random_layouts(
        nodes in 0usize..9,
        per in 1usize..6,
        flat in 1usize..40,
        chunks in 1usize..10,
        channel_chunks in 0usize..6,
        total in 0u64..5000,
    ) {
        let layout = vec![per; nodes];
        let n = if nodes == 0 { flat } else { nodes * per };
        let opts = PlanOptions { chunks, channel_chunks, nvls_chunks: 0, tree_chunks: 0, nodes: nodes_of(&layout), lanes: 1, tree_channel_cap: 0, collnet_chunks: 0 };
        let plan = build(&CollectiveOp::AllReduce, Algorithm::Tree, n, total, &opts).unwrap();
        prop_assert_eq!(TreeStream::allreduce(n, total, &opts).steps(), plan.steps);
    }
}

fn cal_for(topo: &shardsim::topology::Topology) -> Calibration {
    let c = topo.device(0).unwrap();
    Calibration::for_model(&topo.component(c).model)
        .or_else(|_| Calibration::for_model("default"))
        .unwrap()
}

/// Streamed (`time_collective`, and every lookahead) against the plan.
fn check(topo: &shardsim::topology::Topology, ranks: u32, sizes: &[u64], label: &str) -> usize {
    check_with(topo, ranks, sizes, label, &cal_for(topo))
}

fn check_with(
    topo: &shardsim::topology::Topology,
    ranks: u32,
    sizes: &[u64],
    label: &str,
    cal: &Calibration,
) -> usize {
    let cal = *cal;
    let g = Group::first(topo, ranks).unwrap();
    let op = CollectiveOp::AllReduce;
    let mut late = 0;
    for &elems in sizes {
        for proto in Protocol::ALL {
            let algo = Some(Algorithm::Tree);
            let full = run_collective(topo, &g, &op, elems, 4, &cal, algo, Some(proto)).unwrap();
            let quick = time_collective(topo, &g, &op, elems, 4, &cal, algo, Some(proto)).unwrap();
            let what = format!("{label}: {elems} elements {proto:?}");
            assert_eq!((quick.time, quick.flows), (full.time, full.flows), "{what}");
            for lookahead in [0, 1, 4, usize::MAX] {
                match time_tree_streamed(topo, &g, elems, 4, &cal, proto, lookahead).unwrap() {
                    Some(t) => assert_eq!(
                        (t.time, t.flows),
                        (full.time, full.flows),
                        "{what} lookahead {lookahead}"
                    ),
                    None => {
                        assert_ne!(lookahead, usize::MAX, "{what}");
                        late += 1;
                    }
                }
            }
        }
        // The auto choice (its estimate reads the streamed steps) agrees too.
        let full = run_collective(topo, &g, &op, elems, 4, &cal, None, None).unwrap();
        let quick = time_collective(topo, &g, &op, elems, 4, &cal, None, None).unwrap();
        assert_eq!(
            (quick.algo, quick.proto, quick.time, quick.flows),
            (full.algo, full.proto, full.time, full.flows),
            "{label}: auto {elems}"
        );
    }
    late
}

#[test]
fn streamed_tree_times_equal_the_whole_plan() {
    let sizes = [1, 7, 1000, 65_536, 300_001, 4 << 20];
    let mut late = 0;
    for (preset, ranks) in [
        ("switch:2", 2),
        ("switch:13", 13),
        ("switch:64", 64),
        ("ring:12", 12),
        ("pcie-box", 4),
        ("dgx-h100", 8),
        ("dgx-h100", 6),
    ] {
        let t = super::load(preset, &[]);
        late += check(&t, ranks, &sizes, preset);
    }
    for nodes in ["2", "3"] {
        let t = super::load("dgx-a100", &[("nodes", nodes)]);
        late += check(&t, t.num_devices(), &sizes, &format!("dgx-a100 x{nodes}"));
    }
    // Lookaheads of 0 and 1 start some tasks too late: the detection is live.
    assert!(late > 0, "no streamed run came too late");
}

/// With a sender's next send gated by its last one's departure
/// (`Calibration::send_on_departure`: the streamed schedule releases
/// departure dependents at the transmission end, as the whole one does),
/// the streamed tree still equals the whole plan to the picosecond, and the
/// switch moves the time (a tree's chunks no longer pay the route latency
/// serially at the sender).
#[test]
fn streamed_tree_times_with_sends_gated_on_departure_equal_the_whole_plan() {
    let sizes = [7, 65_536, 300_001, 4 << 20];
    let mut late = 0;
    for (preset, ranks, nodes) in [("switch:13", 13, "1"), ("dgx-a100", 16, "2")] {
        let t = super::load(preset, &[("nodes", nodes)][..usize::from(nodes != "1")]);
        let mut cal = cal_for(&t);
        cal.send_on_departure = true;
        late += check_with(&t, ranks, &sizes, &format!("{preset} departed"), &cal);
        let g = Group::first(&t, ranks).unwrap();
        let time = |c: &Calibration| {
            let tree = Some(Algorithm::Tree);
            let simple = Some(Protocol::Simple);
            run_collective(
                &t,
                &g,
                &CollectiveOp::AllReduce,
                4 << 20,
                4,
                c,
                tree,
                simple,
            )
            .unwrap()
            .time
        };
        if nodes != "1" {
            assert!(time(&cal) < time(&cal_for(&t)), "{preset}");
        }
    }
    assert!(late > 0, "no streamed run came too late");
}
