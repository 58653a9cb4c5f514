//! `convert` between every pair of element types, element by element with the
//! rules of [`Data::from_f64s`] and [`Data::from_i128s`]: floats round to nearest even once, float to
//! integer truncates toward zero and saturates (NaN gives 0) as XLA does,
//! integers wrap, anything to i1 is `x != 0`. A real value becomes a complex
//! one with a zero imaginary part; a complex one keeps its real part (as XLA).

use crate::base::DType;

use super::data::Data;
use super::Tensor;
use super::TensorError;

/// `x` converted to element type `to`.
pub fn convert(x: &Tensor, to: DType) -> Result<Tensor, TensorError> {
    if x.dtype() == to {
        return Ok(x.clone());
    }
    if x.dtype().is_complex() || to.is_complex() {
        let data = Data::from_c128s(to, &x.data().to_c128_vec());
        return Tensor::new(x.shape().to_vec(), data);
    }
    let data = match x.data().to_i128_vec() {
        Some(ints) => Data::from_i128s(to, &ints),
        None => Data::from_f64s(to, &x.to_f64_vec()),
    };
    Tensor::new(x.shape().to_vec(), data)
}
