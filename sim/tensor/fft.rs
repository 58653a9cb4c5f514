//! StableHLO `fft`: the discrete Fourier transform over the last 1-3 dims
//! (`FFT`, its inverse `IFFT`, the real-input `RFFT` keeping the `n/2 + 1`
//! non-negative frequencies, and its inverse `IRFFT`).
//!
//! Every transform runs in complex f64 (rustfft's planner, any length) and is
//! rounded once to the result type, as `dot_general` accumulates. Conventions
//! are numpy's: the forward transform is unscaled, the inverse divides by the
//! length of each transformed dim, and a multi-dim transform is the 1-D one
//! applied along each of those dims in turn.

use num_complex::Complex64;
use rustfft::FftPlanner;

use crate::base::DType;

use super::data::Data;
use super::{Tensor, TensorError};

/// Which transform (`fft_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FftKind {
    /// Complex to complex, forward.
    Fft,
    /// Complex to complex, inverse (scaled by 1/n per dim).
    Ifft,
    /// Real to complex, forward; the last dim keeps `n/2 + 1` frequencies.
    Rfft,
    /// Complex to real, inverse of `Rfft`.
    Irfft,
}

impl FftKind {
    pub const ALL: [FftKind; 4] = [FftKind::Fft, FftKind::Ifft, FftKind::Rfft, FftKind::Irfft];

    /// The `fft_type` keyword (`FFT`, `IFFT`, `RFFT`, `IRFFT`).
    pub fn name(self) -> &'static str {
        match self {
            FftKind::Fft => "FFT",
            FftKind::Ifft => "IFFT",
            FftKind::Rfft => "RFFT",
            FftKind::Irfft => "IRFFT",
        }
    }

    /// The result type of this transform on `operand` (shape and element
    /// type), or why `operand` and `lengths` do not fit it (StableHLO's
    /// constraints: 1-3 lengths, no more than the rank, the transformed dims
    /// equal to the lengths on the complex side of FFT/IFFT and on the real
    /// side of RFFT/IRFFT, the last complex dim of RFFT/IRFFT `n/2 + 1`).
    pub fn result_type(
        self,
        shape: &[u64],
        dtype: DType,
        lengths: &[u64],
    ) -> Result<(Vec<u64>, DType), String> {
        let l = lengths.len();
        if !(1..=3).contains(&l) {
            return Err(format!("fft_length must have 1 to 3 entries, found {l}"));
        }
        if l > shape.len() {
            return Err(format!(
                "fft_length has {l} entries but the operand has rank {}",
                shape.len()
            ));
        }
        let tail = shape.len() - l;
        let (want, result_dtype) = match self {
            FftKind::Fft | FftKind::Ifft => (dtype.is_complex(), Some(dtype)),
            FftKind::Rfft => (matches!(dtype, DType::F32 | DType::F64), dtype.complex_of()),
            FftKind::Irfft => (dtype.is_complex(), dtype.complex_part()),
        };
        let result_dtype = match (want, result_dtype) {
            (true, Some(d)) => d,
            _ => {
                let expected = match self {
                    FftKind::Rfft => "an f32 or f64 operand",
                    _ => "a complex operand",
                };
                return Err(format!("{} needs {expected}, found {dtype}", self.name()));
            }
        };
        let mut out = shape.to_vec();
        // The dims the lengths must equal: the real side's for RFFT/IRFFT
        // (computed below for IRFFT's result), the operand's for FFT/IFFT.
        let checked: &[u64] = match self {
            FftKind::Irfft => &shape[tail..shape.len() - 1],
            _ => &shape[tail..],
        };
        let lengths_checked = match self {
            FftKind::Irfft => &lengths[..l - 1],
            _ => lengths,
        };
        if checked != lengths_checked {
            return Err(format!(
                "the last {} operand dim(s) {checked:?} must equal fft_length {lengths_checked:?}",
                checked.len()
            ));
        }
        let n = lengths[l - 1];
        let half = if n == 0 { 0 } else { n / 2 + 1 };
        let last = shape.len() - 1;
        match self {
            FftKind::Rfft => out[last] = half,
            FftKind::Irfft => {
                if shape[last] != half {
                    return Err(format!(
                        "IRFFT of length {n} needs a last operand dim of {half} (n/2 + 1), found {}",
                        shape[last]
                    ));
                }
                out[last] = n;
            }
            _ => {}
        }
        Ok((out, result_dtype))
    }
}

/// Apply `f` in place to every line of `v` (row-major `shape`) along `axis`.
fn along_axis(
    v: &mut [Complex64],
    shape: &[usize],
    axis: usize,
    f: &mut dyn FnMut(&mut [Complex64]),
) {
    let n = shape[axis];
    let inner: usize = shape[axis + 1..].iter().product();
    let outer: usize = shape[..axis].iter().product();
    if n == 0 || inner == 0 || outer == 0 {
        return;
    }
    let mut line = vec![Complex64::new(0.0, 0.0); n];
    for o in 0..outer {
        for i in 0..inner {
            let base = o * n * inner + i;
            for (k, slot) in line.iter_mut().enumerate() {
                *slot = v[base + k * inner];
            }
            f(&mut line);
            for (k, x) in line.iter().enumerate() {
                v[base + k * inner] = *x;
            }
        }
    }
}

/// The (unscaled) forward or inverse complex transform along `axis`; the
/// inverse divides by the length.
fn c2c(
    planner: &mut FftPlanner<f64>,
    v: &mut [Complex64],
    shape: &[usize],
    axis: usize,
    inverse: bool,
) {
    let n = shape[axis];
    if n == 0 {
        return;
    }
    let plan = if inverse {
        planner.plan_fft_inverse(n)
    } else {
        planner.plan_fft_forward(n)
    };
    let scale = 1.0 / n as f64;
    along_axis(v, shape, axis, &mut |line| {
        plan.process(line);
        if inverse {
            line.iter_mut().for_each(|x| *x *= scale);
        }
    });
}

/// StableHLO `fft` of `x` with `fft_length = lengths`.
pub fn fft(x: &Tensor, kind: FftKind, lengths: &[u64]) -> Result<Tensor, TensorError> {
    let (out_shape, out_dtype) = kind
        .result_type(x.shape(), x.dtype(), lengths)
        .map_err(|m| TensorError::invalid("fft", m))?;
    let to_usize = |s: &[u64]| -> Vec<usize> { s.iter().map(|&d| d as usize).collect() };
    let rank = x.shape().len();
    let first = rank - lengths.len();
    let mut planner = FftPlanner::<f64>::new();
    let values = match kind {
        FftKind::Fft | FftKind::Ifft => {
            let shape = to_usize(x.shape());
            let mut v = x.data().to_c128_vec();
            // numpy's fftn order (last dim first); the result does not depend on it.
            for axis in (first..rank).rev() {
                c2c(&mut planner, &mut v, &shape, axis, kind == FftKind::Ifft);
            }
            v
        }
        FftKind::Rfft => {
            let shape = to_usize(x.shape());
            let mut v = x.data().to_c128_vec();
            for axis in (first..rank).rev() {
                c2c(&mut planner, &mut v, &shape, axis, false);
            }
            keep_prefix(&v, &shape, out_shape[rank - 1] as usize)
        }
        FftKind::Irfft => {
            // Inverse over the leading transformed dims on the half spectrum,
            // then the last dim from its Hermitian extension, keeping the real part.
            let shape = to_usize(x.shape());
            let mut v = x.data().to_c128_vec();
            for axis in first..rank - 1 {
                c2c(&mut planner, &mut v, &shape, axis, true);
            }
            let n = out_shape[rank - 1] as usize;
            let mut full = hermitian_extend(&v, &shape, n);
            let mut full_shape = shape.clone();
            full_shape[rank - 1] = n;
            c2c(&mut planner, &mut full, &full_shape, rank - 1, true);
            full
        }
    };
    Tensor::new(out_shape, Data::from_c128s(out_dtype, &values))
}

/// The first `keep` entries of every last-dim row.
fn keep_prefix(v: &[Complex64], shape: &[usize], keep: usize) -> Vec<Complex64> {
    let n = shape.last().copied().unwrap_or(1);
    if n == 0 {
        return Vec::new();
    }
    v.chunks_exact(n)
        .flat_map(|row| row[..keep].iter().copied())
        .collect()
}

/// Each last-dim row of `n/2 + 1` bins extended to `n` by `X[n-k] = conj(X[k])`.
fn hermitian_extend(v: &[Complex64], shape: &[usize], n: usize) -> Vec<Complex64> {
    let m = shape.last().copied().unwrap_or(1);
    if m == 0 || n == 0 {
        return Vec::new();
    }
    v.chunks_exact(m)
        .flat_map(|row| (0..n).map(move |k| if k < m { row[k] } else { row[n - k].conj() }))
        .collect()
}
