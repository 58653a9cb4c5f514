//! Every fixture (lowered/before/after) parses, verifies and round-trips.

use std::path::PathBuf;

use shardsim::ir::mlir::{parse_and_verify, parse_module, print_module};

/// Every `*.mlir` file under `tests/fixtures/jax/<case>/` and the whole-model
/// cases under `tests/fixtures/models/<case>/`, sorted.
pub fn fixture_files() -> Vec<PathBuf> {
    let mut out = files_under("jax");
    out.extend(files_under("models"));
    out.sort();
    out
}

fn files_under(dir: &str) -> Vec<PathBuf> {
    let root = crate::common::fixture(dir);
    let mut out = Vec::new();
    for entry in std::fs::read_dir(&root).expect("fixture folder") {
        let dir = entry.unwrap().path();
        if !dir.is_dir() {
            continue;
        }
        for name in ["lowered.mlir", "before.mlir", "after.mlir"] {
            let p = dir.join(name);
            if p.exists() {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

#[test]
fn every_fixture_parses_verifies_and_round_trips() {
    let files = fixture_files();
    assert!(
        files.len() >= 24,
        "expected the JAX fixtures, found {}",
        files.len()
    );
    let mut failures = Vec::new();
    for p in &files {
        let text = std::fs::read_to_string(p).unwrap();
        let m = match parse_and_verify(&text) {
            Ok(m) => m,
            Err(e) => {
                failures.push(e.in_file(&p.display().to_string()));
                continue;
            }
        };
        let printed = print_module(&m);
        let m2 = match parse_and_verify(&printed) {
            Ok(m) => m,
            Err(e) => {
                failures.push(format!("{} (printed): {e}\n{printed}", p.display()));
                continue;
            }
        };
        if !shardsim::ir::mlir::same_structure(&m, &m2) {
            failures.push(format!("{}: round trip changed the module", p.display()));
        }
        // Printing is a fixed point after one round.
        if printed != print_module(&m2) {
            failures.push(format!("{}: printing is not a fixed point", p.display()));
        }
        assert!(parse_module(&printed).is_ok());
        // The canonical (renumbered) text is a valid program with the same structure.
        let canon = shardsim::ir::mlir::print_canonical(&m);
        match parse_and_verify(&canon) {
            Ok(c) => assert!(
                shardsim::ir::mlir::same_structure(&m, &c),
                "{}",
                p.display()
            ),
            Err(e) => failures.push(format!("{} (canonical): {e}", p.display())),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} files failed:\n{}",
        failures.len(),
        files.len(),
        failures.join("\n")
    );
}

#[test]
fn printing_reproduces_every_fixture_byte_for_byte() {
    // JAX's and XLA's own printers are the reference: our printer must give
    // back exactly their text (attribute order, float spelling, reducer layout).
    let mut diffs = Vec::new();
    for p in fixture_files() {
        let text = std::fs::read_to_string(&p).unwrap();
        let m = parse_module(&text).unwrap();
        let printed = print_module(&m);
        if printed != text {
            let line = text
                .lines()
                .zip(printed.lines())
                .position(|(a, b)| a != b)
                .map(|i| i + 1)
                .unwrap_or(0);
            diffs.push(format!(
                "{}: first difference on line {line}:\n{}\n{}",
                p.display(),
                text.lines().nth(line.saturating_sub(1)).unwrap_or(""),
                printed.lines().nth(line.saturating_sub(1)).unwrap_or("")
            ));
        }
    }
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}

#[test]
fn every_sharding_rule_in_after_files_prints_back_identically() {
    use shardsim::ir::OpShardingRule;
    let mut count = 0;
    for p in fixture_files()
        .into_iter()
        .filter(|p| p.ends_with("after.mlir"))
    {
        let text = std::fs::read_to_string(&p).unwrap();
        let mut rest = text.as_str();
        while let Some(i) = rest.find("#sdy.op_sharding_rule<") {
            let tail = &rest[i..];
            // The rule ends at the first '>' that closes its '<' (skipping '->').
            let mut depth = 0i32;
            let mut end = 0;
            let b = tail.as_bytes();
            let mut k = 0;
            while k < b.len() {
                match b[k] {
                    b'-' if b.get(k + 1) == Some(&b'>') => k += 1,
                    b'<' => depth += 1,
                    b'>' => {
                        depth -= 1;
                        if depth == 0 {
                            end = k + 1;
                            break;
                        }
                    }
                    _ => {}
                }
                k += 1;
            }
            let src = &tail[..end];
            let rule = OpShardingRule::parse(src)
                .unwrap_or_else(|e| panic!("{}: {src}: {e}", p.display()));
            assert_eq!(rule.to_string(), src, "{}", p.display());
            count += 1;
            rest = &tail[end..];
        }
    }
    assert!(count > 300, "only {count} rules found");
}

#[test]
fn parsed_fixture_facts_match_the_text() {
    use shardsim::ir::{DenseValue, OpKind, Scalar};
    // reduce_variety/argmax: a two-result reduce whose reducer interleaves its arguments.
    let text =
        std::fs::read_to_string(crate::common::fixture("jax/argmax_sharded/after.mlir")).unwrap();
    let m = parse_and_verify(&text).unwrap();
    let f = m.entry().unwrap();
    let reduce = f
        .walk()
        .into_iter()
        .map(|id| f.op(id))
        .find(|op| matches!(op.kind, OpKind::Reduce { .. }))
        .unwrap();
    assert_eq!(reduce.results.len(), 2);
    assert_eq!(reduce.loc.line, 8);
    let r = &reduce.regions[0];
    let names: Vec<&str> = r.args.iter().map(|&a| f.value(a).name.as_str()).collect();
    // Region order is (acc0, acc1, x0, x1) = (%arg1, %arg2, %arg3, %arg4).
    assert_eq!(names, ["%arg1", "%arg2", "%arg3", "%arg4"]);
    let rule = reduce.rule.as_ref().unwrap();
    assert_eq!(rule.factor_sizes, vec![8, 16]);
    assert_eq!(rule.reduction_factors, vec![1]);
    let s = f.value(reduce.results[1]).sharding.as_ref().unwrap();
    assert_eq!(s.to_bare(), r#"<@mesh, [{"x"}]>"#);
    // -inf init value written as a hex bit pattern.
    let init = f.ops.iter().find_map(|op| match &op.kind {
        OpKind::Constant {
            value: DenseValue::Splat(Scalar::Float(v)),
            ..
        } if v.is_infinite() => Some(*v),
        _ => None,
    });
    assert_eq!(init, Some(f64::NEG_INFINITY));
    // Mesh and argument shardings.
    assert_eq!(m.meshes[0].0, "mesh");
    assert_eq!(m.meshes[0].1.shape(), vec![2, 4]);
    assert_eq!(
        f.value(f.args[0]).sharding.as_ref().unwrap().to_bare(),
        r#"<@mesh, [{"x"}, {"y"}]>"#
    );
}
