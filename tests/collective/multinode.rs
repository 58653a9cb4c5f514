//! Across nodes against published two-node nccl-tests allreduce curves (each
//! fixture's header cites its log and says how the fabric is described):
//! 2 x 8 H100 with 8 x 200 Gb/s NICs per node
//! (fixtures/collective/h100_2node_allreduce_a3mega.csv, as
//! fixtures/collective/a3mega_topology.toml `--nodes 2`: `dgx-h100` with
//! 200 Gb/s NICs, NVLS off as the run's NCCL profile set it) and 2 x 8 A100 with 16 x 100 Gb/s RoCE NICs per
//! node on OCI (fixtures/collective/a100_2node_allreduce_oci.csv, as `dgx-a100
//! --nodes 2 --set nic.count=16 --set nic.bandwidth=100Gb/s`: two NICs per
//! GPU), each with its NCCL buffers (A3 Mega's profile sets
//! `NCCL_BUFFSIZE=8388608`: 1 MiB chunks; the A3 fixture also states the
//! run's NCCL_ALGO, NCCL_PROTO and tuner table, `collective::policy`). `auto` must be within 15% of the
//! measured time at every size from 64 MiB on, except the sizes listed as
//! known misses, which must still miss (so a change that fixes or breaks one
//! shows here and in README's table); A3 Mega's tree as its tuner plugin ran
//! it from 16 MiB on; and the two-node tree against its network bound and its
//! pipeline fill (closed forms).

//!
//! More published curves, each compared from 64 MiB: as `dgx-a100 --nodes N`
//! (8 rails of 200 Gb/s) two DGX A100 with NCCL_ALGO=RING
//! (a100_2node_allreduce_dgx_ring.csv, compared with the ring), two Azure NDm
//! A100 v4 VMs (a100_2node_allreduce_ndmv4.csv, 1 and 4 GiB only) and four
//! DGX A100 (a100_4node_allreduce_dgx.csv); two OCI BM.GPU.H100.8 nodes
//! (3.2 Tb/s of RoCE each, h100_2node_allreduce_oci.csv, 1-16 GiB, as
//! `dgx-h100 --nodes 2`: NVLS-tree); two AWS p5.48xlarge (32 x 100 Gb/s EFA
//! each, h100_2node_allreduce_p5.csv, as `aws-p5 --nodes 2`) and two
//! p4de.24xlarge (4 x 100 Gb/s EFA each, a100_2node_allreduce_p4de.csv, as
//! `aws-p4de --nodes 2`: each NIC shared by two GPUs), both presets with
//! EFA's latency per network step.
use shardsim::collective::{
    auto_algorithms, time_collective, time_collective_cached, tuner::time_tree_steps, Algorithm,
    Calibration, CollectiveOp, Group, PathCache, Protocol, TreePeriod,
};

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

/// The A3 Mega run's machine as a topology file: `dgx-h100` with 200 Gb/s
/// NICs, NVLS off and its profile's `NCCL_BUFFSIZE=8388608` in its own
/// `[collective]` calibration (1 MiB chunks).
const A3: &str = "collective/a3mega_topology.toml";

/// How a run is described: its topology (a preset, or a fixture file with
/// its own calibration), overrides, and the algorithm its tuner was told to
/// run (`None`: `auto`).
struct Run<'a> {
    topology: String,
    set: &'a [(&'a str, &'a str)],
    algo: Option<Algorithm>,
    proto: Option<Protocol>,
}

fn a3(algo: Option<(Algorithm, Protocol)>) -> Run<'static> {
    let (algo, proto) = algo.unzip();
    Run {
        topology: fixture(A3).to_string_lossy().into_owned(),
        set: &[("nodes", "2")],
        algo,
        proto,
    }
}

/// A preset with overrides, `auto` or the algorithm a run forced.
fn preset<'a>(name: &str, set: &'a [(&'a str, &'a str)], algo: Option<Algorithm>) -> Run<'a> {
    Run {
        topology: name.into(),
        set,
        algo,
        proto: None,
    }
}

/// Check `fixture` against `run` from `from` bytes on; returns the sizes
/// whose error is `bound` (a fraction) or more, with a line per size.
fn misses(run: &Run, rel: &str, from: u64, bound: f64) -> (Vec<u64>, String) {
    let t = super::load(&run.topology, run.set);
    let g = Group::first(&t, t.num_devices()).unwrap();
    let cal = Calibration::for_topology(&t, &g.device_model(&t)).unwrap();
    let op = CollectiveOp::AllReduce;
    let (mut missed, mut report) = (Vec::new(), String::new());
    let mut checked = 0;
    for (size, measured) in rows(rel) {
        if size < from {
            continue;
        }
        let r = time_collective(&t, &g, &op, size / 4, 4, &cal, run.algo, run.proto).unwrap();
        let ours = r.time.ps() as f64 / 1e6;
        let err = (ours - measured) / measured;
        report += &format!(
            "{rel} {size} B: ours {ours:.1} us ({}), measured {measured} us ({:+.1}%)\n",
            r.algo.name(),
            err * 100.0
        );
        if err.abs() >= bound {
            missed.push(size);
        }
        checked += 1;
    }
    assert!(checked > 0, "{rel}: no size from {from} B");
    (missed, report)
}

/// [`misses`] of a preset from [`FROM`] at 15%, checking that `sizes` of the
/// fixture's rows were compared.
fn misses_n(
    name: &str,
    set: &[(&str, &str)],
    rel: &str,
    algo: Option<Algorithm>,
    sizes: usize,
) -> (Vec<u64>, String) {
    let (missed, report) = misses(&preset(name, set, algo), rel, FROM, 0.15);
    assert_eq!(report.lines().count(), sizes, "{rel}: sizes from 64 MiB");
    (missed, report)
}

#[test]
fn h100_two_nodes_200g_allreduce_within_fifteen_percent_from_64_mib() {
    let (missed, report) = misses(
        &a3(None),
        "collective/h100_2node_allreduce_a3mega.csv",
        FROM,
        0.15,
    );
    // `auto` under the run's profile as the fixture states it (NCCL_ALGO,
    // NCCL_PROTO and the tuner table transcribed from GCP's a3plus config,
    // tests/fixtures/collective/a3mega_tuner.csv): the table's row for 2
    // nodes x 16 ranks runs every allreduce as tree/Simple. Without it our
    // estimate, as NCCL's model, prefers the ring at 64 MiB, 27% below the
    // measurement (next test).
    assert!(missed.is_empty(), "{report}");
    for (size, _) in rows("collective/h100_2node_allreduce_a3mega.csv") {
        if size >= FROM {
            assert!(report.contains(&format!("{size} B: ours")), "{report}");
        }
    }
    assert!(
        report.lines().all(|l| l.contains("(tree)")),
        "the tuner's tree at every size: {report}"
    );
}

/// The same run without its tuner table (NCCL_ALGO=Ring,Tree and
/// NCCL_PROTO=Simple only, as NCCL's own tuner would choose under them):
/// the estimate takes ring/Simple at 64 MiB, which times 36% below the
/// measurement; the tree from 128 MiB. What the table changes.
#[test]
fn h100_two_nodes_without_the_tuner_table_misses_at_64_mib() {
    let run = Run {
        topology: fixture(A3).to_string_lossy().into_owned(),
        set: &[("nodes", "2"), ("collective.tuner_file", "\"\"")],
        algo: None,
        proto: None,
    };
    let (missed, report) = misses(
        &run,
        "collective/h100_2node_allreduce_a3mega.csv",
        FROM,
        0.15,
    );
    assert_eq!(missed, vec![64 << 20], "{report}");
    let at_64 = report.lines().find(|l| l.contains(" 67108864 B: "));
    assert!(at_64.is_some_and(|l| l.contains("(ring)")), "{report}");
}

/// The A3 Mega run as its tuner plugin ran it (tree, Simple at every size)
/// with its 8 MiB NCCL buffers: within 10% from 16 MiB on (-3.2% to +9.2%), the knee between
/// 16 and 32 MiB included (16 MiB is one 1 MiB chunk per tree of each
/// channel: the pipeline's fill, 16 ranks' worth of a chunk at a channel's
/// 20.7 GB/s).
#[test]
fn h100_two_nodes_tree_as_the_runs_tuner_set_it_within_ten_percent_from_16_mib() {
    let run = a3(Some((Algorithm::Tree, Protocol::Simple)));
    let (missed, report) = misses(
        &run,
        "collective/h100_2node_allreduce_a3mega.csv",
        16 << 20,
        0.10,
    );
    assert!(missed.is_empty(), "{report}");
}

#[test]
fn a100_two_nodes_allreduce_within_fifteen_percent_from_64_mib() {
    let run = Run {
        topology: "dgx-a100".into(),
        // NCCL 2.19.3 by the job's container (the fixture's header).
        set: &[
            ("nodes", "2"),
            ("nic.count", "16"),
            ("nic.bandwidth", "100Gb/s"),
            ("collective.nccl_version", "2.19"),
        ],
        algo: None,
        proto: None,
    };
    let (missed, report) = misses(&run, "collective/a100_2node_allreduce_oci.csv", FROM, 0.15);
    // NCCL's model takes tree/LL128 at 64-512 MiB and tree/Simple from
    // 1 GiB here, where the curve jumps (README, "OCI A100 read again");
    // the default chooser takes both its algorithm and its protocol since
    // session 38, when LL128 was fitted to the one-node A100 curve where
    // NCCL runs it (4-16 MiB): -4.4/-6.2/-6.7/-12.9% at 64-512 MiB
    // (-8.6/-7.4/-7.3/-13.1% with LL128's tree hop), -6.7..-9.6% from 1 GiB. (Until then NCCL's tree with our protocol,
    // Simple, ran -17.8..-32.2% at 128-512 MiB: the pinned misses.)
    assert!(missed.is_empty(), "{report}");
}

#[test]
fn dgx_a100_two_nodes_forced_ring_within_fifteen_percent_from_64_mib() {
    // The run set NCCL_ALGO=RING, so the ring is what it measured; every
    // size from 64 MiB to 4 GiB is within 15% (64 MiB -11.6% is the worst).
    let (missed, report) = misses_n(
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
    // 0.94 = 188). `auto` under the default chooser takes NCCL's algorithm
    // across nodes, the ring here (NCCL's model: 8 x 24 x 16/30 = 102.4
    // GB/s algbw against the tree's 94.4), within 1% of both points; under
    // `model` our estimate takes the tree (231 and 245 GB/s busbw), -20.5%
    // and -23.2%: the pins before session 35, kept as `model`'s.
    let set = [("nodes", "2")];
    let rel = "collective/a100_2node_allreduce_ndmv4.csv";
    let (missed, report) = misses_n("dgx-a100", &set, rel, None, 2);
    assert!(missed.is_empty(), "{report}");
    let model = [("nodes", "2"), ("collective.chooser", "model")];
    let (missed, report) = misses_n("dgx-a100", &model, rel, None, 2);
    assert_eq!(missed, vec![1 << 30, 4 << 30], "{report}");
    let (missed, report) = misses_n("dgx-a100", &set, rel, Some(Algorithm::Ring), 2);
    assert!(missed.is_empty(), "{report}");
}

#[test]
fn dgx_a100_four_nodes_allreduce_within_fifteen_percent_from_64_mib() {
    // 128 MiB: the measured curve dips there (114.0 GB/s busbw out of place,
    // below its own 64 MiB point, 121.6 in place): LL128's level. NCCL's
    // model takes ring/LL128 at 64-128 MiB, which the default chooser
    // (NCCL's algorithm and protocol since session 38) times at +9.6/-7.9%;
    // with our protocol (Simple) 128 MiB was -27.5%, the miss pinned here.
    let (missed, report) = misses_n(
        "dgx-a100",
        &[("nodes", "4")],
        "collective/a100_4node_allreduce_dgx.csv",
        None,
        7,
    );
    assert!(missed.is_empty(), "{report}");
}

#[test]
fn oci_h100_two_nodes_nvls_tree_within_fifteen_percent_from_1_gib() {
    // NCCL chose (no NCCL_ALGO); 449-471 GB/s busbw is above both the ring's
    // NIC bound (8 x 50 GB/s x 0.94 = 376) and our tree's (393 at 16 GiB), so
    // the run used NVLS-tree, as `auto` does: every size within 15%. NCCL
    // 2.23.4, printed in the log (the fixture's header).
    let (missed, report) = misses_n(
        "dgx-h100",
        &[("nodes", "2"), ("collective.nccl_version", "2.23")],
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
    // As `dgx-h100 --nodes 2` (InfiniBand's 2 x 1 us NIC latency) 64 MiB was
    // 18% fast: the measured curve sits 55-110 us above that NVLS-tree from
    // 1 to 64 MiB. `aws-p5` carries EFA's latency per network step
    // (aws-ofi-nccl's tuner: 20 us + 3 us per message): 64 MiB -8.4%.
    let (missed, report) = misses_n(
        "aws-p5",
        &[("nodes", "2")],
        "collective/h100_2node_allreduce_p5.csv",
        None,
        9,
    );
    assert!(missed.is_empty(), "{report}");
    assert_eq!(report.matches("(nvls-tree)").count(), 9, "{report}");
}

#[test]
fn aws_p4de_two_nodes_allreduce_within_fifteen_percent_from_64_mib() {
    // EFA's cost per network step is far above InfiniBand's (161 us at 8 B
    // against 36-40 us on the InfiniBand and RoCE curves): described as
    // `dgx-a100` with 4 x 100 Gb/s NICs 64 MiB was 17% fast; `aws-p4de`
    // carries aws-ofi-nccl's 20 + 3 us per network step: 64 MiB -9.6% as
    // tree/Simple. Session 38's LL128 fit made NCCL's tree/LL128 time 64
    // MiB at -22.0%, but the plugin turns LL and LL128 off on p4d/p4de
    // (NCCL_PROTO=simple: the preset's `[collective] protocols`): tree/Simple
    // everywhere, 64 MiB -12.8%.
    let (missed, report) = misses_n(
        "aws-p4de",
        &[("nodes", "2")],
        "collective/a100_2node_allreduce_p4de.csv",
        None,
        6,
    );
    assert!(missed.is_empty(), "{report}");
    assert_eq!(report.matches("(tree)").count(), 6, "{report}");
}

/// EFA's latency per network step, as the AWS presets describe it: a
/// two-rank ring allreduce between the nodes (one GPU each) is two steps,
/// each one message NIC -> leaf -> NIC, so with no protocol costs
/// (`Calibration::ideal`) it takes 2 x (the route's latency + a piece's
/// bytes over the NIC). The route's latency is aws-ofi-nccl's tuner figure
/// per network step, 20 us (`TUNER_NET_LATENCY`) + 3 us per message
/// (`TUNER_NET_COMP_OVERHEAD`), plus four PCIe links of 0.25 us; a piece
/// is one f32 at 100 Gb/s. With the calibrated protocol the time moves by
/// exactly 4 NIC links x the latency's change.
#[test]
fn efa_latency_per_network_step_is_the_closed_form() {
    const US: u64 = 1_000_000;
    let op = CollectiveOp::AllReduce;
    let time = |set: &[(&str, &str)], cal: Option<&Calibration>| {
        let t = super::load("aws-p4de", set);
        let g = Group::new(&t, vec![0, 8]).unwrap();
        let own = Calibration::for_topology(&t, &g.device_model(&t)).unwrap();
        let cal = cal.unwrap_or(&own);
        let r = time_collective(
            &t,
            &g,
            &op,
            2,
            4,
            cal,
            Some(Algorithm::Ring),
            Some(Protocol::Simple),
        )
        .unwrap();
        r.time.ps()
    };
    let two = [("nodes", "2")];
    let piece_ps = 4 * 1_000_000_000_000 / (100_000_000_000 / 8);
    let step_ps = (20 + 3) * US + 4 * (US / 4) + piece_ps;
    let ideal = time(&two, Some(&Calibration::ideal()));
    assert!(
        ideal.abs_diff(2 * step_ps) <= 2,
        "{ideal} ps != 2 x {step_ps} ps"
    );
    // InfiniBand's NIC latency (dgx-a100's 1 us) in place of EFA's 11.5 us.
    let ib = time(&[("nodes", "2"), ("nic.latency", "1us")], None);
    let efa = time(&two, None);
    assert_eq!(efa - ib, 4 * (11_500_000 - 1_000_000), "{efa} - {ib}");
}

/// A two-node tree's pipeline fill: with one chunk per tree of each
/// channel (16 MiB over 8 channels of 2 trees, 1 MiB chunks), the allreduce
/// is a chunk's climb and descent through 16 ranks (8 up, 8 down: a chain
/// of 8 in each node and the network hop), each moving it at a channel's
/// own rate: at least 16 chunk / rate, at most that plus a network hop and
/// the launch per rank.
#[test]
fn two_node_tree_fill_is_a_chunk_per_rank_at_the_channel_rate() {
    let t = super::load(&a3(None).topology, &[("nodes", "2")]);
    let g = Group::first(&t, 16).unwrap();
    let cal = Calibration::for_topology(&t, &g.device_model(&t)).unwrap();
    assert_eq!(cal.chunk_bytes, 1 << 20, "the run's NCCL_BUFFSIZE / 8");
    let s: u64 = 16 << 20;
    let r = time_collective(
        &t,
        &g,
        &CollectiveOp::AllReduce,
        s / 4,
        4,
        &cal,
        Some(Algorithm::Tree),
        Some(Protocol::Simple),
    )
    .unwrap();
    let ours = r.time.ps() as f64 / 1e6;
    let stage = cal.chunk_bytes as f64 / (cal.tree_channel_gbs * 1e9) * 1e6;
    let (lo, hi) = (
        16.0 * stage,
        16.0 * (stage + cal.simple.network_hop_us) + cal.simple.base_us,
    );
    assert!(
        ours >= lo && ours <= hi,
        "tree {ours:.1} us, fill bounds [{lo:.1}, {hi:.1}]"
    );
}

/// With NCCL's own chunk count (a budget of 512 chunks per tree: every
/// chunk 1 MiB, `calcCollChunking`'s one Simple step, at every size up to
/// 8 GiB) the two-node tree's time is periodic in its chunks: each further
/// 1 MiB chunk per tree costs the same (93.9 us) from 128 chunks on, to
/// within 0.01%; this is what lets the tree be timed past the simulation's
/// budget by its period instead of chunk by chunk (not built yet). Its time
/// then comes within 4% of the measured run at 2-8 GiB (the budget of 64
/// makes it +5.1..+9.2% there).
#[test]
fn two_node_tree_with_nccls_chunks_is_periodic_and_within_four_percent_at_2_to_8_gib() {
    let t = super::load(&a3(None).topology, &[("nodes", "2")]);
    let g = Group::first(&t, 16).unwrap();
    let mut cal = Calibration::for_topology(&t, &g.device_model(&t)).unwrap();
    cal.max_chunks = 512;
    let time = |s: u64| {
        let r = time_collective(
            &t,
            &g,
            &CollectiveOp::AllReduce,
            s / 4,
            4,
            &cal,
            Some(Algorithm::Tree),
            Some(Protocol::Simple),
        )
        .unwrap();
        r.time.ps() as f64 / 1e6
    };
    // Sizes of 128, 256 and 512 chunks of 1 MiB per tree (16 trees).
    let sizes: Vec<u64> = (31..=33).map(|k| 1u64 << k).collect();
    let times: Vec<f64> = sizes.iter().map(|&s| time(s)).collect();
    let period = (times[1] - times[0]) / 128.0;
    let next = (times[2] - times[1]) / 256.0;
    assert!(
        (next - period).abs() <= 1e-4 * period,
        "periods {period:.4} and {next:.4} us a chunk ({times:?})"
    );
    let measured = rows("collective/h100_2node_allreduce_a3mega.csv");
    for (s, ours) in sizes.iter().zip(&times) {
        let m = measured.iter().find(|r| r.0 == *s).unwrap().1;
        let err = (ours - m) / m;
        assert!(
            err.abs() < 0.04,
            "{s} B: {ours:.1} us vs {m} us ({err:+.3})"
        );
    }
}

#[test]
fn two_node_tree_approaches_the_network_bound() {
    // Across two nodes each tree sends its half up and back down once, so
    // every direction of the network carries S over the m NICs: algbw is at
    // most m x NIC x network fraction, busbw that x 2(n-1)/n (352.5 GB/s for
    // 8 x 200 Gb/s at 0.94). Up and down overlap (split tree) and each
    // channel pipelines its own chunks, so 8 GiB gets within 15% of it: the
    // simulation's budget of 64 chunks per tree makes them 8 MiB there (NCCL's
    // are 512 KiB), whose fill through 16 ranks at a channel's 20.7 GB/s is
    // 6.5 ms of the 51 ms (within 10% before each channel had its own rate).
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
        Some(Protocol::Simple),
    )
    .unwrap();
    let bound = 8.0 * 25e9 * cal.simple.network_fraction * op.busbw_factor(16);
    let busbw = s as f64 / (tree.time.ps() as f64 * 1e-12) * op.busbw_factor(16);
    assert!(
        busbw <= bound && busbw > 0.85 * bound,
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

/// A tree past the simulation's chunk budget is timed by its period
/// (`tuner::TreePeriod`: one run of `M` chunks of `chunk_bytes` per tree,
/// the period read off its steps' completions over the stretch where the
/// pipeline is full, the time moved along it to the real size). Against the
/// run with every chunk (`max_chunks` lifted, so the budget never binds) on
/// `dgx-h100` with 2, 4 and 16 nodes at sizes of 2 to 16 budgets' worth of
/// chunks: within 1% (2 and 4 nodes -0.02 to -0.05%, 16 nodes at 256 MiB
/// +0.06%, 1 GiB -0.04%). On 64 nodes at 1 GiB (128 chunks per tree, `M` =
/// 39) it is 1.9% fast (8,174 against 8,332 us): the period still grows
/// after the run's full stretch (57.7 us a chunk there, 59.8 from the 70th
/// chunk on; `M` = 64 would be 0.85% fast, but 128 nodes, exact at `3h`,
/// would pay for it too); the two runs of 13 and 26 chunks this replaced
/// were 3.3% fast. Checked at 2.5% there.
#[test]
fn tree_past_the_chunk_budget_is_timed_by_its_period_within_one_percent() {
    let op = CollectiveOp::AllReduce;
    let cases: [(&str, &[u64], f64); 4] = [
        ("2", &[2 << 30, 4 << 30], 0.01),
        // 4 nodes: -1.5% at 2 GiB since a tree's connections progress apart
        // (session 37): its up and down streams settle into their phase
        // over more chunks than the period's run of 64 holds.
        ("4", &[2 << 30, 4 << 30], 0.02),
        ("16", &[256 << 20, 1 << 30], 0.01),
        ("64", &[1 << 30], 0.025),
    ];
    for (nodes, sizes, within) in cases {
        let t = super::load("dgx-h100", &[("nodes", nodes)]);
        let n = t.devices().len() as u32;
        let g = Group::first(&t, n).unwrap();
        let cal = Calibration::for_model(&g.device_model(&t)).unwrap();
        let mut every = cal;
        every.max_chunks = 1 << 20;
        for &s in sizes {
            let time = |c: &Calibration| {
                let r = time_collective(
                    &t,
                    &g,
                    &op,
                    s / 4,
                    4,
                    c,
                    Some(Algorithm::Tree),
                    Some(Protocol::Simple),
                )
                .unwrap();
                r.time.ps() as f64
            };
            let (ours, full) = (time(&cal), time(&every));
            let err = (ours - full) / full;
            eprintln!(
                "{nodes} nodes {s} B: {:.1} vs {:.1} us ({err:+.5})",
                ours / 1e6,
                full / 1e6
            );
            assert!(
                err.abs() < within,
                "{nodes} nodes, {s} B: by period {:.1} us, chunk by chunk {:.1} us ({err:+.4})",
                ours / 1e6,
                full / 1e6
            );
        }
    }
}

/// One GPU per node (a data-parallel group under tensor parallelism over
/// the node): each tree of the double binary tree cuts its half of the
/// message in NCCL's 512 KiB chunks, as with more GPUs per node (it had cut
/// it in the whole message's chunk count, so its chunks were 256 KiB and
/// the period, read as one 512 KiB chunk per step off a run of twice the
/// steps, made 2 nodes x 1 GiB 59 GB/s, past the 50 GB/s NIC). The period
/// agrees with the run of every chunk (within 1% on 2 and 16 nodes), and
/// the time respects the
/// NIC: a rank sends (and receives) the whole message over its one NIC on 2
/// nodes (the root of one tree, a leaf of the other), twice that on more
/// (an inner rank of one tree: two children up, its parent down), at
/// Simple's 0.94 of the 400 Gb/s port.
#[test]
fn one_gpu_per_node_trees_keep_nccls_chunks_and_the_nics_rate() {
    let op = CollectiveOp::AllReduce;
    let nic = 0.94 * 50e9;
    // (nodes, the message's multiple through each NIC, period's error
    // bound, sizes): the period run is M = 6h chunks at most where the
    // rank-chunk budget is small (64 nodes: -1.1% at 256 MiB, -1.7% at
    // 1 GiB; 256 nodes -0.3% / -1.8%), as 64 full nodes are held to 2.5%.
    let cases: [(&str, f64, f64, &[u64]); 3] = [
        ("2", 1.0, 0.01, &[256 << 20, 1 << 30]),
        ("16", 2.0, 0.01, &[256 << 20, 1 << 30]),
        ("64", 2.0, 0.025, &[256 << 20]),
    ];
    for (nodes, per_nic, within, sizes) in cases {
        let t = super::load("dgx-h100", &[("nodes", nodes)]);
        let n: u32 = nodes.parse().unwrap();
        let g = Group::new(&t, (0..n).map(|k| 8 * k).collect()).unwrap();
        let cal = Calibration::for_model(&g.device_model(&t)).unwrap();
        let mut every = cal;
        every.max_chunks = 1 << 20;
        for &s in sizes {
            let time = |c: &Calibration| {
                time_collective(
                    &t,
                    &g,
                    &op,
                    s / 2,
                    2,
                    c,
                    Some(Algorithm::Tree),
                    Some(Protocol::Simple),
                )
                .unwrap()
                .time
                .ps() as f64
                    * 1e-12
            };
            let (ours, full) = (time(&cal), time(&every));
            let err = ours / full - 1.0;
            assert!(
                err.abs() < within,
                "{nodes} nodes, {s} B: by period {ours:.6} s, chunk by chunk {full:.6} s"
            );
            let floor = per_nic * s as f64 / nic;
            assert!(
                ours >= floor,
                "{nodes} nodes, {s} B: {ours:.6} s under the NIC's {floor:.6} s"
            );
        }
    }
}

/// NVLS-tree past the chunk budget is timed by its period as trees are
/// (`tuner::TreePeriod` with `Algorithm::NvlsTree`: parts of NCCL's
/// pipeline chunks, 16 x its NVLS chunk, from one run of `M` of them whose
/// full stretch is as long as its fill): against the run with every chunk
/// (`max_chunks` lifted) on `dgx-h100` with 2, 4 and 16 nodes, within 1%
/// (2 nodes 4 GiB +0.29%; 4 nodes 1 / 2 GiB +0.36 / +0.55%; 16 nodes
/// 512 MiB / 1 GiB -0.34 / -0.13%; 128 MiB, 16 chunks of at most `M` = 24,
/// is run whole: exact). The budget's chunks (64 / 32 / 8 per part, each
/// larger) were +2.7%, +4.1 / +5.1% and +32.5 / +36.9% slow; on 128 nodes
/// at 8 GiB the budget's 8 chunks gave 150.0 ms (57.3 GB/s algbw), the
/// period 106.7 ms (80.5 GB/s, NCCL's model about 80: 160 GB/s busbw
/// class), the run of every chunk 104.2 ms.
#[test]
fn nvls_tree_past_the_chunk_budget_is_timed_by_its_period_within_one_percent() {
    let op = CollectiveOp::AllReduce;
    let cases: [(&str, &[u64]); 3] = [
        ("2", &[4 << 30]),
        ("4", &[1 << 30, 2 << 30]),
        ("16", &[128 << 20, 512 << 20, 1 << 30]),
    ];
    for (nodes, sizes) in cases {
        let t = super::load("dgx-h100", &[("nodes", nodes)]);
        let n = t.devices().len() as u32;
        let g = Group::first(&t, n).unwrap();
        let cal = Calibration::for_model(&g.device_model(&t)).unwrap();
        let mut every = cal;
        every.max_chunks = 1 << 20;
        for &s in sizes {
            let total = s / 4;
            let x = TreePeriod::of(Algorithm::NvlsTree, &t, &g, &op, total, 4, &cal)
                .expect("past the budget");
            // The run of every chunk is no period run.
            assert!(TreePeriod::of(Algorithm::NvlsTree, &t, &g, &op, total, 4, &every).is_none());
            let time = |c: &Calibration| {
                let r = time_collective(&t, &g, &op, total, 4, c, Some(Algorithm::NvlsTree), None)
                    .unwrap();
                r.time.ps() as f64
            };
            let (ours, full) = (time(&cal), time(&every));
            let err = (ours - full) / full;
            eprintln!(
                "{nodes} nodes {s} B: {:.1} vs {:.1} us ({err:+.5}), run of {} chunks",
                ours / 1e6,
                full / 1e6,
                x.chunks
            );
            if x.extrapolated() {
                assert!(err.abs() < 0.01, "{nodes} nodes, {s} B: {err:+.4}");
            } else {
                assert_eq!(ours, full, "{nodes} nodes, {s} B: run whole");
            }
        }
    }
}

/// The period comes from one run: its steps' completions. With every chunk
/// run (16 `dgx-h100` nodes, 1 GiB: 128 chunks of 512 KiB per tree, height
/// 11), the last step ends at the run's time less its base latency, and the
/// spacing over the run's full stretch (steps 21 to 32 for `M` = 33) is
/// within 1% of the spacing over the rest of the full pipeline (steps 32
/// to 127): what `TreePeriod` extrapolates with is what the longer run does.
#[test]
fn a_tree_runs_period_is_steady_across_its_full_pipeline() {
    let t = super::load("dgx-h100", &[("nodes", "16")]);
    let g = Group::first(&t, 128).unwrap();
    let cal = Calibration::for_model(&g.device_model(&t)).unwrap();
    let mut every = cal;
    every.max_chunks = 1 << 20;
    let total = (1u64 << 30) / 4;
    let (timed, steps) = time_tree_steps(
        &t,
        &g,
        Algorithm::Tree,
        total,
        4,
        &every,
        Some(Protocol::Simple),
    )
    .unwrap();
    // 128 chunks per tree, 2h - 1 = 21 steps of fill and drain.
    assert_eq!(steps.len(), 128 + 21);
    let base = (every.params(Algorithm::Tree, Protocol::Simple).base_us * 1e6).round() as u64;
    assert_eq!(steps.last().unwrap().ps() + base, timed.time.ps());
    let op = CollectiveOp::AllReduce;
    let x = TreePeriod::of(Algorithm::Tree, &t, &g, &op, total, 4, &cal).unwrap();
    assert_eq!((x.chunks, x.height), (33, 11));
    let spacing = |a: usize, b: usize| (steps[b].ps() - steps[a].ps()) as f64 / (b - a) as f64;
    let (run, rest) = (spacing(21, 32), spacing(32, 127));
    assert!(
        (run - rest).abs() < 0.01 * rest,
        "{run:.0} ps a chunk over the run's stretch, {rest:.0} after it"
    );
}

/// `auto` ranks a tree past the chunk budget by its time, and its rivals
/// by theirs (or by their near ties' times), so the algorithm it picks is
/// the fastest one timed: on `dgx-h100` with 16, 64 and 128 nodes from
/// 64 MiB to 8 GiB, never more than 1% slower than the best forced
/// algorithm (each timed with its own protocol pick). Before, it took the
/// tree at 64 nodes 4 GiB (288.1 against the ring's 318.6 GB/s busbw), 128
/// nodes 2 GiB (157.8 against 200.2), 16 nodes 512 MiB and 1 GiB, and
/// NVLS-tree at 16 nodes 64 MiB (4.5% slower than the tree).
#[test]
fn auto_across_nodes_is_never_slower_than_the_best_forced_algorithm() {
    let op = CollectiveOp::AllReduce;
    for nodes in ["16", "64", "128"] {
        let t = super::load("dgx-h100", &[("nodes", nodes)]);
        let n = t.devices().len() as u32;
        let g = Group::first(&t, n).unwrap();
        let cal = Calibration::for_model(&g.device_model(&t)).unwrap();
        // Each as a sweep times it (a cache per sweep).
        let mut caches: Vec<PathCache> = (0..=auto_algorithms(&op).len())
            .map(|_| PathCache::new())
            .collect();
        let mut s: u64 = 64 << 20;
        while s <= 8 << 30 {
            let (first, rest) = caches.split_first_mut().unwrap();
            let auto =
                time_collective_cached(&t, &g, &op, s / 4, 4, &cal, None, None, first).unwrap();
            let mut best: Option<(f64, Algorithm)> = None;
            for (&a, cache) in auto_algorithms(&op).iter().zip(rest.iter_mut()) {
                let Ok(r) =
                    time_collective_cached(&t, &g, &op, s / 4, 4, &cal, Some(a), None, cache)
                else {
                    continue;
                };
                let us = r.time.ps() as f64 / 1e6;
                if best.map_or(true, |(b, _)| us < b) {
                    best = Some((us, a));
                }
            }
            let (b, algo) = best.unwrap();
            let ours = auto.time.ps() as f64 / 1e6;
            assert!(
                ours <= b * 1.01,
                "{nodes} nodes, {s} B: auto took {:?} at {ours:.1} us, {algo:?} takes {b:.1} us",
                auto.algo
            );
            s *= 2;
        }
    }
}

/// Channels over both NICs of every GPU: two nodes of 8 A100 with 16 x
/// 100 Gb/s (OCI BM.GPU4.8) at 8 GiB. The ring reaches the network bound of
/// all 16 NICs, busbw 16 x 12.5 GB/s x the network fraction (each rank's
/// ring traffic crosses the network at that share of its rings). The tree
/// (on A100 below its NIC bound, that x 2(n-1)/n, as with 8 x 200 Gb/s) is
/// above what one NIC per GPU could carry (half that bound) and within 1%
/// of the same machine described as 8 x 200 Gb/s (the same 1.6 Tb/s).
#[test]
fn channels_spread_over_both_nics_of_every_gpu() {
    let sixteen = super::load(
        "dgx-a100",
        &[
            ("nodes", "2"),
            ("nic.count", "16"),
            ("nic.bandwidth", "100Gb/s"),
        ],
    );
    let eight = super::load("dgx-a100", &[("nodes", "2")]);
    let op = CollectiveOp::AllReduce;
    let s: u64 = 8 << 30;
    let busbw = |t: &shardsim::topology::Topology, algo| {
        let g = Group::first(t, 16).unwrap();
        let cal = Calibration::for_model(&g.device_model(t)).unwrap();
        let simple = Some(shardsim::collective::Protocol::Simple);
        let r = time_collective(t, &g, &op, s / 4, 4, &cal, Some(algo), simple).unwrap();
        let fraction = cal.simple.network_fraction;
        (
            s as f64 / (r.time.ps() as f64 * 1e-12) * op.busbw_factor(16),
            fraction,
        )
    };
    let (ring, fraction) = busbw(&sixteen, Algorithm::Ring);
    let nics = 16.0 * 12.5e9 * fraction;
    assert!(
        ring <= nics && ring > 0.9 * nics,
        "ring busbw {:.1} GB/s, bound {:.1}",
        ring / 1e9,
        nics / 1e9
    );
    let (tree, _) = busbw(&sixteen, Algorithm::Tree);
    let (tree8, _) = busbw(&eight, Algorithm::Tree);
    let bound = nics * op.busbw_factor(16);
    assert!(
        tree <= bound && tree > 0.6 * bound && (tree / tree8 - 1.0).abs() < 0.01,
        "tree busbw {:.1} GB/s (8 x 200 Gb/s: {:.1}), bound {:.1}, one NIC per GPU {:.1}",
        tree / 1e9,
        tree8 / 1e9,
        bound / 1e9,
        bound / 2e9
    );
}

/// Plans over two NICs per GPU (`PlanOptions::lanes = 2`) on two nodes of
/// four: every rank ends with the exact integer result of the collective
/// (the same as with one lane: whole buffers, or each rank's reduced piece
/// for reduce-scatter, whose other elements are scratch), and the moves that cross nodes are
/// split evenly between lanes 0 and 1 (both NICs of every GPU carry its
/// channels), for the ring's allreduce, all-gather and reduce-scatter and
/// the tree's allreduce.
#[test]
fn plans_over_two_nics_per_gpu_compute_the_same_and_use_both_lanes() {
    use shardsim::base::DType;
    use shardsim::collective::{build, data, PlanOptions};
    use shardsim::tensor::{CollectiveReduction, Data, Tensor};
    let n = 8;
    let nodes = vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7]];
    let total = 8 * 4 * 2 * 6;
    for (op, algo) in [
        (CollectiveOp::AllReduce, Algorithm::Ring),
        (CollectiveOp::AllGather, Algorithm::Ring),
        (CollectiveOp::ReduceScatter, Algorithm::Ring),
        (CollectiveOp::AllReduce, Algorithm::Tree),
    ] {
        let run = |lanes: usize| {
            let opts = PlanOptions {
                chunks: 4,
                channel_chunks: 0,
                nvls_chunks: 0,
                tree_chunks: 0,
                nodes: nodes.clone(),
                lanes,
                tree_channel_cap: 0,
                collnet_chunks: 0,
            };
            let plan = build(&op, algo, n, total, &opts).unwrap();
            let mut bufs: Vec<Tensor> = (0..n)
                .map(|r| {
                    let v: Vec<i128> = (0..plan.buffer_len)
                        .map(|i| (r as i128 * 7 + i as i128 * 3) % 11 - 5)
                        .collect();
                    Tensor::new(vec![plan.buffer_len], Data::from_i128s(DType::I32, &v)).unwrap()
                })
                .collect();
            data::execute(&plan, &mut bufs, CollectiveReduction::Sum).unwrap();
            let values: Vec<Vec<f64>> = bufs.iter().map(Tensor::to_f64_vec).collect();
            let result: Vec<Vec<f64>> = if op == CollectiveOp::ReduceScatter {
                plan.reduced
                    .iter()
                    .map(|&(r, off, len)| values[r][off as usize..(off + len) as usize].to_vec())
                    .collect()
            } else {
                values
            };
            let mut per_lane = [0usize; 2];
            for m in plan.steps.iter().flatten() {
                if m.from / 4 != m.to / 4 && m.len > 0 {
                    per_lane[m.lane as usize] += 1;
                }
            }
            (result, per_lane)
        };
        let (one, lanes1) = run(1);
        let (two, lanes2) = run(2);
        assert!(one == two, "{} {}: results differ", op.name(), algo.name());
        assert_eq!(lanes1[1], 0);
        assert!(
            lanes2[0] > 0 && lanes2[0] == lanes2[1],
            "{} {}: {lanes2:?}",
            op.name(),
            algo.name()
        );
    }
}

/// NCCL 2.19's tree/Simple chunks (`collective.nccl_version = "2.19"`,
/// the OCI A100 run's release): on OCI BM.GPU4.8 (32 NCCL channels, tree
/// depth 8) 64 KiB at 64 MiB, 128 KiB at 128 and 256 MiB, 256 KiB at 512
/// MiB, the 512 KiB step from 1 GiB (worked in
/// `nccl_model::tests::nccl_2_19_tree_chunks_shrink_as_worked_by_hand`);
/// our trees are cut in them (64 MiB: 4 MiB per tree, 64 chunks, where
/// the step gives 8), later releases keep the step. A tree past the chunk
/// budget is timed by a run of the message's chunks, whatever the rule
/// would give the run's smaller message: four DGX A100 at 4 GiB have 512
/// KiB chunks, and the run's 512 MiB would get 256 KiB.
#[test]
fn nccl_2_19_trees_are_cut_in_its_chunks() {
    use shardsim::collective::tree_chunk_bytes;
    use shardsim::collective::tuner::plan_options;
    let oci = |version: Option<&str>| {
        let mut set = vec![
            ("nodes", "2"),
            ("nic.count", "16"),
            ("nic.bandwidth", "100Gb/s"),
        ];
        set.extend(version.map(|v| ("collective.nccl_version", v)));
        super::load("dgx-a100", &set)
    };
    let t = oci(Some("2.19"));
    let g = Group::first(&t, 16).unwrap();
    let cal = Calibration::for_model(&g.device_model(&t)).unwrap();
    let kib = |mib: u64| tree_chunk_bytes(&t, &g, &cal, mib << 20) >> 10;
    assert_eq!([64, 128, 256, 512, 1024].map(kib), [64, 128, 128, 256, 512]);
    assert_eq!(
        plan_options(&t, &g, &cal, 64 << 20).tree_channel_chunks(),
        64
    );
    for v in [None, Some("2.21"), Some("2.23")] {
        let t = oci(v);
        assert_eq!(tree_chunk_bytes(&t, &g, &cal, 64 << 20), cal.chunk_bytes);
        assert_eq!(
            plan_options(&t, &g, &cal, 64 << 20).tree_channel_chunks(),
            8
        );
    }
    let op = CollectiveOp::AllReduce;
    let t = super::load(
        "dgx-a100",
        &[("nodes", "4"), ("collective.nccl_version", "2.19")],
    );
    let g = Group::first(&t, 32).unwrap();
    let total = (4u64 << 30) / 4;
    let x = TreePeriod::of(Algorithm::Tree, &t, &g, &op, total, 4, &cal).unwrap();
    assert_eq!(x.chunk_bytes, 512 << 10);
    assert!(x.extrapolated());
    let run = x.run_total * 4;
    assert_eq!(tree_chunk_bytes(&t, &g, &cal, run), 256 << 10);
    assert_eq!(
        plan_options(&t, &g, &x.cal, run).tree_channel_chunks(),
        x.chunks
    );
    let free = Calibration {
        tree_chunk_fixed: None,
        ..x.cal
    };
    assert_eq!(
        plan_options(&t, &g, &free, run).tree_channel_chunks(),
        2 * x.chunks
    );
}

/// `aws-p4de` runs Simple only (aws-ofi-nccl sets NCCL_PROTO=simple on
/// p4d/p4de, the preset's `[collective] protocols`): `auto` takes Simple at
/// every size, and an explicit LL128 is refused as NCCL_PROTO would refuse it.
#[test]
fn aws_p4de_runs_simple_only_as_its_plugin_sets_it() {
    let op = CollectiveOp::AllReduce;
    let t = super::load("aws-p4de", &[("nodes", "2")]);
    let g = Group::first(&t, t.num_devices()).unwrap();
    let cal = Calibration::for_topology(&t, &g.device_model(&t)).unwrap();
    for log in (3..=31).step_by(4) {
        let r = time_collective(&t, &g, &op, (1u64 << log) / 4, 4, &cal, None, None).unwrap();
        assert_eq!(r.proto, Protocol::Simple, "2^{log} B: {}", r.proto);
    }
    let forced = time_collective(
        &t,
        &g,
        &op,
        1 << 20,
        4,
        &cal,
        Some(Algorithm::Tree),
        Some(Protocol::Ll128),
    );
    assert!(forced.is_err(), "{forced:?}");
}

/// `nic.reported_latency` (what the net plugin reports to NCCL: 75 us on the
/// AWS presets) enters NCCL's model only: on two p5 nodes at 8 MiB it adds
/// 2 x 75 us per tree level to NVLS-tree/Simple and 75 to tree/LL128, so
/// NCCL's pick turns from NVLS-tree to tree/LL128; a forced pair times the
/// same with and without it (no transfer waits for it).
#[test]
fn reported_network_latency_moves_nccls_pick_not_the_timing() {
    let op = CollectiveOp::AllReduce;
    let run = |set: &[(&str, &str)], algo, proto| {
        let t = super::load("aws-p5", set);
        let g = Group::first(&t, t.num_devices()).unwrap();
        let cal = Calibration::for_topology(&t, &g.device_model(&t)).unwrap();
        let r = time_collective(&t, &g, &op, (8 << 20) / 4, 4, &cal, algo, proto).unwrap();
        (r.algo, r.proto, r.time)
    };
    let reported = [("nodes", "2")];
    let zero = [("nodes", "2"), ("nic.reported_latency", "0us")];
    let with = run(&reported, None, None);
    let without = run(&zero, None, None);
    assert_eq!((with.0, with.1), (Algorithm::Tree, Protocol::Ll128));
    assert_eq!(
        (without.0, without.1),
        (Algorithm::NvlsTree, Protocol::Simple)
    );
    for (a, p) in [
        (Algorithm::Tree, Protocol::Ll128),
        (Algorithm::NvlsTree, Protocol::Simple),
    ] {
        assert_eq!(
            run(&reported, Some(a), Some(p)),
            run(&zero, Some(a), Some(p))
        );
    }
}

/// Mid-size messages: NCCL keeps a tree channel per 32 KiB of a message
/// (`computeColl`'s thread threshold), so from 512 KiB two DGX-class nodes
/// run every channel (`algorithms::tree_channel_cap`). Until session 38 a
/// tree ran no more channels than 512 KiB pipeline chunks, i.e. one channel
/// up to 1 MiB, and its whole message went down one chain: A3 Mega (its own
/// topology and tuner, tree/Simple) was +22/+99/+116% at 128 KiB/512 KiB/
/// 2 MiB, p4de (Simple only) +20/+108/+35%. Now within 11% at those sizes.
#[test]
fn mid_size_trees_run_the_channels_nccl_keeps() {
    assert_eq!(
        shardsim::collective::algorithms::tree_channel_cap(32 << 10),
        1
    );
    assert_eq!(
        shardsim::collective::algorithms::tree_channel_cap(128 << 10),
        2
    );
    assert_eq!(
        shardsim::collective::algorithms::tree_channel_cap(512 << 10),
        8
    );
    let mid = |size: u64| (128 << 10..=2 << 20).contains(&size);
    for (run, rel) in [
        (a3(None), "collective/h100_2node_allreduce_a3mega.csv"),
        (
            preset("aws-p4de", &[("nodes", "2")], None),
            "collective/a100_2node_allreduce_p4de.csv",
        ),
    ] {
        let (missed, report) = misses(&run, rel, 128 << 10, 0.11);
        let missed: Vec<u64> = missed.into_iter().filter(|&s| mid(s)).collect();
        assert!(missed.is_empty(), "{report}");
        let checked = report
            .lines()
            .filter(|l| {
                l.split_whitespace()
                    .nth(1)
                    .and_then(|s| s.parse::<u64>().ok())
                    .is_some_and(mid)
            })
            .count();
        assert!(checked >= 3, "{report}");
    }
}

/// LL128's tree hop (`tree_nvlink_hop_us`, 1.9 us on A100 against the ring
/// step's 4.7): OCI A100's two nodes, where NCCL's model runs tree/LL128 from
/// 512 KiB to 512 MiB, within 10% at 512 KiB-8 MiB (16 and 32 MiB -13.8 and
/// -9.1%; a chain hop at the ring step's cost timed 512 KiB/2 MiB/8 MiB
/// +52/+33/+21%); a ring keeps its step.
#[test]
fn tree_ll128_hops_are_not_ring_steps() {
    let t = super::load("dgx-a100", &[]);
    let g = Group::first(&t, t.num_devices()).unwrap();
    let cal = Calibration::for_topology(&t, &g.device_model(&t)).unwrap();
    assert_eq!(
        cal.params(Algorithm::Tree, Protocol::Ll128).nvlink_hop_us,
        1.9
    );
    assert_eq!(
        cal.params(Algorithm::Ring, Protocol::Ll128).nvlink_hop_us,
        4.7
    );
    assert_eq!(cal.params(Algorithm::Tree, Protocol::Simple), cal.simple);
    let run = preset(
        "dgx-a100",
        &[
            ("nodes", "2"),
            ("nic.count", "16"),
            ("nic.bandwidth", "100Gb/s"),
            ("collective.nccl_version", "2.19"),
        ],
        None,
    );
    let rel = "collective/a100_2node_allreduce_oci.csv";
    let (missed, report) = misses(&run, rel, 512 << 10, 0.10);
    let mid: Vec<u64> = missed.into_iter().filter(|&s| s <= 8 << 20).collect();
    assert!(mid.is_empty(), "{report}");
    assert!(
        report.contains("524288 B: ours") && report.contains("(tree)"),
        "{report}"
    );
}
