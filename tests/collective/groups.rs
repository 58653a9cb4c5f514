//! Many groups at once: groups whose links are disjoint are timed apart (one
//! per class of equivalent groups), which must equal timing them all on one
//! network.

use shardsim::collective::{
    time_collective, time_groups, time_groups_cached, time_groups_merged, Algorithm, Calibration,
    CollectiveOp, Group, PathCache,
};
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

/// Groups that share no link are each timed as `collective` times a group
/// alone: one GPU per node on each of the 8 rails of 64 DGX H100 nodes
/// (a data-parallel group under tensor parallelism over the node), a
/// 32 MiB to 512 MiB allreduce (trees past the chunk budget, timed by their
/// period, then a ring) takes what `time_collective` gives rail 0 alone,
/// algorithm and protocol included (the training step's rounds had been timed on the budget's
/// larger chunks: +24 to +63% on 16-64 full nodes at 256 MiB-1 GiB, and
/// another algorithm). A series of rounds sharing one cache (as a training
/// step's memo keeps it) gives the fresh cache's figures.
#[test]
fn disjoint_groups_take_their_time_alone_as_collective_gives_it() {
    let topo = topology::load_nodes("dgx-h100", 64, &[]).unwrap();
    let cal = Calibration::for_model("H100 SXM5 80GB").unwrap();
    let per_rail: Vec<Vec<u32>> = (0..8)
        .map(|g| (0..64).map(|n| n * 8 + g).collect())
        .collect();
    let ops = vec![CollectiveOp::AllReduce; 8];
    let alone = Group::new(&topo, per_rail[0].clone()).unwrap();
    let mut cache = PathCache::new();
    let mut algos: Vec<Algorithm> = Vec::new();
    for elems in [16u64 << 20, 64 << 20, 256 << 20] {
        let t = time_groups(&topo, &per_rail, &ops, elems, 2, &cal, &[]).unwrap();
        let one = time_collective(&topo, &alone, &ops[0], elems, 2, &cal, None, None).unwrap();
        assert_eq!(
            (t.time, t.algo, t.proto),
            (one.time, one.algo, one.proto),
            "{elems} elements"
        );
        let cached =
            time_groups_cached(&topo, &per_rail, &ops, elems, 2, &cal, None, &mut cache).unwrap();
        assert_eq!(
            cached, t,
            "{elems} elements, cache shared with smaller sizes"
        );
        algos.push(t.algo);
    }
    assert!(algos.contains(&Algorithm::Tree), "{algos:?}");
}

/// Groups that share links symmetrically: the 8 rails of 24 DGX H100 nodes
/// on 16-port switches in three pods, the cores tapered 8:1 and 2:1 (one
/// and four core uplinks per pod spine: too few to split into 8 rail
/// planes, so every rail crosses the same core layer). Each rail's group is
/// the others' up to renaming its own links, and every core link is used by
/// all 8 at the same place in their runs: one group's run with the shared
/// links at 1/8 of their capacity gives the merged run's time, flows and
/// bytes per link, to the picosecond.
#[test]
fn groups_sharing_links_symmetrically_equal_the_merged_run() {
    for ratio in ["8", "2"] {
        let sets: Vec<Override> = [
            ("nodes", "24"),
            ("network.switch_radix", "16"),
            ("network.core_oversubscription", ratio),
        ]
        .iter()
        .map(|(k, v)| Override {
            key: (*k).into(),
            value: (*v).into(),
        })
        .collect();
        let topo = topology::load("dgx-h100", &sets).unwrap();
        assert_eq!(topo.fat_tree().unwrap().planes, 1);
        let cal = Calibration::for_model("H100 SXM5 80GB").unwrap();
        let per_rail: Vec<Vec<u32>> = (0..8)
            .map(|g| (0..24).map(|n| n * 8 + g).collect())
            .collect();
        for op in [CollectiveOp::AllReduce, CollectiveOp::ReduceScatter] {
            for elems in [1u64 << 20, 32 << 20] {
                let ops = vec![op.clone(); 8];
                let a = time_groups(&topo, &per_rail, &ops, elems, 2, &cal, &[]).unwrap();
                let b = time_groups_merged(&topo, &per_rail, &ops, elems, 2, &cal).unwrap();
                assert_eq!(a, b, "{ratio}:1 {op:?} of {elems}");
            }
        }
    }
}
