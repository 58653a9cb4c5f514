//! StableHLO `real`, `imag` and `complex`: the parts of a complex tensor and
//! a complex tensor from its parts (`complex<f32>` <-> f32, `complex<f64>` <-> f64).

use num_complex::Complex;

use super::data::Data;
use super::{Tensor, TensorError};

/// Which part [`part`] takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ComplexPart {
    Real,
    Imag,
}

/// StableHLO `real` / `imag` of a complex tensor.
pub fn part(x: &Tensor, which: ComplexPart) -> Result<Tensor, TensorError> {
    let name = match which {
        ComplexPart::Real => "real",
        ComplexPart::Imag => "imag",
    };
    let real = which == ComplexPart::Real;
    let data = match x.data() {
        Data::C64(v) => Data::F32(v.iter().map(|c| if real { c.re } else { c.im }).collect()),
        Data::C128(v) => Data::F64(v.iter().map(|c| if real { c.re } else { c.im }).collect()),
        other => {
            return Err(TensorError::dtype(
                name,
                other.dtype(),
                "complex<f32> or complex<f64>",
            ))
        }
    };
    Tensor::new(x.shape().to_vec(), data)
}

/// StableHLO `complex`: `re + i im`, elementwise, from two f32 or two f64 tensors.
pub fn complex(re: &Tensor, im: &Tensor) -> Result<Tensor, TensorError> {
    super::elementwise::check_same("complex", re, im)?;
    let data = match (re.data(), im.data()) {
        (Data::F32(a), Data::F32(b)) => {
            Data::C64(a.iter().zip(b).map(|(&r, &i)| Complex::new(r, i)).collect())
        }
        (Data::F64(a), Data::F64(b)) => {
            Data::C128(a.iter().zip(b).map(|(&r, &i)| Complex::new(r, i)).collect())
        }
        (other, _) => return Err(TensorError::dtype("complex", other.dtype(), "f32 or f64")),
    };
    Tensor::new(re.shape().to_vec(), data)
}
