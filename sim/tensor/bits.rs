//! Bit-level kernels on integer tensors: the three shifts, `popcnt`,
//! `count_leading_zeros`, and `bitcast_convert` between any two element types.
//!
//! Shifts follow StableHLO/XLA: the shift amount is read as an unsigned number of
//! the element's width, and an amount at or above the bit width gives 0 (or, for
//! an arithmetic right shift, the sign fill: 0 or -1).

use crate::base::DType;

use super::data::Data;
use super::elementwise::check_same;
use super::{Tensor, TensorError};

/// Which shift.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ShiftKind {
    Left,
    RightLogical,
    RightArithmetic,
}

impl ShiftKind {
    /// The StableHLO op name.
    pub fn name(self) -> &'static str {
        match self {
            ShiftKind::Left => "shift_left",
            ShiftKind::RightLogical => "shift_right_logical",
            ShiftKind::RightArithmetic => "shift_right_arithmetic",
        }
    }
}

/// One integer element type seen as its unsigned bit pattern.
trait Bits: Copy {
    const WIDTH: u32;
    fn to_bits(self) -> u64;
    fn from_bits(b: u64) -> Self;
}

macro_rules! bits {
    ($($t:ty => $u:ty),*) => {$(
        impl Bits for $t {
            const WIDTH: u32 = <$t>::BITS;
            fn to_bits(self) -> u64 {
                self as $u as u64
            }
            fn from_bits(b: u64) -> Self {
                b as $u as $t
            }
        }
    )*};
}

bits!(i8 => u8, i32 => u32, i64 => u64, u8 => u8, u32 => u32, u64 => u64);

fn shift_elems<T: Bits>(kind: ShiftKind, a: &[T], b: &[T]) -> Vec<T> {
    let w = T::WIDTH;
    let mask = if w == 64 { u64::MAX } else { (1u64 << w) - 1 };
    a.iter()
        .zip(b)
        .map(|(&x, &y)| {
            let (x, y) = (x.to_bits(), y.to_bits());
            let negative = (x >> (w - 1)) & 1 == 1;
            let r = match kind {
                _ if y >= w as u64 => {
                    if kind == ShiftKind::RightArithmetic && negative {
                        mask
                    } else {
                        0
                    }
                }
                ShiftKind::Left => (x << y) & mask,
                ShiftKind::RightLogical => x >> y,
                ShiftKind::RightArithmetic => {
                    let fill = if negative && y > 0 {
                        mask & !(mask >> y)
                    } else {
                        0
                    };
                    (x >> y) | fill
                }
            };
            T::from_bits(r)
        })
        .collect()
}

/// StableHLO `shift_left` / `shift_right_logical` / `shift_right_arithmetic` on
/// two integer tensors of the same shape and type.
pub fn shift(kind: ShiftKind, a: &Tensor, b: &Tensor) -> Result<Tensor, TensorError> {
    check_same(kind.name(), a, b)?;
    let data = match (a.data(), b.data()) {
        (Data::I8(x), Data::I8(y)) => Data::I8(shift_elems(kind, x, y)),
        (Data::I32(x), Data::I32(y)) => Data::I32(shift_elems(kind, x, y)),
        (Data::I64(x), Data::I64(y)) => Data::I64(shift_elems(kind, x, y)),
        (Data::UI8(x), Data::UI8(y)) => Data::UI8(shift_elems(kind, x, y)),
        (Data::UI32(x), Data::UI32(y)) => Data::UI32(shift_elems(kind, x, y)),
        (Data::UI64(x), Data::UI64(y)) => Data::UI64(shift_elems(kind, x, y)),
        _ => {
            return Err(TensorError::dtype(
                kind.name(),
                a.dtype(),
                "an integer type",
            ))
        }
    };
    Tensor::new(a.shape().to_vec(), data)
}

/// StableHLO `shift_left`.
pub fn shift_left(a: &Tensor, b: &Tensor) -> Result<Tensor, TensorError> {
    shift(ShiftKind::Left, a, b)
}

/// StableHLO `shift_right_logical`.
pub fn shift_right_logical(a: &Tensor, b: &Tensor) -> Result<Tensor, TensorError> {
    shift(ShiftKind::RightLogical, a, b)
}

/// StableHLO `shift_right_arithmetic`.
pub fn shift_right_arithmetic(a: &Tensor, b: &Tensor) -> Result<Tensor, TensorError> {
    shift(ShiftKind::RightArithmetic, a, b)
}

fn count<T: Bits>(v: &[T], f: fn(u64, u32) -> u64) -> Vec<T> {
    v.iter()
        .map(|&x| T::from_bits(f(x.to_bits(), T::WIDTH)))
        .collect()
}

fn count_op(op: &str, x: &Tensor, f: fn(u64, u32) -> u64) -> Result<Tensor, TensorError> {
    let data = match x.data() {
        Data::I8(v) => Data::I8(count(v, f)),
        Data::I32(v) => Data::I32(count(v, f)),
        Data::I64(v) => Data::I64(count(v, f)),
        Data::UI8(v) => Data::UI8(count(v, f)),
        Data::UI32(v) => Data::UI32(count(v, f)),
        Data::UI64(v) => Data::UI64(count(v, f)),
        _ => return Err(TensorError::dtype(op, x.dtype(), "an integer type")),
    };
    Tensor::new(x.shape().to_vec(), data)
}

/// StableHLO `popcnt`: the number of set bits of each element.
pub fn popcnt(x: &Tensor) -> Result<Tensor, TensorError> {
    count_op("popcnt", x, |b, _| b.count_ones() as u64)
}

/// StableHLO `count_leading_zeros` (the bit width for 0).
pub fn count_leading_zeros(x: &Tensor) -> Result<Tensor, TensorError> {
    count_op("count_leading_zeros", x, |b, w| {
        (b.leading_zeros() - (64 - w)) as u64
    })
}

/// StableHLO `bitcast_convert` to element type `to`. Same width: the bits of each
/// element reinterpreted. A narrower result gains a last dim of `from / to`
/// elements; a wider result drops the last dim, which must be `to / from` long.
/// The parts of a wide element are in little-endian order (as XLA on the CPU).
/// i1 takes no part (its bit width is not its storage width).
pub fn bitcast_convert(x: &Tensor, to: DType) -> Result<Tensor, TensorError> {
    const OP: &str = "bitcast_convert";
    for d in [x.dtype(), to] {
        if d == DType::I1 {
            return Err(TensorError::dtype(OP, d, "a type other than i1"));
        }
    }
    let (from_w, to_w) = (x.dtype().size_bytes(), to.size_bytes());
    let mut shape = x.shape().to_vec();
    if from_w > to_w {
        shape.push(from_w / to_w);
    } else if from_w < to_w {
        let ratio = to_w / from_w;
        if shape.last() != Some(&ratio) {
            return Err(TensorError::invalid(
                OP,
                format!(
                    "{} to {to} needs a last dim of {ratio}, the shape is {:?}",
                    x.dtype(),
                    x.shape()
                ),
            ));
        }
        shape.pop();
    }
    Tensor::from_le_bytes(shape, to, &x.data().to_le_bytes())
}
