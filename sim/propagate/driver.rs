//! The program-level propagation driver, Shardy's pipeline on our IR:
//!
//! 1. import: a sharding constraint's sharding becomes its result's sharding,
//!    and is applied to its input when that input has none, the constraint is
//!    fully closed and no other constraint on the input disagrees; sharding
//!    groups start from their members' common sharding;
//! 2. propagation: a worklist over ops (pre-order, then LIFO as ops change),
//!    each op projected onto its rule's factors and updated by factor
//!    propagation, repeated until nothing changes; function results exchange
//!    shardings with the returned values before and after. The op-priority
//!    schedule runs it three times (pass-through ops first, then
//!    pass-through factors with broadcasts only backward, then everything), and
//!    user priorities run that schedule once per priority level;
//! 3. export: every sharding is closed, constraints become `sdy.reshard`, and
//!    every op with a rule carries it.

use std::collections::BTreeMap;

use crate::ir::{Func, Module, OpId, OpKind, OpShardingRule, ValueId};
use crate::mesh::Mesh;
use crate::rules::rule_for_mode;
use crate::sharding::{MeshRef, TensorSharding};

use super::factor::{propagate_factors, Direction, FactorContext, FactorStrategy};
use super::manual::{self as manual_edges, ManualView};
use super::projection::{Projection, TensorFactorShardings};

/// The propagation strategy (`--strategy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Strategy {
    /// Basic factor propagation, every op in both directions.
    Basic,
    /// Basic propagation that never splits a mesh axis into sub-axes
    /// (Shardy's `-sdy-basic-propagate="conservative-propagation=true"`).
    BasicConservative,
    /// Aggressive factor propagation, every op in both directions.
    Aggressive,
    /// The op-priority schedule with aggressive factor propagation.
    OpPriority,
    /// User priorities as outer iterations around the op-priority schedule (JAX's default).
    #[default]
    UserPriority,
}

/// Why propagation could not run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PropagateError {
    #[error("{0}")]
    Invalid(String),
}

/// One change of a value's sharding, for `--explain`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// The value changed.
    pub value: ValueId,
    /// The new sharding.
    pub sharding: TensorSharding,
    /// What did it: `import`, an op, `func result`, `sharding group`.
    pub cause: String,
    /// The pass: strategy, op-priority level, user-priority level.
    pub pass: String,
}

/// What propagation did to a function.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Every change, in order, per function name.
    pub steps: BTreeMap<String, Vec<Step>>,
}

/// A unit of propagation: an op with its rule, or an identity edge between two
/// values (named computation and call arguments/results, data-flow edges,
/// barriers), with everything a visit needs precomputed.
#[derive(Debug, Clone)]
struct Unit {
    op: OpId,
    rule: OpShardingRule,
    class: OpClass,
    /// Operands then results.
    tensors: Vec<ValueId>,
    n_operands: usize,
    /// An edge's own direction (None for ops).
    fixed_dir: Option<Direction>,
    /// A partially manual computation's edge: how it sees one of its tensors.
    manual: Option<ManualView>,
    /// Some non-scalar operand has other uses (the op-priority schedule's
    /// first pass leaves such ops alone).
    multi_use: bool,
}

impl Unit {
    /// An identity edge from `source` to `target`.
    fn edge(
        func: &Func,
        op: OpId,
        source: ValueId,
        target: ValueId,
        direction: Direction,
        class: OpClass,
    ) -> Unit {
        let ty = &func.value(source).ty;
        Unit {
            op,
            rule: identity_rule_sized(&ty.shape, ty.rank()),
            class,
            tensors: vec![source, target],
            n_operands: 1,
            fixed_dir: Some(direction),
            multi_use: false,
            manual: None,
        }
    }

    /// A data-flow edge with several sources (a case's branches) and one
    /// target, all seen at once as Shardy does: where the sources conflict
    /// the target gets their compatible major axes, not the first source's.
    fn edge_from_many(
        func: &Func,
        op: OpId,
        sources: Vec<ValueId>,
        target: ValueId,
        class: OpClass,
    ) -> Unit {
        let ty = &func.value(target).ty;
        let mut rule = identity_rule_sized(&ty.shape, ty.rank());
        rule.operand_mappings = vec![rule.result_mappings[0].clone(); sources.len()];
        let n_operands = sources.len();
        let mut tensors = sources;
        tensors.push(target);
        Unit {
            op,
            rule,
            class,
            tensors,
            n_operands,
            fixed_dir: Some(Direction::Both),
            multi_use: false,
            manual: None,
        }
    }
}

/// What the op-priority schedule needs to know about an op.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OpClass {
    /// Elementwise ops (and constraints, reshards): pass-through, no sideways propagation.
    Elementwise,
    /// Reshape, transpose, data-flow edges: pass-through.
    PassThrough,
    /// dynamic_slice, dynamic_update_slice: pass-through forward only.
    ForwardOnly,
    /// broadcast_in_dim: backward in the second pass.
    Broadcast,
    /// A propagation barrier: its own direction in every pass.
    Barrier,
    Other,
}

fn classify(kind: &OpKind) -> OpClass {
    match kind {
        k if k.is_elementwise() => OpClass::Elementwise,
        OpKind::CustomCall { target }
            if crate::ir::attrs::IDENTITY_CUSTOM_CALLS.contains(&target.as_str()) =>
        {
            OpClass::Elementwise
        }
        OpKind::PropagationBarrier { .. } => OpClass::Barrier,
        // Named computations and calls propagate through data-flow edges, which are pass-through.
        OpKind::Reshape
        | OpKind::Transpose { .. }
        | OpKind::DataFlowEdge { .. }
        | OpKind::NamedComputation { .. }
        | OpKind::Call { .. }
        | OpKind::While
        | OpKind::Case
        | OpKind::If
        | OpKind::OptimizationBarrier => OpClass::PassThrough,
        OpKind::DynamicSlice { .. } | OpKind::DynamicUpdateSlice => OpClass::ForwardOnly,
        OpKind::BroadcastInDim { .. } => OpClass::Broadcast,
        _ => OpClass::Other,
    }
}

/// Per-function state.
struct State<'m> {
    meshes: &'m [(String, Mesh)],
    units: std::rc::Rc<Vec<Unit>>,
    /// Units touching each value (as operand/source or result/target).
    touching: Vec<Vec<usize>>,
    /// Sharding group of each value and the group's members.
    group_of: Vec<Option<usize>>,
    groups: Vec<Vec<ValueId>>,
    steps: Vec<Step>,
    pass: String,
    /// Units whose tensors changed since their last visit (or whose last
    /// visit changed something): only these can move in an op-priority
    /// pass that gives them no new direction.
    dirty: Vec<bool>,
    /// Never split an axis into sub-axes (the conservative strategy).
    conservative: bool,
}

/// Options of Shardy's propagation pipeline beyond the strategy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Options {
    /// Shardy's `dedup-functions-fully=true`: a function called from several
    /// places is one function for all of them, so every call sees the same
    /// shardings of its values (by default each call propagates on its own
    /// and a callee called with different shardings is cloned).
    pub dedup_functions_fully: bool,
}

/// Run propagation on every function of `module` (in place) and report the steps.
///
/// Functions reached through `func.call` are propagated as if inlined into
/// each caller; a callee called with different shardings is cloned (`@f_0`,
/// as Shardy names clones), calls with equal shardings share one function.
pub fn propagate_module(module: &mut Module, strategy: Strategy) -> Result<Report, PropagateError> {
    propagate_module_with(module, strategy, Options::default())
}

/// [`propagate_module`] with the pipeline's options.
pub fn propagate_module_with(
    module: &mut Module,
    strategy: Strategy,
    options: Options,
) -> Result<Report, PropagateError> {
    super::meshes::lift_inlined_meshes(module);
    let meshes = module.meshes.clone();
    let tokens = TokenShardings::record(module);
    let mut report = Report::default();
    let called: std::collections::BTreeSet<String> = module
        .funcs
        .iter()
        .flat_map(|f| f.ops.iter())
        .filter_map(|op| match &op.kind {
            OpKind::Call { callee } => Some(callee.clone()),
            _ => None,
        })
        .collect();
    // Per root function, its calls (nested ones too) and their shardings.
    let mut calls: BTreeMap<usize, Vec<super::calls::CallInstance>> = BTreeMap::new();
    // Group ids are module-wide (Shardy's ShardingGroupMap): a group's sharding
    // found in one function reaches its members in the functions after it.
    let mut group_shardings: BTreeMap<i64, TensorSharding> = BTreeMap::new();
    for i in 0..module.funcs.len() {
        if called.contains(&module.funcs[i].name) {
            continue;
        }
        let mut func = module.funcs[i].clone();
        super::groups::decouple_conflicting_groups(&mut func);
        super::groups::seed_from_other_functions(&mut func, &group_shardings);
        let split = super::split::split_constants(&mut func);
        let inlined =
            super::calls::add_call_bodies(module, &mut func).map_err(PropagateError::Invalid)?;
        let shared = match options.dedup_functions_fully {
            true => inlined.copies_of_shared_callees(),
            false => Vec::new(),
        };
        let steps = propagate_func(&mut func, &meshes, strategy, shared)?;
        super::groups::record_group_shardings(&func, &mut group_shardings);
        calls.insert(i, super::calls::remove_call_bodies(&mut func, inlined));
        let values_len = split.values_len();
        let moved = super::split::merge_copies(&mut func, split);
        // Steps on folded copies go; steps on kept copies follow their new ids.
        let steps = steps
            .into_iter()
            .filter_map(|mut s| {
                let i = s.value.0 as usize;
                if i >= values_len {
                    s.value = (*moved.get(i - values_len)?)?;
                }
                Some(s)
            })
            .collect();
        report.steps.insert(func.name.clone(), steps);
        module.funcs[i] = func;
    }
    tokens.restore(module);
    // Each call's callee with that call's shardings: one function per
    // distinct sharding (Shardy's flatten and unflatten of the call graph).
    super::clones::unflatten(module, &calls, options.dedup_functions_fully);
    // Callees (and their clones) are written back from their callers'
    // copies: their constraints become reshards here.
    for f in &mut module.funcs {
        constraints_to_reshards(f);
    }
    // Export's canonicalization drops the constraints nothing uses (a
    // function's steps follow its values' new ids).
    for f in &mut module.funcs {
        if let Some(map) = super::dead::remove_unused_constraints(f) {
            if let Some(steps) = report.steps.get_mut(&f.name) {
                steps.retain_mut(|s| match map.get(s.value.0 as usize).copied().flatten() {
                    Some(v) => {
                        s.value = v;
                        true
                    }
                    None => false,
                });
            }
        }
    }
    // Export's explicit all-reduces where a use drops unreduced axes (new
    // values follow the others: the steps' ids stay).
    super::unreduced::insert_all_reduces(module);
    Ok(report)
}

/// The shardings of every `!stablehlo.token` value and result as written:
/// a token holds no data, so propagation never gives it a sharding (Shardy
/// skips tokens) and keeps one the user wrote.
struct TokenShardings {
    /// Per function: (value index, sharding) and (result index, sharding).
    funcs: Vec<TokenFunc>,
}

type TokenFunc = (
    Vec<(usize, Option<TensorSharding>)>,
    Vec<(usize, Option<TensorSharding>)>,
);

impl TokenShardings {
    fn record(module: &Module) -> TokenShardings {
        let funcs = module
            .funcs
            .iter()
            .map(|f| {
                let values = (f.values.iter().enumerate())
                    .filter(|(_, v)| v.ty.is_token())
                    .map(|(i, v)| (i, v.sharding.clone()))
                    .collect();
                let results = (f.result_types.iter().enumerate())
                    .filter(|(_, t)| t.is_token())
                    .map(|(i, _)| (i, f.result_shardings.get(i).cloned().flatten()))
                    .collect();
                (values, results)
            })
            .collect();
        TokenShardings { funcs }
    }

    fn restore(self, module: &mut Module) {
        for (f, (values, results)) in module.funcs.iter_mut().zip(self.funcs) {
            for (i, s) in values {
                if let Some(v) = f.values.get_mut(i) {
                    v.sharding = s;
                }
            }
            for (i, s) in results {
                if let Some(r) = f.result_shardings.get_mut(i) {
                    *r = s;
                }
            }
        }
    }
}

fn identity_rule(rank: usize) -> OpShardingRule {
    OpShardingRule {
        factor_sizes: vec![1; rank],
        operand_mappings: vec![(0..rank).map(|d| vec![d]).collect()],
        result_mappings: vec![(0..rank).map(|d| vec![d]).collect()],
        ..OpShardingRule::default()
    }
}

fn propagate_func(
    func: &mut Func,
    meshes: &[(String, Mesh)],
    strategy: Strategy,
    shared: Vec<Vec<ValueId>>,
) -> Result<Vec<Step>, PropagateError> {
    let mut st = State {
        meshes,
        units: std::rc::Rc::new(Vec::new()),
        touching: vec![Vec::new(); func.values.len()],
        group_of: vec![None; func.values.len()],
        groups: Vec::new(),
        steps: Vec::new(),
        pass: "import".into(),
        dirty: Vec::new(),
        conservative: strategy == Strategy::BasicConservative,
    };
    import(func, &mut st)?;
    share_callee_copies(func, &mut st, shared);
    build_units(func, &mut st);

    let levels = user_priorities(func);
    match strategy {
        Strategy::Basic => run(func, &mut st, FactorStrategy::Basic, None, "basic"),
        Strategy::BasicConservative => run(
            func,
            &mut st,
            FactorStrategy::Basic,
            None,
            "basic conservative",
        ),
        Strategy::Aggressive => run(
            func,
            &mut st,
            FactorStrategy::Aggressive,
            None,
            "aggressive",
        ),
        Strategy::OpPriority => op_priority(func, &mut st, ""),
        Strategy::UserPriority => match levels.is_empty() {
            true => op_priority(func, &mut st, ""),
            false => {
                // Each level sees only dims of priority <= level; the rest wait.
                // Only the levels some dim uses (and 0) run, as in Shardy: a
                // level no dim names changes nothing, so `p4294967295` costs
                // one level, not four billion.
                let saved: Vec<Option<TensorSharding>> =
                    func.values.iter().map(|v| v.sharding.clone()).collect();
                let saved_results = func.result_shardings.clone();
                for level in levels {
                    restrict_to_priority(func, &saved, &saved_results, level);
                    op_priority(func, &mut st, &format!("user priority p{level}, "));
                }
            }
        },
    }
    export(func, &st);
    Ok(st.steps)
}

/// The `p<N>` levels the function's shardings use, ascending, with 0 first
/// (empty when no sharding has a priority).
fn user_priorities(func: &Func) -> Vec<i64> {
    let used: std::collections::BTreeSet<i64> = func
        .values
        .iter()
        .filter_map(|v| v.sharding.as_ref())
        .chain(func.result_shardings.iter().flatten())
        .flat_map(|s| s.dims.iter().filter_map(|d| d.priority))
        .collect();
    if used.is_empty() {
        return Vec::new();
    }
    std::iter::once(0)
        .chain(used)
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect()
}

/// Shardy's user priorities: before level 0, every dim with a priority above
/// 0 is emptied and closed, its axes added to the replicated ones (so nothing
/// propagates into it or uses them); at level `p > 0`, the dims of priority `p`
/// get their original axes and closedness back, overriding what lower levels
/// propagated, and their axes leave the replicated ones.
fn apply_priority_level(
    current: &mut Option<TensorSharding>,
    original: &Option<TensorSharding>,
    level: i64,
) {
    let (Some(cur), Some(orig)) = (current.as_mut(), original.as_ref()) else {
        return;
    };
    let mut moved: Vec<crate::mesh::AxisRef> = Vec::new();
    for (d, od) in cur.dims.iter_mut().zip(&orig.dims) {
        match od.priority {
            Some(p) if level == 0 && p > 0 => {
                d.axes.clear();
                d.is_closed = true;
                for a in &od.axes {
                    if !cur.replicated.contains(a) {
                        cur.replicated.push(a.clone());
                    }
                }
            }
            Some(p) if level > 0 && p == level => {
                d.axes = od.axes.clone();
                d.is_closed = od.is_closed;
                moved.extend(od.axes.iter().cloned());
            }
            _ => {}
        }
    }
    if !moved.is_empty() {
        cur.replicated
            .retain(|a| !moved.contains(a) || orig.replicated.contains(a));
    }
}

/// [`apply_priority_level`] on every value and function result.
fn restrict_to_priority(
    func: &mut Func,
    saved: &[Option<TensorSharding>],
    saved_results: &[Option<TensorSharding>],
    level: i64,
) {
    for (v, original) in func.values.iter_mut().zip(saved) {
        apply_priority_level(&mut v.sharding, original, level);
    }
    for (r, original) in func.result_shardings.iter_mut().zip(saved_results) {
        apply_priority_level(r, original, level);
    }
}

/// The five passes of the op-priority schedule.
fn op_priority(func: &mut Func, st: &mut State<'_>, prefix: &str) {
    st.dirty = vec![true; st.units.len()];
    for level in 0..5 {
        run(
            func,
            st,
            FactorStrategy::Aggressive,
            Some(level),
            &format!("{prefix}op priority {level}"),
        );
    }
}

/// A factor every tensor shares without reduction, replication or permutation.
fn is_pass_through(rule: &OpShardingRule, f: usize) -> bool {
    !rule.reduction_factors.contains(&f)
        && !rule.need_replication_factors.contains(&f)
        && !rule.permutation_factors.contains(&f)
        && !rule.blocked_propagation_factors.contains(&f)
}

/// The direction an op may propagate factor `f` in op-priority pass `level`
/// (the union of the schedule's first `level + 1` entries, as Shardy's
/// op-priority propagation): 0. pass-through ops none of whose (non-scalar)
/// operands has another use, 1. pass-through ops, 2. pass-through factors
/// (broadcasts backward only), 3. every factor (broadcasts backward only),
/// 4. everything.
fn op_priority_direction(
    level: usize,
    class: OpClass,
    rule: Option<&OpShardingRule>,
    f: usize,
    multi_use: bool,
) -> Direction {
    let pass_through = match class {
        OpClass::Elementwise | OpClass::PassThrough | OpClass::Barrier => Direction::Both,
        OpClass::ForwardOnly => Direction::Forward,
        OpClass::Broadcast | OpClass::Other => Direction::None,
    };
    // A multi-use operand: forward would conflict at each use, backward with
    // the other uses.
    let mut dir = if multi_use {
        Direction::None
    } else {
        pass_through
    };
    if level >= 1 {
        dir = dir.union(pass_through);
    }
    if level >= 2 {
        let second = if rule.is_some_and(|r| !is_pass_through(r, f)) {
            Direction::None
        } else if class == OpClass::Broadcast {
            Direction::Backward
        } else {
            Direction::Both
        };
        dir = dir.union(second);
    }
    if level >= 3 {
        dir = dir.union(if class == OpClass::Broadcast {
            Direction::Backward
        } else {
            Direction::Both
        });
    }
    if level >= 4 {
        dir = Direction::Both;
    }
    dir
}

/// The common mesh of `shardings` (and its name), as Shardy's
/// `getCommonMeshOrRef`: shardings on the empty mesh `<[]>` are placeholders
/// that take any other mesh (so propagation replaces it), meshes with other
/// names but equal axes and device ids are the same mesh (the first name is
/// kept), a maximal mesh is common to nothing, and any other difference
/// means no common mesh.
fn common_mesh<'m>(
    meshes: &'m [(String, Mesh)],
    shardings: &[Option<&TensorSharding>],
) -> Option<(&'m str, &'m Mesh)> {
    let mut found: Option<(&'m str, &'m Mesh)> = None;
    for s in shardings.iter().flatten() {
        let MeshRef::Symbol(n) = &s.mesh else {
            return None;
        };
        let other = meshes
            .iter()
            .find(|(m, _)| m == n)
            .map(|(m, mesh)| (m.as_str(), mesh))?;
        // A maximal sharding (the whole value on one device) is kept as
        // written and never propagates (Shardy's maximal_mesh cases).
        if other.1.is_maximal() {
            return None;
        }
        match found {
            Some((_, mesh)) if !is_empty_mesh(mesh) => {
                if !is_empty_mesh(other.1) && other.1 != mesh {
                    return None;
                }
            }
            _ => found = Some(other),
        }
    }
    found
}

/// Shardy's empty mesh: no axes and no device ids (a maximal mesh is not empty).
fn is_empty_mesh(mesh: &Mesh) -> bool {
    mesh.axes().is_empty() && !mesh.is_maximal()
}

/// Import: constraints' shardings onto their results (and inputs), groups unified.
fn import(func: &mut Func, st: &mut State<'_>) -> Result<(), PropagateError> {
    remove_size_one_axes(func, st.meshes);
    let order = func.walk();
    let mut uses: Vec<Vec<OpId>> = vec![Vec::new(); func.values.len()];
    for &id in &order {
        for &v in &func.op(id).operands {
            uses[v.0 as usize].push(id);
        }
    }
    for &id in &order {
        let op = func.op(id);
        // A reshard's result has the reshard's sharding (it never reaches its
        // input); so has an explicit collective's (an all-reduce a previous
        // export inserted).
        if let OpKind::Reshard { sharding } = &op.kind {
            let (sharding, result) = (sharding.clone(), op.results[0]);
            func.value_mut(result).sharding = Some(sharding);
            continue;
        }
        if let Some(sharding) = op.kind.out_sharding() {
            let (sharding, result) = (sharding.clone(), op.results[0]);
            func.value_mut(result).sharding = Some(sharding);
            continue;
        }
        if let OpKind::ShardingConstraint { sharding } = &op.kind {
            let sharding = sharding.clone();
            let (input, result) = (op.operands[0], op.results[0]);
            func.value_mut(result).sharding = Some(sharding.clone());
            let fully_closed = sharding.dims.iter().all(|d| d.is_closed);
            let disagrees = uses[input.0 as usize]
                .iter()
                .any(|&u| match &func.op(u).kind {
                    OpKind::ShardingConstraint { sharding: other } => other != &sharding,
                    _ => false,
                });
            if func.value(input).sharding.is_none() && fully_closed && !disagrees {
                func.value_mut(input).sharding = Some(sharding.clone());
                st.steps.push(Step {
                    value: input,
                    sharding,
                    cause: format!(
                        "sharding constraint {} applied to its input",
                        func.value(result).name
                    ),
                    pass: "import".into(),
                });
            }
        }
    }
    // Named computations: the block arguments take the in shardings and the
    // results the out shardings (Shardy's data-flow edge owners).
    for &id in &order {
        let op = func.op(id);
        let OpKind::NamedComputation {
            in_shardings,
            out_shardings,
            ..
        } = &op.kind
        else {
            continue;
        };
        let args: Vec<ValueId> = op
            .regions
            .first()
            .map(|r| r.args.clone())
            .unwrap_or_default();
        let pairs: Vec<(ValueId, TensorSharding)> = args
            .iter()
            .copied()
            .zip(in_shardings.iter().flatten().cloned())
            .chain(
                op.results
                    .iter()
                    .copied()
                    .zip(out_shardings.iter().flatten().cloned()),
            )
            .collect();
        for (v, sh) in pairs {
            if func.value(v).sharding.is_none() {
                func.value_mut(v).sharding = Some(sh);
            }
        }
    }
    // Manual computations: results take the out shardings, operands the in
    // shardings (as constraints do), and the body's arguments the in shardings
    // restricted to the free (non-manual) axes, from which the body propagates.
    for &id in &order {
        let op = func.op(id);
        let OpKind::ManualComputation {
            in_shardings,
            out_shardings,
            manual_axes,
        } = &op.kind
        else {
            continue;
        };
        let (ins, outs, manual) = (
            in_shardings.clone(),
            out_shardings.clone(),
            manual_axes.clone(),
        );
        let (operands, results) = (op.operands.clone(), op.results.clone());
        let args: Vec<ValueId> = op
            .regions
            .first()
            .map(|r| r.args.clone())
            .unwrap_or_default();
        let shardings: Vec<Option<&TensorSharding>> = ins.iter().chain(&outs).map(Some).collect();
        let common = common_mesh(st.meshes, &shardings);
        let partial = common.is_some_and(|(_, mesh)| manual_edges::is_partial(mesh, &manual));
        // Shardy's import (sdy-manual-axes-cleanup) lists the manual axes an
        // out-sharding does not use as replicated, so propagation outside never
        // gives them to the result (export drops them again).
        let outs: Vec<TensorSharding> = match common {
            Some((_, mesh)) if partial => outs
                .iter()
                .map(|s| manual_edges::with_unused_manual_replicated(s, &manual, mesh))
                .collect(),
            _ => outs,
        };
        for (&r, s) in results.iter().zip(&outs) {
            func.value_mut(r).sharding = Some(s.clone());
        }
        if partial {
            // Operands and block arguments meet through data-flow edges (see
            // `manual`); each block argument starts from its in-sharding's free part.
            for (&a, s) in args.iter().zip(&ins) {
                func.value_mut(a).sharding = Some(manual_edges::free_part(s, &manual));
            }
            continue;
        }
        for (&o, s) in operands.iter().zip(&ins) {
            let fully_closed = s.dims.iter().all(|d| d.is_closed);
            if func.value(o).sharding.is_none() && fully_closed {
                func.value_mut(o).sharding = Some(s.clone());
            }
        }
        for (&a, s) in args.iter().zip(&ins) {
            let mut free = s.clone();
            let keep =
                |axes: &mut Vec<crate::mesh::AxisRef>| axes.retain(|x| !manual.contains(&x.name));
            for d in &mut free.dims {
                keep(&mut d.axes);
            }
            keep(&mut free.replicated);
            keep(&mut free.unreduced);
            if free.dims.iter().any(|d| !d.axes.is_empty()) {
                func.value_mut(a).sharding = Some(free);
            }
        }
    }
    // Sharding groups: members share one sharding from the start.
    let mut by_id: BTreeMap<i64, Vec<ValueId>> = BTreeMap::new();
    for &id in &order {
        if let OpKind::ShardingGroup { group_id } = &func.op(id).kind {
            by_id
                .entry(*group_id)
                .or_default()
                .push(func.op(id).operands[0]);
        }
    }
    for (gid, members) in by_id {
        // Members that disagreed from the start were decoupled by open
        // constraints (`groups`); a disagreement left is one import made.
        let shardings: Vec<Option<TensorSharding>> = members
            .iter()
            .map(|&m| func.value(m).sharding.clone())
            .collect();
        let (common, conflict) = super::groups::common_sharding(&shardings);
        if conflict {
            return Err(PropagateError::Invalid(format!(
                "sharding group {gid}: its members' shardings disagree after import ({})",
                shardings
                    .iter()
                    .flatten()
                    .map(|s| s.to_bare())
                    .collect::<Vec<_>>()
                    .join(" vs ")
            )));
        }
        let g = st.groups.len();
        for &m in &members {
            st.group_of[m.0 as usize] = Some(g);
            if let Some(c) = &common {
                func.value_mut(m).sharding = Some(c.clone());
            }
        }
        st.groups.push(members);
    }
    Ok(())
}

/// `dedup-functions-fully`: the copies of one callee value in every call
/// share one sharding from the start and through propagation, as members of
/// a sharding group do (a copy already in a group of the user's is left to it).
fn share_callee_copies(func: &mut Func, st: &mut State<'_>, shared: Vec<Vec<ValueId>>) {
    for copies in shared {
        if copies.iter().any(|c| st.group_of[c.0 as usize].is_some()) {
            continue;
        }
        let shardings: Vec<Option<TensorSharding>> = copies
            .iter()
            .map(|&c| func.value(c).sharding.clone())
            .collect();
        let (common, conflict) = super::groups::common_sharding(&shardings);
        let g = st.groups.len();
        for &c in &copies {
            st.group_of[c.0 as usize] = Some(g);
            if let (Some(s), false) = (&common, conflict) {
                func.value_mut(c).sharding = Some(s.clone());
            }
        }
        st.groups.push(copies);
    }
}

/// For each op, whether it sits in a reduce body (scalar code, not distributed values).
fn in_reduce_body(func: &Func) -> Vec<bool> {
    let mut inside = vec![false; func.ops.len()];
    for id in func.walk() {
        let op = func.op(id);
        if op.kind.has_scalar_body() || inside[id.0 as usize] {
            for &inner in op.regions.iter().flat_map(|r| &r.ops) {
                inside[inner.0 as usize] = true;
            }
        }
    }
    inside
}

/// Axes of size 1 shard nothing; Shardy's import drops them from every sharding
/// (otherwise one could appear on two dims, since it overlaps nothing).
fn remove_size_one_axes(func: &mut Func, meshes: &[(String, Mesh)]) {
    let strip = |s: &mut TensorSharding| {
        let Some((_, mesh)) = common_mesh(meshes, &[Some(&*s)]) else {
            return;
        };
        let keep = |a: &crate::mesh::AxisRef| a.size(mesh).map(|n| n > 1).unwrap_or(true);
        for d in &mut s.dims {
            d.axes.retain(keep);
        }
        s.replicated.retain(keep);
        s.unreduced.retain(keep);
    };
    for v in &mut func.values {
        if let Some(s) = v.sharding.as_mut() {
            strip(s);
        }
    }
    for s in func.result_shardings.iter_mut().flatten() {
        strip(s);
    }
    for op in &mut func.ops {
        match &mut op.kind {
            OpKind::ShardingConstraint { sharding }
            | OpKind::Reshard { sharding }
            | OpKind::AllReduce {
                out_sharding: sharding,
                ..
            } => strip(sharding),
            OpKind::ManualComputation {
                in_shardings,
                out_shardings,
                ..
            } => {
                in_shardings
                    .iter_mut()
                    .chain(out_shardings.iter_mut())
                    .for_each(strip);
            }
            _ => {}
        }
    }
}

/// The propagation units of the function, in pre-order.
fn build_units(func: &Func, st: &mut State<'_>) {
    let skip = in_reduce_body(func);
    let mut units: Vec<Unit> = Vec::new();
    let mut uses = vec![0u32; func.values.len()];
    for id in func.walk() {
        for &o in &func.op(id).operands {
            uses[o.0 as usize] = uses[o.0 as usize].saturating_add(1);
        }
    }
    for id in func.walk() {
        if skip[id.0 as usize] {
            continue;
        }
        let op = func.op(id);
        let before = units.len();
        let class = classify(&op.kind);
        match &op.kind {
            OpKind::PropagationBarrier { direction } => {
                let direction = match direction {
                    crate::ir::PropagationDirection::None => Direction::None,
                    crate::ir::PropagationDirection::Forward => Direction::Forward,
                    crate::ir::PropagationDirection::Backward => Direction::Backward,
                    crate::ir::PropagationDirection::Both => Direction::Both,
                };
                units.push(Unit::edge(
                    func,
                    id,
                    op.operands[0],
                    op.results[0],
                    direction,
                    class,
                ));
            }
            OpKind::DataFlowEdge { .. } => {
                units.push(Unit::edge(
                    func,
                    id,
                    op.operands[0],
                    op.results[0],
                    Direction::Both,
                    class,
                ));
            }
            OpKind::While => {
                // As Shardy's data-flow edges: each carried value ties the
                // operand, the condition's and the body's block arguments,
                // the value the body returns and the result.
                let [cond, body] = &op.regions[..] else {
                    continue;
                };
                // The result is the hub (Shardy's edge owner): a closed operand
                // must not stop the body's sharding from reaching the result.
                let ret = body.ops.last().map(|&r| &func.op(r).operands);
                for (i, (&src, &res)) in op.operands.iter().zip(&op.results).enumerate() {
                    let mut tied = vec![src];
                    tied.extend(ret.and_then(|r| r.get(i)));
                    tied.extend(cond.args.get(i));
                    tied.extend(body.args.get(i));
                    for t in tied {
                        units.push(Unit::edge(func, id, t, res, Direction::Both, class));
                    }
                }
            }
            OpKind::Case | OpKind::If => {
                // One data-flow edge per result, its sources every branch's
                // returned value at that position.
                for (i, &res) in op.results.iter().enumerate() {
                    let sources: Vec<ValueId> = op
                        .regions
                        .iter()
                        .filter_map(|r| r.ops.last())
                        .filter_map(|&ret| func.op(ret).operands.get(i).copied())
                        .collect();
                    if !sources.is_empty() {
                        units.push(Unit::edge_from_many(func, id, sources, res, class));
                    }
                }
            }
            OpKind::ManualComputation {
                in_shardings,
                out_shardings,
                manual_axes,
            } => {
                let all: Vec<Option<&TensorSharding>> =
                    in_shardings.iter().chain(out_shardings).map(Some).collect();
                let partial = common_mesh(st.meshes, &all)
                    .is_some_and(|(_, mesh)| manual_edges::is_partial(mesh, manual_axes));
                if let (true, Some(region)) = (partial, op.regions.first()) {
                    let view = |tensor: usize, add: bool, s: &TensorSharding| ManualView {
                        tensor,
                        add,
                        manual_dims: manual_edges::manual_dims(s, manual_axes),
                        replicated: s.replicated.clone(),
                        manual_axes: manual_axes.clone(),
                    };
                    let class = OpClass::PassThrough;
                    for ((&src, &arg), s) in op.operands.iter().zip(&region.args).zip(in_shardings)
                    {
                        let mut unit = Unit::edge(func, id, src, arg, Direction::Both, class);
                        unit.manual = Some(view(1, true, s));
                        units.push(unit);
                    }
                    if let Some(&ret) = region.ops.last() {
                        let returned = &func.op(ret).operands;
                        for ((&src, &res), s) in returned.iter().zip(&op.results).zip(out_shardings)
                        {
                            let mut unit = Unit::edge(func, id, src, res, Direction::Both, class);
                            unit.manual = Some(view(1, false, s));
                            units.push(unit);
                        }
                    }
                }
            }
            OpKind::OptimizationBarrier => {
                for (&src, &res) in op.operands.iter().zip(&op.results) {
                    units.push(Unit::edge(func, id, src, res, Direction::Both, class));
                }
            }
            OpKind::NamedComputation { .. } | OpKind::Call { .. } => {
                // Propagate through as if inlined (a call carries a copy of its callee's body): operands <-> block arguments,
                // returned values <-> results.
                if let Some(region) = op.regions.first() {
                    for (&src, &arg) in op.operands.iter().zip(&region.args) {
                        units.push(Unit::edge(func, id, src, arg, Direction::Both, class));
                    }
                    if let Some(&ret) = region.ops.last() {
                        for (&src, &res) in func.op(ret).operands.iter().zip(&op.results) {
                            units.push(Unit::edge(func, id, src, res, Direction::Both, class));
                        }
                    }
                }
            }
            _ => {
                // Conservative: the rule Shardy's registry builds with
                // conservativePropagation (a rule written on the op is kept).
                let rule = op
                    .rule
                    .clone()
                    .or_else(|| rule_for_mode(func, op, st.conservative));
                if let Some(rule) = rule {
                    if rule.operand_mappings.len() == op.operands.len()
                        && rule.result_mappings.len() == op.results.len()
                    {
                        units.push(Unit {
                            op: id,
                            rule,
                            class,
                            tensors: op.operands.iter().chain(&op.results).copied().collect(),
                            n_operands: op.operands.len(),
                            fixed_dir: None,
                            manual: None,
                            multi_use: op
                                .operands
                                .iter()
                                .any(|&o| uses[o.0 as usize] > 1 && func.value(o).ty.rank() > 0),
                        });
                    }
                }
            }
        }
        // Units are numbered in the order they are listed here, so a value's
        // list ascends and `u` can only be its last entry: checking that one
        // (not the whole list) keeps a value used by every op of a 100k-op
        // chain from costing n^2.
        for (u, unit) in units.iter().enumerate().skip(before) {
            for &v in &unit.tensors {
                let t = &mut st.touching[v.0 as usize];
                if t.last() != Some(&u) {
                    t.push(u);
                }
            }
        }
    }
    st.units = std::rc::Rc::new(units);
}

/// One propagation run to a fixed point: function results, the worklist, function results.
fn run(
    func: &mut Func,
    st: &mut State<'_>,
    strategy: FactorStrategy,
    level: Option<usize>,
    pass: &str,
) {
    st.pass = pass.to_string();
    func_results(func, st, strategy);
    // One sweep suffices: every unit touching a changed value is queued again,
    // so the worklist runs to the fixed point (Shardy's driver only re-checks it).
    let n = st.units.len();
    // Later op-priority passes carry the previous pass's dirty marks: a unit
    // that is clean and gains no direction would change nothing (its visit
    // is a function of its tensors and directions), so it is skipped in
    // place, keeping the visiting order. Other runs visit every unit.
    let carry = matches!(level, Some(l) if l > 0) && st.dirty.len() == n;
    if carry {
        for v in returned_values(func) {
            for &u in &st.touching[v.0 as usize] {
                st.dirty[u] = true;
            }
        }
    } else {
        st.dirty = vec![true; n];
    }
    // A stack popped from the back: push in reverse pre-order so units run top-down.
    let mut stack: Vec<usize> = (0..n).rev().collect();
    let mut queued = vec![true; n];
    while let Some(u) = stack.pop() {
        queued[u] = false;
        if carry && !st.dirty[u] && !gains_direction(&st.units[u], level) {
            continue;
        }
        st.dirty[u] = false;
        for v in propagate_unit(func, st, u, strategy, level) {
            for &other in &st.touching[v.0 as usize] {
                st.dirty[other] = true;
                if other != u && !queued[other] {
                    queued[other] = true;
                    stack.push(other);
                }
            }
        }
    }
    func_results(func, st, strategy);
}

/// The values the function's terminator returns (none without one).
fn returned_values(func: &Func) -> Vec<ValueId> {
    match func.body.last() {
        Some(&ret) if func.op(ret).kind.is_terminator() => func.op(ret).operands.clone(),
        _ => Vec::new(),
    }
}

/// Exchange shardings between returned values and the function's result shardings.
fn func_results(func: &mut Func, st: &mut State<'_>, strategy: FactorStrategy) {
    let Some(&ret) = func.body.last() else { return };
    if !func.op(ret).kind.is_terminator() {
        return;
    }
    let returned = func.op(ret).operands.clone();
    for (i, v) in returned.into_iter().enumerate() {
        let rank = func.value(v).ty.rank();
        let rule = identity_rule_sized(&func.value(v).ty.shape, rank);
        let shardings = [
            func.value(v).sharding.clone(),
            func.result_shardings.get(i).cloned().flatten(),
        ];
        let Some((name, mesh)) =
            common_mesh(st.meshes, &[shardings[0].as_ref(), shardings[1].as_ref()])
        else {
            continue;
        };
        let mut p = Projection {
            operands: vec![TensorFactorShardings::project(
                shardings[0].as_ref(),
                &rule.operand_mappings[0],
                &rule.factor_sizes,
                mesh,
                false,
            )],
            results: vec![TensorFactorShardings::project(
                shardings[1].as_ref(),
                &rule.result_mappings[0],
                &rule.factor_sizes,
                mesh,
                false,
            )],
        };
        let both = |_: usize| Direction::Both;
        let ctx = FactorContext {
            factor_sizes: &rule.factor_sizes,
            mesh,
            direction: &both,
            elementwise: false,
            conservative: st.conservative,
        };
        let up = propagate_factors(&mut p, &ctx, strategy);
        if up.operands[0] {
            let new =
                p.operands[0].unproject(&rule.operand_mappings[0], &rule.factor_sizes, name, mesh);
            set_value(func, st, v, &shardings[0], new, "function result sharding");
        }
        if up.results[0] {
            let new =
                p.results[0].unproject(&rule.result_mappings[0], &rule.factor_sizes, name, mesh);
            if accept(&shardings[1], &new) {
                if func.result_shardings.len() <= i {
                    func.result_shardings.resize(i + 1, None);
                }
                func.result_shardings[i] = Some(new);
            }
        }
    }
}

/// An identity rule with the tensor's dim sizes as factor sizes.
fn identity_rule_sized(shape: &[u64], rank: usize) -> OpShardingRule {
    let mut r = identity_rule(rank);
    r.factor_sizes = shape.to_vec();
    r
}

/// A new sharding is worth setting when it differs and is not an empty first sharding.
fn accept(old: &Option<TensorSharding>, new: &TensorSharding) -> bool {
    let empty = new.dims.iter().all(|d| d.axes.is_empty());
    !(old.is_none() && empty) && old.as_ref() != Some(new)
}

/// Set `v`'s sharding (and its sharding group's), recording why; returns the
/// values whose sharding changed.
fn set_value(
    func: &mut Func,
    st: &mut State<'_>,
    v: ValueId,
    old: &Option<TensorSharding>,
    new: TensorSharding,
    cause: &str,
) -> Vec<ValueId> {
    if !accept(old, &new) {
        return Vec::new();
    }
    let mut changed = vec![v];
    func.value_mut(v).sharding = Some(new.clone());
    st.steps.push(Step {
        value: v,
        sharding: new.clone(),
        cause: cause.to_string(),
        pass: st.pass.clone(),
    });
    if let Some(g) = st.group_of[v.0 as usize] {
        for &m in &st.groups[g].clone() {
            if m != v && func.value(m).sharding.as_ref() != Some(&new) {
                func.value_mut(m).sharding = Some(new.clone());
                st.steps.push(Step {
                    value: m,
                    sharding: new.clone(),
                    cause: format!("sharding group with {}", func.value(v).name),
                    pass: st.pass.clone(),
                });
                changed.push(m);
            }
        }
    }
    changed
}

/// The direction `unit` may propagate factor `f` in a pass (`level`: the
/// op-priority pass, `None` outside the op-priority schedule).
fn unit_direction(unit: &Unit, level: Option<usize>, f: usize) -> Direction {
    let (rule, class) = (&unit.rule, unit.class);
    if rule.blocked_propagation_factors.contains(&f) {
        return Direction::None;
    }
    match (unit.fixed_dir, level) {
        (Some(d), _) if class == OpClass::Barrier => d,
        (Some(d), Some(l)) => d.intersect(op_priority_direction(l, class, None, f, unit.multi_use)),
        (Some(d), None) => d,
        (None, Some(l)) => op_priority_direction(l, class, Some(rule), f, unit.multi_use),
        (None, None) => Direction::Both,
    }
}

/// Whether op-priority pass `level` lets `unit` move some factor the pass
/// before did not.
fn gains_direction(unit: &Unit, level: Option<usize>) -> bool {
    match level {
        Some(l) if l > 0 => (0..unit.rule.factor_sizes.len())
            .any(|f| unit_direction(unit, Some(l), f) != unit_direction(unit, Some(l - 1), f)),
        _ => true,
    }
}

/// Propagate through one unit; returns the values whose sharding changed.
fn propagate_unit(
    func: &mut Func,
    st: &mut State<'_>,
    u: usize,
    strategy: FactorStrategy,
    level: Option<usize>,
) -> Vec<ValueId> {
    let units = std::rc::Rc::clone(&st.units);
    let unit = &units[u];
    let (op_id, rule, class) = (unit.op, &unit.rule, unit.class);
    let n_ops = unit.n_operands;
    let tensors = &unit.tensors;
    let (operands, results) = tensors.split_at(n_ops);
    let direction = |f: usize| unit_direction(unit, level, f);
    // Nothing may move in this pass: skip the projection altogether.
    if (0..rule.factor_sizes.len()).all(|f| direction(f) == Direction::None) {
        return Vec::new();
    }
    // Borrow the current shardings only to build the projection: most visits change nothing.
    // A manual computation's edge sees one tensor with or without the manual axes.
    let viewed: Option<TensorSharding> = unit.manual.as_ref().and_then(|m| {
        func.value(tensors[m.tensor])
            .sharding
            .as_ref()
            .map(|s| m.before(s))
    });
    let (mesh_name, mesh, mut p) = {
        let refs: Vec<Option<&TensorSharding>> = tensors
            .iter()
            .enumerate()
            .map(|(t, &v)| match (&unit.manual, &viewed) {
                (Some(m), Some(s)) if m.tensor == t => Some(s),
                _ => func.value(v).sharding.as_ref(),
            })
            .collect();
        let Some((mesh_name, mesh)) = common_mesh(st.meshes, &refs) else {
            return Vec::new();
        };
        let project = |i: usize, mapping: &[Vec<usize>]| {
            TensorFactorShardings::project(refs[i], mapping, &rule.factor_sizes, mesh, false)
        };
        let p = Projection {
            operands: (0..n_ops)
                .map(|i| project(i, &rule.operand_mappings[i]))
                .collect(),
            results: (0..results.len())
                .map(|i| project(n_ops + i, &rule.result_mappings[i]))
                .collect(),
        };
        (mesh_name, mesh, p)
    };
    let ctx = FactorContext {
        factor_sizes: &rule.factor_sizes,
        mesh,
        direction: &direction,
        elementwise: matches!(class, OpClass::Elementwise | OpClass::Barrier),
        conservative: st.conservative,
    };
    let up = propagate_factors(&mut p, &ctx, strategy);
    if !up.any() {
        return Vec::new();
    }
    let old: Vec<Option<TensorSharding>> = tensors
        .iter()
        .map(|&v| func.value(v).sharding.clone())
        .collect();
    let op_label = match func.op(op_id).results.first() {
        Some(&r) => format!("{} = {}", func.value(r).name, func.op(op_id).kind.name()),
        None => func.op(op_id).kind.name().to_string(),
    };
    let names: Vec<String> = tensors
        .iter()
        .map(|&v| func.value(v).name.clone())
        .collect();
    // The neighbours that were sharded before this step: where the axes came from.
    let sources = |me: usize| -> String {
        let from: Vec<String> = names
            .iter()
            .enumerate()
            .filter(|&(t, _)| {
                t != me
                    && old[t]
                        .as_ref()
                        .is_some_and(|s| s.dims.iter().any(|d| !d.axes.is_empty()))
            })
            .map(|(t, name)| {
                let role = if t < n_ops {
                    format!("operand {t}")
                } else {
                    format!("result {}", t - n_ops)
                };
                let was = old[t].as_ref().map(|s| s.to_bare()).unwrap_or_default();
                format!("{role} {name} {was}")
            })
            .collect();
        if from.is_empty() {
            String::new()
        } else {
            format!(", from {}", from.join(" and "))
        }
    };
    let back = |t: usize, new: TensorSharding| -> TensorSharding {
        match &unit.manual {
            Some(m) if m.tensor == t => m.after(&new, old[t].as_ref()),
            _ => new,
        }
    };
    let mut changed = Vec::new();
    for (i, &v) in operands.iter().enumerate() {
        if up.operands[i] {
            let new = p.operands[i].unproject(
                &rule.operand_mappings[i],
                &rule.factor_sizes,
                mesh_name,
                mesh,
            );
            let new = back(i, new);
            let cause = format!("as operand {i} of {op_label}{}", sources(i));
            changed.extend(set_value(func, st, v, &old[i], new, &cause));
        }
    }
    for (i, &v) in results.iter().enumerate() {
        if up.results[i] {
            let new = p.results[i].unproject(
                &rule.result_mappings[i],
                &rule.factor_sizes,
                mesh_name,
                mesh,
            );
            let new = back(n_ops + i, new);
            let cause = format!("as result {i} of {op_label}{}", sources(n_ops + i));
            changed.extend(set_value(func, st, v, &old[n_ops + i], new, &cause));
        }
    }
    changed
}

/// Export: close every sharding, turn constraints into reshards, attach rules.
fn export(func: &mut Func, st: &State<'_>) {
    let close = |s: &mut TensorSharding| {
        for d in &mut s.dims {
            d.is_closed = true;
            d.priority = None;
        }
    };
    for v in &mut func.values {
        if let Some(s) = v.sharding.as_mut() {
            close(s);
        }
    }
    for s in func.result_shardings.iter_mut().flatten() {
        close(s);
    }
    // Function inputs and outputs are sharded evenly and without sub-axes:
    // each dim keeps its axes up to the first sub-axis or the first axis that
    // would leave the dim not divisible.
    let meshes = st.meshes;
    let even = |s: &mut TensorSharding, shape: &[u64]| {
        let Some((_, mesh)) = common_mesh(meshes, &[Some(&*s)]) else {
            return;
        };
        for (d, &size) in s.dims.iter_mut().zip(shape) {
            let mut product = 1u64;
            let keep = d
                .axes
                .iter()
                .take_while(|a| {
                    product *= a.size(mesh).unwrap_or(1);
                    a.sub.is_none() && size % product == 0
                })
                .count();
            d.axes.truncate(keep);
        }
    };
    for (s, ty) in func.result_shardings.iter_mut().zip(&func.result_types) {
        if let Some(s) = s.as_mut() {
            even(s, &ty.shape);
        }
    }
    for &a in &func.args.clone() {
        let shape = func.value(a).ty.shape.clone();
        if let Some(s) = func.value_mut(a).sharding.as_mut() {
            even(s, &shape);
        }
    }
    for unit in st.units.iter().filter(|u| u.fixed_dir.is_none()) {
        func.op_mut(unit.op).rule = Some(unit.rule.clone());
    }
    export_manual(func, st);
    export_named(func);
    constraints_to_reshards(func);
}

/// Shardy's sharding-constraint-to-reshard: every constraint with a
/// sharding becomes a reshard to it (also in callees, which export reaches
/// only through their callers' inlined copies).
fn constraints_to_reshards(func: &mut Func) {
    for id in func.walk() {
        if let OpKind::ShardingConstraint { .. } = &func.op(id).kind {
            let result = func.op(id).results[0];
            if let Some(s) = func.value(result).sharding.clone() {
                func.op_mut(id).kind = OpKind::Reshard { sharding: s };
            }
        }
    }
}

/// Named computations: in and out shardings from the block arguments and the
/// results, as Shardy's export writes them (a value without a sharding is
/// replicated); none when nothing in or out is sharded.
fn export_named(func: &mut Func) {
    for id in func.walk() {
        let op = func.op(id);
        if !matches!(op.kind, OpKind::NamedComputation { .. }) {
            continue;
        }
        let args: Vec<ValueId> = op
            .regions
            .first()
            .map(|r| r.args.clone())
            .unwrap_or_default();
        let results = op.results.clone();
        let all: Vec<ValueId> = args.iter().chain(&results).copied().collect();
        let Some(mesh) = all
            .iter()
            .find_map(|&v| func.value(v).sharding.as_ref().and_then(|s| s.mesh_name()))
            .map(str::to_string)
        else {
            continue;
        };
        let of = |v: ValueId| {
            func.value(v)
                .sharding
                .clone()
                .unwrap_or_else(|| TensorSharding::replicated(&mesh, func.value(v).ty.rank()))
        };
        let ins: Vec<TensorSharding> = args.iter().map(|&v| of(v)).collect();
        let outs: Vec<TensorSharding> = results.iter().map(|&v| of(v)).collect();
        if let OpKind::NamedComputation {
            in_shardings,
            out_shardings,
            ..
        } = &mut func.op_mut(id).kind
        {
            *in_shardings = Some(ins);
            *out_shardings = Some(outs);
        }
    }
}

/// Partially manual computations: the block arguments' and results'
/// shardings become the op's in- and out-shardings (manual axes in front),
/// each cut to what divides its tensor evenly.
fn export_manual(func: &mut Func, st: &State<'_>) {
    for id in func.walk() {
        let op = func.op(id);
        let OpKind::ManualComputation {
            in_shardings,
            out_shardings,
            manual_axes,
        } = &op.kind
        else {
            continue;
        };
        let all: Vec<Option<&TensorSharding>> =
            in_shardings.iter().chain(out_shardings).map(Some).collect();
        let Some((_, mesh)) = common_mesh(st.meshes, &all) else {
            continue;
        };
        if !manual_edges::is_partial(mesh, manual_axes) {
            continue;
        }
        let Some(region) = op.regions.first() else {
            continue;
        };
        let close = |mut s: TensorSharding| {
            for d in &mut s.dims {
                d.is_closed = true;
                d.priority = None;
            }
            // Shardy's export drops explicitly replicated axes here.
            s.replicated.clear();
            s
        };
        let ins: Vec<TensorSharding> = in_shardings
            .iter()
            .zip(&region.args)
            .map(|(s, &a)| {
                let arg = func.value(a);
                let free = match &arg.sharding {
                    Some(f) => manual_edges::evenly_sharded(f, &arg.ty.shape, mesh),
                    None => manual_edges::free_part(s, manual_axes),
                };
                let dims = manual_edges::manual_dims(s, manual_axes);
                close(manual_edges::with_manual(&dims, &s.replicated, &free))
            })
            .collect();
        let outs: Vec<TensorSharding> = out_shardings
            .iter()
            .zip(&op.results)
            .map(|(s, &r)| {
                let res = func.value(r);
                let global = res.sharding.clone().unwrap_or_else(|| s.clone());
                close(manual_edges::evenly_sharded(&global, &res.ty.shape, mesh))
            })
            .collect();
        let results = op.results.clone();
        for (&r, s) in results.iter().zip(&outs) {
            func.value_mut(r).sharding = Some(s.clone());
        }
        if let OpKind::ManualComputation {
            in_shardings,
            out_shardings,
            ..
        } = &mut func.op_mut(id).kind
        {
            *in_shardings = ins;
            *out_shardings = outs;
        }
    }
}
