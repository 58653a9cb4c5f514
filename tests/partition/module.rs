//! The partitioned program's module: the propagated module with its entry
//! function in place of the input's (built without copying the old one),
//! every other function, mesh and attribute unchanged and in order.

use shardsim::ir::mlir::parse_and_verify;
use shardsim::partition::partition;
use shardsim::propagate::{propagate_module, Strategy};

#[test]
fn the_program_module_keeps_every_other_function_and_replaces_the_entry() {
    let text = r#"module @two attributes {mhlo.num_partitions = 8 : i32} {
  sdy.mesh @mesh = <["x"=8]>
  func.func private @unused(%a: tensor<8xf32>) -> tensor<8xf32> {
    %0 = stablehlo.negate %a : tensor<8xf32>
    return %0 : tensor<8xf32>
  }
  func.func @main(%a: tensor<16x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) -> tensor<8xf32> {
    %c = stablehlo.constant dense<0.0> : tensor<f32>
    %0 = stablehlo.reduce(%a init: %c) applies stablehlo.add across dimensions = [0] : (tensor<16x8xf32>, tensor<f32>) -> tensor<8xf32>
    return %0 : tensor<8xf32>
  }
}
"#;
    let mut module = parse_and_verify(text).unwrap();
    propagate_module(&mut module, Strategy::default()).unwrap();
    let p = partition(&module).unwrap();
    let names = |m: &shardsim::ir::Module| -> Vec<String> {
        m.funcs.iter().map(|f| f.name.clone()).collect()
    };
    assert_eq!(names(&p.module), names(&module));
    assert_eq!(p.module.funcs[0], module.funcs[0]);
    assert_eq!(
        (&p.module.name, p.module.wrapped, &p.module.attrs),
        (&module.name, module.wrapped, &module.attrs)
    );
    assert_eq!(p.module.meshes, module.meshes);
    assert_eq!(p.module.mesh_attrs, module.mesh_attrs);
    // The entry is the partitioned one: the reduction over the sharded
    // dimension gained its combining all-reduce.
    assert_eq!(p.collectives().filter(|c| c.kind.moves_data()).count(), 1);
    assert_eq!(p.module.entry().unwrap().name, "main");
}
