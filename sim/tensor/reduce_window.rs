//! StableHLO `reduce_window` over one or more operands with a body closure.
//!
//! The operand is dilated (`base_dilations - 1` holes between elements) and padded
//! (`padding` low/high, possibly negative) in index space only; a window position
//! that lands on a hole or on padding is skipped, as XLA does, so it leaves the
//! accumulator as it is (equivalent to contributing the init when the init is the
//! body's identity). For each result position the accumulator starts at the inits
//! and takes the window elements in row-major order over the window.

use super::index::{element_count, for_each_index, row_major_strides};
use super::reduce::ReduceBody;
use super::{Scalar, Tensor, TensorError};

/// The window of a `reduce_window` (one entry per operand dim in every field).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct WindowParams {
    pub window_dimensions: Vec<u64>,
    pub window_strides: Vec<u64>,
    pub base_dilations: Vec<u64>,
    pub window_dilations: Vec<u64>,
    /// (low, high) padding per dim; negative values cut elements off.
    pub padding: Vec<(i64, i64)>,
}

impl WindowParams {
    /// A window of `window_dimensions` with unit strides and dilations and no padding.
    pub fn plain(window_dimensions: Vec<u64>) -> WindowParams {
        let r = window_dimensions.len();
        WindowParams {
            window_dimensions,
            window_strides: vec![1; r],
            base_dilations: vec![1; r],
            window_dilations: vec![1; r],
            padding: vec![(0, 0); r],
        }
    }
}

const OP: &str = "reduce_window";

/// The result size of one dim, after checking the window parameters of that dim.
fn result_size(p: &WindowParams, d: usize, size: u64) -> Result<u64, TensorError> {
    let (w, s, bd, wd) = (
        p.window_dimensions[d],
        p.window_strides[d],
        p.base_dilations[d],
        p.window_dilations[d],
    );
    if w == 0 || s == 0 || bd == 0 || wd == 0 {
        return Err(TensorError::invalid(
            OP,
            format!("dim {d}: window size, stride and dilations must be positive"),
        ));
    }
    let big = |x: u64| x > i64::MAX as u64 / 4;
    if [w, s, bd, wd, size].into_iter().any(big) {
        return Err(TensorError::invalid(
            OP,
            format!("dim {d}: window too large"),
        ));
    }
    let (lo, hi) = p.padding[d];
    if lo.unsigned_abs() > 1 << 40 || hi.unsigned_abs() > 1 << 40 {
        return Err(TensorError::invalid(
            OP,
            format!("dim {d}: padding ({lo}, {hi}) is out of range"),
        ));
    }
    let dilated = if size == 0 {
        0
    } else {
        (size as i64 - 1) * bd as i64 + 1
    };
    let padded = dilated
        .checked_add(lo)
        .and_then(|x| x.checked_add(hi))
        .ok_or_else(|| TensorError::invalid(OP, format!("dim {d}: padding overflows")))?;
    let window = (w as i64 - 1)
        .checked_mul(wd as i64)
        .map(|x| x + 1)
        .ok_or_else(|| TensorError::invalid(OP, format!("dim {d}: window too large")))?;
    Ok(if padded < window {
        0
    } else {
        ((padded - window) / s as i64 + 1) as u64
    })
}

/// `reduce_window(inputs, inits)` with `body(acc, elems)`; all inputs share a
/// shape and `inits[i]` has `inputs[i]`'s type.
pub fn reduce_window(
    inputs: &[Tensor],
    inits: &[Scalar],
    p: &WindowParams,
    body: &mut ReduceBody<'_>,
) -> Result<Vec<Tensor>, TensorError> {
    let first = inputs
        .first()
        .ok_or_else(|| TensorError::invalid(OP, "expected at least one operand"))?;
    if inits.len() != inputs.len() {
        return Err(TensorError::invalid(
            OP,
            format!(
                "{} operands need as many init values, found {}",
                inputs.len(),
                inits.len()
            ),
        ));
    }
    for (i, (t, init)) in inputs.iter().zip(inits).enumerate() {
        if t.shape() != first.shape() || init.dtype() != t.dtype() {
            return Err(TensorError::invalid(
                OP,
                format!(
                    "operand {i} ({}, init {}) does not match operand 0's shape {:?} or its own type",
                    t.tensor_type(),
                    init.dtype(),
                    first.shape()
                ),
            ));
        }
    }
    let rank = first.rank();
    let lens = [
        p.window_dimensions.len(),
        p.window_strides.len(),
        p.base_dilations.len(),
        p.window_dilations.len(),
        p.padding.len(),
    ];
    if lens.iter().any(|&l| l != rank) {
        return Err(TensorError::invalid(
            OP,
            format!("every window parameter needs {rank} entries (one per dim), found {lens:?}"),
        ));
    }
    let out_shape = (0..rank)
        .map(|d| result_size(p, d, first.shape()[d]))
        .collect::<Result<Vec<u64>, _>>()?;
    let n = element_count(OP, &out_shape)?;
    element_count(OP, &p.window_dimensions)?;
    let in_dims = first.dims();
    let in_strides = row_major_strides(&in_dims);
    let window: Vec<usize> = p.window_dimensions.iter().map(|&w| w as usize).collect();
    let out_dims: Vec<usize> = out_shape.iter().map(|&d| d as usize).collect();
    let mut columns: Vec<Vec<Scalar>> = vec![Vec::with_capacity(n); inputs.len()];
    let mut elems = Vec::with_capacity(inputs.len());
    let mut failure = None;
    for_each_index(&out_dims, |o| {
        if failure.is_some() {
            return;
        }
        let mut acc = inits.to_vec();
        for_each_index(&window, |w| {
            if failure.is_some() {
                return;
            }
            let mut flat = 0usize;
            for d in 0..rank {
                // Position in the dilated, padded operand, relative to the unpadded start.
                let pos = (o[d] as i64) * p.window_strides[d] as i64
                    + (w[d] as i64) * p.window_dilations[d] as i64
                    - p.padding[d].0;
                let bd = p.base_dilations[d] as i64;
                if pos < 0 || pos % bd != 0 || pos / bd >= in_dims[d] as i64 {
                    return;
                }
                flat += (pos / bd) as usize * in_strides[d];
            }
            elems.clear();
            elems.extend(inputs.iter().filter_map(|t| t.get_flat(flat)));
            match body(&acc, &elems) {
                Ok(next)
                    if next.len() == inits.len()
                        && next.iter().zip(inits).all(|(a, b)| a.dtype() == b.dtype()) =>
                {
                    acc = next
                }
                Ok(next) => {
                    failure = Some(TensorError::invalid(
                        OP,
                        format!(
                            "body returned {next:?}, expected {} values of the operand types",
                            inits.len()
                        ),
                    ))
                }
                Err(e) => failure = Some(e),
            }
        });
        for (col, v) in columns.iter_mut().zip(acc) {
            col.push(v);
        }
    });
    if let Some(e) = failure {
        return Err(e);
    }
    columns
        .iter()
        .zip(inits)
        .map(|(col, init)| Tensor::from_scalars(out_shape.clone(), init.dtype(), col))
        .collect()
}
