//! Many groups at once: groups whose links are disjoint are timed apart (one
//! per class of equivalent groups), which must equal timing them all on one
//! network.

use shardsim::collective::{time_groups, time_groups_merged, Calibration, CollectiveOp};
use shardsim::topology::{self, Override};

#[test]
fn disjoint_groups_timed_apart_equal_the_merged_run() {
    let nodes = Override {
        key: "nodes".into(),
        value: "4".into(),
    };
    let topo = topology::load("dgx-h100", &[nodes]).unwrap();
    let cal = Calibration::for_model("H100 SXM5 80GB").unwrap_or_else(|_| {
        let c = topo.device(0).unwrap();
        Calibration::for_model(&topo.component(c).model).unwrap()
    });
    // Inside each node (disjoint NVLink), and one GPU per node per rail.
    let in_node: Vec<Vec<u32>> = (0..4)
        .map(|n| (0..8).map(|g| n * 8 + g).collect())
        .collect();
    let per_rail: Vec<Vec<u32>> = (0..8)
        .map(|g| (0..4).map(|n| n * 8 + g).collect())
        .collect();
    let pairs: Vec<Vec<u32>> = (0..16).map(|i| vec![2 * i, 2 * i + 1]).collect();
    for groups in [&in_node, &per_rail, &pairs] {
        for op in [CollectiveOp::AllReduce, CollectiveOp::AllGather] {
            for elems in [1u64 << 10, 1 << 24] {
                let ops = vec![op.clone(); groups.len()];
                let a = time_groups(&topo, groups, &ops, elems, 2, &cal, &[]).unwrap();
                let b = time_groups_merged(&topo, groups, &ops, elems, 2, &cal).unwrap();
                assert_eq!(a, b, "{op:?} of {elems} over {} groups", groups.len());
            }
        }
    }
}
