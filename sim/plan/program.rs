//! PlanDevices over a program: builds the [`Dataflow`] of a function's
//! top-level ops, takes constraints from argument and result attributes, solves
//! it, and inserts `shardsim.device_copy` ops where producer and consumer differ.
//!
//! Constraints come from `mhlo.memory_kind` (JAX's memory kinds: `"device"` →
//! scope `global`, `"pinned_host"`/`"unpinned_host"` → scope `host`) or, for a
//! full virtual device, `shardsim.virtual_device = "(cuda, ?, cuda, host)"`, on
//! function arguments (where the value is stored) and results (where the
//! returned value must be). An op with regions (reduce, named computation) is
//! planned as one op over its operands and results.

use crate::ir::{Func, Op, OpId as IrOp, OpKind, RawAttr, Value, ValueDef, ValueId as IrValue};

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

/// An inserted copy: (copied value name, from, to).
pub type CopyNote = (String, VirtualDevice, VirtualDevice);

/// A planned function: the plan over its dataflow and the function with copies inserted.
#[derive(Debug, Clone)]
pub struct PlannedFunc {
    pub plan: Plan,
    pub func: Func,
    /// Every inserted copy, in plan order.
    pub copies: Vec<CopyNote>,
}

/// Plan `func` with `default` filling whatever no constraint fixes.
pub fn plan_func(func: &Func, default: &VirtualDevice) -> Result<PlannedFunc, PlanError> {
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
                    df.pin_operand(o, i as u32, device, &format!("result {i} {source}"))?;
                }
            }
        }
        op_of.push((o, id));
    }
    let plan = plan_devices(&df, default)?;
    let (func, copies) = insert_copies(func, &plan, &op_of)?;
    Ok(PlannedFunc { plan, func, copies })
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
