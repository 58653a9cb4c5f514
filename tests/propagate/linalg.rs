//! The linear-algebra ops in the interpreter against their definitions:
//! Cholesky gives back the factor a known lower-triangular `l` was built
//! into (`a = l l^T`), a triangular solve gives back the `x` that made
//! `b = op(a) x` (or `x op(a)`) in each of its 16 forms, and batch
//! normalisation is `(x - mean) / sqrt(var + eps) * scale + offset`;
//! select_and_scatter routes each window's source value to the element the
//! select region picks (a max-pool gradient), worked by hand.

use shardsim::ir::interp::interpret;
use shardsim::ir::mlir::parse_and_verify;
use shardsim::tensor::{Data, Tensor};

fn run(text: &str, inputs: &[Tensor]) -> Vec<f64> {
    let m = parse_and_verify(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    interpret(&m, inputs).unwrap()[0].to_f64_vec()
}

fn t64(shape: &[u64], v: Vec<f64>) -> Tensor {
    Tensor::new(shape.to_vec(), Data::F64(v)).unwrap()
}

fn close(got: &[f64], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (g, w) in got.iter().zip(want) {
        assert!(
            (g - w).abs() < 1e-9 * (1.0 + w.abs()),
            "{what}: got {got:?}\n want {want:?}"
        );
    }
}

const L: [f64; 9] = [2.0, 0.0, 0.0, 1.0, 3.0, 0.0, -1.0, 0.5, 1.5];

fn matmul(a: &[f64], b: &[f64], n: usize, k: usize, m: usize) -> Vec<f64> {
    let mut c = vec![0.0; n * m];
    for i in 0..n {
        for j in 0..m {
            c[i * m + j] = (0..k).map(|p| a[i * k + p] * b[p * m + j]).sum();
        }
    }
    c
}

fn transpose(a: &[f64], n: usize, m: usize) -> Vec<f64> {
    (0..m * n).map(|x| a[(x % n) * m + x / n]).collect()
}

#[test]
fn cholesky_recovers_the_factor() {
    let a = matmul(&L, &transpose(&L, 3, 3), 3, 3, 3);
    for lower in [true, false] {
        let text = format!(
            "func.func @main(%a: tensor<2x3x3xf64>) -> tensor<2x3x3xf64> {{\n  %l = stablehlo.cholesky %a, lower = {lower} : (tensor<2x3x3xf64>) -> tensor<2x3x3xf64>\n  return %l : tensor<2x3x3xf64>\n}}\n"
        );
        // Two batches: a, and 4a (factor 2l).
        let input: Vec<f64> = a.iter().copied().chain(a.iter().map(|x| 4.0 * x)).collect();
        let got = run(&text, &[t64(&[2, 3, 3], input)]);
        let f = if lower {
            L.to_vec()
        } else {
            transpose(&L, 3, 3)
        };
        let want: Vec<f64> = f.iter().copied().chain(f.iter().map(|x| 2.0 * x)).collect();
        close(&got, &want, &format!("lower = {lower}"));
    }
}

#[test]
fn triangular_solve_inverts_each_form() {
    let n = 3;
    // A full matrix: the solve must read only the named triangle.
    let a = [2.0, 7.0, -3.0, 1.0, 3.0, 9.0, -1.0, 0.5, 1.5];
    let m = 2; // the other dim of b
    let x: Vec<f64> = (0..n * m).map(|i| (i as f64) * 0.75 - 1.0).collect();
    for left in [true, false] {
        for lower in [true, false] {
            for unit in [true, false] {
                for tr in ["NO_TRANSPOSE", "TRANSPOSE"] {
                    // The triangle of a the op reads, then op(a).
                    let tri: Vec<f64> = (0..n * n)
                        .map(|p| {
                            let (i, j) = (p / n, p % n);
                            if i == j && unit {
                                1.0
                            } else if i == j || (j < i) == lower {
                                a[p]
                            } else {
                                0.0
                            }
                        })
                        .collect();
                    let op_a = if tr == "NO_TRANSPOSE" {
                        tri
                    } else {
                        transpose(&tri, n, n)
                    };
                    let (bshape, b) = if left {
                        // x is n x m
                        ([n as u64, m as u64], matmul(&op_a, &x, n, n, m))
                    } else {
                        // x is m x n
                        ([m as u64, n as u64], matmul(&x, &op_a, m, n, n))
                    };
                    let bt = format!("tensor<{}x{}xf64>", bshape[0], bshape[1]);
                    let text = format!(
                        "func.func @main(%a: tensor<3x3xf64>, %b: {bt}) -> {bt} {{\n  %x = \"stablehlo.triangular_solve\"(%a, %b) {{left_side = {left}, lower = {lower}, unit_diagonal = {unit}, transpose_a = #stablehlo<transpose {tr}>}} : (tensor<3x3xf64>, {bt}) -> {bt}\n  return %x : {bt}\n}}\n"
                    );
                    let got = run(&text, &[t64(&[3, 3], a.to_vec()), t64(&bshape, b)]);
                    close(
                        &got,
                        &x,
                        &format!("left {left} lower {lower} unit {unit} {tr}"),
                    );
                }
            }
        }
    }
}

#[test]
fn batch_norm_inference_is_its_formula() {
    let text = "func.func @main(%x: tensor<2x3x2xf64>, %s: tensor<3xf64>, %o: tensor<3xf64>, %m: tensor<3xf64>, %v: tensor<3xf64>) -> tensor<2x3x2xf64> {\n  %n = \"stablehlo.batch_norm_inference\"(%x, %s, %o, %m, %v) {epsilon = 2.500000e-01 : f32, feature_index = 1 : i64} : (tensor<2x3x2xf64>, tensor<3xf64>, tensor<3xf64>, tensor<3xf64>, tensor<3xf64>) -> tensor<2x3x2xf64>\n  return %n : tensor<2x3x2xf64>\n}\n";
    let x: Vec<f64> = (0..12).map(|i| i as f64).collect();
    let (s, o, m, v) = (
        [1.0, 2.0, -1.0],
        [0.5, 0.0, 1.0],
        [1.0, 2.0, 3.0],
        [0.75, 3.75, 0.0],
    );
    let got = run(
        text,
        &[
            t64(&[2, 3, 2], x.clone()),
            t64(&[3], s.to_vec()),
            t64(&[3], o.to_vec()),
            t64(&[3], m.to_vec()),
            t64(&[3], v.to_vec()),
        ],
    );
    // sqrt(var + 0.25) is 1, 2 and 0.5 for the three features.
    let sd = [1.0, 2.0, 0.5];
    let want: Vec<f64> = x
        .iter()
        .enumerate()
        .map(|(i, &e)| {
            let c = (i / 2) % 3;
            (e - m[c]) / sd[c] * s[c] + o[c]
        })
        .collect();
    close(&got, &want, "batch_norm_inference");
}

/// (operand, window, stride, (low, high) padding, source, result).
type PoolCase = (
    &'static [f64],
    u64,
    u64,
    (i64, i64),
    &'static [f64],
    &'static [f64],
);

#[test]
fn select_and_scatter_routes_to_the_selected_element() {
    // (operand, window, stride, padding, source, result): disjoint windows,
    // overlapping windows (both pick the 4; ties keep the first), padding
    // skipped, and a negative low padding that drops the first element.
    let cases: &[PoolCase] = &[
        (
            &[1.0, 5.0, 3.0, 2.0, 4.0, 6.0],
            2,
            2,
            (0, 0),
            &[10.0, 20.0, 30.0],
            &[0.0, 10.0, 20.0, 0.0, 0.0, 30.0],
        ),
        (
            &[3.0, 1.0, 4.0, 1.0, 5.0],
            3,
            1,
            (0, 0),
            &[1.0, 2.0, 3.0],
            &[0.0, 0.0, 3.0, 0.0, 3.0],
        ),
        (&[2.0, 9.0], 2, 2, (1, 1), &[5.0, 7.0], &[5.0, 7.0]),
        (&[9.0, 1.0, 2.0], 2, 2, (-1, 0), &[4.0], &[0.0, 0.0, 4.0]),
    ];
    for &(x, w, s, (lo, hi), src, want) in cases {
        let (n, k) = (x.len(), src.len());
        let text = format!(
            "func.func @main(%x: tensor<{n}xf64>, %g: tensor<{k}xf64>) -> tensor<{n}xf64> {{\n  %z = stablehlo.constant dense<0.0> : tensor<f64>\n  %r = \"stablehlo.select_and_scatter\"(%x, %g, %z) ({{\n  ^bb0(%a: tensor<f64>, %b: tensor<f64>):\n    %ge = stablehlo.compare GE, %a, %b : (tensor<f64>, tensor<f64>) -> tensor<i1>\n    stablehlo.return %ge : tensor<i1>\n  }}, {{\n  ^bb0(%a: tensor<f64>, %b: tensor<f64>):\n    %s = stablehlo.add %a, %b : tensor<f64>\n    stablehlo.return %s : tensor<f64>\n  }}) {{window_dimensions = array<i64: {w}>, window_strides = array<i64: {s}>, padding = dense<[[{lo}, {hi}]]> : tensor<1x2xi64>}} : (tensor<{n}xf64>, tensor<{k}xf64>, tensor<f64>) -> tensor<{n}xf64>\n  return %r : tensor<{n}xf64>\n}}\n"
        );
        let got = run(
            &text,
            &[t64(&[n as u64], x.to_vec()), t64(&[k as u64], src.to_vec())],
        );
        close(&got, want, &format!("{x:?} window {w} stride {s}"));
    }
}
