//! Call inlining on JAX's exports: no call is left, the printed module parses
//! and verifies again with unique value names, and it computes exactly what
//! the program with calls computes; recursion and bad calls are errors with a
//! location, never a panic.

use std::collections::BTreeSet;

use shardsim::ir::inline::{has_calls, inline_calls};
use shardsim::ir::interp::interpret;
use shardsim::ir::mlir::{parse_and_verify, print_module};
use shardsim::ir::{OpKind, ValueDef};

#[test]
fn inlined_exports_have_no_calls_reparse_and_compute_the_same() {
    let mut with_calls = 0;
    for dir in crate::common::jax_cases_with_data() {
        let name = dir.file_name().unwrap().to_string_lossy().to_string();
        let text = std::fs::read_to_string(dir.join("lowered.mlir")).unwrap();
        let m = parse_and_verify(&text).unwrap();
        if !has_calls(&m) {
            continue;
        }
        with_calls += 1;
        let flat = inline_calls(&m).unwrap();
        assert!(!has_calls(&flat), "{name}");
        assert_eq!(flat.funcs.len(), 1, "{name}: the private callees go");
        let f = &flat.funcs[0];
        // Top-level names are unique (region arguments may repeat across regions, as in MLIR).
        let top: Vec<&str> = f
            .values
            .iter()
            .filter(|v| match v.def {
                ValueDef::FuncArg(_) => true,
                ValueDef::Result { op, .. } => f.body.contains(&op),
                ValueDef::BlockArg { .. } => false,
            })
            .map(|v| v.name.as_str())
            .collect();
        let names: BTreeSet<&str> = top.iter().copied().collect();
        assert_eq!(names.len(), top.len(), "{name}: value names repeat");
        let printed = print_module(&flat);
        let again = parse_and_verify(&printed).unwrap_or_else(|e| panic!("{name}: {e}\n{printed}"));
        assert!(again.funcs[0]
            .ops
            .iter()
            .all(|o| !matches!(o.kind, OpKind::Call { .. })));
        let inputs = crate::common::numbered(&dir, "in");
        assert_eq!(
            interpret(&m, &inputs).unwrap(),
            interpret(&again, &inputs).unwrap(),
            "{name}"
        );
    }
    assert!(with_calls >= 10, "{with_calls}");
}

#[test]
fn recursion_is_an_error_with_a_location() {
    let text = "func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {\n  %0 = call @f(%arg0) : (tensor<4xf32>) -> tensor<4xf32>\n  return %0 : tensor<4xf32>\n}\nfunc.func private @f(%arg0: tensor<4xf32>) -> tensor<4xf32> {\n  %0 = call @f(%arg0) : (tensor<4xf32>) -> tensor<4xf32>\n  return %0 : tensor<4xf32>\n}\n";
    // The verifier refuses it at the recursive call (issue 19)...
    let e = parse_and_verify(text).unwrap_err().to_string();
    assert!(e.contains("calls @f recursively"), "{e}");
    assert!(e.starts_with("6:3:"), "{e}");
    // ...and inlining, given an unverified module, still names it.
    let m = shardsim::ir::mlir::parse_module(text).unwrap();
    let e = inline_calls(&m).unwrap_err().to_string();
    assert!(e.contains("recursion through @f"), "{e}");
    assert!(e.starts_with("6:"), "{e}");
}
