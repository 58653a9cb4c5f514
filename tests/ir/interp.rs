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

#[test]
fn interpreter_reproduces_jax_outputs() {
    let cases = cases();
    assert!(
        cases.len() >= 23,
        "expected the 8 shared and 15+ own fixtures"
    );
    let mut failures = Vec::new();
    let mut checked = 0;
    for dir in &cases {
        let inputs = crate::common::numbered(dir, "in");
        let expected = crate::common::numbered(dir, "out");
        for file in ["lowered.mlir", "before.mlir", "after.mlir"] {
            let path = dir.join(file);
            let text = std::fs::read_to_string(&path).unwrap();
            let module = parse_and_verify(&text).unwrap();
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
