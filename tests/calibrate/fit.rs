//! The least-squares fit and the held-out split on synthetic measurements
//! generated from known alpha, beta, call costs and compute rates.

use proptest::prelude::*;

use shardsim::calibrate::{
    fit_machine, heldout_rows, least_squares, median_heldout_error, topology_file, FitError,
    Measured, Op, Stats,
};

fn point(
    op: Op,
    size: u64,
    ranks: usize,
    messages: u64,
    moved: (u64, u64),
    work: f64,
    t: f64,
) -> Measured {
    Measured {
        op,
        size,
        ranks,
        stats: Stats::of(&[t]).unwrap(),
        messages,
        moved_bytes: moved.0,
        reduced_bytes: moved.1,
        work,
    }
}

/// Points of a machine with these true parameters (ring-like loads).
fn synthetic(
    c0: f64,
    c1: f64,
    alpha: f64,
    beta: f64,
    gamma: f64,
    rate: f64,
    bw: f64,
) -> Vec<Measured> {
    let mut v = Vec::new();
    for ranks in [2usize, 4, 8] {
        for k in 0..8 {
            let size = 1024u64 << (2 * k);
            let n = ranks as u64;
            for (op, msgs, bytes, reduced) in [
                (
                    Op::AllReduce,
                    2 * n * (n - 1),
                    2 * (n - 1) * size,
                    (n - 1) * size,
                ),
                (Op::AllGather, n * (n - 1), (n - 1) * size, 0),
            ] {
                let t = c0
                    + c1 * ranks as f64
                    + alpha * msgs as f64
                    + beta * bytes as f64
                    + gamma * reduced as f64;
                v.push(point(op, size, ranks, msgs, (bytes, reduced), 0.0, t));
            }
            if ranks == 2 {
                let chunks = size.div_ceil(1 << 19);
                let t = c0 + c1 * 2.0 + alpha * chunks as f64 + beta * size as f64;
                v.push(point(Op::P2p, size, 2, chunks, (size, 0), 0.0, t));
                let w = 3.0 * size as f64;
                v.push(point(Op::Elementwise, size, 2, 0, (0, 0), w, 2e-6 + w / bw));
            }
        }
    }
    for m in [16u64, 32, 48, 64, 96, 128] {
        let w = 2.0 * (m * m * m) as f64;
        v.push(point(Op::Gemm, m, 2, 0, (0, 0), w, 3e-6 + w / rate));
    }
    v
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6 * b.abs().max(1e-30)
}

proptest! {
    #[test]
    fn the_fit_recovers_known_parameters(
        c0 in 1e-6f64..1e-3, c1 in 0.0f64..1e-5, alpha in 1e-7f64..1e-4,
        beta in 1e-11f64..1e-8, gamma in 0.0f64..1e-8, rate in 1e8f64..1e12, bw in 1e8f64..1e11,
    ) {
        let pts = synthetic(c0, c1, alpha, beta, gamma, rate, bw);
        let f = fit_machine(&pts).unwrap();
        prop_assert!(close(f.call_s, c0), "{} vs {c0}", f.call_s);
        prop_assert!(close(f.alpha_s, alpha), "{} vs {alpha}", f.alpha_s);
        prop_assert!(close(f.beta_s_per_byte, beta), "{} vs {beta}", f.beta_s_per_byte);
        prop_assert!((f.gamma_s_per_byte - gamma).abs() <= 1e-6 * beta, "{} vs {gamma}", f.gamma_s_per_byte);
        prop_assert!((f.per_worker_s - c1).abs() <= 1e-6 * c0);
        prop_assert!(close(f.gemm_flops, rate));
        prop_assert!(close(f.elementwise_bytes_per_s, bw));
        // Exact data: every held-out prediction is exact too.
        let rows = heldout_rows(&f, &pts);
        prop_assert!(rows.iter().any(|r| r.held_out) && rows.iter().any(|r| !r.held_out));
        prop_assert!(rows.iter().all(|r| r.error < 1e-6), "{:?}", rows.iter().map(|r| r.error).fold(0.0, f64::max));
    }
}

#[test]
fn held_out_sizes_alternate_and_errors_are_relative() {
    let pts = synthetic(1e-5, 0.0, 1e-6, 1e-9, 5e-10, 1e10, 1e10);
    let f = fit_machine(&pts).unwrap();
    let rows = heldout_rows(&f, &pts);
    let sizes: Vec<(u64, bool)> = rows
        .iter()
        .filter(|r| r.op == "all_reduce" && r.ranks == 4)
        .map(|r| (r.size, r.held_out))
        .collect();
    assert_eq!(sizes.len(), 8);
    for (i, (_, held)) in sizes.iter().enumerate() {
        assert_eq!(*held, i % 2 == 1, "{sizes:?}");
    }
    // Double one held-out measurement: its error is 50% (predicted is half).
    let mut pts2 = pts.clone();
    let i = pts2
        .iter()
        .position(|p| p.op == Op::AllGather && p.ranks == 8 && p.size == 4096)
        .unwrap();
    pts2[i].stats = Stats::of(&[2.0 * pts[i].stats.median_s]).unwrap();
    let rows = heldout_rows(&f, &pts2);
    let r = rows
        .iter()
        .find(|r| r.op == "all_gather" && r.ranks == 8 && r.size == 4096)
        .unwrap();
    assert!(r.held_out && (r.error - 0.5).abs() < 1e-9, "{}", r.error);
    assert!(median_heldout_error(&rows, "all_gather").unwrap() < 1e-6);
    assert_eq!(median_heldout_error(&rows, "nothing"), None);
}

#[test]
fn least_squares_refuses_what_it_cannot_fit_and_keeps_coefficients_non_negative() {
    assert!(matches!(
        least_squares(&[vec![1.0, 2.0]], &[1.0]),
        Err(FitError::TooFew { .. })
    ));
    let same = vec![vec![1.0, 2.0], vec![2.0, 4.0], vec![3.0, 6.0]];
    assert_eq!(
        least_squares(&same, &[1.0, 2.0, 3.0]),
        Err(FitError::Singular)
    );
    assert!(matches!(
        least_squares(&[vec![1.0], vec![1.0, 2.0]], &[1.0, 2.0]),
        Err(FitError::Ragged(1))
    ));
    // y = 5 - x would need a negative slope: the slope is held at 0, the intercept is the mean.
    let rows: Vec<Vec<f64>> = (0..5).map(|x| vec![1.0, x as f64]).collect();
    let y: Vec<f64> = (0..5).map(|x| 5.0 - x as f64).collect();
    let c = least_squares(&rows, &y).unwrap();
    assert_eq!(c[1], 0.0);
    assert!((c[0] - 3.0).abs() < 1e-12, "{c:?}");
}

#[test]
fn stats_median_and_spread() {
    let s = Stats::of(&[5.0, 1.0, 3.0, 2.0, 4.0]).unwrap();
    assert_eq!(
        (s.median_s, s.min_s, s.max_s, s.repeats),
        (3.0, 1.0, 5.0, 5)
    );
    // IQR 4 - 2 = 2 over the median 3.
    assert!((s.spread - 2.0 / 3.0).abs() < 1e-12);
    assert!(Stats::of(&[]).is_none());
    assert!(Stats::of(&[1.0, f64::NAN]).is_none());
}

#[test]
fn the_topology_file_carries_the_fit_and_loads() {
    let pts = synthetic(1e-5, 1e-7, 2e-6, 1e-9, 0.0, 5e9, 8e9);
    let f = fit_machine(&pts).unwrap();
    let file = topology_file(&f, 4, "mine", "threads", 8 << 30).unwrap();
    let text = toml::to_string(&file).unwrap();
    let topo = shardsim::topology::load_text(&text, "t.toml", &[]).unwrap();
    assert_eq!(topo.num_devices(), 4);
    // Round trip through the file format keeps every figure.
    let back = shardsim::topology::parse_file_text(&text, "t.toml").unwrap();
    assert_eq!(back, file);
    let nv = back.nvlink.unwrap();
    assert_eq!(nv.bandwidth.0, 1_000_000_000);
    assert_eq!(nv.latency.0, 1_000_000, "half of alpha = 1 us per link");
    // A fit without a bandwidth or a latency term cannot make a file
    // (topology files refuse zero latencies).
    let mut g = f;
    g.beta_s_per_byte = 0.0;
    assert!(topology_file(&g, 4, "x", "threads", 1 << 30)
        .unwrap_err()
        .contains("bandwidth"));
    let mut g = f;
    g.alpha_s = 0.0;
    assert!(topology_file(&g, 4, "x", "threads", 1 << 30)
        .unwrap_err()
        .contains("no usable link latency"));
}
