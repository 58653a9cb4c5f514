//! Sharding groups whose members start with incompatible shardings, as
//! Shardy's `ShardingGroupMap::syncGroupMemberShardings` treats them (with a
//! warning there): every member gets an open sharding constraint right after
//! it that takes over all its uses and its group membership, so the members
//! keep their own shardings and the group is shared by the constraints.
//! Runs before constant splitting (it adds ops and values).

use std::collections::BTreeMap;

use crate::ir::{Func, Op, OpId, OpKind, Value, ValueDef, ValueId};
use crate::sharding::{DimSharding, TensorSharding};

use super::manual::free_part;

/// A sharding with no axes on any dim and every dim open (Shardy skips
/// those when looking for a group's common sharding).
fn is_fully_open_empty(s: &TensorSharding) -> bool {
    s.dims.iter().all(|d| !d.is_closed && d.axes.is_empty())
}

/// The sharding `v` has when groups are unified: a constraint's result has
/// the constraint's, a manual computation's block argument its in-sharding's
/// free part, anything else its own.
fn initial_sharding(func: &Func, v: ValueId) -> Option<TensorSharding> {
    match func.value(v).def {
        ValueDef::Result { op, .. } => match &func.op(op).kind {
            OpKind::ShardingConstraint { sharding } | OpKind::Reshard { sharding } => {
                Some(sharding.clone())
            }
            _ => func.value(v).sharding.clone(),
        },
        ValueDef::BlockArg { op, index, .. } => match &func.op(op).kind {
            OpKind::ManualComputation {
                in_shardings,
                manual_axes,
                ..
            } => in_shardings
                .get(index)
                .map(|s| free_part(s, manual_axes))
                .or_else(|| func.value(v).sharding.clone()),
            _ => func.value(v).sharding.clone(),
        },
        ValueDef::FuncArg(_) => func.value(v).sharding.clone(),
    }
}

/// The group's common sharding, and whether two members disagree.
pub(super) fn common_sharding(
    shardings: &[Option<TensorSharding>],
) -> (Option<TensorSharding>, bool) {
    if let [only] = shardings {
        return (only.clone(), false);
    }
    let mut common: Option<&TensorSharding> = None;
    for s in shardings.iter().flatten() {
        if is_fully_open_empty(s) {
            continue;
        }
        match common {
            None => common = Some(s),
            Some(c) if c == s => {}
            Some(c) => return (Some(c.clone()), true),
        }
    }
    (common.cloned(), false)
}

/// Insert the open constraints for every group whose members disagree.
pub(super) fn decouple_conflicting_groups(func: &mut Func) {
    if !has_groups(func) {
        return;
    }
    let mut by_id: BTreeMap<i64, Vec<(OpId, ValueId)>> = BTreeMap::new();
    for id in func.walk() {
        let op = func.op(id);
        if let OpKind::ShardingGroup { group_id } = &op.kind {
            by_id
                .entry(*group_id)
                .or_default()
                .push((id, op.operands[0]));
        }
    }
    for members in by_id.values() {
        let shardings: Vec<Option<TensorSharding>> = members
            .iter()
            .map(|&(_, v)| initial_sharding(func, v))
            .collect();
        let (Some(common), true) = common_sharding(&shardings) else {
            continue;
        };
        let open = TensorSharding {
            mesh: common.mesh.clone(),
            dims: vec![DimSharding::open(Vec::new()); common.dims.len()],
            replicated: Vec::new(),
            unreduced: Vec::new(),
            reduction: crate::sharding::Reduction::Sum,
        };
        let mut done: Vec<ValueId> = Vec::new();
        for &(_, member) in members {
            if !done.contains(&member) {
                insert_open_constraint(func, member, &open);
                done.push(member);
            }
        }
    }
}

fn has_groups(func: &Func) -> bool {
    func.ops
        .iter()
        .any(|o| matches!(o.kind, OpKind::ShardingGroup { .. }))
}

/// A fresh value name `base` + suffix, unused in `func`.
fn fresh_name(func: &Func, base: &str) -> String {
    let base = format!("{base}_grouped");
    let taken = |n: &str| func.values.iter().any(|v| v.name == n);
    if !taken(&base) {
        return base;
    }
    (1..)
        .map(|i| format!("{base}{i}"))
        .find(|n| !taken(n))
        .unwrap_or(base)
}

/// `%c = sdy.sharding_constraint %member <open>` right after `member`'s
/// definition (at the start of the block for an argument), with every other
/// use of `member` moved to `%c`.
fn insert_open_constraint(func: &mut Func, member: ValueId, open: &TensorSharding) {
    let def = func.value(member).def;
    let name = fresh_name(func, &func.value(member).name);
    let ty = func.value(member).ty.clone();
    let op = OpId(func.ops.len() as u32);
    let c = func.add_value(Value {
        name,
        ty,
        sharding: None,
        def: ValueDef::Result { op, index: 0 },
    });
    let loc = match def {
        ValueDef::Result { op, .. } | ValueDef::BlockArg { op, .. } => func.op(op).loc,
        ValueDef::FuncArg(_) => func.loc,
    };
    for o in func.ops.iter_mut() {
        for x in o.operands.iter_mut().filter(|x| **x == member) {
            *x = c;
        }
    }
    let added = func.add_op(Op {
        kind: OpKind::ShardingConstraint {
            sharding: open.clone(),
        },
        operands: vec![member],
        results: vec![c],
        regions: Vec::new(),
        rule: None,
        attrs: Vec::new(),
        loc,
    });
    debug_assert_eq!(added, op);
    match def {
        ValueDef::FuncArg(_) => func.body.insert(0, op),
        ValueDef::BlockArg {
            op: owner, region, ..
        } => func.op_mut(owner).regions[region].ops.insert(0, op),
        ValueDef::Result { op: producer, .. } => {
            let block = block_of(func, producer);
            if let Some(ops) = block {
                let at = ops.iter().position(|&o| o == producer).map_or(0, |i| i + 1);
                ops.insert(at, op);
            }
        }
    }
}

/// The op list holding `op` (the body or a region's).
fn block_of(func: &mut Func, op: OpId) -> Option<&mut Vec<OpId>> {
    if func.body.contains(&op) {
        return Some(&mut func.body);
    }
    let owner = func
        .ops
        .iter()
        .position(|o| o.regions.iter().any(|r| r.ops.contains(&op)))?;
    func.ops[owner]
        .regions
        .iter_mut()
        .map(|r| &mut r.ops)
        .find(|ops| ops.contains(&op))
}

/// Members of groups whose sharding an earlier function found start from it
/// (open, so propagation may still extend it), where they have none.
pub(super) fn seed_from_other_functions(func: &mut Func, found: &BTreeMap<i64, TensorSharding>) {
    if found.is_empty() || !has_groups(func) {
        return;
    }
    for id in func.walk() {
        let op = func.op(id);
        let OpKind::ShardingGroup { group_id } = &op.kind else {
            continue;
        };
        let (Some(s), member) = (found.get(group_id), op.operands[0]) else {
            continue;
        };
        if func.value(member).sharding.is_none() && func.value(member).ty.rank() == s.dims.len() {
            let mut open = s.clone();
            for d in &mut open.dims {
                d.is_closed = false;
                d.priority = None;
            }
            func.value_mut(member).sharding = Some(open);
        }
    }
}

/// After a function's propagation, each of its groups' sharding (the first
/// member's that has one), for the functions after it.
pub(super) fn record_group_shardings(func: &Func, found: &mut BTreeMap<i64, TensorSharding>) {
    // Arena order: members of one group share one sharding, so any member will do.
    for op in &func.ops {
        if let OpKind::ShardingGroup { group_id } = &op.kind {
            if let Some(s) = &func.value(op.operands[0]).sharding {
                found.entry(*group_id).or_insert_with(|| s.clone());
            }
        }
    }
}
