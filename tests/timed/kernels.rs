//! The kernel table's matmul shape factor: wave quantization, split-K and
//! the persistent stream-K kernel (hand-worked cases in
//! tests/fixtures/timed/stream_k.toml) and the bounds every shape keeps.

use proptest::prelude::*;
use serde::Deserialize;
use shardsim::exec::timed::cost::Gemm;
use shardsim::exec::timed::{parse_roofline, RooflineParams};
use shardsim::models::step::KERNELS_TOML;

#[derive(Deserialize)]
struct Cases {
    case: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    what: String,
    m: u64,
    n: u64,
    k: u64,
    without: f64,
    with: f64,
}

/// The H100 entry with and without stream-K.
fn h100() -> (RooflineParams, RooflineParams) {
    let p = parse_roofline(KERNELS_TOML).unwrap()["H100 SXM5 80GB"];
    assert!(p.stream_k, "the H100 entry runs stream-K kernels");
    (
        RooflineParams {
            stream_k: false,
            ..p
        },
        p,
    )
}

#[test]
fn stream_k_fills_the_last_wave_as_worked_by_hand() {
    let text = std::fs::read_to_string(crate::common::fixture("timed/stream_k.toml")).unwrap();
    let cases: Cases = toml::from_str(&text).unwrap();
    let (dp, sk) = h100();
    for c in cases.case {
        let g = Gemm {
            batch: 1,
            m: c.m,
            n: c.n,
            k: c.k,
            attention: None,
        };
        let (a, b) = (dp.gemm_factor(&g), sk.gemm_factor(&g));
        assert!(
            (a - c.without).abs() < 1e-3,
            "{}: {a} vs {}",
            c.what,
            c.without
        );
        assert!((b - c.with).abs() < 1e-3, "{}: {b} vs {}", c.what, c.with);
    }
}

proptest! {
    /// Stream-K is one more kernel to choose from: never slower than the
    /// data-parallel and split-K kernels, never past the full rate.
    #[test]
    fn stream_k_never_loses_and_never_exceeds_the_peak(
        batch in 1u64..8, m in 1u64..20_000, n in 1u64..20_000, k in 1u64..20_000,
    ) {
        let (dp, sk) = h100();
        let g = Gemm { batch, m, n, k, attention: None };
        let (a, b) = (dp.gemm_factor(&g), sk.gemm_factor(&g));
        prop_assert!(b >= a && b <= 1.0, "{g:?}: {a} -> {b}");
    }
}
