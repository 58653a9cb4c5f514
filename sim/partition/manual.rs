//! Manual computations (JAX's shard_map). Each operand is resharded to its
//! in-sharding and each result takes the blocks the body returns under its
//! out-sharding (a relabel: no data moves).
//!
//! * Fully manual: the body is per-device code. Its ops run as local steps on
//!   the blocks, its device collectives (`stablehlo.all_reduce` & co.) become
//!   collective steps over their replica groups; body values are per-device
//!   buffers recorded with their local type and no sharding, and so is an
//!   argument a gather or scatter indexes (a relabel of its block), so it
//!   indexes the device's own block with indices local to it.
//! * Partially manual (some axes left automatic): a device's block of the
//!   in-sharding is its block, on the free axes, of its manual group's
//!   argument, so the body is partitioned like any code over the free axes
//!   (values carry their free-axis shardings; reshards keep each device in
//!   its manual group, `Builder::fixed_axes`), and every manual group runs it
//!   on its own data. Returned values are resharded to the out-sharding's
//!   free part first.

use crate::ir::interp::manual::{free_axes, reducer_of};
use crate::ir::{Func, OpId, OpKind, ValueId};
use crate::mesh::AxisRef;
use crate::propagate::free_part;
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
        let partial = !free_axes(&self.mesh, manual_axes).is_empty();
        let region = op.regions.first().ok_or_else(|| op_error(op, "no body"))?;
        let mut operands = Vec::with_capacity(op.operands.len());
        for ((&v, &arg), s) in op.operands.iter().zip(&region.args).zip(in_shardings) {
            let slot = self.slot(func, v)?;
            let target = self.concrete(s.clone());
            let block = self.reshard(slot, &target, &func.value(arg).name)?;
            operands.push(block);
        }
        let first_step = self.steps.len();
        for ((&arg, s), &block) in region.args.iter().zip(in_shardings).zip(&operands) {
            let slot = if partial {
                // The body sees the block of its manual group, sharded on the free axes.
                let free = self.concrete(free_part(s, manual_axes));
                let a = func.value(arg);
                let slot = self.add_value(&a.name, a.ty.clone(), free)?;
                self.same_blocks(&a.name, block, slot)?;
                self.relabel(block, slot, &a.name);
                slot
            } else {
                // Per-device code indexes its own block: an argument a gather
                // or scatter indexes becomes a per-device buffer (a relabel of
                // the block), so its indices are not moved by the block's
                // start. Others stay the block (a relabel of a kept argument
                // would hold a second copy in the timed run).
                self.check_block(func, arg, block)?;
                if indexed_in(func, &region.ops, arg) {
                    let slot = self.per_device_value(func, arg)?;
                    self.relabel(block, slot, &func.value(arg).name);
                    slot
                } else {
                    block
                }
            };
            self.slot_of[arg.0 as usize] = Some(slot);
        }
        let saved = std::mem::replace(
            &mut self.fixed_axes,
            if partial {
                manual_axes.clone()
            } else {
                Vec::new()
            },
        );
        let returned = self.partition_manual_body(func, &region.ops, partial);
        self.fixed_axes = saved;
        let returned = returned?;
        if returned.len() != op.results.len() {
            return Err(op_error(op, "the body returns a value per result"));
        }
        for ((&r, s), &src) in op.results.iter().zip(out_shardings).zip(&returned) {
            let v = func.value(r);
            let src = if partial {
                let free = self.concrete(free_part(s, manual_axes));
                self.reshard(src, &free, &v.name)?
            } else {
                src
            };
            let out = self.add_value(&v.name, v.ty.clone(), self.concrete(s.clone()))?;
            if partial {
                self.same_blocks(&v.name, src, out)?;
            } else if self.values[out].layout.local_shape != self.values[src].layout.local_shape
                || self.values[out].layout.padding.iter().any(|&p| p != 0)
            {
                return Err(PartitionError::Value {
                    value: v.name.clone(),
                    message: format!(
                        // A returned body argument is its operand's block.
                        "the body returns {:?} per device, but {} cuts {} into blocks of {:?}",
                        self.values[src].layout.local_shape,
                        s.to_bare(),
                        v.ty,
                        self.values[out].layout.local_shape
                    ),
                });
            }
            self.set_local_type(r, out);
            self.relabel(src, out, &v.name);
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

    /// Partition a manual computation's body (its terminator excluded);
    /// returns the slots of the values it returns. A fully manual body is
    /// per-device code run as is; a partially manual one is partitioned over
    /// its free axes like any other code, each manual group on its own.
    fn partition_manual_body(
        &mut self,
        func: &Func,
        ops: &[OpId],
        partial: bool,
    ) -> Result<Vec<Slot>, PartitionError> {
        for &bid in ops {
            let bop = func.op(bid);
            if bop.kind.is_terminator() {
                return self.slots(func, &bop.operands);
            }
            match &bop.kind {
                OpKind::DeviceCollective { op: c, groups } => {
                    self.device_collective(func, bid, c, groups, partial)?
                }
                OpKind::ManualComputation { .. }
                | OpKind::NamedComputation { .. }
                | OpKind::Call { .. } => {
                    return Err(op_error(bop, "nested computations in a manual computation"));
                }
                k if k.is_collective() => {
                    return Err(op_error(bop, "sdy collectives in a manual computation"));
                }
                _ if partial => self.partition_one(func, bid)?,
                _ => {
                    let operands = self.slots(func, &bop.operands)?;
                    let results: Vec<Slot> = bop
                        .results
                        .iter()
                        .map(|&r| self.per_device_value(func, r))
                        .collect::<Result<_, _>>()?;
                    self.steps.push(Step::Local {
                        op: bid,
                        operands,
                        masks: vec![Mask::None; bop.operands.len()],
                        results,
                        device_block: false,
                    })
                }
            }
        }
        Ok(Vec::new())
    }

    /// A `stablehlo.*` collective of a manual body, over its replica groups.
    /// In a partially manual body each device holds its block of the free
    /// axes: an all-reduce or permute whose groups keep the free coordinates
    /// combines blocks as they are; otherwise the dims it gathers, scatters
    /// or splits are gathered first (and every dim for a permute or groups
    /// that cross free coordinates).
    fn device_collective(
        &mut self,
        func: &Func,
        bid: OpId,
        c: &crate::ir::DeviceCollective,
        groups: &[Vec<u64>],
        partial: bool,
    ) -> Result<(), PartitionError> {
        use crate::ir::DeviceCollective as D;
        let bop = func.op(bid);
        let ids = self.mesh.device_ids();
        let named = match c {
            D::CollectivePermute { pairs } => pairs.iter().flat_map(|&(s, t)| [s, t]).collect(),
            _ => groups.iter().flatten().copied().collect::<Vec<u64>>(),
        };
        if let Some(d) = named.iter().find(|d| !ids.contains(d)) {
            return Err(op_error(
                bop,
                format!("device {d} is not in mesh @{}", self.mesh_name),
            ));
        }
        let r = bop.results[0];
        let (input, output) = if partial {
            let wanted = self.declared(func, r);
            let mut shared = wanted.clone();
            let free_kept = match c {
                D::CollectivePermute { pairs } => {
                    self.keep_free_coords(pairs.iter().map(|&(s, t)| vec![s, t]))
                }
                _ => self.keep_free_coords(groups.iter().cloned()),
            };
            let cut: Vec<u64> = match c {
                D::AllReduce | D::CollectivePermute { .. } => Vec::new(),
                D::AllGather { dim } | D::ReduceScatter { dim } => vec![*dim],
                D::AllToAll {
                    split_dim,
                    concat_dim,
                    ..
                } => vec![*split_dim, *concat_dim],
            };
            for (d, dim) in shared.dims.iter_mut().enumerate() {
                if !free_kept || cut.contains(&(d as u64)) {
                    dim.axes.clear();
                }
            }
            let src = self.slot(func, bop.operands[0])?;
            let name = &func.value(r).name;
            let input = self.reshard(src, &shared, name)?;
            let out = self.add_value(name, func.value(r).ty.clone(), shared)?;
            self.set_local_type(r, out);
            (input, out)
        } else {
            (
                self.slot(func, bop.operands[0])?,
                self.per_device_value(func, r)?,
            )
        };
        let bytes = self.values[input]
            .local_bytes()
            .max(self.values[output].local_bytes());
        let (axes, groups) = match c {
            D::CollectivePermute { .. } => (Vec::new(), self.all_devices()),
            _ => (self.axes_of_groups(groups), groups.to_vec().into()),
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
            at: func.value(r).name.clone(),
        }));
        let slot = if partial {
            let wanted = self.declared(func, r);
            self.reshard(output, &wanted, &func.value(r).name)?
        } else {
            output
        };
        self.slot_of[r.0 as usize] = Some(slot);
        Ok(())
    }

    /// Whether every device group keeps the coordinates of the axes that are
    /// not manual (so the devices of a group hold the same free-axis block).
    fn keep_free_coords(&self, groups: impl Iterator<Item = Vec<u64>>) -> bool {
        let free: Vec<usize> = self
            .mesh
            .axes()
            .iter()
            .enumerate()
            .filter(|(_, a)| !self.fixed_axes.contains(&a.name))
            .map(|(i, _)| i)
            .collect();
        let coords = |d: u64| -> Option<Vec<u64>> {
            let c = self.mesh.coords(d).ok()?;
            Some(free.iter().map(|&i| c[i]).collect())
        };
        groups.into_iter().all(|g| {
            let first = g.first().and_then(|&d| coords(d));
            g.iter().all(|&d| coords(d) == first)
        })
    }

    /// `to` holds the buffers of `from` under another value (no data moves).
    fn relabel(&mut self, from: Slot, to: Slot, at: &str) {
        self.steps.push(Step::Collective(Collective {
            kind: CollectiveKind::Relabel,
            input: from,
            extra_inputs: Vec::new(),
            output: to,
            axes: Vec::new(),
            groups: Default::default(),
            dtype: self.values[from].global.dtype,
            bytes: 0,
            at: at.to_string(),
        }));
    }

    /// Slots `a` and `b` (a value outside a partially manual computation and
    /// its counterpart inside) have the same block, unpadded, on every device.
    fn same_blocks(&self, name: &str, a: Slot, b: Slot) -> Result<(), PartitionError> {
        let (la, lb) = (&self.values[a].layout, &self.values[b].layout);
        let unpadded = |l: &crate::sharding::ShardLayout| l.padding.iter().all(|&p| p == 0);
        if la.local_shape != lb.local_shape || !unpadded(la) || !unpadded(lb) {
            return Err(PartitionError::Value {
                value: name.to_string(),
                message: format!(
                    "{} cuts {} into blocks of {:?}, but the body's {} of {} are {:?}",
                    self.values[a].sharding.to_bare(),
                    self.values[a].global,
                    la.local_shape,
                    self.values[b].sharding.to_bare(),
                    self.values[b].global,
                    lb.local_shape
                ),
            });
        }
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

/// `v` is the operand a gather or scatter among `ops` indexes.
fn indexed_in(func: &Func, ops: &[OpId], v: ValueId) -> bool {
    ops.iter().any(|&id| {
        let op = func.op(id);
        matches!(op.kind, OpKind::Gather { .. } | OpKind::Scatter { .. })
            && op.operands.first() == Some(&v)
    })
}
