//! Rules of the structured ops real programs use, as Shardy gives them:
//! gather and scatter (result/update dims first, then operand-only dims, then
//! the index vector dim; an indexed operand dim is a reduction factor, so a
//! table sharded on it gives a masked local gather plus an all-reduce, and the
//! scatter dims of updates are reductions), sort and top_k (the sorted dim
//! needs replication), reduce_window (windowed dims are permutations) and
//! convolution (batch, spatial as output x window where the windows tile the
//! input, input features as a reduction, output features).

use crate::base::TensorType;
use crate::ir::attrs::{ConvDims, ConvWindow, GatherDims, ScatterDims, WindowAttrs};

use super::builder::{FactorKind, RuleBuilder};

/// Index of `d` in `dims`.
fn position(dims: &[u64], d: usize) -> Option<usize> {
    dims.iter().position(|&x| x == d as u64)
}

/// The dims of a tensor of rank `rank` other than `skip`, in order.
fn dims_except(rank: usize, skip: &[u64]) -> Vec<usize> {
    (0..rank).filter(|&d| position(skip, d).is_none()).collect()
}

/// `stablehlo.gather` (operands: operand, indices).
pub fn gather_rule(
    b: &mut RuleBuilder,
    operand: &TensorType,
    indices: &TensorType,
    out: &[u64],
    d: &GatherDims,
    slice_sizes: &[u64],
) -> Option<()> {
    let ivd = d.index_vector_dim as usize;
    let batch_idx: Vec<usize> = (0..indices.rank()).filter(|&x| x != ivd).collect();
    let mut dropped = d.collapsed_slice_dims.clone();
    dropped.extend(&d.operand_batching_dims);
    let offset_operand = dims_except(operand.rank(), &dropped);
    let (mut nb, mut no) = (0usize, 0usize);
    let mut mapped = vec![false; operand.rank()];
    for (r, &size) in out.iter().enumerate() {
        if position(&d.offset_dims, r).is_some() {
            let od = *offset_operand.get(no)?;
            no += 1;
            if *slice_sizes.get(od)? == operand.shape[od] {
                mapped[od] = true;
                b.factor(&[Some(od), None], &[Some(r)], out[r], FactorKind::Default);
            } else {
                b.factor(
                    &[None, None],
                    &[Some(r)],
                    out[r],
                    FactorKind::NeedReplication,
                );
            }
        } else {
            let id = *batch_idx.get(nb)?;
            nb += 1;
            let od = position(&d.start_indices_batching_dims, id)
                .map(|p| d.operand_batching_dims[p] as usize);
            if let Some(od) = od {
                mapped[od] = true;
            }
            b.factor(&[od, Some(id)], &[Some(r)], size, FactorKind::Default);
        }
    }
    for (od, _) in mapped.iter().enumerate().filter(|(_, &m)| !m) {
        let indexed = position(&d.collapsed_slice_dims, od).is_some()
            && position(&d.start_index_map, od).is_some();
        let kind = if indexed {
            FactorKind::Reduction
        } else {
            FactorKind::NeedReplication
        };
        b.factor(&[Some(od), None], &[None], operand.shape[od], kind);
    }
    if ivd < indices.rank() {
        b.factor(
            &[None, Some(ivd)],
            &[None],
            indices.shape[ivd],
            FactorKind::NeedReplication,
        );
    }
    Some(())
}

/// `stablehlo.scatter` (operands: N inputs, indices, N updates; N results).
pub fn scatter_rule(b: &mut RuleBuilder, t: &[&TensorType], d: &ScatterDims) -> Option<()> {
    let n = (t.len().checked_sub(1)?) / 2;
    let (input, indices, update) = (t.first()?, t.get(n)?, t.get(n + 1)?);
    let ivd = d.index_vector_dim as usize;
    let batch_idx: Vec<usize> = (0..indices.rank()).filter(|&x| x != ivd).collect();
    let mut dropped = d.inserted_window_dims.clone();
    dropped.extend(&d.input_batching_dims);
    let window_input = dims_except(input.rank(), &dropped);
    // Operand slots: inputs, indices, updates; results: one per input.
    let ops = |inp: Option<usize>, idx: Option<usize>, upd: Option<usize>| {
        let mut v = vec![inp; n];
        v.push(idx);
        v.extend(std::iter::repeat(upd).take(n));
        v
    };
    let res = |inp: Option<usize>| vec![inp; n];
    let (mut nw, mut ns) = (0usize, 0usize);
    let mut mapped = vec![false; input.rank()];
    for u in 0..update.rank() {
        if position(&d.update_window_dims, u).is_some() {
            let wd = *window_input.get(nw)?;
            nw += 1;
            if update.shape[u] == input.shape[wd] {
                mapped[wd] = true;
                b.factor(
                    &ops(Some(wd), None, Some(u)),
                    &res(Some(wd)),
                    update.shape[u],
                    FactorKind::Default,
                );
            } else {
                b.factor(
                    &ops(None, None, Some(u)),
                    &res(None),
                    update.shape[u],
                    FactorKind::NeedReplication,
                );
            }
        } else {
            let id = *batch_idx.get(ns)?;
            ns += 1;
            match position(&d.scatter_indices_batching_dims, id) {
                Some(p) => {
                    let ib = d.input_batching_dims[p] as usize;
                    mapped[ib] = true;
                    b.factor(
                        &ops(Some(ib), Some(id), Some(u)),
                        &res(Some(ib)),
                        update.shape[u],
                        FactorKind::Default,
                    );
                }
                None => {
                    b.factor(
                        &ops(None, Some(id), Some(u)),
                        &res(None),
                        update.shape[u],
                        FactorKind::Reduction,
                    );
                }
            }
        }
    }
    for (id, _) in mapped.iter().enumerate().filter(|(_, &m)| !m) {
        b.factor(
            &ops(Some(id), None, None),
            &res(Some(id)),
            input.shape[id],
            FactorKind::Default,
        );
    }
    if ivd < indices.rank() {
        b.factor(
            &ops(None, Some(ivd), None),
            &res(None),
            indices.shape[ivd],
            FactorKind::NeedReplication,
        );
    }
    Some(())
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

/// `stablehlo.reduce_window` (N inputs, N scalar inits): a dim with a window,
/// stride, dilation or padding is a permutation factor.
pub fn reduce_window_rule(
    b: &mut RuleBuilder,
    input: &TensorType,
    n: usize,
    w: &WindowAttrs,
) -> Option<()> {
    let (strides, base, wdil, pad) = (
        w.strides_or_default(),
        w.base_dilations_or_default(),
        w.window_dilations_or_default(),
        w.padding_or_default(),
    );
    for (d, &size) in input.shape.iter().enumerate() {
        let plain = *w.dimensions.get(d)? == 1
            && *strides.get(d)? == 1
            && *base.get(d)? == 1
            && *wdil.get(d)? == 1
            && *pad.get(d)? == (0, 0);
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

/// `stablehlo.convolution`: batch; per spatial dim the output part and the
/// window (a compound input dim when the windows tile the input exactly,
/// else a permutation of the input and a reduction over the kernel); input
/// features (a reduction); output features.
#[allow(clippy::too_many_arguments)]
pub fn convolution_rule(
    b: &mut RuleBuilder,
    lhs: &TensorType,
    rhs: &TensorType,
    out: &[u64],
    d: &ConvDims,
    w: &ConvWindow,
    feature_groups: u64,
    batch_groups: u64,
) -> Option<()> {
    let s = d.input_spatial.len();
    let (stride, pad, ld, rd) = (
        w.strides(s),
        w.padding(s),
        w.lhs_dilation(s),
        w.rhs_dilation(s),
    );
    let (ib, ifeat) = (d.input_batch as usize, d.input_feature as usize);
    let (kin, kout) = (
        d.kernel_input_feature as usize,
        d.kernel_output_feature as usize,
    );
    let (ob, of) = (d.output_batch as usize, d.output_feature as usize);
    if batch_groups == 1 {
        b.factor(
            &[Some(ib), None],
            &[Some(ob)],
            lhs.shape[ib],
            FactorKind::Default,
        );
    } else {
        b.factor(
            &[Some(ib), None],
            &[None],
            lhs.shape[ib],
            FactorKind::NeedReplication,
        );
        b.factor(
            &[None, None],
            &[Some(ob)],
            out[ob],
            FactorKind::NeedReplication,
        );
    }
    for i in 0..s {
        let (x, k, o) = (
            *d.input_spatial.get(i)? as usize,
            *d.kernel_spatial.get(i)? as usize,
            *d.output_spatial.get(i)? as usize,
        );
        let ksize = rhs.shape[k];
        let tiles = stride[i] == ksize as i64
            && pad[i] == (0, 0)
            && ld[i] == 1
            && rd[i] == 1
            && lhs.shape[x] == out[o] * ksize;
        if tiles {
            b.factor(
                &[Some(x), None],
                &[Some(o)],
                out[o],
                FactorKind::Permutation,
            );
            b.factor(&[Some(x), Some(k)], &[None], ksize, FactorKind::Reduction);
        } else {
            b.factor(
                &[Some(x), None],
                &[Some(o)],
                lhs.shape[x],
                FactorKind::Permutation,
            );
            b.factor(&[None, Some(k)], &[None], ksize, FactorKind::Reduction);
        }
    }
    if feature_groups == 1 {
        b.factor(
            &[Some(ifeat), Some(kin)],
            &[None],
            lhs.shape[ifeat],
            FactorKind::Reduction,
        );
    } else {
        b.factor(
            &[Some(ifeat), None],
            &[None],
            lhs.shape[ifeat],
            FactorKind::NeedReplication,
        );
        b.factor(
            &[None, Some(kin)],
            &[None],
            rhs.shape[kin],
            FactorKind::NeedReplication,
        );
    }
    if batch_groups == 1 && feature_groups == 1 {
        b.factor(
            &[None, Some(kout)],
            &[Some(of)],
            out[of],
            FactorKind::Default,
        );
    } else {
        b.factor(
            &[None, Some(kout)],
            &[Some(of)],
            out[of],
            FactorKind::NeedReplication,
        );
    }
    Some(())
}
