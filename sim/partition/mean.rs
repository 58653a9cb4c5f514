//! Means over sharded dims finished by an averaging all-reduce, where the
//! user asks for it ([`super::PartitionOptions::avg_means`]). JAX lowers
//! `mean` to a sum reduce followed by a divide by the element count; with
//! the reduced dims split evenly over `k` devices, each device divides its
//! partial sum by its own count (`count / k`) and the partial means are
//! finished by `all_reduce` (or `reduce_scatter`) with `avg` — NCCL's
//! `ncclAvg`, which scales in the collective instead of in a separate kernel
//! after it. The program's divide then disappears.

use crate::base::TensorType;
use crate::ir::{BinaryOp, DenseValue, Func, Op, OpId, OpKind, Scalar, ValueDef, ValueId};
use crate::sharding::TensorSharding;

use super::combine::add_op_both;
use super::lower::Builder;
use super::program::Slot;
use super::PartitionError;

/// A sum reduce whose only use divides it by its element count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct MeanPattern {
    /// The divide that turns the sum into the mean.
    pub divide: OpId,
    /// Elements reduced into each result element.
    pub count: u64,
}

/// The op defining `v`, if any.
fn producer(func: &Func, v: ValueId) -> Option<&Op> {
    match func.value(v).def {
        ValueDef::Result { op, .. } => Some(func.op(op)),
        _ => None,
    }
}

/// The splat value of a constant, or of a broadcast of a scalar constant.
fn splat_value(func: &Func, v: ValueId) -> Option<f64> {
    let op = producer(func, v)?;
    let op = match op.kind {
        OpKind::BroadcastInDim { .. } => producer(func, op.operands[0])?,
        _ => op,
    };
    match &op.kind {
        OpKind::Constant {
            value: DenseValue::Splat(Scalar::Float(x)),
            ..
        } => Some(*x),
        _ => None,
    }
}

/// `op` (a single-input sum reduce of floats) when its result's one use is
/// `divide(result, count)`.
pub(super) fn mean_pattern(func: &Func, op: &Op) -> Option<MeanPattern> {
    let OpKind::Reduce { dims } = &op.kind else {
        return None;
    };
    if op.operands.len() != 2 || !func.value(op.results[0]).ty.dtype.is_float() {
        return None;
    }
    let shape = &func.value(op.operands[0]).ty.shape;
    let count: u64 = dims.iter().map(|&d| shape[d as usize]).product();
    let r = op.results[0];
    let mut uses = func
        .body
        .iter()
        .filter(|&&id| func.op(id).operands.contains(&r));
    let (&divide, None) = (uses.next()?, uses.next()) else {
        return None;
    };
    let d = func.op(divide);
    let is_mean = matches!(d.kind, OpKind::Binary(BinaryOp::Divide))
        && d.operands[0] == r
        && d.operands[1] != r
        && splat_value(func, d.operands[1]) == Some(count as f64);
    is_mean.then_some(MeanPattern { divide, count })
}

impl Builder {
    /// Divide partial sum `slot` (unreduced over axes splitting the reduced
    /// dims into `k` equal parts) by its local count `count / k`: a scalar
    /// constant, its broadcast and a divide, added to the program. Returns
    /// the partial mean (same sharding, same unreduced axes).
    pub(super) fn local_mean(
        &mut self,
        template: &Op,
        reduce_result: ValueId,
        slot: Slot,
        local_count: u64,
    ) -> Result<Slot, PartitionError> {
        let partial = self.values[slot].clone();
        let dtype = partial.global.dtype;
        let scalar_ty = TensorType {
            shape: Vec::new(),
            dtype,
        };
        let scalar_sharding = TensorSharding::replicated(&self.mesh_name, 0);
        let c = self.add_value(
            &format!("{}.count", partial.name),
            scalar_ty.clone(),
            scalar_sharding,
        )?;
        let kind = OpKind::Constant {
            value: DenseValue::Splat(Scalar::Float(local_count as f64)),
            sdy: false,
        };
        let names = |s: &str, slot: Slot| format!("%{s}{slot}");
        let (c_op, c_vals) = add_op_both(
            self,
            template,
            kind,
            &[],
            &[(names("n", c), scalar_ty.clone(), scalar_ty)],
            Vec::new(),
        );
        self.push_added(c_op, Vec::new(), vec![c], true);
        // The broadcast count: laid out as the partial, nothing unreduced.
        let plain = TensorSharding {
            unreduced: Vec::new(),
            reduction: crate::sharding::Reduction::Sum,
            ..partial.sharding.clone()
        };
        let b = self.add_value(
            &format!("{}.counts", partial.name),
            partial.global.clone(),
            plain,
        )?;
        let mut local_ty = partial.global.clone();
        local_ty.shape = partial.layout.local_shape.clone();
        let (b_op, b_vals) = add_op_both(
            self,
            template,
            OpKind::BroadcastInDim { dims: Vec::new() },
            &c_vals,
            &[(names("nb", b), partial.global.clone(), local_ty.clone())],
            Vec::new(),
        );
        self.push_added(b_op, vec![c], vec![b], false);
        let mean = self.add_value(
            &format!("{}.mean", partial.name),
            partial.global.clone(),
            partial.sharding.clone(),
        )?;
        let (d_op, _) = add_op_both(
            self,
            template,
            OpKind::Binary(BinaryOp::Divide),
            &[reduce_result, b_vals[0]],
            &[(names("mean", mean), partial.global.clone(), local_ty)],
            Vec::new(),
        );
        self.push_added(d_op, vec![slot, b], vec![mean], false);
        Ok(mean)
    }
}
