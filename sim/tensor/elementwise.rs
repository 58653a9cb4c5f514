//! Elementwise unary and binary kernels (StableHLO `negate` ... `atan2`, and
//! `chlo.erf`/`chlo.erfc`/`chlo.erf_inv`).
//!
//! f32 computes in f32, f64 in f64, bf16/f16 in f32 rounded once to the result.
//! Integer ops wrap and follow XLA for division by zero (see `int_elem`); on i1,
//! add/maximum are OR and multiply/minimum are AND, as in StableHLO. Complex
//! elements take negate, add, subtract, multiply and divide (the rest refused).

use crate::base::DType;

use super::data::Data;
use super::half::{bf16_to_f32, f16_to_f32, f32_to_bf16, f32_to_f16};
use super::int_elem::IntElem;
use super::special::Special;
use super::{Tensor, TensorError};

/// A one-operand elementwise op.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum UnaryOp {
    Negate,
    Abs,
    Exponential,
    Log,
    LogPlusOne,
    ExponentialMinusOne,
    Tanh,
    Logistic,
    Sqrt,
    Rsqrt,
    Sine,
    Cosine,
    Floor,
    Ceil,
    Sign,
    Not,
    RoundNearestEven,
    IsFinite,
    Cbrt,
    Tan,
    RoundNearestAfz,
    /// `chlo.erf`.
    Erf,
    /// `chlo.erf_inv`.
    ErfInv,
    /// `chlo.erfc`.
    Erfc,
}

/// A two-operand elementwise op.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BinaryOp {
    Add,
    Subtract,
    Multiply,
    Divide,
    Maximum,
    Minimum,
    Power,
    Remainder,
    And,
    Or,
    Xor,
    Atan2,
}

impl UnaryOp {
    /// The StableHLO op name (without the `stablehlo.` prefix).
    pub fn name(self) -> &'static str {
        match self {
            UnaryOp::Negate => "negate",
            UnaryOp::Abs => "abs",
            UnaryOp::Exponential => "exponential",
            UnaryOp::Log => "log",
            UnaryOp::LogPlusOne => "log_plus_one",
            UnaryOp::ExponentialMinusOne => "exponential_minus_one",
            UnaryOp::Tanh => "tanh",
            UnaryOp::Logistic => "logistic",
            UnaryOp::Sqrt => "sqrt",
            UnaryOp::Rsqrt => "rsqrt",
            UnaryOp::Sine => "sine",
            UnaryOp::Cosine => "cosine",
            UnaryOp::Floor => "floor",
            UnaryOp::Ceil => "ceil",
            UnaryOp::Sign => "sign",
            UnaryOp::Not => "not",
            UnaryOp::RoundNearestEven => "round_nearest_even",
            UnaryOp::IsFinite => "is_finite",
            UnaryOp::Cbrt => "cbrt",
            UnaryOp::Tan => "tan",
            UnaryOp::RoundNearestAfz => "round_nearest_afz",
            UnaryOp::Erf => "erf",
            UnaryOp::ErfInv => "erf_inv",
            UnaryOp::Erfc => "erfc",
        }
    }

    /// Every unary op.
    pub const ALL: [UnaryOp; 24] = [
        UnaryOp::Negate,
        UnaryOp::Abs,
        UnaryOp::Exponential,
        UnaryOp::Log,
        UnaryOp::LogPlusOne,
        UnaryOp::ExponentialMinusOne,
        UnaryOp::Tanh,
        UnaryOp::Logistic,
        UnaryOp::Sqrt,
        UnaryOp::Rsqrt,
        UnaryOp::Sine,
        UnaryOp::Cosine,
        UnaryOp::Floor,
        UnaryOp::Ceil,
        UnaryOp::Sign,
        UnaryOp::Not,
        UnaryOp::RoundNearestEven,
        UnaryOp::IsFinite,
        UnaryOp::Cbrt,
        UnaryOp::Tan,
        UnaryOp::RoundNearestAfz,
        UnaryOp::Erf,
        UnaryOp::ErfInv,
        UnaryOp::Erfc,
    ];

    /// The op named `name` (StableHLO spelling).
    pub fn from_name(name: &str) -> Option<UnaryOp> {
        UnaryOp::ALL.into_iter().find(|op| op.name() == name)
    }
}

impl BinaryOp {
    /// The StableHLO op name (without the `stablehlo.` prefix).
    pub fn name(self) -> &'static str {
        match self {
            BinaryOp::Add => "add",
            BinaryOp::Subtract => "subtract",
            BinaryOp::Multiply => "multiply",
            BinaryOp::Divide => "divide",
            BinaryOp::Maximum => "maximum",
            BinaryOp::Minimum => "minimum",
            BinaryOp::Power => "power",
            BinaryOp::Remainder => "remainder",
            BinaryOp::And => "and",
            BinaryOp::Or => "or",
            BinaryOp::Xor => "xor",
            BinaryOp::Atan2 => "atan2",
        }
    }

    /// Every binary op.
    pub const ALL: [BinaryOp; 12] = [
        BinaryOp::Add,
        BinaryOp::Subtract,
        BinaryOp::Multiply,
        BinaryOp::Divide,
        BinaryOp::Maximum,
        BinaryOp::Minimum,
        BinaryOp::Power,
        BinaryOp::Remainder,
        BinaryOp::And,
        BinaryOp::Or,
        BinaryOp::Xor,
        BinaryOp::Atan2,
    ];

    /// The op named `name` (StableHLO spelling).
    pub fn from_name(name: &str) -> Option<BinaryOp> {
        BinaryOp::ALL.into_iter().find(|op| op.name() == name)
    }

    fn is_bitwise(self) -> bool {
        matches!(self, BinaryOp::And | BinaryOp::Or | BinaryOp::Xor)
    }
}

/// The float body of a unary op, written once for f32 and f64.
macro_rules! float_unary {
    ($op:expr, $x:expr, $t:ty) => {{
        let x: $t = $x;
        match $op {
            UnaryOp::Negate => -x,
            UnaryOp::Abs => x.abs(),
            UnaryOp::Exponential => x.exp(),
            UnaryOp::Log => x.ln(),
            UnaryOp::LogPlusOne => x.ln_1p(),
            UnaryOp::ExponentialMinusOne => x.exp_m1(),
            UnaryOp::Tanh => x.tanh(),
            UnaryOp::Logistic => 1.0 / (1.0 + (-x).exp()),
            UnaryOp::Sqrt => x.sqrt(),
            UnaryOp::Rsqrt => 1.0 / x.sqrt(),
            UnaryOp::Sine => x.sin(),
            UnaryOp::Cosine => x.cos(),
            UnaryOp::Floor => x.floor(),
            UnaryOp::Ceil => x.ceil(),
            // NaN stays NaN and signed zeros stay as they are.
            UnaryOp::Sign => {
                if x.is_nan() || x == 0.0 {
                    x
                } else {
                    (1.0 as $t).copysign(x)
                }
            }
            UnaryOp::RoundNearestEven => x.round_ties_even(),
            UnaryOp::RoundNearestAfz => x.round(),
            UnaryOp::Cbrt => x.cbrt(),
            UnaryOp::Tan => x.tan(),
            UnaryOp::Erf => Special::error_function(x),
            UnaryOp::ErfInv => Special::inverse_error_function(x),
            UnaryOp::Erfc => Special::complementary_error_function(x),
            // Rejected before dispatch (not a float op / not float-valued).
            UnaryOp::Not | UnaryOp::IsFinite => x,
        }
    }};
}

/// The float body of a binary op, written once for f32 and f64.
macro_rules! float_binary {
    ($op:expr, $a:expr, $b:expr, $t:ty) => {{
        let (a, b): ($t, $t) = ($a, $b);
        match $op {
            BinaryOp::Add => a + b,
            BinaryOp::Subtract => a - b,
            BinaryOp::Multiply => a * b,
            BinaryOp::Divide => a / b,
            // XLA's maximum/minimum propagate NaN.
            BinaryOp::Maximum => {
                if a.is_nan() || b.is_nan() {
                    <$t>::NAN
                } else {
                    a.max(b)
                }
            }
            BinaryOp::Minimum => {
                if a.is_nan() || b.is_nan() {
                    <$t>::NAN
                } else {
                    a.min(b)
                }
            }
            BinaryOp::Power => a.powf(b),
            // Rust's float `%` is C fmod: the result has the dividend's sign.
            BinaryOp::Remainder => a % b,
            BinaryOp::Atan2 => a.atan2(b),
            // Rejected before dispatch.
            BinaryOp::And | BinaryOp::Or | BinaryOp::Xor => a,
        }
    }};
}

fn int_unary<T: IntElem>(op: UnaryOp, v: &[T]) -> Vec<T> {
    let f: fn(T) -> T = match op {
        UnaryOp::Negate => T::neg,
        UnaryOp::Abs => T::abs,
        UnaryOp::Sign => T::sign,
        _ => T::not,
    };
    v.iter().map(|&x| f(x)).collect()
}

fn int_binary<T: IntElem>(op: BinaryOp, a: &[T], b: &[T]) -> Vec<T> {
    let f: fn(T, T) -> T = match op {
        BinaryOp::Add => T::add,
        BinaryOp::Subtract => T::sub,
        BinaryOp::Multiply => T::mul,
        BinaryOp::Divide => T::div,
        BinaryOp::Maximum => std::cmp::max,
        BinaryOp::Minimum => std::cmp::min,
        BinaryOp::Power => T::pow,
        BinaryOp::Remainder => T::rem,
        BinaryOp::And => T::and,
        BinaryOp::Or => T::or,
        BinaryOp::Xor | BinaryOp::Atan2 => T::xor,
    };
    a.iter().zip(b).map(|(&x, &y)| f(x, y)).collect()
}

/// add/subtract/multiply/divide of complex elements (num-complex's
/// arithmetic, in the element's own precision as XLA computes it).
fn complex_binary<T: num_complex::ComplexFloat>(op: BinaryOp, a: &[T], b: &[T]) -> Vec<T> {
    let f: fn(T, T) -> T = match op {
        BinaryOp::Add => |x, y| x + y,
        BinaryOp::Subtract => |x, y| x - y,
        BinaryOp::Multiply => |x, y| x * y,
        // Divide (the only other op check_binary lets through).
        _ => |x, y| x / y,
    };
    a.iter().zip(b).map(|(&x, &y)| f(x, y)).collect()
}

fn map16(v: &[u16], dec: fn(u16) -> f32, enc: fn(f32) -> u16, f: impl Fn(f32) -> f32) -> Vec<u16> {
    v.iter().map(|&x| enc(f(dec(x)))).collect()
}

fn zip16(
    a: &[u16],
    b: &[u16],
    dec: fn(u16) -> f32,
    enc: fn(f32) -> u16,
    f: impl Fn(f32, f32) -> f32,
) -> Vec<u16> {
    a.iter()
        .zip(b)
        .map(|(&x, &y)| enc(f(dec(x), dec(y))))
        .collect()
}

/// Check that `op` is defined on `dtype`.
fn check_unary(op: UnaryOp, dtype: DType) -> Result<(), TensorError> {
    if dtype.is_complex() {
        // Of the complex unary ops StableHLO defines, shardsim computes negate.
        return match op {
            UnaryOp::Negate => Ok(()),
            _ => Err(TensorError::dtype(op.name(), dtype, "a real type")),
        };
    }
    let ok = match op {
        UnaryOp::Not => !dtype.is_float(),
        UnaryOp::Negate => dtype != DType::I1,
        UnaryOp::Abs | UnaryOp::Sign => {
            dtype.is_float() || matches!(dtype, DType::I8 | DType::I32 | DType::I64)
        }
        _ => dtype.is_float(),
    };
    if ok {
        return Ok(());
    }
    let expected = match op {
        UnaryOp::Not => "i1 or an integer type",
        UnaryOp::Negate => "a float or integer type",
        UnaryOp::Abs | UnaryOp::Sign => "a float or signed integer type",
        _ => "a float type",
    };
    Err(TensorError::dtype(op.name(), dtype, expected))
}

/// Apply a unary op elementwise. `is_finite` returns i1; every other op keeps the type.
pub fn unary(op: UnaryOp, x: &Tensor) -> Result<Tensor, TensorError> {
    check_unary(op, x.dtype())?;
    let data = if op == UnaryOp::IsFinite {
        Data::I1(x.to_f64_vec().into_iter().map(f64::is_finite).collect())
    } else {
        match x.data() {
            Data::F32(v) => Data::F32(v.iter().map(|&a| float_unary!(op, a, f32)).collect()),
            Data::F64(v) => Data::F64(v.iter().map(|&a| float_unary!(op, a, f64)).collect()),
            Data::BF16(v) => Data::BF16(map16(v, bf16_to_f32, f32_to_bf16, |a| {
                float_unary!(op, a, f32)
            })),
            Data::F16(v) => Data::F16(map16(v, f16_to_f32, f32_to_f16, |a| {
                float_unary!(op, a, f32)
            })),
            Data::I1(v) => Data::I1(v.iter().map(|&b| !b).collect()),
            Data::I8(v) => Data::I8(int_unary(op, v)),
            Data::I32(v) => Data::I32(int_unary(op, v)),
            Data::I64(v) => Data::I64(int_unary(op, v)),
            Data::UI8(v) => Data::UI8(int_unary(op, v)),
            Data::UI32(v) => Data::UI32(int_unary(op, v)),
            Data::UI64(v) => Data::UI64(int_unary(op, v)),
            // Negate only (checked above).
            Data::C64(v) => Data::C64(v.iter().map(|&a| -a).collect()),
            Data::C128(v) => Data::C128(v.iter().map(|&a| -a).collect()),
        }
    };
    Tensor::new(x.shape().to_vec(), data)
}

/// Check that `a` and `b` can be combined by an elementwise op (same shape and type).
pub(crate) fn check_same(op: &str, a: &Tensor, b: &Tensor) -> Result<(), TensorError> {
    if a.shape() != b.shape() {
        return Err(TensorError::invalid(
            op,
            format!("operand shapes differ: {:?} vs {:?}", a.shape(), b.shape()),
        ));
    }
    if a.dtype() != b.dtype() {
        return Err(TensorError::invalid(
            op,
            format!(
                "operand element types differ: {} vs {}",
                a.dtype(),
                b.dtype()
            ),
        ));
    }
    Ok(())
}

fn check_binary(op: BinaryOp, dtype: DType) -> Result<(), TensorError> {
    let (ok, expected) = match (op, dtype) {
        (_, d) if d.is_complex() => (
            matches!(
                op,
                BinaryOp::Add | BinaryOp::Subtract | BinaryOp::Multiply | BinaryOp::Divide
            ),
            "a real type",
        ),
        (BinaryOp::Atan2, d) => (d.is_float(), "a float type"),
        (o, d) if o.is_bitwise() => (!d.is_float(), "i1 or an integer type"),
        (
            BinaryOp::Subtract | BinaryOp::Divide | BinaryOp::Power | BinaryOp::Remainder,
            DType::I1,
        ) => (false, "a float or integer type"),
        _ => (true, ""),
    };
    if ok {
        Ok(())
    } else {
        Err(TensorError::dtype(op.name(), dtype, expected))
    }
}

/// Apply a binary op elementwise to two tensors of the same shape and type.
pub fn binary(op: BinaryOp, a: &Tensor, b: &Tensor) -> Result<Tensor, TensorError> {
    check_same(op.name(), a, b)?;
    check_binary(op, a.dtype())?;
    let data = match (a.data(), b.data()) {
        (Data::F32(x), Data::F32(y)) => Data::F32(
            x.iter()
                .zip(y)
                .map(|(&p, &q)| float_binary!(op, p, q, f32))
                .collect(),
        ),
        (Data::F64(x), Data::F64(y)) => Data::F64(
            x.iter()
                .zip(y)
                .map(|(&p, &q)| float_binary!(op, p, q, f64))
                .collect(),
        ),
        (Data::BF16(x), Data::BF16(y)) => {
            Data::BF16(zip16(x, y, bf16_to_f32, f32_to_bf16, |p, q| {
                float_binary!(op, p, q, f32)
            }))
        }
        (Data::F16(x), Data::F16(y)) => Data::F16(zip16(x, y, f16_to_f32, f32_to_f16, |p, q| {
            float_binary!(op, p, q, f32)
        })),
        (Data::I1(x), Data::I1(y)) => {
            let f: fn(bool, bool) -> bool = match op {
                BinaryOp::Add | BinaryOp::Maximum | BinaryOp::Or => |p, q| p | q,
                BinaryOp::Xor => |p, q| p ^ q,
                _ => |p, q| p & q,
            };
            Data::I1(x.iter().zip(y).map(|(&p, &q)| f(p, q)).collect())
        }
        (Data::I8(x), Data::I8(y)) => Data::I8(int_binary(op, x, y)),
        (Data::I32(x), Data::I32(y)) => Data::I32(int_binary(op, x, y)),
        (Data::I64(x), Data::I64(y)) => Data::I64(int_binary(op, x, y)),
        (Data::UI8(x), Data::UI8(y)) => Data::UI8(int_binary(op, x, y)),
        (Data::UI32(x), Data::UI32(y)) => Data::UI32(int_binary(op, x, y)),
        (Data::UI64(x), Data::UI64(y)) => Data::UI64(int_binary(op, x, y)),
        (Data::C64(x), Data::C64(y)) => Data::C64(complex_binary(op, x, y)),
        (Data::C128(x), Data::C128(y)) => Data::C128(complex_binary(op, x, y)),
        _ => {
            return Err(TensorError::invalid(
                op.name(),
                "operand element types differ",
            ))
        }
    };
    Tensor::new(a.shape().to_vec(), data)
}

macro_rules! named_unary {
    ($($name:ident => $op:ident),* $(,)?) => {$(
        #[doc = concat!("StableHLO `", stringify!($name), "`.")]
        pub fn $name(x: &Tensor) -> Result<Tensor, TensorError> {
            unary(UnaryOp::$op, x)
        }
    )*};
}

macro_rules! named_binary {
    ($($name:ident => $op:ident),* $(,)?) => {$(
        #[doc = concat!("StableHLO `", stringify!($name), "`.")]
        pub fn $name(a: &Tensor, b: &Tensor) -> Result<Tensor, TensorError> {
            binary(BinaryOp::$op, a, b)
        }
    )*};
}

named_unary!(
    negate => Negate, abs => Abs, exponential => Exponential, log => Log,
    log_plus_one => LogPlusOne, exponential_minus_one => ExponentialMinusOne, tanh => Tanh,
    logistic => Logistic, sqrt => Sqrt, rsqrt => Rsqrt, sine => Sine, cosine => Cosine,
    floor => Floor, ceil => Ceil, sign => Sign, not => Not,
    round_nearest_even => RoundNearestEven, is_finite => IsFinite, cbrt => Cbrt, tan => Tan,
    round_nearest_afz => RoundNearestAfz, erf => Erf, erf_inv => ErfInv, erfc => Erfc,
);

named_binary!(
    add => Add, subtract => Subtract, multiply => Multiply, divide => Divide,
    maximum => Maximum, minimum => Minimum, power => Power, remainder => Remainder,
    and => And, or => Or, xor => Xor, atan2 => Atan2,
);
