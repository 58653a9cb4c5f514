//! `!stablehlo.token`: a rank-0, zero-byte value that orders side effects.
//! It parses and prints back, is refused by every op that does not pass
//! values on (`tests/fixtures/shardy_lit/tokens_bad.mlir`, one-line located
//! errors), flows through calls, control flow and manual computations in the
//! interpreter, is never given a sharding by propagation (the lit cases are
//! in `lit.rs`), and is partitioned and run on virtual devices without a
//! byte moved for it.

use proptest::prelude::*;
use shardsim::base::{DType, TensorType};
use shardsim::ir::interp::interpret;
use shardsim::ir::mlir::{parse_and_verify, print_module};
use shardsim::propagate::{propagate_module, Strategy};
use shardsim::tensor::{Data, Tensor};

#[test]
fn token_misuse_gives_one_located_line() {
    super::custom_calls::check_bad_programs("tokens_bad.mlir", 7);
}

/// A token threaded through a call, a while loop (3 trips), a case and a
/// manual computation beside data that each of them changes.
const PROGRAM: &str = r#"module @tokens attributes {mhlo.num_partitions = 4 : i32} {
  sdy.mesh @pq = <["p"=2, "q"=2]>
  func.func private @twice(%t: !stablehlo.token, %x: tensor<8x4xf32>) -> (!stablehlo.token, tensor<8x4xf32>) {
    %y = stablehlo.add %x, %x : tensor<8x4xf32>
    return %t, %y : !stablehlo.token, tensor<8x4xf32>
  }
  func.func @main(%t: !stablehlo.token, %a: tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@pq, [{"p"}, {"q"}]>}, %sel: tensor<i32>) -> (!stablehlo.token, tensor<8x4xf32>) {
    %c:2 = call @twice(%t, %a) : (!stablehlo.token, tensor<8x4xf32>) -> (!stablehlo.token, tensor<8x4xf32>)
    %zero = stablehlo.constant dense<0> : tensor<i32>
    %one = stablehlo.constant dense<1> : tensor<i32>
    %three = stablehlo.constant dense<3> : tensor<i32>
    %w:3 = stablehlo.while(%tok = %c#0, %acc = %c#1, %i = %zero) : !stablehlo.token, tensor<8x4xf32>, tensor<i32>
    cond {
      %lt = stablehlo.compare LT, %i, %three : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %lt : tensor<i1>
    } do {
      %next = stablehlo.add %i, %one : tensor<i32>
      %inc = stablehlo.add %acc, %acc : tensor<8x4xf32>
      %bar = stablehlo.optimization_barrier %tok : !stablehlo.token
      stablehlo.return %bar, %inc, %next : !stablehlo.token, tensor<8x4xf32>, tensor<i32>
    }
    %k:2 = "stablehlo.case"(%sel) ({
      stablehlo.return %w#0, %w#1 : !stablehlo.token, tensor<8x4xf32>
    }, {
      %neg = stablehlo.negate %w#1 : tensor<8x4xf32>
      stablehlo.return %t, %neg : !stablehlo.token, tensor<8x4xf32>
    }) : (tensor<i32>) -> (!stablehlo.token, tensor<8x4xf32>)
    %m:2 = sdy.manual_computation(%k#0, %k#1) in_shardings=[<@pq, []>, <@pq, [{"p"}, {}]>] out_shardings=[<@pq, []>, <@pq, [{"p"}, {}]>] manual_axes={"p"} (%lt: !stablehlo.token, %l: tensor<4x4xf32>) {
      %b = stablehlo.optimization_barrier %lt : !stablehlo.token
      %onef = stablehlo.constant dense<1.000000e+00> : tensor<4x4xf32>
      %s = stablehlo.subtract %l, %onef : tensor<4x4xf32>
      sdy.return %b, %s : !stablehlo.token, tensor<4x4xf32>
    } : (!stablehlo.token, tensor<8x4xf32>) -> (!stablehlo.token, tensor<8x4xf32>)
    return %m#0, %m#1 : !stablehlo.token, tensor<8x4xf32>
  }
}
"#;

fn program() -> String {
    PROGRAM.to_string()
}

/// [`PROGRAM`] with its tokens taken out (the same data flow).
const TOKENLESS: &str = r#"module @tokens attributes {mhlo.num_partitions = 4 : i32} {
  sdy.mesh @pq = <["p"=2, "q"=2]>
  func.func private @twice(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
    %y = stablehlo.add %x, %x : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
  func.func @main(%a: tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@pq, [{"p"}, {"q"}]>}, %sel: tensor<i32>) -> tensor<8x4xf32> {
    %c = call @twice(%a) : (tensor<8x4xf32>) -> tensor<8x4xf32>
    %zero = stablehlo.constant dense<0> : tensor<i32>
    %one = stablehlo.constant dense<1> : tensor<i32>
    %three = stablehlo.constant dense<3> : tensor<i32>
    %w:2 = stablehlo.while(%acc = %c, %i = %zero) : tensor<8x4xf32>, tensor<i32>
    cond {
      %lt = stablehlo.compare LT, %i, %three : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %lt : tensor<i1>
    } do {
      %next = stablehlo.add %i, %one : tensor<i32>
      %inc = stablehlo.add %acc, %acc : tensor<8x4xf32>
      stablehlo.return %inc, %next : tensor<8x4xf32>, tensor<i32>
    }
    %k = "stablehlo.case"(%sel) ({
      stablehlo.return %w#0 : tensor<8x4xf32>
    }, {
      %neg = stablehlo.negate %w#0 : tensor<8x4xf32>
      stablehlo.return %neg : tensor<8x4xf32>
    }) : (tensor<i32>) -> tensor<8x4xf32>
    %m = sdy.manual_computation(%k) in_shardings=[<@pq, [{"p"}, {}]>] out_shardings=[<@pq, [{"p"}, {}]>] manual_axes={"p"} (%l: tensor<4x4xf32>) {
      %onef = stablehlo.constant dense<1.000000e+00> : tensor<4x4xf32>
      %s = stablehlo.subtract %l, %onef : tensor<4x4xf32>
      sdy.return %s : tensor<4x4xf32>
    } : (tensor<8x4xf32>) -> tensor<8x4xf32>
    return %m : tensor<8x4xf32>
  }
}
"#;

fn a() -> Tensor {
    Tensor::new(vec![8, 4], Data::F32((0..32).map(|i| i as f32).collect())).unwrap()
}

#[test]
fn token_program_prints_back_byte_for_byte() {
    let text = program();
    let m = parse_and_verify(&text).unwrap();
    assert_eq!(print_module(&m), text);
    let f = m.entry().unwrap();
    assert_eq!(f.arg_types()[0], TensorType::token());
    assert_eq!(f.arg_types()[0].size_bytes(), 0);
}

#[test]
fn interpreter_threads_tokens_through_calls_loops_branches_and_shard_maps() {
    let m = parse_and_verify(&program()).unwrap();
    for (sel, sign) in [(0, 1.0), (1, -1.0)] {
        // Inputs leave the token argument out: it holds no data.
        let outs = interpret(
            &m,
            &[a(), Tensor::scalar(shardsim::tensor::Scalar::I32(sel))],
        )
        .unwrap();
        assert_eq!(outs[0].dtype(), DType::Token);
        assert_eq!(outs[0].shape(), &[] as &[u64]);
        // call doubles, the loop doubles 3 times: 16 a, then maybe negated, minus 1.
        let want: Vec<f64> = (0..32).map(|i| sign * 16.0 * i as f64 - 1.0).collect();
        let got: Vec<f64> = outs[1].data().to_f64_vec();
        assert_eq!(got, want, "selector {sel}");
    }
}

#[test]
fn propagation_never_shards_a_token() {
    let mut m = parse_and_verify(&program()).unwrap();
    propagate_module(&mut m, Strategy::UserPriority).unwrap();
    let f = m.entry().unwrap();
    for v in f.values.iter().filter(|v| v.ty.is_token()) {
        assert!(v.sharding.is_none(), "{} got {:?}", v.name, v.sharding);
    }
    assert!(f.result_shardings[0].is_none());
    assert!(f.result_shardings[1].is_some());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, failure_persistence: None, ..ProptestConfig::default() })]

    /// Mutated token programs (bytes replaced, removed or repeated) give an
    /// error or a module, never a panic; what parses propagates and runs.
    #[test]
    fn mutated_token_programs_never_panic(edits in prop::collection::vec((any::<prop::sample::Index>(), 0u8..3, any::<u8>()), 1..6)) {
        let mut b = program().into_bytes();
        for (at, how, byte) in edits {
            let i = at.index(b.len());
            match how {
                0 => b[i] = byte,
                1 => { b.remove(i); }
                _ => { let x = b[i]; b.insert(i, x); }
            }
        }
        let text = String::from_utf8_lossy(&b);
        if let Ok(mut m) = parse_and_verify(&text) {
            let _ = interpret(&m, &[a(), Tensor::scalar(shardsim::tensor::Scalar::I32(0))]);
            let _ = propagate_module(&mut m, Strategy::UserPriority);
        }
    }
}

#[test]
fn partitioned_token_program_matches_the_interpreter_and_moves_no_token_bytes() {
    let m = parse_and_verify(&program()).unwrap();
    for sel in [0, 1] {
        let sel = Tensor::scalar(shardsim::tensor::Scalar::I32(sel));
        let reference = interpret(&m, &[a(), sel.clone()]).unwrap();
        let mut pm = m.clone();
        propagate_module(&mut pm, Strategy::UserPriority).unwrap();
        let pm = shardsim::ir::inline::inline_calls(&pm).unwrap();
        let program = shardsim::partition::partition(&pm).unwrap();
        // Every token lives on every device in zero bytes.
        for v in program.values.iter().filter(|v| v.global.is_token()) {
            assert_eq!(v.local_bytes(), 0);
        }
        let outs = shardsim::exec::execute(&program, &[Tensor::token(), a(), sel]).unwrap();
        assert_eq!(outs[0].dtype(), DType::Token);
        assert_eq!(outs[1], reference[1]);
    }
    // Only the data moves: the same program without its tokens moves as many bytes.
    let untokened = parse_and_verify(TOKENLESS).unwrap();
    let bytes = |m: &shardsim::ir::Module| {
        let mut m = m.clone();
        propagate_module(&mut m, Strategy::UserPriority).unwrap();
        let m = shardsim::ir::inline::inline_calls(&m).unwrap();
        shardsim::partition::partition(&m)
            .unwrap()
            .total_collective_bytes()
    };
    assert_eq!(bytes(&m), bytes(&untokened));
}

/// As a user runs it: `interp` and `exec` take a token program's inputs
/// without its token arguments, and write no file for a token result
/// (`out0` is skipped, `out1` is result 1), and a missing input file is
/// named once, with the reason once.
#[test]
fn cli_runs_a_token_program_leaving_tokens_out_of_inputs_and_outputs() {
    use crate::common::shardsim;
    use shardsim::tensor::npy;
    let dir = std::env::temp_dir().join(format!("shardsim-tokens-cli-{}", std::process::id()));
    std::fs::remove_dir_all(&dir).ok();
    std::fs::create_dir_all(&dir).unwrap();
    let program = dir.join("t.mlir");
    std::fs::write(
        &program,
        "module @m {\n  sdy.mesh @pq = <[\"p\"=2, \"q\"=2]>\n  func.func @main(%t: !stablehlo.token, %x: tensor<8xf32> {sdy.sharding = #sdy.sharding<@pq, [{\"q\"}]>}) -> (!stablehlo.token, tensor<8xf32>) {\n    %y = stablehlo.add %x, %x : tensor<8xf32>\n    return %t, %y : !stablehlo.token, tensor<8xf32>\n  }\n}\n",
    )
    .unwrap();
    let x: Vec<f32> = (0..8).map(|i| i as f32 - 3.5).collect();
    let input = dir.join("x.npy");
    npy::write_npy(&input, &Tensor::new(vec![8], Data::F32(x.clone())).unwrap()).unwrap();
    let doubled: Vec<f32> = x.iter().map(|v| v + v).collect();
    for cmd in ["interp", "exec"] {
        let out_dir = dir.join(cmd);
        let o = shardsim(&[
            cmd,
            program.to_str().unwrap(),
            "--inputs",
            input.to_str().unwrap(),
            "--out",
            out_dir.to_str().unwrap(),
        ]);
        assert!(
            o.status.success(),
            "{cmd}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(!out_dir.join("out0.npy").exists(), "{cmd} wrote a token");
        let y = npy::read_npy(&out_dir.join("out1.npy")).unwrap();
        assert_eq!(y.data(), &Data::F32(doubled.clone()), "{cmd}");
    }
    let missing = dir.join("missing.npy");
    let o = shardsim(&[
        "interp",
        program.to_str().unwrap(),
        "--inputs",
        missing.to_str().unwrap(),
        "--out",
        dir.join("m").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.matches("missing.npy").count(), 1, "{err}");
    assert_eq!(err.matches("os error 2").count(), 1, "{err}");
    std::fs::remove_dir_all(&dir).ok();
}

const SEND_RECV: &str = include_str!("../fixtures/shardy_lit/send_after_all.mlir");

/// `after_all`, `send` and `recv` (StableHLO's token ops): they print back
/// byte for byte (Shardy's generic form for send/recv), never get a
/// sharding from propagation, and the verifier's channel and operand rules
/// are located one-line errors (`send_recv_bad.mlir`). The interpreter's
/// choice: a send only passes its token on (what it hands to its channel
/// leaves the program; no result depends on it), and a recv, whose value
/// comes from outside the program, is refused by name. A program with a
/// send partitions and runs on 4 devices as the interpreter computes it.
#[test]
fn after_all_send_and_recv_print_back_verify_and_run() {
    let m = parse_and_verify(SEND_RECV).unwrap();
    assert_eq!(shardsim::ir::mlir::print_module(&m), SEND_RECV);
    let a = Tensor::new(
        vec![8, 4],
        shardsim::tensor::Data::F32((0..32).map(|i| i as f32).collect()),
    )
    .unwrap();
    let reference = interpret(&m, &[a.clone(), Tensor::token()]).unwrap();
    assert_eq!(
        reference[0].to_f64_vec(),
        (0..32).map(|i| -(i as f64)).collect::<Vec<_>>()
    );
    assert_eq!(reference[1].dtype(), DType::Token);
    let mut pm = m.clone();
    propagate_module(&mut pm, Strategy::UserPriority).unwrap();
    for v in pm.funcs[0].values.iter().filter(|v| v.ty.is_token()) {
        assert!(v.sharding.is_none(), "{} got a sharding", v.name);
    }
    let program = shardsim::partition::partition(&pm).unwrap();
    let outs = shardsim::exec::execute(&program, &[a, Tensor::token()]).unwrap();
    assert_eq!(outs[0], reference[0]);
    super::custom_calls::check_bad_programs("send_recv_bad.mlir", 6);
    let recv = "func.func @main(%t: !stablehlo.token) -> tensor<2xi32> {\n  %r:2 = \"stablehlo.recv\"(%t) <{channel_handle = #stablehlo.channel_handle<handle = 5, type = 3>, is_host_transfer = true}> : (!stablehlo.token) -> (tensor<2xi32>, !stablehlo.token)\n  return %r#0 : tensor<2xi32>\n}\n";
    let m = parse_and_verify(recv).unwrap();
    assert_eq!(shardsim::ir::mlir::print_module(&m), recv);
    let e = interpret(&m, &[Tensor::token()]).unwrap_err().to_string();
    assert!(
        e.contains("stablehlo.recv") && e.contains("channel 5") && e.contains("2:3"),
        "{e}"
    );
}
