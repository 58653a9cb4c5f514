//! PlanDevices over a program: builds the [`Dataflow`] of a function's
//! top-level ops, takes constraints from argument and result attributes, solves
//! it, and inserts `shardsim.device_copy` ops where producer and consumer differ.
//!
//! Constraints come from `mhlo.memory_kind` (JAX's memory kinds: `"device"` →
//! scope `global`, `"pinned_host"`/`"unpinned_host"` → scope `host`) or, for a
//! full virtual device, `shardsim.virtual_device = "(cuda, ?, cuda, host)"`, on
//! function arguments (where the value is stored) and results. On a result,
//! a memory kind is storage (the value is computed where the body runs and
//! copied there before the return), while a virtual device follows the seed
//! document's rule: "if a function returns its result on a particular
//! (virtual) device then the function body is also executed on that device"
//! (the returned value is placed there, so its producer and what feeds it
//! run there; a constrained argument returned as is gets a copy). An op with
//! regions (reduce, named computation) is planned as one op over its operands
//! and results.
//!
//! [`plan_module`] plans across functions: callers before callees (calls
//! form a DAG: recursion is a verifier error), and a callee's parameters and
//! results are placed where its top-level call sites have their operands and
//! results, all call sites joined (two sites that disagree are a conflict
//! naming both). Calls nested in regions give no placement.

use crate::ir::{
    Func, Module, Op, OpId as IrOp, OpKind, RawAttr, Value, ValueDef, ValueId as IrValue,
};

use super::{plan_devices, Dataflow, Plan, PlanError, Port, VirtualDevice};

/// The virtual device an attribute list asks for, if any.
fn attr_device(attrs: &[RawAttr]) -> Result<Option<(VirtualDevice, String)>, PlanError> {
    for a in attrs {
        let value = a.value.trim().trim_matches('"');
        match a.name.as_str() {
            "shardsim.virtual_device" => {
                return Ok(Some((value.parse()?, format!("{} = {value}", a.name))))
            }
            "mhlo.memory_kind" => {
                let scope = match value {
                    "device" => "global",
                    "pinned_host" | "unpinned_host" => "host",
                    other => return Err(PlanError::BadText {
                        text: other.to_string(),
                        reason:
                            "unknown memory kind (expected device, pinned_host or unpinned_host)"
                                .into(),
                    }),
                };
                return Ok(Some((
                    VirtualDevice::scope(scope),
                    format!("{} = \"{value}\"", a.name),
                )));
            }
            _ => {}
        }
    }
    Ok(None)
}

/// True for an attribute list asking for a full virtual device (TVM's result rule).
fn is_virtual_device(attrs: &[RawAttr]) -> bool {
    attrs.iter().any(|a| a.name == "shardsim.virtual_device")
}

/// Placements a function's callers impose: per parameter and per result,
/// each device with the call site it came from.
#[derive(Debug, Clone, Default)]
pub struct CallHints {
    pub params: Vec<Vec<(VirtualDevice, String)>>,
    pub results: Vec<Vec<(VirtualDevice, String)>>,
}

/// An inserted copy: (copied value name, from, to).
pub type CopyNote = (String, VirtualDevice, VirtualDevice);

/// A planned function: the plan over its dataflow and the function with copies inserted.
#[derive(Debug, Clone)]
pub struct PlannedFunc {
    pub plan: Plan,
    pub func: Func,
    /// Every inserted copy, in plan order.
    pub copies: Vec<CopyNote>,
    /// Where each value of the original function lives (arguments and
    /// top-level results; `None` inside regions), by IR value index.
    pub value_devices: Vec<Option<VirtualDevice>>,
}

/// Plan `func` with `default` filling whatever no constraint fixes.
pub fn plan_func(func: &Func, default: &VirtualDevice) -> Result<PlannedFunc, PlanError> {
    plan_func_with(func, default, &CallHints::default())
}

/// Plan `func` with the placements its callers impose.
pub fn plan_func_with(
    func: &Func,
    default: &VirtualDevice,
    hints: &CallHints,
) -> Result<PlannedFunc, PlanError> {
    let mut df = Dataflow::new();
    // One dataflow value per IR value that is a function argument or a top-level result.
    let mut dv: Vec<Option<super::ValueId>> = vec![None; func.values.len()];
    for (&a, attrs) in func.args.iter().zip(
        func.arg_attrs
            .iter()
            .map(Some)
            .chain(std::iter::repeat(None)),
    ) {
        let v = df.value(&func.value(a).name);
        dv[a.0 as usize] = Some(v);
        if let Some((device, source)) = attr_device(attrs.map(Vec::as_slice).unwrap_or(&[]))? {
            df.constrain(
                v,
                device,
                &format!("argument {} {source}", func.value(a).name),
            )?;
        }
    }
    for (&a, placed) in func.args.iter().zip(&hints.params) {
        let v = dv[a.0 as usize].expect("arguments are declared");
        for (device, source) in placed {
            df.place(v, device.clone(), source)?;
        }
    }
    let mut op_of: Vec<(super::OpId, IrOp)> = Vec::new();
    for &id in &func.body {
        let op = func.op(id);
        for &r in &op.results {
            dv[r.0 as usize] = Some(df.value(&func.value(r).name));
        }
        let operands: Vec<super::ValueId> = op
            .operands
            .iter()
            .map(|&v| {
                dv[v.0 as usize].ok_or_else(|| {
                    PlanError::BadDataflow(format!(
                        "{} used before it is defined",
                        func.value(v).name
                    ))
                })
            })
            .collect::<Result<_, _>>()?;
        let results: Vec<super::ValueId> = op
            .results
            .iter()
            .map(|&r| dv[r.0 as usize].expect("just declared"))
            .collect();
        let label = match op.results.first() {
            Some(&r) => format!("{} = {}", func.value(r).name, op.kind.name()),
            None => op.kind.name().to_string(),
        };
        let o = df.op(&label, &operands, &results)?;
        if op.kind.is_terminator() {
            for (i, attrs) in func.result_attrs.iter().enumerate().take(op.operands.len()) {
                if let Some((device, source)) = attr_device(attrs)? {
                    let source = format!("result {i} {source}");
                    // The result rule: the body producing it runs there too.
                    if is_virtual_device(attrs) && !df.is_fixed(operands[i]) {
                        df.place(operands[i], device.clone(), &source)?;
                    }
                    df.pin_operand(o, i as u32, device, &source)?;
                }
            }
            for (i, placed) in hints.results.iter().enumerate().take(op.operands.len()) {
                for (device, source) in placed {
                    if !df.is_fixed(operands[i]) {
                        df.place(operands[i], device.clone(), source)?;
                    }
                    df.pin_operand(o, i as u32, device.clone(), source)?;
                }
            }
        }
        op_of.push((o, id));
    }
    let plan = plan_devices(&df, default)?;
    let value_devices = dv
        .iter()
        .map(|d| d.map(|d| plan.value_devices[d.0 as usize].clone()))
        .collect();
    let (func, copies) = insert_copies(func, &plan, &op_of)?;
    Ok(PlannedFunc {
        plan,
        func,
        copies,
        value_devices,
    })
}

/// Plan every function of `module` (results in the module's order), callers
/// first, each callee placed where its call sites have their values.
pub fn plan_module(
    module: &Module,
    default: &VirtualDevice,
) -> Result<Vec<PlannedFunc>, PlanError> {
    let n = module.funcs.len();
    let index = |name: &str| module.funcs.iter().position(|f| f.name == name);
    // Call edges caller -> callee (any depth) for the order; top-level calls for placements.
    let mut callers_left = vec![0usize; n];
    let mut edges: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, f) in module.funcs.iter().enumerate() {
        for op in &f.ops {
            if let OpKind::Call { callee } = &op.kind {
                let j = index(callee).ok_or_else(|| {
                    PlanError::BadDataflow(format!("@{} calls unknown @{callee}", f.name))
                })?;
                edges[i].push(j);
                callers_left[j] += 1;
            }
        }
    }
    let mut ready: std::collections::VecDeque<usize> =
        (0..n).filter(|&i| callers_left[i] == 0).collect();
    let mut hints: Vec<CallHints> = vec![CallHints::default(); n];
    let mut planned: Vec<Option<PlannedFunc>> = vec![None; n];
    while let Some(i) = ready.pop_front() {
        let f = &module.funcs[i];
        let p = plan_func_with(f, default, &hints[i]).map_err(|e| in_func(&f.name, e))?;
        for &id in &f.body {
            let op = f.op(id);
            let OpKind::Call { callee } = &op.kind else {
                continue;
            };
            let j = index(callee).expect("checked above");
            let h = &mut hints[j];
            let site = |what: &str, k: usize| format!("@{} call of @{callee} {what} {k}", f.name);
            let device = |v: &IrValue| p.value_devices[v.0 as usize].clone();
            h.params
                .resize(op.operands.len().max(h.params.len()), Vec::new());
            h.results
                .resize(op.results.len().max(h.results.len()), Vec::new());
            for (k, v) in op.operands.iter().enumerate() {
                if let Some(d) = device(v) {
                    h.params[k].push((d, site("operand", k)));
                }
            }
            for (k, v) in op.results.iter().enumerate() {
                if let Some(d) = device(v) {
                    h.results[k].push((d, site("result", k)));
                }
            }
        }
        for &j in &edges[i] {
            callers_left[j] -= 1;
            if callers_left[j] == 0 {
                ready.push_back(j);
            }
        }
        planned[i] = Some(p);
    }
    planned
        .into_iter()
        .zip(&module.funcs)
        .map(|(p, f)| {
            p.ok_or_else(|| PlanError::BadDataflow(format!("@{} is part of a call cycle", f.name)))
        })
        .collect()
}

/// The error with the function it happened in.
fn in_func(name: &str, e: PlanError) -> PlanError {
    match e {
        PlanError::BadDataflow(m) => PlanError::BadDataflow(format!("@{name}: {m}")),
        PlanError::Conflict {
            place,
            first,
            first_source,
            second,
            second_source,
        } => PlanError::Conflict {
            place: format!("@{name} {place}"),
            first,
            first_source,
            second,
            second_source,
        },
        other => other,
    }
}

/// A `shardsim.device_copy` of `input` producing a new value named after it.
fn copy_op(
    func: &mut Func,
    input: IrValue,
    from: &VirtualDevice,
    to: &VirtualDevice,
    id: IrOp,
    loc: crate::ir::Loc,
) -> IrValue {
    let v = func.value(input);
    let value = Value {
        name: copy_name(&v.name, to),
        ty: v.ty.clone(),
        sharding: v.sharding.clone(),
        def: ValueDef::Result { op: id, index: 0 },
    };
    let out = func.add_value(value);
    func.add_op(Op {
        kind: OpKind::DeviceCopy {
            src: from.to_string(),
            dst: to.to_string(),
        },
        operands: vec![input],
        results: vec![out],
        regions: Vec::new(),
        rule: None,
        attrs: Vec::new(),
        loc,
    });
    out
}

/// The name of a copy of `name` living on `device`: `%m` → `%m_host` (`%4#1` → `%4_1_host`).
fn copy_name(name: &str, device: &VirtualDevice) -> String {
    format!(
        "{}_{}",
        name.replace('#', "_"),
        device.memory_scope().unwrap_or("copy")
    )
}

fn insert_copies(
    original: &Func,
    plan: &Plan,
    op_of: &[(super::OpId, IrOp)],
) -> Result<(Func, Vec<CopyNote>), PlanError> {
    let mut func = original.clone();
    let ir_op = |o: super::OpId| op_of.iter().find(|(d, _)| *d == o).map(|(_, i)| *i);
    // Copies to place before an op (operand copies) or after it (result copies), by IR op.
    let mut before: Vec<(IrOp, IrOp)> = Vec::new();
    let mut after: Vec<(IrOp, IrOp)> = Vec::new();
    let mut done = Vec::new();
    for c in &plan.copies {
        let Some(value) = original
            .values
            .iter()
            .position(|v| v.name == c.value_name)
            .map(|i| IrValue(i as u32))
        else {
            return Err(PlanError::BadDataflow(format!("no value {}", c.value_name)));
        };
        let first =
            c.at.first()
                .and_then(|(o, _)| ir_op(*o))
                .ok_or_else(|| PlanError::BadDataflow("a copy with no place".into()))?;
        let id = IrOp(func.ops.len() as u32);
        match c.at[0].1 {
            Port::Operand(_) => {
                let copied = copy_op(&mut func, value, &c.from, &c.to, id, original.op(first).loc);
                for (o, port) in &c.at {
                    if let (Some(user), Port::Operand(k)) = (ir_op(*o), port) {
                        func.op_mut(user).operands[*k as usize] = copied;
                    }
                }
                before.push((first, id));
            }
            Port::Result(k) => {
                // The op writes a temporary where it runs; the copy produces the stored value.
                let temp = func.add_value(Value {
                    name: copy_name(&original.value(value).name, &c.from),
                    ty: original.value(value).ty.clone(),
                    sharding: original.value(value).sharding.clone(),
                    def: ValueDef::Result {
                        op: first,
                        index: k as usize,
                    },
                });
                func.op_mut(first).results[k as usize] = temp;
                let id = IrOp(func.ops.len() as u32);
                func.add_op(Op {
                    kind: OpKind::DeviceCopy {
                        src: c.from.to_string(),
                        dst: c.to.to_string(),
                    },
                    operands: vec![temp],
                    results: vec![value],
                    regions: Vec::new(),
                    rule: None,
                    attrs: Vec::new(),
                    loc: original.op(first).loc,
                });
                func.value_mut(value).def = ValueDef::Result { op: id, index: 0 };
                after.push((first, id));
            }
        }
        done.push((c.value_name.clone(), c.from.clone(), c.to.clone()));
    }
    let mut body = Vec::with_capacity(func.body.len() + before.len() + after.len());
    for &op in &original.body {
        body.extend(before.iter().filter(|(at, _)| *at == op).map(|(_, c)| *c));
        body.push(op);
        body.extend(after.iter().filter(|(at, _)| *at == op).map(|(_, c)| *c));
    }
    func.body = body;
    Ok((func, done))
}
