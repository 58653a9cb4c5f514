//! Hand-written programs in the syntax of Shardy's own parse/print tests
//! (collectives, named and manual computations, generic forms): they parse,
//! print back identically and verify.

use shardsim::ir::mlir::{parse_and_verify, print_canonical, print_module};
use shardsim::ir::OpKind;

const MESH: &str = "sdy.mesh @mesh = <[\"x\"=2, \"y\"=4]>\n";

/// A one-function module around `body` (ops indented by two spaces).
fn wrap(args: &str, results: &str, body: &str) -> String {
    format!("{MESH}func.func @main({args}) -> {results} {{\n{body}}}\n")
}

/// Programs printed exactly as Shardy prints them: print(parse(x)) == x.
const IDENTICAL: &[(&str, &str, &str)] = &[
    (
        "all_gather",
        "%arg0: tensor<16x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{\"x\"}, {\"y\"}]>}",
        "  %0 = sdy.all_gather [{}, {\"y\"}] %arg0 out_sharding=<@mesh, [{\"x\"}, {}]> : tensor<16x8xf32>\n  return %0 : tensor<16x8xf32>\n",
    ),
    (
        "all_slice",
        "%arg0: tensor<16x8xf32>",
        "  %0 = sdy.all_slice [{\"x\"}, {\"y\":(1)2}] %arg0 out_sharding=<@mesh, [{\"x\"}, {\"y\":(1)2}]> : tensor<16x8xf32>\n  return %0 : tensor<16x8xf32>\n",
    ),
    (
        "all_reduce",
        "%arg0: tensor<16x8xf32>",
        "  %0 = sdy.all_reduce {\"x\", \"y\"} %arg0 out_sharding=<@mesh, [{}, {}]> : tensor<16x8xf32>\n  return %0 : tensor<16x8xf32>\n",
    ),
    (
        "reduce_scatter",
        "%arg0: tensor<16x8xf32>",
        "  %0 = sdy.reduce_scatter [{\"x\"}, {}] %arg0 out_sharding=<@mesh, [{\"x\"}, {}]> : tensor<16x8xf32>\n  return %0 : tensor<16x8xf32>\n",
    ),
    (
        "all_to_all",
        "%arg0: tensor<16x8xf32>",
        "  %0 = sdy.all_to_all [{\"x\"}: 0->1, {\"y\"}: 1->0] %arg0 out_sharding=<@mesh, [{\"y\"}, {\"x\"}]> : tensor<16x8xf32>\n  return %0 : tensor<16x8xf32>\n",
    ),
    (
        "collective_permute",
        "%arg0: tensor<16x8xf32>",
        "  %0 = sdy.collective_permute %arg0 out_sharding=<@mesh, [{\"y\"}, {\"x\"}]> : tensor<16x8xf32>\n  return %0 : tensor<16x8xf32>\n",
    ),
    (
        "sharding_group_barrier_edge",
        "%arg0: tensor<16x8xf32>",
        "  sdy.sharding_group %arg0 group_id=3 : tensor<16x8xf32>\n  %0 = sdy.propagation_barrier %arg0 allowed_direction=BACKWARD : tensor<16x8xf32>\n  %1 = stablehlo.negate %0 : tensor<16x8xf32>\n  %2 = sdy.data_flow_edge %1 sharding=<@mesh, [{\"x\", ?}, {?}]> : tensor<16x8xf32>\n  %3 = stablehlo.negate %2 : tensor<16x8xf32>\n  %4 = sdy.data_flow_edge %3 : tensor<16x8xf32>\n  return %4 : tensor<16x8xf32>\n",
    ),
    (
        "manual_computation",
        "%arg0: tensor<16x8xf32>",
        "  %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{\"x\"}, {}]>] out_shardings=[<@mesh, [{\"x\"}, {}], replicated={\"y\"}>] manual_axes={\"x\", \"y\"} (%arg1: tensor<8x8xf32>) {\n    %1 = stablehlo.add %arg1, %arg1 : tensor<8x8xf32>\n    sdy.return %1 : tensor<8x8xf32>\n  } : (tensor<16x8xf32>) -> tensor<16x8xf32>\n  return %0 : tensor<16x8xf32>\n",
    ),
    (
        "named_computation",
        "%arg0: tensor<16x8xf32>",
        "  %0 = sdy.named_computation<\"foo\">(%arg0) in_shardings=[<@mesh, [{}, {\"y\"}]>] out_shardings=[<@mesh, [{\"x\"}, {}]>] (%arg1: tensor<16x8xf32>) {\n    %1 = stablehlo.multiply %arg1, %arg1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{\"x\", ?}, {\"y\", ?}]>]>} : tensor<16x8xf32>\n    sdy.return %1 : tensor<16x8xf32>\n  } : (tensor<16x8xf32>) -> tensor<16x8xf32>\n  return %0 : tensor<16x8xf32>\n",
    ),
    (
        "slice_stride_iota_float_pad",
        "%arg0: tensor<16x8xf32>",
        "  %0 = stablehlo.slice %arg0 [1:9:2, 0:8] : (tensor<16x8xf32>) -> tensor<4x8xf32>\n  %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>\n  %1 = stablehlo.pad %0, %cst, low = [1, -1], high = [0, 2], interior = [1, 0] : (tensor<4x8xf32>, tensor<f32>) -> tensor<8x9xf32>\n  %2 = stablehlo.iota dim = 1 : tensor<8x9xf32>\n  %3 = stablehlo.add %1, %2 : tensor<8x9xf32>\n  return %3 : tensor<8x9xf32>\n",
    ),
    (
        "logistic_bf16_convert_i1_constants",
        "%arg0: tensor<4xbf16>",
        "  %0 = stablehlo.logistic %arg0 : tensor<4xbf16>\n  %1 = stablehlo.convert %0 : (tensor<4xbf16>) -> tensor<4xf32>\n  %c = stablehlo.constant dense<[true, false, true, true]> : tensor<4xi1>\n  %c_0 = stablehlo.constant dense<\"0x0000803F000000400000404000008040\"> : tensor<4xf32>\n  %2 = stablehlo.select %c, %1, %c_0 : tensor<4xi1>, tensor<4xf32>\n  return %2 : tensor<4xf32>\n",
    ),
];

#[test]
fn shardy_syntax_prints_back_identically() {
    for (name, args, body) in IDENTICAL {
        let results = if name.starts_with("logistic") {
            "tensor<4xf32>"
        } else if name.starts_with("slice") {
            "tensor<8x9xf32>"
        } else {
            "tensor<16x8xf32>"
        };
        let text = wrap(args, results, body);
        let m = parse_and_verify(&text).unwrap_or_else(|e| panic!("{name}: {e}\n{text}"));
        assert_eq!(print_module(&m), text, "{name}");
    }
}

#[test]
fn collectives_are_typed() {
    let text = wrap(
        "%arg0: tensor<16x8xf32>",
        "tensor<16x8xf32>",
        IDENTICAL[4].2,
    );
    let m = parse_and_verify(&text).unwrap();
    let f = &m.funcs[0];
    match &f.op(f.body[0]).kind {
        OpKind::AllToAll {
            params,
            out_sharding,
        } => {
            assert_eq!(params.len(), 2);
            assert_eq!((params[0].src_dim, params[0].tgt_dim), (0, 1));
            assert_eq!(params[1].axes[0].name, "y");
            assert_eq!(out_sharding.to_bare(), r#"<@mesh, [{"y"}, {"x"}]>"#);
        }
        k => panic!("expected all_to_all, got {k:?}"),
    }
    let c = shardsim::ir::DenseValue::Hex(vec![0, 0, 0x80, 0x3F, 0, 0, 0, 0x40]);
    let ty = shardsim::base::TensorType::new(vec![2], shardsim::base::DType::F32);
    assert_eq!(c.to_f64s(&ty), Some(vec![1.0, 2.0]));
}

/// The generic form and the explicit-region reduce parse to the same module as the pretty form.
#[test]
fn generic_form_equals_pretty_form() {
    let pretty = wrap(
        "%arg0: tensor<16x8xf32>, %arg1: tensor<8x4xf32>",
        "tensor<16xf32>",
        "  %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<16x8xf32>, tensor<8x4xf32>) -> tensor<16x4xf32>\n  %1 = stablehlo.transpose %0, dims = [1, 0] : (tensor<16x4xf32>) -> tensor<4x16xf32>\n  %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>\n  %2 = stablehlo.reduce(%1 init: %cst) applies stablehlo.add across dimensions = [0] : (tensor<4x16xf32>, tensor<f32>) -> tensor<16xf32>\n  %3 = stablehlo.compare  GT, %2, %2,  FLOAT : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xi1>\n  %4 = stablehlo.select %3, %2, %2 : tensor<16xi1>, tensor<16xf32>\n  return %4 : tensor<16xf32>\n",
    );
    let generic = wrap(
        "%arg0: tensor<16x8xf32>, %arg1: tensor<8x4xf32>",
        "tensor<16xf32>",
        r#"  %0 = "stablehlo.dot_general"(%arg0, %arg1) <{dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]>, precision_config = [#stablehlo<precision DEFAULT>, #stablehlo<precision DEFAULT>]}> : (tensor<16x8xf32>, tensor<8x4xf32>) -> tensor<16x4xf32> loc("a.py":3:4)
  %1 = "stablehlo.transpose"(%0) {permutation = array<i64: 1, 0>} : (tensor<16x4xf32>) -> tensor<4x16xf32> loc(#loc2)
  %cst = "stablehlo.constant"() {value = dense<0.000000e+00> : tensor<f32>} : () -> tensor<f32>
  %2 = "stablehlo.reduce"(%1, %cst) ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %s = "stablehlo.add"(%a, %b) : (tensor<f32>, tensor<f32>) -> tensor<f32>
    "stablehlo.return"(%s) : (tensor<f32>) -> ()
  }) {dimensions = array<i64: 0>} : (tensor<4x16xf32>, tensor<f32>) -> tensor<16xf32>
  %3 = "stablehlo.compare"(%2, %2) {comparison_direction = #stablehlo<comparison_direction GT>, compare_type = #stablehlo<comparison_type FLOAT>} : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xi1>
  %4 = "stablehlo.select"(%3, %2, %2) : (tensor<16xi1>, tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  "func.return"(%4) : (tensor<16xf32>) -> ()
"#,
    ) + "#loc2 = loc(\"b.py\":1:1)\n";
    let a = parse_and_verify(&pretty).unwrap();
    let b = parse_and_verify(&generic).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(print_canonical(&a), print_canonical(&b));
    // The region reduce prints back in the compact `applies` form.
    assert!(print_module(&b).contains("applies stablehlo.add across dimensions = [0]"));
}

#[test]
fn unknown_attributes_survive_and_are_sorted_like_mlir() {
    let text = wrap(
        "%arg0: tensor<8xf32> {mhlo.frontend_attributes = {xla.sdy.x = \"1\"}, sdy.sharding = #sdy.sharding<@mesh, [{\"x\"}]>}",
        "(tensor<8xf32> {jax.result_info = \"result\", mhlo.layout_mode = \"default\"})",
        "  %0 = stablehlo.exponential %arg0 {mhlo.frontend_attributes = {_xla_compute_type = \"host\"}, result_accuracy = #stablehlo.result_accuracy<mode = #stablehlo.result_accuracy_mode<HIGHEST>>, sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{\"x\"}]>]>} : tensor<8xf32>\n  return %0 : tensor<8xf32>\n",
    );
    let m = parse_and_verify(&text).unwrap();
    assert_eq!(print_module(&m), text);
    let f = &m.funcs[0];
    assert_eq!(f.op(f.body[0]).attrs.len(), 2);
    assert_eq!(f.result_attrs[0].len(), 2);
}

/// Shardy's `maximal_sharding_no_results`: an op without results carrying
/// one maximal sharding parses, survives propagation and prints back as
/// Shardy prints it (the lit case is counted in `propagate::lit`).
#[test]
fn a_result_less_op_keeps_its_maximal_sharding_through_propagation() {
    let text = "sdy.mesh @mesh = <[\"a\"=2, \"b\"=2, \"c\"=2]>\nsdy.mesh @maximal_mesh = <[], device_ids=[0]>\nfunc.func @maximal_sharding_no_results(%arg0: tensor<8x8xf32>) -> tensor<8x8xf32> {\n  stablehlo.custom_call @xla_python_cpu_callback(%arg0) {has_side_effect = true, sdy.sharding = #sdy.sharding_per_value<[<@maximal_mesh, []>]>} : (tensor<8x8xf32>) -> ()\n  return %arg0 : tensor<8x8xf32>\n}\n";
    let mut m = parse_and_verify(text).unwrap();
    shardsim::propagate::propagate_module(&mut m, shardsim::propagate::Strategy::UserPriority)
        .unwrap();
    assert_eq!(print_module(&m), text);
}

/// Shardy's `unreduced_custom_reduction_op`: `unreduced=max{...}` and
/// `min{...}` parse and print back (a sum prints no keyword), a max stays
/// on the dot's result through propagation as Shardy's CHECK line shows, and
/// the program partitions and runs on 8 devices as the interpreter computes
/// it ("c" splits none of the dot's factors: every device along "c" holds
/// the whole product, which any of the three reductions leaves as it is).
#[test]
fn custom_reduction_kinds_print_back_propagate_partition_and_run() {
    use shardsim::sharding::Reduction;
    use shardsim::tensor::{Data, Tensor};
    let program = |kind: &str| {
        format!("sdy.mesh @mesh = <[\"a\"=2, \"b\"=2, \"c\"=2]>\nfunc.func @main(%arg0: tensor<8x8xf32> {{sdy.sharding = #sdy.sharding<@mesh, [{{\"a\", ?}}p1, {{?}}]>}}, %arg1: tensor<8x8xf32> {{sdy.sharding = #sdy.sharding<@mesh, [{{\"a\", ?}}p0, {{\"b\", ?}}p0]>}}) -> tensor<8x8xf32> {{\n  %0 = stablehlo.add %arg0, %arg0 : tensor<8x8xf32>\n  %1 = stablehlo.dot_general %0, %arg1, contracting_dims = [1] x [0] {{sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{{?}}p0, {{?}}], unreduced={kind}{{\"c\"}}>]>}} : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>\n  return %1 : tensor<8x8xf32>\n}}\n")
    };
    let x = Tensor::new(
        vec![8, 8],
        Data::F32((0..64).map(|i| (i % 7) as f32 - 3.0).collect()),
    )
    .unwrap();
    let y = Tensor::new(
        vec![8, 8],
        Data::F32((0..64).map(|i| (i % 5) as f32 * 0.5).collect()),
    )
    .unwrap();
    for (kind, reduction) in [
        ("", Reduction::Sum),
        ("max", Reduction::Max),
        ("min", Reduction::Min),
    ] {
        let text = program(kind);
        let mut m = parse_and_verify(&text).unwrap();
        assert_eq!(print_module(&m), text, "{kind}");
        let reference = shardsim::ir::interp::interpret(&m, &[x.clone(), y.clone()]).unwrap();
        shardsim::propagate::propagate_module(&mut m, shardsim::propagate::Strategy::UserPriority)
            .unwrap();
        let f = &m.funcs[0];
        let dot = f.values.iter().find(|v| v.name == "%1").unwrap();
        let s = dot.sharding.as_ref().unwrap();
        assert_eq!(s.reduction, reduction, "{kind}");
        assert_eq!(s.unreduced.len(), 1, "{kind}");
        assert!(
            print_module(&m).contains(&format!("unreduced={kind}{{\"c\"}}>")),
            "{kind}"
        );
        let program = shardsim::partition::partition_with(&m, &Default::default())
            .unwrap_or_else(|e| panic!("{kind}: {e}"));
        let got = shardsim::exec::execute(&program, &[x.clone(), y.clone()]).unwrap();
        assert_eq!(got, reference, "{kind}");
    }
    let bad = program("mux");
    let e = parse_and_verify(&bad).unwrap_err().to_string();
    assert!(e.contains("expected '{', found 'mux'"), "{e}");
}

/// Partial results declared `unreduced=max{"x"}` / `min{"x"}` on a max- or
/// min-reduce over a dim sharded on "x" are combined by an all-reduce max /
/// min over "x" (the same bytes as a sum's), giving the interpreter's values
/// exactly on 4 devices; a declaration whose kind is not the op's reduction
/// (max on a sum, a sum on a max) is refused by name, never combined.
#[test]
fn max_and_min_partials_are_combined_by_all_reduce_max_and_min() {
    use shardsim::partition::CollectiveKind;
    use shardsim::tensor::{CollectiveReduction, Data, Tensor};
    let program = |declared: &str, body: &str, init: &str| {
        format!("sdy.mesh @mesh = <[\"x\"=2, \"y\"=2]>\nfunc.func @main(%a: tensor<4x8xf32> {{sdy.sharding = #sdy.sharding<@mesh, [{{\"y\"}}, {{\"x\"}}]>}}) -> tensor<4xf32> {{\n  %c = stablehlo.constant dense<{init}> : tensor<f32>\n  %0 = stablehlo.reduce(%a init: %c) applies stablehlo.{body} across dimensions = [1] {{sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{{\"y\"}}], unreduced={declared}{{\"x\"}}>]>}} : (tensor<4x8xf32>, tensor<f32>) -> tensor<4xf32>\n  %1 = stablehlo.negate %0 : tensor<4xf32>\n  return %1 : tensor<4xf32>\n}}\n")
    };
    // Distinct values, so a max, a min and a sum of the halves all differ.
    let a = Tensor::new(
        vec![4, 8],
        Data::F32((0..32).map(|i| ((i * 13) % 32) as f32 - 9.5).collect()),
    )
    .unwrap();
    let run = |text: &str| {
        let mut m = parse_and_verify(text).unwrap();
        let reference = shardsim::ir::interp::interpret(&m, std::slice::from_ref(&a)).unwrap();
        shardsim::propagate::propagate_module(&mut m, shardsim::propagate::Strategy::UserPriority)
            .unwrap();
        shardsim::partition::partition(&m).map(|p| (p, reference))
    };
    let mut bytes = Vec::new();
    for (declared, body, init, want) in [
        ("max", "maximum", "0xFF800000", CollectiveReduction::Max),
        ("min", "minimum", "0x7F800000", CollectiveReduction::Min),
        ("", "add", "0.000000e+00", CollectiveReduction::Sum),
    ] {
        let (p, reference) = run(&program(declared, body, init)).unwrap();
        let reductions: Vec<(CollectiveReduction, u64)> = p
            .collectives()
            .filter_map(|c| match c.kind {
                CollectiveKind::AllReduce(r) => Some((r, c.bytes)),
                _ => None,
            })
            .collect();
        assert_eq!(reductions.len(), 1, "{declared}: {reductions:?}");
        assert_eq!(reductions[0].0, want, "{declared}");
        bytes.push(reductions[0].1);
        let got = shardsim::exec::execute(&p, std::slice::from_ref(&a)).unwrap();
        assert_eq!(got, reference, "{declared}");
    }
    assert!(bytes.iter().all(|&b| b == bytes[0]), "{bytes:?}");
    for (declared, body, init, found) in [
        (
            "max",
            "add",
            "0.000000e+00",
            "combine by sum but its sharding declares unreduced=max{...}",
        ),
        (
            "min",
            "maximum",
            "0xFF800000",
            "combine by max but its sharding declares unreduced=min{...}",
        ),
        (
            "",
            "minimum",
            "0x7F800000",
            "combine by min but its sharding declares unreduced={...}",
        ),
    ] {
        let Err(e) = run(&program(declared, body, init)) else {
            panic!("{declared} on {body}: accepted");
        };
        let e = e.to_string();
        assert!(e.contains(found) && e.contains("4:3"), "{e}");
        assert_eq!(e.lines().count(), 1, "{e}");
    }
}
