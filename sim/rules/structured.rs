//! Rules of the structured ops real programs use, as Shardy gives them:
//! gather and scatter (result/update dims first, then collapsed dims, then
//! the index vector dim; a collapsed operand dim of a gather is a reduction
//! factor, so a table sharded on it gives a masked local gather plus an
//! all-reduce, and the scatter dims of updates are reductions), sort and top_k
//! (the sorted dim needs replication), reduce_window (windowed dims are
//! permutations) and convolution (batch, spatial as windows x window size,
//! input features as a reduction, output features).

use crate::base::TensorType;
use crate::ir::attrs::{ConvDims, ConvWindow, GatherDims, ScatterDims, WindowAttrs};

use super::builder::{FactorKind, RuleBuilder};

/// Index of `d` in `dims`.
fn position(dims: &[u64], d: usize) -> Option<usize> {
    dims.iter().position(|&x| x == d as u64)
}

/// Adds one gather/scatter factor: `(input dim, indices dim, slices dim,
/// size, kind, blocked)`.
type AddFactor<'a> =
    dyn FnMut(Option<usize>, Option<usize>, Option<usize>, u64, FactorKind, bool) + 'a;

/// Shardy's shared walk of gather and scatter: the slices (gather result,
/// scatter update) dims in order, offset dims matched to the input dims that
/// are neither collapsed nor batching, batch dims to the indices dims (and the
/// input batching dim when explicit); then the collapsed dims, then the
/// index vector dim. `add(input, indices, slices, size, kind, blocked)`.
#[allow(clippy::too_many_arguments)]
fn gather_scatter(
    scatter: bool,
    input: &[u64],
    slices: &[u64],
    indices: &[u64],
    index_vector_dim: usize,
    offset_dims: &[u64],
    collapsed: &[u64],
    input_batching: &[u64],
    indices_batching: &[u64],
    add: &mut AddFactor<'_>,
) -> Option<()> {
    let (mut input_dim, mut batch_pos) = (0usize, 0usize);
    for (sd, &slice_size) in slices.iter().enumerate() {
        if position(offset_dims, sd).is_some() {
            while position(collapsed, input_dim).is_some()
                || position(input_batching, input_dim).is_some()
            {
                input_dim += 1;
            }
            let size = *input.get(input_dim)?;
            let id = Some(input_dim);
            if size == slice_size {
                add(id, None, Some(sd), size, FactorKind::Default, false);
            } else if scatter {
                add(id, None, None, size, FactorKind::NeedReplication, false);
                add(
                    None,
                    None,
                    Some(sd),
                    slice_size,
                    FactorKind::NeedReplication,
                    false,
                );
            } else if slice_size == 1 {
                // Sharded on the operand: an all-reduce of the result.
                add(id, None, None, size, FactorKind::Reduction, false);
                add(
                    None,
                    None,
                    Some(sd),
                    slice_size,
                    FactorKind::NeedReplication,
                    false,
                );
            } else {
                add(id, None, Some(sd), size, FactorKind::NeedReplication, true);
            }
            input_dim += 1;
        } else {
            let idx = if batch_pos < index_vector_dim {
                batch_pos
            } else {
                batch_pos + 1
            };
            let explicit = position(indices_batching, idx).map(|p| input_batching[p] as usize);
            // Scatter batch dims only in the indices and updates reduce into
            // the result (Reduction; set to NeedReplication by the caller when
            // the update computation is not a common reduction).
            let kind = if scatter && explicit.is_none() {
                FactorKind::Reduction
            } else {
                FactorKind::Default
            };
            add(explicit, Some(idx), Some(sd), slice_size, kind, false);
            batch_pos += 1;
        }
    }
    for &c in collapsed {
        let size = *input.get(c as usize)?;
        let kind = if scatter {
            FactorKind::Default
        } else if size == 1 {
            FactorKind::NeedReplication
        } else {
            FactorKind::Reduction
        };
        add(Some(c as usize), None, None, size, kind, false);
    }
    if index_vector_dim < indices.len() {
        let size = indices[index_vector_dim];
        add(
            None,
            Some(index_vector_dim),
            None,
            size,
            FactorKind::NeedReplication,
            false,
        );
    }
    Some(())
}

/// `stablehlo.gather` (operands: operand, indices).
pub fn gather_rule(
    b: &mut RuleBuilder,
    operand: &TensorType,
    indices: &TensorType,
    out: &[u64],
    d: &GatherDims,
) -> Option<()> {
    gather_scatter(
        false,
        &operand.shape,
        out,
        &indices.shape,
        d.index_vector_dim as usize,
        &d.offset_dims,
        &d.collapsed_slice_dims,
        &d.operand_batching_dims,
        &d.start_indices_batching_dims,
        &mut |i, x, s, size, kind, blocked| {
            let f = b.factor(&[i, x], &[s], size, kind);
            if blocked {
                b.block(f);
            }
        },
    )
}

/// `stablehlo.scatter` (operands: N inputs, indices, N updates; N results).
pub fn scatter_rule(b: &mut RuleBuilder, t: &[&TensorType], d: &ScatterDims) -> Option<()> {
    let n = (t.len().checked_sub(1)?) / 2;
    let (input, indices, update) = (t.first()?, t.get(n)?, t.get(n + 1)?);
    gather_scatter(
        true,
        &input.shape,
        &update.shape,
        &indices.shape,
        d.index_vector_dim as usize,
        &d.update_window_dims,
        &d.inserted_window_dims,
        &d.input_batching_dims,
        &d.scatter_indices_batching_dims,
        &mut |i, x, s, size, kind, blocked| {
            // Operand slots: inputs, indices, updates; results: one per input.
            let mut ops = vec![i; n];
            ops.push(x);
            ops.extend(std::iter::repeat(s).take(n));
            let f = b.factor(&ops, &vec![i; n], size, kind);
            if blocked {
                b.block(f);
            }
        },
    )
}

/// `chlo.top_k`: the last dim needs replication and blocks propagation.
pub fn top_k_rule(b: &mut RuleBuilder, operand: &TensorType) -> Option<()> {
    let last = operand.rank().checked_sub(1)?;
    for (d, &size) in operand.shape.iter().enumerate() {
        if d == last {
            let f = b.factor(
                &[Some(d)],
                &[Some(d), Some(d)],
                size,
                FactorKind::NeedReplication,
            );
            b.block(f);
        } else {
            b.factor(&[Some(d)], &[Some(d), Some(d)], size, FactorKind::Default);
        }
    }
    Some(())
}

/// `stablehlo.reduce_window` (N inputs, N scalar inits): a factor per result
/// dim; a dim with a window, stride or padding is a permutation factor.
pub fn reduce_window_rule(
    b: &mut RuleBuilder,
    output: &[u64],
    n: usize,
    w: &WindowAttrs,
) -> Option<()> {
    // Shardy: a factor per result dim (the number of windows); a dim passes
    // through when its window and stride are 1 and it is unpadded (dilations
    // are not looked at), else it is a permutation.
    let (strides, pad) = (w.strides_or_default(), w.padding_or_default());
    for (d, &size) in output.iter().enumerate() {
        let plain = *w.dimensions.get(d)? == 1 && *strides.get(d)? == 1 && *pad.get(d)? == (0, 0);
        let mut ops = vec![Some(d); n];
        ops.extend(std::iter::repeat(None).take(n));
        let kind = if plain {
            FactorKind::Default
        } else {
            FactorKind::Permutation
        };
        b.factor(&ops, &vec![Some(d); n], size, kind);
    }
    Some(())
}

/// `stablehlo.select_and_scatter`, as Shardy builds it: a dim whose window
/// and stride are 1 and that is unpadded passes through operand, source and
/// result; any other has a source factor (the windows, needing replication)
/// and an operand-to-result factor (a permutation).
pub fn select_and_scatter_rule(
    b: &mut RuleBuilder,
    output: &[u64],
    source: &[u64],
    w: &WindowAttrs,
) -> Option<()> {
    let (strides, pad) = (w.strides_or_default(), w.padding_or_default());
    for (d, &size) in output.iter().enumerate() {
        let plain = *w.dimensions.get(d)? == 1 && *strides.get(d)? == 1 && *pad.get(d)? == (0, 0);
        if plain {
            b.factor(&[Some(d), Some(d)], &[Some(d)], size, FactorKind::Default);
        } else {
            b.factor(
                &[None, Some(d)],
                &[None],
                *source.get(d)?,
                FactorKind::NeedReplication,
            );
            b.factor(&[Some(d)], &[Some(d)], size, FactorKind::Permutation);
        }
    }
    Some(())
}

/// `stablehlo.convolution`, as Shardy builds it: batch groups, batch; per
/// spatial dim the number of windows (a permutation) and the window size (a
/// reduction with the kernel dim), the larger major (none with
/// `conservative`); feature groups; input features (a reduction); output
/// features per group.
#[allow(clippy::too_many_arguments)]
pub fn convolution_rule(
    b: &mut RuleBuilder,
    conservative: bool,
    lhs: &TensorType,
    rhs: &TensorType,
    out: &[u64],
    d: &ConvDims,
    _w: &ConvWindow,
    feature_groups: u64,
    batch_groups: u64,
) -> Option<()> {
    let (ib, ifeat) = (d.input_batch as usize, d.input_feature as usize);
    let (kin, kout) = (
        d.kernel_input_feature as usize,
        d.kernel_output_feature as usize,
    );
    let (ob, of) = (d.output_batch as usize, d.output_feature as usize);
    if batch_groups > 1 {
        // The batch groups: input batch major part, kernel output features, output features.
        b.factor(
            &[Some(ib), Some(kout)],
            &[Some(of)],
            batch_groups,
            FactorKind::Default,
        );
    }
    b.factor(
        &[Some(ib), None],
        &[Some(ob)],
        *out.get(ob)?,
        FactorKind::Default,
    );
    // Conservative: no spatial factors (build() gives each spatial dim a
    // size-1 factor of its own), so nothing propagates through a window.
    let spatial = if conservative {
        0
    } else {
        d.input_spatial.len()
    };
    for i in 0..spatial {
        let (x, k, o) = (
            *d.input_spatial.get(i)? as usize,
            *d.kernel_spatial.get(i)? as usize,
            *d.output_spatial.get(i)? as usize,
        );
        // The input dim splits into the number of windows (to the output, a
        // permutation) and the window size (to the kernel, a reduction), the
        // larger one major; each capped by what is left of the input dim and
        // dropped when it comes to 1.
        let (windows, size) = (*out.get(o)?, *rhs.shape.get(k)?);
        let mut left = *lhs.shape.get(x)?;
        let order = if windows >= size {
            [(windows, false), (size, true)]
        } else {
            [(size, true), (windows, false)]
        };
        for (factor, contracting) in order {
            let factor = left.min(factor);
            if factor > 1 {
                if contracting {
                    b.factor(&[Some(x), Some(k)], &[None], factor, FactorKind::Reduction);
                } else {
                    b.factor(
                        &[Some(x), None],
                        &[Some(o)],
                        factor,
                        FactorKind::Permutation,
                    );
                }
                left /= factor;
            }
        }
    }
    if feature_groups > 1 {
        b.factor(
            &[Some(ifeat), Some(kout)],
            &[Some(of)],
            feature_groups,
            FactorKind::Default,
        );
    }
    b.factor(
        &[Some(ifeat), Some(kin)],
        &[None],
        *rhs.shape.get(kin)?,
        FactorKind::Reduction,
    );
    let out_features = out.get(of)? / (batch_groups * feature_groups).max(1);
    if out_features > 1 {
        b.factor(
            &[None, Some(kout)],
            &[Some(of)],
            out_features,
            FactorKind::Default,
        );
    }
    Some(())
}
