//! A callee called with different shardings becomes one function per
//! sharding (Shardy's flatten/unflatten of the call graph), and the printed
//! module still parses, partitions and runs (as `shardsim exec` runs it) to
//! the interpreter's answer.

use shardsim::exec::execute;
use shardsim::ir::inline::inline_calls;
use shardsim::ir::interp::interpret;
use shardsim::ir::mlir::{parse_and_verify, print_module};
use shardsim::ir::{Module, OpKind};
use shardsim::partition::partition;
use shardsim::propagate::{propagate_module, propagate_module_with, Options, Strategy};
use shardsim::tensor::{allclose, Tensor};

fn program() -> String {
    let dir = crate::common::fixture("shardy_lit");
    std::fs::read_to_string(dir.join("callee_clones.mlir")).unwrap()
}

/// Per function, its callees in program order.
fn calls(m: &Module) -> Vec<(String, Vec<String>)> {
    m.funcs
        .iter()
        .map(|f| {
            let callees = f
                .walk()
                .into_iter()
                .filter_map(|id| match &f.op(id).kind {
                    OpKind::Call { callee } => Some(callee.clone()),
                    _ => None,
                })
                .collect();
            (f.name.clone(), callees)
        })
        .collect()
}

fn arg_axes(m: &Module, func: &str) -> String {
    let f = m.func(func).unwrap();
    let s = f.value(f.args[0]).sharding.as_ref().unwrap();
    s.dims[0]
        .axes
        .iter()
        .map(|a| a.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

#[test]
fn callee_called_with_two_shardings_is_cloned_and_runs() {
    let mut m = parse_and_verify(&program()).unwrap();
    propagate_module(&mut m, Strategy::default()).unwrap();
    let printed = print_module(&m);
    let m = parse_and_verify(&printed).unwrap_or_else(|e| panic!("{e}\n{printed}"));
    // The callee-first walk gives the outer callee's call the original, the
    // caller's second call the clone.
    let want = vec![
        (
            "main".to_string(),
            vec!["outer".to_string(), "leaf_0".into()],
        ),
        ("leaf".to_string(), vec![]),
        ("outer".to_string(), vec!["leaf".to_string()]),
        ("leaf_0".to_string(), vec![]),
    ];
    assert_eq!(calls(&m), want, "{printed}");
    assert_eq!(arg_axes(&m, "leaf"), r#""b""#, "{printed}");
    assert_eq!(arg_axes(&m, "leaf_0"), r#""a""#, "{printed}");
    let n = 32;
    let v: Vec<f32> = (0..n).map(|i| ((i * 7) % 11) as f32 - 5.5).collect();
    let inputs = [Tensor::from_vec(vec![8, 4], v).unwrap()];
    // As `shardsim exec` runs the printed module: calls inlined (each copy
    // keeps its clone's shardings), propagated again, partitioned.
    let mut inlined = inline_calls(&m).unwrap();
    propagate_module(&mut inlined, Strategy::default()).unwrap();
    let program = partition(&inlined).unwrap();
    let want = interpret(&m, &inputs).unwrap();
    let got = execute(&program, &inputs).unwrap();
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(&want) {
        assert!(allclose(g, w, 0.0, 0.0).unwrap(), "{printed}");
    }
}

#[test]
fn dedup_functions_fully_keeps_one_callee() {
    let mut m = parse_and_verify(&program()).unwrap();
    let options = Options {
        dedup_functions_fully: true,
    };
    propagate_module_with(&mut m, Strategy::default(), options).unwrap();
    let names: Vec<&str> = m.funcs.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["main", "leaf", "outer"]);
}
