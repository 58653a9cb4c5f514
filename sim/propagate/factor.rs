//! Factor propagation: given an op's projection, find for every factor the axes
//! all its tensors can agree on, and extend the tensors' factor shardings.
//!
//! Two strategies, as Shardy defines them:
//! - *basic*: one set of axes per factor for every tensor; an axis that
//!   conflicts anywhere (another factor uses it, a tensor replicates it, a
//!   closed or overflowing factor cannot take it) is dropped with everything
//!   minor to it;
//! - *aggressive*: per tensor; conflicts within a factor are resolved per
//!   tensor, and conflicts across factors prefer the factor whose source tensor
//!   (the tensor the axes come from) is larger, then the smaller source index,
//!   then the smaller factor index.

use crate::mesh::{AxisRef, Mesh};

use super::projection::{
    is_strict_prefix, prefix_status, FactorSharding, PrefixStatus, Projection,
    TensorFactorShardings,
};

/// Which way shardings may flow through an op (or along one factor).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Direction {
    None,
    Forward,
    Backward,
    Both,
}

impl Direction {
    /// Union of two directions.
    pub fn union(self, other: Direction) -> Direction {
        use Direction::*;
        match (self, other) {
            (None, d) | (d, None) => d,
            (a, b) if a == b => a,
            _ => Both,
        }
    }

    /// Intersection of two directions.
    pub fn intersect(self, other: Direction) -> Direction {
        use Direction::*;
        match (self, other) {
            (Both, d) | (d, Both) => d,
            (a, b) if a == b => a,
            _ => None,
        }
    }
}

/// The propagation strategy for conflicts between factors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FactorStrategy {
    Basic,
    Aggressive,
}

/// Which operands and results changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Updated {
    pub operands: Vec<bool>,
    pub results: Vec<bool>,
}

impl Updated {
    fn new(p: &Projection) -> Self {
        Updated {
            operands: vec![false; p.operands.len()],
            results: vec![false; p.results.len()],
        }
    }

    /// True when anything changed.
    pub fn any(&self) -> bool {
        self.operands.iter().chain(&self.results).any(|&b| b)
    }
}

/// Everything factor propagation needs to know about the op.
pub struct FactorContext<'a> {
    pub factor_sizes: &'a [u64],
    pub mesh: &'a Mesh,
    /// Direction per factor.
    pub direction: &'a dyn Fn(usize) -> Direction,
    /// The op is elementwise (no sideways propagation between operands).
    pub elementwise: bool,
    /// Conservative mode: never split an axis into sub-axes.
    pub conservative: bool,
}

/// Largest prefix of `axis` overlapping none of `others`.
fn prefix_without_overlap(axis: &AxisRef, others: &[AxisRef], mesh: &Mesh) -> Option<AxisRef> {
    let mut result = axis.clone();
    for o in others {
        result = result.prefix_without_overlap(o, mesh)?;
    }
    Some(result)
}

/// Largest prefix of `axis` that no other factor of the tensor uses (existing
/// axes, overflow axes, and, when given, other factors' candidate axes).
fn no_conflicts_across_factors(
    axis: &AxisRef,
    tensor: &TensorFactorShardings,
    factor: usize,
    candidates: Option<&[Vec<AxisRef>]>,
    mesh: &Mesh,
) -> Option<AxisRef> {
    let mut result = axis.clone();
    for (&other, fs) in &tensor.factors {
        if other == factor {
            continue;
        }
        result = prefix_without_overlap(&result, &fs.overflow, mesh)?;
        result = prefix_without_overlap(&result, &fs.axes, mesh)?;
        if let Some(c) = candidates {
            result = prefix_without_overlap(&result, &c[other], mesh)?;
        }
    }
    Some(result)
}

/// Largest prefix of `axis` that this tensor's factor can take: neither
/// replicated nor unreduced in the tensor (an unreduced axis holds partial
/// sums, so no dim of it may be sharded along it), and either already there or the factor is open, without overflow, and
/// (unless minor-most) the part of it that still divides the factor after the
/// `prev_sharded` size of the axes before it: the whole axis, or its sub-axis
/// prefix of size gcd(factor left, axis size) (Shardy's
/// `compatiblePrefixNoConflictsWithinFactor`).
fn no_conflicts_within_factor(
    axis: &AxisRef,
    replicated: &[AxisRef],
    unreduced: &[AxisRef],
    fs: &FactorSharding,
    prev_sharded: u64,
    factor_size: u64,
    mesh: &Mesh,
) -> Option<AxisRef> {
    let result = prefix_without_overlap(axis, replicated, mesh)?;
    let result = match unreduced.is_empty() {
        true => result,
        false => prefix_without_overlap(&result, unreduced, mesh)?,
    };
    if fs.axes.iter().any(|a| a.contains(&result, mesh)) {
        return Some(result);
    }
    if !fs.is_closed && fs.overflow.is_empty() {
        if fs.is_minor_most {
            return Some(result);
        }
        if prev_sharded > 0 && factor_size % prev_sharded == 0 {
            let size = result.size(mesh).unwrap_or(1);
            let g = gcd(factor_size / prev_sharded, size);
            if g == size {
                return Some(result);
            }
            if g != 1 {
                let pre = result.sub.map_or(1, |s| s.pre_size);
                return Some(AxisRef::sub(result.name.clone(), pre, g));
            }
        }
    }
    match fs.axes.last() {
        Some(last) if last.prefix_of(&result, mesh) => Some(last.clone()),
        _ => None,
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Keep the longest prefix of `axes` for which `fix` accepts every axis; an
/// axis that `fix` shortens ends the list after it. `fix` is given the axis
/// and the sharded size of the axes before it.
fn truncate_conflicts(
    axes: &mut Vec<AxisRef>,
    mut fix: impl FnMut(&AxisRef, u64) -> Option<AxisRef>,
    mesh: &Mesh,
    conservative: bool,
) {
    let mut prev = 1u64;
    for i in 0..axes.len() {
        let fixed = fix(&axes[i], prev);
        prev = prev.saturating_mul(axes[i].size(mesh).unwrap_or(1));
        match fixed {
            None => {
                axes.truncate(i);
                return;
            }
            Some(a) if conservative && a.sub.is_some() => {
                let _ = a;
                axes.truncate(i);
                return;
            }
            Some(a) if a != axes[i] => {
                axes[i] = a;
                axes.truncate(i + 1);
                return;
            }
            Some(_) => {}
        }
    }
}

/// Merge two axis lists into their compatible major part; `can_expand` says
/// whether `new` may extend `old`. Returns the list and whether it may still grow.
fn compatible_major_axes_of(
    old: &[AxisRef],
    new: &[AxisRef],
    can_expand: bool,
    mesh: &Mesh,
) -> (Vec<AxisRef>, bool) {
    let mut result = Vec::with_capacity(old.len().max(new.len()));
    let (mut o, mut n) = (old, new);
    while let (Some(oa), Some(na)) = (o.first(), n.first()) {
        o = &o[1..];
        n = &n[1..];
        if oa.name != na.name {
            return (result, false);
        }
        if oa.sub == na.sub {
            result.push(na.clone());
            continue;
        }
        if na.prefix_of(oa, mesh) {
            if !n.is_empty() {
                result.push(na.clone());
                return (result, false);
            }
            result.push(oa.clone());
        } else if oa.prefix_of(na, mesh) {
            if !can_expand || !o.is_empty() {
                result.push(oa.clone());
                return (result, false);
            }
            result.push(na.clone());
        } else {
            return (result, false);
        }
    }
    result.extend_from_slice(o);
    if can_expand {
        result.extend_from_slice(n);
    }
    (result, can_expand)
}

/// The compatible major axes of factor `f` across the tensors, ignoring
/// conflicts: for one-way directions only the source side may extend them.
pub fn compatible_major_axes(
    p: &Projection,
    f: usize,
    direction: Direction,
    mesh: &Mesh,
) -> Vec<AxisRef> {
    let (first, second): (&[TensorFactorShardings], &[TensorFactorShardings]) = match direction {
        Direction::None => return Vec::new(),
        Direction::Both | Direction::Forward => (&p.operands, &p.results),
        Direction::Backward => (&p.results, &p.operands),
    };
    let mut axes = Vec::new();
    let mut can_expand = true;
    for t in first {
        if let Some(fs) = t.factors.get(&f) {
            (axes, can_expand) = compatible_major_axes_of(&axes, &fs.axes, can_expand, mesh);
        }
    }
    if direction != Direction::Both {
        can_expand = false;
    }
    for t in second {
        if let Some(fs) = t.factors.get(&f) {
            (axes, can_expand) = compatible_major_axes_of(&axes, &fs.axes, can_expand, mesh);
        }
    }
    axes
}

/// Propagate along every factor of the op; returns which tensors changed.
pub fn propagate_factors(
    p: &mut Projection,
    ctx: &FactorContext<'_>,
    strategy: FactorStrategy,
) -> Updated {
    match strategy {
        FactorStrategy::Basic => propagate_basic(p, ctx),
        FactorStrategy::Aggressive => propagate_aggressive(p, ctx),
    }
}

fn propagate_basic(p: &mut Projection, ctx: &FactorContext<'_>) -> Updated {
    let mut updated = Updated::new(p);
    for (f, &factor_size) in ctx.factor_sizes.iter().enumerate() {
        let direction = (ctx.direction)(f);
        let mut axes = compatible_major_axes(p, f, direction, ctx.mesh);
        let snapshot: &Projection = p;
        truncate_conflicts(
            &mut axes,
            |axis, prev| {
                let mut result = axis.clone();
                for t in snapshot.tensors() {
                    result = no_conflicts_across_factors(&result, t, f, None, ctx.mesh)?;
                    if let Some(fs) = t.factors.get(&f) {
                        result = no_conflicts_within_factor(
                            &result,
                            &t.replicated,
                            &t.unreduced,
                            fs,
                            prev,
                            factor_size,
                            ctx.mesh,
                        )?;
                    }
                }
                Some(result)
            },
            ctx.mesh,
            ctx.conservative,
        );
        let n_ops = p.operands.len();
        for i in 0..p.num_tensors() {
            if p.tensor_mut(i).expand(f, &axes, ctx.mesh) {
                if i < n_ops {
                    updated.operands[i] = true;
                } else {
                    updated.results[i - n_ops] = true;
                }
            }
        }
    }
    updated
}

/// The axes to give factor `f` of one tensor (aggressive strategy).
fn axes_for_tensor(
    f: usize,
    tensor: &TensorFactorShardings,
    candidates: &[Vec<AxisRef>],
    ctx: &FactorContext<'_>,
) -> Vec<AxisRef> {
    let Some(fs) = tensor.factors.get(&f) else {
        return Vec::new();
    };
    let mut axes = candidates[f].clone();
    truncate_conflicts(
        &mut axes,
        |axis, prev| {
            no_conflicts_within_factor(
                axis,
                &tensor.replicated,
                &tensor.unreduced,
                fs,
                prev,
                ctx.factor_sizes[f],
                ctx.mesh,
            )
        },
        ctx.mesh,
        ctx.conservative,
    );
    if !is_strict_prefix(&fs.axes, &axes, ctx.mesh) {
        return Vec::new();
    }
    truncate_conflicts(
        &mut axes,
        |axis, _| no_conflicts_across_factors(axis, tensor, f, None, ctx.mesh),
        ctx.mesh,
        ctx.conservative,
    );
    axes
}

fn propagate_aggressive(p: &mut Projection, ctx: &FactorContext<'_>) -> Updated {
    let mut updated = Updated::new(p);
    let nf = ctx.factor_sizes.len();
    let candidates: Vec<Vec<AxisRef>> = (0..nf)
        .map(|f| compatible_major_axes(p, f, (ctx.direction)(f), ctx.mesh))
        .collect();
    if candidates.iter().all(Vec::is_empty) {
        return updated;
    }
    // Source tensor per factor: the largest tensor whose factor axes are a prefix of the candidate.
    let mut source: Vec<(i128, i64)> = vec![(-1, -1); nf];
    for (ti, t) in p.tensors().enumerate() {
        let size = t.size(ctx.factor_sizes) as i128;
        for (&f, fs) in &t.factors {
            let is_source = !candidates[f].is_empty()
                && prefix_status(&candidates[f], &fs.axes, ctx.mesh) != PrefixStatus::NotAPrefix;
            if is_source && size > source[f].0 {
                source[f] = (size, ti as i64);
            }
        }
    }
    // Larger source tensor first, then (elementwise ops) the most sharded
    // factor, then the earlier source tensor, then the earlier factor
    // (Shardy's order).
    let sharded: Vec<i128> = match ctx.elementwise {
        true => candidates
            .iter()
            .map(|axes| {
                axes.iter()
                    .map(|a| a.size(ctx.mesh).unwrap_or(1) as i128)
                    .product()
            })
            .collect(),
        false => vec![0; nf],
    };
    let mut order: Vec<usize> = (0..nf).collect();
    order.sort_by_key(|&f| (-source[f].0, -sharded[f], source[f].1, f));

    let n_ops = p.operands.len();
    for f in order {
        let direction = (ctx.direction)(f);
        if direction != Direction::Backward {
            for r in 0..p.results.len() {
                let axes = axes_for_tensor(f, &p.results[r], &candidates, ctx);
                if !axes.is_empty() && p.results[r].expand(f, &axes, ctx.mesh) {
                    updated.results[r] = true;
                }
            }
        }
        if direction != Direction::Forward {
            for o in 0..n_ops {
                let mut axes = axes_for_tensor(f, &p.operands[o], &candidates, ctx);
                if axes.is_empty() {
                    continue;
                }
                if ctx.elementwise {
                    // No sideways propagation between operands of an elementwise op:
                    // an operand gets no more than a result already has.
                    for res in &p.results {
                        if let Some(rf) = res.factors.get(&f) {
                            if is_strict_prefix(&rf.axes, &axes, ctx.mesh) {
                                axes = rf.axes.clone();
                            }
                        }
                    }
                }
                if p.operands[o].expand(f, &axes, ctx.mesh) {
                    updated.operands[o] = true;
                }
            }
        }
    }
    updated
}
