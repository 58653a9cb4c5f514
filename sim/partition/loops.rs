//! `stablehlo.while` (JAX's `scan` and `fori_loop`): the loop is partitioned
//! once, never unrolled. Each carried value gets one slot with the sharding
//! propagation gave the loop's result; the initial values are resharded into
//! it, the condition's and body's block arguments read it, and the values the
//! body yields are resharded back to it before the next iteration. The
//! program holds a [`LoopStep`] followed by the condition's steps and the
//! body's steps (see [`Step::Loop`]).

use crate::ir::loops::static_trip_count;
use crate::ir::{Func, OpId, OpKind};
use crate::sharding::TensorSharding;

use super::lower::{op_error, Builder};
use super::program::{LoopStep, Step};
use super::PartitionError;

impl Builder {
    /// Partition while loop `id` (see the module doc).
    pub(super) fn partition_while(&mut self, func: &Func, id: OpId) -> Result<(), PartitionError> {
        let op = func.op(id);
        let [cond, body] = &op.regions[..] else {
            return Err(op_error(op, "a while loop needs a condition and a body"));
        };
        let mut inits = Vec::with_capacity(op.results.len());
        let mut carried = Vec::with_capacity(op.results.len());
        for (i, &r) in op.results.iter().enumerate() {
            let v = func.value(r);
            let target = self.declared(func, r);
            let src = self.slot(func, op.operands[i])?;
            inits.push(self.reshard(src, &target, &v.name)?);
            let slot = self.add_value(&v.name, v.ty.clone(), target)?;
            for value in [
                Some(r),
                cond.args.get(i).copied(),
                body.args.get(i).copied(),
            ]
            .into_iter()
            .flatten()
            {
                self.set_local_type(value, slot);
                self.slot_of[value.0 as usize] = Some(slot);
            }
            carried.push(slot);
        }
        let at = self.steps.len();
        self.steps.push(Step::Loop(LoopStep {
            op: id,
            inits,
            carried: carried.clone(),
            pred: 0,
            yields: Vec::new(),
            cond_end: 0,
            body_end: 0,
            trip_count: static_trip_count(func, op),
        }));
        self.partition_block(func, &cond.ops)?;
        let cond_ret = cond
            .ops
            .last()
            .map(|&r| func.op(r))
            .filter(|r| matches!(r.kind, OpKind::StablehloReturn))
            .ok_or_else(|| op_error(op, "the condition does not end with stablehlo.return"))?;
        let p = *cond_ret
            .operands
            .first()
            .ok_or_else(|| op_error(op, "the condition returns nothing"))?;
        // Every device must agree on whether to go on: the predicate is replicated.
        let pred_slot = self.slot(func, p)?;
        let replicated = TensorSharding::replicated(&self.mesh_name, 0);
        let pred = self.reshard(pred_slot, &replicated, &func.value(p).name)?;
        let cond_end = self.steps.len();
        self.partition_block(func, &body.ops)?;
        let body_ret = body
            .ops
            .last()
            .map(|&r| func.op(r))
            .filter(|r| matches!(r.kind, OpKind::StablehloReturn))
            .ok_or_else(|| op_error(op, "the body does not end with stablehlo.return"))?;
        let mut yields = Vec::with_capacity(carried.len());
        for (i, &v) in body_ret.operands.iter().enumerate() {
            let slot = self.slot(func, v)?;
            let target = self.values[carried[i]].sharding.clone();
            yields.push(self.reshard(slot, &target, &func.value(v).name)?);
        }
        let body_end = self.steps.len();
        if let Step::Loop(l) = &mut self.steps[at] {
            l.pred = pred;
            l.yields = yields;
            l.cond_end = cond_end;
            l.body_end = body_end;
        }
        Ok(())
    }
}
