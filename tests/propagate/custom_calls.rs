//! The custom-call targets whose sharding rules come from Shardy's registry
//! (`ir::attrs::POINTWISE_CUSTOM_CALLS`, `RULED_CUSTOM_CALLS`) and the
//! linear-algebra ops: types a rule or StableHLO cannot take are located
//! verifier errors (`tests/fixtures/shardy_lit/custom_calls_bad.mlir`,
//! `linalg_bad.mlir`), the x64 emulation
//! ops and `mhlo.erf` compute their closed forms in the interpreter, and the
//! targets shardsim has no kernel for are refused there with their name.

use proptest::prelude::*;
use shardsim::ir::interp::interpret;
use shardsim::ir::mlir::parse_and_verify;
use shardsim::tensor::{Data, Tensor};

#[test]
fn registry_custom_calls_refuse_types_their_rule_cannot_describe() {
    check_bad_programs("custom_calls_bad.mlir", 10);
}

#[test]
fn linalg_ops_refuse_types_stablehlo_refuses() {
    check_bad_programs("linalg_bad.mlir", 8);
}

/// Each `// -----` piece of the fixture fails with its `// error:` line.
pub(super) fn check_bad_programs(file: &str, pieces_in_file: usize) {
    let path = crate::common::fixture("shardy_lit").join(file);
    let text = std::fs::read_to_string(path).unwrap();
    let pieces: Vec<&str> = text.split("\n// -----\n").collect();
    assert_eq!(pieces.len(), pieces_in_file);
    for piece in pieces {
        let want = piece
            .lines()
            .find_map(|l| l.strip_prefix("// error: "))
            .expect("each piece states its error");
        // The program starts at its `func.func` line (line 1), as a file would.
        let program = &piece[piece.find("\nfunc.func").unwrap() + 1..];
        let program = format!("sdy.mesh @m = <[\"x\"=2]>\n{program}");
        let Err(e) = parse_and_verify(&program) else {
            panic!("accepted:\n{program}");
        };
        let got = e.to_string();
        assert!(got.contains(want), "got:  {got}\nwant: {want}");
        assert_eq!(got.lines().count(), 1, "{got}");
    }
}

fn run(text: &str, inputs: &[Tensor]) -> Result<Vec<Tensor>, String> {
    let m = parse_and_verify(text).map_err(|e| e.to_string())?;
    interpret(&m, inputs).map_err(|e| e.to_string())
}

const X64: &str = r#"func.func @main(%x: tensor<NxPRE64>) -> (tensor<Nxui32>, tensor<Nxui32>, tensor<NxPRE64>) {
  %lo = stablehlo.custom_call @X64SplitLow(%x) {backend_config = ""} : (tensor<NxPRE64>) -> tensor<Nxui32>
  %hi = stablehlo.custom_call @X64SplitHigh(%x) {backend_config = ""} : (tensor<NxPRE64>) -> tensor<Nxui32>
  %c = stablehlo.custom_call @X64Combine(%lo, %hi) {backend_config = ""} : (tensor<Nxui32>, tensor<Nxui32>) -> tensor<NxPRE64>
  return %lo, %hi, %c : tensor<Nxui32>, tensor<Nxui32>, tensor<NxPRE64>
}
"#;

proptest! {
    /// XLA's x64 emulation: the low and high 32 bits of each element, and
    /// `X64Combine(low, high)` gives the element back (unsigned and signed).
    #[test]
    fn x64_split_and_combine_are_exact(xs in prop::collection::vec(any::<u64>(), 1..9), signed in any::<bool>()) {
        let n = xs.len();
        let pre = if signed { "i" } else { "ui" };
        let text = X64.replace("PRE", pre).replace("Nx", &format!("{n}x"));
        let input = if signed {
            Tensor::new(vec![n as u64], Data::I64(xs.iter().map(|&x| x as i64).collect())).unwrap()
        } else {
            Tensor::new(vec![n as u64], Data::UI64(xs.clone())).unwrap()
        };
        let outs = run(&text, std::slice::from_ref(&input)).unwrap();
        let lo: Vec<i128> = xs.iter().map(|&x| (x & 0xffff_ffff) as i128).collect();
        let hi: Vec<i128> = xs.iter().map(|&x| (x >> 32) as i128).collect();
        prop_assert_eq!(outs[0].data().to_i128_vec().unwrap(), lo);
        prop_assert_eq!(outs[1].data().to_i128_vec().unwrap(), hi);
        prop_assert_eq!(outs[2].data(), input.data());
    }
}

#[test]
fn erf_custom_call_is_erf() {
    let text = r#"func.func @main(%x: tensor<4xf64>) -> tensor<4xf64> {
  %e = stablehlo.custom_call @mhlo.erf(%x) {backend_config = ""} : (tensor<4xf64>) -> tensor<4xf64>
  return %e : tensor<4xf64>
}
"#;
    let x = Tensor::new(vec![4], Data::F64(vec![0.0, 1.0, -0.5, 2.0])).unwrap();
    let got = run(text, &[x]).unwrap()[0].to_f64_vec();
    // erf from Abramowitz and Stegun's tables (10 digits).
    let want = [0.0, 0.842_700_792_9, -0.520_499_877_8, 0.995_322_265_0];
    for (g, w) in got.iter().zip(want) {
        assert!((g - w).abs() < 1e-9, "{got:?} vs {want:?}");
    }
}

#[test]
fn custom_calls_without_a_kernel_are_refused_by_name() {
    let text = r#"func.func @main(%a: tensor<2x3x3xf32>) -> tensor<2x3xf32> {
  %e:2 = stablehlo.custom_call @Eigh(%a) : (tensor<2x3x3xf32>) -> (tensor<2x3x3xf32>, tensor<2x3xf32>)
  return %e#1 : tensor<2x3xf32>
}
"#;
    let a = Tensor::new(vec![2, 3, 3], Data::F32(vec![1.0; 18])).unwrap();
    let e = run(text, &[a]).unwrap_err();
    assert!(e.contains("custom_call @Eigh has no kernel"), "{e}");
    // An identity marker keeps its operand.
    let text = r#"func.func @main(%a: tensor<3xf32>) -> tensor<3xf32> {
  %i = stablehlo.custom_call @InspectSharding(%a) : (tensor<3xf32>) -> tensor<3xf32>
  return %i : tensor<3xf32>
}
"#;
    let a = Tensor::new(vec![3], Data::F32(vec![1.5, -2.0, 7.0])).unwrap();
    assert_eq!(run(text, std::slice::from_ref(&a)).unwrap()[0], a);
}
