//! PlanDevices on a program: an optimizer step whose state `m` lives in pinned
//! host memory and whose updated state must go back there gets exactly two
//! device copies (m host -> device before its use, the new state device ->
//! host before it is returned), and the planned program still parses, verifies
//! and computes the same values.

use shardsim::ir::interp::interpret;
use shardsim::ir::mlir::{parse_and_verify, print_module};
use shardsim::ir::{Module, OpKind};
use shardsim::plan::{plan_func, VirtualDevice};
use shardsim::tensor::{Scalar, Tensor};

fn load() -> Module {
    let text = std::fs::read_to_string(crate::common::fixture("plan/offload.mlir")).unwrap();
    parse_and_verify(&text).unwrap()
}

#[test]
fn host_pinned_state_gets_exactly_the_expected_copies() {
    let module = load();
    let gpu: VirtualDevice = "(cuda, 0, cuda, global)".parse().unwrap();
    let planned = plan_func(module.entry().unwrap(), &gpu).unwrap();
    let copies: Vec<(String, String, String)> = planned
        .copies
        .iter()
        .map(|(v, from, to)| {
            (
                v.clone(),
                from.memory_scope().unwrap().to_string(),
                to.memory_scope().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        copies,
        vec![
            ("%m".to_string(), "host".to_string(), "global".to_string()),
            ("%2".to_string(), "global".to_string(), "host".to_string()),
        ]
    );
    // Where the copies sit: before the multiply that reads %m, before the return.
    let f = &planned.func;
    let kinds: Vec<&str> = f.body.iter().map(|&o| f.op(o).kind.name()).collect();
    assert_eq!(
        kinds,
        [
            "stablehlo.broadcast_in_dim",
            "shardsim.device_copy",
            "stablehlo.multiply",
            "stablehlo.add",
            "stablehlo.subtract",
            "shardsim.device_copy",
            "func.return"
        ]
    );
    let copy_ops: Vec<_> = f
        .body
        .iter()
        .map(|&o| f.op(o))
        .filter(|o| matches!(o.kind, OpKind::DeviceCopy { .. }))
        .collect();
    assert_eq!(f.value(copy_ops[0].operands[0]).name, "%m");
    assert_eq!(f.value(f.op(f.body[2]).operands[0]).name, "%m_global");

    // The planned program prints, parses back, and computes what the original does.
    let mut planned_module = module.clone();
    planned_module.funcs[0] = planned.func.clone();
    let text = print_module(&planned_module);
    assert!(
        text.contains(r#"%m_global = "shardsim.device_copy"(%m) <{dst = "(cuda, 0, cuda, global)", src = "(cuda, 0, cuda, host)"}> : (tensor<8x16xf32>) -> tensor<8x16xf32>"#),
        "{text}"
    );
    let reparsed = parse_and_verify(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let t = |v: f32| Tensor::splat(vec![8, 16], Scalar::F32(v)).unwrap();
    let inputs = vec![t(1.0), t(0.5), t(2.0), Tensor::scalar(Scalar::F32(0.1))];
    let a = interpret(&module, &inputs).unwrap();
    let b = interpret(&reparsed, &inputs).unwrap();
    assert_eq!(a, b);
}

#[test]
fn a_result_on_another_virtual_device_runs_the_body_there() {
    // TVM's rule (seed 003): a function returning its result on a virtual
    // device also executes its body there. The new state %2 is returned on
    // the CPU, so the add, the multiply feeding it and the subtract reading
    // it run there: %2 is not copied; the host-pinned %m (on the CUDA
    // device's host memory by default) is copied to the CPU once.
    let text = std::fs::read_to_string(crate::common::fixture("plan/offload.mlir"))
        .unwrap()
        .replace(
            "tensor<8x16xf32> {mhlo.memory_kind = \"pinned_host\"}) {",
            "tensor<8x16xf32> {shardsim.virtual_device = \"(cpu, 0, llvm, host)\"}) {",
        );
    let module = parse_and_verify(&text).unwrap();
    let gpu: VirtualDevice = "(cuda, 0, cuda, global)".parse().unwrap();
    let planned = plan_func(module.entry().unwrap(), &gpu).unwrap();
    let copies: Vec<String> = planned
        .copies
        .iter()
        .map(|(v, from, to)| format!("{v} {from} -> {to}"))
        .collect();
    assert_eq!(
        copies,
        vec!["%m (cuda, 0, cuda, host) -> (cpu, 0, llvm, host)".to_string()]
    );
    let f = module.entry().unwrap();
    for name in ["%1", "%2", "%3"] {
        let i = f.values.iter().position(|v| v.name == name).unwrap();
        assert_eq!(
            planned.value_devices[i].as_ref().unwrap().to_string(),
            "(cpu, 0, llvm, host)",
            "{name}"
        );
    }
}

#[test]
fn an_unknown_memory_kind_is_an_error() {
    let text = std::fs::read_to_string(crate::common::fixture("plan/offload.mlir"))
        .unwrap()
        .replace(
            "%lr: tensor<f32>",
            "%lr: tensor<f32> {mhlo.memory_kind = \"bogus\"}",
        );
    let module = parse_and_verify(&text).unwrap();
    let gpu: VirtualDevice = "(cuda, 0, cuda, global)".parse().unwrap();
    let e = plan_func(module.entry().unwrap(), &gpu).unwrap_err();
    assert!(e.to_string().contains("unknown memory kind"), "{e}");
}
