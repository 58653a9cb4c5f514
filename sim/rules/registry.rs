//! The rule of each op kind, following Shardy's registry: pointwise ops map
//! every dim to one factor; dot_general orders factors batch, lhs free, rhs
//! free, contracting (reduction); reduce maps input dims in order (reduced dims
//! are reductions); transpose orders factors by result dim; reshape builds
//! compound factors from the gcd of operand and result dims; slice, pad and
//! reverse mark changed dims as permutation factors; concatenate marks the
//! concatenated dim as needing replication; dynamic_slice blocks and needs
//! replication on sliced dims; broadcast_in_dim gives expanded size-1 dims
//! their own factor.

use crate::base::TensorType;
use crate::ir::{DeviceCollective, Func, Op, OpKind, OpShardingRule};

use super::builder::{FactorKind, RuleBuilder};
use super::structured;

/// The rule of `op` in `func`, or None for ops without one (constants,
/// terminators, calls, region ops, collectives).
pub fn rule_for(func: &Func, op: &Op) -> Option<OpShardingRule> {
    rule_for_mode(func, op, false)
}

/// [`rule_for`], or with `conservative` the rule Shardy's registry builds
/// under `conservative-propagation`: no factor for a concatenated dim or a
/// convolution's spatial dims (each such dim gets a size-1 factor of its
/// own), and the dims a slice, pad, reduce_window or select_and_scatter
/// reshapes blocked for propagation (they would move data).
pub fn rule_for_mode(func: &Func, op: &Op, conservative: bool) -> Option<OpShardingRule> {
    let operands: Vec<&TensorType> = op.operands.iter().map(|&v| &func.value(v).ty).collect();
    let results: Vec<&TensorType> = op.results.iter().map(|&v| &func.value(v).ty).collect();
    if let OpKind::CustomCall { target } = &op.kind {
        // X64Combine's rule depends on its users: the state of an
        // rng_bit_generator stays replicated.
        let feeds_rng_state = op.results.first().is_some_and(|&r| {
            func.ops.iter().any(|o| {
                matches!(o.kind, OpKind::RngBitGenerator { .. }) && o.operands.first() == Some(&r)
            })
        });
        return super::custom_call::custom_call_rule(target, &operands, &results, feeds_rng_state);
    }
    let mut rule = rule_for_types_mode(&op.kind, &operands, &results, conservative)?;
    match &op.kind {
        // concat(slice(x), ..., slice(y)) and concat(slice(x), x, ...) only
        // permute the concatenated dim: Shardy marks it a permutation.
        OpKind::Concatenate { dim } if !conservative && concat_of_slices(func, op) => {
            let f = *rule.result_mappings.first()?.get(*dim as usize)?.first()?;
            rule.need_replication_factors.retain(|&g| g != f);
            rule.permutation_factors.push(f);
            rule.permutation_factors.sort_unstable();
        }
        // With constant start indices the update's sliced dims need no
        // replication (Shardy relies on the partitioner's local indices).
        OpKind::DynamicUpdateSlice
            if op.operands.get(2..).unwrap_or_default().iter().all(|&v| {
                defining_kind(func, v).is_some_and(|k| matches!(k, OpKind::Constant { .. }))
            }) =>
        {
            rule.need_replication_factors.clear();
        }
        // Batch dims only in the indices and updates reduce into the result
        // when the update computation is one common reduction; else they
        // need replication.
        OpKind::Scatter { .. } if !common_scatter_reduction(func, op) => {
            let reductions = std::mem::take(&mut rule.reduction_factors);
            rule.need_replication_factors.extend(reductions);
            rule.need_replication_factors.sort_unstable();
        }
        _ => {}
    }
    Some(rule)
}

/// Shardy's `getCommonSupportedReductionOp`: every returned value of the
/// update computation is the same add, multiply, max or min (and/or on i1) of
/// input `i` and update `i` (block arguments `i` and `i + n`).
fn common_scatter_reduction(func: &Func, op: &Op) -> bool {
    use crate::ir::{BinaryOp, ValueDef};
    let n = op.results.len();
    let Some(region) = op.regions.first() else {
        return false;
    };
    if region.args.len() != 2 * n {
        return false;
    }
    let Some(&ret) = region.ops.last() else {
        return false;
    };
    let ret = func.op(ret);
    if ret.operands.len() != n {
        return false;
    }
    let mut common: Option<BinaryOp> = None;
    for (i, &v) in ret.operands.iter().enumerate() {
        let ValueDef::Result { op: d, .. } = func.value(v).def else {
            return false;
        };
        let d = func.op(d);
        let OpKind::Binary(b) = d.kind else {
            return false;
        };
        let logical = matches!(b, BinaryOp::And | BinaryOp::Or)
            && func.value(v).ty.dtype == crate::base::DType::I1;
        let arith = matches!(
            b,
            BinaryOp::Add | BinaryOp::Multiply | BinaryOp::Maximum | BinaryOp::Minimum
        );
        if !(logical || arith) || common.is_some_and(|c| c != b) || d.operands.len() != 2 {
            return false;
        }
        common = Some(b);
        let (x, y) = (region.args[i], region.args[i + n]);
        if !((d.operands[0] == x && d.operands[1] == y)
            || (d.operands[0] == y && d.operands[1] == x))
        {
            return false;
        }
    }
    true
}

fn defining_kind(func: &Func, v: crate::ir::ValueId) -> Option<&OpKind> {
    match func.value(v).def {
        crate::ir::ValueDef::Result { op, .. } => Some(&func.op(op).kind),
        _ => None,
    }
}

/// Shardy's two concat patterns that need only a permutation: every operand
/// is a slice, or every operand is `x` or a slice of the same `x` (one at least
/// a slice).
fn concat_of_slices(func: &Func, op: &Op) -> bool {
    let is_slice = |v| matches!(defining_kind(func, v), Some(OpKind::Slice { .. }));
    let before_slice = |v: crate::ir::ValueId| match func.value(v).def {
        crate::ir::ValueDef::Result { op: d, .. } if is_slice(v) => func.op(d).operands[0],
        _ => v,
    };
    if op.operands.iter().all(|&v| is_slice(v)) {
        return true;
    }
    let Some(&first) = op.operands.first() else {
        return false;
    };
    let same = before_slice(first);
    op.operands.iter().all(|&v| before_slice(v) == same) && op.operands.iter().any(|&v| is_slice(v))
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// The rule of an op of `kind` with these operand and result types.
pub fn rule_for_types(
    kind: &OpKind,
    operands: &[&TensorType],
    results: &[&TensorType],
) -> Option<OpShardingRule> {
    rule_for_types_mode(kind, operands, results, false)
}

/// [`rule_for_types`], conservative as [`rule_for_mode`] says.
fn rule_for_types_mode(
    kind: &OpKind,
    operands: &[&TensorType],
    results: &[&TensorType],
    conservative: bool,
) -> Option<OpShardingRule> {
    let op_ranks: Vec<usize> = operands.iter().map(|t| t.rank()).collect();
    let res_ranks: Vec<usize> = results.iter().map(|t| t.rank()).collect();
    let mut b = RuleBuilder::new(&op_ranks, &res_ranks);
    let default = |_: usize| FactorKind::Default;
    let out = results.first().map(|t| t.shape.as_slice());
    match kind {
        k if k.is_elementwise() || matches!(k, OpKind::Iota { .. }) => {
            b.pointwise(out?, &op_ranks, &res_ranks, &default);
        }
        OpKind::DeviceCollective { op: c, .. } => {
            // Dims a collective resizes get one factor in the operand and
            // another in the result, both needing replication, after the
            // dims it keeps (as Shardy gives them).
            let input = &operands.first()?.shape;
            let output = out?;
            let special: Vec<usize> = match c {
                DeviceCollective::AllGather { dim } | DeviceCollective::ReduceScatter { dim } => {
                    vec![*dim as usize]
                }
                DeviceCollective::AllToAll {
                    split_dim,
                    concat_dim,
                    ..
                } => {
                    // Split dim first, then the concat dim (as Shardy orders them).
                    let mut d = vec![*split_dim as usize, *concat_dim as usize];
                    d.dedup();
                    d
                }
                DeviceCollective::AllReduce | DeviceCollective::CollectivePermute { .. } => {
                    Vec::new()
                }
            };
            for d in (0..input.len()).filter(|d| !special.contains(d)) {
                b.factor(&[Some(d)], &[Some(d)], input[d], FactorKind::Default);
            }
            for &d in &special {
                b.factor(&[Some(d)], &[None], input[d], FactorKind::NeedReplication);
                b.factor(&[None], &[Some(d)], output[d], FactorKind::NeedReplication);
            }
        }
        OpKind::Reverse { dims } => {
            let dims = dims.clone();
            b.pointwise(out?, &op_ranks, &res_ranks, &|d| {
                if dims.contains(&(d as u64)) {
                    FactorKind::Permutation
                } else {
                    FactorKind::Default
                }
            });
        }
        OpKind::Concatenate { dim } if conservative => {
            // No factor for the concatenated dim: build() gives it a size-1
            // factor in each tensor.
            let dim = *dim as usize;
            for (d, &size) in out?.iter().enumerate().filter(|&(d, _)| d != dim) {
                let ops: Vec<Option<usize>> =
                    op_ranks.iter().map(|&r| (r > d).then_some(d)).collect();
                b.factor(&ops, &[Some(d)], size, FactorKind::Default);
            }
        }
        OpKind::Concatenate { dim } => {
            let dim = *dim as usize;
            b.pointwise(out?, &op_ranks, &res_ranks, &|d| {
                if d == dim {
                    FactorKind::NeedReplication
                } else {
                    FactorKind::Default
                }
            });
        }
        OpKind::Slice { .. } | OpKind::Pad { .. } => {
            // Dims whose size changes are permutation factors of the operand's size;
            // the padding value (pad's second operand) is a scalar and unmapped.
            let input = &operands.first()?.shape;
            let output = out?;
            for (d, (&i, &o)) in input.iter().zip(output).enumerate() {
                let mut ops = vec![None; operands.len()];
                ops[0] = Some(d);
                let kind = if i == o {
                    FactorKind::Default
                } else {
                    FactorKind::Permutation
                };
                b.factor(&ops, &[Some(d)], i, kind);
            }
        }
        OpKind::DynamicSlice { .. } => {
            let input = &operands.first()?.shape;
            let output = out?;
            for (d, (&i, &o)) in input.iter().zip(output).enumerate() {
                let mut ops = vec![None; operands.len()];
                ops[0] = Some(d);
                if i == o {
                    b.factor(&ops, &[Some(d)], i, FactorKind::Default);
                } else {
                    let f = b.factor(&ops, &[Some(d)], i, FactorKind::NeedReplication);
                    b.block(f);
                }
            }
        }
        OpKind::DynamicUpdateSlice => {
            let input = &operands.first()?.shape;
            let update = &operands.get(1)?.shape;
            for (d, (&i, &u)) in input.iter().zip(update).enumerate() {
                let mut ops = vec![None; operands.len()];
                ops[0] = Some(d);
                if i == u {
                    ops[1] = Some(d);
                    b.factor(&ops, &[Some(d)], i, FactorKind::Default);
                } else {
                    b.factor(&ops, &[Some(d)], i, FactorKind::Default);
                    let mut upd = vec![None; operands.len()];
                    upd[1] = Some(d);
                    b.factor(&upd, &[None], u, FactorKind::NeedReplication);
                }
            }
        }
        OpKind::BroadcastInDim { dims } => {
            let input = &operands.first()?.shape;
            let output = out?;
            let mut out_to_in = vec![None; output.len()];
            for (i, &o) in dims.iter().enumerate() {
                *out_to_in.get_mut(o as usize)? = Some(i);
            }
            for (o, &size) in output.iter().enumerate() {
                let mut in_dim = out_to_in[o];
                if let Some(i) = in_dim {
                    if input[i] == 1 && size != 1 {
                        // Expanded in place: the operand dim gets its own size-1 factor.
                        b.factor(&[Some(i)], &[None], 1, FactorKind::Default);
                        in_dim = None;
                    }
                }
                b.factor(&[in_dim], &[Some(o)], size, FactorKind::Default);
            }
        }
        OpKind::Transpose { perm } => {
            let input = &operands.first()?.shape;
            for (o, &i) in perm.iter().enumerate() {
                b.factor(
                    &[Some(i as usize)],
                    &[Some(o)],
                    *input.get(i as usize)?,
                    FactorKind::Default,
                );
            }
        }
        OpKind::DotGeneral { dims, .. } => {
            let (lhs, rhs) = (&operands.first()?.shape, &operands.get(1)?.shape);
            let mut out_dim = 0;
            for (&l, &r) in dims.lhs_batch.iter().zip(&dims.rhs_batch) {
                b.factor(
                    &[Some(l as usize), Some(r as usize)],
                    &[Some(out_dim)],
                    lhs[l as usize],
                    FactorKind::Default,
                );
                out_dim += 1;
            }
            for (d, &size) in lhs.iter().enumerate() {
                let d64 = d as u64;
                if !dims.lhs_batch.contains(&d64) && !dims.lhs_contract.contains(&d64) {
                    b.factor(
                        &[Some(d), None],
                        &[Some(out_dim)],
                        size,
                        FactorKind::Default,
                    );
                    out_dim += 1;
                }
            }
            for (d, &size) in rhs.iter().enumerate() {
                let d64 = d as u64;
                if !dims.rhs_batch.contains(&d64) && !dims.rhs_contract.contains(&d64) {
                    b.factor(
                        &[None, Some(d)],
                        &[Some(out_dim)],
                        size,
                        FactorKind::Default,
                    );
                    out_dim += 1;
                }
            }
            for (&l, &r) in dims.lhs_contract.iter().zip(&dims.rhs_contract) {
                b.factor(
                    &[Some(l as usize), Some(r as usize)],
                    &[None],
                    lhs[l as usize],
                    FactorKind::Reduction,
                );
            }
        }
        OpKind::Dot { .. } => {
            let (lhs, rhs) = (&operands.first()?.shape, &operands.get(1)?.shape);
            let lhs_matrix = lhs.len() == 2;
            if lhs_matrix {
                b.factor(&[Some(0), None], &[Some(0)], lhs[0], FactorKind::Default);
            }
            if rhs.len() == 2 {
                b.factor(
                    &[None, Some(1)],
                    &[Some(usize::from(lhs_matrix))],
                    rhs[1],
                    FactorKind::Default,
                );
            }
            b.factor(
                &[Some(usize::from(lhs_matrix)), Some(0)],
                &[None],
                rhs[0],
                FactorKind::Reduction,
            );
        }
        OpKind::Reduce { dims } => {
            let n = results.len();
            let input = &operands.first()?.shape;
            let mut out_dim = 0;
            for (d, &size) in input.iter().enumerate() {
                let mut ops = vec![None; operands.len()];
                ops[..n].fill(Some(d));
                if dims.contains(&(d as u64)) {
                    b.factor(&ops, &vec![None; n], size, FactorKind::Reduction);
                } else {
                    b.factor(&ops, &vec![Some(out_dim); n], size, FactorKind::Default);
                    out_dim += 1;
                }
            }
        }
        OpKind::Reshape => reshape_rule(&mut b, &operands.first()?.shape, out?)?,
        OpKind::Gather { dims, .. } => {
            structured::gather_rule(&mut b, operands.first()?, operands.get(1)?, out?, dims)?
        }
        OpKind::Scatter { dims, .. } => structured::scatter_rule(&mut b, operands, dims)?,
        OpKind::Sort { dimension, .. } => {
            let dim = *dimension as usize;
            let shape = out?;
            let f0 = b.rule_len();
            b.pointwise(shape, &op_ranks, &res_ranks, &|d| {
                if d == dim {
                    FactorKind::NeedReplication
                } else {
                    FactorKind::Default
                }
            });
            // When every other dim has size 1 the sort dim is also blocked.
            if dim < shape.len() && shape.iter().enumerate().all(|(d, &s)| d == dim || s == 1) {
                b.block(f0 + dim);
            }
        }
        OpKind::TopK { .. } => structured::top_k_rule(&mut b, operands.first()?)?,
        OpKind::ReduceWindow { window } => {
            structured::reduce_window_rule(&mut b, out?, results.len(), window)?
        }
        OpKind::SelectAndScatter { window } => {
            structured::select_and_scatter_rule(&mut b, out?, &operands.get(1)?.shape, window)?
        }
        OpKind::Convolution {
            dims,
            window,
            feature_group_count,
            batch_group_count,
            ..
        } => structured::convolution_rule(
            &mut b,
            conservative,
            operands.first()?,
            operands.get(1)?,
            out?,
            dims,
            window,
            *feature_group_count,
            *batch_group_count,
        )?,
        OpKind::BitcastConvert => {
            // Shared dims are pointwise; the extra innermost dim of the
            // narrower element type needs replication.
            let (input, output) = (&operands.first()?.shape, out?);
            let shared = input.len().min(output.len());
            for (d, &size) in output.iter().enumerate().take(shared) {
                b.factor(&[Some(d)], &[Some(d)], size, FactorKind::Default);
            }
            if input.len() > shared {
                b.factor(
                    &[Some(shared)],
                    &[None],
                    input[shared],
                    FactorKind::NeedReplication,
                );
            } else if output.len() > shared {
                b.factor(
                    &[None],
                    &[Some(shared)],
                    output[shared],
                    FactorKind::NeedReplication,
                );
            }
        }
        OpKind::RngBitGenerator { .. } => {
            // The states are replicated and never propagate into each other.
            let state = &operands.first()?.shape;
            for (d, &size) in state.iter().enumerate() {
                let f = b.factor(
                    &[Some(d)],
                    &[Some(d), None],
                    size,
                    FactorKind::NeedReplication,
                );
                b.block(f);
            }
            for (d, &size) in results.get(1)?.shape.iter().enumerate() {
                b.factor(&[None], &[None, Some(d)], size, FactorKind::Default);
            }
        }
        OpKind::CustomCall { target } => {
            return super::custom_call::custom_call_rule(target, operands, results, false)
        }
        OpKind::Fft { kind, length } => {
            // Batch dims pass through; the transformed dims need replication,
            // and RFFT/IRFFT's last dim (n vs n/2 + 1 elements) is blocked.
            // Each factor is sized by the operand's dim, as Shardy does.
            let shape = &operands.first()?.shape;
            let first = shape.len().checked_sub(length.len())?;
            let real = matches!(
                kind,
                crate::tensor::FftKind::Rfft | crate::tensor::FftKind::Irfft
            );
            for (d, &size) in shape.iter().enumerate() {
                let f = if d < first {
                    FactorKind::Default
                } else {
                    FactorKind::NeedReplication
                };
                let f = b.factor(&[Some(d)], &[Some(d)], size, f);
                if real && d + 1 == shape.len() {
                    b.block(f);
                }
            }
        }
        OpKind::Cholesky { .. } => {
            // Batch dims pass through; the decomposed matrix dims need
            // replication.
            let shape = &operands.first()?.shape;
            let batch = shape.len().checked_sub(2)?;
            b.pointwise(shape, &op_ranks, &res_ranks, &|d| {
                if d < batch {
                    FactorKind::Default
                } else {
                    FactorKind::NeedReplication
                }
            });
        }
        OpKind::TriangularSolve {
            left_side,
            transpose_a,
            ..
        } => {
            let (a, bs) = (&operands.first()?.shape, &operands.get(1)?.shape);
            let (d1, d2) = (a.len().checked_sub(2)?, a.len() - 1);
            if bs.len() != a.len() {
                return None;
            }
            for (d, &size) in a.iter().enumerate().take(d1) {
                b.factor(&[Some(d), Some(d)], &[Some(d)], size, FactorKind::Default);
            }
            let t = transpose_a.transposed();
            let nr = FactorKind::NeedReplication;
            if *left_side {
                // op(a) x = b: a's free dim meets b's rows, b's columns are
                // the result's, a's contracted dim gives the result's rows.
                let (free, contracted) = if t { (d2, d1) } else { (d1, d2) };
                b.factor(&[Some(free), Some(d1)], &[None], a[free], nr);
                b.factor(&[None, Some(d2)], &[Some(d2)], bs[d2], nr);
                b.factor(&[Some(contracted), None], &[Some(d1)], a[contracted], nr);
            } else {
                // x op(a) = b.
                let (free, contracted) = if t { (d1, d2) } else { (d2, d1) };
                b.factor(&[None, Some(d1)], &[Some(d1)], bs[d1], nr);
                b.factor(&[Some(free), Some(d2)], &[None], a[free], nr);
                b.factor(&[Some(contracted), None], &[Some(d2)], a[contracted], nr);
            }
        }
        OpKind::BatchNormInference { feature_index, .. } => {
            // The statistics (operands 1-4) follow the feature dim.
            let shape = &operands.first()?.shape;
            for (d, &size) in shape.iter().enumerate() {
                let stat = (d as u64 == *feature_index).then_some(0);
                b.factor(
                    &[Some(d), stat, stat, stat, stat],
                    &[Some(d)],
                    size,
                    FactorKind::Default,
                );
            }
        }
        _ => return None,
    }
    if conservative {
        // The dims these ops reshape would move data: blocked (Shardy's
        // registry marks its mismatch factors blocked in this mode).
        match kind {
            OpKind::Slice { .. } | OpKind::Pad { .. } | OpKind::ReduceWindow { .. } => {
                b.block_kind(FactorKind::Permutation)
            }
            OpKind::SelectAndScatter { .. } => {
                b.block_kind(FactorKind::Permutation);
                b.block_kind(FactorKind::NeedReplication);
            }
            _ => {}
        }
    }
    Some(b.build())
}

/// Compound factors for a reshape: walk operand and result dims together,
/// giving size-1 dims their own factor and splitting the rest by gcd so that
/// each factor lies in one operand dim and one result dim where possible.
fn reshape_rule(b: &mut RuleBuilder, input: &[u64], output: &[u64]) -> Option<()> {
    if input.iter().product::<u64>() == 0
        || input.iter().product::<u64>() != output.iter().product::<u64>()
    {
        return None;
    }
    let (mut i, mut o) = (0usize, 0usize);
    let (mut dims_in, mut dims_out) = (1u64, 1u64);
    let (mut fac_in, mut fac_out) = (1u64, 1u64);
    let (ri, ro) = (input.len(), output.len());
    // Factor of `next` that lets the lagging side catch up, or keeps the gcd.
    let diverged = |next: u64, smaller: u64, larger: u64, g: u64| {
        if larger % smaller == 0 && next % (larger / smaller) == 0 {
            larger / smaller
        } else if next > g {
            next / g
        } else {
            next
        }
    };
    let mut guard = 0usize;
    while i < ri || o < ro {
        guard += 1;
        if guard > 4 * (ri + ro) + 64 {
            return None;
        }
        if i < ri && input[i] == 1 {
            b.factor(&[Some(i)], &[None], 1, FactorKind::Default);
            i += 1;
            continue;
        }
        if o < ro && output[o] == 1 {
            b.factor(&[None], &[Some(o)], 1, FactorKind::Default);
            o += 1;
            continue;
        }
        if i < ri && dims_in == fac_in {
            dims_in *= input[i];
        }
        if o < ro && dims_out == fac_out {
            dims_out *= output[o];
        }
        let next_in = dims_in / fac_in;
        let next_out = dims_out / fac_out;
        let g = gcd(next_in, next_out);
        let (in_dim, out_dim) = ((i < ri).then_some(i), (o < ro).then_some(o));
        if fac_in == fac_out {
            if g > 1 {
                b.factor(&[in_dim], &[out_dim], g, FactorKind::Default);
                fac_in *= g;
                fac_out *= g;
            } else {
                b.factor(&[in_dim], &[None], next_in, FactorKind::Default);
                fac_in *= next_in;
                b.factor(&[None], &[out_dim], next_out, FactorKind::Default);
                fac_out *= next_out;
            }
        } else if fac_in < fac_out {
            let f = diverged(next_in, fac_in, fac_out, g);
            b.factor(&[in_dim], &[None], f, FactorKind::Default);
            fac_in *= f;
        } else {
            let f = diverged(next_out, fac_out, fac_in, g);
            b.factor(&[None], &[out_dim], f, FactorKind::Default);
            fac_out *= f;
        }
        if i < ri && dims_in == fac_in {
            i += 1;
        }
        if o < ro && dims_out == fac_out {
            o += 1;
        }
    }
    Some(())
}
