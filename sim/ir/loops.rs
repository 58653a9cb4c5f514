//! Static trip counts of `stablehlo.while` loops as JAX writes `scan` and
//! `fori_loop`: a counter starting at a constant, compared `LT` with a
//! constant limit in the condition, and increased by a constant step in the
//! body.

use super::model::{Func, Op, ValueDef, ValueId};
use super::ops::{BinaryOp, CompareDir, DenseValue, OpKind, Scalar};

/// The integer value of a scalar constant (looking through converts and
/// broadcasts of one), if `v` is one.
fn constant_int(func: &Func, v: ValueId) -> Option<i128> {
    let ValueDef::Result { op, .. } = func.value(v).def else {
        return None;
    };
    let op = func.op(op);
    match &op.kind {
        OpKind::Constant { value, .. } => match value {
            DenseValue::Splat(Scalar::Int(i)) => Some(*i),
            DenseValue::Elements(e) if e.len() == 1 => match e[0] {
                Scalar::Int(i) => Some(i),
                _ => None,
            },
            _ => None,
        },
        OpKind::Convert | OpKind::BroadcastInDim { .. } | OpKind::Reshape => {
            constant_int(func, *op.operands.first()?)
        }
        _ => None,
    }
}

/// The trip count of `op` (a `stablehlo.while`) when its bounds are static:
/// `ceil((limit - init) / step)`, 0 when the loop never runs.
pub fn static_trip_count(func: &Func, op: &Op) -> Option<u64> {
    let [cond, body] = &op.regions[..] else {
        return None;
    };
    let ret = func.op(*cond.ops.last()?);
    let ValueDef::Result { op: cmp, .. } = func.value(*ret.operands.first()?).def else {
        return None;
    };
    let cmp = func.op(cmp);
    let OpKind::Compare {
        dir: CompareDir::Lt,
        ..
    } = cmp.kind
    else {
        return None;
    };
    let k = cond.args.iter().position(|&a| a == cmp.operands[0])?;
    let limit = constant_int(func, cmp.operands[1])?;
    let init = constant_int(func, *op.operands.get(k)?)?;
    let yielded = func.op(*body.ops.last()?).operands.get(k).copied()?;
    let ValueDef::Result { op: add, .. } = func.value(yielded).def else {
        return None;
    };
    let add = func.op(add);
    if add.kind != OpKind::Binary(BinaryOp::Add) {
        return None;
    }
    let counter = body.args[k];
    let step = match add.operands[..] {
        [a, b] if a == counter => constant_int(func, b)?,
        [a, b] if b == counter => constant_int(func, a)?,
        _ => return None,
    };
    if step <= 0 {
        return None;
    }
    let span = (limit - init).max(0);
    u64::try_from((span + step - 1) / step).ok()
}
