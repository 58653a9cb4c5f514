//! Dead code: ops whose results nothing live reads are not partitioned (XLA
//! removes them before partitioning too, e.g. the loss a `jax.grad` computes
//! but does not return), so their collectives are not counted or run.
//! Terminators, control flow and computations (ops with regions other than
//! scalar bodies), collectives and custom calls always stay.

use crate::ir::{Func, OpKind, ValueDef};

/// Per op of `func`, whether it is live.
pub(super) fn live_ops(func: &Func) -> Vec<bool> {
    let mut live = vec![false; func.ops.len()];
    let mut stack = Vec::new();
    for id in func.walk() {
        let op = func.op(id);
        let root = op.kind.is_terminator()
            || (!op.regions.is_empty() && !op.kind.has_scalar_body())
            // An all-reduce of partial sums (Shardy's export inserts them)
            // is dead when nothing reads it, like the op it finishes.
            || (op.kind.is_collective() && !matches!(op.kind, OpKind::AllReduce { .. }))
            || op.results.is_empty()
            || matches!(
                op.kind,
                OpKind::DeviceCollective { .. } | OpKind::CustomCall { .. }
            );
        if root {
            live[id.0 as usize] = true;
            stack.push(id);
        }
    }
    while let Some(id) = stack.pop() {
        for &v in &func.op(id).operands {
            if let ValueDef::Result { op, .. } = func.value(v).def {
                if !live[op.0 as usize] {
                    live[op.0 as usize] = true;
                    stack.push(op);
                }
            }
        }
    }
    live
}
