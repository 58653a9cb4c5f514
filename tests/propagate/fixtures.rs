//! Data-driven checks against every JAX fixture: our rule for each op equals
//! the `sdy.sharding_rule` Shardy printed in `after.mlir`, and propagating
//! `before.mlir` gives every value the sharding it has in `after.mlir`.
//!
//! XLA rewrites a module around propagation (it folds and deduplicates
//! constants and broadcasts), so values are matched structurally: a value's key
//! is its op, the op's attributes and its operands' keys (function arguments by
//! position), not its printed name. Shardy's export merges identical constants
//! and scalar broadcasts that ended with the same sharding (its
//! constant-or-scalar merger, the undo of the import's per-use split), so where
//! `after.mlir` has fewer copies of a value than `before.mlir`, each of our
//! copies is compared with the one of theirs that feeds the same use.

use std::collections::hash_map::DefaultHasher;
use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use shardsim::ir::mlir::parse_and_verify;
use shardsim::ir::{Func, Module, OpKind, ValueDef};
use shardsim::propagate::{propagate_module, Strategy};
use shardsim::rules::rule_for;
use shardsim::sharding::TensorSharding;

/// The JAX fixtures and the whole-model fixtures.
fn cases() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = ["jax", "models"]
        .iter()
        .flat_map(|dir| std::fs::read_dir(crate::common::fixture(dir)).unwrap())
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("before.mlir").exists() && p.join("after.mlir").exists())
        .collect();
    out.sort();
    out
}

fn load(path: &Path) -> Module {
    let text = std::fs::read_to_string(path).unwrap();
    parse_and_verify(&text).unwrap_or_else(|e| panic!("{}", e.in_file(&path.display().to_string())))
}

/// A structural key per value (see module doc).
fn value_keys(func: &Func) -> Vec<u64> {
    let mut keys = vec![0u64; func.values.len()];
    for (i, v) in func.values.iter().enumerate() {
        if let ValueDef::FuncArg(a) = v.def {
            let mut h = DefaultHasher::new();
            ("arg", a).hash(&mut h);
            keys[i] = h.finish();
        }
    }
    for id in func.walk() {
        let op = func.op(id);
        let kind = match &op.kind {
            OpKind::ShardingConstraint { sharding } | OpKind::Reshard { sharding } => {
                format!("reshard {}", sharding.to_bare())
            }
            OpKind::Constant { value, .. } => format!("constant {value:?}"),
            // Shardy's export drops the explicitly replicated axes of a
            // manual computation's shardings.
            OpKind::ManualComputation {
                in_shardings,
                out_shardings,
                manual_axes,
            } => {
                let bare = |v: &[TensorSharding]| -> Vec<String> {
                    v.iter()
                        .map(|s| {
                            let mut s = s.clone();
                            s.replicated.clear();
                            s.to_bare()
                        })
                        .collect()
                };
                format!(
                    "manual {:?} {:?} {manual_axes:?}",
                    bare(in_shardings),
                    bare(out_shardings)
                )
            }
            k => format!("{k:?}"),
        };
        for (r, &res) in op.results.iter().enumerate() {
            let mut h = DefaultHasher::new();
            kind.hash(&mut h);
            r.hash(&mut h);
            func.value(res).ty.hash(&mut h);
            for &o in &op.operands {
                keys[o.0 as usize].hash(&mut h);
            }
            keys[res.0 as usize] = h.finish();
        }
    }
    keys
}

/// Per value, a key for each of its uses: the user's kind and operand keys,
/// and the operand position, so copies of one value are told apart by where
/// they are used.
fn use_keys(func: &Func, keys: &[u64]) -> Vec<Vec<u64>> {
    let mut uses = vec![Vec::new(); func.values.len()];
    for id in func.walk() {
        let op = func.op(id);
        let mut h = DefaultHasher::new();
        op.kind.name().hash(&mut h);
        for &o in &op.operands {
            keys[o.0 as usize].hash(&mut h);
        }
        let user = h.finish();
        for (k, &o) in op.operands.iter().enumerate() {
            let mut h = DefaultHasher::new();
            (user, k).hash(&mut h);
            uses[o.0 as usize].push(h.finish());
        }
    }
    for u in &mut uses {
        u.sort_unstable();
    }
    uses
}

/// The sharding a value has: for a reshard or constraint result, the op's
/// own; for a manual computation's result, its out-sharding.
fn sharding_of(func: &Func, v: usize) -> Option<&TensorSharding> {
    if let ValueDef::Result { op, index } = func.values[v].def {
        match &func.op(op).kind {
            OpKind::ShardingConstraint { sharding } | OpKind::Reshard { sharding } => {
                return Some(sharding)
            }
            OpKind::ManualComputation { out_shardings, .. } => return out_shardings.get(index),
            _ => {}
        }
    }
    func.values[v].sharding.as_ref()
}

/// A sharding as the axes of each dim (None and empty mean replicated).
fn effective(s: Option<&TensorSharding>, rank: usize) -> String {
    match s {
        Some(s) => s
            .dims
            .iter()
            .map(|d| {
                format!(
                    "{:?}",
                    d.axes.iter().map(|a| a.to_string()).collect::<Vec<_>>()
                )
            })
            .collect::<Vec<_>>()
            .join(" "),
        None => vec!["[]"; rank].join(" "),
    }
}

#[test]
fn rules_match_shardy_on_every_fixture() {
    let mut checked = 0;
    let mut failures = Vec::new();
    for case in cases() {
        let m = load(&case.join("after.mlir"));
        for func in &m.funcs {
            for id in func.walk() {
                let op = func.op(id);
                let Some(expected) = &op.rule else { continue };
                checked += 1;
                match rule_for(func, op) {
                    Some(ours) if &ours == expected => {}
                    other => failures.push(format!(
                        "{}: {} at {}: shardy {:?}, ours {:?}",
                        case.file_name().unwrap().to_string_lossy(),
                        op.kind.name(),
                        op.loc,
                        expected,
                        other
                    )),
                }
            }
        }
    }
    assert!(checked > 300, "only {checked} rules in the fixtures");
    assert!(
        failures.is_empty(),
        "{} of {checked} rules differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Propagate `before.mlir` and compare with `after.mlir`; returns the mismatches.
fn compare_case(case: &Path) -> Vec<String> {
    let mut ours = load(&case.join("before.mlir"));
    propagate_module(&mut ours, Strategy::default()).unwrap();
    let theirs = load(&case.join("after.mlir"));
    let name = case.file_name().unwrap().to_string_lossy().to_string();
    let mut out = Vec::new();
    for (f_ours, f_theirs) in ours.funcs.iter().zip(&theirs.funcs) {
        let k_ours = value_keys(f_ours);
        let k_theirs = value_keys(f_theirs);
        let u_ours = use_keys(f_ours, &k_ours);
        let u_theirs = use_keys(f_theirs, &k_theirs);
        // Values with equal keys are paired in program order; XLA may have merged
        // duplicates, in which case every remaining one of ours is compared with the last.
        let mut by_key: BTreeMap<u64, Vec<usize>> = BTreeMap::new();
        for (i, k) in k_ours.iter().enumerate() {
            by_key.entry(*k).or_default().push(i);
        }
        let mut theirs_by_key: BTreeMap<u64, Vec<usize>> = BTreeMap::new();
        for (j, k) in k_theirs.iter().enumerate() {
            theirs_by_key.entry(*k).or_default().push(j);
        }
        for (j, v) in f_theirs.values.iter().enumerate() {
            if matches!(v.def, ValueDef::BlockArg { .. }) {
                continue;
            }
            let want = effective(sharding_of(f_theirs, j), v.ty.rank());
            let Some(matches) = by_key.get(&k_theirs[j]) else {
                out.push(format!(
                    "{name}: {} has no counterpart in before.mlir",
                    v.name
                ));
                continue;
            };
            let twins = &theirs_by_key[&k_theirs[j]];
            let mine: Vec<usize> = if twins.len() < matches.len() {
                // Merged after propagation: ours that feed one of its uses.
                let shares_a_use = |i: &usize| {
                    let (a, b) = (&u_ours[*i], &u_theirs[j]);
                    (a.is_empty() && b.is_empty()) || a.iter().any(|u| b.binary_search(u).is_ok())
                };
                let mine: Vec<usize> = matches.iter().copied().filter(shares_a_use).collect();
                if mine.is_empty() {
                    out.push(format!("{name}: {} feeds none of our copies' uses", v.name));
                }
                mine
            } else {
                let rank = twins.iter().position(|&t| t == j).unwrap_or(0);
                matches.get(rank).copied().into_iter().collect()
            };
            for i in mine {
                let got = effective(sharding_of(f_ours, i), v.ty.rank());
                if got != want {
                    out.push(format!(
                        "{name}: {} (ours {}): shardy [{want}], ours [{got}]",
                        v.name, f_ours.values[i].name
                    ));
                }
            }
        }
        for (i, (a, b)) in f_ours
            .result_shardings
            .iter()
            .zip(&f_theirs.result_shardings)
            .enumerate()
        {
            let rank = f_theirs.result_types[i].rank();
            if effective(a.as_ref(), rank) != effective(b.as_ref(), rank) {
                out.push(format!(
                    "{name}: result {i}: shardy [{}], ours [{}]",
                    effective(b.as_ref(), rank),
                    effective(a.as_ref(), rank)
                ));
            }
        }
    }
    out
}

/// Cases that differ from Shardy today, each with the reason; the tests
/// check that exactly these differ, so a fix (or a new difference) shows.
const KNOWN_DIFFERENCES: &[(&str, &str)] = &[];

fn known(case: &Path) -> bool {
    let name = case.file_name().unwrap().to_string_lossy();
    KNOWN_DIFFERENCES.iter().any(|(k, _)| *k == name)
}

#[test]
fn propagation_matches_shardy_on_every_fixture() {
    let cases = cases();
    assert!(
        cases.len() >= 33,
        "expected the 8 shared and 25+ own fixtures, found {}",
        cases.len()
    );
    let mut failures = Vec::new();
    let mut failed_cases = 0;
    for case in &cases {
        let f = compare_case(case);
        if f.is_empty() == known(case) {
            let what = if f.is_empty() {
                "now matches Shardy: drop it from KNOWN_DIFFERENCES".to_string()
            } else {
                f.join("\n")
            };
            failed_cases += 1;
            failures.push(format!("{}: {what}", case.display()));
        }
    }
    assert!(
        failures.is_empty(),
        "{failed_cases} of {} cases differ:\n{}",
        cases.len(),
        failures.join("\n")
    );
}

/// JAX's own export (`lowered.mlir`, with calls to private functions and
/// `sharding_constraint`s as written) propagates to the same function results
/// as Shardy's `after.mlir`: propagation goes through calls as if inlined.
#[test]
fn lowered_programs_with_calls_give_shardys_results() {
    let mut failures = Vec::new();
    let mut with_calls = 0;
    for case in cases().into_iter().filter(|c| !known(c)) {
        let mut ours = load(&case.join("lowered.mlir"));
        with_calls += usize::from(ours.funcs.len() > 1);
        propagate_module(&mut ours, Strategy::default()).unwrap();
        let theirs = load(&case.join("after.mlir"));
        let (a, b) = (ours.entry().unwrap(), theirs.entry().unwrap());
        for (i, (x, y)) in a
            .result_shardings
            .iter()
            .zip(&b.result_shardings)
            .enumerate()
        {
            let rank = b.result_types[i].rank();
            if effective(x.as_ref(), rank) != effective(y.as_ref(), rank) {
                failures.push(format!(
                    "{}: result {i}: shardy [{}], ours [{}]",
                    case.file_name().unwrap().to_string_lossy(),
                    effective(y.as_ref(), rank),
                    effective(x.as_ref(), rank)
                ));
            }
        }
    }
    assert!(
        with_calls >= 10,
        "only {with_calls} fixtures call private functions"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
