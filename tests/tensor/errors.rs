//! Bad kernel inputs give errors that name the op and say what was expected, and
//! the documented evaluation order of `reduce_with` holds.

use shardsim::base::DType;
use shardsim::tensor::{self as t, Scalar, Tensor, TensorError};

fn f32s(shape: &[u64], v: &[f32]) -> Tensor {
    Tensor::from_vec(shape.to_vec(), v.to_vec()).unwrap()
}

#[test]
fn kernel_errors_name_the_op_and_the_problem() {
    let a = f32s(&[2, 3], &[1.0; 6]);
    let b = f32s(&[3, 2], &[1.0; 6]);
    let i = Tensor::from_vec(vec![2, 3], vec![1i32; 6]).unwrap();
    let cases: Vec<(Result<Tensor, TensorError>, &str)> = vec![
        (
            t::add(&a, &b),
            "add: operand shapes differ: [2, 3] vs [3, 2]",
        ),
        (
            t::add(&a, &i),
            "add: operand element types differ: f32 vs i32",
        ),
        (
            t::exponential(&i),
            "exponential: element type i32 is not supported (expected a float type)",
        ),
        (
            t::and(&a, &a),
            "and: element type f32 is not supported (expected i1 or an integer type)",
        ),
        (
            t::transpose(&a, &[0, 0]),
            "transpose: [0, 0] is not a permutation of 0..2",
        ),
        (
            t::reshape(&a, &[4]),
            "reshape: cannot reshape [2, 3] (6 elements) to [4] (4 elements)",
        ),
        (
            t::broadcast_in_dim(&a, &[2, 4], &[0, 1]),
            "operand dim 1 has size 3, expected 1 or result dim 1's size 4",
        ),
        (
            t::slice(&a, &[0, 2], &[2, 1], &[1, 1]),
            "dim 1: expected 0 <= start <= limit <= 3",
        ),
        (
            t::dynamic_slice(&a, &[0, 0], &[3, 1]),
            "dim 0: size 3 exceeds the operand's 2",
        ),
        (
            t::pad(&a, Scalar::F32(0.0), &[-3, 0], &[0, 0], &[0, 0]),
            "dim 0: low -3 + dilated size 2 + high 0 gives size -1",
        ),
        (
            t::pad(&a, Scalar::I32(0), &[0, 0], &[0, 0], &[0, 0]),
            "padding value has type i32, operand has f32",
        ),
        (
            t::concatenate(&[a.clone(), b.clone()], 0),
            "operand 1 is tensor<3x2xf32>",
        ),
        (
            t::reduce(&a, Scalar::F64(0.0), &[0], t::ReduceKind::Add),
            "init value has type f64, operand has f32",
        ),
        (
            t::reduce(&a, Scalar::F32(0.0), &[0, 0], t::ReduceKind::Add),
            "dimensions [0, 0] must be distinct",
        ),
        (
            t::select(&a, &a, &a),
            "select: element type f32 is not supported (expected i1 for the predicate)",
        ),
        (
            t::iota(vec![2], 1, DType::I32),
            "iota_dimension 1 is out of range for rank 1",
        ),
        (
            Tensor::zeros(vec![1 << 20, 1 << 20], DType::F32),
            "more than the 2147483648 elements",
        ),
    ];
    for (r, want) in cases {
        let err = r.expect_err(want).to_string();
        assert!(err.contains(want), "{err:?} should contain {want:?}");
    }
    let dims = t::DotDims {
        lhs_contract: vec![1],
        rhs_contract: vec![1],
        ..Default::default()
    };
    let err = t::dot_general(&a, &b, &dims, DType::F32)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("contracting dims lhs 1 (size 3) and rhs 1 (size 2) differ"),
        "{err}"
    );
    let err = t::split(&a, 1, 2).unwrap_err().to_string();
    assert!(
        err.contains("dim 1 of size 3 does not split into 2 equal pieces"),
        "{err}"
    );
}

/// A body that is not commutative exposes the order: acc * 10 + elem spells the
/// visited elements as decimal digits.
#[test]
fn reduce_with_visits_reduced_positions_in_row_major_order() {
    // x[i][j][k] = digit; reduce over dims 0 and 2 keeps dim 1.
    let x = Tensor::from_vec(vec![2, 2, 2], vec![1i64, 2, 3, 4, 5, 6, 7, 8]).unwrap();
    let mut body = |acc: &[Scalar], elem: &[Scalar]| -> Result<Vec<Scalar>, TensorError> {
        let (a, e) = (acc[0].to_i128().unwrap(), elem[0].to_i128().unwrap());
        Ok(vec![Scalar::I64((a * 10 + e) as i64)])
    };
    let out = t::reduce_with(&[x], &[Scalar::I64(9)], &[0, 2], &mut body).unwrap();
    // Kept j = 0 visits (i, k) = (0,0) (0,1) (1,0) (1,1): 1, 2, 5, 6 after the init 9.
    assert_eq!(
        out[0],
        Tensor::from_vec(vec![2], vec![91256i64, 93478]).unwrap()
    );
}

#[test]
fn reduce_with_checks_the_body() {
    let x = f32s(&[2], &[1.0, 2.0]);
    let mut wrong_type = |_: &[Scalar], _: &[Scalar]| -> Result<Vec<Scalar>, TensorError> {
        Ok(vec![Scalar::I32(0)])
    };
    let err = t::reduce_with(
        std::slice::from_ref(&x),
        &[Scalar::F32(0.0)],
        &[0],
        &mut wrong_type,
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("expected 1 values of types [F32]"),
        "{err}"
    );
    let mut failing = |_: &[Scalar], _: &[Scalar]| -> Result<Vec<Scalar>, TensorError> {
        Err(TensorError::invalid("body", "boom"))
    };
    let err = t::reduce_with(&[x], &[Scalar::F32(0.0)], &[0], &mut failing).unwrap_err();
    assert_eq!(err.to_string(), "body: boom");
}

/// StableHLO's integer division edge cases (from XLA's semantics, not numpy's).
#[test]
fn integer_division_by_zero_follows_xla() {
    let a = Tensor::from_vec(vec![3], vec![7i32, i32::MIN, -7]).unwrap();
    let b = Tensor::from_vec(vec![3], vec![0i32, -1, 0]).unwrap();
    assert_eq!(
        t::divide(&a, &b).unwrap(),
        Tensor::from_vec(vec![3], vec![-1i32, i32::MIN, -1]).unwrap()
    );
    assert_eq!(
        t::remainder(&a, &b).unwrap(),
        Tensor::from_vec(vec![3], vec![7i32, 0, -7]).unwrap()
    );
}

/// IEEE 754 totalOrder, StableHLO's `TOTALORDER` compare type.
#[test]
fn total_order_compare_orders_nan_and_signed_zero() {
    let a = Tensor::from_vec(vec![5], vec![-0.0f32, f32::NAN, f32::NAN, -f32::NAN, 1.0]).unwrap();
    let b = Tensor::from_vec(
        vec![5],
        vec![0.0f32, f32::INFINITY, f32::NAN, f32::NEG_INFINITY, 1.0],
    )
    .unwrap();
    let lt = t::compare_total_order(&a, &b, t::CompareDirection::Lt).unwrap();
    assert_eq!(
        lt,
        Tensor::from_vec(vec![5], vec![true, false, false, true, false]).unwrap()
    );
    let eq = t::compare_total_order(&a, &b, t::CompareDirection::Eq).unwrap();
    assert_eq!(
        eq,
        Tensor::from_vec(vec![5], vec![false, false, true, false, true]).unwrap()
    );
    // The default (FLOAT) comparison differs exactly on these.
    let float_eq = t::compare(&a, &b, t::CompareDirection::Eq).unwrap();
    assert_eq!(
        float_eq,
        Tensor::from_vec(vec![5], vec![true, false, false, false, true]).unwrap()
    );
}

/// MLIR splat hex constants are bit patterns; dynamic start indices saturate.
#[test]
fn scalar_bit_patterns_and_indices() {
    assert_eq!(
        Scalar::from_bits(DType::F32, 0xFF80_0000),
        Scalar::F32(f32::NEG_INFINITY)
    );
    assert_eq!(Scalar::from_bits(DType::BF16, 0x3F80).to_f64(), 1.0);
    assert_eq!(Scalar::from_bits(DType::F16, 0x3C00).to_f64(), 1.0);
    assert_eq!(Scalar::from_bits(DType::I32, 0xFFFF_FFFF), Scalar::I32(-1));
    assert_eq!(Scalar::UI64(u64::MAX).to_index(), Some(i64::MAX));
    assert_eq!(Scalar::I32(-3).to_index(), Some(-3));
    assert_eq!(Scalar::F32(1.0).to_index(), None);
    let x = Tensor::zeros(vec![2, 3], DType::BF16).unwrap();
    assert_eq!(x.size_bytes(), 12);
    assert_eq!(x.strides(), vec![3, 1]);
}

/// A stride larger than the dim takes just the start element (no overflow).
#[test]
fn slice_with_a_huge_stride_takes_the_start() {
    let x = Tensor::from_vec(vec![2, 3], vec![1i32, 2, 3, 4, 5, 6]).unwrap();
    let s = t::slice(&x, &[1, 1], &[2, 3], &[u64::MAX, 1]).unwrap();
    assert_eq!(s, Tensor::from_vec(vec![1, 2], vec![5i32, 6]).unwrap());
}
