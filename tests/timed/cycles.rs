//! No fusion of the timed run sits on a cycle: a step that reads both sides
//! of a matmul or a collective never joins its producer's kernel (as XLA's
//! fusion passes refuse a fusion that makes a cycle). The minimal cases are
//! worked by hand (tests/fixtures/timed/fusion_cycle.mlir); random small
//! programs of elementwise steps, matmuls, reductions, copied constants and
//! the collectives their shardings need give an acyclic kernel graph with
//! every step in exactly one kernel; so does every JAX fixture, and
//! `mlp_grad`'s kernels are counted by hand.

use std::collections::BTreeMap;

use super::fusion::kernels;
use proptest::prelude::*;
use shardsim::exec::timed::fusion::{fused_costs, plan, FusionPlan};
use shardsim::ir::mlir::parse_and_verify;
use shardsim::partition::{partition, SpmdProgram, Step};
use shardsim::propagate::{propagate_module, Strategy as Propagation};

/// What a step reads and what it writes.
fn io(s: &Step) -> (Vec<usize>, Vec<usize>) {
    match s {
        Step::Local {
            operands, results, ..
        } => (operands.clone(), results.clone()),
        Step::Collective(c) => (
            std::iter::once(c.input)
                .chain(c.extra_inputs.iter().copied())
                .collect(),
            vec![c.output],
        ),
        Step::Loop(l) => (
            l.inits
                .iter()
                .chain(&l.yields)
                .copied()
                .chain([l.pred])
                .collect(),
            l.carried.clone(),
        ),
        Step::Case(c) => (
            std::iter::once(c.selector)
                .chain(c.yields.iter().flatten().copied())
                .collect(),
            c.results.clone(),
        ),
    }
}

/// Per step, the kernel it runs in (named by a step of it), or `None` for a
/// constant that each fusion reading it copies. Errors if a fusion is not
/// named by one of its own steps.
fn kernel_of(p: &SpmdProgram, plan: &FusionPlan) -> Result<Vec<Option<usize>>, String> {
    let n = p.steps.len();
    let mut readers: Vec<Vec<usize>> = vec![Vec::new(); p.values.len()];
    for (i, s) in p.steps.iter().enumerate() {
        for o in io(s).0 {
            readers[o].push(i);
        }
    }
    let mut out = vec![None; n];
    for (i, slot) in out.iter_mut().enumerate() {
        if plan.clone_only[i] {
            continue;
        }
        let k = match plan.group[i] {
            Some(g) if plan.group[g] != Some(g) || g > i => {
                return Err(format!("step {i}: fusion {g} is not its own first step"))
            }
            Some(g) => g,
            None => i,
        };
        *slot = Some(k);
    }
    for i in 0..n {
        // A gather inside its matmul, an add in its matmul's epilogue.
        if plan.in_matmul[i] {
            let (_, results) = io(&p.steps[i]);
            out[i] = out[readers[results[0]][0]];
        }
        if let Some(j) = plan.epilogue_of[i] {
            out[i] = out[j];
        }
    }
    Ok(out)
}

/// Whether the kernel graph of `plan` is acyclic (Kahn's algorithm over
/// kernels, an edge per value read from another kernel; a copied constant
/// links nothing); a description of a kernel left on a cycle if not.
fn acyclic(p: &SpmdProgram, plan: &FusionPlan) -> Result<usize, String> {
    let kernel = kernel_of(p, plan)?;
    let mut producer: BTreeMap<usize, usize> = BTreeMap::new();
    for (i, s) in p.steps.iter().enumerate() {
        for r in io(s).1 {
            producer.insert(r, i);
        }
    }
    let mut edges: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    let mut indegree: BTreeMap<usize, usize> = BTreeMap::new();
    for k in kernel.iter().flatten() {
        indegree.entry(*k).or_default();
    }
    let mut seen = std::collections::BTreeSet::new();
    for (c, s) in p.steps.iter().enumerate() {
        for o in io(s).0 {
            let Some(&j) = producer.get(&o) else { continue };
            if plan.cloned[j] && plan.group[c].is_some() {
                continue;
            }
            let (Some(a), Some(b)) = (kernel[j], kernel[c]) else {
                return Err(format!("step {c} reads step {j}, which runs nowhere"));
            };
            if a != b && seen.insert((a, b)) {
                edges.entry(a).or_default().push(b);
                *indegree.entry(b).or_default() += 1;
            }
        }
    }
    let kernels = indegree.len();
    let mut ready: Vec<usize> = indegree
        .iter()
        .filter(|(_, &d)| d == 0)
        .map(|(&k, _)| k)
        .collect();
    let mut done = 0;
    while let Some(k) = ready.pop() {
        done += 1;
        for &b in edges.get(&k).map(Vec::as_slice).unwrap_or(&[]) {
            let d = indegree.get_mut(&b).unwrap();
            *d -= 1;
            if *d == 0 {
                ready.push(b);
            }
        }
    }
    if done == kernels {
        Ok(kernels)
    } else {
        let stuck: Vec<usize> = indegree
            .iter()
            .filter(|(_, &d)| d > 0)
            .map(|(&k, _)| k)
            .collect();
        Err(format!("kernels on a cycle: {stuck:?}"))
    }
}

#[test]
fn a_step_reading_both_sides_of_a_matmul_starts_a_kernel_of_its_own() {
    let p = super::program("timed/fusion_cycle.mlir");
    let plan = plan(&p, false);
    assert_eq!(acyclic(&p, &plan), Ok(6));
    let ks = kernels(&p, &plan);
    let launches = fused_costs(&p, &plan).iter().filter(|c| c.launch).count();
    assert_eq!(launches, 6, "{ks:?}");
    // Every buffer but the weight: 8 of 64 rows of 64 f32 per device.
    let row_block = p.values[p.args[0]].local_bytes();
    assert_eq!(row_block, 2048);
    let w = p.values[p.args[2]].local_bytes();
    let ops: Vec<(u64, Vec<&str>)> = ks.values().cloned().collect();
    let matmul = (3 * row_block - row_block + w, vec!["stablehlo.dot_general"]);
    assert_eq!(
        ops,
        [
            // exp(a): reads a, writes x (the matmul reads it).
            (2 * row_block, vec!["stablehlo.exponential"]),
            matmul.clone(),
            // add(x, m): reads both, writes z.
            (3 * row_block, vec!["stablehlo.add"]),
            // tanh(b) and 1 - y (the ones computed in registers): reads b,
            // writes y (the matmul reads it) and 1 - y; the subtract takes
            // y from registers, though y is written out for the matmul.
            (3 * row_block, vec!["stablehlo.tanh", "stablehlo.subtract"]),
            matmul,
            // multiply(n, 1 - y): reads both, writes v.
            (3 * row_block, vec!["stablehlo.multiply"]),
        ],
        "{ks:?}"
    );
}

/// The JAX fixtures: every kernel graph acyclic, with and without attention
/// fusion, and the fusions differ from joining along every edge (the
/// planner before the cycle check) only where those sat on a cycle, each by
/// one kernel more:
/// - `mlp_grad` (by hand, 17 kernels of which 12 launch: 5 matmuls, 5
///   all-reduces not launched by the compute stream, 7 fusions): the
///   forward's bias add and tanh; the second bias add, loss gradient and
///   its scale with the bias gradient's partial sum; the tanh derivative
///   `(1 - t) g + (1 - t) g t` with the first bias gradient's partial sum,
///   which reads the forward's tanh (and `1 - t`, made with it) and a
///   backward matmul, so it cannot join the forward's kernel (the old
///   planner put both in one kernel, 15 of 23 kernels on the cycle); the two reshape-and-sum kernels after the bias
///   gradients' all-reduces; the two weight-gradient transposes;
/// - `softmax_sharded_reduced_dim`, `broadcast_elementwise_chains`: a step
///   reading values from both sides of an all-reduce (the softmax's
///   exponentials and their all-reduced sum; a column mean and the values
///   its partial sums read) starts a kernel of its own.
#[test]
fn no_fusion_sits_on_a_cycle_in_the_jax_fixtures() {
    let mut changed = BTreeMap::new();
    for dir in crate::common::jax_cases_with_data() {
        let name = dir.file_name().unwrap().to_string_lossy().to_string();
        let text = std::fs::read_to_string(dir.join("before.mlir")).unwrap();
        let mut m = parse_and_verify(&text).unwrap();
        propagate_module(&mut m, Propagation::default()).unwrap();
        let p = partition(&m).unwrap();
        for attention in [false, true] {
            let plan = plan(&p, attention);
            let k = acyclic(&p, &plan).unwrap_or_else(|e| panic!("{name} ({attention}): {e}"));
            let old = joined_along_every_edge(&p, &plan);
            let launches =
                |pl: &FusionPlan| fused_costs(&p, pl).iter().filter(|c| c.launch).count();
            if old.group == plan.group {
                continue;
            }
            assert!(
                acyclic(&p, &old).is_err(),
                "{name}: fusions split that sat on no cycle"
            );
            assert_eq!(launches(&plan), launches(&old) + 1, "{name} ({attention})");
            changed.insert(name.clone(), (k, launches(&plan)));
            if name == "mlp_grad" {
                // The tanh derivative's `1 - t` runs with the forward's
                // tanh, apart from the backward kernel that reads it.
                let op = |i: usize| match &p.steps[i] {
                    Step::Local { op, .. } => p.local_func.op(*op).kind.name(),
                    _ => "",
                };
                let tanh = (0..p.steps.len())
                    .find(|&i| op(i) == "stablehlo.tanh")
                    .unwrap();
                let t = io(&p.steps[tanh]).1[0];
                let one_minus = (0..p.steps.len())
                    .find(|&i| op(i) == "stablehlo.subtract" && io(&p.steps[i]).0.contains(&t))
                    .unwrap();
                let u = io(&p.steps[one_minus]).1[0];
                let reader = (0..p.steps.len())
                    .find(|&i| io(&p.steps[i]).0.contains(&u))
                    .unwrap();
                assert_eq!(plan.group[tanh], plan.group[one_minus]);
                assert_ne!(plan.group[one_minus], plan.group[reader]);
                assert_eq!(old.group[tanh], old.group[reader]);
            }
        }
    }
    assert_eq!(
        changed,
        BTreeMap::from([
            ("broadcast_elementwise_chains".to_string(), (10, 7)),
            ("mlp_grad".to_string(), (17, 12)),
            ("softmax_sharded_reduced_dim".to_string(), (5, 3)),
        ])
    );
}

/// `plan` with every two fusible steps an edge links joined (the planner
/// before levels): the fusions it made, cycles and all.
fn joined_along_every_edge(p: &SpmdProgram, plan: &FusionPlan) -> FusionPlan {
    let n = p.steps.len();
    let mut parent: Vec<usize> = (0..n).collect();
    fn find(parent: &mut [usize], mut i: usize) -> usize {
        while parent[i] != i {
            i = parent[i];
        }
        i
    }
    let mut producer: BTreeMap<usize, usize> = BTreeMap::new();
    for (i, s) in p.steps.iter().enumerate() {
        let (ins, outs) = io(s);
        if plan.group[i].is_some() && !plan.cloned[i] {
            for o in ins {
                if let Some(&j) = producer.get(&o) {
                    if plan.group[j].is_some() && !plan.cloned[j] {
                        let (a, b) = (find(&mut parent, i), find(&mut parent, j));
                        parent[a.max(b)] = a.min(b);
                    }
                }
            }
        }
        for r in outs {
            producer.insert(r, i);
        }
    }
    let group = (0..n)
        .map(|i| plan.group[i].map(|_| find(&mut parent, i)))
        .collect();
    FusionPlan {
        group,
        ..plan.clone()
    }
}

/// A random program over f32 16x16 values on a 2-device mesh: each op
/// (unary, binary, matmul, a scale by a shared splat constant, a row sum
/// broadcast back) reads earlier values; inputs sharded at random, so the
/// partitioner adds the collectives the matmuls and sums need. Every value
/// no op reads is a result.
fn arb_dag() -> impl Strategy<Value = String> {
    let sharding = prop_oneof![
        Just(r#"[{"d"}, {}]"#),
        Just(r#"[{}, {"d"}]"#),
        Just("[{}, {}]"),
    ];
    (
        proptest::collection::vec(sharding, 1..=3),
        proptest::collection::vec(
            (0u8..7, any::<prop::sample::Index>(), any::<prop::sample::Index>()),
            2..=16,
        ),
    )
        .prop_map(|(args, ops)| {
            let t = "tensor<16x16xf32>";
            let mut body = String::new();
            body.push_str("  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>\n");
            body.push_str("  %two = stablehlo.constant dense<2.000000e+00> : tensor<f32>\n");
            body.push_str(&format!(
                "  %twos = stablehlo.broadcast_in_dim %two, dims = [] : (tensor<f32>) -> {t}\n"
            ));
            let mut names: Vec<String> = (0..args.len()).map(|i| format!("%a{i}")).collect();
            let mut read = vec![false; args.len()];
            for (i, (kind, x, y)) in ops.iter().enumerate() {
                let (xi, yi) = (x.index(names.len()), y.index(names.len()));
                let (a, b) = (names[xi].clone(), names[yi].clone());
                read[xi] = true;
                let v = format!("%v{i}");
                let line = match kind {
                    0 => format!("{v} = stablehlo.tanh {a} : {t}"),
                    1 => format!("{v} = stablehlo.exponential {a} : {t}"),
                    2 => {
                        read[yi] = true;
                        format!("{v} = stablehlo.add {a}, {b} : {t}")
                    }
                    3 => {
                        read[yi] = true;
                        format!("{v} = stablehlo.multiply {a}, {b} : {t}")
                    }
                    4 => {
                        read[yi] = true;
                        format!(
                            "{v} = stablehlo.dot_general {a}, {b}, contracting_dims = [1] x [0] : ({t}, {t}) -> {t}"
                        )
                    }
                    5 => format!("{v} = stablehlo.multiply {a}, %twos : {t}"),
                    _ => format!(
                        "{v}r = stablehlo.reduce({a} init: %zero) applies stablehlo.add across dimensions = [1] : ({t}, tensor<f32>) -> tensor<16xf32>\n  {v} = stablehlo.broadcast_in_dim {v}r, dims = [0] : (tensor<16xf32>) -> {t}"
                    ),
                };
                body.push_str(&format!("  {line}\n"));
                names.push(v);
                read.push(false);
            }
            let results: Vec<&String> = names
                .iter()
                .zip(&read)
                .skip(args.len())
                .filter(|(_, &r)| !r)
                .map(|(n, _)| n)
                .collect();
            let params: Vec<String> = args
                .iter()
                .enumerate()
                .map(|(i, s)| format!("%a{i}: {t} {{sdy.sharding = #sdy.sharding<@mesh, {s}>}}"))
                .collect();
            let types = vec![t; results.len()].join(", ");
            let rets: Vec<&str> = results.iter().map(|s| s.as_str()).collect();
            format!(
                "sdy.mesh @mesh = <[\"d\"=2]>\nfunc.func @main({}) -> ({types}) {{\n{body}  return {} : {types}\n}}\n",
                params.join(", "),
                rets.join(", ")
            )
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// The fused kernel graph of a random program is acyclic, every step
    /// is in exactly one kernel (a fusion named by its first step), and
    /// each kernel launches once.
    #[test]
    fn fused_kernel_graphs_are_acyclic(text in arb_dag(), attention in any::<bool>()) {
        let mut m = parse_and_verify(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        propagate_module(&mut m, Propagation::default()).unwrap();
        let p = partition(&m).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let plan = plan(&p, attention);
        let k = acyclic(&p, &plan);
        prop_assert!(k.is_ok(), "{:?}\n{}", k, text);
        let launches = fused_costs(&p, &plan).iter().filter(|c| c.launch).count();
        let kernels = kernel_of(&p, &plan).unwrap();
        // Kernels that launch: those with a step that is a kernel.
        let costs = fused_costs(&p, &plan);
        let launching: std::collections::BTreeSet<usize> = kernels
            .iter()
            .zip(&costs)
            .filter(|(_, c)| c.kernel)
            .filter_map(|(k, _)| *k)
            .collect();
        prop_assert_eq!(launches, launching.len(), "{}", text);
    }
}
