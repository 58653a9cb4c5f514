//! Across nodes against published nccl-tests allreduce curves (each fixture's
//! header cites its log and says how the fabric is described): two nodes of
//! 8 H100 with 8 x 200 Gb/s NICs each
//! (fixtures/collective/h100_2node_allreduce_a3mega.csv, as `dgx-h100 --nodes 2
//! --set nic.bandwidth=200Gb/s --set nvlink.in_switch_reduction=false`: the
//! run's NCCL profile disabled NVLS); and, as `dgx-a100 --nodes N` (8 rails of
//! 200 Gb/s), 2 x 8 A100 with 1.6 Tb/s of RDMA NICs per node on OCI
//! (a100_2node_allreduce_oci.csv), two DGX A100 with NCCL_ALGO=RING
//! (a100_2node_allreduce_dgx_ring.csv, compared with the ring), two Azure NDm
//! A100 v4 VMs (a100_2node_allreduce_ndmv4.csv, 1 and 4 GiB only) and four
//! DGX A100 (a100_4node_allreduce_dgx.csv); and two OCI BM.GPU.H100.8 nodes
//! (3.2 Tb/s of RoCE each, h100_2node_allreduce_oci.csv, 1-16 GiB, as
//! `dgx-h100 --nodes 2`: NVLS-tree); and two AWS p5.48xlarge (32 x 100 Gb/s
//! EFA each, h100_2node_allreduce_p5.csv, as `dgx-h100 --nodes 2`) and two
//! p4de.24xlarge (4 x 100 Gb/s EFA each, a100_2node_allreduce_p4de.csv, as
//! `dgx-a100 --nodes 2 --set nic.bandwidth=50Gb/s`). The simulated time must be within
//! 15% of the measured one at every size from 64 MiB on, except the sizes
//! listed as known misses, which must still miss (so a change that fixes or
//! breaks one shows here and in README's table); and the two-node tree
//! against its network bound (closed form).

use shardsim::collective::{time_collective, Algorithm, Calibration, CollectiveOp, Group};

use crate::common::fixture;

/// The smallest size checked.
const FROM: u64 = 64 << 20;

/// (size in bytes, measured time in microseconds) rows of a fixture.
pub(super) fn rows(rel: &str) -> Vec<(u64, f64)> {
    let text = std::fs::read_to_string(fixture(rel)).unwrap();
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with("size"))
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (f[0].parse().unwrap(), f[1].parse().unwrap())
        })
        .collect()
}

/// Check the fixture `rel` on `preset` with `set` overrides, with `auto`
/// (`algo` None) or the algorithm the run forced; `sizes` is how many of the
/// fixture's rows are from [`FROM`] on. Returns the sizes whose error is 15% or
/// more, and a line per size.
fn misses(
    preset: &str,
    set: &[(&str, &str)],
    rel: &str,
    algo: Option<Algorithm>,
    sizes: usize,
) -> (Vec<u64>, String) {
    let t = super::load(preset, set);
    let g = Group::first(&t, t.num_devices()).unwrap();
    let cal = Calibration::for_model(&g.device_model(&t)).unwrap();
    let op = CollectiveOp::AllReduce;
    let (mut missed, mut report) = (Vec::new(), String::new());
    let mut checked = 0;
    for (size, measured) in rows(rel) {
        if size < FROM {
            continue;
        }
        let r = time_collective(&t, &g, &op, size / 4, 4, &cal, algo, None).unwrap();
        let ours = r.time.ps() as f64 / 1e6;
        let err = (ours - measured) / measured;
        report += &format!(
            "{rel} {size} B: ours {ours:.1} us ({}), measured {measured} us ({:+.1}%)\n",
            r.algo.name(),
            err * 100.0
        );
        if err.abs() >= 0.15 {
            missed.push(size);
        }
        checked += 1;
    }
    assert_eq!(checked, sizes, "{rel}: sizes from 64 MiB");
    (missed, report)
}

#[test]
fn h100_two_nodes_200g_allreduce_within_fifteen_percent_from_64_mib() {
    let (missed, report) = misses(
        "dgx-h100",
        &[
            ("nodes", "2"),
            ("nic.bandwidth", "200Gb/s"),
            ("nvlink.in_switch_reduction", "false"),
        ],
        "collective/h100_2node_allreduce_a3mega.csv",
        None,
        8,
    );
    // 64 MiB: the measured system pays about 0.9 ms over its bandwidth from
    // 32 MiB to 1 GiB (TCPXO), which the model does not have.
    assert_eq!(missed, vec![64 << 20], "{report}");
}

#[test]
fn a100_two_nodes_allreduce_within_fifteen_percent_from_64_mib() {
    let (missed, report) = misses(
        "dgx-a100",
        &[("nodes", "2")],
        "collective/a100_2node_allreduce_oci.csv",
        None,
        8,
    );
    // 512 MiB: the system still runs at the NIC-bound ring's level there
    // (156 GB/s out of place, 165.8 in place, as at 256 MiB) and at the
    // tree's from 1 GiB; our tuner picks the tree from 512 MiB. NCCL's own
    // model cannot switch between 512 MiB and 1 GiB (its tree/Simple
    // latency is below ring/Simple's and its tree correction factors end at
    // 256 MiB, so a tree that wins at 1 GiB wins at 512 MiB): not an
    // algorithm choice to reproduce (README, "Collectives").
    assert_eq!(missed, vec![512 << 20], "{report}");
}

#[test]
fn dgx_a100_two_nodes_forced_ring_within_fifteen_percent_from_64_mib() {
    // The run set NCCL_ALGO=RING, so the ring is what it measured; every
    // size from 64 MiB to 4 GiB is within 15% (64 MiB -11.6% is the worst).
    let (missed, report) = misses(
        "dgx-a100",
        &[("nodes", "2")],
        "collective/a100_2node_allreduce_dgx_ring.csv",
        Some(Algorithm::Ring),
        7,
    );
    assert!(missed.is_empty(), "{report}");
}

#[test]
fn ndm_a100_v4_two_nodes_allreduce_at_one_and_four_gib() {
    // NCCL 2.17.1 chose for itself (no NCCL_ALGO) and ran at the NIC-bound
    // ring's level at both sizes (183.8 and 188.2 GB/s busbw; 8 x 25 GB/s x
    // 0.94 = 188), where our tuner takes the tree (231 and 245 GB/s): both
    // are known misses. The ring itself is within 1% of both points.
    let set = [("nodes", "2")];
    let rel = "collective/a100_2node_allreduce_ndmv4.csv";
    let (missed, report) = misses("dgx-a100", &set, rel, None, 2);
    assert_eq!(missed, vec![1 << 30, 4 << 30], "{report}");
    let (missed, report) = misses("dgx-a100", &set, rel, Some(Algorithm::Ring), 2);
    assert!(missed.is_empty(), "{report}");
}

#[test]
fn dgx_a100_four_nodes_allreduce_within_fifteen_percent_from_64_mib() {
    // 128 MiB: the measured curve dips there (114.0 GB/s busbw out of place,
    // below its own 64 MiB point, 121.6 in place), which no algorithm
    // choice explains; every other size is within 15%.
    let (missed, report) = misses(
        "dgx-a100",
        &[("nodes", "4")],
        "collective/a100_4node_allreduce_dgx.csv",
        None,
        7,
    );
    assert_eq!(missed, vec![128 << 20], "{report}");
}

#[test]
fn oci_h100_two_nodes_nvls_tree_within_fifteen_percent_from_1_gib() {
    // NCCL chose (no NCCL_ALGO); 449-471 GB/s busbw is above both the ring's
    // NIC bound (8 x 50 GB/s x 0.94 = 376) and our tree's (393 at 16 GiB), so
    // the run used NVLS-tree, as `auto` does: every size within 15%.
    let (missed, report) = misses(
        "dgx-h100",
        &[("nodes", "2")],
        "collective/h100_2node_allreduce_oci.csv",
        None,
        5,
    );
    assert!(missed.is_empty(), "{report}");
    assert_eq!(report.matches("(nvls-tree)").count(), 5, "{report}");
}

#[test]
fn aws_p5_two_nodes_allreduce_within_fifteen_percent_from_64_mib() {
    // NCCL chose (no NCCL_ALGO); from 1 GiB its busbw (437-487 GB/s) is
    // above the ring's and the tree's bounds, i.e. NVLS-tree, as ours.
    // 64 MiB: we are 18% fast; the measured curve is a near-constant 55-110
    // us above our NVLS-tree from 1 to 64 MiB (EFA's per-message cost: p5
    // pays 69 us at 8 B), which the model does not have.
    let (missed, report) = misses(
        "dgx-h100",
        &[("nodes", "2")],
        "collective/h100_2node_allreduce_p5.csv",
        None,
        9,
    );
    assert_eq!(missed, vec![64 << 20], "{report}");
}

#[test]
fn aws_p4de_two_nodes_allreduce_within_fifteen_percent_from_64_mib() {
    // 64 MiB: EFA's fixed cost per message is far above InfiniBand's (161 us
    // at 8 B against 36-40 us on the InfiniBand and RoCE curves), which the
    // model does not have; every size from 128 MiB is within 15%.
    let (missed, report) = misses(
        "dgx-a100",
        &[("nodes", "2"), ("nic.bandwidth", "50Gb/s")],
        "collective/a100_2node_allreduce_p4de.csv",
        None,
        6,
    );
    assert_eq!(missed, vec![64 << 20], "{report}");
}

#[test]
fn two_node_tree_approaches_the_network_bound() {
    // Across two nodes each tree sends its half up and back down once, so
    // every direction of the network carries S over the m NICs: algbw is at
    // most m x NIC x network fraction, busbw that x 2(n-1)/n (352.5 GB/s for
    // 8 x 200 Gb/s at 0.94). Up and down overlap (split tree) and each
    // channel pipelines its own chunks, so 8 GiB gets within 10% of it.
    let t = super::load("dgx-h100", &[("nodes", "2"), ("nic.bandwidth", "200Gb/s")]);
    let g = Group::first(&t, 16).unwrap();
    let cal = Calibration::for_model(&g.device_model(&t)).unwrap();
    let op = CollectiveOp::AllReduce;
    let s: u64 = 8 << 30;
    let tree = time_collective(
        &t,
        &g,
        &op,
        s / 4,
        4,
        &cal,
        Some(Algorithm::Tree),
        Some(shardsim::collective::Protocol::Simple),
    )
    .unwrap();
    let bound = 8.0 * 25e9 * cal.simple.network_fraction * op.busbw_factor(16);
    let busbw = s as f64 / (tree.time.ps() as f64 * 1e-12) * op.busbw_factor(16);
    assert!(
        busbw <= bound && busbw > 0.9 * bound,
        "tree busbw {:.1} GB/s, bound {:.1}",
        busbw / 1e9,
        bound / 1e9
    );
}

/// The split tree (broadcast of a chunk as soon as the root has reduced it,
/// on trees of any size): on a chain of three ranks with four chunks the
/// first copy down leaves at step `height` = 2, not after the last chunk's
/// reduction (step 2 + 4), chunk `c` comes down `c` steps later, and every
/// chunk crosses each of the two edges twice.
#[test]
fn split_trees_start_the_broadcast_once_the_root_has_a_chunk() {
    use shardsim::collective::blocks::tree_allreduce;
    let parents = [None, Some(0), Some(1)];
    let chunks = [(0, 4), (4, 8), (8, 12), (12, 16)];
    let steps = tree_allreduce(&[0, 1, 2], &parents, &chunks);
    let first_copy = |lo: u64| {
        steps
            .iter()
            .position(|s| s.iter().any(|m| !m.reduce && m.src == lo))
            .expect("a copy down")
    };
    let at: Vec<usize> = chunks.iter().map(|&(lo, _)| first_copy(lo)).collect();
    assert_eq!(at, [2, 3, 4, 5]);
    let moved: u64 = steps.iter().flatten().map(|m| m.len).sum();
    assert_eq!(moved, 2 * 2 * 16);
}

/// Rail rings pay the protocol's hop along the data's path, each ring on its
/// own (NCCL's `(nsteps - nInterSteps) intraLat + nInterSteps interLat`),
/// not a network hop on every step because one of a rank's eight sends
/// leaves the node: on 16 DGX H100 nodes an allreduce of one element per
/// move (latency only) pays 254 steps, of which the data's path crosses the
/// network on 254 x 16 / 128. Before, every step paid the 14 us network hop
/// (4.33 ms for 4 KiB; now 2.16 ms against the formula's 1.93 plus the
/// routes' link latencies).
#[test]
fn rail_rings_pay_network_hops_along_the_data_path() {
    use shardsim::collective::Protocol;
    let t = super::load("dgx-h100", &[("nodes", "16")]);
    let g = Group::first(&t, 128).unwrap();
    let cal = Calibration::for_model(&g.device_model(&t)).unwrap();
    let op = CollectiveOp::AllReduce;
    let r = time_collective(
        &t,
        &g,
        &op,
        128 * 8,
        4,
        &cal,
        Some(Algorithm::Ring),
        Some(Protocol::Simple),
    )
    .unwrap();
    let p = &cal.simple;
    let steps = 2.0 * 127.0;
    let network = steps * 16.0 / 128.0;
    let formula = p.base_us + (steps - network) * p.nvlink_hop_us + network * p.network_hop_us;
    let ours = r.time.ps() as f64 / 1e6;
    assert!(
        ours >= formula && ours <= 1.2 * formula,
        "ring {ours:.1} us, NCCL's latency formula {formula:.1} us"
    );
}
