//! Shardy's lit-test behaviours as programs of our own: for each lit file of
//! `shardy/dialect/sdy/transforms/propagation/test/` there is
//! `tests/fixtures/shardy_lit/<group>.mlir` (one function per lit case,
//! written for shardsim, never copied) and `<group>.expect` (Shardy's answer
//! as read from the lit file's CHECK lines: `case [@callee] value: axes | ...`,
//! open/closed ignored; `absent`: no such value, e.g. a split copy merged back; `unsharded`: no sharding at all, as a token
//! back). A case gives Shardy's answer when every one of its lines matches. A
//! fixture may hold several modules split at `// -----` lines (lit's
//! -split-input-file), each with one device count. The test prints the count table and checks that exactly the
//! cases listed in `DIFFERS` differ, so a fix or a regression shows.
//!
//! An expectation may also give an op's rule (`case %v:
//! #sdy.op_sharding_rule<...>`, the rule the op defining `%v` carries) or
//! unreduced axes (`case %v: a | ; unreduced=b`). The pipeline's own lit
//! files (`propagation_pipeline*.mlir`) are groups too; one of them repeats
//! another's cases, so it is checked on that group's programs (`fixture`).
//!
//! The op sharding rule registry's lit file is checked the same way by
//! `shardy_rule_lit_behaviours_give_shardys_rules`: each `.expect` line names
//! a value and Shardy's `#sdy.op_sharding_rule` for the op that defines it.
//!
//! shardsim runs JAX's whole pipeline (import, propagation, export) where a lit
//! file runs one pass: data-flow edges are implicit (added at import) instead
//! of written as `sdy.data_flow_edge` ops, and `sdy_testonly` custom calls that
//! block propagation are written as `sdy.propagation_barrier
//! allowed_direction=NONE`.

use std::collections::BTreeMap;

use shardsim::ir::mlir::parse_and_verify;
use shardsim::ir::Module;
use shardsim::propagate::{propagate_module, propagate_module_with, Options, Strategy};
use shardsim::sharding::TensorSharding;

/// A lit file and its fixture group.
struct Group {
    /// `tests/fixtures/shardy_lit/<name>.mlir` and `.expect`.
    name: &'static str,
    /// The Shardy lit file the cases come from.
    lit: &'static str,
    /// Cases in the lit file.
    total: usize,
    /// Cases that gave Shardy's answer before these fixtures (issue 19's
    /// count; None: not counted then).
    before: Option<usize>,
    /// The strategy the lit file's pass runs (`-sdy-basic-propagate`: basic).
    strategy: Strategy,
    /// The programs, when another group's (the lit file repeats that one's
    /// cases): `tests/fixtures/shardy_lit/<fixture>.mlir`; None: `<name>.mlir`.
    fixture: Option<&'static str>,
    /// The pipeline's `dedup-functions-fully=true`.
    dedup: bool,
}

const GROUPS: &[Group] = &[
    Group {
        name: "data_flow_edges",
        lit: "basic_propagation_data_flow_edges.mlir",
        total: 28,
        before: Some(0),
        strategy: Strategy::Basic,
        fixture: None,
        dedup: false,
    },
    Group {
        name: "basic_propagation",
        lit: "basic_propagation.mlir",
        total: 79,
        // Measured at the start of this work on the lit file itself (its
        // cases that parse here, CHECKed shardings compared in order).
        before: Some(52),
        strategy: Strategy::Basic,
        fixture: None,
        dedup: false,
    },
    Group {
        name: "manual_computation",
        lit: "basic_propagation_manual_computation.mlir",
        total: 27,
        before: Some(4),
        strategy: Strategy::Basic,
        fixture: None,
        dedup: false,
    },
    Group {
        name: "aggressive_propagation",
        lit: "aggressive_propagation.mlir",
        total: 23,
        before: None,
        strategy: Strategy::Aggressive,
        fixture: None,
        dedup: false,
    },
    Group {
        name: "op_priority_propagation",
        lit: "op_priority_propagation.mlir",
        total: 15,
        before: None,
        strategy: Strategy::OpPriority,
        fixture: None,
        dedup: false,
    },
    Group {
        name: "user_priority_propagation",
        lit: "user_priority_propagation.mlir",
        total: 20,
        before: None,
        strategy: Strategy::UserPriority,
        fixture: None,
        dedup: false,
    },
    Group {
        name: "sharding_groups",
        lit: "sharding_group_propagation.mlir",
        total: 11,
        before: None,
        strategy: Strategy::Basic,
        fixture: None,
        dedup: false,
    },
    Group {
        name: "conservative_propagation",
        lit: "basic_propagation_conservative.mlir",
        total: 5,
        before: Some(0),
        strategy: Strategy::BasicConservative,
        fixture: None,
        dedup: false,
    },
    Group {
        name: "token",
        lit: "basic_propagation_token.mlir",
        total: 2,
        before: Some(0),
        strategy: Strategy::Basic,
        fixture: None,
        dedup: false,
    },
    // Every op keeps the rule written on it and gets the one built for it
    // (`-sdy-basic-propagate='keep-sharding-rules=true'`): shardsim's export
    // always attaches rules, as Shardy's pipeline does.
    Group {
        name: "keep_sharding_rules",
        lit: "basic_propagation_keep_sharding_rules.mlir",
        total: 1,
        before: None,
        strategy: Strategy::Basic,
        fixture: None,
        dedup: false,
    },
    // Shardy's whole pipeline (`-sdy-propagation-pipeline`), which is what
    // shardsim runs for every group: import, user-priority propagation,
    // export.
    Group {
        name: "propagation_pipeline",
        lit: "propagation_pipeline.mlir",
        total: 58,
        before: None,
        strategy: Strategy::UserPriority,
        fixture: None,
        dedup: false,
    },
    // The pipeline's data-flow-edge cases repeat, byte for byte, the case,
    // barrier, while and call cases of propagation_pipeline.mlir.
    Group {
        name: "propagation_pipeline_data_flow_edges",
        lit: "propagation_pipeline_data_flow_edges.mlir",
        total: 40,
        before: None,
        strategy: Strategy::UserPriority,
        fixture: Some("propagation_pipeline"),
        dedup: false,
    },
    // `-sdy-propagation-pipeline='dedup-functions-fully=true'`.
    Group {
        name: "dedup_functions_fully",
        lit: "propagation_pipeline_dedup_functions_fully_true.mlir",
        total: 21,
        before: None,
        strategy: Strategy::UserPriority,
        fixture: None,
        dedup: true,
    },
    // Import's splitter and export's merger around JAX's whole pipeline (the
    // lit files run each pass alone and check the module's structure; here
    // the copies' shardings after propagation are checked). All 71 lit cases
    // check the splitter's output structure alone (which copies exist, before
    // any propagation), a pass shardsim has only inside its import and
    // export, so the remaining 65 have no outcome to compare: the 6 here are
    // the outcomes (shardings after propagation and merging) of the same
    // behaviours.
    Group {
        name: "constant_splitting",
        lit: "constant_or_scalar_splitter.mlir",
        total: 71,
        before: None,
        strategy: Strategy::UserPriority,
        fixture: None,
        dedup: false,
    },
];

/// JAX's export makes function inputs and outputs evenly sharded, without
/// sub-axes (Shardy's sdy-update-non-divisible-input-output-shardings and
/// sdy-remove-sub-axes-in-input-output-shardings); the lit file's basic pass
/// alone keeps an argument's non-divisible axes (the op's own sharding, the
/// point of the case, matches).
const EVEN_INPUTS: &str = "deliberate: shardsim runs JAX's whole pipeline, whose export cuts a \
     function input's sharding to what divides the dim evenly; the lit file's basic pass keeps it";

/// JAX's import applies a fully closed sharding constraint to its input when
/// the input has none (Shardy's sdy-apply-sharding-constraints); the lit
/// file's basic pass alone leaves the input open.
const IMPORT_APPLIES_CONSTRAINTS: &str = "deliberate: shardsim runs JAX's whole pipeline, whose \
     import gives a value the sharding of the fully closed constraint on it; the lit file's basic pass \
     alone leaves the value open (the group's constraints, the point of the case, match)";

/// Cases that differ from Shardy today, with the reason.
const DIFFERS: &[(&str, &str, &str)] = &[
    (
        "sharding_groups",
        "incompatible_with_a_constraint",
        IMPORT_APPLIES_CONSTRAINTS,
    ),
    (
        "basic_propagation",
        "non_divisible_multiple_axes",
        EVEN_INPUTS,
    ),
    (
        "basic_propagation",
        "non_divisible_same_open_dim_unchanged",
        EVEN_INPUTS,
    ),
    ("basic_propagation", "non_divisible_sub_axis", EVEN_INPUTS),
    // The batch dim (2) of the dot's other operand gets "a","b" (4): cut to "a".
    (
        "aggressive_propagation",
        "partial_conflict_across_factors",
        EVEN_INPUTS,
    ),
    (
        "basic_propagation",
        "size_one_axes_kept",
        SIZE_ONE_AXES_REMOVED,
    ),
    (
        "basic_propagation",
        "zero_sized_dim_on_size_one_axis",
        SIZE_ONE_AXES_REMOVED,
    ),
    (
        "basic_propagation",
        "reshape_keeps_size_one_axes",
        SIZE_ONE_AXES_REMOVED,
    ),
];

/// JAX's import drops size-1 mesh axes from every sharding before
/// propagation; the lit file's basic pass keeps them.
const SIZE_ONE_AXES_REMOVED: &str = "deliberate: shardsim runs JAX's whole pipeline, whose import \
     removes size-1 mesh axes (Shardy's sdy-remove-size-one-axes) before propagation; the lit file \
     runs the basic pass alone";

fn axes(s: Option<&TensorSharding>, rank: usize) -> String {
    let dims: Vec<String> = match s {
        Some(s) => s
            .dims
            .iter()
            .map(|d| {
                d.axes
                    .iter()
                    .map(|a| a.to_string().replace('"', ""))
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect(),
        None => vec![String::new(); rank],
    };
    dims.join(" | ")
}

/// A value's (or `resultN`'s) sharding in the propagated modules, with its
/// rank.
fn sharding_of<'m>(
    ms: &'m [Module],
    func: &str,
    value: &str,
) -> Result<(Option<&'m TensorSharding>, usize), String> {
    let f = ms
        .iter()
        .find_map(|m| m.func(func))
        .ok_or_else(|| format!("no @{func}"))?;
    if let Some(i) = value.strip_prefix("result") {
        let i: usize = i.parse().map_err(|_| format!("bad result index {value}"))?;
        return Ok((f.result_shardings[i].as_ref(), f.result_types[i].rank()));
    }
    let v = f
        .values
        .iter()
        .find(|v| v.name == value)
        .ok_or_else(|| format!("no {value} in @{func}"))?;
    Ok((v.sharding.as_ref(), v.ty.rank()))
}

/// One expectation line's answer from the propagated modules; with
/// `unreduced`, `; unreduced=a b` follows the dims when the sharding has
/// unreduced axes.
fn ours(ms: &[Module], func: &str, value: &str, unreduced: bool) -> Result<String, String> {
    let (s, rank) = sharding_of(ms, func, value)?;
    let mut got = axes(s, rank);
    if let Some(s) = s.filter(|s| unreduced && !s.unreduced.is_empty()) {
        let names: Vec<String> = s
            .unreduced
            .iter()
            .map(|a| a.to_string().replace('"', ""))
            .collect();
        got.push_str(&format!(" ; unreduced={}", names.join(" ")));
    }
    Ok(got)
}

/// Whether a value (or `resultN`) has no sharding at all (Shardy gives a
/// token none).
fn unsharded(ms: &[Module], func: &str, value: &str) -> Result<bool, String> {
    Ok(sharding_of(ms, func, value)?.0.is_none())
}

/// The sharding rule (as printed) of the op that defines `value`, or `none`.
fn rule_of(ms: &[Module], func: &str, value: &str) -> Result<String, String> {
    let f = ms
        .iter()
        .find_map(|m| m.func(func))
        .ok_or_else(|| format!("no @{func}"))?;
    let v = f
        .values
        .iter()
        .find(|v| v.name == value)
        .ok_or_else(|| format!("no {value} in @{func}"))?;
    match v.def {
        shardsim::ir::ValueDef::Result { op, .. } => Ok(f
            .op(op)
            .rule
            .as_ref()
            .map_or("none".to_string(), |r| r.to_string())),
        _ => Err(format!("{value} is not an op result in @{func}")),
    }
}

/// Per case, the mismatches (empty: Shardy's answer).
fn run_group(g: &Group) -> BTreeMap<String, Vec<String>> {
    let (group, strategy) = (g.name, g.strategy);
    let options = Options {
        dedup_functions_fully: g.dedup,
    };
    let dir = crate::common::fixture("shardy_lit");
    let programs = g.fixture.unwrap_or(group);
    let text = std::fs::read_to_string(dir.join(format!("{programs}.mlir"))).unwrap();
    // Modules split at `// -----` lines, as lit's -split-input-file does (one
    // device count per module).
    let ms: Vec<Module> = text
        .split("\n// -----\n")
        .map(|chunk| {
            let mut m = parse_and_verify(chunk).unwrap_or_else(|e| panic!("{group}: {e}"));
            propagate_module_with(&mut m, strategy, options)
                .unwrap_or_else(|e| panic!("{group}: {e}"));
            m
        })
        .collect();
    let expect = std::fs::read_to_string(dir.join(format!("{group}.expect"))).unwrap();
    let mut cases: BTreeMap<String, Vec<String>> = BTreeMap::new();
    // Functions a case checks besides its own (callees, other functions of a
    // lit case spanning several).
    let mut checked: Vec<String> = Vec::new();
    for line in expect
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let (lhs, want) = line.split_once(':').unwrap();
        let mut words = lhs.split_whitespace();
        let case = words.next().unwrap().to_string();
        let (func, value) = match (words.next(), words.next()) {
            (Some(callee), Some(v)) => (callee.trim_start_matches('@').to_string(), v),
            (Some(v), None) => (case.clone(), v),
            _ => panic!("bad line {line}"),
        };
        checked.push(func.clone());
        let entry = cases.entry(case.clone()).or_default();
        // Compare dim by dim: `| | y` and ` |  | y` are the same answer.
        let norm = |s: &str| s.split('|').map(str::trim).collect::<Vec<_>>().join(" | ");
        // `absent`: Shardy has no such value (a split copy merged back).
        if want.trim() == "absent" {
            if let Ok(got) = ours(&ms, &func, value, false) {
                entry.push(format!("{func} {value}: shardy has none, ours [{got}]"));
            }
            continue;
        }
        // `unsharded`: Shardy gives the value no sharding (a token).
        if want.trim() == "unsharded" {
            match unsharded(&ms, &func, value) {
                Ok(true) => {}
                Ok(false) => entry.push(format!(
                    "{func} {value}: shardy has no sharding, ours [{}]",
                    ours(&ms, &func, value, false).unwrap_or_default()
                )),
                Err(e) => entry.push(e),
            }
            continue;
        }
        // `#sdy.op_sharding_rule<...>`: the rule the op defining the value
        // carries after propagation (Shardy's keep-sharding-rules).
        if want.trim().starts_with("#sdy.op_sharding_rule") {
            match rule_of(&ms, &func, value) {
                Ok(got) if got == want.trim() => {}
                Ok(got) => entry.push(format!(
                    "{func} {value}: shardy {}, ours {got}",
                    want.trim()
                )),
                Err(e) => entry.push(e),
            }
            continue;
        }
        // `... ; unreduced=a b`: the unreduced axes are compared too.
        match ours(&ms, &func, value, want.contains(';')) {
            Ok(got) if norm(&got) == norm(want) => {}
            Ok(got) => entry.push(format!(
                "{func} {value}: shardy [{}], ours [{got}]",
                want.trim()
            )),
            Err(e) => entry.push(e),
        }
    }
    // Every public function is a case with at least one expectation (of a
    // group with programs of its own).
    for m in ms.iter().filter(|_| g.fixture.is_none()) {
        for f in &m.funcs {
            let called = m.funcs.iter().any(|g| {
                g.ops.iter().any(
                |op| matches!(&op.kind, shardsim::ir::OpKind::Call { callee } if *callee == f.name),
            )
            });
            if !called {
                assert!(
                    cases.contains_key(&f.name) || checked.contains(&f.name),
                    "{group}: @{} has no expectation",
                    f.name
                );
            }
        }
    }
    cases
}

#[test]
fn shardy_lit_behaviours_give_shardys_answers() {
    let mut table = vec![format!(
        "{:<22} {:<42} {:>9} {:>8} {:>8} {:>8}",
        "group", "Shardy lit file", "lit cases", "before", "covered", "match"
    )];
    let mut wrong = Vec::new();
    for g in GROUPS {
        let (group, lit, total) = (g.name, g.lit, g.total);
        let before = g.before.map_or("-".to_string(), |b| b.to_string());
        let cases = run_group(g);
        let matching = cases.values().filter(|f| f.is_empty()).count();
        assert!(
            cases.len() <= total,
            "{group}: more cases than the lit file"
        );
        table.push(format!(
            "{group:<22} {lit:<42} {total:>9} {before:>8} {:>8} {matching:>8}",
            cases.len()
        ));
        for (case, failures) in &cases {
            let listed = DIFFERS.iter().any(|(g, c, _)| *g == group && c == case);
            match (failures.is_empty(), listed) {
                (true, true) => {
                    wrong.push(format!("{group}/{case}: matches now; drop it from DIFFERS"))
                }
                (false, false) => {
                    wrong.push(format!("{group}/{case}:\n  {}", failures.join("\n  ")))
                }
                _ => {}
            }
        }
    }
    println!("{}", table.join("\n"));
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Op sharding rule lit files: `tests/fixtures/shardy_lit/<name>.mlir`
/// (programs of our own, one function per lit case) and `<name>.expect`
/// (`case %value: #sdy.op_sharding_rule<...>`: Shardy's rule for the op that
/// defines `%value`, as the lit file's CHECK line gives it for that behaviour).
/// The last numbers count fixtures beyond the lit cases (one scatter
/// behaviour the lit file checks within another case has its own; the
/// conservative registry's concat of slices, which Shardy's source gives no
/// concat-dim factor in that mode) and say whether the registry runs as
/// `conservative-propagation=true` does.
const RULE_GROUPS: &[(&str, &str, usize, usize, usize, bool)] = &[
    (
        "op_sharding_rules",
        "op_sharding_rule_registry.mlir",
        123,
        47,
        1,
        false,
    ),
    (
        "op_sharding_rules_conservative",
        "op_sharding_rule_registry_conservative.mlir",
        6,
        0,
        1,
        true,
    ),
];

/// Rule cases that differ from Shardy today, with the reason.
const RULE_DIFFERS: &[(&str, &str, &str)] = &[];

fn run_rule_group(group: &str, conservative: bool) -> BTreeMap<String, Vec<String>> {
    use shardsim::ir::{OpShardingRule, ValueDef};
    use shardsim::rules::rule_for_mode;
    let dir = crate::common::fixture("shardy_lit");
    let text = std::fs::read_to_string(dir.join(format!("{group}.mlir"))).unwrap();
    let m = parse_and_verify(&text).unwrap_or_else(|e| panic!("{group}: {e}"));
    let expect = std::fs::read_to_string(dir.join(format!("{group}.expect"))).unwrap();
    let mut cases: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for line in expect
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let (lhs, want) = line.split_once(": ").unwrap();
        let mut words = lhs.split_whitespace();
        let (case, value) = (words.next().unwrap(), words.next().unwrap());
        // `none`: Shardy gives the op no rule.
        let want = (want.trim() != "none").then(|| {
            OpShardingRule::parse(want.trim())
                .unwrap_or_else(|e| panic!("{group}.expect: {line}: {e}"))
        });
        let entry = cases.entry(case.to_string()).or_default();
        let Some(f) = m.func(case) else {
            entry.push(format!("no @{case}"));
            continue;
        };
        let def = f
            .values
            .iter()
            .find(|v| v.name == value || v.name == format!("{value}#0"))
            .map(|v| v.def);
        let Some(ValueDef::Result { op, .. }) = def else {
            entry.push(format!("{value} is not an op result in @{case}"));
            continue;
        };
        // The rule propagation uses: the op's own (a custom call's custom
        // rule) or the registry's.
        let got = f
            .op(op)
            .rule
            .clone()
            .or_else(|| rule_for_mode(f, f.op(op), conservative));
        if got != want {
            let show =
                |r: &Option<OpShardingRule>| r.as_ref().map_or("none".into(), |r| r.to_string());
            entry.push(format!(
                "{value}: shardy {}\n    ours   {}",
                show(&want),
                show(&got)
            ));
        }
    }
    for f in &m.funcs {
        assert!(
            cases.contains_key(&f.name),
            "{group}: @{} has no expectation",
            f.name
        );
    }
    cases
}

#[test]
fn shardy_rule_lit_behaviours_give_shardys_rules() {
    let mut table = vec![format!(
        "{:<18} {:<42} {:>9} {:>8} {:>8} {:>8}",
        "group", "Shardy lit file", "lit cases", "before", "covered", "match"
    )];
    let mut wrong = Vec::new();
    for &(group, lit, total, before, extra, conservative) in RULE_GROUPS {
        let cases = run_rule_group(group, conservative);
        let matching = cases.values().filter(|f| f.is_empty()).count() - extra;
        assert!(
            cases.len() <= total + extra,
            "{group}: more cases than the lit file"
        );
        table.push(format!(
            "{group:<18} {lit:<42} {total:>9} {before:>8} {:>8} {matching:>8}",
            cases.len() - extra
        ));
        for (case, failures) in &cases {
            let listed = RULE_DIFFERS
                .iter()
                .any(|(g, c, _)| *g == group && c == case);
            match (failures.is_empty(), listed) {
                (true, true) => wrong.push(format!(
                    "{group}/{case}: matches now; drop it from RULE_DIFFERS"
                )),
                (false, false) => {
                    wrong.push(format!("{group}/{case}:\n  {}", failures.join("\n  ")))
                }
                _ => {}
            }
        }
    }
    println!("{}", table.join("\n"));
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Conservative propagation uses the registry's conservative rules: a
/// concatenated dim has no factor, so an operand's sharding along it stops at
/// the concat (basic propagation carries it), while the other dims still
/// propagate; a strided convolution's spatial sharding stops too.
#[test]
fn conservative_rules_stop_propagation_at_a_concatenated_or_spatial_dim() {
    let text = r#"sdy.mesh @mesh = <["a"=2, "b"=2]>
func.func @main(%a: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {"b"}]>}, %b: tensor<8x16xf32>) -> tensor<8x32xf32> {
  %c = stablehlo.concatenate %a, %b, dim = 1 : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x32xf32>
  return %c : tensor<8x32xf32>
}
func.func @conv(%x: tensor<4x8x8x2xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {"b"}, {}, {}]>}, %k: tensor<2x2x2x4xf32>) -> tensor<4x4x4x4xf32> {
  %y = stablehlo.convolution(%x, %k)
    dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f],
    window = {stride = [2, 2]} {
      batch_group_count = 1 : i64,
      feature_group_count = 1 : i64
    } : (tensor<4x8x8x2xf32>, tensor<2x2x2x4xf32>) -> tensor<4x4x4x4xf32>
  return %y : tensor<4x4x4x4xf32>
}
"#;
    let run = |strategy| {
        let mut m = parse_and_verify(text).unwrap();
        propagate_module(&mut m, strategy).unwrap();
        vec![
            ours(std::slice::from_ref(&m), "main", "%c", false).unwrap(),
            ours(std::slice::from_ref(&m), "conv", "%y", false).unwrap(),
        ]
    };
    let basic = run(Strategy::Basic);
    let conservative = run(Strategy::BasicConservative);
    assert_eq!(basic, ["a | b", "a | b |  | "], "basic");
    assert_eq!(conservative, ["a | ", "a |  |  | "], "conservative");
}

/// Shardy's `sdy-lift-inlined-meshes`: an inline mesh becomes the module mesh
/// with the same axes, or a new `@mesh` (`@mesh_0` when that name is taken by
/// another mesh), and propagation then sees one mesh by name.
#[test]
fn inline_meshes_are_lifted_to_module_meshes() {
    let lifted = |text: &str| {
        let mut m = parse_and_verify(text).unwrap();
        propagate_module(&mut m, Strategy::UserPriority).unwrap();
        let f = &m.funcs[0];
        let names: Vec<String> = m.meshes.iter().map(|(n, _)| n.clone()).collect();
        let arg = f.value(f.args[0]).sharding.clone().unwrap();
        let other = f.value(f.args[1]).sharding.clone().unwrap();
        (names, arg.to_string(), other.to_string())
    };
    let body = r#"func.func @f(%p: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<mesh<["a"=2, "b"=2]>, [{"a"}, {"b"}]>}, %q: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %s = stablehlo.add %p, %q : tensor<8x8xf32>
  return %s : tensor<8x8xf32>
}
"#;
    let (names, p, q) = lifted(body);
    assert_eq!(names, ["mesh"]);
    assert_eq!(p, r#"#sdy.sharding<@mesh, [{"a"}, {"b"}]>"#);
    assert_eq!(q, p, "the lifted mesh propagates like a named one");
    let same = format!("sdy.mesh @m4 = <[\"a\"=2, \"b\"=2]>\n{body}");
    assert_eq!(lifted(&same).0, ["m4"], "an equal module mesh is reused");
    assert_eq!(lifted(&same).1, r#"#sdy.sharding<@m4, [{"a"}, {"b"}]>"#);
    let taken = format!("sdy.mesh @mesh = <[\"b\"=2, \"a\"=2]>\n{body}");
    assert_eq!(
        lifted(&taken).0,
        ["mesh", "mesh_0"],
        "a taken name gets a suffix"
    );
}

/// `propagate --dedup-functions-fully` runs the pipeline's dedup mode: on the
/// dedup lit fixture the caller's parameter takes the shared leaf's sharding
/// from the callee's constraint (`{"b"}`, Shardy's answer), where the default
/// mode propagates each call on its own (`{"a"}`).
#[test]
fn dedup_functions_fully_flag_runs_shardys_dedup_mode() {
    let fixture = crate::common::fixture("shardy_lit").join("dedup_functions_fully.mlir");
    let path = fixture.to_str().unwrap();
    let first_line_of_caller = |args: &[&str]| {
        let out = crate::common::shardsim(args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8(out.stdout).unwrap();
        let line = text
            .lines()
            .find(|l| l.contains("func.func @caller_1("))
            .expect("caller_1 printed")
            .to_string();
        line
    };
    let dedup = first_line_of_caller(&["propagate", path, "--dedup-functions-fully"]);
    let default = first_line_of_caller(&["propagate", path]);
    assert!(
        dedup.contains(r#"%p: tensor<16x4xi32> {sdy.sharding = #sdy.sharding<@m4, [{"b"}, {}]>}"#),
        "{dedup}"
    );
    assert!(
        default
            .contains(r#"%p: tensor<16x4xi32> {sdy.sharding = #sdy.sharding<@m4, [{"a"}, {}]>}"#),
        "{default}"
    );
}
