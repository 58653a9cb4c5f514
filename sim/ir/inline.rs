//! Call inlining, as XLA does before Shardy: every `func.call` is replaced by
//! a copy of its callee's body (recursively), the call's results by the
//! values the callee returns. JAX's exported programs (`lowered.mlir`) call
//! private functions; after inlining they are the flat programs Shardy and
//! the partitioner see (`before.mlir`). Functions are rebuilt from scratch, so
//! the arenas hold only live values and ops; inlined values are renamed
//! (`%3` of the k-th inlined call becomes `%3_in<k>`) so names stay unique.

use std::collections::BTreeMap;

use super::model::{Func, Module, Op, OpId, Region, Value, ValueDef, ValueId, Visibility};
use super::ops::OpKind;
use super::IrError;

/// How deep calls may nest (recursion is refused past this).
const MAX_DEPTH: usize = 32;

/// The module with every call inlined; private functions that were only
/// called are dropped.
pub fn inline_calls(module: &Module) -> Result<Module, IrError> {
    let mut out = module.clone();
    let mut funcs = Vec::with_capacity(module.funcs.len());
    for f in &module.funcs {
        if f.visibility == Visibility::Private && is_called(module, &f.name) {
            continue;
        }
        funcs.push(Inliner::new(module).func(f)?);
    }
    out.funcs = funcs;
    Ok(out)
}

/// True when some op of `module` calls `name`.
fn is_called(module: &Module, name: &str) -> bool {
    module.funcs.iter().any(|f| {
        f.ops
            .iter()
            .any(|o| matches!(&o.kind, OpKind::Call { callee } if callee == name))
    })
}

/// True when the module has any call.
pub fn has_calls(module: &Module) -> bool {
    module
        .funcs
        .iter()
        .any(|f| f.ops.iter().any(|o| matches!(o.kind, OpKind::Call { .. })))
}

struct Inliner<'m> {
    module: &'m Module,
    /// Inlined calls so far (the suffix of renamed values).
    count: usize,
}

/// Source value -> new value, for one function body being copied.
type ValueMap = BTreeMap<ValueId, ValueId>;

fn err(op: &Op, message: String) -> IrError {
    IrError::Verify {
        loc: op.loc,
        op: op.kind.name().to_string(),
        message,
    }
}

/// `%3` -> `%3_in2`, `%4#1` -> `%4_in2#1` (the result index stays last).
fn rename(name: &str, k: usize) -> String {
    match name.split_once('#') {
        Some((base, index)) => format!("{base}_in{k}#{index}"),
        None => format!("{name}_in{k}"),
    }
}

impl<'m> Inliner<'m> {
    fn new(module: &'m Module) -> Self {
        Inliner { module, count: 0 }
    }

    /// `f` rebuilt with its calls inlined.
    fn func(&mut self, f: &Func) -> Result<Func, IrError> {
        let mut out = Func {
            args: Vec::new(),
            body: Vec::new(),
            values: Vec::new(),
            ops: Vec::new(),
            ..f.clone()
        };
        let mut map = ValueMap::new();
        for (i, &a) in f.args.iter().enumerate() {
            let v = f.value(a);
            let id = out.add_value(Value {
                def: ValueDef::FuncArg(i),
                ..v.clone()
            });
            out.args.push(id);
            map.insert(a, id);
        }
        out.body = self.ops(f, &f.body, &mut map, &mut out, None, 0)?;
        Ok(out)
    }

    /// Copy ops `ids` of `src` into `dst`, inlining calls; `suffix` renames
    /// the values of an inlined body. Returns the new op ids in order.
    fn ops(
        &mut self,
        src: &Func,
        ids: &[OpId],
        map: &mut ValueMap,
        dst: &mut Func,
        suffix: Option<usize>,
        depth: usize,
    ) -> Result<Vec<OpId>, IrError> {
        let mut out = Vec::with_capacity(ids.len());
        for &id in ids {
            let op = src.op(id);
            let operands = op
                .operands
                .iter()
                .map(|v| {
                    map.get(v).copied().ok_or_else(|| {
                        err(
                            op,
                            format!("uses {} before it is defined", src.value(*v).name),
                        )
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            if let OpKind::Call { callee } = &op.kind {
                out.extend(self.inline(op, callee, &operands, map, dst, depth)?);
                continue;
            }
            let new = dst.add_op(Op {
                operands,
                results: Vec::new(),
                regions: Vec::new(),
                ..op.clone()
            });
            let mut results = Vec::with_capacity(op.results.len());
            for (index, &r) in op.results.iter().enumerate() {
                let v = self.copy_value(src.value(r), ValueDef::Result { op: new, index }, suffix);
                let nv = dst.add_value(v);
                map.insert(r, nv);
                results.push(nv);
            }
            let mut regions = Vec::with_capacity(op.regions.len());
            for (ri, region) in op.regions.iter().enumerate() {
                let mut args = Vec::with_capacity(region.args.len());
                for (index, &a) in region.args.iter().enumerate() {
                    let def = ValueDef::BlockArg {
                        op: new,
                        region: ri,
                        index,
                    };
                    let nv = dst.add_value(self.copy_value(src.value(a), def, suffix));
                    map.insert(a, nv);
                    args.push(nv);
                }
                let ops = self.ops(src, &region.ops, map, dst, suffix, depth)?;
                regions.push(Region { args, ops });
            }
            let o = dst.op_mut(new);
            o.results = results;
            o.regions = regions;
            out.push(new);
        }
        Ok(out)
    }

    fn copy_value(&self, v: &Value, def: ValueDef, suffix: Option<usize>) -> Value {
        Value {
            name: suffix.map_or_else(|| v.name.clone(), |k| rename(&v.name, k)),
            def,
            ..v.clone()
        }
    }

    /// The body of `callee` with its arguments bound to `operands`; the call's
    /// results are mapped to what the callee returns.
    fn inline(
        &mut self,
        call: &Op,
        callee: &str,
        operands: &[ValueId],
        map: &mut ValueMap,
        dst: &mut Func,
        depth: usize,
    ) -> Result<Vec<OpId>, IrError> {
        if depth >= MAX_DEPTH {
            return Err(err(
                call,
                format!("calls nest deeper than {MAX_DEPTH} (recursion through @{callee}?)"),
            ));
        }
        let module = self.module;
        let f = module
            .func(callee)
            .ok_or_else(|| err(call, format!("calls unknown function @{callee}")))?;
        if f.args.len() != operands.len() {
            return Err(err(
                call,
                format!(
                    "passes {} operands to @{callee}, which takes {}",
                    operands.len(),
                    f.args.len()
                ),
            ));
        }
        self.count += 1;
        let k = self.count;
        let mut inner: ValueMap = f
            .args
            .iter()
            .copied()
            .zip(operands.iter().copied())
            .collect();
        let (ret, body) = match f.body.split_last() {
            Some((&last, rest)) if matches!(f.op(last).kind, OpKind::Return) => (f.op(last), rest),
            _ => return Err(err(call, format!("@{callee} does not end with a return"))),
        };
        let ops = self.ops(f, body, &mut inner, dst, Some(k), depth + 1)?;
        if ret.operands.len() != call.results.len() {
            return Err(err(
                call,
                format!(
                    "@{callee} returns {} values, the call has {} results",
                    ret.operands.len(),
                    call.results.len()
                ),
            ));
        }
        for (&r, v) in call.results.iter().zip(&ret.operands) {
            let nv = *inner.get(v).ok_or_else(|| {
                err(
                    ret,
                    format!("returns {}, which is not defined", f.value(*v).name),
                )
            })?;
            map.insert(r, nv);
        }
        Ok(ops)
    }
}
