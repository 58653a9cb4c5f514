//! The reference interpreter against JAX: every fixture's program, evaluated on
//! its `in*.npy`, gives its `out*.npy` within rtol 1e-4 / atol 1e-5 (the
//! issue's tolerance; integers and booleans exactly).

use std::path::PathBuf;

use shardsim::ir::interp::interpret;
use shardsim::ir::mlir::parse_and_verify;
use shardsim::tensor::{allclose, max_abs_rel_error};

fn cases() -> Vec<PathBuf> {
    crate::common::jax_cases_with_data()
}

/// Interpret `files` of each case folder on its `in*.npy` and compare with its
/// `out*.npy` (rtol 1e-4, atol 1e-5; integers and booleans exactly). Returns the
/// failures and the number of outputs checked.
fn check_cases(cases: &[PathBuf], files: &[&str]) -> (Vec<String>, usize) {
    let mut failures = Vec::new();
    let mut checked = 0;
    for dir in cases {
        let inputs = crate::common::numbered(dir, "in");
        let expected = crate::common::numbered(dir, "out");
        for file in files {
            let path = dir.join(file);
            let text = std::fs::read_to_string(&path).unwrap();
            let module = match parse_and_verify(&text) {
                Ok(m) => m,
                Err(e) => {
                    failures.push(e.in_file(&path.display().to_string()));
                    continue;
                }
            };
            let outs = match interpret(&module, &inputs) {
                Ok(o) => o,
                Err(e) => {
                    failures.push(format!("{}: {e}", path.display()));
                    continue;
                }
            };
            if outs.len() != expected.len() {
                failures.push(format!(
                    "{}: {} outputs, JAX has {}",
                    path.display(),
                    outs.len(),
                    expected.len()
                ));
                continue;
            }
            for (i, (o, e)) in outs.iter().zip(&expected).enumerate() {
                checked += 1;
                if o.shape() != e.shape()
                    || o.dtype() != e.dtype()
                    || !allclose(o, e, 1e-4, 1e-5).unwrap_or(false)
                {
                    let (abs, rel) = max_abs_rel_error(o, e).unwrap_or((f64::NAN, f64::NAN));
                    failures.push(format!(
                        "{} out{i}: {:?} {} vs JAX {:?} {}: max abs {abs:e} rel {rel:e}",
                        path.display(),
                        o.shape(),
                        o.dtype(),
                        e.shape(),
                        e.dtype()
                    ));
                }
            }
        }
    }
    (failures, checked)
}

#[test]
fn interpreter_reproduces_jax_outputs() {
    let cases = cases();
    assert!(
        cases.len() >= 23,
        "expected the 8 shared and 15+ own fixtures"
    );
    let (failures, checked) = check_cases(&cases, &["lowered.mlir", "before.mlir", "after.mlir"]);
    assert!(checked >= 3 * cases.len(), "only {checked} outputs checked");
    assert!(
        failures.is_empty(),
        "{} failures ({checked} outputs checked):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// The whole-model JAX programs (`tests/fixtures/models/<case>/`: training steps
/// with while loops, gather/scatter, sort and top_k with RNG bits, reduce_window,
/// a convolution, shard_map): the interpreter reproduces every output of every
/// program form (as lowered, before and after Shardy propagation).
#[test]
fn interpreter_reproduces_whole_model_outputs() {
    let root = crate::common::fixture("models");
    let mut cases: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("in0.npy").exists())
        .collect();
    cases.sort();
    assert!(cases.len() >= 9, "expected the 9 whole-model cases");
    let (failures, checked) = check_cases(&cases, &["lowered.mlir", "before.mlir", "after.mlir"]);
    assert!(checked >= 3 * cases.len(), "only {checked} outputs checked");
    assert!(
        failures.is_empty(),
        "{} failures ({checked} outputs checked):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn interpreter_rejects_mismatched_inputs() {
    let dir = crate::common::fixture("jax/add_relu");
    let module =
        parse_and_verify(&std::fs::read_to_string(dir.join("lowered.mlir")).unwrap()).unwrap();
    let inputs = crate::common::numbered(&dir, "in");
    let e = interpret(&module, &inputs[..1]).unwrap_err();
    assert!(
        e.to_string().contains("takes 2 arguments but 1 inputs"),
        "{e}"
    );
    let wrong = vec![
        inputs[0].clone(),
        shardsim::tensor::transpose(&inputs[1], &[1, 0]).unwrap(),
    ];
    let e = interpret(&module, &wrong).unwrap_err();
    assert!(
        e.to_string()
            .contains("input 1 is tensor<8x16xf32> but argument 1 of @main is tensor<16x8xf32>"),
        "{e}"
    );
}
