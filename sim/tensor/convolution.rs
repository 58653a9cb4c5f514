//! StableHLO `convolution` with any dimension layout, strides, (negative) padding,
//! lhs and rhs dilation, window reversal, feature groups and batch groups.
//!
//! Both operands are first brought to a canonical layout (lhs `[batch, feature,
//! spatial...]`, rhs `[out feature, in feature, spatial...]`), the result is
//! computed as `[batch, feature, spatial...]` and then transposed to the output
//! layout. Floats accumulate in f64 and round once to the result type (like
//! `dot_general`); all-integer convolutions accumulate in i64 with wrapping.
//!
//! Groups follow the spec's split/concatenate definition: output feature `o`
//! belongs to feature group `o / (O / feature_group_count)` (reading that group's
//! contiguous slice of input features) and to batch group `o / (O / batch_group_count)`
//! (reading that group's contiguous slice of the input batch).

use crate::base::DType;

use super::convert::convert;
use super::data::Data;
use super::index::{element_count, for_each_index, row_major_strides};
use super::shape_ops::transpose;
use super::{Tensor, TensorError};

/// The dimension numbers and window of a `convolution`. Empty `window_strides`,
/// `padding`, `lhs_dilation`, `rhs_dilation` or `window_reversal` mean the
/// defaults (1, (0, 0), 1, 1, false for every spatial dim).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ConvParams {
    pub input_batch_dim: usize,
    pub input_feature_dim: usize,
    pub input_spatial_dims: Vec<usize>,
    pub kernel_input_feature_dim: usize,
    pub kernel_output_feature_dim: usize,
    pub kernel_spatial_dims: Vec<usize>,
    pub output_batch_dim: usize,
    pub output_feature_dim: usize,
    pub output_spatial_dims: Vec<usize>,
    pub window_strides: Vec<u64>,
    pub padding: Vec<(i64, i64)>,
    pub lhs_dilation: Vec<u64>,
    pub rhs_dilation: Vec<u64>,
    pub window_reversal: Vec<bool>,
    pub feature_group_count: u64,
    pub batch_group_count: u64,
}

const OP: &str = "convolution";

fn fail<T>(message: String) -> Result<T, TensorError> {
    Err(TensorError::invalid(OP, message))
}

/// `[a, b, rest...]` as a permutation of `0..rank`, or an error naming `what`.
fn layout(
    what: &str,
    a: usize,
    b: usize,
    rest: &[usize],
    rank: usize,
) -> Result<Vec<usize>, TensorError> {
    let perm: Vec<usize> = [&[a, b][..], rest].concat();
    let mut seen = vec![false; rank];
    if perm.len() != rank
        || perm
            .iter()
            .any(|&d| d >= rank || std::mem::replace(&mut seen[d], true))
    {
        return fail(format!(
            "{what} dims {perm:?} must name each of the {rank} dims once"
        ));
    }
    Ok(perm)
}

/// A per-spatial-dim parameter, or `default` for each dim when empty.
fn per_dim<T: Copy>(what: &str, v: &[T], n: usize, default: T) -> Result<Vec<T>, TensorError> {
    match v.len() {
        0 => Ok(vec![default; n]),
        l if l == n => Ok(v.to_vec()),
        l => fail(format!(
            "{what} has {l} entries, expected {n} (one per spatial dim)"
        )),
    }
}

/// The window of every spatial dim, with defaults filled in.
struct Window {
    strides: Vec<u64>,
    padding: Vec<(i64, i64)>,
    lhs_dilation: Vec<u64>,
    rhs_dilation: Vec<u64>,
    reversal: Vec<bool>,
}

fn window(p: &ConvParams, n: usize) -> Result<Window, TensorError> {
    let w = Window {
        strides: per_dim("window_strides", &p.window_strides, n, 1)?,
        padding: per_dim("padding", &p.padding, n, (0, 0))?,
        lhs_dilation: per_dim("lhs_dilation", &p.lhs_dilation, n, 1)?,
        rhs_dilation: per_dim("rhs_dilation", &p.rhs_dilation, n, 1)?,
        reversal: per_dim("window_reversal", &p.window_reversal, n, false)?,
    };
    let limit = |x: u64| x == 0 || x > (1 << 31);
    if w.strides
        .iter()
        .chain(&w.lhs_dilation)
        .chain(&w.rhs_dilation)
        .any(|&x| limit(x))
    {
        return fail("strides and dilations must be between 1 and 2^31".into());
    }
    if w.padding
        .iter()
        .any(|&(lo, hi)| lo.abs() > 1 << 40 || hi.abs() > 1 << 40)
    {
        return fail(format!("padding {:?} is out of range", w.padding));
    }
    Ok(w)
}

/// `convolution(lhs, rhs)` with result element type `out`.
pub fn convolution(
    lhs: &Tensor,
    rhs: &Tensor,
    p: &ConvParams,
    out: DType,
) -> Result<Tensor, TensorError> {
    let s = p.input_spatial_dims.len();
    if lhs.rank() != s + 2 || rhs.rank() != s + 2 {
        return fail(format!(
            "lhs rank {} and rhs rank {} must both be {} (batch, feature and {s} spatial dims)",
            lhs.rank(),
            rhs.rank(),
            s + 2
        ));
    }
    for t in [lhs, rhs] {
        if t.dtype() == DType::I1 {
            return Err(TensorError::dtype(OP, DType::I1, "a float or integer type"));
        }
    }
    if out == DType::I1 {
        return Err(TensorError::dtype(
            OP,
            DType::I1,
            "a float or integer result type",
        ));
    }
    let lhs_perm = layout(
        "input",
        p.input_batch_dim,
        p.input_feature_dim,
        &p.input_spatial_dims,
        s + 2,
    )?;
    let rhs_perm = layout(
        "kernel",
        p.kernel_output_feature_dim,
        p.kernel_input_feature_dim,
        &p.kernel_spatial_dims,
        s + 2,
    )?;
    let out_layout = layout(
        "output",
        p.output_batch_dim,
        p.output_feature_dim,
        &p.output_spatial_dims,
        s + 2,
    )?;
    let w = window(p, s)?;
    let l = transpose(lhs, &lhs_perm)?;
    let r = transpose(rhs, &rhs_perm)?;
    let (ld, rd) = (l.dims(), r.dims());
    let (n, c, o, ci) = (ld[0], ld[1], rd[0], rd[1]);
    let (g, b) = (p.feature_group_count as usize, p.batch_group_count as usize);
    if g == 0 || b == 0 || (g > 1 && b > 1) {
        return fail(format!(
            "feature_group_count {g} and batch_group_count {b} must be positive and not both above 1"
        ));
    }
    if c % g != 0 || c / g != ci || o % g != 0 || o % b != 0 || n % b != 0 {
        return fail(format!(
            "input features {c}, kernel input features {ci}, output features {o} and batch {n} do not fit feature_group_count {g} and batch_group_count {b}"
        ));
    }
    // Result spatial sizes.
    let mut out_spatial = Vec::with_capacity(s);
    for i in 0..s {
        let size = ld[2 + i] as i64;
        let dilated = if size == 0 {
            0
        } else {
            (size - 1) * w.lhs_dilation[i] as i64 + 1
        };
        let padded = dilated + w.padding[i].0 + w.padding[i].1;
        let k = rd[2 + i] as i64;
        let span = if k == 0 {
            0
        } else {
            (k - 1) * w.rhs_dilation[i] as i64 + 1
        };
        out_spatial.push(if padded < span || k == 0 {
            0
        } else {
            ((padded - span) / w.strides[i] as i64 + 1) as usize
        });
    }
    let logical_shape: Vec<u64> = [
        &[(n / b) as u64, o as u64][..],
        &out_spatial.iter().map(|&x| x as u64).collect::<Vec<_>>(),
    ]
    .concat();
    let total = element_count(OP, &logical_shape)?;
    let kernel_spatial: Vec<usize> = rd[2..].to_vec();
    let (ls, rs) = (row_major_strides(&ld), row_major_strides(&rd));

    // For each output spatial position, the (lhs spatial offset, rhs spatial offset)
    // pairs of the window positions that land on a real lhs element.
    let taps = |out_pos: &[usize]| -> Vec<(usize, usize)> {
        let mut v = Vec::new();
        for_each_index(&kernel_spatial, |k| {
            let (mut lo, mut ro) = (0usize, 0usize);
            for i in 0..s {
                let pos = out_pos[i] as i64 * w.strides[i] as i64
                    + k[i] as i64 * w.rhs_dilation[i] as i64
                    - w.padding[i].0;
                let dil = w.lhs_dilation[i] as i64;
                if pos < 0 || pos % dil != 0 || pos / dil >= ld[2 + i] as i64 {
                    return;
                }
                let kk = if w.reversal[i] {
                    kernel_spatial[i] - 1 - k[i]
                } else {
                    k[i]
                };
                lo += (pos / dil) as usize * ls[2 + i];
                ro += kk * rs[2 + i];
            }
            v.push((lo, ro));
        });
        v
    };
    let int_path = !lhs.dtype().is_float() && !rhs.dtype().is_float() && !out.is_float();
    let (lf, rf) = if int_path {
        (Vec::new(), Vec::new())
    } else {
        (l.to_f64_vec(), r.to_f64_vec())
    };
    let (li, ri) = if int_path {
        match (
            convert(&l, DType::I64)?.into_data(),
            convert(&r, DType::I64)?.into_data(),
        ) {
            (Data::I64(a), Data::I64(b)) => (a, b),
            _ => return fail("integer operands did not widen to i64".into()),
        }
    } else {
        (Vec::new(), Vec::new())
    };
    // Output spatial position outermost, so one position's taps are kept at a time;
    // each value goes to its row-major place in the [batch, feature, spatial] result.
    let spatial_count: usize = out_spatial.iter().product();
    let (mut floats, mut ints) = if int_path {
        (Vec::new(), vec![0i128; total])
    } else {
        (vec![0f64; total], Vec::new())
    };
    let (per_g, per_b, nb) = (o / g, o / b, n / b);
    let mut sp_index = 0usize;
    if total > 0 {
        for_each_index(&out_spatial, |pos| {
            let sp = taps(pos);
            for bi in 0..nb {
                for oi in 0..o {
                    let (fg, bg) = (oi / per_g, oi / per_b);
                    let lhs_n = (bg * nb + bi) * ls[0];
                    let (mut facc, mut iacc) = (0f64, 0i64);
                    for cj in 0..ci {
                        let lbase = lhs_n + (fg * ci + cj) * ls[1];
                        let rbase = oi * rs[0] + cj * rs[1];
                        for &(lo, ro) in &sp {
                            if int_path {
                                iacc =
                                    iacc.wrapping_add(li[lbase + lo].wrapping_mul(ri[rbase + ro]));
                            } else {
                                facc += lf[lbase + lo] * rf[rbase + ro];
                            }
                        }
                    }
                    let at = (bi * o + oi) * spatial_count + sp_index;
                    if int_path {
                        ints[at] = iacc as i128;
                    } else {
                        floats[at] = facc;
                    }
                }
            }
            sp_index += 1;
        });
    }
    let data = if int_path {
        Data::from_i128s(out, &ints)
    } else {
        Data::from_f64s(out, &floats)
    };
    let logical = Tensor::new(logical_shape, data)?;
    // Output dim out_layout[j] holds logical dim j.
    let mut perm = vec![0usize; s + 2];
    for (j, &d) in out_layout.iter().enumerate() {
        perm[d] = j;
    }
    transpose(&logical, &perm)
}
