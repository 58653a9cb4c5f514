//! Data-driven kernel checks: each manifest case names a kernel, its parameters,
//! numpy-written inputs and numpy-computed expected outputs.

use serde_json::Value;
use shardsim::base::DType;
use shardsim::tensor::npy::read_npy;
use shardsim::tensor::{self as t, Scalar, Tensor, TensorError};

use crate::common::fixture;

/// The tensor a manifest entry names, from the fixture folder `dir`.
pub(super) fn load_from(dir: &str, spec: &Value) -> Tensor {
    let file = spec["file"].as_str().expect("file");
    let tensor = read_npy(&fixture(&format!("{dir}/{file}"))).unwrap_or_else(|e| panic!("{e}"));
    match spec.get("as").and_then(Value::as_str) {
        // Stored as f32; every value is a bf16 value, so this conversion is exact.
        Some("bf16") => t::convert(&tensor, DType::BF16).expect("to bf16"),
        Some(other) => panic!("unknown 'as' {other}"),
        None => tensor,
    }
}

fn load(spec: &Value) -> Tensor {
    load_from("tensor/cases", spec)
}

pub(super) fn usizes(p: &Value, key: &str) -> Vec<usize> {
    p[key]
        .as_array()
        .unwrap_or_else(|| panic!("param {key}"))
        .iter()
        .map(|v| v.as_u64().unwrap() as usize)
        .collect()
}

pub(super) fn u64s(p: &Value, key: &str) -> Vec<u64> {
    p[key]
        .as_array()
        .unwrap_or_else(|| panic!("param {key}"))
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect()
}

pub(super) fn i64s(p: &Value, key: &str) -> Vec<i64> {
    p[key]
        .as_array()
        .unwrap_or_else(|| panic!("param {key}"))
        .iter()
        .map(|v| v.as_i64().unwrap())
        .collect()
}

pub(super) fn dtype(p: &Value, key: &str) -> DType {
    p[key]
        .as_str()
        .unwrap_or_else(|| panic!("param {key}"))
        .parse()
        .unwrap()
}

/// A scalar parameter of element type `dtype`: a JSON integer, float, bool or "inf"/"-inf".
pub(super) fn scalar(v: &Value, dtype: DType) -> Scalar {
    if let Some(i) = v.as_i64() {
        Scalar::from_i128(dtype, i as i128)
    } else if let Some(x) = v.as_f64() {
        Scalar::from_f64(dtype, x)
    } else if let Some(b) = v.as_bool() {
        Scalar::from_i128(dtype, b as i128)
    } else {
        Scalar::from_f64(dtype, v.as_str().unwrap().parse::<f64>().unwrap())
    }
}

/// JAX's argmax reducer (from `jax.numpy.argmax`'s lowering), with the first operand
/// group as the accumulator: bigger value, or NaN, wins; equal values keep the
/// smaller index.
pub(super) fn argmax_body(acc: &[Scalar], elem: &[Scalar]) -> Result<Vec<Scalar>, TensorError> {
    let (a, b) = (acc[0].to_f64(), elem[0].to_f64());
    let (ai, bi) = (acc[1].to_i128().unwrap(), elem[1].to_i128().unwrap());
    let pick_a = a > b || a.is_nan();
    let pick_a_index = pick_a || (a == b && ai < bi);
    Ok(vec![
        if pick_a { acc[0] } else { elem[0] },
        if pick_a_index { acc[1] } else { elem[1] },
    ])
}

pub(super) fn run(kernel: &str, p: &Value, x: &[Tensor]) -> Result<Vec<Tensor>, TensorError> {
    let one = |r: Result<Tensor, TensorError>| r.map(|t| vec![t]);
    match kernel {
        "unary" => one(t::unary(
            t::UnaryOp::from_name(p["op"].as_str().unwrap()).unwrap(),
            &x[0],
        )),
        "binary" => one(t::binary(
            t::BinaryOp::from_name(p["op"].as_str().unwrap()).unwrap(),
            &x[0],
            &x[1],
        )),
        "compare" => one(t::compare(
            &x[0],
            &x[1],
            t::CompareDirection::from_name(p["dir"].as_str().unwrap()).unwrap(),
        )),
        "select" => one(t::select(&x[0], &x[1], &x[2])),
        "clamp" => one(t::clamp(&x[0], &x[1], &x[2])),
        "convert" => one(t::convert(&x[0], dtype(p, "to"))),
        "iota" => one(t::iota(
            u64s(p, "shape"),
            p["dim"].as_u64().unwrap() as usize,
            dtype(p, "dtype"),
        )),
        "broadcast_in_dim" => one(t::broadcast_in_dim(
            &x[0],
            &u64s(p, "shape"),
            &usizes(p, "dims"),
        )),
        "reshape" => one(t::reshape(&x[0], &u64s(p, "shape"))),
        "transpose" => one(t::transpose(&x[0], &usizes(p, "perm"))),
        "slice" => one(t::slice(
            &x[0],
            &u64s(p, "starts"),
            &u64s(p, "limits"),
            &u64s(p, "strides"),
        )),
        "dynamic_slice" => one(t::dynamic_slice(
            &x[0],
            &i64s(p, "starts"),
            &u64s(p, "sizes"),
        )),
        "dynamic_update_slice" => one(t::dynamic_update_slice(&x[0], &x[1], &i64s(p, "starts"))),
        "concatenate" => one(t::concatenate(x, p["dim"].as_u64().unwrap() as usize)),
        "pad" => one(t::pad(
            &x[0],
            scalar(&p["value"], x[0].dtype()),
            &i64s(p, "low"),
            &i64s(p, "high"),
            &u64s(p, "interior"),
        )),
        "reverse" => one(t::reverse(&x[0], &usizes(p, "dims"))),
        "dot_general" => {
            let dims = t::DotDims {
                lhs_batch: usizes(p, "lhs_batch"),
                rhs_batch: usizes(p, "rhs_batch"),
                lhs_contract: usizes(p, "lhs_contract"),
                rhs_contract: usizes(p, "rhs_contract"),
            };
            one(t::dot_general(&x[0], &x[1], &dims, dtype(p, "out")))
        }
        "reduce" => {
            let kind = match p["kind"].as_str().unwrap() {
                "add" => t::ReduceKind::Add,
                "mul" => t::ReduceKind::Mul,
                "max" => t::ReduceKind::Max,
                "min" => t::ReduceKind::Min,
                "and" => t::ReduceKind::And,
                "or" => t::ReduceKind::Or,
                k => panic!("unknown reduce kind {k}"),
            };
            one(t::reduce(
                &x[0],
                scalar(&p["init"], x[0].dtype()),
                &usizes(p, "dims"),
                kind,
            ))
        }
        "argmax" => {
            let dim = p["dim"].as_u64().unwrap() as usize;
            let idx = t::iota(x[0].shape().to_vec(), dim, DType::I32)?;
            let inits = [Scalar::F32(f32::NEG_INFINITY), Scalar::I32(0)];
            t::reduce_with(&[x[0].clone(), idx], &inits, &[dim], &mut argmax_body)
        }
        "split" => t::split(
            &x[0],
            p["dim"].as_u64().unwrap() as usize,
            p["parts"].as_u64().unwrap(),
        ),
        "reduce_buffers" => {
            let kind = match p["kind"].as_str().unwrap() {
                "sum" => t::CollectiveReduction::Sum,
                "prod" => t::CollectiveReduction::Prod,
                "min" => t::CollectiveReduction::Min,
                "max" => t::CollectiveReduction::Max,
                "avg" => t::CollectiveReduction::Avg,
                k => panic!("unknown reduction {k}"),
            };
            one(t::reduce_buffers(x, kind))
        }
        "extract_block" => {
            let ranges: Vec<(u64, u64)> = p["ranges"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| (r[0].as_u64().unwrap(), r[1].as_u64().unwrap()))
                .collect();
            one(t::extract_block(&x[0], &ranges))
        }
        "insert_block" => {
            let mut out = x[0].clone();
            t::insert_block(&mut out, &x[1], &u64s(p, "starts"))?;
            Ok(vec![out])
        }
        "pad_to_shape" => one(t::pad_to_shape(
            &x[0],
            &u64s(p, "shape"),
            scalar(&p["value"], x[0].dtype()),
        )),
        k => panic!("unknown kernel {k}"),
    }
}

/// Why `got` does not match `want`, or `None` when it does.
pub(super) fn mismatch(got: &Tensor, want: &Tensor, rtol: f64, atol: f64) -> Option<String> {
    if got.dtype() != want.dtype() || got.shape() != want.shape() {
        return Some(format!(
            "got {}, expected {}",
            got.tensor_type(),
            want.tensor_type()
        ));
    }
    if got.dtype().is_float() {
        if !t::allclose(got, want, rtol, atol).unwrap() {
            let (abs, rel) = t::max_abs_rel_error(got, want).unwrap();
            return Some(format!(
                "max abs error {abs:e}, max rel error {rel:e} (rtol {rtol}, atol {atol})\n got {:?}\nwant {:?}",
                got.to_f64_vec(),
                want.to_f64_vec()
            ));
        }
    } else if got != want {
        return Some(format!("got {:?}\nwant {:?}", got.data(), want.data()));
    }
    None
}

#[test]
fn every_kernel_matches_numpy() {
    let text = std::fs::read_to_string(fixture("tensor/manifest.json")).unwrap();
    let manifest: Value = serde_json::from_str(&text).unwrap();
    let cases = manifest["cases"].as_array().unwrap();
    assert!(
        cases.len() > 250,
        "manifest lists only {} cases",
        cases.len()
    );
    let mut failures = Vec::new();
    for c in cases {
        let name = c["name"].as_str().unwrap();
        let inputs: Vec<Tensor> = c["inputs"].as_array().unwrap().iter().map(load).collect();
        let want: Vec<Tensor> = c["outputs"].as_array().unwrap().iter().map(load).collect();
        let (rtol, atol) = (c["rtol"].as_f64().unwrap(), c["atol"].as_f64().unwrap());
        match run(c["kernel"].as_str().unwrap(), &c["params"], &inputs) {
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
