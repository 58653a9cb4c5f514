//! Invariants of the tensor kernels and .npy I/O, checked with proptest.

use proptest::prelude::*;
use shardsim::base::DType;
use shardsim::tensor::npy::{parse_npy, to_npy_bytes};
use shardsim::tensor::{self as t, Scalar, Tensor};

/// A shape of rank 1..=4 with dims 1..=4.
fn shape() -> impl Strategy<Value = Vec<u64>> {
    prop::collection::vec(1u64..=4, 1..=4)
}

/// An i64 tensor of a random shape with small values.
fn int_tensor() -> impl Strategy<Value = Tensor> {
    shape().prop_flat_map(|s| {
        let n = s.iter().product::<u64>() as usize;
        prop::collection::vec(-1000i64..1000, n)
            .prop_map(move |v| Tensor::from_vec(s.clone(), v).unwrap())
    })
}

/// A tensor of any element type that .npy can hold (values from small integers,
/// converted), with possibly empty dims.
fn npy_tensor() -> impl Strategy<Value = Tensor> {
    let dtypes: Vec<DType> = DType::ALL
        .into_iter()
        .filter(|&d| d != DType::BF16)
        .collect();
    (
        prop::collection::vec(0u64..=3, 0..=4),
        prop::sample::select(dtypes),
    )
        .prop_flat_map(|(s, d)| {
            let n = s.iter().product::<u64>() as usize;
            prop::collection::vec(-300i64..300, n).prop_map(move |v| {
                let x = Tensor::from_vec(s.clone(), v).unwrap();
                t::convert(&x, d).unwrap()
            })
        })
}

fn inverse(perm: &[usize]) -> Vec<usize> {
    let mut inv = vec![0; perm.len()];
    for (i, &p) in perm.iter().enumerate() {
        inv[p] = i;
    }
    inv
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn transpose_then_inverse_is_identity((x, perm) in int_tensor().prop_flat_map(|x| {
        let r = x.rank();
        (Just(x), Just((0..r).collect::<Vec<usize>>()).prop_shuffle())
    })) {
        let y = t::transpose(&x, &perm).unwrap();
        for (i, &p) in perm.iter().enumerate() {
            prop_assert_eq!(y.shape()[i], x.shape()[p]);
        }
        prop_assert_eq!(t::transpose(&y, &inverse(&perm)).unwrap(), x);
    }

    #[test]
    fn reshape_round_trips(x in int_tensor()) {
        let flat = t::reshape(&x, &[x.num_elements() as u64]).unwrap();
        prop_assert_eq!(flat.data(), x.data());
        prop_assert_eq!(t::reshape(&flat, x.shape()).unwrap(), x);
    }

    #[test]
    fn split_then_concat_is_identity((x, dim) in int_tensor().prop_flat_map(|x| {
        let r = x.rank();
        (Just(x), 0..r)
    })) {
        let size = x.shape()[dim];
        for parts in (1..=size).filter(|p| size % p == 0) {
            let pieces = t::split(&x, dim, parts).unwrap();
            prop_assert_eq!(pieces.len() as u64, parts);
            prop_assert_eq!(t::concat_pieces(&pieces, dim).unwrap(), x.clone());
        }
    }

    #[test]
    fn extract_insert_block_round_trips((x, ranges) in int_tensor().prop_flat_map(|x| {
        let ranges: Vec<_> = x.shape().iter().map(|&d| (0..=d, 0..=d)).collect();
        (Just(x), ranges)
    })) {
        let ranges: Vec<(u64, u64)> = ranges.into_iter().map(|(a, b)| (a.min(b), a.max(b))).collect();
        let block = t::extract_block(&x, &ranges).unwrap();
        let starts: Vec<u64> = ranges.iter().map(|r| r.0).collect();
        // Putting the block back where it came from changes nothing.
        let mut same = x.clone();
        t::insert_block(&mut same, &block, &starts).unwrap();
        prop_assert_eq!(&same, &x);
        // Into zeros: the block reads back, and everything outside stays zero.
        let mut z = Tensor::zeros(x.shape().to_vec(), x.dtype()).unwrap();
        t::insert_block(&mut z, &block, &starts).unwrap();
        prop_assert_eq!(t::extract_block(&z, &ranges).unwrap(), block.clone());
        let total: i64 = (0..z.num_elements()).map(|i| z.get_flat(i).unwrap().to_i128().unwrap() as i64).sum();
        let inside: i64 = (0..block.num_elements()).map(|i| block.get_flat(i).unwrap().to_i128().unwrap() as i64).sum();
        prop_assert_eq!(total, inside);
    }

    #[test]
    fn broadcast_then_sum_scales_by_the_factor((x, extra) in (int_tensor(), prop::collection::vec(1u64..=3, 1..=2))) {
        // Result shape: the new dims first, then x's dims.
        let out_shape: Vec<u64> = extra.iter().chain(x.shape()).copied().collect();
        let dims: Vec<usize> = (extra.len()..out_shape.len()).collect();
        let b = t::broadcast_in_dim(&x, &out_shape, &dims).unwrap();
        let new_dims: Vec<usize> = (0..extra.len()).collect();
        let summed = t::reduce(&b, Scalar::I64(0), &new_dims, t::ReduceKind::Add).unwrap();
        let factor: i64 = extra.iter().product::<u64>() as i64;
        let scaled = t::multiply(&x, &Tensor::splat(x.shape().to_vec(), Scalar::I64(factor)).unwrap()).unwrap();
        prop_assert_eq!(summed, scaled);
    }

    #[test]
    fn npy_bytes_round_trip(x in npy_tensor()) {
        let bytes = to_npy_bytes(&x).unwrap();
        prop_assert_eq!((bytes.len() - x.data().to_le_bytes().len()) % 64, 0, "data must start 64-aligned");
        prop_assert_eq!(parse_npy(&bytes).unwrap(), x);
    }

    #[test]
    fn mangled_npy_never_panics(x in npy_tensor(), cut in any::<prop::sample::Index>(), flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4)) {
        let mut bytes = to_npy_bytes(&x).unwrap();
        for (at, v) in flips {
            let i = at.index(bytes.len());
            bytes[i] = v;
        }
        let keep = cut.index(bytes.len() + 1);
        // Either outcome is fine; a panic fails the property.
        let _ = parse_npy(&bytes[..keep]);
        let _ = parse_npy(&bytes);
    }

    #[test]
    fn bf16_and_f16_round_trip_through_f32(bits in any::<u16>()) {
        for (x, dtype) in [
            (Tensor::new(vec![1], t::Data::BF16(vec![bits])).unwrap(), DType::BF16),
            (Tensor::new(vec![1], t::Data::F16(vec![bits])).unwrap(), DType::F16),
        ] {
            let back = t::convert(&t::convert(&x, DType::F32).unwrap(), dtype).unwrap();
            if x.get_flat(0).unwrap().is_nan() {
                prop_assert!(back.get_flat(0).unwrap().is_nan());
            } else {
                prop_assert_eq!(back, x);
            }
        }
    }

    #[test]
    fn shape_kernels_reject_bad_parameters_without_panicking(
        x in int_tensor(),
        a in prop::collection::vec(-6i64..12, 0..6),
        b in prop::collection::vec(-6i64..12, 0..6),
        c in prop::collection::vec(0u64..4, 0..6),
        huge in any::<bool>(),
    ) {
        let u = |v: &[i64]| v.iter().map(|&i| i.max(0) as u64).collect::<Vec<u64>>();
        let us = |v: &[i64]| v.iter().map(|&i| i.max(0) as usize).collect::<Vec<usize>>();
        let high: Vec<i64> = if huge { b.iter().map(|&h| h.saturating_mul(1 << 40)).collect() } else { b.clone() };
        // Any of these may fail; none may panic, and a success has a consistent shape.
        let results = [
            t::slice(&x, &u(&a), &u(&b), &c),
            t::dynamic_slice(&x, &a, &u(&b)),
            t::pad(&x, Scalar::I64(0), &a, &high, &c),
            t::transpose(&x, &us(&a)),
            t::broadcast_in_dim(&x, &u(&b), &us(&a)),
            t::reverse(&x, &us(&a)),
            t::reshape(&x, &u(&b)),
            t::iota(u(&b), a.first().map_or(0, |&d| d.max(0) as usize), DType::F32),
            t::reduce(&x, Scalar::I64(0), &us(&a), t::ReduceKind::Max),
            t::extract_block(&x, &u(&a).into_iter().zip(u(&b)).collect::<Vec<_>>()),
        ];
        for r in results.into_iter().flatten() {
            prop_assert_eq!(r.num_elements() as u64, r.shape().iter().product::<u64>());
        }
    }
}
