//! `sdy.named_computation` through propagation, partitioning and execution:
//! propagation fills its in/out shardings (as Shardy's export writes them),
//! the partitioner runs its body inline (as XLA runs the call Shardy's export
//! makes of it), resharding at the boundary where the in/out shardings differ
//! from the values around it, and the virtual devices give the interpreter's
//! result.

use shardsim::exec::execute;
use shardsim::ir::interp::interpret;
use shardsim::ir::mlir::{parse_and_verify, print_module};
use shardsim::ir::OpKind;
use shardsim::partition::{partition, Step};
use shardsim::propagate::{propagate_module, Strategy};
use shardsim::tensor::{allclose, Tensor};

fn counting(shape: &[u64]) -> Tensor {
    let n: u64 = shape.iter().product();
    let v: Vec<f32> = (0..n).map(|i| ((i * 5) % 11) as f32 * 0.25 - 1.0).collect();
    Tensor::from_vec(shape.to_vec(), v).unwrap()
}

fn collectives(steps: &[Step]) -> usize {
    steps
        .iter()
        .filter(|s| matches!(s, Step::Collective(_)))
        .count()
}

/// Unannotated: the body's sharding comes from the argument and propagation
/// writes the in/out shardings; no collective is needed.
const FILLED: &str = r#"sdy.mesh @mesh = <["x"=2, "y"=4]>
func.func @main(%a: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}, %w: tensor<16x8xf32>) -> tensor<8x8xf32> {
  %0 = sdy.named_computation<"layer">(%a, %w) (%x: tensor<8x16xf32>, %k: tensor<16x8xf32>) {
    %1 = stablehlo.tanh %x : tensor<8x16xf32>
    %2 = stablehlo.dot_general %1, %k, contracting_dims = [1] x [0] : (tensor<8x16xf32>, tensor<16x8xf32>) -> tensor<8x8xf32>
    sdy.return %2 : tensor<8x8xf32>
  } : (tensor<8x16xf32>, tensor<16x8xf32>) -> tensor<8x8xf32>
  %3 = stablehlo.negate %0 : tensor<8x8xf32>
  return %3 : tensor<8x8xf32>
}
"#;

/// Annotated: the body wants its input sharded on dim 1 by "x" while the
/// argument is sharded on dim 0, so the boundary reshards.
const RESHARDED: &str = r#"sdy.mesh @mesh = <["x"=2, "y"=4]>
func.func @main(%a: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) -> tensor<8x16xf32> {
  %0 = sdy.named_computation<"cols">(%a) in_shardings=[<@mesh, [{}, {"x"}]>] out_shardings=[<@mesh, [{}, {"x"}]>] (%x: tensor<8x16xf32>) {
    %1 = stablehlo.exponential %x : tensor<8x16xf32>
    sdy.return %1 : tensor<8x16xf32>
  } : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %2 = stablehlo.add %0, %a : tensor<8x16xf32>
  return %2 : tensor<8x16xf32>
}
"#;

fn run(text: &str, inputs: &[Tensor]) -> (String, usize) {
    let mut m = parse_and_verify(text).unwrap();
    propagate_module(&mut m, Strategy::default()).unwrap();
    let printed = print_module(&m);
    let named = m.funcs[0]
        .ops
        .iter()
        .find(|o| matches!(o.kind, OpKind::NamedComputation { .. }))
        .unwrap();
    let OpKind::NamedComputation {
        in_shardings,
        out_shardings,
        ..
    } = &named.kind
    else {
        unreachable!()
    };
    assert!(
        in_shardings.is_some() && out_shardings.is_some(),
        "{printed}"
    );
    let program = partition(&m).unwrap();
    let want = interpret(&m, inputs).unwrap();
    let got = execute(&program, inputs).unwrap();
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(&want) {
        assert!(allclose(g, w, 1e-5, 1e-5).unwrap(), "{printed}");
    }
    (printed, collectives(&program.steps))
}

#[test]
fn named_computation_shardings_are_filled_and_it_runs_inline() {
    let (printed, n) = run(FILLED, &[counting(&[8, 16]), counting(&[16, 8])]);
    assert!(
        printed.contains(r#"in_shardings=[<@mesh, [{"x"}, {"y"}]>, <@mesh, [{"y"}, {}]>]"#),
        "{printed}"
    );
    assert!(
        printed.contains(r#"out_shardings=[<@mesh, [{"x"}, {}]>]"#),
        "{printed}"
    );
    // The contraction over "y" needs its all-reduce, nothing more.
    assert_eq!(n, 1, "{printed}");
}

#[test]
fn named_computation_boundary_reshards_where_shardings_differ() {
    let (printed, n) = run(RESHARDED, &[counting(&[8, 16])]);
    assert!(
        printed.contains(
            r#"in_shardings=[<@mesh, [{}, {"x"}]>] out_shardings=[<@mesh, [{}, {"x"}]>]"#
        ),
        "{printed}"
    );
    assert!(n >= 1, "{printed}");
}
