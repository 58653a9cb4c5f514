//! One callee function per distinct sharding, as Shardy's import flattens
//! the call graph (`sdy-flatten-call-graph`: every call but a function's
//! first gets its own recursive clone, named `@f_N` with one counter for the
//! module) and its export unflattens it (`sdy-unflatten-call-graph`: clones
//! of one function with the same argument and result shardings become the
//! first of them a call reaches, in module order; the others go).
//!
//! Propagation already gives every call its own copy of the callee
//! (`calls.rs`); this replays the flattening on the module's call graph to
//! name each call's clone, then keeps one function per (original name,
//! argument shardings, result shardings).

use std::collections::{BTreeMap, BTreeSet};

use super::calls::CallInstance;
use crate::ir::{Func, Module, OpId, OpKind, ValueId};
use crate::sharding::TensorSharding;

/// A function of the flattened module.
struct Flat {
    /// Its name (a clone's: the cloned function's name, `_N` appended).
    name: String,
    /// The module function whose body it has.
    base: usize,
    /// Per call op: the flat function it calls.
    calls: BTreeMap<OpId, usize>,
}

/// The call ops of a function, in program order, with their callees.
fn call_ops(f: &Func) -> Vec<(OpId, &str)> {
    f.walk()
        .into_iter()
        .filter_map(|id| match &f.op(id).kind {
            OpKind::Call { callee } => Some((id, callee.as_str())),
            _ => None,
        })
        .collect()
}

/// The flattened module: the originals (indices as in `module.funcs`), then
/// the clones in the order Shardy inserts them.
struct Flattening {
    funcs: Vec<Flat>,
    names: BTreeSet<String>,
    counter: usize,
}

impl Flattening {
    /// The module's call graph, flattened when `flatten` (without: Shardy's
    /// `dedup-functions-fully`, which keeps one function per callee).
    fn new(module: &Module, flatten: bool) -> Flattening {
        let index: BTreeMap<&str, usize> = (module.funcs.iter().enumerate())
            .map(|(i, f)| (f.name.as_str(), i))
            .collect();
        let funcs = (module.funcs.iter().enumerate())
            .map(|(i, f)| Flat {
                name: f.name.clone(),
                base: i,
                calls: call_ops(f)
                    .into_iter()
                    .filter_map(|(op, callee)| Some((op, *index.get(callee)?)))
                    .collect(),
            })
            .collect();
        let names = module.funcs.iter().map(|f| f.name.clone()).collect();
        let mut flat = Flattening {
            funcs,
            names,
            counter: 0,
        };
        // Callees before callers (the call graph's post-order from every
        // function in module order), then each call in program order: a
        // function's first call keeps it, every later call gets a clone.
        let mut seen = BTreeSet::new();
        let order = match flatten {
            true => post_order(module, &index),
            false => Vec::new(),
        };
        for f in order {
            for (op, _) in call_ops(&module.funcs[f]) {
                let Some(&callee) = flat.funcs[f].calls.get(&op) else {
                    continue;
                };
                if seen.insert(callee) {
                    continue;
                }
                let clone = flat.clone_recursively(module, callee, 0);
                flat.funcs[f].calls.insert(op, clone);
            }
        }
        flat
    }

    /// Clone flat function `f` and, inside the clone, every function it
    /// calls (inner clones are named first, as Shardy inserts them first).
    fn clone_recursively(&mut self, module: &Module, f: usize, depth: usize) -> usize {
        let mut calls = BTreeMap::new();
        // Propagation refused deeper nesting; recursion stops here too.
        if depth < 64 {
            for (op, _) in call_ops(&module.funcs[self.funcs[f].base]) {
                if let Some(&callee) = self.funcs[f].calls.get(&op) {
                    calls.insert(op, self.clone_recursively(module, callee, depth + 1));
                }
            }
        }
        let name = loop {
            let candidate = format!("{}_{}", self.funcs[f].name, self.counter);
            self.counter += 1;
            if self.names.insert(candidate.clone()) {
                break candidate;
            }
        };
        self.funcs.push(Flat {
            name,
            base: self.funcs[f].base,
            calls,
        });
        self.funcs.len() - 1
    }
}

/// Functions in the call graph's post-order, walked from every function in
/// module order (an iterative walk: call chains may be deep).
fn post_order(module: &Module, index: &BTreeMap<&str, usize>) -> Vec<usize> {
    let callees: Vec<Vec<usize>> = (module.funcs.iter())
        .map(|f| {
            let mut out: Vec<usize> = Vec::new();
            for (_, c) in call_ops(f) {
                if let Some(&c) = index.get(c) {
                    if !out.contains(&c) {
                        out.push(c);
                    }
                }
            }
            out
        })
        .collect();
    let mut visited = vec![false; module.funcs.len()];
    let mut order = Vec::new();
    for root in 0..module.funcs.len() {
        if visited[root] {
            continue;
        }
        visited[root] = true;
        let mut stack = vec![(root, 0usize)];
        while let Some((f, next)) = stack.last_mut() {
            let f = *f;
            match callees[f].get(*next) {
                Some(&c) => {
                    *next += 1;
                    if !visited[c] {
                        visited[c] = true;
                        stack.push((c, 0));
                    }
                }
                None => {
                    order.push(f);
                    stack.pop();
                }
            }
        }
    }
    order
}

/// What identifies a function at unflattening: its original name and its
/// argument and result shardings.
type Key = (
    usize,
    Vec<Option<TensorSharding>>,
    Vec<Option<TensorSharding>>,
);

fn key(module: &Module, base: usize, shardings: &[Option<TensorSharding>]) -> Key {
    let f = &module.funcs[base];
    let of = |v: &ValueId| shardings.get(v.0 as usize).cloned().flatten();
    let returned: Vec<ValueId> = f
        .body
        .last()
        .map(|&r| f.op(r).operands.clone())
        .unwrap_or_default();
    (
        base,
        f.args.iter().map(of).collect(),
        returned.iter().map(of).collect(),
    )
}

/// Give each call a callee with its own shardings: `calls[i]` are the calls
/// under root function `i` (empty for functions that are called) with the
/// shardings propagation found. Callees called with different shardings
/// become clones; functions no call reaches any more are removed. With
/// `dedup_fully` (Shardy's `dedup-functions-fully`, whose calls share their
/// callee's shardings) nothing is cloned.
pub(super) fn unflatten(
    module: &mut Module,
    calls: &BTreeMap<usize, Vec<CallInstance>>,
    dedup_fully: bool,
) {
    if calls.values().all(Vec::is_empty) {
        return;
    }
    let flat = Flattening::new(module, !dedup_fully);
    // Each call's flat callee and the shardings it got there.
    let mut got: BTreeMap<usize, &[Option<TensorSharding>]> = BTreeMap::new();
    for (&root, instances) in calls {
        let mut at: Vec<Option<usize>> = Vec::with_capacity(instances.len());
        for inst in instances {
            let holder = match inst.parent {
                None => Some(root),
                Some(p) => at.get(p).copied().flatten(),
            };
            let target = holder.and_then(|h| flat.funcs[h].calls.get(&inst.op).copied());
            if let Some(t) = target {
                got.entry(t).or_insert(&inst.shardings);
            }
            at.push(target);
        }
    }
    let keys: BTreeMap<usize, Key> = (got.iter())
        .map(|(&f, s)| (f, key(module, flat.funcs[f].base, s)))
        .collect();
    // The first call (module order, then the clones) reaching each key.
    // A hash map only for lookups (never iterated: order comes from the walk).
    let mut canonical: std::collections::HashMap<&Key, usize> = std::collections::HashMap::new();
    for f in &flat.funcs {
        for (op, _) in call_ops(&module.funcs[f.base]) {
            let Some(k) = f.calls.get(&op).and_then(|t| keys.get(t)) else {
                continue;
            };
            if !canonical.contains_key(k) {
                canonical.insert(k, f.calls[&op]);
            }
        }
    }
    let target_of = |t: usize| -> usize {
        keys.get(&t)
            .and_then(|k| canonical.get(k))
            .map_or(t, |c| *c)
    };
    // The functions to write: the roots and the canonical callees.
    let kept: BTreeSet<usize> = keys
        .values()
        .filter_map(|k| canonical.get(k))
        .copied()
        .collect();
    let mut out: Vec<Option<Func>> = module.funcs.iter().cloned().map(Some).collect();
    for (i, f) in flat.funcs.iter().enumerate() {
        let is_callee = got.contains_key(&i);
        if is_callee && !kept.contains(&i) {
            if i < module.funcs.len() {
                out[i] = None;
            }
            continue;
        }
        if i >= module.funcs.len() && !kept.contains(&i) {
            continue;
        }
        let mut func = module.funcs[f.base].clone();
        func.name = f.name.clone();
        if let Some(shardings) = got.get(&i) {
            // A token keeps the sharding written on it (propagation gives
            // tokens none).
            for (v, s) in func.values.iter_mut().zip(shardings.iter()) {
                if !v.ty.is_token() {
                    v.sharding = s.clone();
                }
            }
            let returned: Vec<ValueId> = func
                .body
                .last()
                .map(|&r| func.op(r).operands.clone())
                .unwrap_or_default();
            let written = std::mem::take(&mut func.result_shardings);
            func.result_shardings = (returned.iter().enumerate())
                .map(|(r, &v)| match func.value(v).ty.is_token() {
                    true => written.get(r).cloned().flatten(),
                    false => func.value(v).sharding.clone(),
                })
                .collect();
        }
        for (op, t) in &f.calls {
            if let OpKind::Call { callee } = &mut func.op_mut(*op).kind {
                *callee = flat.funcs[target_of(*t)].name.clone();
            }
        }
        if i < out.len() {
            out[i] = Some(func);
        } else {
            out.push(Some(func));
        }
    }
    module.funcs = out.into_iter().flatten().collect();
}
