//! Invariants of the issue-14 kernels (gather, scatter, sort, top_k, reduce_window,
//! convolution, bit ops, rng_bit_generator), checked with proptest.

use proptest::prelude::*;
use shardsim::base::DType;
use shardsim::tensor::{self as t, Scalar, Tensor, TensorError};

/// An i64 tensor of rank 1..=3 with dims 1..=4 and small values.
fn int_tensor() -> impl Strategy<Value = Tensor> {
    prop::collection::vec(1u64..=4, 1..=3).prop_flat_map(|s| {
        let n = s.iter().product::<u64>() as usize;
        prop::collection::vec(-20i64..20, n)
            .prop_map(move |v| Tensor::from_vec(s.clone(), v).unwrap())
    })
}

fn add_scalars(a: &[Scalar], b: &[Scalar]) -> Result<Vec<Scalar>, TensorError> {
    Ok(vec![
        t::add(&Tensor::scalar(a[0]), &Tensor::scalar(b[0]))?.to_scalar()?
    ])
}

fn i64s(x: &Tensor) -> Vec<i64> {
    x.data()
        .to_i128_vec()
        .unwrap()
        .into_iter()
        .map(|v| v as i64)
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn gather_of_iota_rows_is_the_operand(x in int_tensor()) {
        let r = x.rank();
        let idx = t::iota(vec![x.shape()[0], 1], 0, DType::I32).unwrap();
        let mut slice_sizes = x.shape().to_vec();
        slice_sizes[0] = 1;
        let p = t::GatherParams {
            offset_dims: (1..r).collect(),
            collapsed_slice_dims: vec![0],
            start_index_map: vec![0],
            index_vector_dim: 1,
            slice_sizes,
            ..Default::default()
        };
        prop_assert_eq!(t::gather(&x, &idx, &p).unwrap(), x);
    }

    #[test]
    fn gather_clamps_like_explicitly_clamped_indices(
        x in int_tensor(),
        starts in prop::collection::vec(-10i64..10, 1..6),
    ) {
        let d0 = x.shape()[0] as i64;
        let mut slice_sizes = x.shape().to_vec();
        slice_sizes[0] = 1;
        let p = t::GatherParams {
            offset_dims: (1..=x.rank()).collect(),
            start_index_map: vec![0],
            index_vector_dim: 1,
            slice_sizes,
            ..Default::default()
        };
        let n = starts.len() as u64;
        let clamped: Vec<i64> = starts.iter().map(|&s| s.clamp(0, d0 - 1)).collect();
        let raw = t::gather(&x, &Tensor::from_vec(vec![n, 1], starts).unwrap(), &p).unwrap();
        let safe = t::gather(&x, &Tensor::from_vec(vec![n, 1], clamped).unwrap(), &p).unwrap();
        prop_assert_eq!(raw, safe);
    }

    #[test]
    fn scatter_add_of_zeros_changes_nothing(
        x in int_tensor(),
        starts in prop::collection::vec(-3i64..6, 0..6),
    ) {
        let n = starts.len() as u64;
        let mut update_shape = vec![n];
        update_shape.extend_from_slice(&x.shape()[1..]);
        let p = t::ScatterParams {
            update_window_dims: (1..x.rank()).collect(),
            inserted_window_dims: vec![0],
            scatter_dims_to_operand_dims: vec![0],
            index_vector_dim: 1,
            ..Default::default()
        };
        let idx = Tensor::from_vec(vec![n, 1], starts).unwrap();
        let zeros = Tensor::zeros(update_shape, DType::I64).unwrap();
        let out = t::scatter(std::slice::from_ref(&x), &idx, &[zeros], &p, &mut add_scalars).unwrap();
        prop_assert_eq!(&out[0], &x);
    }

    #[test]
    fn scatter_add_sums_every_in_bounds_update(
        base in prop::collection::vec(-50i64..50, 1..8),
        updates in prop::collection::vec((-3i64..10, -9i64..9), 0..10),
    ) {
        let len = base.len() as i64;
        let mut want = base.clone();
        for &(i, u) in &updates {
            if (0..len).contains(&i) {
                want[i as usize] += u;
            }
        }
        let n = updates.len() as u64;
        let idx = Tensor::from_vec(vec![n], updates.iter().map(|u| u.0).collect::<Vec<_>>()).unwrap();
        let upd = Tensor::from_vec(vec![n], updates.iter().map(|u| u.1).collect::<Vec<_>>()).unwrap();
        let x = Tensor::from_vec(vec![len as u64], base).unwrap();
        let p = t::ScatterParams {
            inserted_window_dims: vec![0],
            scatter_dims_to_operand_dims: vec![0],
            index_vector_dim: 1,
            ..Default::default()
        };
        let out = t::scatter(&[x], &idx, &[upd], &p, &mut add_scalars).unwrap();
        prop_assert_eq!(i64s(&out[0]), want);
    }

    #[test]
    fn sort_is_a_stable_sorted_permutation(keys in prop::collection::vec(-3i64..3, 1..20)) {
        let n = keys.len() as u64;
        let k = Tensor::from_vec(vec![n], keys.clone()).unwrap();
        let payload = t::iota(vec![n], 0, DType::I64).unwrap();
        let mut less = |a: &[Scalar], b: &[Scalar]| Ok(a[0].to_i128() < b[0].to_i128());
        let out = t::sort(&[k, payload], 0, true, &mut less).unwrap();
        let (sk, sp) = (i64s(&out[0]), i64s(&out[1]));
        for i in 1..sk.len() {
            prop_assert!(sk[i - 1] < sk[i] || (sk[i - 1] == sk[i] && sp[i - 1] < sp[i]));
        }
        // The payload is a permutation that carries each key along.
        let mut seen = sp.clone();
        seen.sort();
        prop_assert_eq!(seen, (0..n as i64).collect::<Vec<_>>());
        for (key, &pos) in sk.iter().zip(&sp) {
            prop_assert_eq!(*key, keys[pos as usize]);
        }
    }

    #[test]
    fn top_k_is_the_descending_sort_prefix(
        rows in prop::collection::vec(prop::collection::vec(-4i64..4, 6), 1..4),
        k in 0u64..=6,
    ) {
        let r = rows.len() as u64;
        let x = Tensor::from_vec(vec![r, 6], rows.concat()).unwrap();
        let (values, indices) = t::top_k(&x, k).unwrap();
        let payload = t::iota(vec![r, 6], 1, DType::I32).unwrap();
        // Descending with ties by lower index: "a before b" when a's value is greater.
        let mut greater = |a: &[Scalar], b: &[Scalar]| Ok(a[0].to_i128() > b[0].to_i128());
        let sorted = t::sort(&[x, payload], 1, true, &mut greater).unwrap();
        let take = |s: &Tensor| t::slice(s, &[0, 0], &[r, k], &[1, 1]).unwrap();
        prop_assert_eq!(values, take(&sorted[0]));
        prop_assert_eq!(indices, take(&sorted[1]));
    }

    #[test]
    fn reduce_window_of_unit_window_is_identity(x in int_tensor()) {
        let p = t::WindowParams::plain(vec![1; x.rank()]);
        let out = t::reduce_window(
            std::slice::from_ref(&x),
            &[Scalar::I64(0)],
            &p,
            &mut add_scalars,
        )
        .unwrap();
        prop_assert_eq!(&out[0], &x);
    }

    #[test]
    fn convolution_with_unit_kernel_is_dot_general(
        (n, c, o, w) in (1u64..3, 1u64..4, 1u64..4, 1u64..5),
        seed in prop::collection::vec(-5i64..5, 64),
    ) {
        let lhs = Tensor::from_vec(vec![n, c, w], seed[..(n * c * w) as usize].to_vec()).unwrap();
        let rhs = Tensor::from_vec(vec![o, c, 1], seed[32..32 + (o * c) as usize].to_vec()).unwrap();
        let p = t::ConvParams {
            input_batch_dim: 0,
            input_feature_dim: 1,
            input_spatial_dims: vec![2],
            kernel_output_feature_dim: 0,
            kernel_input_feature_dim: 1,
            kernel_spatial_dims: vec![2],
            output_batch_dim: 0,
            output_feature_dim: 1,
            output_spatial_dims: vec![2],
            window_strides: vec![],
            padding: vec![],
            lhs_dilation: vec![],
            rhs_dilation: vec![],
            window_reversal: vec![],
            feature_group_count: 1,
            batch_group_count: 1,
        };
        let conv = t::convolution(&lhs, &rhs, &p, DType::I64).unwrap();
        // out[n, o, w] = sum_c lhs[n, c, w] * rhs[o, c]: dot over c, result [n, w, o].
        let rhs2 = t::reshape(&rhs, &[o, c]).unwrap();
        let dims = t::DotDims { lhs_contract: vec![1], rhs_contract: vec![1], ..Default::default() };
        let dot = t::dot_general(&lhs, &rhs2, &dims, DType::I64).unwrap();
        prop_assert_eq!(conv, t::transpose(&dot, &[0, 2, 1]).unwrap());
    }

    #[test]
    fn shift_left_then_logical_right_keeps_the_low_bits(v in any::<u32>(), s in 0u32..40) {
        let x = Tensor::from_vec(vec![1], vec![v]).unwrap();
        let amount = Tensor::from_vec(vec![1], vec![s]).unwrap();
        let back = t::shift_right_logical(&t::shift_left(&x, &amount).unwrap(), &amount).unwrap();
        let want = if s >= 32 { 0 } else { (v << s) >> s };
        prop_assert_eq!(back.to_scalar().unwrap(), Scalar::UI32(want));
    }

    #[test]
    fn bitcast_to_bytes_and_back_is_identity(v in prop::collection::vec(any::<u64>(), 1..6)) {
        let x = Tensor::from_vec(vec![v.len() as u64], v).unwrap();
        let bytes = t::bitcast_convert(&x, DType::UI8).unwrap();
        prop_assert_eq!(bytes.shape(), &[x.shape()[0], 8][..]);
        prop_assert_eq!(t::bitcast_convert(&bytes, DType::UI64).unwrap(), x);
    }

    #[test]
    fn rng_draws_continue_from_the_returned_state(
        key in any::<u64>(),
        counter in 0u64..u64::MAX / 2,
        (a, b) in (1u64..6, 1u64..6),
        philox in any::<bool>(),
    ) {
        // 64-bit THREE_FRY uses one counter per element and PHILOX one per four 32-bit
        // words, so two draws equal one draw of both sizes.
        let (alg, dtype, unit) = if philox {
            (t::RngAlgorithm::Philox, DType::UI32, 4)
        } else {
            (t::RngAlgorithm::ThreeFry, DType::UI64, 1)
        };
        let state = Tensor::from_vec(vec![2], vec![key, counter]).unwrap();
        let (s1, first) = t::rng_bit_generator(&state, alg, &[a * unit], dtype).unwrap();
        let (_, second) = t::rng_bit_generator(&s1, alg, &[b * unit], dtype).unwrap();
        let (_, both) = t::rng_bit_generator(&state, alg, &[(a + b) * unit], dtype).unwrap();
        prop_assert_eq!(t::concatenate(&[first, second], 0).unwrap(), both);
    }
}

/// Small dim lists, often invalid (out of range, repeated, unsorted).
fn dim_list() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(0usize..4, 0..4)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn gather_and_scatter_refuse_bad_dimension_numbers_without_panicking(
        x in int_tensor(),
        idx in int_tensor(),
        dims in prop::collection::vec(dim_list(), 5),
        ivd in 0usize..4,
        sizes in prop::collection::vec(0u64..5, 0..4),
    ) {
        let g = t::GatherParams {
            offset_dims: dims[0].clone(),
            collapsed_slice_dims: dims[1].clone(),
            operand_batching_dims: dims[2].clone(),
            start_indices_batching_dims: dims[3].clone(),
            start_index_map: dims[4].clone(),
            index_vector_dim: ivd,
            slice_sizes: sizes,
        };
        let _ = t::gather(&x, &idx, &g);
        let s = t::ScatterParams {
            update_window_dims: dims[0].clone(),
            inserted_window_dims: dims[1].clone(),
            input_batching_dims: dims[2].clone(),
            scatter_indices_batching_dims: dims[3].clone(),
            scatter_dims_to_operand_dims: dims[4].clone(),
            index_vector_dim: ivd,
        };
        let _ = t::scatter(std::slice::from_ref(&x), &idx, std::slice::from_ref(&x), &s, &mut add_scalars);
    }

    #[test]
    fn convolution_and_reduce_window_refuse_bad_windows_without_panicking(
        lhs in int_tensor(),
        rhs in int_tensor(),
        dims in prop::collection::vec(0usize..4, 6),
        sp in prop::collection::vec(0usize..4, 0..3),
        nums in prop::collection::vec(0u64..4, 0..3),
        pads in prop::collection::vec((-5i64..5, -5i64..5), 0..3),
        groups in (0u64..3, 0u64..3),
    ) {
        let p = t::ConvParams {
            input_batch_dim: dims[0],
            input_feature_dim: dims[1],
            input_spatial_dims: sp.clone(),
            kernel_output_feature_dim: dims[2],
            kernel_input_feature_dim: dims[3],
            kernel_spatial_dims: sp.clone(),
            output_batch_dim: dims[4],
            output_feature_dim: dims[5],
            output_spatial_dims: sp,
            window_strides: nums.clone(),
            padding: pads.clone(),
            lhs_dilation: nums.clone(),
            rhs_dilation: nums.clone(),
            window_reversal: vec![],
            feature_group_count: groups.0,
            batch_group_count: groups.1,
        };
        let _ = t::convolution(&lhs, &rhs, &p, DType::F32);
        let w = t::WindowParams {
            window_dimensions: nums.clone(),
            window_strides: nums.clone(),
            base_dilations: nums.clone(),
            window_dilations: nums,
            padding: pads,
        };
        let _ = t::reduce_window(std::slice::from_ref(&lhs), &[Scalar::I64(0)], &w, &mut add_scalars);
    }
}
