//! Manual computations (JAX's shard_map): the body is already per-device
//! code. Each operand is resharded to its in-sharding (whose blocks are the
//! body's arguments), the body's ops run as local steps on those blocks, its
//! device collectives (`stablehlo.all_reduce` & co.) become collective steps
//! over their replica groups, and each result takes the blocks the body
//! returns under its out-sharding. Values inside the body are per-device
//! buffers; they are recorded with their local type and no sharding.

use crate::ir::interp::manual::{reducer_of, unsupported_manual};
use crate::ir::{Func, OpId, OpKind, ValueId};
use crate::mesh::AxisRef;
use crate::sharding::{MeshRef, TensorSharding};

use super::lower::{op_error, Builder};
use super::program::{Collective, CollectiveKind, ManualRegion, Mask, Slot, Step};
use super::PartitionError;

impl Builder {
    /// Partition manual computation `id` (see the module doc).
    pub(super) fn partition_manual(&mut self, func: &Func, id: OpId) -> Result<(), PartitionError> {
        let op = func.op(id);
        let OpKind::ManualComputation {
            in_shardings,
            out_shardings,
            manual_axes,
        } = &op.kind
        else {
            return Err(op_error(op, "not a manual computation"));
        };
        for s in in_shardings.iter().chain(out_shardings) {
            if !matches!(&s.mesh, MeshRef::Symbol(n) if *n == self.mesh_name) {
                return Err(op_error(
                    op,
                    format!(
                        "sharding {} is not on mesh @{}",
                        s.to_bare(),
                        self.mesh_name
                    ),
                ));
            }
        }
        if let Some(why) = unsupported_manual(&self.mesh, manual_axes) {
            return Err(op_error(op, why));
        }
        let region = op.regions.first().ok_or_else(|| op_error(op, "no body"))?;
        let mut operands = Vec::with_capacity(op.operands.len());
        for ((&v, &arg), s) in op.operands.iter().zip(&region.args).zip(in_shardings) {
            let slot = self.slot(func, v)?;
            let target = self.concrete(s.clone());
            let block = self.reshard(slot, &target, &func.value(arg).name)?;
            self.check_block(func, arg, block)?;
            self.slot_of[arg.0 as usize] = Some(block);
            operands.push(block);
        }
        let first_step = self.steps.len();
        let mut returned = Vec::new();
        for &bid in &region.ops {
            let bop = func.op(bid);
            if bop.kind.is_terminator() {
                returned = self.slots(func, &bop.operands)?;
                break;
            }
            let operands = self.slots(func, &bop.operands)?;
            let results: Vec<Slot> = bop
                .results
                .iter()
                .map(|&r| self.per_device_value(func, r))
                .collect::<Result<_, _>>()?;
            match &bop.kind {
                OpKind::DeviceCollective { op: c, groups } => {
                    let ids = self.mesh.device_ids();
                    let named = match c {
                        crate::ir::DeviceCollective::CollectivePermute { pairs } => {
                            pairs.iter().flat_map(|&(s, t)| [s, t]).collect()
                        }
                        _ => groups.iter().flatten().copied().collect::<Vec<u64>>(),
                    };
                    if let Some(d) = named.iter().find(|d| !ids.contains(d)) {
                        return Err(op_error(
                            bop,
                            format!("device {d} is not in mesh @{}", self.mesh_name),
                        ));
                    }
                    let (input, output) = (operands[0], results[0]);
                    let bytes = self.values[input]
                        .local_bytes()
                        .max(self.values[output].local_bytes());
                    let (axes, groups) = match c {
                        crate::ir::DeviceCollective::CollectivePermute { .. } => {
                            (Vec::new(), self.all_devices())
                        }
                        _ => (self.axes_of_groups(groups), groups.clone().into()),
                    };
                    self.steps.push(Step::Collective(Collective {
                        kind: CollectiveKind::Device {
                            op: c.clone(),
                            reduction: reducer_of(func, bop),
                            source: bid,
                        },
                        input,
                        extra_inputs: Vec::new(),
                        output,
                        axes,
                        groups,
                        dtype: self.values[input].global.dtype,
                        bytes,
                        at: func.value(bop.results[0]).name.clone(),
                    }));
                }
                OpKind::ManualComputation { .. }
                | OpKind::NamedComputation { .. }
                | OpKind::Call { .. } => {
                    return Err(op_error(bop, "nested computations in a manual computation"));
                }
                k if k.is_collective() => {
                    return Err(op_error(bop, "sdy collectives in a manual computation"));
                }
                _ => self.steps.push(Step::Local {
                    op: bid,
                    operands,
                    masks: vec![Mask::None; bop.operands.len()],
                    results,
                    device_block: false,
                }),
            }
        }
        if returned.len() != op.results.len() {
            return Err(op_error(op, "the body returns a value per result"));
        }
        for ((&r, s), &src) in op.results.iter().zip(out_shardings).zip(&returned) {
            let v = func.value(r);
            let out = self.add_value(&v.name, v.ty.clone(), self.concrete(s.clone()))?;
            if self.values[out].layout.local_shape != self.values[src].global.shape
                || self.values[out].layout.padding.iter().any(|&p| p != 0)
            {
                return Err(PartitionError::Value {
                    value: v.name.clone(),
                    message: format!(
                        "the body returns {} per device, but {} cuts {} into blocks of {:?}",
                        self.values[src].global,
                        s.to_bare(),
                        v.ty,
                        self.values[out].layout.local_shape
                    ),
                });
            }
            self.set_local_type(r, out);
            self.steps.push(Step::Collective(Collective {
                kind: CollectiveKind::Relabel,
                input: src,
                extra_inputs: Vec::new(),
                output: out,
                axes: Vec::new(),
                groups: Default::default(),
                dtype: v.ty.dtype,
                bytes: 0,
                at: v.name.clone(),
            }));
            self.slot_of[r.0 as usize] = Some(out);
        }
        self.manual.push(ManualRegion {
            op: id,
            steps: first_step..self.steps.len(),
            operands,
            results: self.slots(func, &op.results)?,
        });
        Ok(())
    }

    /// The mesh axes whose device groups are `groups` (in any order), if
    /// some set of axes has exactly these groups; empty otherwise.
    fn axes_of_groups(&self, groups: &[Vec<u64>]) -> Vec<AxisRef> {
        let normal = |g: &[Vec<u64>]| {
            let mut g: Vec<Vec<u64>> = g
                .iter()
                .map(|x| {
                    let mut x = x.clone();
                    x.sort_unstable();
                    x
                })
                .collect();
            g.sort();
            g
        };
        let want = normal(groups);
        let names: Vec<AxisRef> = self
            .mesh
            .axes()
            .iter()
            .filter(|a| a.size > 1)
            .map(|a| AxisRef::full(a.name.clone()))
            .collect();
        (1u32..1 << names.len())
            .map(|mask| {
                (0..names.len())
                    .filter(|i| mask & (1 << i) != 0)
                    .map(|i| names[i].clone())
                    .collect::<Vec<_>>()
            })
            .find(|axes| {
                self.mesh
                    .device_groups(axes)
                    .is_ok_and(|g| normal(&g) == want)
            })
            .unwrap_or_default()
    }

    /// A body value: one buffer of its (local) type per device.
    fn per_device_value(&mut self, func: &Func, v: ValueId) -> Result<Slot, PartitionError> {
        let val = func.value(v);
        let replicated = TensorSharding::replicated(&self.mesh_name, val.ty.rank());
        let slot = self.add_value(&val.name, val.ty.clone(), replicated)?;
        self.slot_of[v.0 as usize] = Some(slot);
        Ok(slot)
    }

    /// `block` (an operand resharded to its in-sharding) holds exactly body
    /// argument `arg` on every device.
    fn check_block(&self, func: &Func, arg: ValueId, block: Slot) -> Result<(), PartitionError> {
        let b = &self.values[block];
        let want = &func.value(arg).ty;
        if b.layout.local_shape != want.shape || b.layout.padding.iter().any(|&p| p != 0) {
            return Err(PartitionError::Value {
                value: b.name.clone(),
                message: format!(
                    "{} cuts {} into blocks of {:?}, but the body takes {want}",
                    b.sharding.to_bare(),
                    b.global,
                    b.layout.local_shape
                ),
            });
        }
        Ok(())
    }
}
