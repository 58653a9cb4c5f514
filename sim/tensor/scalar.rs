//! One typed element (`Scalar`) and the element conversion rules shared by the
//! `convert` kernel, constants and reduction inits.

use std::fmt;

use num_complex::{Complex32, Complex64};

use crate::base::DType;

use super::data::Data;
use super::half::{bf16_to_f32, f16_to_f32};

/// A single element of any supported type (bf16/f16 as raw bits).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Scalar {
    F32(f32),
    F64(f64),
    BF16(u16),
    F16(u16),
    I1(bool),
    I8(i8),
    I32(i32),
    I64(i64),
    UI8(u8),
    UI32(u32),
    UI64(u64),
    C64(Complex32),
    C128(Complex64),
}

/// An element widened without loss: every float fits f64, every integer fits i128.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Wide {
    F(f64),
    I(i128),
    B(bool),
    /// A complex element: (real, imaginary).
    C(f64, f64),
}

impl Scalar {
    /// Its element type.
    pub fn dtype(&self) -> DType {
        match self {
            Scalar::F32(_) => DType::F32,
            Scalar::F64(_) => DType::F64,
            Scalar::BF16(_) => DType::BF16,
            Scalar::F16(_) => DType::F16,
            Scalar::I1(_) => DType::I1,
            Scalar::I8(_) => DType::I8,
            Scalar::I32(_) => DType::I32,
            Scalar::I64(_) => DType::I64,
            Scalar::UI8(_) => DType::UI8,
            Scalar::UI32(_) => DType::UI32,
            Scalar::UI64(_) => DType::UI64,
            Scalar::C64(_) => DType::C64,
            Scalar::C128(_) => DType::C128,
        }
    }

    pub(crate) fn wide(self) -> Wide {
        match self {
            Scalar::F32(x) => Wide::F(x as f64),
            Scalar::F64(x) => Wide::F(x),
            Scalar::BF16(x) => Wide::F(bf16_to_f32(x) as f64),
            Scalar::F16(x) => Wide::F(f16_to_f32(x) as f64),
            Scalar::I1(b) => Wide::B(b),
            Scalar::I8(x) => Wide::I(x as i128),
            Scalar::I32(x) => Wide::I(x as i128),
            Scalar::I64(x) => Wide::I(x as i128),
            Scalar::UI8(x) => Wide::I(x as i128),
            Scalar::UI32(x) => Wide::I(x as i128),
            Scalar::UI64(x) => Wide::I(x as i128),
            Scalar::C64(x) => Wide::C(x.re as f64, x.im as f64),
            Scalar::C128(x) => Wide::C(x.re, x.im),
        }
    }

    pub(crate) fn from_wide(w: Wide, to: DType) -> Scalar {
        match w {
            Wide::F(x) => Scalar::from_f64(to, x),
            Wide::I(i) => Scalar::from_i128(to, i),
            Wide::B(b) => Scalar::from_i128(to, b as i128),
            // To a real type, `convert` keeps the real part.
            Wide::C(re, im) => Data::from_c128s(to, &[Complex64::new(re, im)])
                .get(0)
                .unwrap_or(Scalar::F64(re)),
        }
    }

    /// The value as f64 (exact for floats and bool; integers past 2^53 round;
    /// a complex value's real part).
    pub fn to_f64(self) -> f64 {
        match self.wide() {
            Wide::F(x) | Wide::C(x, _) => x,
            Wide::I(i) => i as f64,
            Wide::B(b) => b as u8 as f64,
        }
    }

    /// The value as i128 for integer and bool scalars; `None` for floats.
    pub fn to_i128(self) -> Option<i128> {
        match self.wide() {
            Wide::F(_) | Wide::C(..) => None,
            Wide::I(i) => Some(i),
            Wide::B(b) => Some(b as i128),
        }
    }

    /// A start index for `dynamic_slice`/`dynamic_update_slice` from an integer
    /// scalar, saturated into i64 (the kernels clamp it into range); `None` for
    /// floats and bool.
    pub fn to_index(self) -> Option<i64> {
        match self.wide() {
            Wide::I(i) => Some(i.clamp(i64::MIN as i128, i64::MAX as i128) as i64),
            _ => None,
        }
    }

    /// The element of type `dtype` whose bit pattern is the low bits of `bits` (MLIR
    /// writes splat hex constants such as `0xFF800000` this way); bool is `bits != 0`.
    pub fn from_bits(dtype: DType, bits: u64) -> Scalar {
        match dtype {
            DType::F32 => Scalar::F32(f32::from_bits(bits as u32)),
            DType::F64 => Scalar::F64(f64::from_bits(bits)),
            DType::BF16 => Scalar::BF16(bits as u16),
            DType::F16 => Scalar::F16(bits as u16),
            DType::I1 => Scalar::I1(bits != 0),
            // The real part's bits (a 64-bit hex splat cannot hold both parts of
            // a complex<f64>).
            DType::C64 => Scalar::C64(Complex32::new(f32::from_bits(bits as u32), 0.0)),
            DType::C128 => Scalar::C128(Complex64::new(f64::from_bits(bits), 0.0)),
            _ => Scalar::from_i128(dtype, bits as i128),
        }
    }

    /// `x` converted to `to` like StableHLO `convert`: floats round to nearest even
    /// (once), integers truncate toward zero and saturate (NaN gives 0), bool is `x != 0`.
    pub fn from_f64(to: DType, x: f64) -> Scalar {
        // One rule for scalars and whole tensors: the vector conversion.
        Data::from_f64s(to, &[x]).get(0).unwrap_or(Scalar::F64(x))
    }

    /// Integer `i` converted to `to`: integers wrap (two's complement, like C), floats
    /// round to nearest even once, bool is `i != 0`.
    pub fn from_i128(to: DType, i: i128) -> Scalar {
        Data::from_i128s(to, &[i])
            .get(0)
            .unwrap_or(Scalar::I64(i as i64))
    }

    /// This value converted to `to` (the per-element rule of `convert`).
    pub fn convert(self, to: DType) -> Scalar {
        Scalar::from_wide(self.wide(), to)
    }

    /// Zero of `dtype` (false for i1).
    pub fn zero(dtype: DType) -> Scalar {
        Scalar::from_i128(dtype, 0)
    }

    /// One of `dtype` (true for i1).
    pub fn one(dtype: DType) -> Scalar {
        Scalar::from_i128(dtype, 1)
    }

    /// True when this is a NaN.
    pub fn is_nan(self) -> bool {
        match self.wide() {
            Wide::F(x) => x.is_nan(),
            Wide::C(re, im) => re.is_nan() || im.is_nan(),
            _ => false,
        }
    }
}

impl fmt::Display for Scalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.wide() {
            Wide::F(x) => write!(f, "{x:?}")?,
            Wide::I(i) => write!(f, "{i}")?,
            Wide::B(b) => write!(f, "{b}")?,
            Wide::C(re, im) => write!(f, "({re:?}, {im:?})")?,
        }
        write!(f, " : {}", self.dtype())
    }
}
