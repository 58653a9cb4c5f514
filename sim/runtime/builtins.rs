//! The global functions every worker has (Disco's `get_global_func` names):
//! the same table in the simulated, threaded and process backends, so a call
//! computes the same thing everywhere. Workers are told their index, so
//! functions like `tensor.iota` give each worker different data.

use crate::base::DType;
use crate::tensor::{self, DotDims, Scalar, Tensor};

use super::Value;

/// Who is calling: worker `worker` of `workers`.
#[derive(Debug, Clone, Copy)]
pub struct Caller {
    pub worker: usize,
    pub workers: usize,
}

type Builtin = fn(Caller, &[Value]) -> Result<Value, String>;

/// Name, arguments (for the error message), function.
const BUILTINS: &[(&str, &str, Builtin)] = &[
    ("runtime.worker_id", "()", |c, _| {
        Ok(Value::Int(c.worker as i64))
    }),
    ("runtime.num_workers", "()", |c, _| {
        Ok(Value::Int(c.workers as i64))
    }),
    ("runtime.sleep", "(ms: int)", sleep),
    ("runtime.describe", "(any...)", describe),
    ("tensor.iota", "(n: int, dtype) -> worker * n + i", iota),
    ("tensor.full", "(n: int, value: float, dtype)", full),
    ("tensor.add", "(a, b)", |_, a| binary(a, tensor::add)),
    ("tensor.multiply", "(a, b)", |_, a| {
        binary(a, tensor::multiply)
    }),
    ("tensor.scale", "(a, x: float)", scale),
    ("tensor.matmul", "(a: [m, k], b: [k, n])", matmul),
    ("tensor.reshape", "(a, dims: int...)", reshape),
    ("tuple.get", "(t: tuple, i: int)", tuple_get),
];

/// Whether `name` is a global function.
pub fn exists(name: &str) -> bool {
    BUILTINS.iter().any(|b| b.0 == name)
}

/// The global function names, sorted.
pub fn names() -> Vec<&'static str> {
    let mut v: Vec<&str> = BUILTINS.iter().map(|b| b.0).collect();
    v.sort_unstable();
    v
}

/// Run global function `name` on `args`.
pub fn call(name: &str, caller: Caller, args: &[Value]) -> Result<Value, String> {
    let (_, sig, f) = BUILTINS
        .iter()
        .find(|b| b.0 == name)
        .ok_or_else(|| format!("no global function \"{name}\""))?;
    f(caller, args).map_err(|e| format!("{e} (signature {name}{sig})"))
}

fn int(args: &[Value], i: usize) -> Result<i64, String> {
    match args.get(i) {
        Some(Value::Int(x)) => Ok(*x),
        Some(v) => Err(format!("argument {i} is a {}, expected an int", v.kind())),
        None => Err(format!("argument {i} (an int) is missing")),
    }
}

fn count(args: &[Value], i: usize) -> Result<u64, String> {
    let n = int(args, i)?;
    u64::try_from(n).map_err(|_| format!("argument {i}: {n} is negative"))
}

fn float(args: &[Value], i: usize) -> Result<f64, String> {
    match args.get(i) {
        Some(Value::Float(x)) => Ok(*x),
        Some(Value::Int(x)) => Ok(*x as f64),
        Some(v) => Err(format!("argument {i} is a {}, expected a float", v.kind())),
        None => Err(format!("argument {i} (a float) is missing")),
    }
}

fn dtype(args: &[Value], i: usize) -> Result<DType, String> {
    match args.get(i) {
        Some(Value::DType(d)) => Ok(*d),
        Some(v) => Err(format!("argument {i} is a {}, expected a dtype", v.kind())),
        None => Err(format!("argument {i} (a dtype) is missing")),
    }
}

fn array(args: &[Value], i: usize) -> Result<&Tensor, String> {
    match args.get(i) {
        Some(Value::Tensor(t)) => Ok(t),
        Some(v) => Err(format!("argument {i} is a {}, expected an array", v.kind())),
        None => Err(format!("argument {i} (an array) is missing")),
    }
}

fn sleep(_: Caller, args: &[Value]) -> Result<Value, String> {
    let ms = count(args, 0)?;
    std::thread::sleep(std::time::Duration::from_millis(ms));
    Ok(Value::Int(0))
}

fn describe(c: Caller, args: &[Value]) -> Result<Value, String> {
    let parts: Vec<String> = args
        .iter()
        .map(|a| match a {
            Value::Tensor(t) => format!("array{:?}:{}", t.shape(), t.dtype()),
            Value::Int(i) => format!("int:{i}"),
            Value::Float(x) => format!("float:{x}"),
            Value::Str(s) => format!("str:{s}"),
            Value::DType(d) => format!("dtype:{d}"),
            Value::Device(d) => format!("device:{}:{}", d.kind, d.id),
            other => other.kind().to_string(),
        })
        .collect();
    Ok(Value::Str(format!(
        "worker {}: {}",
        c.worker,
        parts.join(", ")
    )))
}

fn iota(c: Caller, args: &[Value]) -> Result<Value, String> {
    let n = count(args, 0)?;
    let dt = dtype(args, 1)?;
    let base = c.worker as i128 * n as i128;
    let vals: Vec<Scalar> = (0..n as i128)
        .map(|i| Scalar::from_i128(dt, base + i))
        .collect();
    Tensor::from_scalars(vec![n], dt, &vals)
        .map(Value::Tensor)
        .map_err(|e| e.to_string())
}

fn full(_: Caller, args: &[Value]) -> Result<Value, String> {
    let n = count(args, 0)?;
    let x = float(args, 1)?;
    let dt = dtype(args, 2)?;
    Tensor::splat(vec![n], Scalar::from_f64(dt, x))
        .map(Value::Tensor)
        .map_err(|e| e.to_string())
}

fn binary(
    args: &[Value],
    f: fn(&Tensor, &Tensor) -> Result<Tensor, tensor::TensorError>,
) -> Result<Value, String> {
    f(array(args, 0)?, array(args, 1)?)
        .map(Value::Tensor)
        .map_err(|e| e.to_string())
}

fn scale(_: Caller, args: &[Value]) -> Result<Value, String> {
    let a = array(args, 0)?;
    let x = Tensor::splat(
        a.shape().to_vec(),
        Scalar::from_f64(a.dtype(), float(args, 1)?),
    )
    .map_err(|e| e.to_string())?;
    tensor::multiply(a, &x)
        .map(Value::Tensor)
        .map_err(|e| e.to_string())
}

fn matmul(_: Caller, args: &[Value]) -> Result<Value, String> {
    let (a, b) = (array(args, 0)?, array(args, 1)?);
    if a.rank() != 2 || b.rank() != 2 {
        return Err("matmul takes two rank-2 arrays".into());
    }
    tensor::dot_general(a, b, &DotDims::plain_dot(2), a.dtype())
        .map(Value::Tensor)
        .map_err(|e| e.to_string())
}

fn reshape(_: Caller, args: &[Value]) -> Result<Value, String> {
    let a = array(args, 0)?;
    let dims = (1..args.len())
        .map(|i| count(args, i))
        .collect::<Result<Vec<_>, _>>()?;
    Tensor::new(dims, a.data().clone())
        .map(Value::Tensor)
        .map_err(|e| e.to_string())
}

fn tuple_get(_: Caller, args: &[Value]) -> Result<Value, String> {
    let i = count(args, 1)? as usize;
    match args.first() {
        Some(Value::Tuple(v)) => v
            .get(i)
            .cloned()
            .map(Value::Tensor)
            .ok_or_else(|| format!("index {i} of a tuple of {}", v.len())),
        Some(v) => Err(format!("argument 0 is a {}, expected a tuple", v.kind())),
        None => Err("argument 0 (a tuple) is missing".into()),
    }
}
