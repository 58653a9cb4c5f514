//! The all-reduces Shardy's export inserts where unreduced axes are dropped
//! (its insert-explicit-reshards pass, minimal version, as the propagation
//! pipeline runs it): when a use of a value whose sharding has unreduced
//! axes wants fewer of them, an `sdy.all_reduce` of the axes it drops goes
//! between the value and that use, its out-sharding the value's with only the
//! axes kept unreduced. What a use wants: an op's first result's unreduced
//! axes; a function return's, the function result's; a call's, the callee
//! argument's; a data-flow edge's (a while's operand and its body's return,
//! an optimization barrier's operand, a case branch's return, a named
//! computation's return), its result's; a named computation's operand, its
//! block argument's.
//! Before the use, except for calls and data-flow edges: after the value's
//! definition (where Shardy puts those).
//! Ops without results, the predicate of a case, manual computations' bodies
//! and ops that already are collectives are left alone.

use std::collections::{BTreeMap, BTreeSet};

use crate::ir::{Func, Op, OpId, OpKind, RawAttr, Value, ValueDef, ValueId};
use crate::mesh::AxisRef;
use crate::sharding::TensorSharding;

/// Insert the all-reduces in every function of `module` (after propagation,
/// cloning and dead-code removal: values keep their ids, new ones follow).
pub(super) fn insert_all_reduces(module: &mut crate::ir::Module) {
    // Callee argument shardings, read before any function changes (the
    // all-reduces never change them).
    let args: BTreeMap<String, Vec<Option<TensorSharding>>> = module
        .funcs
        .iter()
        .map(|f| {
            let s = f
                .args
                .iter()
                .map(|&a| f.value(a).sharding.clone())
                .collect();
            (f.name.clone(), s)
        })
        .collect();
    for f in &mut module.funcs {
        insert_in_func(f, &args);
    }
}

/// One all-reduce to insert on operand `value` of `user`: just before
/// `user`, or (`after_def`, a call's or data-flow edge's source, as Shardy
/// places those) just after `value` is defined.
struct Insertion {
    user: OpId,
    /// Which operand of `user` (one all-reduce per use, as Shardy's).
    index: usize,
    value: ValueId,
    axes: Vec<AxisRef>,
    out: TensorSharding,
    after_def: bool,
}

fn insert_in_func(func: &mut Func, callee_args: &BTreeMap<String, Vec<Option<TensorSharding>>>) {
    let unreduced_somewhere = func
        .values
        .iter()
        .any(|v| v.sharding.as_ref().is_some_and(|s| !s.unreduced.is_empty()));
    if !unreduced_somewhere {
        return;
    }
    let parent = parents(func);
    let mut todo: Vec<Insertion> = Vec::new();
    for id in func.walk() {
        if in_manual_body(func, &parent, id) {
            continue;
        }
        let op = func.op(id);
        // Per use, the unreduced axes it wants (None: left alone).
        for (i, &v) in op.operands.iter().enumerate() {
            let Some(s) = func.value(v).sharding.as_ref() else {
                continue;
            };
            if s.unreduced.is_empty() {
                continue;
            }
            let Some(want) = wanted(func, &parent, callee_args, id, i) else {
                continue;
            };
            let axes: Vec<AxisRef> = s
                .unreduced
                .iter()
                .filter(|a| !want.contains(a))
                .cloned()
                .collect();
            if axes.is_empty() {
                continue;
            }
            let mut out = s.clone();
            out.unreduced.retain(|a| want.contains(a));
            if out.unreduced.is_empty() {
                out.reduction = crate::sharding::Reduction::Sum;
            }
            let after_def = matches!(
                op.kind,
                OpKind::Call { .. }
                    | OpKind::While
                    | OpKind::OptimizationBarrier
                    | OpKind::NamedComputation { .. }
                    | OpKind::StablehloReturn
                    | OpKind::SdyReturn
            );
            todo.push(Insertion {
                user: id,
                index: i,
                value: v,
                axes,
                out,
                after_def,
            });
        }
    }
    let mut taken: BTreeSet<String> = func.values.iter().map(|v| v.name.clone()).collect();
    let mut serial = 0usize;
    for ins in todo {
        let name = loop {
            let name = match serial {
                0 => "%all_reduce".to_string(),
                n => format!("%all_reduce_{n}"),
            };
            serial += 1;
            if taken.insert(name.clone()) {
                break name;
            }
        };
        let loc = func.op(ins.user).loc;
        let ty = func.value(ins.value).ty.clone();
        let id = func.add_op(Op {
            kind: OpKind::AllReduce {
                reduction_axes: ins.axes,
                out_sharding: ins.out.clone(),
            },
            operands: vec![ins.value],
            results: Vec::new(),
            regions: Vec::new(),
            rule: None,
            attrs: Vec::<RawAttr>::new(),
            loc,
        });
        let result = func.add_value(Value {
            name,
            ty,
            sharding: Some(ins.out),
            def: ValueDef::Result { op: id, index: 0 },
        });
        func.op_mut(id).results.push(result);
        func.op_mut(ins.user).operands[ins.index] = result;
        match ins.after_def {
            true => insert_after_def(func, &parent, ins.value, id),
            false => insert_before(func, &parent, ins.user, id),
        }
    }
}

/// Per op, the op whose region holds it and that region's index.
fn parents(func: &Func) -> BTreeMap<OpId, (OpId, usize)> {
    let mut parent = BTreeMap::new();
    for id in func.walk() {
        for (ri, r) in func.op(id).regions.iter().enumerate() {
            for &child in &r.ops {
                parent.insert(child, (id, ri));
            }
        }
    }
    parent
}

/// Whether `id` lies inside a manual computation's body (per-device code:
/// its collectives are the user's).
fn in_manual_body(func: &Func, parent: &BTreeMap<OpId, (OpId, usize)>, mut id: OpId) -> bool {
    while let Some(&(p, _)) = parent.get(&id) {
        if matches!(func.op(p).kind, OpKind::ManualComputation { .. }) {
            return true;
        }
        id = p;
    }
    false
}

/// The unreduced axes operand `i` of `id` wants, or None where no all-reduce
/// goes.
fn wanted(
    func: &Func,
    parent: &BTreeMap<OpId, (OpId, usize)>,
    callee_args: &BTreeMap<String, Vec<Option<TensorSharding>>>,
    id: OpId,
    i: usize,
) -> Option<Vec<AxisRef>> {
    let op = func.op(id);
    let unreduced_of =
        |s: Option<&TensorSharding>| s.map(|s| s.unreduced.clone()).unwrap_or_default();
    let result = |op: &Op, k: usize| {
        op.results
            .get(k)
            .map(|&r| unreduced_of(func.value(r).sharding.as_ref()))
    };
    match &op.kind {
        OpKind::Return => Some(unreduced_of(func.result_shardings.get(i)?.as_ref())),
        OpKind::StablehloReturn => {
            let &(p, region) = parent.get(&id)?;
            let p = func.op(p);
            match p.kind {
                OpKind::Case | OpKind::If => result(p, i),
                // The body's return feeds the carried values; the condition's is a predicate.
                OpKind::While if region == 1 => result(p, i),
                _ => None,
            }
        }
        OpKind::SdyReturn => {
            let &(p, _) = parent.get(&id)?;
            let p = func.op(p);
            match p.kind {
                OpKind::NamedComputation { .. } => result(p, i),
                _ => None,
            }
        }
        OpKind::Call { callee } => Some(unreduced_of(callee_args.get(callee)?.get(i)?.as_ref())),
        OpKind::While | OpKind::OptimizationBarrier => result(op, i),
        // A named computation's operands feed its block arguments.
        OpKind::NamedComputation { .. } => {
            let &arg = op.regions.first()?.args.get(i)?;
            Some(unreduced_of(func.value(arg).sharding.as_ref()))
        }
        OpKind::Case | OpKind::If => None,
        OpKind::ManualComputation { .. } => None,
        k if k.is_terminator() || k.is_collective() => None,
        _ => result(op, 0),
    }
}

/// Put new op `new` just before `user` in the block that holds `user`.
fn insert_before(func: &mut Func, parent: &BTreeMap<OpId, (OpId, usize)>, user: OpId, new: OpId) {
    let block = match parent.get(&user) {
        Some(&(p, ri)) => &mut func.op_mut(p).regions[ri].ops,
        None => &mut func.body,
    };
    let at = block.iter().position(|&o| o == user).unwrap_or(block.len());
    block.insert(at, new);
}

/// Put new op `new` just after the op defining `value` (at the start of the
/// block whose argument it is).
fn insert_after_def(
    func: &mut Func,
    parent: &BTreeMap<OpId, (OpId, usize)>,
    value: ValueId,
    new: OpId,
) {
    match func.value(value).def {
        ValueDef::Result { op, .. } => {
            let block = match parent.get(&op) {
                Some(&(p, ri)) => &mut func.op_mut(p).regions[ri].ops,
                None => &mut func.body,
            };
            let at = block.iter().position(|&o| o == op).map_or(0, |i| i + 1);
            block.insert(at, new);
        }
        ValueDef::BlockArg { op, region, .. } => func.op_mut(op).regions[region].ops.insert(0, new),
        ValueDef::FuncArg(_) => func.body.insert(0, new),
    }
}
