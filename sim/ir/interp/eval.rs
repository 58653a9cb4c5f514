//! Op-by-op evaluation of a function body over an environment of tensors.

use std::collections::BTreeMap;

use crate::base::DType;
use crate::tensor::{self, DotDims as TDotDims, ReduceKind, Scalar as TScalar, Tensor};

use super::super::{
    BinaryOp, CompareType, DenseValue, Func, Module, Op, OpKind, Region, Scalar, ValueId,
};
use super::InterpError;

/// Values computed so far, by value id.
pub(super) struct Env {
    /// Only the values set so far: evaluating one op of a long function
    /// (as lockstep execution does, op by op) must not cost the function's
    /// length.
    values: BTreeMap<u32, Tensor>,
}

impl Env {
    /// No values yet.
    pub(super) fn new(_func: &Func) -> Env {
        Env {
            values: BTreeMap::new(),
        }
    }

    pub(super) fn get(&self, v: ValueId, op: &Op) -> Result<&Tensor, InterpError> {
        self.values.get(&v.0).ok_or_else(|| {
            InterpError::op(
                op.loc,
                op.kind.name(),
                "an operand has no value (used before defined)",
            )
        })
    }

    /// Copies of `op`'s operand values, in operand order.
    pub(super) fn operands(&self, op: &Op) -> Result<Vec<Tensor>, InterpError> {
        op.operands
            .iter()
            .map(|&v| self.get(v, op).cloned())
            .collect()
    }

    pub(super) fn set(&mut self, v: ValueId, t: Tensor) {
        self.values.insert(v.0, t);
    }
}

/// Evaluate `func` on `args` and return its results.
pub fn eval_func(
    module: &Module,
    func: &Func,
    args: Vec<Tensor>,
) -> Result<Vec<Tensor>, InterpError> {
    let mut env = Env::new(func);
    for (&a, t) in func.args.iter().zip(args) {
        env.set(a, t);
    }
    run_block(module, func, &func.body, &mut env)
}

/// Evaluate one op of `func` on the given operand tensors (in operand order),
/// with the types `func` gives its results. The multi-device executor uses this
/// to run each local op of a per-device program.
pub fn eval_single_op(
    module: &Module,
    func: &Func,
    id: super::super::OpId,
    operands: Vec<Tensor>,
) -> Result<Vec<Tensor>, InterpError> {
    let op = func.op(id);
    let mut env = Env::new(func);
    for (&v, t) in op.operands.iter().zip(operands) {
        env.set(v, t);
    }
    eval_op(module, func, op, &mut env)
}

/// Run ops in order; the terminator's operands are the block's results.
fn run_block(
    module: &Module,
    func: &Func,
    ops: &[super::super::OpId],
    env: &mut Env,
) -> Result<Vec<Tensor>, InterpError> {
    for &id in ops {
        let op = func.op(id);
        if op.kind.is_terminator() {
            return env.operands(op);
        }
        let outs = eval_op(module, func, op, env)?;
        if outs.len() != op.results.len() {
            return Err(InterpError::op(
                op.loc,
                op.kind.name(),
                format!(
                    "produced {} values for {} results",
                    outs.len(),
                    op.results.len()
                ),
            ));
        }
        for (&r, t) in op.results.iter().zip(outs) {
            env.set(r, t);
        }
    }
    Ok(Vec::new())
}

/// Run a region with its block arguments bound to `args`.
pub(super) fn run_region(
    module: &Module,
    func: &Func,
    region: &Region,
    args: Vec<Tensor>,
    env: &mut Env,
) -> Result<Vec<Tensor>, InterpError> {
    for (&a, t) in region.args.iter().zip(args) {
        env.set(a, t);
    }
    run_block(module, func, &region.ops, env)
}

/// The reduction of a body that applies one binary op to (accumulator, element),
/// possibly followed by sharding constraints or reshards of its result
/// (identities; JAX and Shardy write them inside shard_map reducers).
pub fn reduce_kind_of(func: &Func, region: &Region) -> Option<ReduceKind> {
    let [body, wrappers @ .., ret] = region.ops.as_slice() else {
        return None;
    };
    let (body, ret) = (func.op(*body), func.op(*ret));
    let OpKind::Binary(b) = body.kind else {
        return None;
    };
    let [a0, a1] = region.args.as_slice() else {
        return None;
    };
    let mut value = body.results.clone();
    for &w in wrappers {
        let w = func.op(w);
        let identity = matches!(
            w.kind,
            OpKind::ShardingConstraint { .. } | OpKind::Reshard { .. }
        );
        if !identity || w.operands != value {
            return None;
        }
        value = w.results.clone();
    }
    let uses_args = body.operands == [*a0, *a1] || body.operands == [*a1, *a0];
    if !uses_args || ret.operands != value {
        return None;
    }
    Some(match b {
        BinaryOp::Add => ReduceKind::Add,
        BinaryOp::Multiply => ReduceKind::Mul,
        BinaryOp::Maximum => ReduceKind::Max,
        BinaryOp::Minimum => ReduceKind::Min,
        BinaryOp::And => ReduceKind::And,
        BinaryOp::Or => ReduceKind::Or,
        _ => return None,
    })
}

fn dims(v: &[u64]) -> Vec<usize> {
    v.iter().map(|&d| d as usize).collect()
}

/// A constant's value as a tensor of type `ty`.
fn constant(
    value: &DenseValue,
    shape: &[u64],
    dtype: DType,
) -> Result<Tensor, tensor::TensorError> {
    let conv = |s: &Scalar| match *s {
        Scalar::Float(f) => TScalar::from_f64(dtype, f),
        Scalar::Int(i) => TScalar::from_i128(dtype, i),
        Scalar::Bool(b) => TScalar::from_i128(dtype, i128::from(b)),
    };
    match value {
        DenseValue::Splat(s) => tensor::constant_splat(shape.to_vec(), conv(s)),
        DenseValue::Elements(list) => {
            let values: Vec<TScalar> = list.iter().map(conv).collect();
            tensor::constant_list(shape.to_vec(), dtype, &values)
        }
        DenseValue::Hex(bytes) => {
            let n: u64 = shape.iter().product();
            if bytes.len() as u64 == dtype.size_bytes() && n != 1 {
                let one = Tensor::from_le_bytes(Vec::new(), dtype, bytes)?;
                tensor::constant_splat(shape.to_vec(), one.to_scalar()?)
            } else {
                Tensor::from_le_bytes(shape.to_vec(), dtype, bytes)
            }
        }
    }
}

pub(super) fn eval_op(
    module: &Module,
    func: &Func,
    op: &Op,
    env: &mut Env,
) -> Result<Vec<Tensor>, InterpError> {
    let name = op.kind.name();
    let err = |e: tensor::TensorError| InterpError::op(op.loc, name, e);
    let arg = |i: usize| -> Result<&Tensor, InterpError> {
        let v = *op
            .operands
            .get(i)
            .ok_or_else(|| InterpError::op(op.loc, name, format!("missing operand {i}")))?;
        env.get(v, op)
    };
    let result_ty = op.results.first().map(|&r| &func.value(r).ty);
    let short = name.rsplit('.').next().unwrap_or(name);
    let one = |t: Result<Tensor, tensor::TensorError>| t.map(|t| vec![t]).map_err(err);
    match &op.kind {
        OpKind::Unary(u) => {
            let x = arg(0)?;
            match short {
                "square" => return one(tensor::multiply(x, x)),
                "popcnt" => return one(tensor::popcnt(x)),
                "count_leading_zeros" => return one(tensor::count_leading_zeros(x)),
                "real" => return one(tensor::complex_part(x, tensor::ComplexPart::Real)),
                "imag" => return one(tensor::complex_part(x, tensor::ComplexPart::Imag)),
                _ => {}
            }
            let k = tensor::UnaryOp::from_name(short)
                .ok_or_else(|| InterpError::op(op.loc, name, "no kernel for this op"))?;
            let _ = u;
            one(tensor::unary(k, x))
        }
        OpKind::Binary(_) => {
            let shift = match short {
                "shift_left" => Some(tensor::ShiftKind::Left),
                "shift_right_logical" => Some(tensor::ShiftKind::RightLogical),
                "shift_right_arithmetic" => Some(tensor::ShiftKind::RightArithmetic),
                _ => None,
            };
            if let Some(kind) = shift {
                return one(tensor::shift(kind, arg(0)?, arg(1)?));
            }
            if short == "complex" {
                return one(tensor::complex(arg(0)?, arg(1)?));
            }
            let k = tensor::BinaryOp::from_name(short)
                .ok_or_else(|| InterpError::op(op.loc, name, "no kernel for this op"))?;
            one(tensor::binary(k, arg(0)?, arg(1)?))
        }
        OpKind::Fft { kind, length } => one(tensor::fft(arg(0)?, *kind, length)),
        // Tokens order side effects and hold no data.
        OpKind::AfterAll => Ok(vec![Tensor::token()]),
        // What a send hands to its channel leaves the program: no value the
        // program computes depends on it, so it only passes a token on.
        OpKind::Send { .. } => Ok(vec![Tensor::token()]),
        // A received value comes from outside the program (the host, or a
        // device running another program): nothing here defines it.
        OpKind::Recv { channel, .. } => Err(InterpError::op(
            op.loc,
            name,
            format!(
                "the value received on channel {} (type {}) comes from outside the program; shardsim cannot simulate it",
                channel.handle, channel.kind
            ),
        )),
        OpKind::Compare { dir, cmp_type } => {
            let d = tensor::CompareDirection::from_name(dir.name())
                .ok_or_else(|| InterpError::op(op.loc, name, "bad direction"))?;
            if *cmp_type == Some(CompareType::TotalOrder) {
                one(tensor::compare_total_order(arg(0)?, arg(1)?, d))
            } else {
                one(tensor::compare(arg(0)?, arg(1)?, d))
            }
        }
        OpKind::Select => one(tensor::select(arg(0)?, arg(1)?, arg(2)?)),
        OpKind::Clamp => one(tensor::clamp(arg(0)?, arg(1)?, arg(2)?)),
        OpKind::Convert => {
            let ty = result_ty.ok_or_else(|| InterpError::op(op.loc, name, "no result"))?;
            one(tensor::convert(arg(0)?, ty.dtype))
        }
        OpKind::Constant { value, .. } => {
            let ty = result_ty.ok_or_else(|| InterpError::op(op.loc, name, "no result"))?;
            one(constant(value, &ty.shape, ty.dtype))
        }
        OpKind::Iota { dim } => {
            let ty = result_ty.ok_or_else(|| InterpError::op(op.loc, name, "no result"))?;
            one(tensor::iota(ty.shape.clone(), *dim as usize, ty.dtype))
        }
        OpKind::BroadcastInDim { dims: d } => {
            let ty = result_ty.ok_or_else(|| InterpError::op(op.loc, name, "no result"))?;
            one(tensor::broadcast_in_dim(arg(0)?, &ty.shape, &dims(d)))
        }
        OpKind::Reshape => {
            let ty = result_ty.ok_or_else(|| InterpError::op(op.loc, name, "no result"))?;
            one(tensor::reshape(arg(0)?, &ty.shape))
        }
        OpKind::Transpose { perm } => one(tensor::transpose(arg(0)?, &dims(perm))),
        OpKind::Slice {
            start,
            limit,
            strides,
        } => {
            let to_u = |v: &[i64]| v.iter().map(|&x| x.max(0) as u64).collect::<Vec<u64>>();
            one(tensor::slice(
                arg(0)?,
                &to_u(start),
                &to_u(limit),
                &to_u(strides),
            ))
        }
        OpKind::DynamicSlice { sizes } => {
            let starts = index_operands(op, env, 1)?;
            one(tensor::dynamic_slice(arg(0)?, &starts, sizes))
        }
        OpKind::DynamicUpdateSlice => {
            let starts = index_operands(op, env, 2)?;
            one(tensor::dynamic_update_slice(arg(0)?, arg(1)?, &starts))
        }
        OpKind::Concatenate { dim } => {
            let parts = env.operands(op)?;
            one(tensor::concatenate(&parts, *dim as usize))
        }
        OpKind::Pad {
            low,
            high,
            interior,
        } => {
            let value = arg(1)?.to_scalar().map_err(err)?;
            let interior: Vec<u64> = interior.iter().map(|&x| x.max(0) as u64).collect();
            one(tensor::pad(arg(0)?, value, low, high, &interior))
        }
        OpKind::Reverse { dims: d } => one(tensor::reverse(arg(0)?, &dims(d))),
        OpKind::DotGeneral { dims: d, .. } => {
            let ty = result_ty.ok_or_else(|| InterpError::op(op.loc, name, "no result"))?;
            let td = TDotDims {
                lhs_batch: dims(&d.lhs_batch),
                rhs_batch: dims(&d.rhs_batch),
                lhs_contract: dims(&d.lhs_contract),
                rhs_contract: dims(&d.rhs_contract),
            };
            one(tensor::dot_general(arg(0)?, arg(1)?, &td, ty.dtype))
        }
        OpKind::Dot { .. } => {
            let ty = result_ty.ok_or_else(|| InterpError::op(op.loc, name, "no result"))?;
            let lhs = arg(0)?;
            one(tensor::dot_general(
                lhs,
                arg(1)?,
                &TDotDims::plain_dot(lhs.rank()),
                ty.dtype,
            ))
        }
        OpKind::Reduce { dims: d } => eval_reduce(module, func, op, &dims(d), env),
        OpKind::ShardingConstraint { .. }
        | OpKind::Reshard { .. }
        | OpKind::PropagationBarrier { .. }
        | OpKind::DeviceCopy { .. }
        | OpKind::DataFlowEdge { .. }
        | OpKind::AllGather { .. }
        | OpKind::AllSlice { .. }
        | OpKind::AllReduce { .. }
        | OpKind::ReduceScatter { .. }
        | OpKind::AllToAll { .. }
        | OpKind::CollectivePermute { .. } => Ok(vec![arg(0)?.clone()]),
        OpKind::ShardingGroup { .. } => Ok(Vec::new()),
        OpKind::NamedComputation { .. } => {
            let args = env.operands(op)?;
            let region = op
                .regions
                .first()
                .ok_or_else(|| InterpError::op(op.loc, name, "no body"))?;
            run_region(module, func, region, args, env)
        }
        OpKind::Call { callee } => {
            let args = env.operands(op)?;
            let f = module
                .func(callee)
                .ok_or_else(|| InterpError::op(op.loc, name, format!("no function @{callee}")))?;
            eval_func(module, f, args)
        }
        OpKind::ManualComputation { .. } => {
            let args = env.operands(op)?;
            super::manual::eval_manual(module, func, op, args)
        }
        OpKind::DeviceCollective { .. } => Err(InterpError::op(
            op.loc,
            name,
            "a device collective outside a manual computation has no single-device meaning",
        )),
        OpKind::Return | OpKind::StablehloReturn | OpKind::SdyReturn => Ok(Vec::new()),
        OpKind::While => {
            let [cond, body] = &op.regions[..] else {
                return Err(InterpError::op(op.loc, name, "needs cond and body regions"));
            };
            let mut carried = env.operands(op)?;
            let mut trips = 0u64;
            while truth(&run_region(module, func, cond, carried.clone(), env)?, op)? {
                trips += 1;
                if trips > MAX_LOOP_TRIPS {
                    return Err(InterpError::op(
                        op.loc,
                        name,
                        format!(
                            "ran more than {MAX_LOOP_TRIPS} iterations (a loop that does not end?)"
                        ),
                    ));
                }
                carried = run_region(module, func, body, carried, env)?;
            }
            Ok(carried)
        }
        OpKind::Case | OpKind::If => {
            let sel = arg(0)?.to_scalar().map_err(err)?;
            let branch = taken_branch(&op.kind, sel.to_i128(), op.regions.len());
            let region = op
                .regions
                .get(branch)
                .ok_or_else(|| InterpError::op(op.loc, name, "has no branches"))?;
            run_region(module, func, region, Vec::new(), env)
        }
        OpKind::OptimizationBarrier => env.operands(op),
        OpKind::CustomCall { target } => match target.as_str() {
            // Sharding annotations: identities on the global value.
            "Sharding" | "SPMDFullToShardShape" | "SPMDShardToFullShape" => env.operands(op),
            t if crate::ir::attrs::IDENTITY_CUSTOM_CALLS.contains(&t) => env.operands(op),
            t if crate::ir::attrs::POINTWISE_CUSTOM_CALLS.contains(&t)
                || crate::ir::attrs::RULED_CUSTOM_CALLS.contains(&t)
                || crate::ir::attrs::NO_RULE_CUSTOM_CALLS.contains(&t) =>
            {
                super::custom::eval_custom(t, env.operands(op)?, result_ty.map(|r| r.dtype))
                    .map_err(|e| InterpError::op(op.loc, name, e))
            }
            _ => Err(InterpError::op(
                op.loc,
                name,
                format!("custom_call @{target} is not supported"),
            )),
        },
        OpKind::Gather { .. }
        | OpKind::Scatter { .. }
        | OpKind::Sort { .. }
        | OpKind::TopK { .. }
        | OpKind::ReduceWindow { .. }
        | OpKind::SelectAndScatter { .. }
        | OpKind::RngBitGenerator { .. }
        | OpKind::BitcastConvert
        | OpKind::Convolution { .. } => super::structured::eval_structured(module, func, op, env),
        OpKind::Cholesky { .. }
        | OpKind::TriangularSolve { .. }
        | OpKind::BatchNormInference { .. } => {
            super::linalg::eval_linalg(&op.kind, &env.operands(op)?)
                .map_err(|e| InterpError::op(op.loc, name, e))
        }
    }
}

/// Iterations after which a `while` is reported instead of run further.
const MAX_LOOP_TRIPS: u64 = 100_000_000;

/// The value of a condition region's `tensor<i1>` result.
fn truth(results: &[Tensor], op: &Op) -> Result<bool, InterpError> {
    let t = results
        .first()
        .ok_or_else(|| InterpError::op(op.loc, op.kind.name(), "condition returned nothing"))?;
    let s = t
        .to_scalar()
        .map_err(|e| InterpError::op(op.loc, op.kind.name(), e))?;
    Ok(s.to_i128() != Some(0))
}

/// Scalar index operands from position `from` on (dynamic slice starts).
fn index_operands(op: &Op, env: &Env, from: usize) -> Result<Vec<i64>, InterpError> {
    op.operands[from.min(op.operands.len())..]
        .iter()
        .map(|&v| {
            let t = env.get(v, op)?;
            t.to_scalar()
                .ok()
                .and_then(TScalar::to_index)
                .ok_or_else(|| {
                    InterpError::op(
                        op.loc,
                        op.kind.name(),
                        "start indices must be integer scalars",
                    )
                })
        })
        .collect()
}

fn eval_reduce(
    module: &Module,
    func: &Func,
    op: &Op,
    dims: &[usize],
    env: &mut Env,
) -> Result<Vec<Tensor>, InterpError> {
    let name = op.kind.name();
    let n = op.operands.len() / 2;
    let inputs: Vec<Tensor> = op.operands[..n]
        .iter()
        .map(|&v| env.get(v, op).cloned())
        .collect::<Result<_, _>>()?;
    let inits: Vec<TScalar> = op.operands[n..]
        .iter()
        .map(|&v| {
            env.get(v, op)
                .and_then(|t| t.to_scalar().map_err(|e| InterpError::op(op.loc, name, e)))
        })
        .collect::<Result<_, _>>()?;
    let region = op
        .regions
        .first()
        .ok_or_else(|| InterpError::op(op.loc, name, "no reducer body"))?;
    if n == 1 {
        if let Some(kind) = reduce_kind_of(func, region) {
            return tensor::reduce(&inputs[0], inits[0], dims, kind)
                .map(|t| vec![t])
                .map_err(|e| InterpError::op(op.loc, name, e));
        }
    }
    // General body: evaluate the region on scalars for every (accumulator, element) pair.
    let mut failure: Option<InterpError> = None;
    let mut body =
        |acc: &[TScalar], elem: &[TScalar]| -> Result<Vec<TScalar>, tensor::TensorError> {
            let args: Vec<Tensor> = acc.iter().chain(elem).map(|&s| Tensor::scalar(s)).collect();
            match run_region(module, func, region, args, env) {
                Ok(outs) => outs.iter().map(Tensor::to_scalar).collect(),
                Err(e) => {
                    let msg = e.to_string();
                    failure = Some(e);
                    Err(tensor::TensorError::invalid("reduce body", msg))
                }
            }
        };
    let result = tensor::reduce_with(&inputs, &inits, dims, &mut body);
    if let Some(e) = failure {
        return Err(e);
    }
    result.map_err(|e| InterpError::op(op.loc, name, e))
}

/// The branch a `stablehlo.if` (regions then, else) or `stablehlo.case`
/// with `n` branches takes for selector `sel`: an out-of-range case index
/// runs the last branch (StableHLO's rule).
pub fn taken_branch(kind: &OpKind, sel: Option<i128>, n: usize) -> usize {
    if matches!(kind, OpKind::If) {
        usize::from(sel == Some(0))
    } else {
        sel.and_then(|i| usize::try_from(i).ok())
            .filter(|&i| i < n)
            .unwrap_or(n.saturating_sub(1))
    }
}
