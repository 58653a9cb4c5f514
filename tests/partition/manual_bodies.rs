//! Fully manual bodies are per-device code: a gather or scatter on a body
//! argument indexes the device's own block with indices local to it (the
//! fixtures under `tests/fixtures/partition/manual/`), so the partitioned
//! program run on the virtual devices equals the interpreter exactly.

use shardsim::base::DType;
use shardsim::exec::execute;
use shardsim::ir::interp::interpret;
use shardsim::ir::mlir::parse_and_verify;
use shardsim::partition::partition;
use shardsim::propagate::{propagate_module, Strategy};
use shardsim::tensor::{Data, Tensor};

/// Inputs for the entry's arguments: floats count through a small range;
/// integers (indices) cycle through 3, 0, 1, 2 (every fixture's blocks have
/// at least 4 rows, and each device's indices differ).
fn inputs(module: &shardsim::ir::Module) -> Vec<Tensor> {
    let func = module.entry().unwrap();
    func.args
        .iter()
        .map(|&a| {
            let ty = &func.value(a).ty;
            let n: u64 = ty.shape.iter().product();
            if ty.dtype.is_float() {
                let v: Vec<f32> = (0..n).map(|i| ((i * 7) % 11) as f32 - 5.0).collect();
                Tensor::from_vec(ty.shape.clone(), v).unwrap()
            } else {
                let v: Vec<i128> = (0..n).map(|i| ((3 * i + 3) % 4) as i128).collect();
                Tensor::new(ty.shape.clone(), Data::from_i128s(DType::I32, &v)).unwrap()
            }
        })
        .collect()
}

#[test]
fn indexing_in_manual_bodies_matches_the_interpreter() {
    let dir = crate::common::fixture("partition/manual");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "mlir"))
        .collect();
    files.sort();
    assert!(files.len() >= 3, "{files:?}");
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        let mut module = parse_and_verify(&text).unwrap();
        let args = inputs(&module);
        let want = interpret(&module, &args).unwrap();
        propagate_module(&mut module, Strategy::default()).unwrap();
        let program = partition(&module).unwrap();
        let got = execute(&program, &args).unwrap();
        assert_eq!(got, want, "{}", f.display());
    }
}
