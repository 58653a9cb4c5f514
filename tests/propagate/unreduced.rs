//! The explicit `sdy.all_reduce` ops Shardy's export inserts where a use
//! drops unreduced axes (its lit file propagation_pipeline.mlir checks them
//! in `dot_general_with_unreduced_result*`; the lit group covers those
//! shardings). Here: where each goes, its axes and out-sharding, that the
//! printed module reads back and propagates to itself, and that it
//! partitions to one all-reduce of the closed-form size (no more traffic
//! than the partial sums need) and runs to the interpreter's answer.

use shardsim::exec::execute;
use shardsim::ir::inline::inline_calls;
use shardsim::ir::interp::interpret;
use shardsim::ir::mlir::{parse_and_verify, print_module};
use shardsim::ir::{Func, Module};
use shardsim::partition::{partition, CollectiveKind};
use shardsim::propagate::{propagate_module, Strategy};
use shardsim::tensor::{allclose, Tensor};

/// The fixture's modules, propagated.
fn modules() -> Vec<Module> {
    super::propagated_lit("unreduced_all_reduce.mlir", Default::default())
}

/// The function's top-level ops as `result = op operands`, all-reduces with
/// their axes and out-sharding.
fn listing(f: &Func) -> Vec<String> {
    f.body.iter().map(|&id| super::op_line(f, id)).collect()
}

#[test]
fn all_reduces_go_where_unreduced_axes_are_dropped() {
    let ms = modules();
    // Shardy's CHECK lines for the partially delayed dot: all_reduce {"b"}
    // keeping "c" unreduced before the first reshard, all_reduce {"c"}
    // before the second.
    assert_eq!(
        listing(ms[0].func("two_steps").unwrap()),
        [
            "%d = stablehlo.dot_general %l,%r",
            r#"%all_reduce = sdy.all_reduce %d {"b"} out=<@m, [{"a"}, {}], unreduced={"c"}>"#,
            "%rs1 = sdy.reshard %all_reduce",
            "%s = stablehlo.add %rs1,%rs1",
            r#"%all_reduce_1 = sdy.all_reduce %s {"c"} out=<@m, [{"a"}, {}]>"#,
            "%rs2 = sdy.reshard %all_reduce_1",
            " = func.return %rs2",
        ]
    );
    // A call's source gets its all-reduce right after the value (Shardy's
    // insertAfterOperand), an op's operands and a function result right
    // before their user; one per use, as Shardy's.
    let ar = |n: &str| format!(r#"{n} = sdy.all_reduce %d {{"b"}} out=<@m, [{{"a"}}, {{}}]>"#);
    assert_eq!(
        listing(ms[1].func("main").unwrap()),
        [
            "%d = stablehlo.dot_general %l,%r".to_string(),
            ar("%all_reduce"),
            "%t = func.call %all_reduce".into(),
            ar("%all_reduce_1"),
            ar("%all_reduce_2"),
            "%sq = stablehlo.multiply %all_reduce_1,%all_reduce_2".into(),
            ar("%all_reduce_3"),
            " = func.return %t,%all_reduce_3,%sq".into(),
        ]
    );
    // The callee takes no unreduced value: nothing inserted there.
    assert_eq!(listing(ms[1].func("twice").unwrap()).len(), 2);
    // A named computation's operand feeds its block argument (a data-flow
    // edge): the all-reduce goes right after the value.
    assert_eq!(
        listing(ms[2].func("main").unwrap()),
        [
            "%d = stablehlo.dot_general %l,%r".to_string(),
            ar("%all_reduce"),
            "%n = sdy.named_computation %all_reduce".into(),
            " = func.return %n".into(),
        ]
    );
}

#[test]
fn printed_all_reduces_read_back_propagate_to_themselves_and_run() {
    // Per module: the all-reduce's local bytes (rows of "a"'s block x
    // columns x 4 bytes: the result is sharded on "a" alone) and the input shapes.
    let cases: [(u64, [[usize; 2]; 2]); 3] = [
        (4 * 32 * 4, [[8, 8], [8, 32]]),
        (4 * 16 * 4, [[8, 8], [8, 16]]),
        (4 * 16 * 4, [[8, 8], [8, 16]]),
    ];
    for (m, (bytes, shapes)) in modules().iter().zip(cases) {
        let printed = print_module(m);
        let mut again = parse_and_verify(&printed).unwrap_or_else(|e| panic!("{e}\n{printed}"));
        assert_eq!(print_module(&again), printed, "reads back as printed");
        propagate_module(&mut again, Strategy::default()).unwrap();
        assert_eq!(
            print_module(&again),
            printed,
            "propagating again changes nothing"
        );
        // As `shardsim exec` runs it: calls inlined, propagated, partitioned.
        let mut inlined = inline_calls(&again).unwrap();
        propagate_module(&mut inlined, Strategy::default()).unwrap();
        let program = partition(&inlined).unwrap();
        let moved: Vec<(&str, u64)> = program
            .collectives()
            .filter(|c| c.kind.moves_data())
            .map(|c| (c.kind.name(), c.bytes))
            .collect();
        assert_eq!(moved, [("all_reduce", bytes)], "{printed}");
        assert!(program
            .collectives()
            .all(|c| !matches!(c.kind, CollectiveKind::ReduceScatter { .. })));
        // Integer-valued inputs: partial sums add up exactly in any order.
        let inputs: Vec<Tensor> = shapes
            .iter()
            .enumerate()
            .map(|(k, s)| {
                let v: Vec<f32> = (0..s[0] * s[1])
                    .map(|i| ((i * (7 + 2 * k)) % 11) as f32 - 5.0)
                    .collect();
                Tensor::from_vec(vec![s[0] as u64, s[1] as u64], v).unwrap()
            })
            .collect();
        let want = interpret(&again, &inputs).unwrap();
        let got = execute(&program, &inputs).unwrap();
        assert_eq!(got.len(), want.len());
        for (g, w) in got.iter().zip(&want) {
            assert!(allclose(g, w, 0.0, 0.0).unwrap(), "{printed}");
        }
    }
}
