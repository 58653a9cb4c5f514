//! The timed run's kernel fusion and constants: a compiler copies a constant
//! (and a broadcast of one) into every fusion that reads it, so a shared
//! scalar never joins two kernels nor costs traffic
//! (tests/fixtures/timed/shared_constant.mlir, worked by hand); and on
//! every JAX fixture no fusion is joined through a constant, among them
//! `mlp_grad`, whose one zero constant initializes reductions on both sides
//! of the backward matmuls.

use std::collections::{BTreeMap, BTreeSet};

use shardsim::exec::timed::fusion::{fused_costs, plan, FusionPlan};
use shardsim::ir::mlir::parse_and_verify;
use shardsim::ir::OpKind;
use shardsim::partition::{partition, SpmdProgram, Step};
use shardsim::propagate::{propagate_module, Strategy};

/// Per launched kernel (by its fusion, or its step): bytes moved and the
/// names of its ops.
pub(super) fn kernels(
    p: &SpmdProgram,
    plan: &FusionPlan,
) -> BTreeMap<usize, (u64, Vec<&'static str>)> {
    let costs = fused_costs(p, plan);
    let mut out: BTreeMap<usize, (u64, Vec<&'static str>)> = BTreeMap::new();
    for (i, (s, c)) in p.steps.iter().zip(&costs).enumerate() {
        if !c.kernel {
            continue;
        }
        let k = out.entry(plan.group[i].unwrap_or(i)).or_default();
        k.0 += c.bytes;
        if let Step::Local { op, .. } = s {
            k.1.push(p.local_func.op(*op).kind.name());
        }
    }
    out
}

#[test]
fn a_shared_scalar_constant_is_copied_into_each_fusion() {
    let p = super::program("timed/shared_constant.mlir");
    let plan = plan(&p, false);
    let ks = kernels(&p, &plan);
    let launches = fused_costs(&p, &plan).iter().filter(|c| c.launch).count();
    assert_eq!(launches, ks.len(), "one launch per kernel: {ks:?}");
    let arg = |i: usize| p.values[p.args[i]].local_bytes();
    let result = |i: usize| p.values[p.results[i]].local_bytes();
    let find = |name: &str| {
        ks.values()
            .filter(|(_, ops)| ops.contains(&name))
            .collect::<Vec<_>>()
    };
    // Each chain: its own kernel, its input read and its output written,
    // nothing for the constant.
    for (name, input, output) in [("stablehlo.exponential", 0, 0), ("stablehlo.tanh", 1, 1)] {
        let k = find(name);
        assert_eq!(k.len(), 1, "{name}: {ks:?}");
        assert!(
            !k[0].1.contains(&"stablehlo.tanh") || !k[0].1.contains(&"stablehlo.exponential"),
            "the chains share a kernel: {ks:?}"
        );
        assert_eq!(k[0].0, arg(input) + result(output), "{name}: {ks:?}");
    }
    // The matmul reads a written broadcast: a kernel of its own writes it.
    let matmul = find("stablehlo.dot_general");
    assert_eq!(matmul.len(), 1, "{ks:?}");
    let broadcast = find("stablehlo.broadcast_in_dim");
    assert_eq!(broadcast.len(), 1, "{ks:?}");
    assert_eq!(broadcast[0].1, ["stablehlo.broadcast_in_dim"], "{ks:?}");
    assert_eq!(
        broadcast[0].0,
        arg(0),
        "the broadcast writes one buffer: {ks:?}"
    );
    assert_eq!(ks.len(), 4, "{ks:?}");
    // The constant is never allocated; the broadcast the matmul reads is.
    let mut constants = 0;
    for s in &p.steps {
        if let Step::Local { op, results, .. } = s {
            match p.local_func.op(*op).kind {
                OpKind::Constant { .. } => {
                    constants += 1;
                    assert!(results.iter().all(|&r| plan.internal[r]));
                }
                OpKind::BroadcastInDim { .. } => {
                    assert!(results.iter().all(|&r| !plan.internal[r]));
                }
                _ => {}
            }
        }
    }
    assert_eq!(constants, 1);
}

/// Whether every fusion of `p` is connected through values other than
/// copied constants (a description of the first that is not).
fn joined_by_a_constant(p: &SpmdProgram, plan: &FusionPlan) -> Option<String> {
    let mut producer: BTreeMap<usize, usize> = BTreeMap::new();
    let mut members: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    let mut edges: Vec<(usize, usize)> = Vec::new();
    for (i, s) in p.steps.iter().enumerate() {
        let Step::Local {
            operands, results, ..
        } = s
        else {
            continue;
        };
        if let (Some(g), false) = (plan.group[i], plan.cloned[i]) {
            members.entry(g).or_default().push(i);
            for o in operands {
                if let Some(&j) = producer.get(o) {
                    if !plan.cloned[j] && plan.group[j] == Some(g) {
                        edges.push((j, i));
                    }
                }
            }
        }
        for &r in results {
            producer.insert(r, i);
        }
    }
    for (g, steps) in members {
        // Flood from the first member over the fusion's own edges.
        let mut seen: BTreeSet<usize> = BTreeSet::from([steps[0]]);
        let mut grew = true;
        while grew {
            grew = false;
            for &(a, b) in &edges {
                if seen.contains(&a) != seen.contains(&b) {
                    seen.insert(a);
                    seen.insert(b);
                    grew = true;
                }
            }
        }
        if seen.len() != steps.len() {
            return Some(format!("fusion {g}: {steps:?} joined through a constant"));
        }
    }
    None
}

/// On every JAX fixture, a fusion holds no constant and is connected
/// through its own values; in `mlp_grad` one zero constant initializes
/// four reductions, two before and two after the backward matmuls and
/// all-reduces: four kernels, not one.
#[test]
fn constants_join_no_fusions_in_the_jax_fixtures() {
    let mut checked = Vec::new();
    for dir in crate::common::jax_cases_with_data() {
        let name = dir.file_name().unwrap().to_string_lossy().to_string();
        let text = std::fs::read_to_string(dir.join("before.mlir")).unwrap();
        let mut m = parse_and_verify(&text).unwrap();
        propagate_module(&mut m, Strategy::default()).unwrap();
        let p = partition(&m).unwrap();
        for attention in [false, true] {
            let plan = plan(&p, attention);
            if let Some(e) = joined_by_a_constant(&p, &plan) {
                panic!("{name} (attention {attention}): {e}");
            }
            for (i, s) in p.steps.iter().enumerate() {
                if let Step::Local { op, .. } = s {
                    if matches!(p.local_func.op(*op).kind, OpKind::Constant { .. }) {
                        assert!(plan.cloned[i], "{name}: step {i} is a constant");
                    }
                }
            }
        }
        if name == "mlp_grad" {
            let plan = plan(&p, false);
            // The reductions by the constant they share as initial value.
            let mut by_init: BTreeMap<usize, BTreeSet<usize>> = BTreeMap::new();
            let mut count: BTreeMap<usize, usize> = BTreeMap::new();
            for (i, s) in p.steps.iter().enumerate() {
                if let Step::Local { op, operands, .. } = s {
                    if matches!(p.local_func.op(*op).kind, OpKind::Reduce { .. }) {
                        by_init
                            .entry(operands[1])
                            .or_default()
                            .insert(plan.group[i].unwrap());
                        *count.entry(operands[1]).or_default() += 1;
                    }
                }
            }
            let (init, fusions) = by_init.iter().next().unwrap();
            assert_eq!(by_init.len(), 1, "one shared zero: {by_init:?}");
            assert_eq!(count[init], 4, "{count:?}");
            assert_eq!(
                fusions.len(),
                4,
                "each reduction in its own kernel: {fusions:?}"
            );
        }
        checked.push(name);
    }
    assert!(checked.iter().any(|n| n == "mlp_grad"), "{checked:?}");
}
