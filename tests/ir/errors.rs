//! Bad programs: the verifier rejects each with an error naming the op and its
//! line:col; malformed texts fail with `line:col: expected X, found Y`.

use shardsim::ir::mlir::parse_and_verify;

const HEAD: &str = "sdy.mesh @mesh = <[\"x\"=2, \"y\"=4]>\nfunc.func @main(%arg0: tensor<8x16xf32>, %arg1: tensor<16x4xf32>, %arg2: tensor<i32>) -> tensor<8x16xf32> {\n";

/// A module whose line 3 is `line`, followed by `return %arg0`.
fn program(line: &str) -> String {
    format!("{HEAD}  {line}\n  return %arg0 : tensor<8x16xf32>\n}}\n")
}

/// (op on line 3, expected substring of the error). Each error is a verifier error at 3:3.
const BAD_PROGRAMS: &[(&str, &str)] = &[
    ("%0 = stablehlo.add %arg0, %arg1 : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x16xf32>", "3:3: 'stablehlo.add' op operands must have the same type"),
    ("%0 = stablehlo.add %arg0, %arg0 : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x4xf32>", "3:3: 'stablehlo.add' op result type (tensor<8x4xf32>) differs from the inferred type (tensor<8x16xf32>)"),
    ("%0 = stablehlo.transpose %arg0, dims = [0, 0] : (tensor<8x16xf32>) -> tensor<8x8xf32>", "3:3: 'stablehlo.transpose' op permutation entry 0 appears twice"),
    ("%0 = stablehlo.transpose %arg0, dims = [0] : (tensor<8x16xf32>) -> tensor<8xf32>", "permutation has 1 entries for rank 2"),
    ("%0 = stablehlo.broadcast_in_dim %arg0, dims = [0, 2] : (tensor<8x16xf32>) -> tensor<8x16xf32>", "3:3: 'stablehlo.broadcast_in_dim' op broadcast dimension 2 is out of range for rank 2"),
    ("%0 = stablehlo.broadcast_in_dim %arg0, dims = [0, 1] : (tensor<8x16xf32>) -> tensor<8x32xf32>", "operand dim 1 (size 16) cannot broadcast to result dim 1 (size 32)"),
    ("%0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [0] x [0] : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<16x4xf32>", "3:3: 'stablehlo.dot_general' op lhs dim 0 (size 8) and rhs dim 0 (size 16) must match"),
    ("%0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x16xf32>", "result type (tensor<8x16xf32>) differs from the inferred type (tensor<8x4xf32>)"),
    ("%0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [2] x [0] : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>", "lhs dimension 2 is out of range for rank 2"),
    ("%0 = stablehlo.dot %arg1, %arg0 : (tensor<16x4xf32>, tensor<8x16xf32>) -> tensor<16x16xf32>", "3:3: 'stablehlo.dot' op cannot multiply tensor<16x4xf32> by tensor<8x16xf32>"),
    ("%0 = stablehlo.reshape %arg0 : (tensor<8x16xf32>) -> tensor<8x8xf32>", "3:3: 'stablehlo.reshape' op cannot reshape tensor<8x16xf32> into tensor<8x8xf32>"),
    ("%0 = stablehlo.slice %arg0 [0:9, 0:16] : (tensor<8x16xf32>) -> tensor<9x16xf32>", "3:3: 'stablehlo.slice' op dim 0: slice 0:9:1 is out of bounds for size 8"),
    ("%0 = stablehlo.slice %arg0 [0:8:0, 0:16] : (tensor<8x16xf32>) -> tensor<8x16xf32>", "out of bounds"),
    ("%0 = stablehlo.concatenate %arg0, %arg1, dim = 0 : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<24x16xf32>", "3:3: 'stablehlo.concatenate' op operand tensor<16x4xf32> differs from tensor<8x16xf32> outside dimension 0"),
    ("%0 = stablehlo.concatenate %arg0, %arg0, dim = 2 : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>", "dimension 2 is out of range for rank 2"),
    ("%0 = stablehlo.pad %arg0, %arg2, low = [0, 0], high = [0, 0], interior = [0, 0] : (tensor<8x16xf32>, tensor<i32>) -> tensor<8x16xf32>", "3:3: 'stablehlo.pad' op padding value must be a scalar of f32"),
    ("%0 = stablehlo.reverse %arg0, dims = [3] : tensor<8x16xf32>", "3:3: 'stablehlo.reverse' op reverse dimension 3 is out of range for rank 2"),
    ("%0 = stablehlo.iota dim = 2 : tensor<8x16xf32>", "3:3: 'stablehlo.iota' op iota dimension 2 is out of range"),
    ("%0 = stablehlo.compare  LT, %arg0, %arg1,  FLOAT : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x16xi1>", "3:3: 'stablehlo.compare' op operands must have the same type"),
    ("%0 = stablehlo.select %arg0, %arg0, %arg0 : (tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>", "3:3: 'stablehlo.select' op predicate must be i1"),
    ("%0 = stablehlo.dynamic_slice %arg0, %arg2, sizes = [4, 4] : (tensor<8x16xf32>, tensor<i32>) -> tensor<4x4xf32>", "3:3: 'stablehlo.dynamic_slice' op takes 3 operand(s), found 2"),
    ("%0 = stablehlo.dynamic_slice %arg0, %arg2, %arg2, sizes = [9, 4] : (tensor<8x16xf32>, tensor<i32>, tensor<i32>) -> tensor<9x4xf32>", "dim 0: slice size 9 exceeds the dimension size 8"),
    ("%0 = stablehlo.sqrt %arg2 : tensor<i32>", "3:3: 'stablehlo.sqrt' op needs a floating-point operand"),
    ("%0 = stablehlo.constant dense<[1.0, 2.0, 3.0]> : tensor<2xf32>", "3:3: 'stablehlo.constant' op has 3 elements but its type tensor<2xf32> holds 2"),
    ("%0 = sdy.reshard %arg0 <@mesh, [{\"x\"}]> : tensor<8x16xf32>", "3:3: 'sdy.reshard' op sharding <@mesh, [{\"x\"}]> has rank 1 but the tensor tensor<8x16xf32> has rank 2"),
    ("%0 = stablehlo.add %arg0, %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{\"x\"}]>]>} : tensor<8x16xf32>", "3:3: 'stablehlo.add' op result %0: sharding"),
    ("%0 = stablehlo.add %arg0, %arg0 {sdy.sharding_rule = #sdy.op_sharding_rule<([i, j], [i, j])->([i, j]) {i=8, j=8}>} : tensor<8x16xf32>", "3:3: 'stablehlo.add' op sdy.sharding_rule: operand #0 dim 1: factors multiply to 8, the dim has size 16"),
    ("%0 = stablehlo.add %arg0, %arg0 {sdy.sharding_rule = #sdy.op_sharding_rule<([i, j])->([i, j]) {i=8, j=16}>} : tensor<8x16xf32>", "maps 1 operands and 1 results, the op has 2 and 1"),
    ("%0 = sdy.all_gather [{\"z\"}, {}] %arg0 out_sharding=<@mesh, [{}, {}]> : tensor<8x16xf32>", "3:3: 'sdy.all_gather' op axis \"z\""),
    ("%0 = sdy.all_to_all [{\"x\"}: 0->0] %arg0 out_sharding=<@mesh, [{}, {}]> : tensor<8x16xf32>", "3:3: 'sdy.all_to_all' op all_to_all dims 0->0 are invalid"),
    ("%0 = func.call @nowhere(%arg0) : (tensor<8x16xf32>) -> tensor<8x16xf32>", "3:3: 'func.call' op calls @nowhere, which the module does not define"),
    ("%0 = stablehlo.clamp %arg1, %arg0, %arg0 : (tensor<16x4xf32>, tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>", "3:3: 'stablehlo.clamp' op bound #0"),
];

#[test]
fn verifier_rejects_bad_programs_with_op_and_location() {
    for (line, want) in BAD_PROGRAMS {
        let text = program(line);
        match parse_and_verify(&text) {
            Ok(_) => panic!("accepted: {line}"),
            Err(e) => {
                let msg = e.to_string();
                assert!(
                    msg.contains(want),
                    "for {line}\n  got:  {msg}\n  want: {want}"
                );
                assert_eq!(e.line_col(), (3, 3), "{msg}");
            }
        }
    }
}

#[test]
fn verifier_checks_function_and_region_structure() {
    let cases: &[(&str, &str)] = &[
        (
            "func.func @main(%arg0: tensor<4xf32>) -> tensor<4xi32> {\n  return %arg0 : tensor<4xf32>\n}\n",
            "2:3: 'func.return' op returns (tensor<4xf32>) but @main declares (tensor<4xi32>)",
        ),
        (
            "func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {\n  %0 = stablehlo.abs %arg0 : tensor<4xf32>\n}\n",
            "2:3: 'stablehlo.abs' op is last in @main but a function must end with return",
        ),
        (
            "func.func @main(%arg0: tensor<4xf32>) -> tensor<f32> {\n  %cst = stablehlo.constant dense<0.0> : tensor<f32>\n  %0 = stablehlo.reduce(%arg0 init: %cst) across dimensions = [0] : (tensor<4xf32>, tensor<f32>) -> tensor<f32>\n   reducer(%a: tensor<f32>, %b: tensor<f32>)  {\n    %1 = stablehlo.add %a, %b : tensor<f32>\n    stablehlo.return %1, %1 : tensor<f32>, tensor<f32>\n  }\n  return %0 : tensor<f32>\n}\n",
            "6:5: 'stablehlo.return' op returns (tensor<f32>, tensor<f32>) but the enclosing op expects (tensor<f32>)",
        ),
        (
            "func.func @main(%arg0: tensor<4xf32>) -> tensor<i32> {\n  %cst = stablehlo.constant dense<0> : tensor<i32>\n  %0 = stablehlo.reduce(%arg0 init: %cst) applies stablehlo.add across dimensions = [0] : (tensor<4xf32>, tensor<i32>) -> tensor<i32>\n  return %0 : tensor<i32>\n}\n",
            "3:3: 'stablehlo.reduce' op init value tensor<i32> must be a scalar of f32",
        ),
        (
            "sdy.mesh @mesh = <[\"x\"=2]>\nfunc.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {\n  %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{\"x\"}]>] out_shardings=[<@mesh, [{\"x\"}]>] manual_axes={\"x\"} (%arg1: tensor<4xf32>) {\n    sdy.return %arg1 : tensor<4xf32>\n  } : (tensor<4xf32>) -> tensor<4xf32>\n  return %0 : tensor<4xf32>\n}\n",
            "3:3: 'sdy.manual_computation' op block argument #0 has type tensor<4xf32> but the local shape of operand #0 is tensor<2xf32>",
        ),
        (
            "func.func @f(%arg0: tensor<4xf32>) -> tensor<4xf32> {\n  return %arg0 : tensor<4xf32>\n}\nfunc.func @main(%arg0: tensor<2xf32>) -> tensor<4xf32> {\n  %0 = call @f(%arg0) : (tensor<2xf32>) -> tensor<4xf32>\n  return %0 : tensor<4xf32>\n}\n",
            "5:3: 'func.call' op type (tensor<2xf32>) -> (tensor<4xf32>) does not match @f: (tensor<4xf32>) -> (tensor<4xf32>)",
        ),
        (
            "func.func @main(%arg0: tensor<4xf32> {sdy.sharding = #sdy.sharding<mesh<[\"x\"=2]>, [{\"x\"}, {}]>}) -> tensor<4xf32> {\n  return %arg0 : tensor<4xf32>\n}\n",
            "1:1: 'func.func' op @main: argument %arg0: sharding",
        ),
    ];
    for (text, want) in cases {
        let msg = parse_and_verify(text)
            .map(|_| String::from("accepted"))
            .unwrap_or_else(|e| e.to_string());
        assert!(
            msg.contains(want),
            "\n  got:  {msg}\n  want: {want}\n{text}"
        );
    }
}

/// Malformed texts: (text, expected `line:col: expected ..., found ...` substring).
const MALFORMED: &[(&str, &str)] = &[
    ("module @m attributes {a = } {\n}\n", "1:27: expected an attribute value, found '}'"),
    ("module @m {\n", "2:1: expected 'sdy.mesh', 'func.func' or '}', found end of input"),
    ("module @m {\n  foo.bar\n}\n", "2:3: expected 'sdy.mesh', 'func.func' or '}', found 'foo.bar'"),
    ("func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {\n  %0 = stablehlo.reduce_precision %arg0 : (tensor<4xf32>) -> tensor<4xf32>\n  return %0 : tensor<4xf32>\n}\n", "2:8: expected a known op (stablehlo.*, chlo.square, sdy.*, func.call, return), found unknown op 'stablehlo.reduce_precision'"),
    ("func.func @main(%arg0: tensor<4xcomplex<f32>>) -> tensor<4xcomplex<f32>> {\n  %0 = stablehlo.fft %arg0 : (tensor<4xcomplex<f32>>) -> tensor<4xcomplex<f32>>\n  return %0 : tensor<4xcomplex<f32>>\n}\n", "2:28: expected ',', found ':'"),
    ("func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {\n  %0 = stablehlo.custom_call @foo(%arg0) : (tensor<4xf32>) -> tensor<4xf32>\n  return %0 : tensor<4xf32>\n}\n", "2:3: 'stablehlo.custom_call' op custom_call target @foo is not supported"),
    ("func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {\n  %0 = \"stablehlo.reduce_precision\"(%arg0) : (tensor<4xf32>) -> tensor<4xf32>\n  return %0 : tensor<4xf32>\n}\n", "2:8: expected a known op in generic form (stablehlo.*, func.call, return), found unknown op \"stablehlo.reduce_precision\""),
    ("func.func @main(%arg0: tensor<4xcomplex<f32>>) -> tensor<4xcomplex<f32>> {\n  %0 = \"stablehlo.fft\"(%arg0) : (tensor<4xcomplex<f32>>) -> tensor<4xcomplex<f32>>\n  return %0 : tensor<4xcomplex<f32>>\n}\n", "2:8: expected attribute 'fft_type', found none"),
    ("func.func @main(%arg0: tensor<4xcomplex<f32>>) -> tensor<4xcomplex<f32>> {\n  %0 = \"stablehlo.fft\"(%arg0) {fft_type = #stablehlo<fft_type DFT>, fft_length = array<i64: 4>} : (tensor<4xcomplex<f32>>) -> tensor<4xcomplex<f32>>\n  return %0 : tensor<4xcomplex<f32>>\n}\n", "2:8: expected #stablehlo<fft_type FFT|IFFT|RFFT|IRFFT>, found #stablehlo<fft_type DFT>"),
    ("func.func @main(%arg0: tensor<4xcomplex<i32>>) -> tensor<4xcomplex<i32>> {\n  return %arg0 : tensor<4xcomplex<i32>>\n}\n", "1:33: expected an element type (f32, f64, bf16, f16, i1, i8, i32, i64, ui8, ui32, ui64, complex<f32>, complex<f64>), found 'complex<i32>'"),
    ("func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {\n  %0 = \"stablehlo.while\"(%arg0) : (tensor<4xf32>) -> tensor<4xf32>\n  return %0 : tensor<4xf32>\n}\n", "2:3: 'stablehlo.while' op needs two regions (cond and body)"),
    ("func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {\n  %0 = stablehlo.while(%iterArg = %arg0) : tensor<4xf32>\n  cond {\n    %c = stablehlo.constant dense<true> : tensor<i1>\n    stablehlo.return %c : tensor<i1>\n  } do {\n    %1 = stablehlo.convert %iterArg : (tensor<4xf32>) -> tensor<4xf16>\n    stablehlo.return %1 : tensor<4xf16>\n  }\n  return %0 : tensor<4xf32>\n}\n", "8:5: 'stablehlo.return' op returns (tensor<4xf16>) but the enclosing op expects (tensor<4xf32>)"),
    ("func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {\n  %0 = stablehlo.while(%iterArg = %arg0) : tensor<4xf32>\n  cond {\n    %c = stablehlo.constant dense<true> : tensor<i1>\n  } do {\n    stablehlo.return %iterArg : tensor<4xf32>\n  }\n  return %0 : tensor<4xf32>\n}\n", "4:5: 'stablehlo.constant' op ends a block that must end with stablehlo.return"),
    ("func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {\n  %0 = stablehlo.while(%iterArg = %arg0) : tensor<4xi32>\n  cond {\n  } do {\n  }\n  return %0 : tensor<4xf32>\n}\n", "2:44: expected loop-carried value #0 of type tensor<4xf32>, found tensor<4xi32>"),
    ("func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {\n  return %arg1 : tensor<4xf32>\n}\n", "2:10: expected a value defined before this use, found undefined value %arg1"),
    ("func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {\n  %0 = stablehlo.abs %arg0 : tensor<4xf32>\n  %0 = stablehlo.abs %arg0 : tensor<4xf32>\n  return %0 : tensor<4xf32>\n}\n", "3:3: expected a fresh value name, found %0 defined twice"),
    ("func.func @main(%arg0: tensor<4xq32>) -> tensor<4xf32> {\n}\n", "1:33: expected an element type"),
    ("func.func @main(%arg0: tensor<?xf32>) -> tensor<4xf32> {\n}\n", "1:31: expected a static dimension (shardsim does not take dynamically shaped tensors), found dynamic dimension '?' (dimension 0 of the type)"),
    ("func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {\n  %0 = stablehlo.abs %arg0 : (tensor<8xf32>) -> tensor<4xf32>\n  return %0 : tensor<4xf32>\n}\n", "2:28: expected operand #0 of type tensor<4xf32>, found tensor<8xf32>"),
    ("func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {\n  %0 = stablehlo.abs %arg0 tensor<4xf32>\n  return %0 : tensor<4xf32>\n}\n", "2:28: expected ':', found 'tensor'"),
    ("func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {\n  %0 = stablehlo.compare XX, %arg0, %arg0 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>\n  return %arg0 : tensor<4xf32>\n}\n", "2:26: expected a comparison direction (EQ, NE, LT, LE, GT, GE), found 'XX'"),
    ("func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {\n  %0 = stablehlo.compare EQ, %arg0, %arg0, WEIRD : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>\n  return %arg0 : tensor<4xf32>\n}\n", "2:44: expected a comparison type"),
    ("func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {\n  %0 = stablehlo.transpose %arg0, perm = [0] : (tensor<4xf32>) -> tensor<4xf32>\n  return %0 : tensor<4xf32>\n}\n", "2:35: expected 'dims', found 'perm'"),
    ("func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {\n  %0 = stablehlo.abs %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@nomesh, [{}]>]>} : tensor<4xf32>\n  return %0 : tensor<4xf32>\n}\n", "2:70: expected a mesh defined by sdy.mesh, found unknown mesh @nomesh"),
    ("sdy.mesh @mesh = <[\"x\"=2]>\nfunc.func @main(%arg0: tensor<4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{\"q\"}]>}) -> tensor<4xf32> {\n  return %arg0 : tensor<4xf32>\n}\n", "2:77: expected a valid sharding, found dim 0: unknown axis \"q\""),
    ("sdy.mesh @mesh = <[\"x\"=2]>\nsdy.mesh @mesh = <[\"y\"=2]>\n", "2:11: expected distinct mesh names, found a second @mesh"),
    ("func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {\n  %0 = stablehlo.abs %arg0 {sdy.sharding_rule = #sdy.op_sharding_rule<([i])->([i]) {j=4}>} : tensor<4xf32>\n  return %0 : tensor<4xf32>\n}\n", "expected a size for factor i, found none"),
    ("func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {\n  %0 = stablehlo.abs %arg0 {sdy.sharding_rule = #sdy.op_sharding_rule<([i])->([I]) {i=4}>} : tensor<4xf32>\n  return %0 : tensor<4xf32>\n}\n", "2:80: expected a factor name (i..z, z_1, ...) or *, found 'I'"),
    ("func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {\n  %0 = stablehlo.abs %arg0 {sdy.sharding_rule = #sdy.op_sharding_rule<([i])->([i]) {i=4} reduction={k}>} : tensor<4xf32>\n  return %0 : tensor<4xf32>\n}\n", "expected a factor with a size, found k"),
    ("func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {\n  %0:2 = stablehlo.abs %arg0 : tensor<4xf32>\n  return %arg0 : tensor<4xf32>\n}\n", "2:10: expected 1 result type(s) for the 2 result(s) named"),
    ("func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {\n  %0 = stablehlo.abs %arg0 {foo = [1, 2} : tensor<4xf32>\n  return %0 : tensor<4xf32>\n}\n", "2:40: expected balanced brackets in an attribute value, found '}'"),
    ("func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {\n  %0 = stablehlo.constant dense<[1.0, 2.0, x]> : tensor<3xf32>\n  return %arg0 : tensor<4xf32>\n}\n", "2:44: expected a number, true, false or a hex literal, found 'x'"),
    ("func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {\n  %0 = stablehlo.constant dense<1.5> : tensor<i32>\n  return %arg0 : tensor<4xf32>\n}\n", "2:27: expected a literal of type i32, found a float literal"),
    ("func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {\n  %0 = sdy.all_gather [{\"x\"] %arg0 out_sharding=<@m, [{}]> : tensor<4xf32>\n  return %arg0 : tensor<4xf32>\n}\n", "2:28: expected ',' or '}' after an axis, found ']'"),
    ("func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {\n  return %arg0 : tensor<4xf32>\n}\n}\n", "4:1: expected 'sdy.mesh', 'func.func' or 'module', found '}'"),
    ("func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {\n  %0 = stablehlo.abs %arg0 : tensor<4xf32> loc(\"x.py\":1\n  return %0 : tensor<4xf32>\n}\n", "2:47: expected ')' closing this '(', found end of input"),
    // A reducer's block argument is out of scope after the reducer.
    ("func.func @main(%arg0: tensor<4xf32>) -> tensor<f32> {\n  %cst = stablehlo.constant dense<0.0> : tensor<f32>\n  %0 = stablehlo.reduce(%arg0 init: %cst) across dimensions = [0] : (tensor<4xf32>, tensor<f32>) -> tensor<f32>\n   reducer(%arg1: tensor<f32>, %arg2: tensor<f32>)  {\n    %1 = stablehlo.add %arg1, %arg2 : tensor<f32>\n    stablehlo.return %1 : tensor<f32>\n  }\n  return %arg1 : tensor<f32>\n}\n", "8:10: expected a value defined before this use, found undefined value %arg1"),
    // `%01` is not `%1`; `%2#2` is out of range for a two-result op.
    ("func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {\n  %1 = stablehlo.abs %arg0 : tensor<4xf32>\n  return %01 : tensor<4xf32>\n}\n", "3:10: expected a value defined before this use, found undefined value %01"),
    ("func.func @main(%arg0: tensor<4xf32>, %arg1: tensor<4xi32>) -> tensor<4xf32> {\n  %2:2 = stablehlo.reduce(%arg0 init: %arg0), (%arg1 init: %arg1) across dimensions = [] : (tensor<4xf32>, tensor<4xi32>, tensor<4xf32>, tensor<4xi32>) -> (tensor<4xf32>, tensor<4xi32>)\n   reducer(%a: tensor<f32>, %b: tensor<f32>) (%c: tensor<i32>, %d: tensor<i32>)  {\n    stablehlo.return %a, %c : tensor<f32>, tensor<i32>\n  }\n  return %2#2 : tensor<4xf32>\n}\n", "6:10: expected a result number in range, found %2#2"),
];

#[test]
fn malformed_texts_give_located_errors() {
    assert!(MALFORMED.len() >= 20);
    let mut bad = Vec::new();
    for (text, want) in MALFORMED {
        let msg = parse_and_verify(text)
            .map(|_| String::from("accepted"))
            .unwrap_or_else(|e| e.to_string());
        if !msg.contains(want) {
            bad.push(format!("  got:  {msg}\n  want: {want}"));
        }
    }
    assert!(bad.is_empty(), "\n{}", bad.join("\n"));
}
