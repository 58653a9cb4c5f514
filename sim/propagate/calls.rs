//! Propagation through `func.call`: for the time of propagation, each call gets
//! a private copy of its callee's body as a region (values and ops appended to
//! the caller's arenas), which the driver treats like a named computation —
//! as if inlined. Afterwards the copies are removed and each call's shardings
//! of its callee's values are handed back (`clones.rs` turns them into one
//! function per distinct sharding, as Shardy's flatten/unflatten does).

use std::collections::BTreeMap;

use crate::ir::{Func, Module, Op, OpId, OpKind, Region, Value, ValueDef, ValueId};
use crate::sharding::TensorSharding;

/// How deep calls may nest (a recursive program is refused past this).
const MAX_DEPTH: usize = 32;

/// What was added to a caller, to undo it.
pub(super) struct Inlined {
    /// Arena lengths before the copies were added.
    values_len: usize,
    ops_len: usize,
    /// Per call op: the callee and the copy of each callee value (callee value index -> caller value).
    calls: Vec<(OpId, String, Vec<Option<ValueId>>)>,
    /// Per call op: the call whose copied body holds it (None: the caller's
    /// own) and the call op's id in the function that holds it.
    origins: Vec<(Option<usize>, OpId)>,
}

/// One call in the tree of calls under a function, after propagation.
pub(super) struct CallInstance {
    /// The call (an index into the same list) whose callee holds this call;
    /// None: the root function itself.
    pub parent: Option<usize>,
    /// The call op's id in the function that holds it.
    pub op: OpId,
    /// The sharding each callee value got in this call.
    pub shardings: Vec<Option<TensorSharding>>,
}

/// Give every call in `func` (recursively) a copy of its callee's body.
pub(super) fn add_call_bodies(module: &Module, func: &mut Func) -> Result<Inlined, String> {
    let mut inlined = Inlined {
        values_len: func.values.len(),
        ops_len: func.ops.len(),
        calls: Vec::new(),
        origins: Vec::new(),
    };
    let mut pending: Vec<(OpId, usize, Option<usize>, OpId)> = func
        .walk()
        .into_iter()
        .map(|id| (id, 0, None, id))
        .collect();
    while let Some((id, depth, parent, origin)) = pending.pop() {
        let OpKind::Call { callee } = &func.op(id).kind else {
            continue;
        };
        let callee = callee.clone();
        if depth >= MAX_DEPTH {
            return Err(format!(
                "calls nest deeper than {MAX_DEPTH} (recursion through @{callee}?)"
            ));
        }
        let Some(f) = module.func(&callee) else {
            return Err(format!("call of unknown function @{callee}"));
        };
        let (region, map, new_ops) = copy_body(f, func, id);
        func.op_mut(id).regions.push(region);
        let me = inlined.calls.len();
        pending.extend(
            (new_ops.into_iter().enumerate())
                .map(|(i, o)| (o, depth + 1, Some(me), OpId(i as u32))),
        );
        inlined.calls.push((id, callee, map));
        inlined.origins.push((parent, origin));
    }
    Ok(inlined)
}

/// Copy `callee`'s arguments and body into `func` as a region of `call`.
fn copy_body(
    callee: &Func,
    func: &mut Func,
    call: OpId,
) -> (Region, Vec<Option<ValueId>>, Vec<OpId>) {
    let mut map: Vec<Option<ValueId>> = vec![None; callee.values.len()];
    let mut op_map: BTreeMap<OpId, OpId> = BTreeMap::new();
    // Values first (their defining ops are fixed up below).
    for (i, v) in callee.values.iter().enumerate() {
        let new = func.add_value(Value {
            name: format!("{}@{}", v.name, callee.name),
            ty: v.ty.clone(),
            sharding: v.sharding.clone(),
            def: v.def,
        });
        map[i] = Some(new);
    }
    let mut new_ops = Vec::new();
    for (i, op) in callee.ops.iter().enumerate() {
        let id = func.add_op(Op {
            kind: op.kind.clone(),
            operands: op
                .operands
                .iter()
                .map(|v| map[v.0 as usize].expect("copied"))
                .collect(),
            results: op
                .results
                .iter()
                .map(|v| map[v.0 as usize].expect("copied"))
                .collect(),
            regions: Vec::new(),
            rule: op.rule.clone(),
            attrs: op.attrs.clone(),
            loc: op.loc,
        });
        op_map.insert(OpId(i as u32), id);
        new_ops.push(id);
    }
    let remap_region = |r: &Region, op_map: &BTreeMap<OpId, OpId>| Region {
        args: r
            .args
            .iter()
            .map(|v| map[v.0 as usize].expect("copied"))
            .collect(),
        ops: r.ops.iter().map(|o| op_map[o]).collect(),
    };
    for (i, op) in callee.ops.iter().enumerate() {
        let regions: Vec<Region> = op
            .regions
            .iter()
            .map(|r| remap_region(r, &op_map))
            .collect();
        func.op_mut(op_map[&OpId(i as u32)]).regions = regions;
    }
    for (i, v) in callee.values.iter().enumerate() {
        let def = match v.def {
            ValueDef::FuncArg(index) => ValueDef::BlockArg {
                op: call,
                region: 0,
                index,
            },
            ValueDef::BlockArg { op, region, index } => ValueDef::BlockArg {
                op: op_map[&op],
                region,
                index,
            },
            ValueDef::Result { op, index } => ValueDef::Result {
                op: op_map[&op],
                index,
            },
        };
        func.value_mut(map[i].expect("copied")).def = def;
    }
    let region = Region {
        args: callee
            .args
            .iter()
            .map(|v| map[v.0 as usize].expect("copied"))
            .collect(),
        ops: callee.body.iter().map(|o| op_map[o]).collect(),
    };
    (region, map, new_ops)
}

impl Inlined {
    /// For each callee called more than once, for each of its values, the
    /// copies of that value in every call (Shardy's
    /// `dedup-functions-fully=true`: one function for all call sites, so the
    /// copies share one sharding).
    pub(super) fn copies_of_shared_callees(&self) -> Vec<Vec<ValueId>> {
        let mut by_callee: BTreeMap<&str, Vec<&Vec<Option<ValueId>>>> = BTreeMap::new();
        for (_, callee, map) in &self.calls {
            by_callee.entry(callee).or_default().push(map);
        }
        let mut groups = Vec::new();
        for maps in by_callee.values().filter(|m| m.len() > 1) {
            for i in 0..maps[0].len() {
                let copies: Vec<ValueId> = maps.iter().filter_map(|m| m[i]).collect();
                groups.push(copies);
            }
        }
        groups
    }
}

/// Remove the copies from the caller; return every call (nested ones
/// included) with the shardings its callee's values got there.
pub(super) fn remove_call_bodies(func: &mut Func, inlined: Inlined) -> Vec<CallInstance> {
    let mut found = Vec::with_capacity(inlined.calls.len());
    for ((call, _, map), (parent, op)) in inlined.calls.into_iter().zip(inlined.origins) {
        let shardings = map
            .iter()
            .map(|v| v.and_then(|v| func.value(v).sharding.clone()))
            .collect();
        found.push(CallInstance {
            parent,
            op,
            shardings,
        });
        if (call.0 as usize) < inlined.ops_len {
            func.op_mut(call).regions.clear();
        }
    }
    func.values.truncate(inlined.values_len);
    func.ops.truncate(inlined.ops_len);
    found
}
