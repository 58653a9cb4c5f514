//! Mesh axes and references to a full axis or a sub-axis `"x":(pre_size)size`.

use std::cmp::Ordering;
use std::fmt;

use serde::{Deserialize, Serialize};

use super::{Mesh, MeshError};

/// A named mesh axis with its size.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MeshAxis {
    pub name: String,
    pub size: u64,
}

/// The part `(pre_size)size` of a sub-axis: the full axis reshaped to
/// `[.., pre_size-product.., size, ..]`, this piece having `size` elements with
/// `pre_size` elements of the axis more major than it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct SubAxis {
    pub pre_size: u64,
    pub size: u64,
}

impl SubAxis {
    /// `pre_size * size`: the pre-size of the sub-axis that would follow this one.
    pub fn next_pre_size(self) -> u64 {
        self.pre_size * self.size
    }
}

/// A reference to a full mesh axis (`"x"`) or a sub-axis (`"x":(1)2`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct AxisRef {
    pub name: String,
    pub sub: Option<SubAxis>,
}

impl AxisRef {
    /// The full axis `name`.
    pub fn full(name: impl Into<String>) -> Self {
        AxisRef {
            name: name.into(),
            sub: None,
        }
    }

    /// The sub-axis `name:(pre_size)size`.
    pub fn sub(name: impl Into<String>, pre_size: u64, size: u64) -> Self {
        AxisRef {
            name: name.into(),
            sub: Some(SubAxis { pre_size, size }),
        }
    }

    /// Number of devices along this axis reference.
    pub fn size(&self, mesh: &Mesh) -> Result<u64, MeshError> {
        let full = mesh.axis_size(&self.name)?;
        Ok(self.sub.map(|s| s.size).unwrap_or(full))
    }

    /// The `[start, end)` range this reference covers in the axis' index space,
    /// measured as (pre_size, next_pre_size) over the full axis size.
    fn span(&self, axis_size: u64) -> (u64, u64) {
        match self.sub {
            None => (1, axis_size),
            Some(s) => (s.pre_size, s.next_pre_size()),
        }
    }

    /// Check the reference against `mesh`: the axis exists and a sub-axis has
    /// pre-size >= 1, size > 1, pre_size*size divides the axis size and is not the full axis.
    pub fn validate(&self, mesh: &Mesh) -> Result<(), MeshError> {
        let axis_size = mesh.axis_size(&self.name)?;
        if let Some(s) = self.sub {
            if s.pre_size < 1 {
                return Err(MeshError::BadSubAxis(format!(
                    "sub-axis pre-size must be at least 1: {self}"
                )));
            }
            if s.size <= 1 {
                return Err(MeshError::BadSubAxis(format!(
                    "sub-axis size must be greater than 1: {self}"
                )));
            }
            let next = s.pre_size.saturating_mul(s.size);
            if next == 0 || axis_size % next != 0 {
                return Err(MeshError::BadSubAxis(format!(
                    "sub-axis {self}: pre_size*size = {next} does not divide the size {axis_size} of axis \"{}\"",
                    self.name
                )));
            }
            if s.size == axis_size {
                return Err(MeshError::BadSubAxis(format!(
                    "sub-axis {self} covers the whole axis \"{}\"; use the full axis",
                    self.name
                )));
            }
        }
        Ok(())
    }

    /// True when the two references share devices of the same axis (same axis and
    /// intersecting pre-size ranges).
    pub fn overlaps(&self, other: &AxisRef, mesh: &Mesh) -> bool {
        if self.name != other.name {
            return false;
        }
        let size = mesh.axis_size(&self.name).unwrap_or(1);
        let (a0, a1) = self.span(size);
        let (b0, b1) = other.span(size);
        a0 < b1 && b0 < a1
    }

    /// True when `other` directly follows `self` on the same axis, so the two can
    /// be written as one (sub-)axis.
    pub fn can_merge(&self, other: &AxisRef) -> bool {
        match (self.sub, other.sub) {
            (Some(a), Some(b)) => self.name == other.name && a.next_pre_size() == b.pre_size,
            _ => false,
        }
    }

    /// Shardy's order of axis references w.r.t. a mesh: by axis position, then
    /// by pre-size, then by size.
    pub fn mesh_cmp(&self, other: &AxisRef, mesh: &Mesh) -> Ordering {
        let ia = mesh.axis_index(&self.name).unwrap_or(usize::MAX);
        let ib = mesh.axis_index(&other.name).unwrap_or(usize::MAX);
        let size_a = mesh.axis_size(&self.name).unwrap_or(1);
        let size_b = mesh.axis_size(&other.name).unwrap_or(1);
        ia.cmp(&ib)
            .then_with(|| self.span(size_a).0.cmp(&other.span(size_b).0))
            .then_with(|| self.span(size_a).1.cmp(&other.span(size_b).1))
    }

    /// The index of mesh position `pos` along this reference.
    pub(crate) fn index_of_position(&self, mesh: &Mesh, pos: u64) -> Result<u64, MeshError> {
        let axis = mesh.axis_index(&self.name)?;
        let coord = (pos / mesh.strides()[axis]) % mesh.axes()[axis].size;
        Ok(match self.sub {
            None => coord,
            Some(s) => (coord / (mesh.axes()[axis].size / s.next_pre_size())) % s.size,
        })
    }

    /// The mesh-position stride of one step along this reference.
    pub(crate) fn position_stride(&self, mesh: &Mesh) -> Result<u64, MeshError> {
        let axis = mesh.axis_index(&self.name)?;
        let base = mesh.strides()[axis];
        Ok(match self.sub {
            None => base,
            Some(s) => base * (mesh.axes()[axis].size / s.next_pre_size()),
        })
    }
}

impl fmt::Display for AxisRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "\"{}\"", self.name)?;
        if let Some(s) = self.sub {
            write!(f, ":({}){}", s.pre_size, s.size)?;
        }
        Ok(())
    }
}

/// Span arithmetic on axis references, used by sharding propagation. A
/// reference covers the half-open range `[pre_size, next_pre_size)` of its
/// axis in "pre-size space" (a full axis of size n covers `[1, n)`).
impl AxisRef {
    /// `(pre_size, next_pre_size)` of this reference on `mesh`.
    pub fn pre_span(&self, mesh: &Mesh) -> (u64, u64) {
        self.span(mesh.axis_size(&self.name).unwrap_or(1))
    }

    /// The reference covering `[pre, next)` of axis `name`: the full axis when
    /// that is the whole axis.
    pub fn from_span(name: &str, pre: u64, next: u64, mesh: &Mesh) -> AxisRef {
        let size = mesh.axis_size(name).unwrap_or(1);
        if pre == 1 && next == size {
            AxisRef::full(name)
        } else {
            AxisRef::sub(name, pre, next / pre)
        }
    }

    /// True when `self` is a prefix of `other` (same axis, same start, not longer); equal counts.
    pub fn prefix_of(&self, other: &AxisRef, mesh: &Mesh) -> bool {
        if self.name != other.name {
            return false;
        }
        let (a0, a1) = self.pre_span(mesh);
        let (b0, b1) = other.pre_span(mesh);
        a0 == b0 && a1 <= b1 && b1 % a1 == 0
    }

    /// True when `self` is a strict prefix of `other`.
    pub fn strict_prefix_of(&self, other: &AxisRef, mesh: &Mesh) -> bool {
        self.prefix_of(other, mesh) && self != other
    }

    /// True when `self` covers all of `other`.
    pub fn contains(&self, other: &AxisRef, mesh: &Mesh) -> bool {
        if self.name != other.name {
            return false;
        }
        let (a0, a1) = self.pre_span(mesh);
        let (b0, b1) = other.pre_span(mesh);
        a0 <= b0 && b1 <= a1
    }

    /// Whether the two references can be used together (Shardy's
    /// `canCoexist`): always for other axes or a full axis; two sub-axes of one
    /// axis must come from one factorization of it (`"a":(1)2` and `"a":(3)2`
    /// of an axis of 6 cannot: 2 does not divide 3).
    pub fn can_coexist(&self, other: &AxisRef) -> bool {
        let (Some(a), Some(b)) = (self.sub, other.sub) else {
            return true;
        };
        if self.name != other.name {
            return true;
        }
        let (min_pre, max_pre) = (a.pre_size.min(b.pre_size), a.pre_size.max(b.pre_size));
        let (an, bn) = (a.next_pre_size(), b.next_pre_size());
        let (min_next, max_next) = (an.min(bn), an.max(bn));
        if min_next > max_pre {
            // Overlapping: the shared and the separate parts must be sub-axes.
            min_next % max_pre == 0 && max_pre % min_pre == 0 && max_next % min_next == 0
        } else {
            // Apart: the gap between them must be a sub-axis.
            max_pre % min_next == 0
        }
    }

    /// The largest prefix of `self` that does not overlap `other`, or None when
    /// even the first element overlaps or the two cannot coexist.
    pub fn prefix_without_overlap(&self, other: &AxisRef, mesh: &Mesh) -> Option<AxisRef> {
        if !self.can_coexist(other) {
            return None;
        }
        if !self.overlaps(other, mesh) {
            return Some(self.clone());
        }
        let (a0, _) = self.pre_span(mesh);
        let (b0, _) = other.pre_span(mesh);
        if b0 <= a0 {
            return None;
        }
        Some(AxisRef::from_span(&self.name, a0, b0, mesh))
    }

    /// `self` followed by `other` as one reference, when they are consecutive
    /// pieces of one axis.
    pub fn merged(&self, other: &AxisRef, mesh: &Mesh) -> Option<AxisRef> {
        if self.name != other.name {
            return None;
        }
        let (a0, a1) = self.pre_span(mesh);
        let (b0, b1) = other.pre_span(mesh);
        (a1 == b0).then(|| AxisRef::from_span(&self.name, a0, b1, mesh))
    }

    /// The part of `self` after its prefix `prefix`, if any is left.
    pub fn suffix_after(&self, prefix: &AxisRef, mesh: &Mesh) -> Option<AxisRef> {
        let (a0, a1) = self.pre_span(mesh);
        let (_, p1) = prefix.pre_span(mesh);
        (prefix.prefix_of(self, mesh) && p1 < a1 && a0 <= p1)
            .then(|| AxisRef::from_span(&self.name, p1, a1, mesh))
    }
}

/// Push `axis` onto `axes`, merging it with the last element when they are
/// consecutive pieces of one axis.
pub fn push_or_merge(axes: &mut Vec<AxisRef>, axis: AxisRef, mesh: &Mesh) {
    if let Some(m) = axes.last().and_then(|last| last.merged(&axis, mesh)) {
        *axes.last_mut().expect("non-empty") = m;
    } else {
        axes.push(axis);
    }
}
