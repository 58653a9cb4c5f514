//! The dead-code part of Shardy's export canonicalization, for the ops
//! propagation deals in: a sharding constraint or reshard whose result
//! nothing uses (not an op, a sharding group or a return) is removed, and so
//! is one that only fed removed ones; likewise an all-reduce a previous
//! export inserted. Other unused ops stay, as written.

use crate::ir::{Func, OpId, OpKind, ValueDef, ValueId};

/// Remove unused constraints and reshards from `func`; return, per old value
/// id, its new id (`None`: removed), or `None` when nothing was removed.
pub(super) fn remove_unused_constraints(func: &mut Func) -> Option<Vec<Option<ValueId>>> {
    // Most functions have none: skip the walk.
    if !func.ops.iter().any(|op| {
        matches!(
            op.kind,
            OpKind::ShardingConstraint { .. } | OpKind::Reshard { .. } | OpKind::AllReduce { .. }
        )
    }) {
        return None;
    }
    let order = func.walk();
    let mut uses = vec![0usize; func.values.len()];
    for &id in &order {
        for &v in &func.op(id).operands {
            uses[v.0 as usize] += 1;
        }
    }
    let removable = |func: &Func, id: OpId| {
        matches!(
            func.op(id).kind,
            OpKind::ShardingConstraint { .. } | OpKind::Reshard { .. } | OpKind::AllReduce { .. }
        )
    };
    let mut dead = vec![false; func.ops.len()];
    // Later ops first, so a chain of unused constraints goes in one sweep;
    // repeat while a removal frees another.
    loop {
        let mut changed = false;
        for &id in order.iter().rev() {
            let op = func.op(id);
            if dead[id.0 as usize] || !removable(func, id) {
                continue;
            }
            if op.results.iter().all(|r| uses[r.0 as usize] == 0) {
                dead[id.0 as usize] = true;
                for &v in &op.operands {
                    uses[v.0 as usize] -= 1;
                }
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    if !dead.iter().any(|&d| d) {
        return None;
    }
    Some(compact(func, &dead))
}

/// Drop the `dead` ops and their results from the arenas, renumbering the rest
/// in order.
fn compact(func: &mut Func, dead: &[bool]) -> Vec<Option<ValueId>> {
    let mut op_map: Vec<Option<OpId>> = vec![None; func.ops.len()];
    let mut next = 0u32;
    for (i, &d) in dead.iter().enumerate() {
        if !d {
            op_map[i] = Some(OpId(next));
            next += 1;
        }
    }
    let mut val_map: Vec<Option<ValueId>> = vec![None; func.values.len()];
    let mut next = 0u32;
    for (i, v) in func.values.iter().enumerate() {
        let gone = match v.def {
            ValueDef::Result { op, .. } | ValueDef::BlockArg { op, .. } => dead[op.0 as usize],
            ValueDef::FuncArg(_) => false,
        };
        if !gone {
            val_map[i] = Some(ValueId(next));
            next += 1;
        }
    }
    let v = |id: ValueId| val_map[id.0 as usize].expect("a live value uses live values");
    let o = |id: &OpId| op_map[id.0 as usize];
    let ops = std::mem::take(&mut func.ops);
    func.ops = ops
        .into_iter()
        .enumerate()
        .filter(|(i, _)| !dead[*i])
        .map(|(_, mut op)| {
            op.operands = op.operands.iter().map(|&x| v(x)).collect();
            op.results = op.results.iter().map(|&x| v(x)).collect();
            for r in &mut op.regions {
                r.args = r.args.iter().map(|&x| v(x)).collect();
                r.ops = r.ops.iter().filter_map(o).collect();
            }
            op
        })
        .collect();
    let values = std::mem::take(&mut func.values);
    func.values = values
        .into_iter()
        .enumerate()
        .filter(|(i, _)| val_map[*i].is_some())
        .map(|(_, mut value)| {
            value.def = match value.def {
                ValueDef::Result { op, index } => ValueDef::Result {
                    op: o(&op).expect("live"),
                    index,
                },
                ValueDef::BlockArg { op, region, index } => ValueDef::BlockArg {
                    op: o(&op).expect("live"),
                    region,
                    index,
                },
                d => d,
            };
            value
        })
        .collect();
    func.args = func.args.iter().map(|&x| v(x)).collect();
    func.body = func.body.iter().filter_map(o).collect();
    val_map
}
