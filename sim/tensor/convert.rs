//! `convert` between every pair of element types, element by element with the
//! rules of [`Scalar::convert`]: floats round to nearest even once, float to
//! integer truncates toward zero and saturates (NaN gives 0) as XLA does,
//! integers wrap, anything to i1 is `x != 0`.

use crate::base::DType;

use super::data::Data;
use super::TensorError;
use super::{Scalar, Tensor};

/// `x` converted to element type `to`.
pub fn convert(x: &Tensor, to: DType) -> Result<Tensor, TensorError> {
    if x.dtype() == to {
        return Ok(x.clone());
    }
    let n = x.num_elements();
    let mut data = Data::filled(Scalar::zero(to), n);
    for i in 0..n {
        if let Some(s) = x.get_flat(i) {
            data.set(i, s.convert(to));
        }
    }
    Tensor::new(x.shape().to_vec(), data)
}
