//! Typed element storage (`Data`) and the macros that dispatch over its variants,
//! so kernels are written once for every element type.

use num_complex::{Complex32, Complex64};

use crate::base::DType;

use super::half::{bf16_to_f32, f16_to_f32, f32_to_bf16, f32_to_f16, f64_to_bf16, f64_to_f16};
use super::Scalar;

/// The elements of a tensor, row-major, one vector per element type.
/// bf16 and f16 are kept as raw IEEE bits; complex elements as (re, im) pairs.
#[derive(Debug, Clone, PartialEq)]
pub enum Data {
    F32(Vec<f32>),
    F64(Vec<f64>),
    BF16(Vec<u16>),
    F16(Vec<u16>),
    I1(Vec<bool>),
    I8(Vec<i8>),
    I32(Vec<i32>),
    I64(Vec<i64>),
    UI8(Vec<u8>),
    UI32(Vec<u32>),
    UI64(Vec<u64>),
    C64(Vec<Complex32>),
    C128(Vec<Complex64>),
}

/// Apply `$e` (using the bound vector `$v`) to whichever variant `$data` is, and
/// wrap the result in the same variant.
macro_rules! map_data {
    ($data:expr, $v:ident => $e:expr) => {
        match $data {
            Data::F32($v) => Data::F32($e),
            Data::F64($v) => Data::F64($e),
            Data::BF16($v) => Data::BF16($e),
            Data::F16($v) => Data::F16($e),
            Data::I1($v) => Data::I1($e),
            Data::I8($v) => Data::I8($e),
            Data::I32($v) => Data::I32($e),
            Data::I64($v) => Data::I64($e),
            Data::UI8($v) => Data::UI8($e),
            Data::UI32($v) => Data::UI32($e),
            Data::UI64($v) => Data::UI64($e),
            Data::C64($v) => Data::C64($e),
            Data::C128($v) => Data::C128($e),
        }
    };
}

/// Evaluate `$e` (using the bound vector `$v`) on whichever variant `$data` is.
macro_rules! with_data {
    ($data:expr, $v:ident => $e:expr) => {
        match $data {
            Data::F32($v) => $e,
            Data::F64($v) => $e,
            Data::BF16($v) => $e,
            Data::F16($v) => $e,
            Data::I1($v) => $e,
            Data::I8($v) => $e,
            Data::I32($v) => $e,
            Data::I64($v) => $e,
            Data::UI8($v) => $e,
            Data::UI32($v) => $e,
            Data::UI64($v) => $e,
            Data::C64($v) => $e,
            Data::C128($v) => $e,
        }
    };
}

impl Data {
    /// The element type this storage holds.
    pub fn dtype(&self) -> DType {
        match self {
            Data::F32(_) => DType::F32,
            Data::F64(_) => DType::F64,
            Data::BF16(_) => DType::BF16,
            Data::F16(_) => DType::F16,
            Data::I1(_) => DType::I1,
            Data::I8(_) => DType::I8,
            Data::I32(_) => DType::I32,
            Data::I64(_) => DType::I64,
            Data::UI8(_) => DType::UI8,
            Data::UI32(_) => DType::UI32,
            Data::UI64(_) => DType::UI64,
            Data::C64(_) => DType::C64,
            Data::C128(_) => DType::C128,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        with_data!(self, v => v.len())
    }

    /// True when there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `n` copies of `value` (whose type decides the variant).
    pub fn filled(value: Scalar, n: usize) -> Data {
        match value {
            Scalar::F32(x) => Data::F32(vec![x; n]),
            Scalar::F64(x) => Data::F64(vec![x; n]),
            Scalar::BF16(x) => Data::BF16(vec![x; n]),
            Scalar::F16(x) => Data::F16(vec![x; n]),
            Scalar::I1(x) => Data::I1(vec![x; n]),
            Scalar::I8(x) => Data::I8(vec![x; n]),
            Scalar::I32(x) => Data::I32(vec![x; n]),
            Scalar::I64(x) => Data::I64(vec![x; n]),
            Scalar::UI8(x) => Data::UI8(vec![x; n]),
            Scalar::UI32(x) => Data::UI32(vec![x; n]),
            Scalar::UI64(x) => Data::UI64(vec![x; n]),
            Scalar::C64(x) => Data::C64(vec![x; n]),
            Scalar::C128(x) => Data::C128(vec![x; n]),
        }
    }

    /// Element `i`, or `None` past the end.
    pub fn get(&self, i: usize) -> Option<Scalar> {
        Some(match self {
            Data::F32(v) => Scalar::F32(*v.get(i)?),
            Data::F64(v) => Scalar::F64(*v.get(i)?),
            Data::BF16(v) => Scalar::BF16(*v.get(i)?),
            Data::F16(v) => Scalar::F16(*v.get(i)?),
            Data::I1(v) => Scalar::I1(*v.get(i)?),
            Data::I8(v) => Scalar::I8(*v.get(i)?),
            Data::I32(v) => Scalar::I32(*v.get(i)?),
            Data::I64(v) => Scalar::I64(*v.get(i)?),
            Data::UI8(v) => Scalar::UI8(*v.get(i)?),
            Data::UI32(v) => Scalar::UI32(*v.get(i)?),
            Data::UI64(v) => Scalar::UI64(*v.get(i)?),
            Data::C64(v) => Scalar::C64(*v.get(i)?),
            Data::C128(v) => Scalar::C128(*v.get(i)?),
        })
    }

    /// Set element `i`; false when `i` is out of range or `value` has another type.
    pub fn set(&mut self, i: usize, value: Scalar) -> bool {
        macro_rules! put {
            ($v:expr, $x:expr) => {
                match $v.get_mut(i) {
                    Some(slot) => {
                        *slot = $x;
                        true
                    }
                    None => false,
                }
            };
        }
        match (self, value) {
            (Data::F32(v), Scalar::F32(x)) => put!(v, x),
            (Data::F64(v), Scalar::F64(x)) => put!(v, x),
            (Data::BF16(v), Scalar::BF16(x)) => put!(v, x),
            (Data::F16(v), Scalar::F16(x)) => put!(v, x),
            (Data::I1(v), Scalar::I1(x)) => put!(v, x),
            (Data::I8(v), Scalar::I8(x)) => put!(v, x),
            (Data::I32(v), Scalar::I32(x)) => put!(v, x),
            (Data::I64(v), Scalar::I64(x)) => put!(v, x),
            (Data::UI8(v), Scalar::UI8(x)) => put!(v, x),
            (Data::UI32(v), Scalar::UI32(x)) => put!(v, x),
            (Data::UI64(v), Scalar::UI64(x)) => put!(v, x),
            (Data::C64(v), Scalar::C64(x)) => put!(v, x),
            (Data::C128(v), Scalar::C128(x)) => put!(v, x),
            _ => false,
        }
    }

    /// The elements at flat positions `idx`, in that order (callers check the bounds).
    pub(crate) fn take(&self, idx: &[usize]) -> Data {
        map_data!(self, v => idx.iter().map(|&i| v[i]).collect())
    }

    /// Elements `[start, end)` (callers check the bounds).
    pub(crate) fn range(&self, start: usize, end: usize) -> Data {
        map_data!(self, v => v[start..end].to_vec())
    }

    /// The elements at `idx`, with `fill` where the position is `None` (used by pad).
    /// `fill` must have this storage's type (callers check).
    pub(crate) fn take_or(&self, idx: &[Option<usize>], fill: Scalar) -> Data {
        let mut out = Data::filled(fill, idx.len());
        macro_rules! go {
            ($src:expr, $dst:expr) => {
                for (o, i) in $dst.iter_mut().zip(idx) {
                    if let Some(i) = i {
                        *o = $src[*i];
                    }
                }
            };
        }
        match (self, &mut out) {
            (Data::F32(s), Data::F32(d)) => go!(s, d),
            (Data::F64(s), Data::F64(d)) => go!(s, d),
            (Data::BF16(s), Data::BF16(d)) => go!(s, d),
            (Data::F16(s), Data::F16(d)) => go!(s, d),
            (Data::I1(s), Data::I1(d)) => go!(s, d),
            (Data::I8(s), Data::I8(d)) => go!(s, d),
            (Data::I32(s), Data::I32(d)) => go!(s, d),
            (Data::I64(s), Data::I64(d)) => go!(s, d),
            (Data::UI8(s), Data::UI8(d)) => go!(s, d),
            (Data::UI32(s), Data::UI32(d)) => go!(s, d),
            (Data::UI64(s), Data::UI64(d)) => go!(s, d),
            (Data::C64(s), Data::C64(d)) => go!(s, d),
            (Data::C128(s), Data::C128(d)) => go!(s, d),
            _ => {}
        }
        out
    }

    /// Copy `src[j]` into `self[dst_idx[j]]` for every j; false on a type mismatch.
    pub(crate) fn scatter_from(&mut self, src: &Data, dst_idx: &[usize]) -> bool {
        macro_rules! go {
            ($d:expr, $s:expr) => {{
                for (j, &i) in dst_idx.iter().enumerate() {
                    $d[i] = $s[j];
                }
                true
            }};
        }
        match (self, src) {
            (Data::F32(d), Data::F32(s)) => go!(d, s),
            (Data::F64(d), Data::F64(s)) => go!(d, s),
            (Data::BF16(d), Data::BF16(s)) => go!(d, s),
            (Data::F16(d), Data::F16(s)) => go!(d, s),
            (Data::I1(d), Data::I1(s)) => go!(d, s),
            (Data::I8(d), Data::I8(s)) => go!(d, s),
            (Data::I32(d), Data::I32(s)) => go!(d, s),
            (Data::I64(d), Data::I64(s)) => go!(d, s),
            (Data::UI8(d), Data::UI8(s)) => go!(d, s),
            (Data::UI32(d), Data::UI32(s)) => go!(d, s),
            (Data::UI64(d), Data::UI64(s)) => go!(d, s),
            (Data::C64(d), Data::C64(s)) => go!(d, s),
            (Data::C128(d), Data::C128(s)) => go!(d, s),
            _ => false,
        }
    }

    /// Append another storage of the same type; false on a type mismatch.
    pub(crate) fn extend_from(&mut self, other: &Data) -> bool {
        match (self, other) {
            (Data::F32(d), Data::F32(s)) => d.extend_from_slice(s),
            (Data::F64(d), Data::F64(s)) => d.extend_from_slice(s),
            (Data::BF16(d), Data::BF16(s)) => d.extend_from_slice(s),
            (Data::F16(d), Data::F16(s)) => d.extend_from_slice(s),
            (Data::I1(d), Data::I1(s)) => d.extend_from_slice(s),
            (Data::I8(d), Data::I8(s)) => d.extend_from_slice(s),
            (Data::I32(d), Data::I32(s)) => d.extend_from_slice(s),
            (Data::I64(d), Data::I64(s)) => d.extend_from_slice(s),
            (Data::UI8(d), Data::UI8(s)) => d.extend_from_slice(s),
            (Data::UI32(d), Data::UI32(s)) => d.extend_from_slice(s),
            (Data::UI64(d), Data::UI64(s)) => d.extend_from_slice(s),
            (Data::C64(d), Data::C64(s)) => d.extend_from_slice(s),
            (Data::C128(d), Data::C128(s)) => d.extend_from_slice(s),
            _ => return false,
        }
        true
    }

    /// f64 values converted to `dtype` like StableHLO `convert`: floats round to
    /// nearest even once, integers truncate toward zero and saturate (NaN gives 0,
    /// as XLA; Rust's float-to-int `as` does exactly this), i1 is `x != 0`.
    pub fn from_f64s(dtype: DType, v: &[f64]) -> Data {
        match dtype {
            DType::F32 => Data::F32(v.iter().map(|&x| x as f32).collect()),
            DType::F64 => Data::F64(v.to_vec()),
            DType::BF16 => Data::BF16(v.iter().map(|&x| f64_to_bf16(x)).collect()),
            DType::F16 => Data::F16(v.iter().map(|&x| f64_to_f16(x)).collect()),
            DType::I1 => Data::I1(v.iter().map(|&x| x != 0.0).collect()),
            DType::I8 => Data::I8(v.iter().map(|&x| x as i8).collect()),
            DType::I32 => Data::I32(v.iter().map(|&x| x as i32).collect()),
            DType::I64 => Data::I64(v.iter().map(|&x| x as i64).collect()),
            DType::UI8 => Data::UI8(v.iter().map(|&x| x as u8).collect()),
            DType::UI32 => Data::UI32(v.iter().map(|&x| x as u32).collect()),
            DType::UI64 => Data::UI64(v.iter().map(|&x| x as u64).collect()),
            // A real value converts to a complex one with a zero imaginary part.
            DType::C64 => Data::C64(v.iter().map(|&x| Complex32::new(x as f32, 0.0)).collect()),
            DType::C128 => Data::C128(v.iter().map(|&x| Complex64::new(x, 0.0)).collect()),
            // A token holds no data.
            DType::Token => Data::I1(Vec::new()),
        }
    }

    /// Integer values converted to `dtype`: integers wrap (two's complement, like
    /// C), floats round to nearest even once, i1 is `i != 0`.
    pub fn from_i128s(dtype: DType, v: &[i128]) -> Data {
        // Below 2^24 an integer is exact in f32, so one f32 rounding is the only one.
        let to16 = |i: i128, narrow: fn(f32) -> u16, wide: fn(f64) -> u16| {
            if i.unsigned_abs() < (1 << 24) {
                narrow(i as f32)
            } else {
                wide(i as f64)
            }
        };
        match dtype {
            DType::F32 => Data::F32(v.iter().map(|&i| i as f32).collect()),
            DType::F64 => Data::F64(v.iter().map(|&i| i as f64).collect()),
            DType::BF16 => Data::BF16(
                v.iter()
                    .map(|&i| to16(i, f32_to_bf16, f64_to_bf16))
                    .collect(),
            ),
            DType::F16 => Data::F16(v.iter().map(|&i| to16(i, f32_to_f16, f64_to_f16)).collect()),
            DType::I1 => Data::I1(v.iter().map(|&i| i != 0).collect()),
            DType::I8 => Data::I8(v.iter().map(|&i| i as i8).collect()),
            DType::I32 => Data::I32(v.iter().map(|&i| i as i32).collect()),
            DType::I64 => Data::I64(v.iter().map(|&i| i as i64).collect()),
            DType::UI8 => Data::UI8(v.iter().map(|&i| i as u8).collect()),
            DType::UI32 => Data::UI32(v.iter().map(|&i| i as u32).collect()),
            DType::UI64 => Data::UI64(v.iter().map(|&i| i as u64).collect()),
            DType::C64 => Data::C64(v.iter().map(|&i| Complex32::new(i as f32, 0.0)).collect()),
            DType::C128 => Data::C128(v.iter().map(|&i| Complex64::new(i as f64, 0.0)).collect()),
            DType::Token => Data::I1(Vec::new()),
        }
    }

    /// Every integer or bool element as i128 (exact); `None` for float and
    /// complex storage.
    pub fn to_i128_vec(&self) -> Option<Vec<i128>> {
        Some(match self {
            Data::F32(_)
            | Data::F64(_)
            | Data::BF16(_)
            | Data::F16(_)
            | Data::C64(_)
            | Data::C128(_) => return None,
            Data::I1(v) => v.iter().map(|&x| x as i128).collect(),
            Data::I8(v) => v.iter().map(|&x| x as i128).collect(),
            Data::I32(v) => v.iter().map(|&x| x as i128).collect(),
            Data::I64(v) => v.iter().map(|&x| x as i128).collect(),
            Data::UI8(v) => v.iter().map(|&x| x as i128).collect(),
            Data::UI32(v) => v.iter().map(|&x| x as i128).collect(),
            Data::UI64(v) => v.iter().map(|&x| x as i128).collect(),
        })
    }

    /// Every element as f64 (floats exactly; integers rounded past 2^53; bool as
    /// 0/1; a complex element as its real part, as `convert` to a real type does).
    pub fn to_f64_vec(&self) -> Vec<f64> {
        match self {
            Data::F32(v) => v.iter().map(|&x| x as f64).collect(),
            Data::F64(v) => v.clone(),
            Data::BF16(v) => v.iter().map(|&x| bf16_to_f32(x) as f64).collect(),
            Data::F16(v) => v.iter().map(|&x| f16_to_f32(x) as f64).collect(),
            Data::I1(v) => v.iter().map(|&x| x as u8 as f64).collect(),
            Data::I8(v) => v.iter().map(|&x| x as f64).collect(),
            Data::I32(v) => v.iter().map(|&x| x as f64).collect(),
            Data::I64(v) => v.iter().map(|&x| x as f64).collect(),
            Data::UI8(v) => v.iter().map(|&x| x as f64).collect(),
            Data::UI32(v) => v.iter().map(|&x| x as f64).collect(),
            Data::UI64(v) => v.iter().map(|&x| x as f64).collect(),
            Data::C64(v) => v.iter().map(|x| x.re as f64).collect(),
            Data::C128(v) => v.iter().map(|x| x.re).collect(),
        }
    }

    /// Every element as a complex f64 pair (real types with a zero imaginary part).
    pub fn to_c128_vec(&self) -> Vec<Complex64> {
        match self {
            Data::C64(v) => v
                .iter()
                .map(|x| Complex64::new(x.re as f64, x.im as f64))
                .collect(),
            Data::C128(v) => v.clone(),
            other => other
                .to_f64_vec()
                .into_iter()
                .map(|x| Complex64::new(x, 0.0))
                .collect(),
        }
    }

    /// Complex f64 values as `dtype`: rounded once to `complex<f32>`, kept for
    /// `complex<f64>`, the real part (rounded once) for a real type.
    pub fn from_c128s(dtype: DType, v: &[Complex64]) -> Data {
        match dtype {
            DType::C64 => Data::C64(
                v.iter()
                    .map(|x| Complex32::new(x.re as f32, x.im as f32))
                    .collect(),
            ),
            DType::C128 => Data::C128(v.to_vec()),
            other => Data::from_f64s(other, &v.iter().map(|x| x.re).collect::<Vec<_>>()),
        }
    }

    /// Little-endian bytes of every element (bool as one byte 0/1), as in .npy and MLIR hex constants.
    pub fn to_le_bytes(&self) -> Vec<u8> {
        match self {
            Data::I1(v) => v.iter().map(|&b| b as u8).collect(),
            Data::F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Data::F64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Data::BF16(v) | Data::F16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Data::I8(v) => v.iter().map(|&x| x as u8).collect(),
            Data::I32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Data::I64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Data::UI8(v) => v.clone(),
            Data::UI32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Data::UI64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            // numpy's complex64/complex128: the real part, then the imaginary part.
            Data::C64(v) => v
                .iter()
                .flat_map(|x| x.re.to_le_bytes().into_iter().chain(x.im.to_le_bytes()))
                .collect(),
            Data::C128(v) => v
                .iter()
                .flat_map(|x| x.re.to_le_bytes().into_iter().chain(x.im.to_le_bytes()))
                .collect(),
        }
    }
}
