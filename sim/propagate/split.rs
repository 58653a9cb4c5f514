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
//! The copies are appended to the arenas and inserted after the op they copy;
//! the first user of an expression keeps the original ops, later users get
//! copies of the ops already taken (and the original ops above them are
//! rewired to the copies). After propagation, [`merge_copies`] folds a copy
//! back into its original where that makes no difference: the same operands
//! and the same shardings. That is Shardy's export merger
//! (`sdy-constant-or-scalar-merger`: identical constants and scalar broadcasts
//! with equal shardings) applied to every copied op; a copy whose sharding
//! differs stays in the program as Shardy leaves it (a causal mask returned
//! replicated keeps its own iota, reshapes and compare while the select's copy
//! is sharded, so the returned mask is computed, not all-gathered). Shardy also
//! keeps copies of iotas and other non-constant ops whose shardings came out
//! equal; merging them computes the same values with the same layouts once.

use std::collections::BTreeMap;

use crate::ir::{Func, Op, OpId, OpKind, Value, ValueDef, ValueId};

/// What splitting added, to undo it.
pub(super) struct Split {
    values_len: usize,
    ops_len: usize,
    /// The original op of each copy (copy `ops_len + i` copies `origin[i]`).
    origin: Vec<OpId>,
}

impl Split {
    /// The function's value count before splitting.
    pub(super) fn values_len(&self) -> usize {
        self.values_len
    }
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
    /// The original op of each copy, in copy order.
    origin: Vec<OpId>,
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
                    // Named when kept (`merge_copies`).
                    name: orig.name.clone(),
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
        self.origin.push(op);
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
        origin: Vec::new(),
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
        origin: s.origin,
    }
}

/// Fold each copy [`split_constants`] made back into its original where both
/// have the same operands (after folding) and every result the same sharding;
/// keep the others, renumbered after the original values and ops and named
/// `%splitN`. Returns, for every value id at or past the original values, its
/// id now (`None`: folded away).
pub(super) fn merge_copies(func: &mut Func, split: Split) -> Vec<Option<ValueId>> {
    let Split {
        values_len,
        ops_len,
        origin,
    } = split;
    // What each value stands for after folding (copies are made after the
    // copies of their operands, so one pass in copy order suffices).
    let mut subst: Vec<ValueId> = (0..func.values.len() as u32).map(ValueId).collect();
    let mut kept = vec![false; origin.len()];
    for (i, &orig) in origin.iter().enumerate() {
        let copy = OpId((ops_len + i) as u32);
        let (c, o) = (func.op(copy), func.op(orig));
        let same_operands = c.operands.len() == o.operands.len()
            && c.operands
                .iter()
                .zip(&o.operands)
                .all(|(&a, &b)| subst[a.0 as usize] == subst[b.0 as usize]);
        let same_shardings = c
            .results
            .iter()
            .zip(&o.results)
            .all(|(&a, &b)| func.value(a).sharding == func.value(b).sharding);
        if same_operands && same_shardings {
            for (&a, &b) in c.results.iter().zip(&o.results) {
                subst[a.0 as usize] = subst[b.0 as usize];
            }
        } else {
            kept[i] = true;
        }
    }
    // New ids for the kept copies' ops and values.
    let mut op_map: Vec<Option<OpId>> = vec![None; origin.len()];
    let mut val_map: Vec<Option<ValueId>> = vec![None; func.values.len() - values_len];
    let (mut next_op, mut next_val) = (ops_len as u32, values_len as u32);
    for (i, _) in kept.iter().enumerate().filter(|(_, &k)| k) {
        op_map[i] = Some(OpId(next_op));
        next_op += 1;
        for &r in &func.op(OpId((ops_len + i) as u32)).results {
            val_map[r.0 as usize - values_len] = Some(ValueId(next_val));
            next_val += 1;
        }
    }
    let renumber = |v: ValueId| -> ValueId {
        let v = subst[v.0 as usize];
        match (v.0 as usize).checked_sub(values_len) {
            Some(i) => val_map[i].expect("a folded copy stands for its original"),
            None => v,
        }
    };
    let copies: Vec<Op> = func.ops.drain(ops_len..).collect();
    let copy_values: Vec<Value> = func.values.drain(values_len..).collect();
    for op in func.ops.iter_mut() {
        for o in op.operands.iter_mut() {
            *o = renumber(*o);
        }
    }
    let taken: std::collections::BTreeSet<String> =
        func.values.iter().map(|v| v.name.clone()).collect();
    let mut serial = 0usize;
    for (i, mut op) in copies.into_iter().enumerate() {
        let Some(id) = op_map[i] else { continue };
        for o in op.operands.iter_mut() {
            *o = renumber(*o);
        }
        // A fresh name the MLIR text can carry (`%` then a letter).
        let name = loop {
            serial += 1;
            let name = format!("%split{serial}");
            if !taken.contains(&name) {
                break name;
            }
        };
        let old_results = std::mem::take(&mut op.results);
        let n = old_results.len();
        for (k, r) in old_results.into_iter().enumerate() {
            let mut value = copy_values[r.0 as usize - values_len].clone();
            value.def = ValueDef::Result { op: id, index: k };
            value.name = if n == 1 {
                name.clone()
            } else {
                format!("{name}#{k}")
            };
            op.results.push(func.add_value(value));
        }
        func.add_op(op);
    }
    func.body = func
        .body
        .iter()
        .filter_map(|&id| match (id.0 as usize).checked_sub(ops_len) {
            Some(i) => op_map[i],
            None => Some(id),
        })
        .collect();
    val_map
}
