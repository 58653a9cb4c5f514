//! Bad input: shardings that cannot be partitioned and ops the partitioner
//! does not take give an error naming the value or op, never a panic.

use shardsim::ir::mlir::parse_and_verify;
use shardsim::mesh::AxisRef;
use shardsim::partition::{partition, PartitionError};
use shardsim::sharding::TensorSharding;

const PROGRAM: &str = r#"sdy.mesh @mesh = <["x"=2, "y"=4]>
func.func @main(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) -> tensor<8x16xf32> {
  %0 = stablehlo.add %arg0, %arg0 : tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}
"#;

#[test]
fn an_axis_used_twice_names_the_value() {
    let mut module = parse_and_verify(PROGRAM).unwrap();
    let func = &mut module.funcs[0];
    let arg = func.args[0];
    let mut s = TensorSharding::from_axes("mesh", &[&["x"], &[]]);
    s.dims[1].axes.push(AxisRef::full("x"));
    func.value_mut(arg).sharding = Some(s);
    let err = partition(&module).unwrap_err();
    assert!(
        matches!(err, PartitionError::Value { ref value, .. } if value == "%arg0"),
        "{err}"
    );
    assert!(
        err.to_string()
            .starts_with("cannot partition value %arg0: "),
        "{err}"
    );
}

#[test]
fn an_unknown_axis_names_the_value() {
    let mut module = parse_and_verify(PROGRAM).unwrap();
    let func = &mut module.funcs[0];
    let r = func.op(func.body[0]).results[0];
    func.value_mut(r).sharding = Some(TensorSharding::from_axes("mesh", &[&["q"], &[]]));
    let err = partition(&module).unwrap_err().to_string();
    assert!(err.contains("%0") && err.contains("\"q\""), "{err}");
}

#[test]
fn a_rank_mismatch_names_the_value() {
    let mut module = parse_and_verify(PROGRAM).unwrap();
    let func = &mut module.funcs[0];
    let arg = func.args[0];
    func.value_mut(arg).sharding = Some(TensorSharding::from_axes("mesh", &[&["x"]]));
    let err = partition(&module).unwrap_err().to_string();
    assert!(err.starts_with("cannot partition value %arg0"), "{err}");
}

#[test]
fn two_meshes_are_refused() {
    let text = PROGRAM.replace(
        "sdy.mesh @mesh = <[\"x\"=2, \"y\"=4]>",
        "sdy.mesh @mesh = <[\"x\"=2, \"y\"=4]>\nsdy.mesh @other = <[\"x\"=8]>",
    );
    let mut module = parse_and_verify(&text).unwrap();
    let func = &mut module.funcs[0];
    let r = func.op(func.body[0]).results[0];
    func.value_mut(r).sharding = Some(TensorSharding::from_axes("other", &[&["x"], &[]]));
    let err = partition(&module).unwrap_err().to_string();
    assert!(
        err.contains("@mesh") || err.contains("mesh, other"),
        "{err}"
    );
}
