//! Constant splitting, as Shardy's import does it (its constant-or-scalar
//! splitter): a constant expression (constants and iotas, and broadcasts,
//! reshapes, slices and elementwise ops whose operands are all constant
//! expressions) and a broadcast of a scalar are private to each op outside
//! them that uses them, so that one use's sharding does not leak into the
//! others (a causal mask returned and also used by a sharded `select` stays
//! replicated where it is returned). Inside one expression nothing is split:
//! an iota feeding two reshapes that are broadcast along different dims stays
//! one value, so a sharding reaching it through one reshape reaches the other.
//!
//! The copies exist only during propagation: they are appended to the arenas,
//! inserted after the op they copy, and removed afterwards; the first user of
//! an expression keeps the original ops, later users get copies of the ops
//! already taken (and the original ops above them are rewired to the copies).

use std::collections::BTreeMap;

use crate::ir::{Func, Op, OpId, OpKind, Value, ValueDef, ValueId};

/// What splitting added, to undo it.
pub(super) struct Split {
    values_len: usize,
    ops_len: usize,
    body: Vec<OpId>,
    /// (op, operand index, original value) for every rewired operand.
    rewired: Vec<(OpId, usize, ValueId)>,
}

fn is_constant_kind(kind: &OpKind) -> bool {
    matches!(kind, OpKind::Constant { .. } | OpKind::Iota { .. })
}

/// Shardy's constant-preserving ops: pure broadcasts, reshapes, slices and
/// elementwise ops.
fn preserves_constants(kind: &OpKind) -> bool {
    (kind.is_elementwise()
        && !matches!(
            kind,
            OpKind::ShardingConstraint { .. } | OpKind::Reshard { .. } | OpKind::DeviceCopy { .. }
        ))
        || matches!(
            kind,
            OpKind::BroadcastInDim { .. } | OpKind::Reshape | OpKind::Slice { .. }
        )
}

struct Splitter<'a> {
    /// Values private to each outside user: constant expressions and scalar broadcasts.
    splittable: &'a [bool],
    /// Values some user already took.
    taken: Vec<bool>,
    /// Copies to insert after each original op.
    after: BTreeMap<OpId, Vec<OpId>>,
    rewired: Vec<(OpId, usize, ValueId)>,
}

impl Splitter<'_> {
    /// The value one outside user sees for `v`: the original if nothing of its
    /// expression is taken yet, else copies of the taken ops.
    fn take(
        &mut self,
        func: &mut Func,
        v: ValueId,
        memo: &mut BTreeMap<ValueId, ValueId>,
    ) -> ValueId {
        let i = v.0 as usize;
        if !self.splittable.get(i).copied().unwrap_or(false) || func.value(v).ty.rank() == 0 {
            return v;
        }
        if let Some(&c) = memo.get(&v) {
            return c;
        }
        let ValueDef::Result { op, index } = func.value(v).def else {
            return v;
        };
        let operands = func.op(op).operands.clone();
        let seen: Vec<ValueId> = operands.iter().map(|&o| self.take(func, o, memo)).collect();
        let out = if self.taken[i] {
            self.copy(func, op, seen)[index]
        } else {
            // Ours: keep the op, pointing it at the copies its operands got.
            for (k, (&o, &s)) in operands.iter().zip(&seen).enumerate() {
                if o != s {
                    func.op_mut(op).operands[k] = s;
                    self.rewired.push((op, k, o));
                }
            }
            for &r in &func.op(op).results.clone() {
                self.taken[r.0 as usize] = true;
            }
            v
        };
        memo.insert(v, out);
        out
    }

    fn copy(&mut self, func: &mut Func, op: OpId, operands: Vec<ValueId>) -> Vec<ValueId> {
        let src = func.op(op).clone();
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
        func.add_op(Op {
            operands,
            results: results.clone(),
            ..src
        });
        self.after.entry(op).or_default().push(id);
        results
    }
}

/// Give every outside user of a constant expression or scalar broadcast its own copy.
pub(super) fn split_constants(func: &mut Func) -> Split {
    let (values_len, ops_len, body) = (func.values.len(), func.ops.len(), func.body.clone());
    // Which top-level values are constant expressions or scalar broadcasts, and
    // which ops make them (their uses never split).
    let mut constant = vec![false; func.values.len()];
    let mut splittable = vec![false; func.values.len()];
    let mut inside = vec![false; func.ops.len()];
    for &id in &body {
        let op = func.op(id);
        let is_constant = is_constant_kind(&op.kind)
            || (preserves_constants(&op.kind)
                && !op.operands.is_empty()
                && op.operands.iter().all(|v| constant[v.0 as usize]));
        let scalar_broadcast = matches!(op.kind, OpKind::BroadcastInDim { .. })
            && op
                .operands
                .first()
                .is_some_and(|&o| func.value(o).ty.rank() == 0);
        if is_constant || scalar_broadcast {
            inside[id.0 as usize] = true;
            for &r in &op.results {
                constant[r.0 as usize] = is_constant;
                splittable[r.0 as usize] = true;
            }
        }
    }
    let mut s = Splitter {
        splittable: &splittable,
        taken: vec![false; func.values.len()],
        after: BTreeMap::new(),
        rewired: Vec::new(),
    };
    for &user in &body {
        if inside[user.0 as usize] {
            continue;
        }
        let operands = func.op(user).operands.clone();
        for (k, &v) in operands.iter().enumerate() {
            let mut memo = BTreeMap::new();
            let seen = s.take(func, v, &mut memo);
            if seen != v {
                func.op_mut(user).operands[k] = seen;
                s.rewired.push((user, k, v));
            }
        }
    }
    let mut new_body = Vec::with_capacity(body.len());
    for &id in &body {
        new_body.push(id);
        if let Some(copies) = s.after.get(&id) {
            new_body.extend(copies);
        }
    }
    func.body = new_body;
    Split {
        values_len,
        ops_len,
        body,
        rewired: s.rewired,
    }
}

/// Undo [`split_constants`].
pub(super) fn unsplit(func: &mut Func, split: Split) {
    for (op, k, v) in split.rewired.into_iter().rev() {
        func.op_mut(op).operands[k] = v;
    }
    func.body = split.body;
    func.values.truncate(split.values_len);
    func.ops.truncate(split.ops_len);
}
