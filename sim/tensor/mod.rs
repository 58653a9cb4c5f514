//! Dense tensors and the numeric kernels of every StableHLO op shardsim supports,
//! plus `.npy` I/O. This is the numerics reference under the single-device
//! interpreter, the multi-device executor and the collective algorithms.
//!
//! Nothing here knows about the program IR: kernels take tensors and plain
//! parameters (dims, permutations, directions) so the interpreter maps each IR op
//! to one call. Kernels validate shapes and element types and return
//! [`TensorError`] instead of panicking.
//!
//! Numerics: f32 computes in f32 and f64 in f64; bf16/f16 compute in f32 and round
//! once to the result. `dot_general` and `reduce` accumulate floats in f64 and round
//! once (so do `convolution` and `reduce_window`'s fast paths), and so does
//! `fft` (complex f64); integers wrap (two's complement) as XLA does.

mod data;
mod dense;
pub mod half;
mod index;
mod scalar;

mod bits;
mod buffers;
mod complex;
mod convert;
mod convolution;
mod dim_numbers;
mod dot;
mod elementwise;
mod fft;
mod gather;
mod int_elem;
pub mod npy;
mod reduce;
mod reduce_window;
mod rng;
mod scatter;
mod select;
mod shape_ops;
mod sort;
mod special;

pub use bits::{
    bitcast_convert, count_leading_zeros, popcnt, shift, shift_left, shift_right_arithmetic,
    shift_right_logical, ShiftKind,
};
pub use buffers::{
    accumulate_into, concat_pieces, extract_block, insert_block, pad_to_shape, reduce_buffers,
    reduce_buffers_wide, split, CollectiveReduction,
};
pub use complex::{complex, part as complex_part, ComplexPart};
pub use convert::convert;
pub use convolution::{convolution, ConvParams};
pub use data::Data;
pub use dense::{allclose, max_abs_rel_error, Tensor};
pub use dot::{dot_general, DotDims};
pub use elementwise::{
    abs, add, and, atan2, binary, cbrt, ceil, cosine, divide, erf, erf_inv, erfc, exponential,
    exponential_minus_one, floor, is_finite, log, log_plus_one, logistic, maximum, minimum,
    multiply, negate, not, or, power, remainder, round_nearest_afz, round_nearest_even, rsqrt,
    sign, sine, sqrt, subtract, tan, tanh, unary, xor, BinaryOp, UnaryOp,
};
pub use fft::{fft, FftKind};
pub use gather::{gather, GatherParams};
pub use index::{for_each_index, row_major_strides, MAX_ELEMENTS};
pub use reduce::{reduce, reduce_with, ReduceBody, ReduceKind};
pub use reduce_window::{reduce_window, WindowParams};
pub use rng::{rng_bit_generator, RngAlgorithm};
pub use scalar::Scalar;
pub use scatter::{scatter, ScatterParams, ScatterUpdate};
pub use select::{clamp, compare, compare_total_order, select, CompareDirection};
pub use shape_ops::{
    broadcast_in_dim, concatenate, constant_list, constant_splat, dynamic_slice,
    dynamic_update_slice, iota, pad, reshape, reverse, slice, transpose,
};
pub use sort::{sort, top_k, SortLess};

/// Why a kernel refused its inputs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TensorError {
    /// Shapes, dims or parameters that do not fit together.
    #[error("{op}: {message}")]
    Invalid { op: String, message: String },
    /// An element type the op does not define.
    #[error("{op}: element type {dtype} is not supported (expected {expected})")]
    UnsupportedDType {
        op: String,
        dtype: crate::base::DType,
        expected: String,
    },
}

impl TensorError {
    /// An `Invalid` error for `op`.
    pub fn invalid(op: &str, message: impl Into<String>) -> Self {
        TensorError::Invalid {
            op: op.to_string(),
            message: message.into(),
        }
    }

    /// An `UnsupportedDType` error for `op`.
    pub fn dtype(op: &str, dtype: crate::base::DType, expected: &str) -> Self {
        TensorError::UnsupportedDType {
            op: op.to_string(),
            dtype,
            expected: expected.to_string(),
        }
    }
}
