//! Constant splitting, as Shardy's import does it: a constant expression
//! (constants, iotas, and elementwise/shape ops whose operands are all constant
//! expressions) used several times gets a private copy per extra use, so that
//! one use's sharding does not leak into the others (a causal mask returned and
//! also used by a sharded `select` stays replicated where it is returned).
//!
//! The copies exist only during propagation: they are appended to the arenas,
//! inserted before their user in the function body, and removed afterwards;
//! the original value keeps what its first use gave it.

use crate::ir::{Func, Op, OpId, OpKind, Value, ValueDef, ValueId};

/// What splitting added, to undo it.
pub(super) struct Split {
    values_len: usize,
    ops_len: usize,
    body: Vec<OpId>,
    /// (user op, operand index, original value) for every rewired operand.
    rewired: Vec<(OpId, usize, ValueId)>,
}

fn is_constant_kind(kind: &OpKind) -> bool {
    matches!(kind, OpKind::Constant { .. } | OpKind::Iota { .. })
}

fn may_fold(kind: &OpKind) -> bool {
    (kind.is_elementwise()
        && !matches!(
            kind,
            OpKind::ShardingConstraint { .. } | OpKind::Reshard { .. } | OpKind::DeviceCopy { .. }
        ))
        || matches!(
            kind,
            OpKind::BroadcastInDim { .. }
                | OpKind::Reshape
                | OpKind::Transpose { .. }
                | OpKind::Slice { .. }
                | OpKind::Concatenate { .. }
                | OpKind::Pad { .. }
                | OpKind::Reverse { .. }
        )
}

/// Give every extra top-level use of a constant expression its own copy.
pub(super) fn split_constants(func: &mut Func) -> Split {
    let split = Split {
        values_len: func.values.len(),
        ops_len: func.ops.len(),
        body: func.body.clone(),
        rewired: Vec::new(),
    };
    // Which top-level values are constant expressions.
    let mut constant = vec![false; func.values.len()];
    for &id in &func.body {
        let op = func.op(id);
        let is_const = is_constant_kind(&op.kind)
            || (may_fold(&op.kind)
                && !op.operands.is_empty()
                && op.operands.iter().all(|v| constant[v.0 as usize]));
        if is_const {
            for &r in &op.results {
                constant[r.0 as usize] = true;
            }
        }
    }
    let mut split = split;
    let mut seen_use = vec![false; func.values.len()];
    let mut new_body = Vec::with_capacity(func.body.len());
    for &user in &split.body.clone() {
        let operands = func.op(user).operands.clone();
        for (k, &v) in operands.iter().enumerate() {
            if !constant.get(v.0 as usize).copied().unwrap_or(false) {
                continue;
            }
            if !seen_use[v.0 as usize] {
                seen_use[v.0 as usize] = true;
                continue;
            }
            let copy = copy_tree(func, v, &mut new_body);
            func.op_mut(user).operands[k] = copy;
            split.rewired.push((user, k, v));
        }
        new_body.push(user);
    }
    func.body = new_body;
    split
}

/// Copy the constant expression defining `v` (with its operands' expressions);
/// the new ops are pushed onto `body` in dependency order.
fn copy_tree(func: &mut Func, v: ValueId, body: &mut Vec<OpId>) -> ValueId {
    let ValueDef::Result { op, index } = func.value(v).def else {
        return v;
    };
    let src = func.op(op).clone();
    let operands: Vec<ValueId> = src
        .operands
        .iter()
        .map(|&o| copy_tree(func, o, body))
        .collect();
    let id = OpId(func.ops.len() as u32);
    let results: Vec<ValueId> = src
        .results
        .iter()
        .enumerate()
        .map(|(i, &r)| {
            let orig = func.value(r);
            let value = Value {
                name: format!("{}.split{}", orig.name, id.0),
                ty: orig.ty.clone(),
                sharding: orig.sharding.clone(),
                def: ValueDef::Result { op: id, index: i },
            };
            func.add_value(value)
        })
        .collect();
    let new_op = Op {
        operands,
        results: results.clone(),
        ..src
    };
    func.add_op(new_op);
    body.push(id);
    results[index]
}

/// Undo [`split_constants`].
pub(super) fn unsplit(func: &mut Func, split: Split) {
    for (user, k, v) in split.rewired {
        func.op_mut(user).operands[k] = v;
    }
    func.body = split.body;
    func.values.truncate(split.values_len);
    func.ops.truncate(split.ops_len);
}
