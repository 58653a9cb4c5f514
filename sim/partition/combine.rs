//! Partial results of reduces that no collective reduction finishes (a
//! variadic reduce such as argmax's (value, index) pair, or a custom body):
//! each device reduces its shard (padding masked with the inits), then the
//! partials of the `k` devices along the reduced axes are stacked along a new
//! leading dim (a local `broadcast_in_dim` to `[1, ...]`), all-gathered (`[k, ...]`) and
//! reduced once more over that dim with the same body. Only the small partial
//! results move, never the reduced input. StableHLO lets a reduce apply its
//! body in any order with the inits as identities, so the result is the
//! reference's exactly (argmax ties still pick the smallest index, because
//! the body orders ties by index and is associative).

use crate::base::TensorType;
use crate::ir::{Func, Op, OpId, OpKind, Region, Value, ValueDef, ValueId};
use crate::sharding::{DimSharding, TensorSharding};

use super::lower::Builder;
use super::program::{CollectiveKind, Slot, Step};
use super::reshard::PlannedStep;
use super::PartitionError;

/// A reduce whose partial results can be combined by stacking: two or more
/// inputs, every init a constant (so every device starts from the same value).
pub(super) fn stackable(func: &Func, op: &Op) -> bool {
    let OpKind::Reduce { .. } = op.kind else {
        return false;
    };
    let n = op.operands.len() / 2;
    n >= 2
        && op.operands[n..].iter().all(|&v| {
            matches!(func.value(v).def, ValueDef::Result { op, .. }
                if matches!(func.op(op).kind, OpKind::Constant { .. }))
        })
}

/// Add `op` with results `(name, global type, local type)` to both the local
/// and the global function at the same ids; its result value ids.
pub(super) fn add_op_both(
    b: &mut Builder,
    template: &Op,
    kind: OpKind,
    operands: &[ValueId],
    results: &[(String, TensorType, TensorType)],
    regions: Vec<Region>,
) -> (OpId, Vec<ValueId>) {
    let mut ids = (OpId(0), Vec::new());
    for (f, local) in [(&mut b.local_func, true), (&mut b.global_func, false)] {
        let id = OpId(f.ops.len() as u32);
        let values: Vec<ValueId> = results
            .iter()
            .enumerate()
            .map(|(index, (name, global, local_ty))| {
                f.add_value(Value {
                    name: name.clone(),
                    ty: if local {
                        local_ty.clone()
                    } else {
                        global.clone()
                    },
                    sharding: None,
                    def: ValueDef::Result { op: id, index },
                })
            })
            .collect();
        f.add_op(Op {
            kind: kind.clone(),
            operands: operands.to_vec(),
            results: values.clone(),
            regions: regions.clone(),
            rule: None,
            attrs: Vec::new(),
            loc: template.loc,
        });
        ids = (id, values);
    }
    ids
}

impl Builder {
    /// Emit a local step of an op the partitioner added (no padding masks).
    pub(super) fn push_added(
        &mut self,
        op: OpId,
        operands: Vec<Slot>,
        results: Vec<Slot>,
        device_block: bool,
    ) {
        self.steps.push(Step::Local {
            op,
            operands,
            results,
            masks: Vec::new(),
            device_block,
        });
    }

    /// Finish the partial results `partials` of reduce `id` (unreduced over
    /// the same axes) with `inits` (the local init slots): stack, all-gather,
    /// reduce again. Returns the finished slots (no unreduced axes).
    pub(super) fn combine_partials(
        &mut self,
        func: &Func,
        id: OpId,
        partials: &[Slot],
        inits: &[Slot],
    ) -> Result<Vec<Slot>, PartitionError> {
        let op = func.op(id);
        let axes = self.values[partials[0]].sharding.unreduced.clone();
        let k: u64 = axes
            .iter()
            .map(|a| a.size(&self.mesh).unwrap_or(1))
            .product();
        let mut gathered = Vec::with_capacity(partials.len());
        let mut stacked_values = Vec::with_capacity(partials.len());
        for (&slot, &r) in partials.iter().zip(&op.results) {
            let v = self.values[slot].clone();
            let name = format!("{}.stack", v.name);
            // The stacked value: dim 0 over the reduced axes, then the partial's dims.
            let mut dims = vec![DimSharding {
                axes: axes.clone(),
                is_closed: true,
                priority: None,
            }];
            dims.extend(v.sharding.dims.iter().cloned());
            let sharding = TensorSharding {
                dims,
                unreduced: Vec::new(),
                reduction: crate::sharding::Reduction::Sum,
                ..v.sharding.clone()
            };
            let mut global = v.global.clone();
            global.shape.insert(0, k);
            let stacked = self.add_value(&name, global.clone(), sharding.clone())?;
            let mut local_ty = global.clone();
            local_ty.shape = self.values[stacked].layout.local_shape.clone();
            let rank = v.global.rank() as u64;
            let (reshape, vals) = add_op_both(
                self,
                op,
                OpKind::BroadcastInDim {
                    dims: (1..=rank).collect(),
                },
                &[r],
                &[(format!("%st{stacked}"), global, local_ty)],
                Vec::new(),
            );
            self.push_added(reshape, vec![slot], vec![stacked], false);
            let mut after = sharding;
            after.dims[0].axes.clear();
            let mut per_dim = vec![Vec::new(); after.dims.len()];
            per_dim[0] = axes.clone();
            let out = self.emit(
                PlannedStep {
                    kind: CollectiveKind::AllGather(per_dim),
                    axes: self.sorted_axes(axes.clone()),
                    after,
                },
                stacked,
                &v.name,
            )?;
            gathered.push(out);
            stacked_values.push(vals[0]);
        }
        // Reduce the stacked partials over dim 0 with the op's own body.
        let n = partials.len();
        let mut results = Vec::with_capacity(n);
        let mut specs = Vec::with_capacity(n);
        for &slot in partials {
            let v = self.values[slot].clone();
            let sharding = TensorSharding {
                unreduced: Vec::new(),
                reduction: crate::sharding::Reduction::Sum,
                ..v.sharding.clone()
            };
            let name = format!("{}.combined", v.name);
            let out = self.add_value(&name, v.global.clone(), sharding)?;
            let mut local_ty = v.global.clone();
            local_ty.shape = self.values[out].layout.local_shape.clone();
            specs.push((v.global.clone(), local_ty));
            results.push(out);
        }
        // Printed names: `%cb<first slot>`, with `#i` for several results.
        let specs: Vec<(String, TensorType, TensorType)> = specs
            .into_iter()
            .enumerate()
            .map(|(i, (g, l))| {
                let name = if n > 1 {
                    format!("%cb{}#{i}", results[0])
                } else {
                    format!("%cb{}", results[0])
                };
                (name, g, l)
            })
            .collect();
        let mut operands = stacked_values;
        operands.extend_from_slice(&op.operands[n..]);
        let (reduce, _) = add_op_both(
            self,
            op,
            OpKind::Reduce { dims: vec![0] },
            &operands,
            &specs,
            op.regions.clone(),
        );
        let mut step_operands = gathered;
        step_operands.extend_from_slice(inits);
        self.push_added(reduce, step_operands, results.clone(), false);
        Ok(results)
    }
}
