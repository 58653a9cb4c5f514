//! Hand-written cases for behaviours the JAX fixtures do not show, each with
//! Shardy's answer: `tests/fixtures/propagate/<case>.mlir` and `<case>.expect`
//! (one line per value: `function value: dim0 axes | dim1 axes`).

use shardsim::ir::mlir::parse_and_verify;
use shardsim::propagate::{propagate_module, Strategy};
use shardsim::sharding::TensorSharding;

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

fn check_case(name: &str) {
    let dir = crate::common::fixture("propagate");
    let text = std::fs::read_to_string(dir.join(format!("{name}.mlir"))).unwrap();
    let mut m = parse_and_verify(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
    propagate_module(&mut m, Strategy::default()).unwrap();
    let expect = std::fs::read_to_string(dir.join(format!("{name}.expect"))).unwrap();
    let mut failures = Vec::new();
    let mut checked = 0;
    for line in expect
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let (lhs, want) = line.split_once(": ").unwrap();
        let (func, value) = lhs.split_once(' ').unwrap();
        let f = m.func(func).unwrap_or_else(|| panic!("no @{func}"));
        let got = if let Some(i) = value.strip_prefix("result") {
            let i: usize = i.parse().unwrap();
            axes(f.result_shardings[i].as_ref(), f.result_types[i].rank())
        } else {
            let v = f
                .values
                .iter()
                .find(|v| v.name == value)
                .unwrap_or_else(|| panic!("no {value} in @{func}"));
            axes(v.sharding.as_ref(), v.ty.rank())
        };
        checked += 1;
        if got.trim() != want.trim() {
            failures.push(format!("{func} {value}: shardy [{want}], ours [{got}]"));
        }
    }
    assert!(checked > 0);
    assert!(failures.is_empty(), "{name}:\n{}", failures.join("\n"));
}

#[test]
fn user_priorities() {
    check_case("user_priorities");
}

#[test]
fn sharding_groups() {
    check_case("sharding_groups");
}

#[test]
fn size_one_axes() {
    check_case("size_one_axes");
}

/// `sdy.reshard` (written, or exported from a sharding constraint) prints as
/// Shardy prints it: the result's sharding is the op's own, with no extra
/// `sdy.sharding`. Each `.expect` line must appear.
#[test]
fn reshard_prints_as_shardy_prints_it() {
    let dir = crate::common::fixture("shardy_print");
    let text = std::fs::read_to_string(dir.join("reshard.mlir")).unwrap();
    let mut m = parse_and_verify(&text).unwrap();
    propagate_module(&mut m, Strategy::default()).unwrap();
    let printed = shardsim::ir::mlir::print_module(&m);
    let expect = std::fs::read_to_string(dir.join("reshard.expect")).unwrap();
    for line in expect.lines().filter(|l| !l.trim().is_empty()) {
        assert!(
            printed.lines().any(|p| p == line),
            "missing line {line:?} in\n{printed}"
        );
    }
    assert!(!printed
        .lines()
        .any(|l| l.contains("sdy.reshard") && l.contains("sdy.sharding =")));
}
