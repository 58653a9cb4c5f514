//! Shardy's verifier rules on its own ops, beyond shapes and types: a
//! propagation barrier's direction, data-flow edge inputs, manual computations
//! (manual axes known to the mesh, listed once, not already manual in an
//! enclosing computation, before free axes in every dim; in/out shardings on one
//! mesh), isolated regions, and custom sharding rules only on custom calls.

use std::collections::BTreeSet;

use crate::sharding::TensorSharding;

use super::model::{Func, Module, Op, OpId, Region, ValueDef};
use super::ops::OpKind;
use super::IrError;

fn err(op: &Op, message: impl Into<String>) -> IrError {
    IrError::Verify {
        loc: op.loc,
        op: op.kind.name().to_string(),
        message: message.into(),
    }
}

/// The Shardy rules for one op.
pub(super) fn check_sdy_op(m: &Module, f: &Func, op: &Op) -> Result<(), IrError> {
    if op.rule.as_ref().is_some_and(|r| r.is_custom)
        && !matches!(op.kind, OpKind::CustomCall { .. })
    {
        return Err(err(
            op,
            "has a custom sdy.sharding_rule, which only a custom call may have",
        ));
    }
    match &op.kind {
        OpKind::PropagationBarrier {
            direction: super::PropagationDirection::Both,
        } => Err(err(
            op,
            "cannot allow BOTH directions (it would block nothing; use NONE, FORWARD or BACKWARD)",
        )),
        OpKind::DataFlowEdge { .. } => check_data_flow_edge(f, op),
        OpKind::ManualComputation {
            in_shardings,
            out_shardings,
            manual_axes,
        } => {
            check_manual_axes(m, op, in_shardings, out_shardings, manual_axes)?;
            check_nested_manual_axes(f, op, manual_axes)?;
            check_isolated(f, op)
        }
        OpKind::NamedComputation { .. } => check_isolated(f, op),
        OpKind::ShardingGroup { group_id } if *group_id < 0 => Err(err(
            op,
            format!("has group_id {group_id}; group ids are unsigned (0 or more)"),
        )),
        _ => Ok(()),
    }
}

/// A data-flow edge's input has no other user and is not made by an sdy op
/// (other than a named computation).
fn check_data_flow_edge(f: &Func, op: &Op) -> Result<(), IrError> {
    let Some(&input) = op.operands.first() else {
        return Ok(());
    };
    let uses: usize = f
        .walk()
        .into_iter()
        .map(|id| f.op(id).operands.iter().filter(|&&o| o == input).count())
        .sum();
    if uses > 1 {
        return Err(err(
            op,
            format!(
                "input {} has {uses} users; the input of a data-flow edge must have it as its only user",
                f.value(input).name
            ),
        ));
    }
    if let ValueDef::Result { op: def, .. } = f.value(input).def {
        let kind = &f.op(def).kind;
        if kind.name().starts_with("sdy.") && !matches!(kind, OpKind::NamedComputation { .. }) {
            return Err(err(
                op,
                format!(
                    "input {} is made by {} (at {}); a data-flow edge's input may not come from an sdy op other than sdy.named_computation",
                    f.value(input).name,
                    kind.name(),
                    f.op(def).loc
                ),
            ));
        }
    }
    Ok(())
}

fn check_manual_axes(
    m: &Module,
    op: &Op,
    in_shardings: &[TensorSharding],
    out_shardings: &[TensorSharding],
    manual_axes: &[String],
) -> Result<(), IrError> {
    let mut seen = BTreeSet::new();
    for a in manual_axes {
        if !seen.insert(a.as_str()) {
            return Err(err(op, format!("lists manual axis \"{a}\" twice")));
        }
    }
    let all: Vec<&TensorSharding> = in_shardings.iter().chain(out_shardings).collect();
    // Shardings on an axis-less mesh (an empty placeholder) bind no mesh.
    let meshes: BTreeSet<String> = all
        .iter()
        .filter(|s| {
            s.resolve_mesh(&m.meshes)
                .map_or(true, |mesh| !mesh.axes().is_empty())
        })
        .map(|s| {
            s.mesh_name()
                .map_or_else(|| s.to_bare(), |n| format!("@{n}"))
        })
        .collect();
    if meshes.len() > 1 && !manual_axes.is_empty() {
        return Err(err(
            op,
            format!(
                "in and out shardings use meshes {}: all must be on one mesh",
                meshes.iter().cloned().collect::<Vec<_>>().join(", ")
            ),
        ));
    }
    let mesh = all
        .iter()
        .filter_map(|s| s.resolve_mesh(&m.meshes))
        .find(|mesh| !mesh.axes().is_empty());
    if let Some(mesh) = mesh {
        if let Some(a) = manual_axes.iter().find(|a| !mesh.contains_dim(a)) {
            return Err(err(
                op,
                format!(
                    "manual axis \"{a}\" is not an axis of the mesh (axes: {:?})",
                    mesh.dim_names()
                ),
            ));
        }
    }
    for (what, list) in [
        ("in_shardings", in_shardings),
        ("out_shardings", out_shardings),
    ] {
        for (i, s) in list.iter().enumerate() {
            for (d, dim) in s.dims.iter().enumerate() {
                let mut free: Option<String> = None;
                for a in &dim.axes {
                    let manual = manual_axes.contains(&a.name);
                    match (&free, manual) {
                        (Some(f), true) => {
                            return Err(err(
                                op,
                                format!(
                                    "{what}[{i}] dim {d}: manual axis {a} comes after free axis {f}; manual axes must come first"
                                ),
                            ))
                        }
                        (None, false) => free = Some(a.to_string()),
                        _ => {}
                    }
                }
            }
        }
    }
    Ok(())
}

/// Ops of a region and of every region nested in it.
fn nested_ops(f: &Func, r: &Region) -> Vec<OpId> {
    let mut out = Vec::new();
    let mut stack: Vec<OpId> = r.ops.iter().rev().copied().collect();
    while let Some(id) = stack.pop() {
        out.push(id);
        for inner in f.op(id).regions.iter().rev() {
            stack.extend(inner.ops.iter().rev());
        }
    }
    out
}

/// A manual computation inside this one may not make the same axes manual again.
fn check_nested_manual_axes(f: &Func, op: &Op, manual_axes: &[String]) -> Result<(), IrError> {
    for r in &op.regions {
        for id in nested_ops(f, r) {
            let inner = f.op(id);
            if let OpKind::ManualComputation {
                manual_axes: theirs,
                ..
            } = &inner.kind
            {
                if let Some(a) = theirs.iter().find(|a| manual_axes.contains(a)) {
                    return Err(err(
                        inner,
                        format!(
                            "makes axis \"{a}\" manual, which the enclosing sdy.manual_computation at {} already made manual",
                            op.loc
                        ),
                    ));
                }
            }
        }
    }
    Ok(())
}

/// The region is isolated from above: its ops use only values defined inside it.
fn check_isolated(f: &Func, op: &Op) -> Result<(), IrError> {
    for r in &op.regions {
        let ops = nested_ops(f, r);
        let mut inside: BTreeSet<u32> = r.args.iter().map(|v| v.0).collect();
        for &id in &ops {
            let o = f.op(id);
            inside.extend(o.results.iter().map(|v| v.0));
            inside.extend(o.regions.iter().flat_map(|g| g.args.iter().map(|v| v.0)));
        }
        for &id in &ops {
            let o = f.op(id);
            if let Some(v) = o.operands.iter().find(|v| !inside.contains(&v.0)) {
                return Err(err(
                    o,
                    format!(
                        "uses {}, defined outside the enclosing {} (its region is isolated from above)",
                        f.value(*v).name,
                        op.kind.name()
                    ),
                ));
            }
        }
    }
    Ok(())
}
