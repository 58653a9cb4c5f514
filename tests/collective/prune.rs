//! `auto` skips a candidate whose lower bound is above the best estimate so
//! far before building its plan (NVLS-tree): the choice must be the one the
//! unpruned search makes, over a sweep of sizes on one and several nodes of
//! reducing (H100, H200) and non-reducing (A100) switches, with fast and slow
//! NICs, where NVLS-tree wins at some sizes and loses at others.

use shardsim::collective::{choose, choose_unpruned, Algorithm, Calibration, CollectiveOp, Group};

#[test]
fn pruned_auto_choices_equal_unpruned() {
    let cases: [(&str, &[(&str, &str)]); 6] = [
        ("dgx-h100", &[]),
        ("dgx-h100", &[("nodes", "2")]),
        ("dgx-h100", &[("nodes", "2"), ("nic.bandwidth", "200Gb/s")]),
        ("dgx-h100", &[("nodes", "5")]),
        ("hgx-h200", &[("nodes", "3")]),
        ("dgx-a100", &[("nodes", "2")]),
    ];
    let op = CollectiveOp::AllReduce;
    let (mut nvls_tree, mut other) = (0, 0);
    for (preset, set) in cases {
        let t = super::load(preset, set);
        let g = Group::first(&t, t.num_devices()).unwrap();
        let cal = Calibration::for_model(&g.device_model(&t)).unwrap();
        // 8 B to 8 GiB by x8.
        for k in (3..=33).step_by(3) {
            let total = (1u64 << k) / 4;
            let (a, _) = choose(&t, &g, &op, total, 4, &cal, None, None).unwrap();
            let (b, _) = choose_unpruned(&t, &g, &op, total, 4, &cal, None, None).unwrap();
            assert_eq!(a, b, "{preset} {set:?}, {} B", 1u64 << k);
            if a.algo == Algorithm::NvlsTree {
                nvls_tree += 1;
            } else {
                other += 1;
            }
        }
    }
    // The sweep has sizes on both sides of NVLS-tree's wins.
    assert!(nvls_tree > 0 && other > 0, "{nvls_tree} / {other}");
}

/// A sweep's walks bound NVLS-tree at larger sizes of the same plan shape
/// (`path_cache.rs`) and the ring at small sizes (`prune.rs`): the sweep's
/// choices and times must be those of every size timed on its own, on
/// clusters where NVLS-tree wins at some sizes (H100, H200) and where it does
/// not apply (A100), by x4 steps (every size a multiple of the ones before)
/// and by odd sizes (no exact pieces: nothing is recorded).
#[test]
fn sweep_with_cached_walks_equals_sizes_timed_alone() {
    use shardsim::collective::{time_collective, time_collective_cached, PathCache};
    let cases: [(&str, &[(&str, &str)]); 4] = [
        ("dgx-h100", &[("nodes", "16")]),
        ("dgx-h100", &[("nodes", "2"), ("nic.bandwidth", "200Gb/s")]),
        ("hgx-h200", &[("nodes", "3")]),
        ("dgx-a100", &[("nodes", "2")]),
    ];
    let op = CollectiveOp::AllReduce;
    let mut nvls_tree = 0;
    for (preset, set) in cases {
        let t = super::load(preset, set);
        let g = Group::first(&t, t.num_devices()).unwrap();
        let cal = Calibration::for_model(&g.device_model(&t)).unwrap();
        let mut cache = PathCache::new();
        let sizes = (1..=16)
            .map(|k| (1u64 << (2 * k)) / 4)
            .chain([3 << 20, 5 << 26]);
        for total in sizes {
            let a = time_collective_cached(&t, &g, &op, total, 4, &cal, None, None, &mut cache)
                .unwrap();
            let b = time_collective(&t, &g, &op, total, 4, &cal, None, None).unwrap();
            assert_eq!(a, b, "{preset} {set:?}, {} B", total * 4);
            nvls_tree += usize::from(a.algo == Algorithm::NvlsTree);
        }
    }
    assert!(nvls_tree > 0);
}

/// On ring topologies an even ring is estimated first and one rank's chain
/// of steps bounds the tree's walk (`critical.rs`, `streamed_chain_bound`),
/// then the walk on the grid's geometry (`grid_fabric.rs`): the choices must
/// be the unpruned ones from 8 B to 512 MiB, where the tree wins at small
/// sizes and the ring at large ones, on even and odd rings, tori and a mesh.
#[test]
fn pruned_choices_on_rings_equal_unpruned() {
    let op = CollectiveOp::AllReduce;
    let mut algos = std::collections::BTreeSet::new();
    let cases: [(&str, &[(&str, &str)]); 6] = [
        ("ring:12", &[]),
        ("ring:64", &[]),
        ("ring:129", &[]),
        ("tpu-v4", &[]),
        ("tpu-v4", &[("dims", "[2, 4, 8]")]),
        ("mesh2d", &[("dims", "[4, 8]")]),
    ];
    for (preset, set) in cases {
        let t = super::load(preset, set);
        let g = Group::first(&t, t.num_devices()).unwrap();
        let cal = Calibration::for_model(&g.device_model(&t)).unwrap();
        for k in (3..=29).step_by(2) {
            let total = (1u64 << k) / 4;
            let (a, _) = choose(&t, &g, &op, total, 4, &cal, None, None).unwrap();
            let (b, _) = choose_unpruned(&t, &g, &op, total, 4, &cal, None, None).unwrap();
            assert_eq!(a, b, "{preset} {set:?}, {} B", 1u64 << k);
            algos.insert(a.algo.name());
        }
    }
    assert!(algos.len() > 1, "{algos:?}");
}
