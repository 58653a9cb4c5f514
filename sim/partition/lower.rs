//! The partitioning driver: walks the entry function of a propagated module op
//! by op, choosing each op's factor sharding, inserting reshards (lowered to
//! collectives) and emitting local steps (see the module doc of `partition`).

use std::collections::{BTreeMap, BTreeSet};

use crate::base::{DType, TensorType};
use crate::ir::interp::reduce_kind_of;
use crate::ir::{Func, Module, Op, OpId, OpKind, OpShardingRule, ValueId};
use crate::mesh::{AxisRef, Mesh};
use crate::propagate::{FactorSharding, TensorFactorShardings};
use crate::rules::rule_for;
use crate::sharding::{MeshRef, ShardLayout, TensorSharding};
use crate::tensor::{CollectiveReduction, ReduceKind};

use super::mean::mean_pattern;
use super::program::{
    Collective, CollectiveKind, DeviceGroups, LocalValue, ManualRegion, Mask, Slot, SpmdProgram,
    Step,
};
use super::reshard::{plan_reshard_within, CostModel, PlannedStep};
use super::{PartitionError, PartitionOptions};

/// Partition the entry function of `module`, whose values carry the shardings
/// propagation gave them (a value without one is replicated).
pub fn partition(module: &Module) -> Result<SpmdProgram, PartitionError> {
    partition_with(module, &PartitionOptions::default())
}

/// The collective reduction a declared `unreduced=<kind>{...}` combines by.
fn declared_kind(r: crate::sharding::Reduction) -> CollectiveReduction {
    match r {
        crate::sharding::Reduction::Sum => CollectiveReduction::Sum,
        crate::sharding::Reduction::Max => CollectiveReduction::Max,
        crate::sharding::Reduction::Min => CollectiveReduction::Min,
    }
}

/// A partial result is combined by what its op computes (`kind`: a dot's
/// partials sum, a max-reduce's take their max). Where the value's sharding
/// declares the same axes unreduced with another kind (`unreduced=max{"x"}`
/// on a dot contracting over "x"), that combination would not be the op's
/// value: refused by name rather than combined either way.
fn check_declared_kind(
    op: &Op,
    partial: &TensorSharding,
    target: &TensorSharding,
    kind: CollectiveReduction,
) -> Result<(), PartitionError> {
    let overlap: Vec<String> = target
        .unreduced
        .iter()
        .filter(|a| partial.unreduced.contains(a))
        .map(|a| format!("{a}"))
        .collect();
    let declared = declared_kind(target.reduction);
    let same = declared == kind
        || (declared == CollectiveReduction::Sum && kind == CollectiveReduction::Avg);
    if overlap.is_empty() || same {
        return Ok(());
    }
    Err(op_error(
        op,
        format!(
            "its partial results over {} combine by {} but its sharding declares unreduced={}{{...}} ({} of those partials is not the op's value)",
            overlap.join(", "),
            kind.name(),
            target.reduction.keyword(),
            declared.name()
        ),
    ))
}

/// [`partition`] with the user's choices. Partial results are combined by
/// their op's reduction (all-reduce or reduce-scatter sum, max, min...);
/// a declared `unreduced=max{...}`/`min{...}` is honoured where it is that
/// reduction (see [`check_declared_kind`]).
pub fn partition_with(
    module: &Module,
    opts: &PartitionOptions,
) -> Result<SpmdProgram, PartitionError> {
    let func = module
        .entry()
        .ok_or_else(|| PartitionError::Module("no function to partition".into()))?;
    let (mesh_name, mesh) = pick_mesh(module, func)?;
    let mut b = Builder {
        mesh_name,
        mesh,
        model: CostModel::default(),
        values: Vec::new(),
        steps: Vec::new(),
        slot_of: vec![None; func.values.len()],
        local_func: func.clone(),
        global_func: func.clone(),
        opts: *opts,
        means: BTreeMap::new(),
        manual: Vec::new(),
        groups: BTreeMap::new(),
        all: None,
        fixed_axes: Vec::new(),
        live: super::live::live_ops(func),
    };
    let mut args = Vec::new();
    for &a in &func.args {
        let v = func.value(a);
        let sharding = b.declared(func, a);
        let slot = b.add_value(&v.name, v.ty.clone(), sharding)?;
        b.slot_of[a.0 as usize] = Some(slot);
        args.push(slot);
    }
    let mut results = Vec::new();
    for &id in &func.body {
        let op = func.op(id);
        if let OpKind::Return = op.kind {
            for (i, &v) in op.operands.iter().enumerate() {
                let mut slot = b.slot(func, v)?;
                if let Some(Some(t)) = func.result_shardings.get(i) {
                    let t = b.concrete(t.clone());
                    slot = b.reshard(slot, &t, &format!("return#{i}"))?;
                }
                results.push(slot);
            }
        } else {
            b.partition_one(func, id)?;
        }
    }
    // The module with the partitioned entry function in its place, without
    // a copy of the old one (a function copy costs ~1 KB per op, and this is
    // the run's peak: the input, local and global functions are all live).
    let mut global = Some(b.global_func);
    let module = Module {
        name: module.name.clone(),
        wrapped: module.wrapped,
        attrs: module.attrs.clone(),
        meshes: module.meshes.clone(),
        mesh_attrs: module.mesh_attrs.clone(),
        funcs: module
            .funcs
            .iter()
            .map(|f| match global.take_if(|g| g.name == f.name) {
                Some(g) => g,
                None => f.clone(),
            })
            .collect(),
    };
    Ok(SpmdProgram {
        mesh_name: b.mesh_name,
        mesh: b.mesh,
        module,
        local_func: b.local_func,
        values: b.values,
        args,
        steps: b.steps,
        results,
        manual: b.manual,
    })
}

pub(super) fn op_error(op: &Op, message: impl Into<String>) -> PartitionError {
    PartitionError::Op {
        loc: op.loc,
        op: op.kind.name().to_string(),
        message: message.into(),
    }
}

/// The one mesh the function's shardings use (the module's first if none does).
fn pick_mesh(module: &Module, func: &Func) -> Result<(String, Mesh), PartitionError> {
    let mut names: BTreeSet<String> = BTreeSet::new();
    let shardings = func
        .values
        .iter()
        .filter_map(|v| v.sharding.as_ref())
        .chain(func.result_shardings.iter().flatten());
    for s in shardings {
        match &s.mesh {
            MeshRef::Symbol(n) => {
                names.insert(n.clone());
            }
            MeshRef::Inline(_) => {
                return Err(PartitionError::Module(
                    "inline meshes are not supported; use an sdy.mesh symbol".into(),
                ))
            }
        }
    }
    if names.len() > 1 {
        return Err(PartitionError::Module(format!(
            "shardings use several meshes ({}); one mesh per program is supported",
            names.into_iter().collect::<Vec<_>>().join(", ")
        )));
    }
    let name = match names.into_iter().next() {
        Some(n) => n,
        None => match module.meshes.first() {
            Some((n, _)) => n.clone(),
            None => {
                return Ok((
                    "mesh".into(),
                    Mesh::from_pairs(&[]).map_err(|e| PartitionError::Module(e.to_string()))?,
                ))
            }
        },
    };
    let mesh = module
        .mesh(&name)
        .cloned()
        .ok_or_else(|| PartitionError::Module(format!("no sdy.mesh @{name}")))?;
    Ok((name, mesh))
}

pub(super) struct Builder {
    pub(super) mesh_name: String,
    pub(super) mesh: Mesh,
    pub(super) model: CostModel,
    pub(super) values: Vec<LocalValue>,
    pub(super) steps: Vec<Step>,
    pub(super) slot_of: Vec<Option<Slot>>,
    /// The entry function with local types; ops the partitioner adds (see
    /// `combine`) go here and into `global_func` at the same ids.
    pub(super) local_func: Func,
    pub(super) global_func: Func,
    pub(super) opts: PartitionOptions,
    /// Divides of means already finished by an averaging collective, with
    /// the slot holding the mean.
    pub(super) means: BTreeMap<OpId, Slot>,
    pub(super) manual: Vec<ManualRegion>,
    /// Device groups per axis list, computed once and shared by collectives.
    pub(super) groups: BTreeMap<String, DeviceGroups>,
    /// The one group of every device.
    pub(super) all: Option<DeviceGroups>,
    /// Inside a partially manual computation, its manual axes: every device
    /// keeps its coordinates on them through a reshard (its manual group's
    /// data is its own).
    pub(super) fixed_axes: Vec<String>,
    /// Per op, whether anything live reads its results (see `live`).
    pub(super) live: Vec<bool>,
}

impl Builder {
    /// Partition one op (not a terminator) of `func`.
    pub(super) fn partition_one(&mut self, func: &Func, id: OpId) -> Result<(), PartitionError> {
        if !self.live.get(id.0 as usize).copied().unwrap_or(true) {
            return Ok(());
        }
        let op = func.op(id);
        if let Some(mean) = self.means.remove(&id) {
            // The divide of a mean finished by an averaging collective.
            let r = op.results[0];
            let t = self.declared(func, r);
            let out = self.reshard(mean, &t, &func.value(r).name)?;
            self.slot_of[r.0 as usize] = Some(out);
            return Ok(());
        }
        match &op.kind {
            OpKind::Constant { .. } | OpKind::Iota { .. } => {
                let r = op.results[0];
                let v = func.value(r);
                let sharding = self.declared(func, r);
                let slot = self.add_value(&v.name, v.ty.clone(), sharding)?;
                self.set_local_type(r, slot);
                self.slot_of[r.0 as usize] = Some(slot);
                self.steps.push(Step::Local {
                    op: id,
                    operands: Vec::new(),
                    results: vec![slot],
                    masks: Vec::new(),
                    device_block: true,
                });
            }
            OpKind::ShardingConstraint { sharding } | OpKind::Reshard { sharding } => {
                let src = self.slot(func, op.operands[0])?;
                let t = self.concrete(sharding.clone());
                let r = op.results[0];
                let out = self.reshard(src, &t, &func.value(r).name)?;
                self.slot_of[r.0 as usize] = Some(out);
            }
            OpKind::PropagationBarrier { .. } | OpKind::DataFlowEdge { .. } => {
                let src = self.slot(func, op.operands[0])?;
                let r = op.results[0];
                let t = self.declared(func, r);
                let out = self.reshard(src, &t, &func.value(r).name)?;
                self.slot_of[r.0 as usize] = Some(out);
            }
            OpKind::AllReduce {
                reduction_axes,
                out_sharding,
            } => {
                let src = self.slot(func, op.operands[0])?;
                let r = op.results[0];
                let out =
                    self.all_reduce(src, reduction_axes, out_sharding, &func.value(r).name)?;
                self.slot_of[r.0 as usize] = Some(out);
            }
            OpKind::ShardingGroup { .. } => {}
            OpKind::Reduce { .. } => self.partition_op(func, id)?,
            OpKind::Slice { .. }
            | OpKind::Pad { .. }
            | OpKind::Reverse { .. }
            | OpKind::Concatenate { .. } => {
                if !self.try_window(func, id)? {
                    self.partition_op(func, id)?;
                }
            }
            OpKind::ManualComputation { .. } => self.partition_manual(func, id)?,
            OpKind::NamedComputation { .. } => self.partition_named(func, id)?,
            OpKind::While => self.partition_while(func, id)?,
            // Scalar bodies run inside the local op.
            OpKind::Sort { .. }
            | OpKind::Scatter { .. }
            | OpKind::ReduceWindow { .. }
            | OpKind::SelectAndScatter { .. } => self.partition_op(func, id)?,
            OpKind::Case | OpKind::If => self.partition_case(func, id)?,
            OpKind::OptimizationBarrier => {
                for (&src, &r) in op.operands.iter().zip(&op.results) {
                    let slot = self.slot(func, src)?;
                    let t = self.declared(func, r);
                    let out = self.reshard(slot, &t, &func.value(r).name)?;
                    self.slot_of[r.0 as usize] = Some(out);
                }
            }
            _ if !op.regions.is_empty() || matches!(op.kind, OpKind::Call { .. }) => {
                return Err(op_error(
                    op,
                    "calls and named or manual computations must be inlined first",
                ));
            }
            _ if op.kind.is_collective() => {
                return Err(op_error(op, "the input already has explicit collectives"));
            }
            _ => self.partition_op(func, id)?,
        }
        Ok(())
    }

    /// An op without a sharding rule (rng_bit_generator...) runs on
    /// replicated operands on every device; its results are resharded to
    /// what propagation gave them.
    fn partition_replicated(&mut self, func: &Func, id: OpId) -> Result<(), PartitionError> {
        let op = func.op(id);
        let mut operands = Vec::with_capacity(op.operands.len());
        for &v in &op.operands {
            let slot = self.slot(func, v)?;
            let rank = func.value(v).ty.rank();
            let full = TensorSharding::replicated(&self.mesh_name, rank);
            operands.push(self.reshard(slot, &full, &func.value(v).name)?);
        }
        let mut results = Vec::with_capacity(op.results.len());
        for &r in &op.results {
            let v = func.value(r);
            let full = TensorSharding::replicated(&self.mesh_name, v.ty.rank());
            let slot = self.add_value(&v.name, v.ty.clone(), full)?;
            self.set_local_type(r, slot);
            results.push(slot);
        }
        let masks = vec![Mask::None; operands.len()];
        self.steps.push(Step::Local {
            op: id,
            operands,
            results: results.clone(),
            masks,
            device_block: false,
        });
        for (&r, slot) in op.results.iter().zip(results) {
            let t = self.declared(func, r);
            let out = self.reshard(slot, &t, &func.value(r).name)?;
            self.slot_of[r.0 as usize] = Some(out);
        }
        Ok(())
    }

    /// Partition the ops of a block, its terminator excluded.
    pub(super) fn partition_block(
        &mut self,
        func: &Func,
        ops: &[OpId],
    ) -> Result<(), PartitionError> {
        for &id in ops {
            if !func.op(id).kind.is_terminator() {
                self.partition_one(func, id)?;
            }
        }
        Ok(())
    }

    /// The device groups of a collective over `axes` (shared).
    pub(super) fn groups_over(
        &mut self,
        axes: &[AxisRef],
    ) -> Result<DeviceGroups, crate::mesh::MeshError> {
        let key = format!("{axes:?}");
        if let Some(g) = self.groups.get(&key) {
            return Ok(g.clone());
        }
        let g = DeviceGroups::new(self.mesh.device_groups(axes)?);
        self.groups.insert(key, g.clone());
        Ok(g)
    }

    /// One group of every device (permutes, halo exchanges), shared.
    pub(super) fn all_devices(&mut self) -> DeviceGroups {
        let mesh = &self.mesh;
        self.all
            .get_or_insert_with(|| DeviceGroups::new(vec![mesh.device_ids()]))
            .clone()
    }

    /// A sharding with closed dims on this program's mesh symbol.
    pub(super) fn concrete(&self, mut s: TensorSharding) -> TensorSharding {
        for d in &mut s.dims {
            d.is_closed = true;
            d.priority = None;
        }
        s.replicated.clear();
        s
    }

    /// The sharding propagation gave `v` (replicated when none).
    /// A named computation runs inline, as XLA runs the call Shardy's export
    /// makes of it: its block arguments are its operands resharded to the
    /// in-shardings, its results the returned values resharded to the
    /// out-shardings (both filled by propagation).
    fn partition_named(&mut self, func: &Func, id: OpId) -> Result<(), PartitionError> {
        let op = func.op(id);
        let region = op
            .regions
            .first()
            .ok_or_else(|| PartitionError::Module("sdy.named_computation without a body".into()))?;
        for (&src, &arg) in op.operands.iter().zip(&region.args) {
            let slot = self.slot(func, src)?;
            let t = self.declared(func, arg);
            let out = self.reshard(slot, &t, &func.value(arg).name)?;
            self.slot_of[arg.0 as usize] = Some(out);
        }
        let Some((&ret, body)) = region.ops.split_last() else {
            return Err(PartitionError::Module(
                "sdy.named_computation body without sdy.return".into(),
            ));
        };
        for &inner in body {
            self.partition_one(func, inner)?;
        }
        for (&r, &v) in op.results.iter().zip(&func.op(ret).operands) {
            let slot = self.slot(func, v)?;
            let t = self.declared(func, r);
            let out = self.reshard(slot, &t, &func.value(r).name)?;
            self.slot_of[r.0 as usize] = Some(out);
        }
        Ok(())
    }

    pub(super) fn declared(&self, func: &Func, v: ValueId) -> TensorSharding {
        let val = func.value(v);
        match &val.sharding {
            Some(s) => self.concrete(s.clone()),
            None => TensorSharding::replicated(&self.mesh_name, val.ty.rank()),
        }
    }

    pub(super) fn slot(&self, func: &Func, v: ValueId) -> Result<Slot, PartitionError> {
        self.slot_of[v.0 as usize].ok_or_else(|| {
            PartitionError::Module(format!(
                "value {} is used before it is defined (or defined in a region)",
                func.value(v).name
            ))
        })
    }

    /// The slots holding `values`, in order.
    pub(super) fn slots(
        &self,
        func: &Func,
        values: &[ValueId],
    ) -> Result<Vec<Slot>, PartitionError> {
        values.iter().map(|&v| self.slot(func, v)).collect()
    }

    pub(super) fn add_value(
        &mut self,
        name: &str,
        global: TensorType,
        sharding: TensorSharding,
    ) -> Result<Slot, PartitionError> {
        let geometry = TensorSharding {
            unreduced: Vec::new(),
            reduction: crate::sharding::Reduction::Sum,
            ..sharding.clone()
        };
        let layout = ShardLayout::new(&self.mesh, &geometry, &global.shape)
            .map_err(|e| PartitionError::sharding(e).at_value(name))?;
        self.values.push(LocalValue {
            name: name.to_string(),
            global,
            sharding,
            layout,
        });
        Ok(self.values.len() - 1)
    }

    /// Check that `sharding` fits value `name` of type `ty`.
    pub(super) fn check(
        &self,
        name: &str,
        ty: &TensorType,
        sharding: &TensorSharding,
    ) -> Result<(), PartitionError> {
        if sharding.rank() != ty.rank() {
            return Err(PartitionError::Value {
                value: name.to_string(),
                message: format!(
                    "sharding {} has rank {} but the value is {ty}",
                    sharding.to_bare(),
                    sharding.rank()
                ),
            });
        }
        ShardLayout::new(&self.mesh, sharding, &ty.shape)
            .map(|_| ())
            .map_err(|e| PartitionError::sharding(e).at_value(name))
    }

    /// Give op result `v` of the local function the local shape of `slot`.
    pub(super) fn set_local_type(&mut self, v: ValueId, slot: Slot) {
        self.local_func.value_mut(v).ty.shape = self.values[slot].layout.local_shape.clone();
    }

    /// Emit one planned collective from `input`.
    pub(super) fn emit(
        &mut self,
        step: PlannedStep,
        input: Slot,
        at: &str,
    ) -> Result<Slot, PartitionError> {
        let src = self.values[input].clone();
        let k = self.values.len();
        let out = self.add_value(
            &format!("{}.r{k}", src.name),
            src.global.clone(),
            step.after,
        )?;
        let bytes = if step.kind.moves_data() {
            src.local_bytes().max(self.values[out].local_bytes())
        } else {
            0
        };
        let groups = match &step.kind {
            CollectiveKind::CollectivePermute(_) => self.all_devices(),
            _ => self
                .groups_over(&step.axes)
                .map_err(|e| PartitionError::Value {
                    value: src.name.clone(),
                    message: e.to_string(),
                })?,
        };
        self.steps.push(Step::Collective(Collective {
            kind: step.kind,
            input,
            extra_inputs: Vec::new(),
            output: out,
            axes: step.axes,
            groups,
            dtype: src.global.dtype,
            bytes,
            at: at.to_string(),
        }));
        Ok(out)
    }

    /// An explicit `sdy.all_reduce` (Shardy's export inserts them where a use
    /// drops unreduced axes): the axes of `reduction_axes` that `slot` is
    /// still partial over are reduced by one all-reduce (by the sharding's
    /// declared reduction); a slot the producing op already finished needs
    /// none. The rest moves to `out_sharding` as a reshard would.
    fn all_reduce(
        &mut self,
        slot: Slot,
        reduction_axes: &[AxisRef],
        out_sharding: &TensorSharding,
        at: &str,
    ) -> Result<Slot, PartitionError> {
        let partial = self.values[slot].sharding.clone();
        let axes: Vec<AxisRef> = partial
            .unreduced
            .iter()
            .filter(|a| reduction_axes.contains(a))
            .cloned()
            .collect();
        let mut cur = slot;
        if !axes.is_empty() {
            let kind = declared_kind(partial.reduction);
            let mut after = partial.clone();
            after.unreduced.retain(|a| !axes.contains(a));
            if after.unreduced.is_empty() {
                after.reduction = crate::sharding::Reduction::Sum;
            }
            let axes = self.sorted_axes(axes);
            let step = PlannedStep {
                kind: CollectiveKind::AllReduce(kind),
                axes,
                after,
            };
            cur = self.emit(step, cur, at)?;
        }
        let target = self.concrete(out_sharding.clone());
        let still = &self.values[cur].sharding;
        if !still.unreduced.is_empty() {
            let moves = still
                .dims
                .iter()
                .zip(&target.dims)
                .any(|(a, b)| a.axes != b.axes);
            if moves {
                return Err(PartitionError::Value {
                    value: at.to_string(),
                    message: format!(
                        "sdy.all_reduce out_sharding {} moves dims of a value still partial over {:?}",
                        out_sharding.to_bare(),
                        still.unreduced.iter().map(|a| a.to_string()).collect::<Vec<_>>()
                    ),
                });
            }
            return Ok(cur);
        }
        self.reshard(cur, &target, at)
    }

    /// Reshard `slot` (not partial) to `target`; returns the slot holding it.
    pub(super) fn reshard(
        &mut self,
        slot: Slot,
        target: &TensorSharding,
        at: &str,
    ) -> Result<Slot, PartitionError> {
        let src = self.values[slot].clone();
        if target.rank() != src.global.rank() {
            return Err(PartitionError::Value {
                value: src.name.clone(),
                message: format!(
                    "sharding {} has rank {} but the value is {}",
                    target.to_bare(),
                    target.rank(),
                    src.global
                ),
            });
        }
        ShardLayout::new(&self.mesh, target, &src.global.shape)
            .map_err(|e| PartitionError::sharding(e).at_value(&src.name))?;
        let plan = plan_reshard_within(
            &self.mesh,
            &self.fixed_axes,
            &src.sharding,
            target,
            &src.global.shape,
            src.global.dtype.size_bytes(),
            self.model,
        )
        .map_err(|e| e.at_value(&src.name))?;
        let mut cur = slot;
        for step in plan {
            cur = self.emit(step, cur, at)?;
        }
        Ok(cur)
    }

    fn partition_op(&mut self, func: &Func, id: OpId) -> Result<(), PartitionError> {
        let op = func.op(id);
        let Some(rule) = op.rule.clone().or_else(|| rule_for(func, op)) else {
            return self.partition_replicated(func, id);
        };
        let operand_slots = self.slots(func, &op.operands)?;
        let targets: Vec<TensorSharding> =
            op.results.iter().map(|&r| self.declared(func, r)).collect();
        for (&r, t) in op.results.iter().zip(&targets) {
            let v = func.value(r);
            self.check(&v.name, &v.ty, t)?;
        }
        let reduction = partial_kind(func, op);
        let stackable = reduction.is_none() && super::combine::stackable(func, op);
        let choose = |reduction_first| {
            self.choose_factors(
                op,
                &rule,
                &operand_slots,
                &targets,
                reduction.is_some() || stackable,
                reduction_first,
            )
        };
        let mut factors = choose(false);
        if reduction.is_some() {
            // Keeping the contraction sharded (partial result, reduce-scatter)
            // may beat gathering operands for the result's sharding.
            let alt = choose(true);
            if alt != factors {
                let cost = |f: &[Vec<AxisRef>]| {
                    self.factors_cost(func, op, &rule, &operand_slots, f, &targets)
                        .unwrap_or(f64::INFINITY)
                };
                if cost(&alt) < cost(&factors) {
                    factors = alt;
                }
            }
        }
        let first_result = op
            .results
            .first()
            .map(|&r| func.value(r).name.clone())
            .unwrap_or_default();
        // Operands to the op's factor sharding.
        let mut local_operands = Vec::with_capacity(operand_slots.len());
        for (i, &slot) in operand_slots.iter().enumerate() {
            let want = self.unproject(&factors, &rule, &rule.operand_mappings[i], Vec::new());
            local_operands.push(self.reshard(slot, &want, &first_result)?);
        }
        // The local op, its results possibly partial.
        let unreduced = self.sorted_axes(
            rule.reduction_factors
                .iter()
                .flat_map(|&f| factors[f].iter().cloned())
                .collect(),
        );
        let mut local_results = Vec::with_capacity(op.results.len());
        for (i, &r) in op.results.iter().enumerate() {
            let v = func.value(r);
            let s = self.unproject(&factors, &rule, &rule.result_mappings[i], unreduced.clone());
            let slot = self.add_value(&v.name, v.ty.clone(), s)?;
            self.set_local_type(r, slot);
            local_results.push(slot);
        }
        self.localize_attrs(func, id, &local_operands);
        let masks = masks_for(func, op, local_operands.len());
        self.steps.push(Step::Local {
            op: id,
            operands: local_operands.clone(),
            results: local_results.clone(),
            masks,
            device_block: false,
        });
        let mut reduction = reduction;
        let mut mean_divide = None;
        if let Some(m) = self.avg_mean(func, op, reduction, &local_operands, &unreduced) {
            let k: u64 = unreduced
                .iter()
                .map(|a| a.size(&self.mesh).unwrap_or(1))
                .product();
            local_results[0] = self.local_mean(op, op.results[0], local_results[0], m.count / k)?;
            reduction = Some(CollectiveReduction::Avg);
            mean_divide = Some(m.divide);
        }
        if stackable && !unreduced.is_empty() {
            let n = op.results.len();
            local_results =
                self.combine_partials(func, id, &local_results, &local_operands[n..])?;
        }
        // Results to their propagated shardings.
        for (i, &r) in op.results.iter().enumerate() {
            let name = func.value(r).name.clone();
            let mut slot = local_results[i];
            if !self.values[slot].sharding.unreduced.is_empty() {
                let kind =
                    reduction.ok_or_else(|| op_error(op, "partial result of a non-reducing op"))?;
                check_declared_kind(op, &self.values[slot].sharding, &targets[i], kind)?;
                slot = self.finish_partial(slot, kind, &targets[i], &name)?;
            }
            slot = self.reshard(slot, &targets[i], &name)?;
            self.slot_of[r.0 as usize] = Some(slot);
        }
        if let Some(divide) = mean_divide {
            self.means.insert(
                divide,
                self.slot_of[op.results[0].0 as usize].expect("set above"),
            );
        }
        Ok(())
    }

    /// The mean `op` computes, when the user asked for averaging collectives
    /// and its partial sum (unreduced over `unreduced`) comes from reduced
    /// dims that those axes split into equal parts.
    fn avg_mean(
        &self,
        func: &Func,
        op: &Op,
        reduction: Option<CollectiveReduction>,
        local_operands: &[Slot],
        unreduced: &[AxisRef],
    ) -> Option<super::mean::MeanPattern> {
        if !self.opts.avg_means
            || reduction != Some(CollectiveReduction::Sum)
            || unreduced.is_empty()
        {
            return None;
        }
        let OpKind::Reduce { dims } = &op.kind else {
            return None;
        };
        let input = &self.values[*local_operands.first()?];
        let even = dims.iter().all(|&d| {
            let d = d as usize;
            input.layout.local_shape[d] * input.layout.shards[d] == input.global.shape[d]
        });
        even.then(|| mean_pattern(func, op)).flatten()
    }

    /// Axes sorted in mesh order (for unreduced lists and collective axes).
    pub(super) fn sorted_axes(&self, mut axes: Vec<AxisRef>) -> Vec<AxisRef> {
        axes.sort_by(|a, b| a.mesh_cmp(b, &self.mesh));
        axes
    }

    /// Cost of computing `op` with `factors`: resharding its operands, then
    /// finishing and resharding its results to `targets`.
    fn factors_cost(
        &self,
        func: &Func,
        op: &Op,
        rule: &OpShardingRule,
        operand_slots: &[Slot],
        factors: &[Vec<AxisRef>],
        targets: &[TensorSharding],
    ) -> Result<f64, PartitionError> {
        let mut cost = 0.0;
        for (i, &slot) in operand_slots.iter().enumerate() {
            let want = self.unproject(factors, rule, &rule.operand_mappings[i], Vec::new());
            let v = &self.values[slot];
            cost += self.move_cost(&v.global, &v.sharding, &want)?;
        }
        let unreduced = self.sorted_axes(
            rule.reduction_factors
                .iter()
                .flat_map(|&f| factors[f].iter().cloned())
                .collect(),
        );
        for (i, (&r, target)) in op.results.iter().zip(targets).enumerate() {
            let s = self.unproject(factors, rule, &rule.result_mappings[i], unreduced.clone());
            cost += self.move_cost(&func.value(r).ty, &s, target)?;
        }
        Ok(cost)
    }

    /// Per factor, the axes the op computes with: the result's factors from
    /// its target sharding, then factors only operands have from the largest
    /// operand that shards them, minus axes already used (`reduction_first`:
    /// the operands' factors first, the result's then get what is left).
    fn choose_factors(
        &self,
        op: &Op,
        rule: &OpShardingRule,
        operand_slots: &[Slot],
        targets: &[TensorSharding],
        partial_ok: bool,
        reduction_first: bool,
    ) -> Vec<Vec<AxisRef>> {
        let n = rule.num_factors();
        let mesh = &self.mesh;
        let project = |s: &TensorSharding, m: &[Vec<usize>]| {
            TensorFactorShardings::project(Some(s), m, &rule.factor_sizes, mesh, true)
        };
        let in_result: Vec<bool> = (0..n)
            .map(|f| {
                rule.result_mappings
                    .iter()
                    .flatten()
                    .flatten()
                    .any(|&g| g == f)
            })
            .collect();
        let mut axes: Vec<Vec<AxisRef>> = vec![Vec::new(); n];
        let mut used: Vec<AxisRef> = Vec::new();
        // The longest prefix of `cand` sharing no devices with `used`.
        let take = |cand: &[AxisRef], used: &mut Vec<AxisRef>| -> Vec<AxisRef> {
            let keep: Vec<AxisRef> = cand
                .iter()
                .take_while(|a| !used.iter().any(|u| shares_devices(u, a, mesh)))
                .cloned()
                .collect();
            used.extend(keep.iter().cloned());
            keep
        };
        let result_factors = |axes: &mut Vec<Vec<AxisRef>>, used: &mut Vec<AxisRef>| {
            // Only the first result decides (the others reshard after).
            if let Some(t) = targets.first() {
                let p = project(t, &rule.result_mappings[0]);
                for (&f, fs) in &p.factors {
                    if axes[f].is_empty() && fs.overflow.is_empty() {
                        axes[f] = take(&fs.axes, used);
                    }
                }
            }
        };
        // Factors only operands have: from the largest operand that shards them.
        let operand_factors = |axes: &mut Vec<Vec<AxisRef>>, used: &mut Vec<AxisRef>| {
            for f in (0..n).filter(|&f| !in_result[f]) {
                let mut best: Option<(u64, Vec<AxisRef>)> = None;
                for (i, &slot) in operand_slots.iter().enumerate() {
                    let p = project(&self.values[slot].sharding, &rule.operand_mappings[i]);
                    if let Some(fs) = p.factors.get(&f) {
                        if fs.axes.is_empty() || !fs.overflow.is_empty() {
                            continue;
                        }
                        let bytes = self.values[slot].global.size_bytes();
                        if best.as_ref().map_or(true, |b| bytes > b.0) {
                            best = Some((bytes, fs.axes.clone()));
                        }
                    }
                }
                if let Some((_, cand)) = best {
                    axes[f] = take(&cand, used);
                }
            }
        };
        if reduction_first {
            operand_factors(&mut axes, &mut used);
            result_factors(&mut axes, &mut used);
        } else {
            result_factors(&mut axes, &mut used);
            operand_factors(&mut axes, &mut used);
        }
        for &f in rule
            .need_replication_factors
            .iter()
            .chain(&rule.permutation_factors)
        {
            axes[f].clear();
        }
        if !partial_ok {
            for &f in &rule.reduction_factors {
                axes[f].clear();
            }
        }
        if matches!(op.kind, OpKind::DynamicUpdateSlice) {
            // Update dims smaller than the operand's: replicate the operand's dim too.
            let full: Vec<usize> = rule.result_mappings[0].iter().flatten().copied().collect();
            let upd: BTreeSet<usize> = rule.operand_mappings[1].iter().flatten().copied().collect();
            for f in full {
                if !upd.contains(&f) {
                    axes[f].clear();
                }
            }
        }
        // A factor in a multi-factor dim (reshape) must divide evenly and follow
        // fully sharded factors; otherwise it is replicated.
        loop {
            let mut changed = false;
            for dims in rule.operand_mappings.iter().chain(&rule.result_mappings) {
                for dim in dims.iter().filter(|d| d.len() > 1) {
                    let mut blocked = false;
                    for &f in dim {
                        let count: u64 =
                            axes[f].iter().map(|a| a.size(mesh).unwrap_or(1)).product();
                        if blocked || rule.factor_sizes[f] % count != 0 {
                            if !axes[f].is_empty() {
                                axes[f].clear();
                                changed = true;
                            }
                            blocked = true;
                            continue;
                        }
                        if count < rule.factor_sizes[f] {
                            blocked = true;
                        }
                    }
                }
            }
            if !changed {
                break;
            }
        }
        axes
    }

    /// A tensor sharding from factor axes through `mapping`.
    fn unproject(
        &self,
        factors: &[Vec<AxisRef>],
        rule: &OpShardingRule,
        mapping: &[Vec<usize>],
        unreduced: Vec<AxisRef>,
    ) -> TensorSharding {
        let mut t = TensorFactorShardings::default();
        for dim in mapping {
            for &f in dim {
                t.factors.insert(
                    f,
                    FactorSharding {
                        axes: factors[f].clone(),
                        is_closed: true,
                        is_minor_most: false,
                        overflow: Vec::new(),
                    },
                );
            }
        }
        t.unreduced = unreduced;
        t.unproject(mapping, &rule.factor_sizes, &self.mesh_name, &self.mesh)
    }

    /// Rewrite attributes that hold global sizes of unsharded-by-the-op dims.
    fn localize_attrs(&mut self, func: &Func, id: OpId, operands: &[Slot]) {
        let op = func.op(id);
        let Some(&first) = operands.first() else {
            return;
        };
        let in_local = self.values[first].layout.local_shape.clone();
        let in_global = self.values[first].global.shape.clone();
        let out_global = op
            .results
            .first()
            .map(|&r| func.value(r).ty.shape.clone())
            .unwrap_or_default();
        let local = self.local_func.op_mut(id);
        match &mut local.kind {
            OpKind::Slice {
                start,
                limit,
                strides,
            } => {
                for d in 0..in_local.len() {
                    if in_global[d] == out_global[d] {
                        start[d] = 0;
                        limit[d] = in_local[d] as i64;
                        strides[d] = 1;
                    }
                }
            }
            OpKind::DynamicSlice { sizes } => {
                for d in 0..in_local.len() {
                    if in_global[d] == out_global[d] {
                        sizes[d] = in_local[d];
                    }
                }
            }
            OpKind::Gather { slice_sizes, .. } => {
                // A dim sliced whole may be sharded: its slice is the local block.
                for d in 0..in_local.len().min(slice_sizes.len()) {
                    if slice_sizes[d] == in_global[d] {
                        slice_sizes[d] = in_local[d];
                    }
                }
            }
            _ => {}
        }
    }
}

/// How an op's padded operands are masked before it runs.
fn masks_for(func: &Func, op: &Op, n: usize) -> Vec<Mask> {
    match op.kind {
        // Padded update rows of a scatter-add add nothing.
        OpKind::Scatter { .. } if n == 3 && is_scatter_add(func, op) => {
            vec![Mask::None, Mask::None, Mask::Zero]
        }
        OpKind::Reduce { .. } => {
            let k = n / 2;
            (0..n)
                .map(|i| {
                    if i < k {
                        Mask::ReduceInit {
                            init_operand: k + i,
                        }
                    } else {
                        Mask::None
                    }
                })
                .collect()
        }
        OpKind::Dot { .. } | OpKind::DotGeneral { .. } => vec![Mask::Zero; n],
        _ => vec![Mask::None; n],
    }
}

/// The collective reduction that finishes a partial result of `op`, when the
/// op may compute one: dots sum; a single-input reduce whose body is one of
/// add/mul/max/min (and/or on booleans) with an identity init value.
fn partial_kind(func: &Func, op: &Op) -> Option<CollectiveReduction> {
    match &op.kind {
        OpKind::Dot { .. } | OpKind::DotGeneral { .. } => Some(CollectiveReduction::Sum),
        // A gather from a table sharded on an indexed dim: each device gathers
        // the rows it holds and zeros the rest (see exec), so the results sum.
        OpKind::Gather { .. } => Some(match func.value(op.results[0]).ty.dtype {
            DType::I1 => CollectiveReduction::Max,
            _ => CollectiveReduction::Sum,
        }),
        // A scatter-add into zeros (JAX's gradient of a gather): each device
        // adds the updates it holds into zeros, so the partial tables sum (as
        // XLA does) instead of gathering the updates.
        OpKind::Scatter { .. }
            if op.operands.len() == 3
                && is_scatter_add(func, op)
                && is_zeros(func, op.operands[0]) =>
        {
            Some(CollectiveReduction::Sum)
        }
        OpKind::Reduce { .. } if op.operands.len() == 2 => {
            let kind = reduce_kind_of(func, op.regions.first()?)?;
            let init = op.operands[1];
            let dtype = func.value(init).ty.dtype;
            let value = constant_scalar(func, init)?;
            let (reduction, identity_ok) = match kind {
                ReduceKind::Add => (CollectiveReduction::Sum, value == 0.0),
                ReduceKind::Mul => (CollectiveReduction::Prod, value == 1.0),
                ReduceKind::Max => (
                    CollectiveReduction::Max,
                    value == f64::NEG_INFINITY || is_int_extreme(dtype, value, false),
                ),
                ReduceKind::Min => (
                    CollectiveReduction::Min,
                    value == f64::INFINITY || is_int_extreme(dtype, value, true),
                ),
                // Booleans: and is min, or is max over {0, 1}.
                ReduceKind::And => (CollectiveReduction::Min, dtype == DType::I1 && value == 1.0),
                ReduceKind::Or => (CollectiveReduction::Max, dtype == DType::I1 && value == 0.0),
            };
            identity_ok.then_some(reduction)
        }
        _ => None,
    }
}

fn is_int_extreme(dtype: DType, v: f64, max: bool) -> bool {
    let (lo, hi) = match dtype {
        DType::I8 => (i8::MIN as f64, i8::MAX as f64),
        DType::I32 => (i32::MIN as f64, i32::MAX as f64),
        DType::I64 => (i64::MIN as f64, i64::MAX as f64),
        DType::UI8 => (0.0, u8::MAX as f64),
        DType::UI32 => (0.0, u32::MAX as f64),
        DType::UI64 => (0.0, u64::MAX as f64),
        _ => return false,
    };
    if max {
        v == hi
    } else {
        v == lo
    }
}

/// The value of a scalar constant operand.
/// A single-operand scatter whose region adds.
fn is_scatter_add(func: &Func, op: &Op) -> bool {
    op.regions
        .first()
        .and_then(|r| reduce_kind_of(func, r))
        .is_some_and(|k| matches!(k, ReduceKind::Add))
}

/// `v` is all zeros: a zero constant or a broadcast of one.
fn is_zeros(func: &Func, v: ValueId) -> bool {
    let crate::ir::ValueDef::Result { op, .. } = func.value(v).def else {
        return false;
    };
    match &func.op(op).kind {
        OpKind::Constant { value, .. } => value
            .to_f64s(&func.value(v).ty)
            .is_some_and(|x| x.iter().all(|&e| e == 0.0)),
        OpKind::BroadcastInDim { .. } => {
            constant_scalar(func, func.op(op).operands[0]) == Some(0.0)
        }
        _ => false,
    }
}

fn constant_scalar(func: &Func, v: ValueId) -> Option<f64> {
    let crate::ir::ValueDef::Result { op, .. } = func.value(v).def else {
        return None;
    };
    let OpKind::Constant { value, .. } = &func.op(op).kind else {
        return None;
    };
    value.to_f64s(&func.value(v).ty)?.first().copied()
}

/// True when two axis references share mesh devices (a full axis shares with
/// anything of its name, even a size-1 axis, whose span is empty).
fn shares_devices(a: &AxisRef, b: &AxisRef, mesh: &Mesh) -> bool {
    a.name == b.name && (a.sub.is_none() || b.sub.is_none() || a.overlaps(b, mesh))
}
