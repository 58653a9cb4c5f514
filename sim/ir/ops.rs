//! The op kinds of the IR and the typed attributes each one needs
//! (dimension numbers, comparison direction, constant values, sdy collectives...).

use crate::base::TensorType;
use crate::mesh::AxisRef;

use super::attrs::{ConvDims, ConvWindow, GatherDims, RngAlgorithm, ScatterDims, WindowAttrs};
use crate::sharding::{DimSharding, TensorSharding};

/// Elementwise ops with one operand.
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
    Cbrt,
    Tan,
    RoundNearestEven,
    RoundNearestAfz,
    Popcnt,
    CountLeadingZeros,
    /// `stablehlo.is_finite`: float in, `i1` out.
    IsFinite,
    /// `chlo.square` (JAX emits it for `jnp.var`).
    Square,
    /// `chlo.erf`.
    Erf,
    /// `chlo.erfc`.
    Erfc,
    /// `chlo.erf_inv`.
    ErfInv,
    /// `stablehlo.real`: the real part of a complex tensor (a float result).
    Real,
    /// `stablehlo.imag`: the imaginary part of a complex tensor.
    Imag,
}

impl UnaryOp {
    pub const ALL: [UnaryOp; 29] = [
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
        UnaryOp::Cbrt,
        UnaryOp::Tan,
        UnaryOp::RoundNearestEven,
        UnaryOp::RoundNearestAfz,
        UnaryOp::Popcnt,
        UnaryOp::CountLeadingZeros,
        UnaryOp::IsFinite,
        UnaryOp::Square,
        UnaryOp::Erf,
        UnaryOp::Erfc,
        UnaryOp::ErfInv,
        UnaryOp::Real,
        UnaryOp::Imag,
    ];

    /// Full op name as printed.
    pub fn name(self) -> &'static str {
        match self {
            UnaryOp::Negate => "stablehlo.negate",
            UnaryOp::Abs => "stablehlo.abs",
            UnaryOp::Exponential => "stablehlo.exponential",
            UnaryOp::Log => "stablehlo.log",
            UnaryOp::LogPlusOne => "stablehlo.log_plus_one",
            UnaryOp::ExponentialMinusOne => "stablehlo.exponential_minus_one",
            UnaryOp::Tanh => "stablehlo.tanh",
            UnaryOp::Logistic => "stablehlo.logistic",
            UnaryOp::Sqrt => "stablehlo.sqrt",
            UnaryOp::Rsqrt => "stablehlo.rsqrt",
            UnaryOp::Sine => "stablehlo.sine",
            UnaryOp::Cosine => "stablehlo.cosine",
            UnaryOp::Floor => "stablehlo.floor",
            UnaryOp::Ceil => "stablehlo.ceil",
            UnaryOp::Sign => "stablehlo.sign",
            UnaryOp::Not => "stablehlo.not",
            UnaryOp::Cbrt => "stablehlo.cbrt",
            UnaryOp::Tan => "stablehlo.tan",
            UnaryOp::RoundNearestEven => "stablehlo.round_nearest_even",
            UnaryOp::RoundNearestAfz => "stablehlo.round_nearest_afz",
            UnaryOp::Popcnt => "stablehlo.popcnt",
            UnaryOp::CountLeadingZeros => "stablehlo.count_leading_zeros",
            UnaryOp::IsFinite => "stablehlo.is_finite",
            UnaryOp::Square => "chlo.square",
            UnaryOp::Erf => "chlo.erf",
            UnaryOp::Erfc => "chlo.erfc",
            UnaryOp::ErfInv => "chlo.erf_inv",
            UnaryOp::Real => "stablehlo.real",
            UnaryOp::Imag => "stablehlo.imag",
        }
    }

    /// True for the `chlo` ops, printed `chlo.x %a : T -> T`.
    pub fn is_chlo(self) -> bool {
        matches!(
            self,
            UnaryOp::Square | UnaryOp::Erf | UnaryOp::Erfc | UnaryOp::ErfInv
        )
    }
}

/// Elementwise ops with two operands of the same type (`complex` alone has
/// a result type of its own).
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
    ShiftLeft,
    ShiftRightLogical,
    ShiftRightArithmetic,
    Atan2,
    /// `stablehlo.complex`: `lhs + i rhs` from two f32 or f64 tensors.
    Complex,
}

impl BinaryOp {
    pub const ALL: [BinaryOp; 16] = [
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
        BinaryOp::ShiftLeft,
        BinaryOp::ShiftRightLogical,
        BinaryOp::ShiftRightArithmetic,
        BinaryOp::Atan2,
        BinaryOp::Complex,
    ];

    pub fn name(self) -> &'static str {
        match self {
            BinaryOp::Add => "stablehlo.add",
            BinaryOp::Subtract => "stablehlo.subtract",
            BinaryOp::Multiply => "stablehlo.multiply",
            BinaryOp::Divide => "stablehlo.divide",
            BinaryOp::Maximum => "stablehlo.maximum",
            BinaryOp::Minimum => "stablehlo.minimum",
            BinaryOp::Power => "stablehlo.power",
            BinaryOp::Remainder => "stablehlo.remainder",
            BinaryOp::And => "stablehlo.and",
            BinaryOp::Or => "stablehlo.or",
            BinaryOp::Xor => "stablehlo.xor",
            BinaryOp::ShiftLeft => "stablehlo.shift_left",
            BinaryOp::ShiftRightLogical => "stablehlo.shift_right_logical",
            BinaryOp::ShiftRightArithmetic => "stablehlo.shift_right_arithmetic",
            BinaryOp::Atan2 => "stablehlo.atan2",
            BinaryOp::Complex => "stablehlo.complex",
        }
    }
}

/// `#stablehlo.channel_handle<handle = H, type = T>` of a send or recv
/// (type 1: device to device, 2: device to host, 3: host to device).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Channel {
    pub handle: i64,
    pub kind: i64,
}

impl Channel {
    pub const DEVICE_TO_DEVICE: i64 = 1;
    pub const DEVICE_TO_HOST: i64 = 2;
    pub const HOST_TO_DEVICE: i64 = 3;

    /// Parse `#stablehlo.channel_handle<handle = 1, type = 2>`.
    pub fn parse(text: &str) -> Option<Channel> {
        let inner = text
            .trim()
            .strip_prefix("#stablehlo.channel_handle<")?
            .strip_suffix('>')?;
        let (mut handle, mut kind) = (None, None);
        for part in inner.split(',') {
            let (k, v) = part.split_once('=')?;
            let v: i64 = v.trim().parse().ok()?;
            match k.trim() {
                "handle" => handle = Some(v),
                "type" => kind = Some(v),
                _ => return None,
            }
        }
        Some(Channel {
            handle: handle?,
            kind: kind?,
        })
    }
}

impl std::fmt::Display for Channel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "#stablehlo.channel_handle<handle = {}, type = {}>",
            self.handle, self.kind
        )
    }
}

/// `stablehlo.compare` direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CompareDir {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl CompareDir {
    pub const ALL: [CompareDir; 6] = [
        CompareDir::Eq,
        CompareDir::Ne,
        CompareDir::Lt,
        CompareDir::Le,
        CompareDir::Gt,
        CompareDir::Ge,
    ];
    pub fn name(self) -> &'static str {
        match self {
            CompareDir::Eq => "EQ",
            CompareDir::Ne => "NE",
            CompareDir::Lt => "LT",
            CompareDir::Le => "LE",
            CompareDir::Gt => "GT",
            CompareDir::Ge => "GE",
        }
    }
}

/// `stablehlo.compare` comparison type (optional in the text).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CompareType {
    Float,
    TotalOrder,
    Signed,
    Unsigned,
}

impl CompareType {
    pub const ALL: [CompareType; 4] = [
        CompareType::Float,
        CompareType::TotalOrder,
        CompareType::Signed,
        CompareType::Unsigned,
    ];
    pub fn name(self) -> &'static str {
        match self {
            CompareType::Float => "FLOAT",
            CompareType::TotalOrder => "TOTALORDER",
            CompareType::Signed => "SIGNED",
            CompareType::Unsigned => "UNSIGNED",
        }
    }
}

/// `transpose_a` of `stablehlo.triangular_solve` (`#stablehlo<transpose
/// NO_TRANSPOSE>`); on real numbers ADJOINT is TRANSPOSE.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TransposeA {
    NoTranspose,
    Transpose,
    Adjoint,
}

impl TransposeA {
    /// Every value, in a fixed order.
    pub const ALL: [TransposeA; 3] = [
        TransposeA::NoTranspose,
        TransposeA::Transpose,
        TransposeA::Adjoint,
    ];

    /// The spelling inside `#stablehlo<transpose ...>`.
    pub fn name(self) -> &'static str {
        match self {
            TransposeA::NoTranspose => "NO_TRANSPOSE",
            TransposeA::Transpose => "TRANSPOSE",
            TransposeA::Adjoint => "ADJOINT",
        }
    }

    /// True when `a` is used transposed.
    pub fn transposed(self) -> bool {
        self != TransposeA::NoTranspose
    }
}

/// Dimension numbers of `stablehlo.dot_general`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct DotDims {
    pub lhs_batch: Vec<u64>,
    pub rhs_batch: Vec<u64>,
    pub lhs_contract: Vec<u64>,
    pub rhs_contract: Vec<u64>,
}

/// One element of a dense constant.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Scalar {
    Float(f64),
    Int(i128),
    Bool(bool),
}

/// The value of a `dense<...>` constant.
#[derive(Debug, Clone, PartialEq)]
pub enum DenseValue {
    /// One element repeated (`dense<0.0>`).
    Splat(Scalar),
    /// Every element in row-major order (`dense<[[1, 2], [3, 4]]>`).
    Elements(Vec<Scalar>),
    /// The raw little-endian buffer of `dense<"0x...">`: either one element (a
    /// splat) or all of them.
    Hex(Vec<u8>),
}

impl DenseValue {
    /// Every element as f64 (booleans as 0/1), `n` = element count of the tensor.
    /// `None` when the value does not hold `n` elements of `ty`.
    pub fn to_f64s(&self, ty: &TensorType) -> Option<Vec<f64>> {
        let n = usize::try_from(checked_elements(&ty.shape)?).ok()?;
        let conv = |s: &Scalar| match *s {
            Scalar::Float(v) => v,
            Scalar::Int(v) => v as f64,
            Scalar::Bool(b) => f64::from(u8::from(b)),
        };
        match self {
            DenseValue::Splat(s) => Some(vec![conv(s); n]),
            DenseValue::Elements(v) if v.len() == n => Some(v.iter().map(conv).collect()),
            DenseValue::Elements(_) => None,
            DenseValue::Hex(bytes) => {
                let w = ty.dtype.size_bytes() as usize;
                let decode = |chunk: &[u8]| decode_le(chunk, ty.dtype);
                if bytes.len() == w {
                    Some(vec![decode(bytes)?; n])
                } else if bytes.len() == w * n {
                    bytes.chunks(w).map(decode).collect()
                } else {
                    None
                }
            }
        }
    }
}

/// Product of dims without overflow.
pub fn checked_elements(shape: &[u64]) -> Option<u64> {
    shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d))
}

fn decode_le(b: &[u8], dtype: crate::base::DType) -> Option<f64> {
    use crate::base::DType as D;
    let u = b.iter().rev().fold(0u64, |a, &x| (a << 8) | u64::from(x));
    Some(match dtype {
        D::F32 => f64::from(f32::from_bits(u as u32)),
        D::F64 => f64::from_bits(u),
        D::F16 => half_to_f64(u as u16, 5, 10),
        D::BF16 => f64::from(f32::from_bits((u as u32) << 16)),
        D::I1 => f64::from(u8::from(u != 0)),
        D::I8 => f64::from(u as u8 as i8),
        D::I32 => f64::from(u as u32 as i32),
        D::I64 => u as i64 as f64,
        D::UI8 | D::UI32 | D::UI64 => u as f64,
        D::C64 | D::C128 | D::Token => return None,
    })
}

fn half_to_f64(bits: u16, exp_bits: u32, man_bits: u32) -> f64 {
    let sign = if bits >> 15 == 1 { -1.0 } else { 1.0 };
    let exp = (u32::from(bits) >> man_bits) & ((1 << exp_bits) - 1);
    let man = f64::from(u32::from(bits) & ((1 << man_bits) - 1));
    let bias = (1 << (exp_bits - 1)) - 1;
    let scale = f64::from(1u32 << man_bits);
    if exp == 0 {
        sign * man / scale * 2f64.powi(1 - bias)
    } else if exp == (1 << exp_bits) - 1 {
        if man == 0.0 {
            sign * f64::INFINITY
        } else {
            f64::NAN
        }
    } else {
        sign * (1.0 + man / scale) * 2f64.powi(exp as i32 - bias)
    }
}

/// `sdy.propagation_barrier` direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PropagationDirection {
    None,
    Forward,
    Backward,
    Both,
}

impl PropagationDirection {
    pub const ALL: [PropagationDirection; 4] = [
        PropagationDirection::None,
        PropagationDirection::Forward,
        PropagationDirection::Backward,
        PropagationDirection::Both,
    ];
    pub fn name(self) -> &'static str {
        match self {
            PropagationDirection::None => "NONE",
            PropagationDirection::Forward => "FORWARD",
            PropagationDirection::Backward => "BACKWARD",
            PropagationDirection::Both => "BOTH",
        }
    }
}

/// One `{"x"}: 0->2` entry of `sdy.all_to_all`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AllToAllParam {
    pub axes: Vec<AxisRef>,
    pub src_dim: u64,
    pub tgt_dim: u64,
}

/// What an op is, with the attributes its semantics need.
#[derive(Debug, Clone, PartialEq)]
pub enum OpKind {
    Unary(UnaryOp),
    Binary(BinaryOp),
    Compare {
        dir: CompareDir,
        cmp_type: Option<CompareType>,
    },
    Select,
    Clamp,
    Convert,
    /// `stablehlo.constant` (`sdy: false`) or `sdy.constant` (`sdy: true`).
    Constant {
        value: DenseValue,
        sdy: bool,
    },
    Iota {
        dim: u64,
    },
    BroadcastInDim {
        dims: Vec<u64>,
    },
    Reshape,
    Transpose {
        perm: Vec<u64>,
    },
    Slice {
        start: Vec<i64>,
        limit: Vec<i64>,
        strides: Vec<i64>,
    },
    DynamicSlice {
        sizes: Vec<u64>,
    },
    DynamicUpdateSlice,
    Concatenate {
        dim: u64,
    },
    Pad {
        low: Vec<i64>,
        high: Vec<i64>,
        interior: Vec<i64>,
    },
    Reverse {
        dims: Vec<u64>,
    },
    /// `stablehlo.dot_general`; `precision` kept as written (`DEFAULT`, `HIGHEST`...).
    DotGeneral {
        dims: DotDims,
        precision: Vec<String>,
    },
    /// `stablehlo.dot` (rank-1/2 matmul).
    Dot {
        precision: Vec<String>,
    },
    /// `stablehlo.reduce` over `dims`; operands are N inputs then N inits; the
    /// body is `regions[0]` with 2N scalar block arguments (N accumulators, N elements).
    Reduce {
        dims: Vec<u64>,
    },
    ShardingConstraint {
        sharding: TensorSharding,
    },
    Reshard {
        sharding: TensorSharding,
    },
    ShardingGroup {
        group_id: i64,
    },
    PropagationBarrier {
        direction: PropagationDirection,
    },
    DataFlowEdge {
        sharding: Option<TensorSharding>,
    },
    NamedComputation {
        name: String,
        in_shardings: Option<Vec<TensorSharding>>,
        out_shardings: Option<Vec<TensorSharding>>,
    },
    ManualComputation {
        in_shardings: Vec<TensorSharding>,
        out_shardings: Vec<TensorSharding>,
        manual_axes: Vec<String>,
    },
    AllGather {
        gathering_axes: Vec<Vec<AxisRef>>,
        out_sharding: TensorSharding,
    },
    AllSlice {
        slicing_axes: Vec<Vec<AxisRef>>,
        out_sharding: TensorSharding,
    },
    AllReduce {
        reduction_axes: Vec<AxisRef>,
        out_sharding: TensorSharding,
    },
    ReduceScatter {
        scatter_axes: Vec<Vec<AxisRef>>,
        out_sharding: TensorSharding,
    },
    AllToAll {
        params: Vec<AllToAllParam>,
        out_sharding: TensorSharding,
    },
    CollectivePermute {
        out_sharding: TensorSharding,
    },
    /// `stablehlo.all_reduce`, `all_gather`, `reduce_scatter`, `all_to_all`,
    /// `collective_permute`: per-device code over explicit device groups, as
    /// JAX's shard_map writes them in manual computation bodies.
    DeviceCollective {
        op: DeviceCollective,
        /// Device ids per group (`replica_groups` with global device ids);
        /// empty for a permute.
        groups: Vec<Vec<u64>>,
    },
    /// `stablehlo.while`: operands are the initial carried values, results the
    /// final ones; `regions[0]` is the condition and `regions[1]` the body, each
    /// with one block argument per carried value.
    While,
    /// `stablehlo.case`: operand 0 is the branch index (i32); one region per
    /// branch, no block arguments; an out-of-range index runs the last branch.
    Case,
    /// `stablehlo.if`: operand 0 is the predicate; regions: then, else.
    If,
    /// `stablehlo.optimization_barrier`: identity on every operand.
    OptimizationBarrier,
    /// `stablehlo.gather`: operands (operand, start_indices).
    Gather {
        dims: GatherDims,
        slice_sizes: Vec<u64>,
        indices_are_sorted: bool,
    },
    /// `stablehlo.scatter`: operands are N inputs, the indices, N updates;
    /// `regions[0]` combines (current, update) scalars.
    Scatter {
        dims: ScatterDims,
        indices_are_sorted: bool,
        unique_indices: bool,
    },
    /// `stablehlo.sort` along `dimension`; `regions[0]` is the comparator with
    /// two scalar arguments per operand.
    Sort {
        dimension: u64,
        is_stable: bool,
    },
    /// `chlo.top_k` (or `mhlo.topk`, as XLA's Shardy dumps print it) along the
    /// last dim: results (values, i32 indices).
    TopK {
        k: u64,
        mhlo: bool,
    },
    /// `stablehlo.reduce_window`: operands N inputs then N inits; `regions[0]`
    /// as a reduce body.
    ReduceWindow {
        window: WindowAttrs,
    },
    /// `stablehlo.rng_bit_generator`: state in, (new state, bits) out.
    RngBitGenerator {
        algorithm: RngAlgorithm,
    },
    /// `stablehlo.bitcast_convert`.
    BitcastConvert,
    /// `stablehlo.convolution`.
    Convolution {
        dims: ConvDims,
        window: ConvWindow,
        feature_group_count: u64,
        batch_group_count: u64,
        /// `precision_config` entries as written (`DEFAULT`...); empty if absent.
        precision: Vec<String>,
    },
    /// `stablehlo.select_and_scatter`: operand, source, init; `regions[0]`
    /// selects within each operand window (dilations unused), `regions[1]`
    /// scatters the window's source value onto the selected element.
    SelectAndScatter {
        window: WindowAttrs,
    },
    /// `stablehlo.after_all`: one token after all of its operand tokens.
    AfterAll,
    /// `stablehlo.send`: its values (then a token) out through a channel;
    /// a token out.
    Send {
        channel: Channel,
        is_host_transfer: bool,
    },
    /// `stablehlo.recv`: a token in; values from a channel, then a token.
    Recv {
        channel: Channel,
        is_host_transfer: bool,
    },
    /// `stablehlo.fft`: the DFT over the last `length.len()` dims.
    Fft {
        kind: crate::tensor::FftKind,
        length: Vec<u64>,
    },
    /// `stablehlo.cholesky`: the Cholesky factor of each matrix in the last
    /// two dims (lower or upper triangle).
    Cholesky {
        lower: bool,
    },
    /// `stablehlo.triangular_solve`: solves `op(a) x = b` (left side) or
    /// `x op(a) = b`, `a` triangular, batched over the leading dims.
    TriangularSolve {
        left_side: bool,
        lower: bool,
        unit_diagonal: bool,
        transpose_a: TransposeA,
    },
    /// `stablehlo.batch_norm_inference`: operand, scale, offset, mean,
    /// variance; `epsilon` as written (`1.000000e-03 : f32`).
    BatchNormInference {
        epsilon: String,
        feature_index: u64,
    },
    /// `stablehlo.custom_call @target`; only [`super::attrs::KNOWN_CUSTOM_CALLS`]
    /// pass the verifier. Other attributes stay in `Op::attrs`.
    CustomCall {
        target: String,
    },
    /// `"shardsim.device_copy"`: move a value between virtual devices / memory
    /// scopes (inserted by device planning; `src`/`dst` are VirtualDevice texts).
    DeviceCopy {
        src: String,
        dst: String,
    },
    /// `func.call @callee` (printed `call`).
    Call {
        callee: String,
    },
    /// `return` / `func.return` ending a function.
    Return,
    /// `stablehlo.return` ending a reduce body.
    StablehloReturn,
    /// `sdy.return` ending a named/manual computation body.
    SdyReturn,
}

impl OpKind {
    /// The op's full name as printed (`stablehlo.add`, `sdy.reshard`, `func.call`...).
    pub fn name(&self) -> &'static str {
        match self {
            OpKind::Unary(u) => u.name(),
            OpKind::Binary(b) => b.name(),
            OpKind::Compare { .. } => "stablehlo.compare",
            OpKind::Select => "stablehlo.select",
            OpKind::Clamp => "stablehlo.clamp",
            OpKind::Convert => "stablehlo.convert",
            OpKind::Constant { sdy: false, .. } => "stablehlo.constant",
            OpKind::Constant { sdy: true, .. } => "sdy.constant",
            OpKind::Iota { .. } => "stablehlo.iota",
            OpKind::BroadcastInDim { .. } => "stablehlo.broadcast_in_dim",
            OpKind::Reshape => "stablehlo.reshape",
            OpKind::Transpose { .. } => "stablehlo.transpose",
            OpKind::Slice { .. } => "stablehlo.slice",
            OpKind::DynamicSlice { .. } => "stablehlo.dynamic_slice",
            OpKind::DynamicUpdateSlice => "stablehlo.dynamic_update_slice",
            OpKind::Concatenate { .. } => "stablehlo.concatenate",
            OpKind::Pad { .. } => "stablehlo.pad",
            OpKind::Reverse { .. } => "stablehlo.reverse",
            OpKind::DotGeneral { .. } => "stablehlo.dot_general",
            OpKind::Dot { .. } => "stablehlo.dot",
            OpKind::Reduce { .. } => "stablehlo.reduce",
            OpKind::ShardingConstraint { .. } => "sdy.sharding_constraint",
            OpKind::Reshard { .. } => "sdy.reshard",
            OpKind::ShardingGroup { .. } => "sdy.sharding_group",
            OpKind::PropagationBarrier { .. } => "sdy.propagation_barrier",
            OpKind::DataFlowEdge { .. } => "sdy.data_flow_edge",
            OpKind::NamedComputation { .. } => "sdy.named_computation",
            OpKind::ManualComputation { .. } => "sdy.manual_computation",
            OpKind::AllGather { .. } => "sdy.all_gather",
            OpKind::AllSlice { .. } => "sdy.all_slice",
            OpKind::AllReduce { .. } => "sdy.all_reduce",
            OpKind::ReduceScatter { .. } => "sdy.reduce_scatter",
            OpKind::AllToAll { .. } => "sdy.all_to_all",
            OpKind::CollectivePermute { .. } => "sdy.collective_permute",
            OpKind::DeviceCollective { op, .. } => op.name(),
            OpKind::DeviceCopy { .. } => "shardsim.device_copy",
            OpKind::While => "stablehlo.while",
            OpKind::Case => "stablehlo.case",
            OpKind::If => "stablehlo.if",
            OpKind::OptimizationBarrier => "stablehlo.optimization_barrier",
            OpKind::Gather { .. } => "stablehlo.gather",
            OpKind::Scatter { .. } => "stablehlo.scatter",
            OpKind::Sort { .. } => "stablehlo.sort",
            OpKind::TopK { mhlo: false, .. } => "chlo.top_k",
            OpKind::TopK { mhlo: true, .. } => "mhlo.topk",
            OpKind::ReduceWindow { .. } => "stablehlo.reduce_window",
            OpKind::RngBitGenerator { .. } => "stablehlo.rng_bit_generator",
            OpKind::BitcastConvert => "stablehlo.bitcast_convert",
            OpKind::Convolution { .. } => "stablehlo.convolution",
            OpKind::CustomCall { .. } => "stablehlo.custom_call",
            OpKind::Cholesky { .. } => "stablehlo.cholesky",
            OpKind::Fft { .. } => "stablehlo.fft",
            OpKind::AfterAll => "stablehlo.after_all",
            OpKind::Send { .. } => "stablehlo.send",
            OpKind::Recv { .. } => "stablehlo.recv",
            OpKind::SelectAndScatter { .. } => "stablehlo.select_and_scatter",
            OpKind::TriangularSolve { .. } => "stablehlo.triangular_solve",
            OpKind::BatchNormInference { .. } => "stablehlo.batch_norm_inference",
            OpKind::Call { .. } => "func.call",
            OpKind::Return => "func.return",
            OpKind::StablehloReturn => "stablehlo.return",
            OpKind::SdyReturn => "sdy.return",
        }
    }

    /// Elementwise ops in Shardy's sense (every operand of the result's rank maps
    /// dim for dim onto the result): the StableHLO elementwise ops, sharding
    /// constraints, reshards and device copies.
    pub fn is_elementwise(&self) -> bool {
        matches!(
            self,
            OpKind::Unary(_)
                | OpKind::Binary(_)
                | OpKind::Compare { .. }
                | OpKind::Select
                | OpKind::Clamp
                | OpKind::Convert
                | OpKind::ShardingConstraint { .. }
                | OpKind::Reshard { .. }
                | OpKind::DeviceCopy { .. }
        )
    }

    /// True for the control-flow ops whose regions run as nested code
    /// (`while`, `case`, `if`), as opposed to per-element bodies (reduce, sort...).
    pub fn is_control_flow(&self) -> bool {
        matches!(self, OpKind::While | OpKind::Case | OpKind::If)
    }

    /// True for ops whose regions are scalar code run per element (reduce,
    /// reduce_window, scatter, sort bodies and collective reducers), not
    /// distributed values.
    pub fn has_scalar_body(&self) -> bool {
        matches!(
            self,
            OpKind::Reduce { .. }
                | OpKind::ReduceWindow { .. }
                | OpKind::SelectAndScatter { .. }
                | OpKind::Scatter { .. }
                | OpKind::Sort { .. }
                | OpKind::DeviceCollective { .. }
        )
    }

    /// True for the ops that end a block.
    pub fn is_terminator(&self) -> bool {
        matches!(
            self,
            OpKind::Return | OpKind::StablehloReturn | OpKind::SdyReturn
        )
    }

    /// The out-sharding of an sdy collective (its result's sharding).
    pub fn out_sharding(&self) -> Option<&TensorSharding> {
        match self {
            OpKind::AllGather { out_sharding, .. }
            | OpKind::AllSlice { out_sharding, .. }
            | OpKind::AllReduce { out_sharding, .. }
            | OpKind::ReduceScatter { out_sharding, .. }
            | OpKind::AllToAll { out_sharding, .. }
            | OpKind::CollectivePermute { out_sharding } => Some(out_sharding),
            _ => None,
        }
    }

    /// True for the sdy collectives a partitioner inserts.
    pub fn is_collective(&self) -> bool {
        matches!(
            self,
            OpKind::AllGather { .. }
                | OpKind::AllSlice { .. }
                | OpKind::AllReduce { .. }
                | OpKind::ReduceScatter { .. }
                | OpKind::AllToAll { .. }
                | OpKind::CollectivePermute { .. }
        )
    }
}

/// What a [`OpKind::DeviceCollective`] does to each device's buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceCollective {
    /// Combine the group's buffers with the op's reducer region.
    AllReduce,
    /// Concatenate the group's buffers along `dim`, in group order.
    AllGather { dim: u64 },
    /// Combine with the reducer, then keep the `i`-th of `n` pieces along
    /// `dim` (`i`: the device's place in its group).
    ReduceScatter { dim: u64 },
    /// Split along `split_dim` into `split_count` pieces, send piece `j` to
    /// the group's `j`-th device, concatenate what arrives along `concat_dim`.
    AllToAll {
        split_dim: u64,
        concat_dim: u64,
        split_count: u64,
    },
    /// Each `(source, target)` pair sends the source's buffer to the target;
    /// a device that receives nothing gets zeros.
    CollectivePermute { pairs: Vec<(u64, u64)> },
}

impl DeviceCollective {
    /// Full op name as printed.
    pub fn name(&self) -> &'static str {
        match self {
            DeviceCollective::AllReduce => "stablehlo.all_reduce",
            DeviceCollective::AllGather { .. } => "stablehlo.all_gather",
            DeviceCollective::ReduceScatter { .. } => "stablehlo.reduce_scatter",
            DeviceCollective::AllToAll { .. } => "stablehlo.all_to_all",
            DeviceCollective::CollectivePermute { .. } => "stablehlo.collective_permute",
        }
    }

    /// True when the op carries a reducer region.
    pub fn reduces(&self) -> bool {
        matches!(
            self,
            DeviceCollective::AllReduce | DeviceCollective::ReduceScatter { .. }
        )
    }
}

/// Per-dimension axis lists printed as `[{"x"}, {}]` (collectives' axes).
pub fn dims_to_dim_shardings(dims: &[Vec<AxisRef>]) -> Vec<DimSharding> {
    dims.iter()
        .map(|a| DimSharding::closed(a.clone()))
        .collect()
}
