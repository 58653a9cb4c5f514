//! Invariants of propagation on random programs (chains of elementwise ops,
//! transposes, dots, reductions and broadcasts over a 2x4 mesh, with random
//! input shardings and constraints), plus the barrier directions.

use proptest::prelude::*;
use shardsim::ir::mlir::{parse_and_verify, print_module};
use shardsim::ir::{Module, OpKind, ValueDef};
use shardsim::mesh::Mesh;
use shardsim::propagate::{propagate_module, Strategy as Pipeline};
use shardsim::sharding::TensorSharding;

const SIZES: [u64; 2] = [8, 16];

/// One step of a random program, applied to earlier values by index.
#[derive(Debug, Clone)]
enum Step {
    Tanh(usize),
    Add(usize, usize),
    Transpose(usize),
    Dot(usize, usize),
    ReduceBroadcast(usize),
    Constraint(usize, String),
}

fn dim_sharding() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("{}".to_string()),
        Just("{?}".to_string()),
        Just("{\"x\"}".to_string()),
        Just("{\"y\"}".to_string()),
        Just("{\"x\", ?}".to_string()),
        Just("{\"y\", ?}".to_string()),
        Just("{\"y\", \"x\"}".to_string()),
    ]
}

fn sharding_text() -> impl Strategy<Value = String> {
    (dim_sharding(), dim_sharding()).prop_map(|(a, b)| {
        // The same axis on both dims is invalid: drop the second dim's axes then.
        let clash = (a.contains('x') && b.contains('x')) || (a.contains('y') && b.contains('y'));
        let b = if clash { "{?}".to_string() } else { b };
        format!("<@mesh, [{a}, {b}]>")
    })
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        any::<usize>().prop_map(Step::Tanh),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Step::Add(a, b)),
        any::<usize>().prop_map(Step::Transpose),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Step::Dot(a, b)),
        any::<usize>().prop_map(Step::ReduceBroadcast),
        (
            any::<usize>(),
            sharding_text().prop_filter("closed", |s| !s.contains('?'))
        )
            .prop_map(|(a, s)| Step::Constraint(a, s)),
    ]
}

/// Build the program text; returns it with the constraint shardings by result name.
fn program(args: &[((usize, usize), String)], steps: &[Step]) -> (String, Vec<(String, String)>) {
    let mut vals: Vec<(String, u64, u64)> = Vec::new();
    let mut sig = Vec::new();
    for (i, ((a, b), s)) in args.iter().enumerate() {
        let (r, c) = (SIZES[a % 2], SIZES[b % 2]);
        sig.push(format!(
            "%arg{i}: tensor<{r}x{c}xf32> {{sdy.sharding = #sdy.sharding{s}}}"
        ));
        vals.push((format!("%arg{i}"), r, c));
    }
    let mut body = Vec::new();
    let mut constraints = Vec::new();
    let mut n = 0;
    for st in steps {
        let pick = |i: usize| vals[i % vals.len()].clone();
        let name = format!("%{n}");
        let line = match st {
            Step::Tanh(i) => {
                let (a, r, c) = pick(*i);
                vals.push((name.clone(), r, c));
                format!("{name} = stablehlo.tanh {a} : tensor<{r}x{c}xf32>")
            }
            Step::Add(i, j) => {
                let (a, r, c) = pick(*i);
                let Some((b, _, _)) = vals
                    .iter()
                    .rev()
                    .find(|v| v.1 == r && v.2 == c && v.0 != a)
                    .cloned()
                    .or_else(|| {
                        let _ = j;
                        None
                    })
                else {
                    continue;
                };
                vals.push((name.clone(), r, c));
                format!("{name} = stablehlo.add {a}, {b} : tensor<{r}x{c}xf32>")
            }
            Step::Transpose(i) => {
                let (a, r, c) = pick(*i);
                vals.push((name.clone(), c, r));
                format!("{name} = stablehlo.transpose {a}, dims = [1, 0] : (tensor<{r}x{c}xf32>) -> tensor<{c}x{r}xf32>")
            }
            Step::Dot(i, j) => {
                let (a, r, k) = pick(*i);
                let Some((b, _, c)) = vals
                    .iter()
                    .cycle()
                    .skip(*j % vals.len())
                    .take(vals.len())
                    .find(|v| v.1 == k)
                    .cloned()
                else {
                    continue;
                };
                vals.push((name.clone(), r, c));
                format!(
                    "{name} = stablehlo.dot_general {a}, {b}, contracting_dims = [1] x [0] : (tensor<{r}x{k}xf32>, tensor<{k}x{c}xf32>) -> tensor<{r}x{c}xf32>"
                )
            }
            Step::ReduceBroadcast(i) => {
                let (a, r, c) = pick(*i);
                body.push(format!(
                    "%z{n} = sdy.constant dense<0.000000e+00> : tensor<f32>"
                ));
                body.push(format!(
                    "%s{n} = stablehlo.reduce({a} init: %z{n}) applies stablehlo.add across dimensions = [1] : (tensor<{r}x{c}xf32>, tensor<f32>) -> tensor<{r}xf32>"
                ));
                vals.push((name.clone(), r, c));
                format!("{name} = stablehlo.broadcast_in_dim %s{n}, dims = [0] : (tensor<{r}xf32>) -> tensor<{r}x{c}xf32>")
            }
            Step::Constraint(i, s) => {
                let (a, r, c) = pick(*i);
                vals.push((name.clone(), r, c));
                constraints.push((name.clone(), s.clone()));
                format!("{name} = sdy.sharding_constraint {a} {s} : tensor<{r}x{c}xf32>")
            }
        };
        body.push(line);
        n += 1;
    }
    let (last, r, c) = vals.last().unwrap().clone();
    let text = format!(
        "module @m {{\n  sdy.mesh @mesh = <[\"x\"=2, \"y\"=4]>\n  func.func @main({}) -> tensor<{r}x{c}xf32> {{\n    {}\n    return {last} : tensor<{r}x{c}xf32>\n  }}\n}}\n",
        sig.join(", "),
        body.join("\n    ")
    );
    (text, constraints)
}

fn shardings(m: &Module) -> Vec<Option<TensorSharding>> {
    m.funcs[0]
        .values
        .iter()
        .map(|v| v.sharding.clone())
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn propagation_invariants(
        args in proptest::collection::vec(((0usize..2, 0usize..2), sharding_text()), 1..4),
        steps in proptest::collection::vec(step(), 1..12),
    ) {
        let (text, constraints) = program(&args, &steps);
        let input = parse_and_verify(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let mut m = input.clone();
        propagate_module(&mut m, Pipeline::default()).unwrap();
        let mesh = Mesh::parse(r#"<["x"=2, "y"=4]>"#).unwrap();
        let f = &m.funcs[0];
        // Every sharding is valid for the mesh (padding allowed for uneven splits).
        for v in &f.values {
            if let Some(s) = &v.sharding {
                prop_assert!(s.validate(&mesh, &v.ty.shape, true).is_ok(), "{}: {} invalid\n{}", v.name, s.to_bare(), text);
            }
        }
        // Closed dims of the inputs are kept; open dims only grow.
        for (i, v) in input.funcs[0].values.iter().enumerate() {
            if !matches!(v.def, ValueDef::FuncArg(_)) { continue; }
            let (Some(before), Some(after)) = (&v.sharding, &f.values[i].sharding) else { continue };
            for (d, (b, a)) in before.dims.iter().zip(&after.dims).enumerate() {
                if b.is_closed {
                    prop_assert_eq!(&b.axes, &a.axes, "closed dim {} of {} changed\n{}", d, v.name, text);
                } else {
                    prop_assert!(a.axes.starts_with(&b.axes), "open dim {} of {} lost axes\n{}", d, v.name, text);
                }
            }
        }
        // Every constraint keeps its sharding and becomes a reshard, unless
        // nothing uses it: then export's canonicalization removes it.
        // (used: by an op of the input whose results are still there).
        let g = &input.funcs[0];
        let kept = |o: shardsim::ir::OpId| {
            g.op(o).results.iter().all(|&r| f.values.iter().any(|v| v.name == g.value(r).name))
        };
        let used = |name: &str| {
            g.walk().iter().any(|&o| kept(o) && g.op(o).operands.iter().any(|&x| g.value(x).name == name))
        };
        for (name, s) in &constraints {
            let Some(v) = f.values.iter().position(|v| &v.name == name) else {
                prop_assert!(!used(name), "used constraint {} was removed\n{}", name, text);
                continue;
            };
            let ValueDef::Result { op, .. } = f.values[v].def else { unreachable!() };
            match &f.op(op).kind {
                OpKind::Reshard { sharding } => prop_assert_eq!(sharding.to_bare(), TensorSharding::parse(s).unwrap().to_bare()),
                k => prop_assert!(false, "constraint {} became {}", name, k.name()),
            }
        }
        // Idempotent: propagating the printed result changes nothing.
        let printed = print_module(&m);
        let mut again = parse_and_verify(&printed).unwrap();
        let first = shardings(&again);
        propagate_module(&mut again, Pipeline::default()).unwrap();
        prop_assert_eq!(first, shardings(&again), "second propagation changed shardings\n{}", printed);
        prop_assert_eq!(&m.funcs[0].result_shardings, &again.funcs[0].result_shardings);
    }
}

/// `arg -> tanh -> barrier(dir) -> tanh -> constraint`: what crosses the barrier.
fn barrier_case(dir: &str) -> (Option<TensorSharding>, Option<TensorSharding>) {
    let text = format!(
        r#"module @m {{
  sdy.mesh @mesh = <["x"=2, "y"=4]>
  func.func @main(%arg0: tensor<8x16xf32> {{sdy.sharding = #sdy.sharding<@mesh, [{{"x", ?}}, {{?}}]>}}) -> tensor<8x16xf32> {{
    %0 = stablehlo.tanh %arg0 : tensor<8x16xf32>
    %1 = sdy.propagation_barrier %0 allowed_direction={dir} : tensor<8x16xf32>
    %2 = stablehlo.tanh %1 : tensor<8x16xf32>
    %3 = sdy.sharding_constraint %2 <@mesh, [{{"x"}}, {{"y"}}]> : tensor<8x16xf32>
    return %3 : tensor<8x16xf32>
  }}
}}
"#
    );
    let mut m = parse_and_verify(&text).unwrap_or_else(|e| panic!("{e}"));
    propagate_module(&mut m, Pipeline::default()).unwrap();
    let f = &m.funcs[0];
    let get = |n: &str| {
        f.values
            .iter()
            .find(|v| v.name == n)
            .unwrap()
            .sharding
            .clone()
    };
    (get("%0"), get("%1"))
}

fn axes(s: &Option<TensorSharding>) -> String {
    s.as_ref()
        .map(|s| {
            s.dims
                .iter()
                .map(|d| d.axes.len().to_string())
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_else(|| "-".into())
}

#[test]
fn barrier_directions_are_respected() {
    // NONE: nothing crosses; %0 keeps only "x" from the argument, %1 only what its user gives.
    let (before, after) = barrier_case("NONE");
    assert_eq!(axes(&before), "1,0");
    assert_eq!(axes(&after), "1,1"); // from the constraint below, not through the barrier
                                     // BACKWARD: the constraint's "y" reaches %0 through the barrier.
    let (before, _) = barrier_case("BACKWARD");
    assert_eq!(axes(&before), "1,1");
    // FORWARD: nothing flows back, so %0 keeps only "x".
    let (before, _) = barrier_case("FORWARD");
    assert_eq!(axes(&before), "1,0");
}

/// A function of `args.len()` 8x16 arguments (each with an optional
/// sharding), each fed to a tanh; member `i` of `members` puts argument or
/// tanh `i % n` into sharding group `g`.
fn group_program(args: &[Option<String>], members: &[(usize, bool, i64)]) -> String {
    let t = "tensor<8x16xf32>";
    let sig: Vec<String> = args
        .iter()
        .enumerate()
        .map(|(i, s)| match s {
            Some(s) => format!("%a{i}: {t} {{sdy.sharding = #sdy.sharding{s}}}"),
            None => format!("%a{i}: {t}"),
        })
        .collect();
    let mut body: Vec<String> = (0..args.len())
        .map(|i| format!("%t{i} = stablehlo.tanh %a{i} : {t}"))
        .collect();
    let mut seen = std::collections::BTreeSet::new();
    for &(i, tanh, g) in members {
        let v = format!("%{}{}", if tanh { "t" } else { "a" }, i % args.len());
        // A value belongs to one group at most.
        if seen.insert(v.clone()) {
            body.push(format!("sdy.sharding_group {v} group_id={g} : {t}"));
        }
    }
    let rets: Vec<String> = (0..args.len()).map(|i| format!("%t{i}")).collect();
    format!(
        "module @m {{\n  sdy.mesh @mesh = <[\"x\"=2, \"y\"=4]>\n  func.func @main({}) -> ({}) {{\n    {}\n    return {} : {}\n  }}\n}}\n",
        sig.join(", "),
        vec![t; args.len()].join(", "),
        body.join("\n    "),
        rets.join(", "),
        vec![t; args.len()].join(", ")
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Sharding groups whatever their members' initial shardings: propagation
    /// never fails (members that disagree are decoupled by open constraints,
    /// as Shardy does), and every group ends with one sharding on all its
    /// members.
    #[test]
    fn sharding_group_members_end_alike(
        args in proptest::collection::vec(proptest::option::of(sharding_text()), 1..5),
        members in proptest::collection::vec((0usize..8, any::<bool>(), 0i64..3), 1..8),
        basic in any::<bool>(),
    ) {
        let text = group_program(&args, &members);
        let mut m = parse_and_verify(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let strategy = if basic { Pipeline::Basic } else { Pipeline::default() };
        propagate_module(&mut m, strategy).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let f = &m.funcs[0];
        let mut groups: std::collections::BTreeMap<i64, Vec<String>> = Default::default();
        for op in &f.ops {
            if let OpKind::ShardingGroup { group_id } = &op.kind {
                let v = f.value(op.operands[0]);
                let axes: Vec<_> = v
                    .sharding
                    .as_ref()
                    .map(|s| s.dims.iter().map(|d| d.axes.clone()).collect())
                    .unwrap_or_else(|| vec![Vec::new(); v.ty.rank()]);
                groups.entry(*group_id).or_default().push(format!("{}: {axes:?}", v.name));
            }
        }
        for (g, members) in &groups {
            let first = members[0].split_once(": ").unwrap().1;
            prop_assert!(
                members.iter().all(|m| m.split_once(": ").unwrap().1 == first),
                "group {g} ends with different shardings: {members:?}\n{}",
                print_module(&m)
            );
        }
    }
}
