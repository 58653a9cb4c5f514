//! Every algorithm x operation x reduction on seeded random data over 2..64
//! ranks (powers of two and not) equals the single-device result.
//!
//! Integers (i32, wrapping) must match exactly: wrapping +, *, min, max are
//! associative and commutative, so the order of a plan's reductions cannot
//! matter. Floats: min and max must match exactly (order-free); a sum of n
//! terms in any order is within (n-1) u sum|x_i| of the exact sum (u = unit
//! roundoff; we allow n * eps = 2n u); a product of n factors within about
//! n eps relative; avg adds one division (one more eps relative).

use proptest::prelude::*;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use shardsim::base::DType;
use shardsim::collective::{
    algorithms_for, build, data, plan::piece, Algorithm, CollectiveOp, PlanOptions,
};
use shardsim::tensor::{CollectiveReduction, Data, Tensor};

const REDUCTIONS: [CollectiveReduction; 5] = [
    CollectiveReduction::Sum,
    CollectiveReduction::Prod,
    CollectiveReduction::Min,
    CollectiveReduction::Max,
    CollectiveReduction::Avg,
];

fn eps(d: DType) -> f64 {
    match d {
        DType::F64 => f64::EPSILON,
        DType::F32 => f32::EPSILON as f64,
        DType::F16 => 2f64.powi(-10),
        DType::BF16 => 2f64.powi(-7),
        _ => 0.0,
    }
}

/// Random per-rank buffers: integers in [-50, 50]; floats in [0.5, 1.5] for
/// products (no overflow over 64 ranks), [-1, 1] otherwise.
fn inputs(n: usize, len: u64, dtype: DType, prod: bool, seed: u64) -> Vec<Tensor> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..n)
        .map(|_| {
            let data = if dtype == DType::I32 {
                let v: Vec<i128> = (0..len).map(|_| rng.random_range(-50i128..=50)).collect();
                Data::from_i128s(dtype, &v)
            } else {
                let v: Vec<f64> = (0..len)
                    .map(|_| {
                        if prod {
                            rng.random_range(0.5..1.5)
                        } else {
                            rng.random_range(-1.0..1.0)
                        }
                    })
                    .collect();
                Data::from_f64s(dtype, &v)
            };
            Tensor::new(vec![len], data).unwrap()
        })
        .collect()
}

/// Exact reduction of column `i` (f64 for floats, wrapping i32 for integers)
/// and the allowed error.
fn reference(vals: &[Tensor], i: usize, red: CollectiveReduction) -> (f64, f64) {
    let n = vals.len();
    let dtype = vals[0].dtype();
    if dtype == DType::I32 {
        let xs: Vec<i32> = vals
            .iter()
            .map(|t| t.data().to_i128_vec().unwrap()[i] as i32)
            .collect();
        let r = match red {
            CollectiveReduction::Sum | CollectiveReduction::Avg => {
                xs.iter().fold(0i32, |a, &b| a.wrapping_add(b))
            }
            CollectiveReduction::Prod => xs.iter().fold(1i32, |a, &b| a.wrapping_mul(b)),
            CollectiveReduction::Min => *xs.iter().min().unwrap(),
            CollectiveReduction::Max => *xs.iter().max().unwrap(),
        };
        let r = if red == CollectiveReduction::Avg {
            r / n as i32
        } else {
            r
        };
        return (r as f64, 0.0);
    }
    let xs: Vec<f64> = vals.iter().map(|t| t.to_f64_vec()[i]).collect();
    let e = eps(dtype) * n as f64;
    let abs: f64 = xs.iter().map(|x| x.abs()).sum();
    match red {
        CollectiveReduction::Sum => (xs.iter().sum(), e * abs),
        CollectiveReduction::Avg => {
            let s: f64 = xs.iter().sum();
            (
                s / n as f64,
                e * abs / n as f64 + eps(dtype) * (s / n as f64).abs(),
            )
        }
        CollectiveReduction::Prod => {
            let p: f64 = xs.iter().product();
            (p, 2.0 * e * p.abs())
        }
        CollectiveReduction::Min => (xs.iter().cloned().fold(f64::INFINITY, f64::min), 0.0),
        CollectiveReduction::Max => (xs.iter().cloned().fold(f64::NEG_INFINITY, f64::max), 0.0),
    }
}

fn close(got: f64, want: (f64, f64), what: &str) {
    assert!(
        (got - want.0).abs() <= want.1,
        "{what}: got {got}, expected {} within {}",
        want.0,
        want.1
    );
}

/// Nodes of `m` consecutive ranks for hierarchical algorithms (when n allows).
fn nodes_of(n: usize) -> Vec<Vec<usize>> {
    let m = [4, 3, 2]
        .into_iter()
        .find(|m| n % m == 0 && n / m >= 2)
        .unwrap_or(n);
    (0..n)
        .collect::<Vec<_>>()
        .chunks(m)
        .map(<[usize]>::to_vec)
        .collect()
}

/// Run `op` with `algo` and check every rank's buffer; returns false when the
/// algorithm does not apply to this group (e.g. a power of two is needed).
fn check(
    op: &CollectiveOp,
    algo: Algorithm,
    n: usize,
    total: u64,
    dtype: DType,
    red: CollectiveReduction,
    seed: u64,
) -> bool {
    let opts = PlanOptions {
        chunks: 3,
        nodes: nodes_of(n),
        lanes: 1,
        tree_channel_cap: 0,
        collnet_chunks: 0,
        channel_chunks: 0,
        nvls_chunks: 0,
        tree_chunks: 0,
    };
    let plan = match build(op, algo, n, total, &opts) {
        Ok(p) => p,
        Err(shardsim::collective::CollectiveError::NotApplicable { .. }) => return false,
        Err(e) => panic!("{e}"),
    };
    let input = inputs(
        n,
        plan.buffer_len,
        dtype,
        red == CollectiveReduction::Prod,
        seed,
    );
    let mut bufs = input.clone();
    data::execute(&plan, &mut bufs, red).unwrap();
    let out: Vec<Vec<f64>> = bufs.iter().map(Tensor::to_f64_vec).collect();
    let inp: Vec<Vec<f64>> = input.iter().map(Tensor::to_f64_vec).collect();
    let what = |r: usize, i: u64| {
        format!(
            "{} {algo} n={n} {dtype:?} {red:?} rank {r} elem {i}",
            op.name()
        )
    };
    let red_at = |r: usize, i: u64| {
        close(
            out[r][i as usize],
            reference(&input, i as usize, red),
            &what(r, i),
        )
    };
    let same = |r: usize, i: u64, want: f64| {
        assert_eq!(
            out[r][i as usize].to_bits(),
            want.to_bits(),
            "{}",
            what(r, i)
        )
    };
    match op {
        CollectiveOp::AllReduce => (0..n).for_each(|r| (0..total).for_each(|i| red_at(r, i))),
        CollectiveOp::ReduceScatter => (0..n).for_each(|r| {
            let (lo, hi) = piece(total, n, r);
            (lo..hi).for_each(|i| red_at(r, i))
        }),
        CollectiveOp::Reduce { root } => (0..total).for_each(|i| red_at(*root, i)),
        CollectiveOp::AllGather => (0..n).for_each(|r| {
            (0..n).for_each(|s| {
                let (lo, hi) = piece(total, n, s);
                (lo..hi).for_each(|i| same(r, i, inp[s][i as usize]))
            })
        }),
        CollectiveOp::Broadcast { root } => {
            (0..n).for_each(|r| (0..total).for_each(|i| same(r, i, inp[*root][i as usize])))
        }
        CollectiveOp::Scatter { root } => (0..n).for_each(|r| {
            let (lo, hi) = piece(total, n, r);
            (lo..hi).for_each(|i| same(r, i, inp[*root][i as usize]))
        }),
        CollectiveOp::Gather { root } => (0..n).for_each(|s| {
            let (lo, hi) = piece(total, n, s);
            (lo..hi).for_each(|i| same(*root, i, inp[s][i as usize]))
        }),
        CollectiveOp::AllToAll => {
            // Pieces of total / n elements: j receives i's j-th piece at slot i.
            let k = total / n as u64;
            (0..n).for_each(|j| {
                (0..n).for_each(|i| {
                    (0..k).for_each(|t| {
                        same(
                            j,
                            total + i as u64 * k + t,
                            inp[i][(j as u64 * k + t) as usize],
                        )
                    })
                })
            })
        }
        CollectiveOp::Permute { pairs } => pairs
            .iter()
            .for_each(|&(s, t)| (0..total).for_each(|i| same(t, total + i, inp[s][i as usize]))),
    }
    true
}

fn ops(n: usize) -> Vec<CollectiveOp> {
    let root = n / 2;
    vec![
        CollectiveOp::AllReduce,
        CollectiveOp::AllGather,
        CollectiveOp::ReduceScatter,
        CollectiveOp::Broadcast { root },
        CollectiveOp::Reduce { root },
        CollectiveOp::Scatter { root },
        CollectiveOp::Gather { root },
        CollectiveOp::AllToAll,
        CollectiveOp::Permute {
            pairs: (0..n)
                .map(|r| (r, (r * 5 + 3) % n))
                .filter(|_| n % 5 != 0)
                .collect(),
        },
    ]
}

#[test]
fn every_algorithm_matches_the_single_device_result() {
    let mut ran = 0;
    for (k, &n) in [2usize, 3, 4, 5, 6, 7, 8, 12, 16, 24, 33, 64]
        .iter()
        .enumerate()
    {
        // Not divisible by n, so pieces are uneven; NVLS needs chunks per piece.
        let total = 3 * n as u64 + 5;
        for op in ops(n) {
            for &algo in algorithms_for(&op) {
                let reds: &[CollectiveReduction] = if op.reduces() {
                    &REDUCTIONS
                } else {
                    &[CollectiveReduction::Sum]
                };
                for &red in reds {
                    for dtype in [DType::I32, DType::F32] {
                        let seed = (k * 1000 + ran) as u64;
                        if check(&op, algo, n, total, dtype, red, seed) {
                            ran += 1;
                        }
                    }
                }
            }
        }
    }
    // 12 group sizes x (7 allreduce + 3 all-gather + 3 reduce-scatter ... )
    // algorithms: make sure most combinations actually ran.
    assert!(ran > 1000, "only {ran} combinations ran");
}

#[test]
fn low_precision_and_f64_reductions_stay_within_the_stated_bound() {
    for dtype in [DType::F16, DType::BF16, DType::F64] {
        for &n in &[3usize, 8, 17] {
            for algo in [
                Algorithm::Ring,
                Algorithm::Tree,
                Algorithm::HalvingDoubling,
                Algorithm::Direct,
                Algorithm::Nvls,
            ] {
                for red in REDUCTIONS {
                    check(
                        &CollectiveOp::AllReduce,
                        algo,
                        n,
                        4 * n as u64 + 1,
                        dtype,
                        red,
                        n as u64,
                    );
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    /// Any group size, message size, algorithm and root: integers exactly.
    #[test]
    fn random_groups_and_sizes_are_exact_for_integers(
        n in 2usize..40,
        total in 1u64..200,
        which in 0usize..64,
        red_i in 0usize..5,
        seed in any::<u64>(),
    ) {
        let all_ops = ops(n);
        let op = &all_ops[which % all_ops.len()];
        let algos = algorithms_for(op);
        let algo = algos[(which / all_ops.len()) % algos.len()];
        let total = if matches!(op, CollectiveOp::AllReduce) { total } else { total.max(n as u64) };
        check(op, algo, n, total, DType::I32, REDUCTIONS[red_i], seed);
    }
}

#[test]
fn bad_groups_are_errors() {
    use shardsim::collective::CollectiveError;
    let o = PlanOptions {
        chunks: 1,
        nodes: vec![],
        lanes: 1,
        tree_channel_cap: 0,
        collnet_chunks: 0,
        channel_chunks: 0,
        nvls_chunks: 0,
        tree_chunks: 0,
    };
    assert_eq!(
        build(&CollectiveOp::AllReduce, Algorithm::Ring, 0, 8, &o),
        Err(CollectiveError::EmptyGroup)
    );
    assert!(matches!(
        build(
            &CollectiveOp::Broadcast { root: 4 },
            Algorithm::Ring,
            4,
            8,
            &o
        ),
        Err(CollectiveError::BadRank { rank: 4, n: 4 })
    ));
    assert!(matches!(
        build(
            &CollectiveOp::Permute {
                pairs: vec![(0, 1), (2, 1)]
            },
            Algorithm::Direct,
            4,
            8,
            &o
        ),
        Err(CollectiveError::DuplicateTarget(1))
    ));
    assert!(matches!(
        build(&CollectiveOp::AllReduce, Algorithm::Hierarchical, 8, 8, &o),
        Err(CollectiveError::NotApplicable { .. })
    ));
    assert!(matches!(
        build(
            &CollectiveOp::AllGather,
            Algorithm::RecursiveDoubling,
            6,
            12,
            &o
        ),
        Err(CollectiveError::NotApplicable { .. })
    ));
}
