//! Sharding projection: a tensor's dimension shardings seen per factor of an
//! op's sharding rule, and back.
//!
//! Projecting walks each dimension's axes major to minor and hands them to the
//! dimension's factors in order, splitting an axis into sub-axes where a factor
//! takes only part of it (by gcd of the remaining factor size and axis size).
//! The minor-most factor of a dimension takes everything left (padding allowed);
//! a non-minor-most factor whose remaining size is coprime with the next axis
//! keeps the rest as *overflow* axes, and the dimension's later factors are
//! closed. Projecting back concatenates the factors' axes (merging consecutive
//! sub-axes), stopping after a factor that is not fully sharded (a later
//! factor would need a strided view).

use std::collections::BTreeMap;

use crate::mesh::{push_or_merge, AxisRef, Mesh};
use crate::sharding::{DimSharding, MeshRef, Reduction, TensorSharding};

/// How one factor of one tensor is sharded.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FactorSharding {
    pub axes: Vec<AxisRef>,
    /// A closed factor is never extended.
    pub is_closed: bool,
    /// The factor is the last (minor-most) one of its dimension.
    pub is_minor_most: bool,
    /// Axes of the dimension that could not be given to this factor (see module doc).
    pub overflow: Vec<AxisRef>,
}

/// The factor shardings of one tensor, plus what does not belong to factors.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TensorFactorShardings {
    pub factors: BTreeMap<usize, FactorSharding>,
    pub replicated: Vec<AxisRef>,
    pub unreduced: Vec<AxisRef>,
    /// How the unreduced partial results combine.
    pub reduction: Reduction,
}

/// An axis being handed out: its name, size left, and the pre-size where the
/// remaining part starts (None: the untouched full axis).
#[derive(Debug, Clone)]
struct Remaining {
    index: usize,
    size: u64,
    split_pre: Option<u64>,
}

impl Remaining {
    fn at(axes: &[AxisRef], index: usize, mesh: &Mesh) -> Option<Remaining> {
        let a = axes.get(index)?;
        Some(Remaining {
            index,
            size: a.size(mesh).unwrap_or(1),
            split_pre: a.sub.map(|s| s.pre_size),
        })
    }

    fn axis_ref(&self, axes: &[AxisRef]) -> AxisRef {
        let name = axes[self.index].name.clone();
        match self.split_pre {
            Some(pre) => AxisRef::sub(name, pre, self.size),
            None => AxisRef::full(name),
        }
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Push every remaining axis (from `rem` on) onto `out`, merging where possible.
fn add_remaining(
    out: &mut Vec<AxisRef>,
    mut rem: Option<Remaining>,
    axes: &[AxisRef],
    mesh: &Mesh,
) {
    while let Some(r) = rem {
        push_or_merge(out, r.axis_ref(axes), mesh);
        rem = Remaining::at(axes, r.index + 1, mesh);
    }
}

impl TensorFactorShardings {
    /// Project `sharding` (None: no sharding yet) through `mapping` (per tensor
    /// dim, its factor indices major to minor).
    pub fn project(
        sharding: Option<&TensorSharding>,
        mapping: &[Vec<usize>],
        factor_sizes: &[u64],
        mesh: &Mesh,
        closed_if_missing: bool,
    ) -> TensorFactorShardings {
        let mut out = TensorFactorShardings::default();
        for (dim, factors) in mapping.iter().enumerate() {
            let (axes, dim_closed): (&[AxisRef], bool) =
                match sharding.and_then(|s| s.dims.get(dim)) {
                    Some(d) => (&d.axes, d.is_closed),
                    None => (&[], closed_if_missing),
                };
            let mut rem = Remaining::at(axes, 0, mesh);
            let mut overflowed = false;
            for (k, &f) in factors.iter().enumerate() {
                let fs = out.factors.entry(f).or_default();
                fs.is_minor_most = k + 1 == factors.len();
                if overflowed {
                    fs.is_closed = true;
                    break;
                }
                fs.is_closed = dim_closed;
                let mut factor_left = factor_sizes[f];
                if fs.is_minor_most {
                    add_remaining(&mut fs.axes, rem.take(), axes, mesh);
                    break;
                }
                while let Some(r) = rem.as_mut() {
                    let g = if r.size == 1 {
                        1
                    } else {
                        gcd(factor_left, r.size)
                    };
                    if r.size != 1 && g == 1 {
                        break;
                    }
                    if r.size > g && r.size != 1 {
                        let pre = r.split_pre.unwrap_or(1);
                        fs.axes
                            .push(AxisRef::sub(axes[r.index].name.clone(), pre, g));
                        r.split_pre = Some(pre * g);
                        r.size /= g;
                        factor_left /= g;
                    } else {
                        fs.axes.push(r.axis_ref(axes));
                        factor_left /= r.size;
                        let next = r.index + 1;
                        rem = Remaining::at(axes, next, mesh);
                    }
                }
                if factor_left > 1 && rem.is_some() {
                    overflowed = true;
                    add_remaining(&mut fs.overflow, rem.take(), axes, mesh);
                }
            }
        }
        if let Some(s) = sharding {
            out.replicated = s.replicated.clone();
            out.unreduced = s.unreduced.clone();
            out.reduction = s.reduction;
        }
        out
    }

    /// Project back to a tensor sharding on mesh symbol `mesh_name`.
    pub fn unproject(
        &self,
        mapping: &[Vec<usize>],
        factor_sizes: &[u64],
        mesh_name: &str,
        mesh: &Mesh,
    ) -> TensorSharding {
        let mut dims = Vec::with_capacity(mapping.len());
        for factors in mapping {
            let mut is_closed = false;
            let mut axes: Vec<AxisRef> = Vec::new();
            for &f in factors {
                let Some(fs) = self.factors.get(&f) else {
                    break;
                };
                is_closed |= fs.is_closed;
                let mut sharded = 1u64;
                for (i, a) in fs.axes.iter().enumerate() {
                    sharded *= a.size(mesh).unwrap_or(1);
                    if i == 0 {
                        push_or_merge(&mut axes, a.clone(), mesh);
                    } else {
                        axes.push(a.clone());
                    }
                }
                if !fs.overflow.is_empty() {
                    for (i, a) in fs.overflow.iter().enumerate() {
                        if i == 0 {
                            push_or_merge(&mut axes, a.clone(), mesh);
                        } else {
                            axes.push(a.clone());
                        }
                    }
                    break;
                }
                if sharded < factor_sizes[f] {
                    break;
                }
            }
            dims.push(DimSharding {
                axes,
                is_closed,
                priority: None,
            });
        }
        TensorSharding {
            mesh: MeshRef::Symbol(mesh_name.to_string()),
            dims,
            replicated: self.replicated.clone(),
            unreduced: self.unreduced.clone(),
            reduction: self.reduction,
        }
    }

    /// Extend factor `f` to `new_axes` when its current axes are a strict prefix of them.
    pub fn expand(&mut self, f: usize, new_axes: &[AxisRef], mesh: &Mesh) -> bool {
        match self.factors.get_mut(&f) {
            Some(fs) if is_strict_prefix(&fs.axes, new_axes, mesh) => {
                fs.axes = new_axes.to_vec();
                true
            }
            _ => false,
        }
    }

    /// Product of the sizes of the factors this tensor has (its element count
    /// as the rule sees it).
    pub fn size(&self, factor_sizes: &[u64]) -> u64 {
        self.factors.keys().map(|&f| factor_sizes[f]).product()
    }
}

/// How one axis list relates to another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrefixStatus {
    Equal,
    StrictPrefix,
    NotAPrefix,
}

/// Is `first` a prefix of `second` (the last element may be a sub-axis prefix)?
pub fn prefix_status(first: &[AxisRef], second: &[AxisRef], mesh: &Mesh) -> PrefixStatus {
    if first.is_empty() {
        return if second.is_empty() {
            PrefixStatus::Equal
        } else {
            PrefixStatus::StrictPrefix
        };
    }
    if first.len() > second.len() {
        return PrefixStatus::NotAPrefix;
    }
    let n = first.len();
    if first[..n - 1] != second[..n - 1] {
        return PrefixStatus::NotAPrefix;
    }
    if first.len() == second.len() && first[n - 1] == second[n - 1] {
        return PrefixStatus::Equal;
    }
    if first[n - 1].prefix_of(&second[n - 1], mesh) {
        PrefixStatus::StrictPrefix
    } else {
        PrefixStatus::NotAPrefix
    }
}

/// True when `first` is a strict prefix of `second`.
pub fn is_strict_prefix(first: &[AxisRef], second: &[AxisRef], mesh: &Mesh) -> bool {
    prefix_status(first, second, mesh) == PrefixStatus::StrictPrefix
}

/// The factor shardings of all operands and results of one op.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Projection {
    pub operands: Vec<TensorFactorShardings>,
    pub results: Vec<TensorFactorShardings>,
}

impl Projection {
    /// Operands then results, as one sequence (Shardy's tensor index order).
    pub fn tensors(&self) -> impl Iterator<Item = &TensorFactorShardings> {
        self.operands.iter().chain(self.results.iter())
    }

    /// Number of operands plus results.
    pub fn num_tensors(&self) -> usize {
        self.operands.len() + self.results.len()
    }

    /// Tensor `i` in operands-then-results order.
    pub fn tensor_mut(&mut self, i: usize) -> &mut TensorFactorShardings {
        let n = self.operands.len();
        if i < n {
            &mut self.operands[i]
        } else {
            &mut self.results[i - n]
        }
    }
}
