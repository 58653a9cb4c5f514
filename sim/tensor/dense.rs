//! The dense tensor: a static shape, an element type and typed row-major storage,
//! with constructors, element access and numeric comparison helpers.

use crate::base::{DType, TensorType};

use super::data::Data;
use super::index::{element_count, row_major_strides, to_usize};
use super::{Scalar, TensorError};

/// A dense row-major tensor. The fields are private so the storage length always
/// matches the shape and the variant always matches the dtype.
#[derive(Debug, Clone, PartialEq)]
pub struct Tensor {
    shape: Vec<u64>,
    dtype: DType,
    data: Data,
}

macro_rules! data_from_vec {
    ($($t:ty => $v:ident),*) => {$(
        impl From<Vec<$t>> for Data {
            fn from(v: Vec<$t>) -> Data {
                Data::$v(v)
            }
        }
    )*};
}
data_from_vec!(f32 => F32, f64 => F64, bool => I1, i8 => I8, i32 => I32, i64 => I64, u8 => UI8, u32 => UI32, u64 => UI64);

impl Tensor {
    /// A tensor of `shape` over `data`; errors when the element count differs.
    pub fn new(shape: Vec<u64>, data: Data) -> Result<Tensor, TensorError> {
        let n = element_count("tensor", &shape)?;
        if data.len() != n {
            return Err(TensorError::invalid(
                "tensor",
                format!(
                    "shape {shape:?} needs {n} elements, data has {}",
                    data.len()
                ),
            ));
        }
        Ok(Tensor {
            dtype: data.dtype(),
            shape,
            data,
        })
    }

    /// From a typed vector (`Vec<f32>`, `Vec<i32>`, `Vec<bool>`, ...). bf16/f16 go
    /// through [`Tensor::new`] with `Data::BF16`/`Data::F16` bits.
    pub fn from_vec(shape: Vec<u64>, values: impl Into<Data>) -> Result<Tensor, TensorError> {
        Tensor::new(shape, values.into())
    }

    /// Every element equal to `value`.
    pub fn splat(shape: Vec<u64>, value: Scalar) -> Result<Tensor, TensorError> {
        let n = element_count("splat", &shape)?;
        Tensor::new(shape, Data::filled(value, n))
    }

    /// All zeros (false for i1).
    pub fn zeros(shape: Vec<u64>, dtype: DType) -> Result<Tensor, TensorError> {
        if dtype == DType::Token && shape.is_empty() {
            return Ok(Tensor::token());
        }
        Tensor::splat(shape, Scalar::zero(dtype))
    }

    /// A `!stablehlo.token` value: rank 0 and no data (it only orders side
    /// effects).
    pub fn token() -> Tensor {
        Tensor {
            shape: Vec::new(),
            dtype: DType::Token,
            data: Data::I1(Vec::new()),
        }
    }

    /// A rank-0 tensor.
    pub fn scalar(value: Scalar) -> Tensor {
        Tensor {
            shape: Vec::new(),
            dtype: value.dtype(),
            data: Data::filled(value, 1),
        }
    }

    /// From f64 values, each rounded to `dtype` like `convert` (round to nearest even,
    /// integers truncated and saturated).
    pub fn from_f64_values(
        shape: Vec<u64>,
        dtype: DType,
        values: &[f64],
    ) -> Result<Tensor, TensorError> {
        Tensor::new(shape, Data::from_f64s(dtype, values))
    }

    /// From scalars, each converted to `dtype` like `convert`.
    pub fn from_scalars(
        shape: Vec<u64>,
        dtype: DType,
        values: &[Scalar],
    ) -> Result<Tensor, TensorError> {
        let floats: Option<Vec<f64>> = values
            .iter()
            .map(|v| v.dtype().is_float().then(|| v.to_f64()))
            .collect();
        let ints: Option<Vec<i128>> = values.iter().map(|v| v.to_i128()).collect();
        let data = match (floats, ints) {
            (Some(f), _) => Data::from_f64s(dtype, &f),
            (_, Some(i)) => Data::from_i128s(dtype, &i),
            // A mix of float and integer scalars: convert one by one.
            _ => {
                let mut data = Data::filled(Scalar::zero(dtype), values.len());
                for (i, v) in values.iter().enumerate() {
                    data.set(i, v.convert(dtype));
                }
                data
            }
        };
        Tensor::new(shape, data)
    }

    /// From little-endian bytes (bool: one byte per element, nonzero is true), the
    /// layout of `.npy` data and MLIR hex constants.
    pub fn from_le_bytes(
        shape: Vec<u64>,
        dtype: DType,
        bytes: &[u8],
    ) -> Result<Tensor, TensorError> {
        let n = element_count("from_le_bytes", &shape)?;
        let width = dtype.size_bytes() as usize;
        if bytes.len() != n * width {
            return Err(TensorError::invalid(
                "from_le_bytes",
                format!(
                    "shape {shape:?} of {dtype} needs {} bytes, found {}",
                    n * width,
                    bytes.len()
                ),
            ));
        }
        macro_rules! decode {
            ($t:ty, $w:expr) => {
                bytes
                    .chunks_exact($w)
                    .map(|c| <$t>::from_le_bytes(c.try_into().unwrap_or([0; $w])))
                    .collect()
            };
        }
        let data = match dtype {
            DType::F32 => Data::F32(decode!(f32, 4)),
            DType::F64 => Data::F64(decode!(f64, 8)),
            DType::BF16 => Data::BF16(decode!(u16, 2)),
            DType::F16 => Data::F16(decode!(u16, 2)),
            DType::I1 => Data::I1(bytes.iter().map(|&b| b != 0).collect()),
            DType::I8 => Data::I8(bytes.iter().map(|&b| b as i8).collect()),
            DType::I32 => Data::I32(decode!(i32, 4)),
            DType::I64 => Data::I64(decode!(i64, 8)),
            DType::UI8 => Data::UI8(bytes.to_vec()),
            DType::UI32 => Data::UI32(decode!(u32, 4)),
            DType::UI64 => Data::UI64(decode!(u64, 8)),
            DType::C64 => {
                let parts: Vec<f32> = decode!(f32, 4);
                Data::C64(
                    parts
                        .chunks_exact(2)
                        .map(|p| num_complex::Complex32::new(p[0], p[1]))
                        .collect(),
                )
            }
            DType::C128 => {
                let parts: Vec<f64> = decode!(f64, 8);
                Data::C128(
                    parts
                        .chunks_exact(2)
                        .map(|p| num_complex::Complex64::new(p[0], p[1]))
                        .collect(),
                )
            }
            DType::Token => return Ok(Tensor::token()),
        };
        Tensor::new(shape, data)
    }

    /// The shape.
    pub fn shape(&self) -> &[u64] {
        &self.shape
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The element storage.
    pub fn data(&self) -> &Data {
        &self.data
    }

    /// The element storage, by value.
    pub fn into_data(self) -> Data {
        self.data
    }

    /// Shape and element type.
    pub fn tensor_type(&self) -> TensorType {
        TensorType::new(self.shape.clone(), self.dtype)
    }

    /// Number of dimensions.
    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// Number of elements.
    pub fn num_elements(&self) -> usize {
        self.data.len()
    }

    /// Shape as usize (always fits: the element count was checked on construction).
    pub(crate) fn dims(&self) -> Vec<usize> {
        to_usize(&self.shape)
    }

    /// Size of the elements in bytes (i1 takes a byte), as a device stores them.
    pub fn size_bytes(&self) -> u64 {
        self.num_elements() as u64 * self.dtype.size_bytes()
    }

    /// Row-major strides in elements.
    pub fn strides(&self) -> Vec<u64> {
        row_major_strides(&self.dims())
            .into_iter()
            .map(|s| s as u64)
            .collect()
    }

    /// Flat row-major position of multi-index `idx`.
    pub fn flat_index(&self, idx: &[u64]) -> Result<usize, TensorError> {
        if idx.len() != self.rank() || idx.iter().zip(&self.shape).any(|(i, d)| i >= d) {
            return Err(TensorError::invalid(
                "index",
                format!("index {idx:?} is out of range for shape {:?}", self.shape),
            ));
        }
        let strides = self.strides();
        Ok(idx
            .iter()
            .zip(&strides)
            .map(|(i, s)| (i * s) as usize)
            .sum())
    }

    /// Element at multi-index `idx`.
    pub fn get(&self, idx: &[u64]) -> Result<Scalar, TensorError> {
        let i = self.flat_index(idx)?;
        self.data
            .get(i)
            .ok_or_else(|| TensorError::invalid("index", format!("flat index {i} out of range")))
    }

    /// Element at flat row-major position `i`.
    pub fn get_flat(&self, i: usize) -> Option<Scalar> {
        self.data.get(i)
    }

    /// Set the element at `idx`; `value` must have this tensor's type.
    pub fn set(&mut self, idx: &[u64], value: Scalar) -> Result<(), TensorError> {
        let i = self.flat_index(idx)?;
        if value.dtype() != self.dtype {
            return Err(TensorError::invalid(
                "set",
                format!(
                    "value {value} does not have the tensor's type {}",
                    self.dtype
                ),
            ));
        }
        self.data.set(i, value);
        Ok(())
    }

    /// Every element as f64.
    pub fn to_f64_vec(&self) -> Vec<f64> {
        self.data.to_f64_vec()
    }

    /// The only element of a one-element tensor.
    pub fn to_scalar(&self) -> Result<Scalar, TensorError> {
        match (self.num_elements(), self.data.get(0)) {
            (1, Some(s)) => Ok(s),
            _ => Err(TensorError::invalid(
                "to_scalar",
                format!(
                    "expected one element, shape {:?} has {}",
                    self.shape,
                    self.num_elements()
                ),
            )),
        }
    }

    /// The same elements under another shape of equal element count (no checks on types).
    pub(crate) fn with_shape(mut self, shape: Vec<u64>) -> Tensor {
        self.shape = shape;
        self
    }

    /// Mutable storage for in-place kernels in this module (length must not change).
    pub(crate) fn data_mut(&mut self) -> &mut Data {
        &mut self.data
    }
}

fn same_shape(op: &str, a: &Tensor, b: &Tensor) -> Result<(), TensorError> {
    if a.shape != b.shape {
        return Err(TensorError::invalid(
            op,
            format!("shapes differ: {:?} vs {:?}", a.shape, b.shape),
        ));
    }
    Ok(())
}

/// Largest absolute and largest relative difference between `a` and `b` (compared
/// as f64; relative to |b|). Two NaNs at the same place count as equal; a NaN
/// against a number, or a zero `b` against a nonzero `a`, gives an infinite
/// relative error.
pub fn max_abs_rel_error(a: &Tensor, b: &Tensor) -> Result<(f64, f64), TensorError> {
    same_shape("max_abs_rel_error", a, b)?;
    let (mut max_abs, mut max_rel) = (0.0f64, 0.0f64);
    for (x, y) in parts_f64(a).into_iter().zip(parts_f64(b)) {
        let (abs, rel) = if x.is_nan() && y.is_nan() || x == y {
            (0.0, 0.0)
        } else if x.is_nan() || y.is_nan() || x.is_infinite() || y.is_infinite() {
            (f64::INFINITY, f64::INFINITY)
        } else {
            let d = (x - y).abs();
            (d, if y == 0.0 { f64::INFINITY } else { d / y.abs() })
        };
        max_abs = max_abs.max(abs);
        max_rel = max_rel.max(rel);
    }
    Ok((max_abs, max_rel))
}

/// Every element as f64; a complex element as its two parts, so the
/// comparisons here weigh the imaginary part too.
fn parts_f64(t: &Tensor) -> Vec<f64> {
    if t.dtype().is_complex() {
        t.data()
            .to_c128_vec()
            .into_iter()
            .flat_map(|c| [c.re, c.im])
            .collect()
    } else {
        t.to_f64_vec()
    }
}

/// numpy's `allclose(a, b, rtol, atol, equal_nan=True)`: every element satisfies
/// |a - b| <= atol + rtol * |b|; infinities must match exactly; NaN matches NaN.
pub fn allclose(a: &Tensor, b: &Tensor, rtol: f64, atol: f64) -> Result<bool, TensorError> {
    same_shape("allclose", a, b)?;
    Ok(parts_f64(a).into_iter().zip(parts_f64(b)).all(|(x, y)| {
        if x.is_nan() || y.is_nan() {
            x.is_nan() && y.is_nan()
        } else if x.is_infinite() || y.is_infinite() {
            x == y
        } else {
            (x - y).abs() <= atol + rtol * y.abs()
        }
    }))
}
