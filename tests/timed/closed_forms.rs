//! Closed forms: a compute step takes launch + max(FLOPs / (peak x eff),
//! bytes / (bandwidth x eff)); a collective step takes what the collectives
//! layer gives for the same operation and group; dependent steps add up,
//! independent compute overlaps with communication.

use shardsim::collective::{run_collective, Calibration, CollectiveOp, Group};
use shardsim::engine::{Jitter, Stragglers, Time};
use shardsim::exec::timed::{report, run_timed, trace, Span, StreamKind, TimedOptions, Timeline};

use super::{dgx_h100, program};

/// H100 SXM5 f32 peak (the preset's `f32 = "67TFLOP/s"`) and HBM3 bandwidth.
const PEAK_F32: f64 = 67e12;
const HBM: f64 = 3350e9;
/// The compiled-in roofline defaults (sim/exec/timed/roofline.toml).
const COMPUTE_EFF: f64 = 0.75;
const MEMORY_EFF: f64 = 0.85;
const LAUNCH_S: f64 = 2e-6;

fn roofline_ps(flops: f64, bytes: f64) -> u64 {
    let s = LAUNCH_S + (flops / (PEAK_F32 * COMPUTE_EFF)).max(bytes / (HBM * MEMORY_EFF));
    (s * 1e12).ceil() as u64
}

fn spans(t: &Timeline, device: u64, stream: StreamKind) -> Vec<&Span> {
    t.spans
        .iter()
        .filter(|s| s.device == device && s.stream == stream)
        .collect()
}

fn dur(s: &Span) -> u64 {
    s.end_ps - s.start_ps
}

/// The all-reduce of 1024 x 1024 f32 over the 8 GPUs, by the collectives layer.
fn allreduce_8_ps() -> u64 {
    let topo = dgx_h100();
    let group = Group::first(&topo, 8).unwrap();
    let cal = Calibration::for_model(&group.device_model(&topo)).unwrap();
    let r = run_collective(
        &topo,
        &group,
        &CollectiveOp::AllReduce,
        1024 * 1024,
        4,
        &cal,
        None,
        None,
    )
    .unwrap();
    r.time.0
}

#[test]
fn a_sharded_matmul_is_its_roofline_then_the_collective_layers_all_reduce() {
    let p = program("timed/dot_allreduce.mlir");
    let t = run_timed(&p, &dgx_h100(), &TimedOptions::default()).unwrap();
    // Local dot 1024x1024x1024: 2^31 FLOPs; reads 2 x 4 MiB, writes 4 MiB.
    let dot = roofline_ps(2.0 * 1024f64.powi(3), 3.0 * 4.0 * 1024.0 * 1024.0);
    let ar = allreduce_8_ps();
    for d in 0..8 {
        let c = spans(&t, d, StreamKind::Compute);
        let m = spans(&t, d, StreamKind::Comm);
        assert_eq!(c.len(), 1, "{c:?}");
        assert_eq!(m.len(), 1, "{m:?}");
        assert_eq!(
            (c[0].op.as_str(), c[0].start_ps, dur(c[0])),
            ("dot", 0, dot)
        );
        assert_eq!(c[0].flops, 1 << 31);
        assert_eq!(
            (m[0].op.as_str(), m[0].start_ps, dur(m[0])),
            ("all_reduce", dot, ar)
        );
    }
    assert_eq!(t.makespan_ps, dot + ar);
    let s = report::summarize(&t, &dgx_h100());
    assert_eq!(s.step_time_ps, dot + ar);
    assert!(s.per_device.iter().all(|d| d.exposed_comm_ps == ar));
}

#[test]
fn independent_compute_overlaps_the_all_reduce() {
    let p = program("timed/overlap.mlir");
    let t = run_timed(&p, &dgx_h100(), &TimedOptions::default()).unwrap();
    let mib = 1024.0 * 1024.0;
    let dot = roofline_ps(2.0 * 1024f64.powi(3), 12.0 * mib);
    let exp = roofline_ps(mib, 8.0 * mib);
    let add = roofline_ps(mib, 12.0 * mib);
    let ar = allreduce_8_ps();
    assert!(ar > exp, "the chain must hide inside the all-reduce");
    for d in 0..8 {
        let c = spans(&t, d, StreamKind::Compute);
        let ops: Vec<&str> = c.iter().map(|s| s.op.as_str()).collect();
        assert_eq!(ops, ["dot", "exponential", "add"]);
        // The exponential starts when the dot ends, alongside the all-reduce.
        assert_eq!((c[1].start_ps, dur(c[1])), (dot, exp));
        assert_eq!(spans(&t, d, StreamKind::Comm)[0].start_ps, dot);
        assert_eq!((c[2].start_ps, dur(c[2])), (dot + ar, add));
    }
    assert_eq!(t.makespan_ps, dot + ar + add);
    let s = report::summarize(&t, &dgx_h100());
    assert!(s.per_device.iter().all(|d| d.exposed_comm_ps == ar - exp));
    assert!(s.per_device.iter().all(|d| d.comm_busy_ps == ar));
}

#[test]
fn a_straggler_delays_its_group_at_the_collective() {
    let p = program("timed/dot_allreduce.mlir");
    let base = run_timed(&p, &dgx_h100(), &TimedOptions::default()).unwrap();
    let mut stragglers = Stragglers::new();
    stragglers.insert(3, 3.0).unwrap();
    let opts = TimedOptions {
        stragglers,
        ..TimedOptions::default()
    };
    let t = run_timed(&p, &dgx_h100(), &opts).unwrap();
    let dot = dur(spans(&base, 0, StreamKind::Compute)[0]);
    let slow = Time(dot).scaled(3.0).unwrap().0;
    assert_eq!(dur(spans(&t, 3, StreamKind::Compute)[0]), slow);
    assert_eq!(dur(spans(&t, 0, StreamKind::Compute)[0]), dot);
    // Everyone waits for device 3 before the all-reduce starts.
    for d in 0..8 {
        assert_eq!(spans(&t, d, StreamKind::Comm)[0].start_ps, slow);
    }
    assert_eq!(t.makespan_ps, base.makespan_ps + slow - dot);
}

#[test]
fn the_same_seed_gives_the_same_bytes_and_another_seed_other_times() {
    let p = program("timed/overlap.mlir");
    let topo = dgx_h100();
    let with_seed = |seed| {
        let opts = TimedOptions {
            seed,
            jitter: Some(Jitter::new(0.1).unwrap()),
            ..TimedOptions::default()
        };
        let t = run_timed(&p, &topo, &opts).unwrap();
        (trace::chrome_trace(&t, &topo), trace::events_csv(&t))
    };
    let a = with_seed(7);
    assert_eq!(a, with_seed(7));
    assert_ne!(a.0, with_seed(8).0);
    // Without jitter the seed does not matter.
    let plain = |seed| {
        let opts = TimedOptions {
            seed,
            ..TimedOptions::default()
        };
        trace::events_csv(&run_timed(&p, &topo, &opts).unwrap())
    };
    assert_eq!(plain(1), plain(2));
}

/// A program that runs its node-local all-gathers and reduce-scatters with
/// kernels of its own (`node_local_algorithm`, Transformer Engine's
/// userbuffers: one-shot over NVLink) gets the collectives layer's time for
/// that algorithm inside a node, and NCCL's choice for the groups that
/// span nodes: the reduce-scatter inside each DGX H100 node takes what
/// `direct` takes for its 16 MiB on the node's 8 GPUs (faster than the
/// ring), the all-gather between the 2 nodes is unchanged.
#[test]
fn node_local_collectives_run_the_algorithm_asked_for_the_others_nccls_choice() {
    use shardsim::collective::Algorithm;
    let p = program("timed/reduce_scatter_local_and_across.mlir");
    let topo = shardsim::topology::load_nodes("dgx-h100", 2, &[]).unwrap();
    let comm = |opts: &TimedOptions| {
        let t = run_timed(&p, &topo, opts).unwrap();
        let mut out: Vec<(String, u64, String)> = spans(&t, 0, StreamKind::Comm)
            .into_iter()
            .map(|s| (s.op.clone(), dur(s), s.detail.clone()))
            .collect();
        out.sort();
        out
    };
    let nccl = comm(&TimedOptions::default());
    let asked = comm(&TimedOptions {
        node_local_algorithm: Some(Algorithm::Direct),
        ..TimedOptions::default()
    });
    let ops: Vec<&str> = nccl.iter().map(|c| c.0.as_str()).collect();
    assert_eq!(ops, ["all_gather", "reduce_scatter"]);
    // Across nodes: the same, NCCL's ring.
    assert_eq!(asked[0], nccl[0]);
    assert!(nccl[0].2.starts_with("ring"), "{:?}", nccl[0]);
    // Inside a node: direct, as the collectives layer times it.
    let group = Group::first(&topo, 8).unwrap();
    let cal = Calibration::for_model(&group.device_model(&topo)).unwrap();
    let direct = run_collective(
        &topo,
        &group,
        &CollectiveOp::ReduceScatter,
        4096 * 2048,
        2,
        &cal,
        Some(Algorithm::Direct),
        None,
    )
    .unwrap();
    assert!(asked[1].2.starts_with("direct"), "{:?}", asked[1]);
    assert_eq!(asked[1].1, direct.time.0);
    assert!(asked[1].1 < nccl[1].1, "{:?} vs {:?}", asked[1], nccl[1]);
}

/// With `node_local_latency_free` as well (Transformer Engine's userbuffers
/// copy into a peer's buffer and set a flag there: no NCCL launch or
/// per-step handshake), the node-local collectives asked for and the
/// collective permutes inside one node pay no protocol latency: the
/// reduce-scatter inside each node (one `direct` step) and the ring shift
/// inside each node (one step) take exactly the calibration's launch plus
/// one NVLink step latency less than with NCCL's latencies; what crosses
/// nodes is unchanged, and without a node-local algorithm the flag does
/// nothing.
#[test]
fn node_local_latency_free_drops_exactly_the_protocol_latency_inside_a_node() {
    use shardsim::collective::Algorithm;
    let topo = shardsim::topology::load_nodes("dgx-h100", 2, &[]).unwrap();
    let comm = |fixture: &str, opts: &TimedOptions| {
        let t = run_timed(&program(fixture), &topo, opts).unwrap();
        let mut out: Vec<(String, String, u64)> = spans(&t, 0, StreamKind::Comm)
            .into_iter()
            .map(|s| (s.op.clone(), s.value.clone(), dur(s)))
            .collect();
        out.sort();
        out
    };
    let asked = TimedOptions {
        node_local_algorithm: Some(Algorithm::Direct),
        ..TimedOptions::default()
    };
    let free = TimedOptions {
        node_local_latency_free: true,
        ..asked.clone()
    };
    let group = Group::first(&topo, 8).unwrap();
    let cal = Calibration::for_model(&group.device_model(&topo)).unwrap();
    let latency_ps = ((cal.simple.base_us + cal.simple.nvlink_hop_us) * 1e6).round() as u64;
    // A reduce-scatter inside each node, an all-gather across the nodes.
    let (with, without) = (
        comm("timed/reduce_scatter_local_and_across.mlir", &asked),
        comm("timed/reduce_scatter_local_and_across.mlir", &free),
    );
    let ops: Vec<&str> = with.iter().map(|c| c.0.as_str()).collect();
    assert_eq!(ops, ["all_gather", "reduce_scatter"]);
    assert_eq!(with[0], without[0]);
    assert!(
        with[1].2.abs_diff(without[1].2 + latency_ps) <= 1,
        "{:?} vs {:?}: {latency_ps} ps of latency",
        with[1],
        without[1]
    );
    // A ring shift inside each node, a shift across the nodes.
    let nccl = comm(
        "timed/permute_local_and_across.mlir",
        &TimedOptions::default(),
    );
    let (with, without) = (
        comm("timed/permute_local_and_across.mlir", &asked),
        comm("timed/permute_local_and_across.mlir", &free),
    );
    assert_eq!(nccl, with);
    let ops: Vec<&str> = with.iter().map(|c| c.0.as_str()).collect();
    assert_eq!(ops, ["collective_permute", "collective_permute"]);
    let (local, across) = if with[0].2 < with[1].2 {
        (0, 1)
    } else {
        (1, 0)
    };
    assert_eq!(with[across], without[across]);
    assert!(
        with[local].2.abs_diff(without[local].2 + latency_ps) <= 1,
        "{:?} vs {:?}: {latency_ps} ps of latency",
        with[local],
        without[local]
    );
    // The flag alone changes nothing.
    let flag_only = TimedOptions {
        node_local_latency_free: true,
        ..TimedOptions::default()
    };
    assert_eq!(
        comm("timed/permute_local_and_across.mlir", &flag_only),
        nccl
    );
}
