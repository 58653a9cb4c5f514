//! Data-driven checks of the kernels issue 14 added (gather, scatter, sort, top_k,
//! reduce_window, convolution, bit ops, rng_bit_generator, the new unary ops and
//! unsigned arithmetic) against JAX/XLA outputs on the CPU: each case of
//! `tests/fixtures/tensor/lax/manifest.json` (made by the `gen.py` next to it)
//! names a kernel, its parameters, inputs and JAX's outputs. One test per kernel.

use serde_json::Value;
use shardsim::tensor::{self as t, Scalar, Tensor, TensorError};

use super::cases::{argmax_body, dtype, load_from, mismatch, run, scalar, u64s, usizes};
use crate::common::fixture;

const DIR: &str = "tensor/lax/cases";

fn scalar_tensor(s: Scalar) -> Tensor {
    Tensor::scalar(s)
}

/// `op(a, b)` on two scalars, through the elementwise kernel.
fn bin(op: t::BinaryOp, a: Scalar, b: Scalar) -> Result<Scalar, TensorError> {
    t::binary(op, &scalar_tensor(a), &scalar_tensor(b))?.to_scalar()
}

/// `a < b` in StableHLO's TOTALORDER comparison (what JAX's sort comparator uses).
fn total_lt(a: Scalar, b: Scalar) -> Result<bool, TensorError> {
    let r = t::compare_total_order(
        &scalar_tensor(a),
        &scalar_tensor(b),
        t::CompareDirection::Lt,
    )?;
    Ok(r.to_scalar()? == Scalar::I1(true))
}

/// A two-operand body by name: `add`, `max`, `min`, `mul`, or `set` (take the update).
fn named_body(name: &str) -> impl FnMut(&[Scalar], &[Scalar]) -> Result<Vec<Scalar>, TensorError> {
    let op = match name {
        "add" => Some(t::BinaryOp::Add),
        "max" => Some(t::BinaryOp::Maximum),
        "min" => Some(t::BinaryOp::Minimum),
        "mul" => Some(t::BinaryOp::Multiply),
        "set" => None,
        other => panic!("unknown body {other}"),
    };
    move |acc: &[Scalar], x: &[Scalar]| match op {
        Some(op) => Ok(vec![bin(op, acc[0], x[0])?]),
        None => Ok(vec![x[0]]),
    }
}

fn pairs(p: &Value, key: &str) -> Vec<(i64, i64)> {
    p[key]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| (v[0].as_i64().unwrap(), v[1].as_i64().unwrap()))
        .collect()
}

fn uint(p: &Value, key: &str) -> u64 {
    p[key].as_u64().unwrap_or_else(|| panic!("param {key}"))
}

fn run_lax(kernel: &str, p: &Value, x: &[Tensor]) -> Result<Vec<Tensor>, TensorError> {
    let one = |r: Result<Tensor, TensorError>| r.map(|t| vec![t]);
    match kernel {
        "gather" => {
            let params = t::GatherParams {
                offset_dims: usizes(p, "offset_dims"),
                collapsed_slice_dims: usizes(p, "collapsed_slice_dims"),
                operand_batching_dims: usizes(p, "operand_batching_dims"),
                start_indices_batching_dims: usizes(p, "start_indices_batching_dims"),
                start_index_map: usizes(p, "start_index_map"),
                index_vector_dim: uint(p, "index_vector_dim") as usize,
                slice_sizes: u64s(p, "slice_sizes"),
            };
            one(t::gather(&x[0], &x[1], &params))
        }
        "scatter" => {
            let params = t::ScatterParams {
                update_window_dims: usizes(p, "update_window_dims"),
                inserted_window_dims: usizes(p, "inserted_window_dims"),
                input_batching_dims: usizes(p, "input_batching_dims"),
                scatter_indices_batching_dims: usizes(p, "scatter_indices_batching_dims"),
                scatter_dims_to_operand_dims: usizes(p, "scatter_dims_to_operand_dims"),
                index_vector_dim: uint(p, "index_vector_dim") as usize,
            };
            let mut body = named_body(p["combiner"].as_str().unwrap());
            t::scatter(&x[..1], &x[1], &x[2..], &params, &mut body)
        }
        "sort" => {
            let keys = uint(p, "num_keys") as usize;
            let mut less = |a: &[Scalar], b: &[Scalar]| -> Result<bool, TensorError> {
                for k in 0..keys {
                    if total_lt(a[k], b[k])? {
                        return Ok(true);
                    }
                    if total_lt(b[k], a[k])? {
                        return Ok(false);
                    }
                }
                Ok(false)
            };
            t::sort(
                x,
                uint(p, "dim") as usize,
                p["is_stable"].as_bool().unwrap(),
                &mut less,
            )
        }
        "top_k" => t::top_k(&x[0], uint(p, "k")).map(|(v, i)| vec![v, i]),
        "reduce_window" => {
            let window = t::WindowParams {
                window_dimensions: u64s(p, "window_dimensions"),
                window_strides: u64s(p, "window_strides"),
                base_dilations: u64s(p, "base_dilations"),
                window_dilations: u64s(p, "window_dilations"),
                padding: pairs(p, "padding"),
            };
            let body_name = p["body"].as_str().unwrap();
            if body_name == "argmax" {
                let inits = [
                    scalar(&p["init"][0], x[0].dtype()),
                    scalar(&p["init"][1], x[1].dtype()),
                ];
                return t::reduce_window(x, &inits, &window, &mut argmax_body);
            }
            let mut body = named_body(body_name);
            t::reduce_window(x, &[scalar(&p["init"], x[0].dtype())], &window, &mut body)
        }
        "convolution" => {
            let params = t::ConvParams {
                input_batch_dim: uint(p, "input_batch_dim") as usize,
                input_feature_dim: uint(p, "input_feature_dim") as usize,
                input_spatial_dims: usizes(p, "input_spatial_dims"),
                kernel_input_feature_dim: uint(p, "kernel_input_feature_dim") as usize,
                kernel_output_feature_dim: uint(p, "kernel_output_feature_dim") as usize,
                kernel_spatial_dims: usizes(p, "kernel_spatial_dims"),
                output_batch_dim: uint(p, "output_batch_dim") as usize,
                output_feature_dim: uint(p, "output_feature_dim") as usize,
                output_spatial_dims: usizes(p, "output_spatial_dims"),
                window_strides: u64s(p, "window_strides"),
                padding: pairs(p, "padding"),
                lhs_dilation: u64s(p, "lhs_dilation"),
                rhs_dilation: u64s(p, "rhs_dilation"),
                window_reversal: p["window_reversal"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|b| b.as_bool().unwrap())
                    .collect(),
                feature_group_count: uint(p, "feature_group_count"),
                batch_group_count: uint(p, "batch_group_count"),
            };
            one(t::convolution(&x[0], &x[1], &params, dtype(p, "out")))
        }
        "shift" => {
            let kind = match p["op"].as_str().unwrap() {
                "shift_left" => t::ShiftKind::Left,
                "shift_right_logical" => t::ShiftKind::RightLogical,
                "shift_right_arithmetic" => t::ShiftKind::RightArithmetic,
                other => panic!("unknown shift {other}"),
            };
            one(t::shift(kind, &x[0], &x[1]))
        }
        "popcnt" => one(t::popcnt(&x[0])),
        "count_leading_zeros" => one(t::count_leading_zeros(&x[0])),
        "bitcast_convert" => one(t::bitcast_convert(&x[0], dtype(p, "to"))),
        "rng_bit_generator" => {
            let algorithm = match p["algorithm"].as_str().unwrap() {
                "THREE_FRY" => t::RngAlgorithm::ThreeFry,
                "PHILOX" => t::RngAlgorithm::Philox,
                "DEFAULT" => t::RngAlgorithm::Default,
                other => panic!("unknown algorithm {other}"),
            };
            let (state, bits) =
                t::rng_bit_generator(&x[0], algorithm, &u64s(p, "shape"), dtype(p, "dtype"))?;
            Ok(vec![state, bits])
        }
        _ => run(kernel, p, x),
    }
}

/// Check every manifest case of `kernel`; at least `min_cases` must exist.
fn check_kernel(kernels: &[&str], min_cases: usize) {
    let text = std::fs::read_to_string(fixture("tensor/lax/manifest.json")).unwrap();
    let manifest: Value = serde_json::from_str(&text).unwrap();
    let cases: Vec<&Value> = manifest["cases"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| kernels.contains(&c["kernel"].as_str().unwrap()))
        .collect();
    assert!(
        cases.len() >= min_cases,
        "{kernels:?}: only {} cases in the manifest",
        cases.len()
    );
    let mut failures = Vec::new();
    for c in &cases {
        let name = c["name"].as_str().unwrap();
        let load = |v: &Value| -> Vec<Tensor> {
            v.as_array()
                .unwrap()
                .iter()
                .map(|s| load_from(DIR, s))
                .collect()
        };
        let (inputs, want) = (load(&c["inputs"]), load(&c["outputs"]));
        let (rtol, atol) = (c["rtol"].as_f64().unwrap(), c["atol"].as_f64().unwrap());
        match run_lax(c["kernel"].as_str().unwrap(), &c["params"], &inputs) {
            Err(e) => failures.push(format!("{name}: error {e}")),
            Ok(got) if got.len() != want.len() => failures.push(format!(
                "{name}: {} outputs, expected {}",
                got.len(),
                want.len()
            )),
            Ok(got) => {
                for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                    if let Some(why) = mismatch(g, w, rtol, atol) {
                        failures.push(format!("{name} output {i}: {why}"));
                    }
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases fail:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[test]
fn gather_matches_jax() {
    check_kernel(&["gather"], 9);
}

#[test]
fn scatter_matches_jax() {
    check_kernel(&["scatter"], 9);
}

#[test]
fn sort_matches_jax() {
    check_kernel(&["sort"], 8);
}

#[test]
fn top_k_matches_jax() {
    check_kernel(&["top_k"], 6);
}

#[test]
fn reduce_window_matches_jax() {
    check_kernel(&["reduce_window"], 10);
}

#[test]
fn convolution_matches_jax() {
    check_kernel(&["convolution"], 12);
}

#[test]
fn bit_ops_match_jax() {
    check_kernel(&["shift", "popcnt", "count_leading_zeros"], 30);
}

#[test]
fn bitcast_convert_matches_jax() {
    check_kernel(&["bitcast_convert"], 6);
}

#[test]
fn rng_bit_generator_matches_jax() {
    check_kernel(&["rng_bit_generator"], 24);
}

#[test]
fn new_unary_ops_match_jax() {
    check_kernel(&["unary"], 24);
}

#[test]
fn unsigned_arithmetic_and_conversions_match_jax() {
    check_kernel(&["binary", "compare", "convert"], 30);
}
