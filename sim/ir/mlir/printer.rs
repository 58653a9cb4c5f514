//! Prints a module in the pretty MLIR syntax JAX and XLA's Shardy dumps use.
//! With `canonical`, value names are renumbered (`%v0`, `%v1`, ...) so that two
//! modules with the same structure print the same text whatever their names.

use std::fmt::Write;

use crate::base::TensorType;
use crate::ir::model::{Func, Module, Op, RawAttr, Region, ValueId, Visibility};
use crate::ir::ops::{DeviceCollective, OpKind};
use crate::mesh::AxisRef;
use crate::sharding::{ShardingPerValue, TensorSharding};

use super::dense::format_dense;
use super::structured;

/// Print a module as MLIR text.
pub fn print_module(m: &Module) -> String {
    Printer::new(false).module(m)
}

/// Print a module with renumbered value names (for structural comparison).
pub fn print_canonical(m: &Module) -> String {
    Printer::new(true).module(m)
}

struct Printer {
    canonical: bool,
    /// How many StableHLO region ops (while, case, sort...) enclose the op
    /// being printed: inside them MLIR spells calls `func.call`.
    in_stablehlo_region: std::cell::Cell<u32>,
}

impl Printer {
    fn new(canonical: bool) -> Self {
        Printer {
            canonical,
            in_stablehlo_region: std::cell::Cell::new(0),
        }
    }

    /// Run `f` with the ops it prints inside a StableHLO region.
    fn in_region<T>(&self, f: impl FnOnce() -> T) -> T {
        self.in_stablehlo_region
            .set(self.in_stablehlo_region.get() + 1);
        let out = f();
        self.in_stablehlo_region
            .set(self.in_stablehlo_region.get() - 1);
        out
    }
}

struct FuncCtx<'f> {
    f: &'f Func,
    names: Vec<String>,
}

impl FuncCtx<'_> {
    fn name(&self, v: ValueId) -> &str {
        &self.names[v.0 as usize]
    }
}

fn attr_dict(attrs: &mut [(String, String)]) -> String {
    attrs.sort_by(|a, b| a.0.cmp(&b.0));
    let items: Vec<String> = attrs
        .iter()
        .map(|(k, v)| {
            if v.is_empty() {
                k.clone()
            } else {
                format!("{k} = {v}")
            }
        })
        .collect();
    format!("{{{}}}", items.join(", "))
}

fn raw_pairs(raw: &[RawAttr]) -> Vec<(String, String)> {
    raw.iter()
        .map(|a| (a.name.clone(), a.value.clone()))
        .collect()
}

/// `dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>`.
fn int_matrix(rows: &[Vec<u64>]) -> String {
    let cols = rows.first().map_or(0, Vec::len);
    let body: Vec<String> = rows.iter().map(|r| list(r)).collect();
    format!(
        "dense<[{}]> : tensor<{}x{cols}xi64>",
        body.join(", "),
        rows.len()
    )
}

fn types_list(tys: &[&TensorType]) -> String {
    tys.iter()
        .map(|t| t.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

fn axes_text(axes: &[AxisRef]) -> String {
    format!(
        "{{{}}}",
        axes.iter()
            .map(|a| a.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    )
}

fn per_dim_text(dims: &[Vec<AxisRef>]) -> String {
    format!(
        "[{}]",
        dims.iter()
            .map(|d| axes_text(d))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

fn list<T: std::fmt::Display>(v: &[T]) -> String {
    format!(
        "[{}]",
        v.iter()
            .map(|x| x.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    )
}

fn sharding_list(v: &[TensorSharding]) -> String {
    format!(
        "[{}]",
        v.iter().map(|s| s.to_bare()).collect::<Vec<_>>().join(", ")
    )
}

impl Printer {
    fn module(&self, m: &Module) -> String {
        let mut out = String::new();
        let ind = if m.wrapped { "  " } else { "" };
        if m.wrapped {
            out.push_str("module");
            if let Some(n) = &m.name {
                let _ = write!(out, " @{n}");
            }
            if !m.attrs.is_empty() {
                let _ = write!(out, " attributes {}", attr_dict(&mut raw_pairs(&m.attrs)));
            }
            out.push_str(" {\n");
        }
        for (i, (name, mesh)) in m.meshes.iter().enumerate() {
            let _ = write!(out, "{ind}sdy.mesh @{name} = {mesh}");
            if let Some(a) = m.mesh_attrs.get(i).filter(|a| !a.is_empty()) {
                let _ = write!(out, " {}", attr_dict(&mut raw_pairs(a)));
            }
            out.push('\n');
        }
        for f in &m.funcs {
            self.func(&mut out, f, ind);
        }
        if m.wrapped {
            out.push_str("}\n");
        }
        out
    }

    fn func(&self, out: &mut String, f: &Func, ind: &str) {
        let names = if self.canonical {
            let mut names = vec![String::new(); f.values.len()];
            let mut next = 0usize;
            let mut assign = |vs: &[ValueId], names: &mut Vec<String>| {
                for (k, v) in vs.iter().enumerate() {
                    // A multi-result op's results are `%vN#k` so the text parses back.
                    names[v.0 as usize] = if vs.len() == 1 {
                        format!("%v{next}")
                    } else {
                        format!("%v{next}#{k}")
                    };
                }
                next += 1;
            };
            for &a in &f.args {
                assign(&[a], &mut names);
            }
            for id in f.walk() {
                let op = f.op(id);
                for r in &op.regions {
                    for &a in &r.args {
                        assign(&[a], &mut names);
                    }
                }
                if let (OpKind::While, [cond, body]) = (&op.kind, &op.regions[..]) {
                    // The body's iteration arguments print with the condition's names.
                    for (c, b) in cond.args.iter().zip(&body.args) {
                        names[b.0 as usize] = names[c.0 as usize].clone();
                    }
                }
                if !op.results.is_empty() {
                    assign(&op.results, &mut names);
                }
            }
            names
        } else {
            f.values.iter().map(|v| v.name.clone()).collect()
        };
        let cx = FuncCtx { f, names };
        let vis = match f.visibility {
            Visibility::Unspecified => "",
            Visibility::Public => "public ",
            Visibility::Private => "private ",
        };
        let _ = write!(out, "{ind}func.func {vis}@{}(", f.name);
        for (i, &a) in f.args.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            let v = f.value(a);
            let _ = write!(out, "{}: {}", cx.name(a), v.ty);
            let mut attrs = raw_pairs(f.arg_attrs.get(i).map(|v| v.as_slice()).unwrap_or(&[]));
            if let Some(s) = &v.sharding {
                attrs.push(("sdy.sharding".into(), s.to_string()));
            }
            if !attrs.is_empty() {
                let _ = write!(out, " {}", attr_dict(&mut attrs));
            }
        }
        out.push(')');
        let results: Vec<String> = f
            .result_types
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let mut attrs =
                    raw_pairs(f.result_attrs.get(i).map(|v| v.as_slice()).unwrap_or(&[]));
                if let Some(Some(s)) = f.result_shardings.get(i) {
                    attrs.push(("sdy.sharding".into(), s.to_string()));
                }
                if attrs.is_empty() {
                    t.to_string()
                } else {
                    format!("{t} {}", attr_dict(&mut attrs))
                }
            })
            .collect();
        if results.len() == 1 && !results[0].contains('{') {
            let _ = write!(out, " -> {}", results[0]);
        } else if !results.is_empty() {
            let _ = write!(out, " -> ({})", results.join(", "));
        }
        if !f.attrs.is_empty() {
            let _ = write!(out, " attributes {}", attr_dict(&mut raw_pairs(&f.attrs)));
        }
        out.push_str(" {\n");
        let inner = format!("{ind}  ");
        for &id in &f.body {
            self.op(out, &cx, f.op(id), &inner);
        }
        let _ = writeln!(out, "{ind}}}");
    }

    fn operands(&self, cx: &FuncCtx<'_>, op: &Op) -> String {
        op.operands
            .iter()
            .map(|&v| cx.name(v).to_string())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// ` {attrs}` of an op (raw ones, its result shardings and its rule), or nothing.
    fn op_attrs(&self, cx: &FuncCtx<'_>, op: &Op) -> String {
        self.op_attrs_except(cx, op, &[])
    }

    /// [`Self::op_attrs`] without the raw attributes named in `skip`.
    fn op_attrs_except(&self, cx: &FuncCtx<'_>, op: &Op, skip: &[&str]) -> String {
        self.op_attrs_with(cx, op, skip, Vec::new())
    }

    /// [`Self::op_attrs_except`] plus `extra` attributes printed from typed fields.
    fn op_attrs_with(
        &self,
        cx: &FuncCtx<'_>,
        op: &Op,
        skip: &[&str],
        extra: Vec<(String, String)>,
    ) -> String {
        let mut attrs = raw_pairs(&op.attrs);
        attrs.retain(|(k, _)| !skip.contains(&k.as_str()));
        attrs.extend(extra);
        let shardings: Vec<Option<&TensorSharding>> = op
            .results
            .iter()
            .map(|&r| cx.f.value(r).sharding.as_ref())
            .collect();
        // A manual computation's out-shardings already say its results'
        // shardings; a constraint or reshard prints its result's as its own.
        let own = matches!(
            op.kind,
            OpKind::ShardingConstraint { .. } | OpKind::Reshard { .. }
        ) || op
            .kind
            .out_sharding()
            .is_some_and(|o| shardings.iter().all(|s| s.map_or(true, |s| s == o)));
        let said = own
            || match &op.kind {
                OpKind::ManualComputation { out_shardings, .. }
                | OpKind::NamedComputation {
                    out_shardings: Some(out_shardings),
                    ..
                } => shardings
                    .iter()
                    .zip(out_shardings)
                    .all(|(s, o)| s.map_or(true, |s| s == o)),
                _ => false,
            };
        if let (false, Some(first)) = (said, shardings.iter().flatten().next()) {
            let mesh = first.mesh_name().unwrap_or("mesh").to_string();
            let all: Vec<TensorSharding> = op
                .results
                .iter()
                .zip(&shardings)
                .map(|(&r, s)| match s {
                    Some(s) => (*s).clone(),
                    None => TensorSharding::replicated(&mesh, cx.f.value(r).ty.rank()),
                })
                .collect();
            attrs.push(("sdy.sharding".into(), ShardingPerValue(all).to_string()));
        }
        if let Some(rule) = &op.rule {
            attrs.push(("sdy.sharding_rule".into(), rule.to_string()));
        }
        if attrs.is_empty() {
            String::new()
        } else {
            format!(" {}", attr_dict(&mut attrs))
        }
    }

    /// `%0 = `, `%0:2 = ` or `%values, %indices = `: results named `%g#k`
    /// print as one group `%g:n`, others by name.
    fn results_prefix(&self, cx: &FuncCtx<'_>, op: &Op) -> String {
        if op.results.is_empty() {
            return String::new();
        }
        let mut groups: Vec<(&str, usize)> = Vec::new();
        for &r in &op.results {
            let name = cx.name(r);
            let (group, numbered) = match name.split_once('#') {
                Some((g, _)) => (g, true),
                None => (name, false),
            };
            match groups.last_mut() {
                Some((g, n)) if numbered && *g == group => *n += 1,
                _ => groups.push((group, usize::from(numbered))),
            }
        }
        let parts: Vec<String> = groups
            .iter()
            .map(|&(g, n)| {
                if n == 0 {
                    g.to_string()
                } else {
                    format!("{g}:{n}")
                }
            })
            .collect();
        format!("{} = ", parts.join(", "))
    }

    fn operand_types<'f>(&self, cx: &FuncCtx<'f>, op: &Op) -> Vec<&'f TensorType> {
        op.operands.iter().map(|&v| &cx.f.value(v).ty).collect()
    }

    fn result_types<'f>(&self, cx: &FuncCtx<'f>, op: &Op) -> Vec<&'f TensorType> {
        op.results.iter().map(|&v| &cx.f.value(v).ty).collect()
    }

    /// `: (A, B) -> C` (or `: A` when every operand and the result share one type).
    fn functional(&self, cx: &FuncCtx<'_>, op: &Op, allow_short: bool) -> String {
        let ins = self.operand_types(cx, op);
        let outs = self.result_types(cx, op);
        if allow_short && outs.len() == 1 && ins.iter().all(|t| *t == outs[0]) {
            return format!(" : {}", outs[0]);
        }
        let outs_text = if outs.len() == 1 {
            outs[0].to_string()
        } else {
            format!("({})", types_list(&outs))
        };
        format!(" : ({}) -> {}", types_list(&ins), outs_text)
    }

    fn op(&self, out: &mut String, cx: &FuncCtx<'_>, op: &Op, ind: &str) {
        let f = cx.f;
        let res = self.results_prefix(cx, op);
        let name = op.kind.name();
        let ops = self.operands(cx, op);
        let attrs = self.op_attrs(cx, op);
        let same = |p: &Printer| p.functional(cx, op, true);
        let full = |p: &Printer| p.functional(cx, op, false);
        let line = match &op.kind {
            OpKind::Unary(u) if u.is_chlo() => {
                let t = self.result_types(cx, op);
                let ins = self.operand_types(cx, op);
                format!(
                    "{res}{name} {ops}{attrs} : {} -> {}",
                    types_list(&ins),
                    types_list(&t)
                )
            }
            OpKind::Unary(_) | OpKind::Binary(_) | OpKind::Clamp | OpKind::Convert => {
                format!("{res}{name} {ops}{attrs}{}", same(self))
            }
            OpKind::Select => {
                let ins = self.operand_types(cx, op);
                let outs = self.result_types(cx, op);
                if ins.len() == 3 && outs.len() == 1 && ins[1] == outs[0] && ins[2] == outs[0] {
                    format!("{res}{name} {ops}{attrs} : {}, {}", ins[0], outs[0])
                } else {
                    format!("{res}{name} {ops}{attrs}{}", full(self))
                }
            }
            OpKind::Compare { dir, cmp_type } => {
                let t = cmp_type
                    .map(|t| format!(", {}", t.name()))
                    .unwrap_or_default();
                format!("{res}{name} {}, {ops}{t}{attrs}{}", dir.name(), full(self))
            }
            OpKind::Constant { value, .. } => {
                let ty = self
                    .result_types(cx, op)
                    .first()
                    .map(|t| (*t).clone())
                    .unwrap_or_else(|| TensorType::new(vec![], crate::base::DType::F32));
                format!("{res}{name}{attrs} {} : {ty}", format_dense(value, &ty))
            }
            OpKind::Iota { dim } => {
                format!("{res}{name} dim = {dim}{attrs}{}", self.bare_result(cx, op))
            }
            OpKind::BroadcastInDim { dims } => format!(
                "{res}{name} {ops}, dims = {}{attrs}{}",
                list(dims),
                full(self)
            ),
            OpKind::Reshape => format!("{res}{name} {ops}{attrs}{}", full(self)),
            OpKind::Transpose { perm } => format!(
                "{res}{name} {ops}, dims = {}{attrs}{}",
                list(perm),
                full(self)
            ),
            OpKind::Reverse { dims } => format!(
                "{res}{name} {ops}, dims = {}{attrs}{}",
                list(dims),
                same(self)
            ),
            OpKind::Slice {
                start,
                limit,
                strides,
            } => {
                let parts: Vec<String> = (0..start.len())
                    .map(|i| {
                        let s = strides.get(i).copied().unwrap_or(1);
                        let l = limit.get(i).copied().unwrap_or(0);
                        if s == 1 {
                            format!("{}:{l}", start[i])
                        } else {
                            format!("{}:{l}:{s}", start[i])
                        }
                    })
                    .collect();
                format!(
                    "{res}{name} {ops} [{}]{attrs}{}",
                    parts.join(", "),
                    full(self)
                )
            }
            OpKind::DynamicSlice { sizes } => format!(
                "{res}{name} {ops}, sizes = {}{attrs}{}",
                list(sizes),
                full(self)
            ),
            OpKind::DynamicUpdateSlice => format!("{res}{name} {ops}{attrs}{}", full(self)),
            OpKind::Concatenate { dim } => {
                format!("{res}{name} {ops}, dim = {dim}{attrs}{}", full(self))
            }
            OpKind::Pad {
                low,
                high,
                interior,
            } => format!(
                "{res}{name} {ops}, low = {}, high = {}, interior = {}{attrs}{}",
                list(low),
                list(high),
                list(interior),
                full(self)
            ),
            OpKind::DotGeneral { dims, precision } => {
                let mut s = format!("{res}{name} {ops}");
                if !dims.lhs_batch.is_empty() || !dims.rhs_batch.is_empty() {
                    let _ = write!(
                        s,
                        ", batching_dims = {} x {}",
                        list(&dims.lhs_batch),
                        list(&dims.rhs_batch)
                    );
                }
                let _ = write!(
                    s,
                    ", contracting_dims = {} x {}",
                    list(&dims.lhs_contract),
                    list(&dims.rhs_contract)
                );
                if !precision.is_empty() {
                    let _ = write!(s, ", precision = [{}]", precision.join(", "));
                }
                format!("{s}{attrs}{}", full(self))
            }
            OpKind::Dot { precision } => {
                let p = if precision.is_empty() {
                    String::new()
                } else {
                    format!(", precision = [{}]", precision.join(", "))
                };
                format!("{res}{name} {ops}{p}{attrs}{}", full(self))
            }
            OpKind::Reduce { dims } => return self.reduce(out, cx, op, dims, ind),
            OpKind::ShardingConstraint { sharding } | OpKind::Reshard { sharding } => {
                // As Shardy prints them: the result's sharding is the op's own
                // sharding (no `sdy.sharding` beside it).
                let own = op
                    .results
                    .first()
                    .and_then(|&r| cx.f.value(r).sharding.as_ref())
                    .unwrap_or(sharding);
                format!("{res}{name} {ops} {}{attrs}{}", own.to_bare(), same(self))
            }
            OpKind::ShardingGroup { group_id } => {
                format!(
                    "{name} {ops} group_id={group_id}{attrs} : {}",
                    types_list(&self.operand_types(cx, op))
                )
            }
            OpKind::DeviceCopy { src, dst } => {
                // Generic form with the devices as properties: MLIR-parsable, not a dialect we own.
                format!(
                    "{res}\"{name}\"({ops}) <{{dst = \"{dst}\", src = \"{src}\"}}>{attrs}{}",
                    full(self)
                )
            }
            OpKind::PropagationBarrier { direction } => {
                format!(
                    "{res}{name} {ops} allowed_direction={}{attrs}{}",
                    direction.name(),
                    same(self)
                )
            }
            OpKind::DataFlowEdge { sharding } => {
                let s = sharding
                    .as_ref()
                    .map(|s| format!(" sharding={}", s.to_bare()))
                    .unwrap_or_default();
                format!("{res}{name} {ops}{s}{attrs}{}", same(self))
            }
            OpKind::AllGather {
                gathering_axes: a,
                out_sharding,
            }
            | OpKind::AllSlice {
                slicing_axes: a,
                out_sharding,
            }
            | OpKind::ReduceScatter {
                scatter_axes: a,
                out_sharding,
            } => {
                format!(
                    "{res}{name} {} {ops} out_sharding={}{attrs}{}",
                    per_dim_text(a),
                    out_sharding.to_bare(),
                    same(self)
                )
            }
            OpKind::AllReduce {
                reduction_axes,
                out_sharding,
            } => {
                format!(
                    "{res}{name} {} {ops} out_sharding={}{attrs}{}",
                    axes_text(reduction_axes),
                    out_sharding.to_bare(),
                    same(self)
                )
            }
            OpKind::AllToAll {
                params,
                out_sharding,
            } => {
                let p: Vec<String> = params
                    .iter()
                    .map(|p| format!("{}: {}->{}", axes_text(&p.axes), p.src_dim, p.tgt_dim))
                    .collect();
                format!(
                    "{res}{name} [{}] {ops} out_sharding={}{attrs}{}",
                    p.join(", "),
                    out_sharding.to_bare(),
                    same(self)
                )
            }
            OpKind::CollectivePermute { out_sharding } => {
                format!(
                    "{res}{name} {ops} out_sharding={}{attrs}{}",
                    out_sharding.to_bare(),
                    same(self)
                )
            }
            OpKind::NamedComputation { .. } | OpKind::ManualComputation { .. } => {
                return self.computation(out, cx, op, ind);
            }
            OpKind::DeviceCollective { op: c, groups } => {
                return self.device_collective(out, cx, op, c, groups, ind);
            }
            OpKind::Call { callee } => {
                let kw = if self.in_stablehlo_region.get() > 0 {
                    "func.call"
                } else {
                    "call"
                };
                format!("{res}{kw} @{callee}({ops}){attrs}{}", full(self))
            }
            OpKind::While => return self.while_op(out, cx, op, ind),
            OpKind::OptimizationBarrier => format!(
                "{res}{name} {ops}{attrs} : {}",
                types_list(&self.operand_types(cx, op))
            ),
            OpKind::BitcastConvert => format!("{res}{name} {ops}{attrs}{}", same(self)),
            OpKind::TopK { k, .. } => {
                let ins = self.operand_types(cx, op);
                let outs = self.result_types(cx, op);
                format!(
                    "{res}{name}({ops}, k = {k}){attrs} : {} -> ({})",
                    types_list(&ins),
                    types_list(&outs)
                )
            }
            OpKind::RngBitGenerator { algorithm } => format!(
                "{res}{name} {ops}, algorithm = {}{attrs}{}",
                algorithm.name(),
                full(self)
            ),
            OpKind::Convolution {
                dims,
                window,
                feature_group_count,
                batch_group_count,
                precision,
            } => {
                let mut extra = vec![
                    (
                        "batch_group_count".to_string(),
                        format!("{batch_group_count} : i64"),
                    ),
                    (
                        "feature_group_count".to_string(),
                        format!("{feature_group_count} : i64"),
                    ),
                ];
                if !precision.is_empty() {
                    let p: Vec<String> = precision
                        .iter()
                        .map(|p| format!("#stablehlo<precision {p}>"))
                        .collect();
                    extra.push(("precision_config".into(), format!("[{}]", p.join(", "))));
                }
                let attrs = self.op_attrs_with(cx, op, &[], extra);
                let w = structured::format_conv_window(window)
                    .map(|w| format!(", window = {w}"))
                    .unwrap_or_default();
                format!(
                    "{res}{name}({ops}) dim_numbers = {}{w}{attrs}{}",
                    structured::format_conv_dims(dims),
                    full(self)
                )
            }
            OpKind::CustomCall { target } => {
                format!("{res}{name} @{target}({ops}){attrs}{}", full(self))
            }
            OpKind::Gather {
                dims,
                slice_sizes,
                indices_are_sorted,
            } => {
                let props = vec![
                    (
                        "dimension_numbers".to_string(),
                        structured::format_gather_dims(dims),
                    ),
                    (
                        "indices_are_sorted".to_string(),
                        indices_are_sorted.to_string(),
                    ),
                    (
                        "slice_sizes".to_string(),
                        structured::format_i64_array(slice_sizes),
                    ),
                ];
                return self.generic(out, cx, op, props, &[], ind);
            }
            OpKind::Scatter {
                dims,
                indices_are_sorted,
                unique_indices,
            } => {
                let props = vec![
                    (
                        "indices_are_sorted".to_string(),
                        indices_are_sorted.to_string(),
                    ),
                    (
                        "scatter_dimension_numbers".to_string(),
                        structured::format_scatter_dims(dims),
                    ),
                    ("unique_indices".to_string(), unique_indices.to_string()),
                ];
                return self.generic(out, cx, op, props, &[], ind);
            }
            OpKind::Sort {
                dimension,
                is_stable,
            } => {
                let props = vec![
                    ("dimension".to_string(), format!("{dimension} : i64")),
                    ("is_stable".to_string(), is_stable.to_string()),
                ];
                return self.generic(out, cx, op, props, &[], ind);
            }
            OpKind::ReduceWindow { window } | OpKind::SelectAndScatter { window } => {
                let mut props = vec![(
                    "window_dimensions".to_string(),
                    structured::format_i64_array(&window.dimensions),
                )];
                for (key, v) in [
                    ("window_strides", &window.strides),
                    ("base_dilations", &window.base_dilations),
                    ("window_dilations", &window.window_dilations),
                ] {
                    if let Some(v) = v {
                        props.push((key.to_string(), structured::format_i64_array(v)));
                    }
                }
                if let Some(p) = &window.padding {
                    props.push(("padding".to_string(), structured::format_padding(p)));
                }
                return self.generic(out, cx, op, props, &[], ind);
            }
            OpKind::Case | OpKind::If => return self.generic(out, cx, op, Vec::new(), &[], ind),
            OpKind::AfterAll => {
                let sep = if op.operands.is_empty() { "" } else { " " };
                format!("{res}{name}{sep}{ops}{attrs}{}", self.bare_result(cx, op))
            }
            OpKind::Send {
                channel,
                is_host_transfer,
            }
            | OpKind::Recv {
                channel,
                is_host_transfer,
            } => {
                let mut props = vec![("channel_handle".to_string(), channel.to_string())];
                if *is_host_transfer {
                    props.push(("is_host_transfer".to_string(), "true".to_string()));
                }
                return self.generic(out, cx, op, props, &[], ind);
            }
            OpKind::Fft { kind, length } => {
                let l = length.iter().map(u64::to_string).collect::<Vec<_>>();
                format!(
                    "{res}{name} {ops}, type = {}, length = [{}]{attrs}{}",
                    kind.name(),
                    l.join(", "),
                    full(self)
                )
            }
            OpKind::Cholesky { lower } => {
                let props = vec![("lower".to_string(), lower.to_string())];
                return self.generic(out, cx, op, props, &[], ind);
            }
            OpKind::TriangularSolve {
                left_side,
                lower,
                unit_diagonal,
                transpose_a,
            } => {
                let props = vec![
                    ("left_side".to_string(), left_side.to_string()),
                    ("lower".to_string(), lower.to_string()),
                    (
                        "transpose_a".to_string(),
                        format!("#stablehlo<transpose {}>", transpose_a.name()),
                    ),
                    ("unit_diagonal".to_string(), unit_diagonal.to_string()),
                ];
                return self.generic(out, cx, op, props, &[], ind);
            }
            OpKind::BatchNormInference {
                epsilon,
                feature_index,
            } => {
                let props = vec![
                    ("epsilon".to_string(), epsilon.clone()),
                    (
                        "feature_index".to_string(),
                        format!("{feature_index} : i64"),
                    ),
                ];
                return self.generic(out, cx, op, props, &[], ind);
            }
            OpKind::Return | OpKind::StablehloReturn | OpKind::SdyReturn => {
                let kw = if matches!(op.kind, OpKind::Return) {
                    "return"
                } else {
                    name
                };
                if op.operands.is_empty() {
                    format!("{kw}{attrs}")
                } else {
                    format!(
                        "{kw} {ops}{attrs} : {}",
                        types_list(&self.operand_types(cx, op))
                    )
                }
            }
        };
        let _ = f;
        let _ = writeln!(out, "{ind}{line}");
    }

    /// A device collective in the generic form JAX prints it in:
    /// `"stablehlo.all_reduce"(%x) <{props}> ({reducer}) {attrs} : (T) -> T`.
    fn device_collective(
        &self,
        out: &mut String,
        cx: &FuncCtx<'_>,
        op: &Op,
        c: &DeviceCollective,
        groups: &[Vec<u64>],
        ind: &str,
    ) {
        const PROPS: [&str; 2] = ["channel_handle", "use_global_device_ids"];
        let mut props: Vec<(String, String)> = raw_pairs(&op.attrs)
            .into_iter()
            .filter(|(k, _)| PROPS.contains(&k.as_str()))
            .collect();
        let int = |v: u64| format!("{v} : i64");
        match c {
            DeviceCollective::AllReduce => {}
            DeviceCollective::AllGather { dim } => props.push(("all_gather_dim".into(), int(*dim))),
            DeviceCollective::ReduceScatter { dim } => {
                props.push(("scatter_dimension".into(), int(*dim)))
            }
            DeviceCollective::AllToAll {
                split_dim,
                concat_dim,
                split_count,
            } => {
                props.push(("split_dimension".into(), int(*split_dim)));
                props.push(("concat_dimension".into(), int(*concat_dim)));
                props.push(("split_count".into(), int(*split_count)));
            }
            DeviceCollective::CollectivePermute { pairs } => {
                let rows: Vec<Vec<u64>> = pairs.iter().map(|&(s, t)| vec![s, t]).collect();
                props.push(("source_target_pairs".into(), int_matrix(&rows)));
            }
        }
        if !matches!(c, DeviceCollective::CollectivePermute { .. }) {
            props.push(("replica_groups".into(), int_matrix(groups)));
        }
        self.generic(out, cx, op, props, &PROPS, ind);
    }

    /// The generic form `"name"(%a) <{props}> ({regions}) {attrs} : (T) -> T`,
    /// as JAX prints gather, scatter, sort, reduce_window, case and device
    /// collectives; `skip` names raw attributes already printed as properties.
    fn generic(
        &self,
        out: &mut String,
        cx: &FuncCtx<'_>,
        op: &Op,
        mut props: Vec<(String, String)>,
        skip: &[&str],
        ind: &str,
    ) {
        let props_text = if props.is_empty() {
            String::new()
        } else {
            format!(" <{}>", attr_dict(&mut props))
        };
        let head = format!(
            "{}\"{}\"({}){props_text}",
            self.results_prefix(cx, op),
            op.kind.name(),
            self.operands(cx, op),
        );
        let tail = format!(
            "{}{}",
            self.op_attrs_except(cx, op, skip),
            self.functional(cx, op, false)
        );
        if op.regions.is_empty() {
            let _ = writeln!(out, "{ind}{head}{tail}");
            return;
        }
        let _ = write!(out, "{ind}{head} (");
        let inner = format!("{ind}  ");
        for (i, r) in op.regions.iter().enumerate() {
            out.push_str(if i == 0 { "{\n" } else { ", {\n" });
            if !r.args.is_empty() {
                let args: Vec<String> = r
                    .args
                    .iter()
                    .map(|&a| format!("{}: {}", cx.name(a), cx.f.value(a).ty))
                    .collect();
                let _ = writeln!(out, "{ind}^bb0({}):", args.join(", "));
            }
            self.in_region(|| {
                for &id in &r.ops {
                    self.op(out, cx, cx.f.op(id), &inner);
                }
            });
            let _ = write!(out, "{ind}}}");
        }
        let _ = writeln!(out, "){tail}");
    }

    /// `stablehlo.while(%iterArg = %x, ...) : T, ... [attributes {..}]` with its
    /// `cond { .. } do { .. }` regions (the iteration arguments named as in `cond`).
    fn while_op(&self, out: &mut String, cx: &FuncCtx<'_>, op: &Op, ind: &str) {
        let empty = Region::default();
        let cond = op.regions.first().unwrap_or(&empty);
        let body = op.regions.get(1).unwrap_or(&empty);
        let carried: Vec<String> = op
            .operands
            .iter()
            .enumerate()
            .map(|(i, &v)| {
                let arg = cond.args.get(i).map_or("%?", |&a| cx.name(a));
                format!("{arg} = {}", cx.name(v))
            })
            .collect();
        let mut head = format!(
            "{}stablehlo.while({})",
            self.results_prefix(cx, op),
            carried.join(", ")
        );
        if !op.operands.is_empty() {
            let _ = write!(head, " : {}", types_list(&self.operand_types(cx, op)));
        }
        let attrs = self.op_attrs(cx, op);
        if !attrs.is_empty() {
            let _ = write!(head, " attributes{attrs}");
        }
        let _ = writeln!(out, "{ind}{head}");
        let _ = writeln!(out, "{ind}cond {{");
        let inner = format!("{ind}  ");
        self.in_region(|| {
            for &id in &cond.ops {
                self.op(out, cx, cx.f.op(id), &inner);
            }
            let _ = writeln!(out, "{ind}}} do {{");
            for &id in &body.ops {
                self.op(out, cx, cx.f.op(id), &inner);
            }
        });
        let _ = writeln!(out, "{ind}}}");
    }

    fn bare_result(&self, cx: &FuncCtx<'_>, op: &Op) -> String {
        format!(" : {}", types_list(&self.result_types(cx, op)))
    }

    fn region_body(&self, out: &mut String, cx: &FuncCtx<'_>, r: &Region, ind: &str) {
        let inner = format!("{ind}  ");
        for &id in &r.ops {
            self.op(out, cx, cx.f.op(id), &inner);
        }
        let _ = writeln!(out, "{ind}}}");
    }

    /// The compact `applies stablehlo.add` form when the body is one plain binary op per input.
    fn compact_reducer(&self, cx: &FuncCtx<'_>, op: &Op) -> Option<&'static str> {
        let r = op.regions.first()?;
        let n = op.operands.len() / 2;
        if n != 1 || r.args.len() != 2 || r.ops.len() != 2 {
            return None;
        }
        let body = cx.f.op(r.ops[0]);
        let ret = cx.f.op(r.ops[1]);
        let OpKind::Binary(b) = body.kind else {
            return None;
        };
        let plain = body.rule.is_none()
            && body.attrs.is_empty()
            && body.results.len() == 1
            && cx.f.value(body.results[0]).sharding.is_none();
        let wired = body.operands == [r.args[0], r.args[1]]
            && matches!(ret.kind, OpKind::StablehloReturn)
            && ret.operands == body.results
            && ret.attrs.is_empty()
            && ret.rule.is_none();
        let init_ty = &cx.f.value(op.operands[1]).ty;
        let typed = r.args.iter().all(|&a| cx.f.value(a).ty == *init_ty)
            && cx.f.value(body.results[0]).ty == *init_ty;
        (plain && wired && typed).then_some(b.name())
    }

    fn reduce(&self, out: &mut String, cx: &FuncCtx<'_>, op: &Op, dims: &[u64], ind: &str) {
        let res = self.results_prefix(cx, op);
        let n = op.operands.len() / 2;
        let pairs: Vec<String> = (0..n)
            .map(|i| {
                format!(
                    "({} init: {})",
                    cx.name(op.operands[i]),
                    cx.name(op.operands[n + i])
                )
            })
            .collect();
        let attrs = self.op_attrs(cx, op);
        let sig = self.functional(cx, op, false);
        if let Some(b) = self.compact_reducer(cx, op) {
            let _ = writeln!(
                out,
                "{ind}{res}stablehlo.reduce{} applies {b} across dimensions = {}{attrs}{sig}",
                pairs.join(", "),
                list(dims)
            );
            return;
        }
        let _ = writeln!(
            out,
            "{ind}{res}stablehlo.reduce{} across dimensions = {}{attrs}{sig}",
            pairs.join(", "),
            list(dims)
        );
        let empty = Region::default();
        let r = op.regions.first().unwrap_or(&empty);
        let groups: Vec<String> = (0..n)
            .map(|i| {
                let arg = |k: usize| {
                    r.args
                        .get(k)
                        .map(|&a| format!("{}: {}", cx.name(a), cx.f.value(a).ty))
                        .unwrap_or_default()
                };
                format!("({}, {})", arg(i), arg(n + i))
            })
            .collect();
        let _ = writeln!(out, "{ind} reducer{}  {{", groups.join(" "));
        self.region_body(out, cx, r, ind);
    }

    fn computation(&self, out: &mut String, cx: &FuncCtx<'_>, op: &Op, ind: &str) {
        let res = self.results_prefix(cx, op);
        let ops = self.operands(cx, op);
        let mut head = match &op.kind {
            OpKind::NamedComputation {
                name,
                in_shardings,
                out_shardings,
            } => {
                let mut s = format!("{res}sdy.named_computation<\"{name}\">({ops})");
                if let Some(i) = in_shardings {
                    let _ = write!(s, " in_shardings={}", sharding_list(i));
                }
                if let Some(o) = out_shardings {
                    let _ = write!(s, " out_shardings={}", sharding_list(o));
                }
                s
            }
            OpKind::ManualComputation {
                in_shardings,
                out_shardings,
                manual_axes,
            } => {
                let axes: Vec<String> = manual_axes.iter().map(|a| format!("\"{a}\"")).collect();
                format!(
                    "{res}sdy.manual_computation({ops}) in_shardings={} out_shardings={} manual_axes={{{}}}",
                    sharding_list(in_shardings),
                    sharding_list(out_shardings),
                    axes.join(", ")
                )
            }
            _ => String::new(),
        };
        let empty = Region::default();
        let r = op.regions.first().unwrap_or(&empty);
        let args: Vec<String> = r
            .args
            .iter()
            .map(|&a| format!("{}: {}", cx.name(a), cx.f.value(a).ty))
            .collect();
        let _ = write!(head, " ({}) {{", args.join(", "));
        let _ = writeln!(out, "{ind}{head}");
        let inner = format!("{ind}  ");
        for &id in &r.ops {
            self.op(out, cx, cx.f.op(id), &inner);
        }
        let attrs = self.op_attrs(cx, op);
        let sig = self.functional(cx, op, false);
        let _ = writeln!(out, "{ind}}}{attrs}{sig}");
    }
}
