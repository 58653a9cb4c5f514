//! Shape and type inference and the verifier: every op's operand counts, ranks,
//! dimension numbers and result types are checked; errors name the op and its
//! source location.

use crate::base::{DType, TensorType};
use crate::sharding::TensorSharding;

use super::model::{Func, Module, Op, OpId, Region};
use super::ops::{checked_elements, Channel, DenseValue, OpKind};
use super::IrError;

/// Verify every function of a module.
pub fn verify_module(m: &Module) -> Result<(), IrError> {
    // First, so a long call chain fails fast, before any per-call work.
    check_call_graph(m)?;
    for f in &m.funcs {
        verify_func(m, f)?;
    }
    Ok(())
}

/// A program to run must have a function: an empty (or truncated) file is an
/// error, not "ok" (a module of only meshes is fine for the library).
pub fn require_functions(m: &Module) -> Result<(), IrError> {
    if m.funcs.is_empty() {
        return Err(IrError::Verify {
            loc: super::model::Loc { line: 1, col: 1 },
            op: "module".into(),
            message: "has no func.func: there is nothing to run (an empty or truncated file?)"
                .into(),
        });
    }
    Ok(())
}

/// The longest chain of nested calls a program may have: inlining and every
/// walk that follows calls recurse once per level.
pub const MAX_CALL_DEPTH: usize = 64;

/// Calls may not recurse (nothing could run them: StableHLO has no recursion)
/// and may nest at most [`MAX_CALL_DEPTH`] deep. Iterative, so a chain of any
/// length is an error, not a stack overflow.
fn check_call_graph(m: &Module) -> Result<(), IrError> {
    let index: std::collections::BTreeMap<&str, usize> = m
        .funcs
        .iter()
        .enumerate()
        .map(|(i, f)| (f.name.as_str(), i))
        .collect();
    // Callees of each function with the calling op (for the error's location).
    let callees: Vec<Vec<(usize, &Op)>> = m
        .funcs
        .iter()
        .map(|f| {
            f.ops
                .iter()
                .filter_map(|op| match &op.kind {
                    OpKind::Call { callee } => index.get(callee.as_str()).map(|&g| (g, op)),
                    _ => None,
                })
                .collect()
        })
        .collect();
    // Depth-first from each function with an explicit stack: 0 unvisited,
    // 1 on the stack, 2 done; `height[f]` = longest call chain below f.
    let n = m.funcs.len();
    let mut state = vec![0u8; n];
    let mut height = vec![0usize; n];
    for root in 0..n {
        if state[root] != 0 {
            continue;
        }
        let mut stack = vec![(root, 0usize)];
        state[root] = 1;
        while let Some(&mut (f, ref mut next)) = stack.last_mut() {
            if let Some(&(g, op)) = callees[f].get(*next) {
                *next += 1;
                match state[g] {
                    1 => {
                        return Err(err(
                            op,
                            format!(
                                "calls @{} recursively (@{} is already being called): recursion cannot run",
                                m.funcs[g].name, m.funcs[g].name
                            ),
                        ))
                    }
                    0 => {
                        state[g] = 1;
                        stack.push((g, 0));
                    }
                    _ => {}
                }
            } else {
                stack.pop();
                state[f] = 2;
                height[f] = callees[f]
                    .iter()
                    .map(|&(g, _)| height[g] + 1)
                    .max()
                    .unwrap_or(0);
                if height[f] > MAX_CALL_DEPTH {
                    let f = &m.funcs[f];
                    return Err(IrError::Verify {
                        loc: f.loc,
                        op: "func.func".into(),
                        message: format!("@{}: calls nest more than {MAX_CALL_DEPTH} deep", f.name),
                    });
                }
            }
        }
    }
    Ok(())
}

fn err(op: &Op, message: impl Into<String>) -> IrError {
    IrError::Verify {
        loc: op.loc,
        op: op.kind.name().to_string(),
        message: message.into(),
    }
}

fn verify_func(m: &Module, f: &Func) -> Result<(), IrError> {
    let at_func = |message: String| IrError::Verify {
        loc: f.loc,
        op: "func.func".into(),
        message: format!("@{}: {message}", f.name),
    };
    if f.result_types.len() != f.result_shardings.len() {
        return Err(at_func("result shardings do not match result types".into()));
    }
    for &a in &f.args {
        let v = f.value(a);
        if let Some(s) = &v.sharding {
            check_value_sharding(m, s, &v.ty)
                .map_err(|e| at_func(format!("argument {}: {e}", v.name)))?;
        }
    }
    for (i, (t, s)) in f.result_types.iter().zip(&f.result_shardings).enumerate() {
        if let Some(s) = s {
            check_value_sharding(m, s, t).map_err(|e| at_func(format!("result #{i}: {e}")))?;
        }
    }
    match f.body.last().map(|&id| f.op(id)) {
        Some(op) if matches!(op.kind, OpKind::Return) => {
            let tys: Vec<&TensorType> = op.operands.iter().map(|&v| &f.value(v).ty).collect();
            let want: Vec<&TensorType> = f.result_types.iter().collect();
            if tys != want {
                return Err(err(
                    op,
                    format!(
                        "returns ({}) but @{} declares ({})",
                        join(&tys),
                        f.name,
                        join(&want)
                    ),
                ));
            }
        }
        Some(op) => {
            return Err(err(
                op,
                format!("is last in @{} but a function must end with return", f.name),
            ))
        }
        None => return Err(at_func("has an empty body (expected a return)".into())),
    }
    verify_block(m, f, &f.body, BlockKind::Func)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum BlockKind {
    Func,
    Reduce,
    Computation,
}

fn verify_block(m: &Module, f: &Func, ops: &[OpId], kind: BlockKind) -> Result<(), IrError> {
    for (i, &id) in ops.iter().enumerate() {
        let op = f.op(id);
        let last = i + 1 == ops.len();
        let expected_term = match kind {
            BlockKind::Func => "return",
            BlockKind::Reduce => "stablehlo.return",
            BlockKind::Computation => "sdy.return",
        };
        if op.kind.is_terminator() {
            let ok = matches!(
                (&op.kind, kind),
                (OpKind::Return, BlockKind::Func)
                    | (OpKind::StablehloReturn, BlockKind::Reduce)
                    | (OpKind::SdyReturn, BlockKind::Computation)
            );
            if !ok {
                return Err(err(
                    op,
                    format!("cannot end this block (expected {expected_term})"),
                ));
            }
            if !last {
                return Err(err(op, "must be the last op of its block"));
            }
        } else if last {
            return Err(err(
                op,
                format!("ends a block that must end with {expected_term}"),
            ));
        }
        verify_op(m, f, op)?;
    }
    Ok(())
}

fn join(t: &[&TensorType]) -> String {
    t.iter()
        .map(|t| t.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// [`check_sharding_rank`], maximal shardings aside.
fn check_value_sharding(m: &Module, s: &TensorSharding, ty: &TensorType) -> Result<(), String> {
    match s.is_maximal(&m.meshes) {
        true => Ok(()),
        false => check_sharding_rank(s, ty),
    }
}

fn check_sharding_rank(s: &TensorSharding, ty: &TensorType) -> Result<(), String> {
    if s.rank() != ty.rank() {
        return Err(format!(
            "sharding {} has rank {} but the tensor {ty} has rank {}",
            s.to_bare(),
            s.rank(),
            ty.rank()
        ));
    }
    Ok(())
}

fn dims_unique_in_range(dims: &[u64], rank: usize, what: &str) -> Result<(), String> {
    let mut seen = vec![false; rank];
    for &d in dims {
        let i = usize::try_from(d)
            .ok()
            .filter(|&i| i < rank)
            .ok_or_else(|| format!("{what} {d} is out of range for rank {rank}"))?;
        if seen[i] {
            return Err(format!("{what} {d} appears twice"));
        }
        seen[i] = true;
    }
    Ok(())
}

/// Infer result types from operand types where the op determines them; `None`
/// where the text's result type is the only source (reshape, convert, call...).
pub fn infer_result_types(
    op: &Op,
    operand_types: &[&TensorType],
    result_types: &[&TensorType],
) -> Result<Option<Vec<TensorType>>, String> {
    let t = operand_types;
    let n = |k: usize| -> Result<(), String> {
        if t.len() != k {
            Err(format!("takes {k} operand(s), found {}", t.len()))
        } else {
            Ok(())
        }
    };
    let same_as = |x: &TensorType| Ok(Some(vec![x.clone()]));
    complex_allowed(&op.kind, t.iter().chain(result_types).copied())?;
    match &op.kind {
        OpKind::Unary(u) => {
            n(1)?;
            use super::ops::UnaryOp as U;
            if matches!(u, U::Real | U::Imag) {
                let part = t[0]
                    .dtype
                    .complex_part()
                    .ok_or_else(|| format!("needs a complex operand, found {}", t[0]))?;
                return Ok(Some(vec![TensorType::new(t[0].shape.clone(), part)]));
            }
            let float_only = matches!(
                u,
                U::Exponential
                    | U::Log
                    | U::LogPlusOne
                    | U::ExponentialMinusOne
                    | U::Tanh
                    | U::Logistic
                    | U::Sqrt
                    | U::Rsqrt
                    | U::Sine
                    | U::Cosine
                    | U::Floor
                    | U::Ceil
                    | U::Cbrt
                    | U::Tan
                    | U::RoundNearestEven
                    | U::RoundNearestAfz
                    | U::IsFinite
                    | U::Erf
                    | U::Erfc
                    | U::ErfInv
            );
            if float_only && !t[0].dtype.is_float() {
                return Err(format!("needs a floating-point operand, found {}", t[0]));
            }
            if matches!(u, U::Not | U::Popcnt | U::CountLeadingZeros) && t[0].dtype.is_float() {
                return Err(format!(
                    "needs an integer or boolean operand, found {}",
                    t[0]
                ));
            }
            if matches!(u, U::IsFinite) {
                return Ok(Some(vec![TensorType::new(t[0].shape.clone(), DType::I1)]));
            }
            same_as(t[0])
        }
        OpKind::Binary(b) => {
            n(2)?;
            if t[0] != t[1] {
                return Err(format!(
                    "operands must have the same type, found {} and {}",
                    t[0], t[1]
                ));
            }
            use super::ops::BinaryOp as B;
            if matches!(b, B::Complex) {
                let c = t[0]
                    .dtype
                    .complex_of()
                    .ok_or_else(|| format!("needs f32 or f64 operands, found {}", t[0]))?;
                return Ok(Some(vec![TensorType::new(t[0].shape.clone(), c)]));
            }
            if matches!(
                b,
                B::And
                    | B::Or
                    | B::Xor
                    | B::ShiftLeft
                    | B::ShiftRightLogical
                    | B::ShiftRightArithmetic
            ) && t[0].dtype.is_float()
            {
                return Err(format!("needs integer or boolean operands, found {}", t[0]));
            }
            if matches!(b, B::Atan2) && !t[0].dtype.is_float() {
                return Err(format!("needs floating-point operands, found {}", t[0]));
            }
            same_as(t[0])
        }
        OpKind::Compare { .. } => {
            n(2)?;
            if t[0] != t[1] {
                return Err(format!(
                    "operands must have the same type, found {} and {}",
                    t[0], t[1]
                ));
            }
            Ok(Some(vec![TensorType::new(t[0].shape.clone(), DType::I1)]))
        }
        OpKind::Select => {
            n(3)?;
            if t[0].dtype != DType::I1 {
                return Err(format!("predicate must be i1, found {}", t[0]));
            }
            if t[1] != t[2] {
                return Err(format!(
                    "on_true and on_false must have the same type, found {} and {}",
                    t[1], t[2]
                ));
            }
            if t[0].rank() != 0 && t[0].shape != t[1].shape {
                return Err(format!("predicate shape {} does not match {}", t[0], t[1]));
            }
            same_as(t[1])
        }
        OpKind::Clamp => {
            n(3)?;
            for (i, b) in [(0, t[0]), (2, t[2])] {
                if b.dtype != t[1].dtype || (b.rank() != 0 && b.shape != t[1].shape) {
                    return Err(format!(
                        "bound #{i} {b} must be a scalar or match the operand {}",
                        t[1]
                    ));
                }
            }
            same_as(t[1])
        }
        OpKind::Convert => {
            n(1)?;
            if let Some(r) = result_types.first() {
                if r.shape != t[0].shape {
                    return Err(format!("changes the shape from {} to {r}", t[0]));
                }
            }
            Ok(None)
        }
        OpKind::Constant { value, .. } => {
            n(0)?;
            let Some(r) = result_types.first() else {
                return Ok(None);
            };
            let count = checked_elements(&r.shape)
                .ok_or_else(|| format!("type {r} has too many elements"))?;
            match value {
                DenseValue::Splat(_) => {}
                DenseValue::Elements(v) if v.len() as u64 == count => {}
                DenseValue::Elements(v) => {
                    return Err(format!(
                        "has {} elements but its type {r} holds {count}",
                        v.len()
                    ))
                }
                DenseValue::Hex(b) => {
                    let w = r.dtype.size_bytes();
                    if b.len() as u64 != w && Some(b.len() as u64) != count.checked_mul(w) {
                        return Err(format!(
                            "hex data has {} bytes; {r} needs {w} (splat) or {}",
                            b.len(),
                            count.saturating_mul(w)
                        ));
                    }
                }
            }
            Ok(None)
        }
        OpKind::Iota { dim } => {
            n(0)?;
            if let Some(r) = result_types.first() {
                if *dim >= r.rank() as u64 {
                    return Err(format!("iota dimension {dim} is out of range for {r}"));
                }
            }
            Ok(None)
        }
        OpKind::BroadcastInDim { dims } => {
            n(1)?;
            let Some(r) = result_types.first() else {
                return Ok(None);
            };
            if dims.len() != t[0].rank() {
                return Err(format!(
                    "dims has {} entries but the operand {} has rank {}",
                    dims.len(),
                    t[0],
                    t[0].rank()
                ));
            }
            dims_unique_in_range(dims, r.rank(), "broadcast dimension")?;
            for (i, &d) in dims.iter().enumerate() {
                let (a, b) = (t[0].shape[i], r.shape[d as usize]);
                if a != 1 && a != b {
                    return Err(format!(
                        "operand dim {i} (size {a}) cannot broadcast to result dim {d} (size {b})"
                    ));
                }
            }
            if r.dtype != t[0].dtype {
                return Err(format!(
                    "changes the element type from {} to {}",
                    t[0].dtype, r.dtype
                ));
            }
            Ok(None)
        }
        OpKind::Reshape => {
            n(1)?;
            let Some(r) = result_types.first() else {
                return Ok(None);
            };
            if checked_elements(&r.shape) != checked_elements(&t[0].shape) || r.dtype != t[0].dtype
            {
                return Err(format!("cannot reshape {} into {r}", t[0]));
            }
            Ok(None)
        }
        OpKind::Transpose { perm } => {
            n(1)?;
            if perm.len() != t[0].rank() {
                return Err(format!(
                    "permutation has {} entries for rank {}",
                    perm.len(),
                    t[0].rank()
                ));
            }
            dims_unique_in_range(perm, t[0].rank(), "permutation entry")?;
            Ok(Some(vec![TensorType::new(
                perm.iter().map(|&p| t[0].shape[p as usize]).collect(),
                t[0].dtype,
            )]))
        }
        OpKind::Reverse { dims } => {
            n(1)?;
            dims_unique_in_range(dims, t[0].rank(), "reverse dimension")?;
            same_as(t[0])
        }
        OpKind::Slice {
            start,
            limit,
            strides,
        } => {
            n(1)?;
            let r = t[0].rank();
            if start.len() != r || limit.len() != r || strides.len() != r {
                return Err(format!(
                    "needs {r} start/limit/stride entries, found {}/{}/{}",
                    start.len(),
                    limit.len(),
                    strides.len()
                ));
            }
            let mut shape = Vec::with_capacity(r);
            for i in 0..r {
                let d = t[0].shape[i] as i128;
                let (s, l, k) = (start[i] as i128, limit[i] as i128, strides[i] as i128);
                if s < 0 || s > l || l > d || k < 1 {
                    return Err(format!(
                        "dim {i}: slice {s}:{l}:{k} is out of bounds for size {d}"
                    ));
                }
                shape.push(((l - s + k - 1) / k) as u64);
            }
            Ok(Some(vec![TensorType::new(shape, t[0].dtype)]))
        }
        OpKind::DynamicSlice { sizes } => {
            let r = t.first().map(|x| x.rank()).unwrap_or(0);
            n(1 + r)?;
            if sizes.len() != r {
                return Err(format!("sizes has {} entries for rank {r}", sizes.len()));
            }
            check_indices(&t[1..])?;
            for (i, (&s, &d)) in sizes.iter().zip(&t[0].shape).enumerate() {
                if s > d {
                    return Err(format!(
                        "dim {i}: slice size {s} exceeds the dimension size {d}"
                    ));
                }
            }
            Ok(Some(vec![TensorType::new(sizes.clone(), t[0].dtype)]))
        }
        OpKind::DynamicUpdateSlice => {
            let r = t.first().map(|x| x.rank()).unwrap_or(0);
            n(2 + r)?;
            if t[1].rank() != r || t[1].dtype != t[0].dtype {
                return Err(format!("update {} does not match operand {}", t[1], t[0]));
            }
            for (i, (&u, &d)) in t[1].shape.iter().zip(&t[0].shape).enumerate() {
                if u > d {
                    return Err(format!(
                        "dim {i}: update size {u} exceeds the operand size {d}"
                    ));
                }
            }
            check_indices(&t[2..])?;
            same_as(t[0])
        }
        OpKind::Concatenate { dim } => {
            if t.is_empty() {
                return Err("needs at least one operand".into());
            }
            let r = t[0].rank();
            if *dim >= r as u64 {
                return Err(format!("dimension {dim} is out of range for rank {r}"));
            }
            let mut shape = t[0].shape.clone();
            shape[*dim as usize] = 0;
            for x in t {
                if x.rank() != r || x.dtype != t[0].dtype {
                    return Err(format!("operand {x} does not match {}", t[0]));
                }
                for i in 0..r {
                    if i as u64 != *dim && x.shape[i] != t[0].shape[i] {
                        return Err(format!(
                            "operand {x} differs from {} outside dimension {dim}",
                            t[0]
                        ));
                    }
                }
                shape[*dim as usize] = shape[*dim as usize].saturating_add(x.shape[*dim as usize]);
            }
            Ok(Some(vec![TensorType::new(shape, t[0].dtype)]))
        }
        OpKind::Pad {
            low,
            high,
            interior,
        } => {
            n(2)?;
            let r = t[0].rank();
            if t[1].rank() != 0 || t[1].dtype != t[0].dtype {
                return Err(format!(
                    "padding value must be a scalar of {}, found {}",
                    t[0].dtype, t[1]
                ));
            }
            if low.len() != r || high.len() != r || interior.len() != r {
                return Err(format!(
                    "needs {r} low/high/interior entries, found {}/{}/{}",
                    low.len(),
                    high.len(),
                    interior.len()
                ));
            }
            let mut shape = Vec::with_capacity(r);
            for i in 0..r {
                let d = t[0].shape[i] as i128;
                if interior[i] < 0 {
                    return Err(format!(
                        "dim {i}: interior padding {} is negative",
                        interior[i]
                    ));
                }
                // Checked: a fuzzed text can hold sizes whose padded size overflows i128.
                let size = (d - 1)
                    .max(0)
                    .checked_mul(interior[i] as i128)
                    .and_then(|x| x.checked_add(d + low[i] as i128 + high[i] as i128))
                    .unwrap_or(i128::MAX);
                if size < 0 || size > u64::MAX as i128 {
                    return Err(format!("dim {i}: padded size {size} is out of range"));
                }
                shape.push(size as u64);
            }
            Ok(Some(vec![TensorType::new(shape, t[0].dtype)]))
        }
        OpKind::DotGeneral { dims, .. } => {
            n(2)?;
            let (l, r) = (t[0], t[1]);
            if dims.lhs_batch.len() != dims.rhs_batch.len()
                || dims.lhs_contract.len() != dims.rhs_contract.len()
            {
                return Err(
                    "lhs and rhs batching/contracting dims must have the same length".into(),
                );
            }
            let lhs_used: Vec<u64> = dims
                .lhs_batch
                .iter()
                .chain(&dims.lhs_contract)
                .copied()
                .collect();
            let rhs_used: Vec<u64> = dims
                .rhs_batch
                .iter()
                .chain(&dims.rhs_contract)
                .copied()
                .collect();
            dims_unique_in_range(&lhs_used, l.rank(), "lhs dimension")?;
            dims_unique_in_range(&rhs_used, r.rank(), "rhs dimension")?;
            for (&a, &b) in dims
                .lhs_batch
                .iter()
                .zip(&dims.rhs_batch)
                .chain(dims.lhs_contract.iter().zip(&dims.rhs_contract))
            {
                if l.shape[a as usize] != r.shape[b as usize] {
                    return Err(format!(
                        "lhs dim {a} (size {}) and rhs dim {b} (size {}) must match",
                        l.shape[a as usize], r.shape[b as usize]
                    ));
                }
            }
            let mut shape: Vec<u64> = dims
                .lhs_batch
                .iter()
                .map(|&d| l.shape[d as usize])
                .collect();
            shape.extend(
                (0..l.rank() as u64)
                    .filter(|d| !lhs_used.contains(d))
                    .map(|d| l.shape[d as usize]),
            );
            shape.extend(
                (0..r.rank() as u64)
                    .filter(|d| !rhs_used.contains(d))
                    .map(|d| r.shape[d as usize]),
            );
            let dtype = result_types.first().map(|x| x.dtype).unwrap_or(l.dtype);
            Ok(Some(vec![TensorType::new(shape, dtype)]))
        }
        OpKind::Dot { .. } => {
            n(2)?;
            let (l, r) = (t[0], t[1]);
            let shape = match (l.rank(), r.rank()) {
                (1, 1) if l.shape[0] == r.shape[0] => vec![],
                (2, 1) if l.shape[1] == r.shape[0] => vec![l.shape[0]],
                (1, 2) if l.shape[0] == r.shape[0] => vec![r.shape[1]],
                (2, 2) if l.shape[1] == r.shape[0] => vec![l.shape[0], r.shape[1]],
                _ => return Err(format!("cannot multiply {l} by {r}")),
            };
            let dtype = result_types.first().map(|x| x.dtype).unwrap_or(l.dtype);
            Ok(Some(vec![TensorType::new(shape, dtype)]))
        }
        OpKind::Reduce { dims } => {
            if t.is_empty() || t.len() % 2 != 0 {
                return Err(format!(
                    "needs N inputs and N init values, found {} operands",
                    t.len()
                ));
            }
            let k = t.len() / 2;
            let shape = &t[0].shape;
            dims_unique_in_range(dims, shape.len(), "reduce dimension")?;
            let kept: Vec<u64> = (0..shape.len() as u64)
                .filter(|d| !dims.contains(d))
                .map(|d| shape[d as usize])
                .collect();
            let mut out = Vec::with_capacity(k);
            for i in 0..k {
                if t[i].shape != *shape {
                    return Err(format!(
                        "input {} does not have the shape of {}",
                        t[i], t[0]
                    ));
                }
                let init = t[k + i];
                if init.rank() != 0 || init.dtype != t[i].dtype {
                    return Err(format!(
                        "init value {init} must be a scalar of {}",
                        t[i].dtype
                    ));
                }
                out.push(TensorType::new(kept.clone(), init.dtype));
            }
            Ok(Some(out))
        }
        OpKind::ShardingConstraint { sharding } | OpKind::Reshard { sharding } => {
            n(1)?;
            check_sharding_rank(sharding, t[0])?;
            same_as(t[0])
        }
        OpKind::DataFlowEdge { sharding } => {
            n(1)?;
            if let Some(s) = sharding {
                check_sharding_rank(s, t[0])?;
            }
            same_as(t[0])
        }
        OpKind::PropagationBarrier { .. } | OpKind::DeviceCopy { .. } => {
            n(1)?;
            same_as(t[0])
        }
        OpKind::ShardingGroup { .. } => {
            n(1)?;
            Ok(Some(vec![]))
        }
        OpKind::AllGather {
            gathering_axes: a,
            out_sharding,
        }
        | OpKind::AllSlice {
            slicing_axes: a,
            out_sharding,
        }
        | OpKind::ReduceScatter {
            scatter_axes: a,
            out_sharding,
        } => {
            n(1)?;
            check_sharding_rank(out_sharding, t[0])?;
            if a.len() != t[0].rank() {
                return Err(format!(
                    "has axes for {} dims but the operand {} has rank {}",
                    a.len(),
                    t[0],
                    t[0].rank()
                ));
            }
            same_as(t[0])
        }
        OpKind::AllToAll {
            params,
            out_sharding,
        } => {
            n(1)?;
            check_sharding_rank(out_sharding, t[0])?;
            for p in params {
                if p.src_dim >= t[0].rank() as u64
                    || p.tgt_dim >= t[0].rank() as u64
                    || p.src_dim == p.tgt_dim
                {
                    return Err(format!(
                        "all_to_all dims {}->{} are invalid for rank {}",
                        p.src_dim,
                        p.tgt_dim,
                        t[0].rank()
                    ));
                }
            }
            same_as(t[0])
        }
        OpKind::AllReduce { out_sharding, .. } | OpKind::CollectivePermute { out_sharding } => {
            n(1)?;
            check_sharding_rank(out_sharding, t[0])?;
            same_as(t[0])
        }
        OpKind::DeviceCollective { op: c, groups } => {
            n(1)?;
            device_collective_type(c, groups, t[0]).map(|ty| Some(vec![ty]))
        }
        OpKind::NamedComputation { .. }
        | OpKind::ManualComputation { .. }
        | OpKind::Call { .. } => Ok(None),
        // A custom call carrying its own `sdy.sharding_rule<..., custom>`
        // (Shardy's custom-rule custom calls, any target): the program states
        // how it shards, its result types are taken as written.
        OpKind::CustomCall { target }
            if !super::attrs::KNOWN_CUSTOM_CALLS.contains(&target.as_str())
                && op.rule.as_ref().is_some_and(|r| r.is_custom) =>
        {
            Ok(None)
        }
        OpKind::While
        | OpKind::Case
        | OpKind::If
        | OpKind::OptimizationBarrier
        | OpKind::Gather { .. }
        | OpKind::Scatter { .. }
        | OpKind::Sort { .. }
        | OpKind::TopK { .. }
        | OpKind::ReduceWindow { .. }
        | OpKind::SelectAndScatter { .. }
        | OpKind::RngBitGenerator { .. }
        | OpKind::BitcastConvert
        | OpKind::Convolution { .. }
        | OpKind::CustomCall { .. } => {
            super::verify_structured::infer_structured(&op.kind, t, result_types)
                .unwrap_or(Ok(None))
        }
        OpKind::AfterAll => {
            if let Some(x) = t.iter().find(|x| !x.is_token()) {
                return Err(format!("takes only !stablehlo.token operands, found {x}"));
            }
            Ok(Some(vec![TensorType::token()]))
        }
        OpKind::Send {
            channel,
            is_host_transfer,
        } => {
            let Some((token, values)) = t.split_last() else {
                return Err(
                    "takes its values and then a !stablehlo.token, found no operands".into(),
                );
            };
            if !token.is_token() {
                return Err(format!("takes a !stablehlo.token last, found {token}"));
            }
            if let Some(x) = values.iter().find(|x| x.is_token()) {
                return Err(format!("sends tensors, found {x} before the last operand"));
            }
            check_channel(*channel, *is_host_transfer, Channel::DEVICE_TO_HOST)?;
            Ok(Some(vec![TensorType::token()]))
        }
        OpKind::Recv {
            channel,
            is_host_transfer,
        } => {
            n(1)?;
            if !t[0].is_token() {
                return Err(format!("takes one !stablehlo.token, found {}", t[0]));
            }
            match result_types.split_last() {
                Some((last, values)) if last.is_token() && !values.iter().any(|x| x.is_token()) => {
                }
                _ => {
                    return Err(format!(
                        "results must be tensors and then one !stablehlo.token, found ({})",
                        join(result_types)
                    ))
                }
            }
            check_channel(*channel, *is_host_transfer, Channel::HOST_TO_DEVICE)?;
            Ok(None)
        }
        OpKind::Fft { kind, length } => {
            n(1)?;
            let (shape, dtype) = kind.result_type(&t[0].shape, t[0].dtype, length)?;
            Ok(Some(vec![TensorType::new(shape, dtype)]))
        }
        OpKind::Cholesky { .. }
        | OpKind::TriangularSolve { .. }
        | OpKind::BatchNormInference { .. } => super::verify_linalg::infer_linalg(&op.kind, t)
            .unwrap_or(Ok(Vec::new()))
            .map(Some),
        OpKind::Return | OpKind::StablehloReturn | OpKind::SdyReturn => Ok(Some(vec![])),
    }
}

/// A send's or recv's channel type follows `is_host_transfer` (StableHLO's
/// constraint): `host` (device to host for a send, host to device for a
/// recv) when it is set, device to device otherwise.
fn check_channel(channel: Channel, is_host_transfer: bool, host: i64) -> Result<(), String> {
    let want = if is_host_transfer {
        host
    } else {
        Channel::DEVICE_TO_DEVICE
    };
    if channel.kind != want {
        return Err(format!(
            "with is_host_transfer = {is_host_transfer} needs a channel of type {want}, found type {}",
            channel.kind
        ));
    }
    Ok(())
}

/// Complex element types only where shardsim computes them: `fft`, `real`,
/// `imag`, `complex`, negate/add/subtract/multiply/divide, and ops that move
/// or place values without computing on them (any other op on a complex
/// value is refused here, with the op named, rather than in the kernel).
fn complex_allowed<'t>(
    kind: &OpKind,
    mut types: impl Iterator<Item = &'t TensorType>,
) -> Result<(), String> {
    use super::ops::{BinaryOp as B, UnaryOp as U};
    let Some(c) = types.find(|t| t.dtype.is_complex()) else {
        return Ok(());
    };
    let ok = match kind {
        OpKind::Unary(u) => matches!(u, U::Negate | U::Real | U::Imag),
        OpKind::Binary(b) => matches!(
            b,
            B::Add | B::Subtract | B::Multiply | B::Divide | B::Complex
        ),
        OpKind::Fft { .. }
        | OpKind::Convert
        | OpKind::Select
        | OpKind::BroadcastInDim { .. }
        | OpKind::Reshape
        | OpKind::Transpose { .. }
        | OpKind::Slice { .. }
        | OpKind::DynamicSlice { .. }
        | OpKind::DynamicUpdateSlice
        | OpKind::Concatenate { .. }
        | OpKind::Reverse { .. }
        | OpKind::ShardingConstraint { .. }
        | OpKind::Reshard { .. }
        | OpKind::ShardingGroup { .. }
        | OpKind::PropagationBarrier { .. }
        | OpKind::DataFlowEdge { .. }
        | OpKind::NamedComputation { .. }
        | OpKind::ManualComputation { .. }
        | OpKind::AllGather { .. }
        | OpKind::AllSlice { .. }
        | OpKind::AllToAll { .. }
        | OpKind::CollectivePermute { .. }
        | OpKind::DeviceCopy { .. }
        | OpKind::While
        | OpKind::Case
        | OpKind::If
        | OpKind::OptimizationBarrier
        | OpKind::Call { .. }
        | OpKind::Return
        | OpKind::StablehloReturn
        | OpKind::SdyReturn => true,
        _ => false,
    };
    if ok {
        return Ok(());
    }
    Err(format!(
        "does not take complex values in shardsim, found {c} (complex values go through fft, real, imag, complex, negate, add, subtract, multiply, divide and the ops that move values)"
    ))
}

/// The result type of a device collective on `x`: groups of equal size,
/// each device at most once; gathered, scattered and exchanged dims sized
/// for the group.
fn device_collective_type(
    c: &super::ops::DeviceCollective,
    groups: &[Vec<u64>],
    x: &TensorType,
) -> Result<TensorType, String> {
    use super::ops::DeviceCollective as C;
    let mut seen = std::collections::BTreeSet::new();
    let ids: Vec<u64> = match c {
        C::CollectivePermute { pairs } => {
            let mut targets = std::collections::BTreeSet::new();
            for &(s, t) in pairs {
                if !seen.insert(s) || !targets.insert(t) {
                    return Err(format!(
                        "source_target_pairs name a source or target twice ({s}, {t})"
                    ));
                }
            }
            Vec::new()
        }
        _ => groups.iter().flatten().copied().collect(),
    };
    if let Some(d) = ids.iter().find(|&&d| !seen.insert(d)) {
        return Err(format!("device {d} is in two replica groups"));
    }
    let n = groups.first().map_or(1, |g| g.len() as u64);
    if groups.iter().any(|g| g.len() as u64 != n) {
        return Err("replica groups must have one size".into());
    }
    let dim = |d: u64| -> Result<usize, String> {
        let d = d as usize;
        if d < x.rank() {
            Ok(d)
        } else {
            Err(format!("dimension {d} is out of range for {x}"))
        }
    };
    let mut out = x.clone();
    match c {
        C::AllReduce | C::CollectivePermute { .. } => {}
        C::AllGather { dim: d } => out.shape[dim(*d)?] *= n,
        C::ReduceScatter { dim: d } => {
            let d = dim(*d)?;
            if x.shape[d] % n != 0 {
                return Err(format!("dimension {d} of {x} does not split into {n}"));
            }
            out.shape[d] /= n;
        }
        C::AllToAll {
            split_dim,
            concat_dim,
            split_count,
        } => {
            let (s, k) = (dim(*split_dim)?, dim(*concat_dim)?);
            if *split_count != n || x.shape[s] % n != 0 {
                return Err(format!(
                    "split_count {split_count} must equal the group size {n} and divide dimension {s} of {x}"
                ));
            }
            out.shape[s] /= n;
            out.shape[k] *= n;
        }
    }
    Ok(out)
}

fn check_indices(t: &[&TensorType]) -> Result<(), String> {
    for x in t {
        if x.rank() != 0 || x.dtype.is_float() || x.dtype == DType::I1 {
            return Err(format!("start indices must be integer scalars, found {x}"));
        }
    }
    Ok(())
}

/// Ops a `!stablehlo.token` may flow through: it orders side effects and
/// holds no data, so only ops that pass values on (terminators, calls,
/// control flow, optimization barriers, computations), custom calls (host
/// callbacks) and the ops made for tokens (after_all, send, recv) take one.
fn takes_tokens(kind: &OpKind) -> bool {
    matches!(
        kind,
        OpKind::Return
            | OpKind::StablehloReturn
            | OpKind::SdyReturn
            | OpKind::Call { .. }
            | OpKind::While
            | OpKind::Case
            | OpKind::If
            | OpKind::OptimizationBarrier
            | OpKind::CustomCall { .. }
            | OpKind::NamedComputation { .. }
            | OpKind::ManualComputation { .. }
            | OpKind::AfterAll
            | OpKind::Send { .. }
            | OpKind::Recv { .. }
    )
}

fn verify_op(m: &Module, f: &Func, op: &Op) -> Result<(), IrError> {
    let token = (op.operands.iter().chain(&op.results)).find(|&&v| f.value(v).ty.is_token());
    if let Some(&v) = token {
        if !takes_tokens(&op.kind) {
            return Err(err(
                op,
                format!(
                    "{} is a !stablehlo.token, which this op does not take (a token only flows through \
                     calls, control flow, optimization barriers, custom calls, computations, after_all, send and recv)",
                    f.value(v).name
                ),
            ));
        }
    }
    super::verify_sdy::check_sdy_op(m, f, op)?;
    let ins: Vec<&TensorType> = op.operands.iter().map(|&v| &f.value(v).ty).collect();
    let outs: Vec<&TensorType> = op.results.iter().map(|&v| &f.value(v).ty).collect();
    let inferred = infer_result_types(op, &ins, &outs).map_err(|e| err(op, e))?;
    if let Some(inf) = inferred {
        let inf_refs: Vec<&TensorType> = inf.iter().collect();
        if inf_refs != outs {
            return Err(err(
                op,
                format!(
                    "result type ({}) differs from the inferred type ({})",
                    join(&outs),
                    join(&inf_refs)
                ),
            ));
        }
    }
    for &r in &op.results {
        let v = f.value(r);
        if let Some(s) = &v.sharding {
            check_value_sharding(m, s, &v.ty)
                .map_err(|e| err(op, format!("result {}: {e}", v.name)))?;
        }
    }
    if let Some(rule) = &op.rule {
        check_rule(rule, &ins, &outs).map_err(|e| err(op, format!("sdy.sharding_rule: {e}")))?;
    }
    match &op.kind {
        OpKind::Reduce { .. } | OpKind::ReduceWindow { .. } => verify_reduce_body(m, f, op)?,
        OpKind::While => {
            let [cond, body] = &op.regions[..] else {
                return Err(err(op, "needs two regions (cond and body)"));
            };
            for (name, r) in [("condition", cond), ("body", body)] {
                let args: Vec<&TensorType> = r.args.iter().map(|&a| &f.value(a).ty).collect();
                if args != ins {
                    return Err(err(
                        op,
                        format!(
                            "{name} arguments ({}) differ from the carried values ({})",
                            join(&args),
                            join(&ins)
                        ),
                    ));
                }
                verify_block(m, f, &r.ops, BlockKind::Reduce)?;
            }
            check_region_return(f, op, cond, &[&TensorType::new(Vec::new(), DType::I1)])?;
            check_region_return(f, op, body, &ins)?;
        }
        OpKind::Case | OpKind::If => {
            if op.regions.is_empty() || (matches!(op.kind, OpKind::If) && op.regions.len() != 2) {
                return Err(err(op, format!("has {} branches", op.regions.len())));
            }
            for r in &op.regions {
                if !r.args.is_empty() {
                    return Err(err(op, "branches take no arguments"));
                }
                verify_block(m, f, &r.ops, BlockKind::Reduce)?;
                check_region_return(f, op, r, &outs)?;
            }
        }
        OpKind::Sort { .. } => {
            let r = region(op)?;
            let want: Vec<TensorType> = ins
                .iter()
                .flat_map(|t| {
                    let s = TensorType::new(Vec::new(), t.dtype);
                    [s.clone(), s]
                })
                .collect();
            scalar_args(f, op, r, &want, "comparator")?;
            verify_block(m, f, &r.ops, BlockKind::Reduce)?;
            check_region_return(f, op, r, &[&TensorType::new(Vec::new(), DType::I1)])?;
        }
        OpKind::Scatter { .. } => {
            let r = region(op)?;
            let n = ins.len() / 2;
            let want: Vec<TensorType> = ins[..n]
                .iter()
                .chain(&ins[n + 1..])
                .map(|t| TensorType::new(Vec::new(), t.dtype))
                .collect();
            scalar_args(f, op, r, &want, "update computation")?;
            verify_block(m, f, &r.ops, BlockKind::Reduce)?;
            let rets: Vec<&TensorType> = want[..n].iter().collect();
            check_region_return(f, op, r, &rets)?;
        }
        OpKind::SelectAndScatter { .. } => {
            // select: (e, e) -> i1; scatter: (e, e) -> e, e the element type.
            let [select, scatter] = &op.regions[..] else {
                return Err(err(op, "needs two regions (select, scatter)"));
            };
            let scalar = TensorType::new(Vec::new(), ins[0].dtype);
            let want = [scalar.clone(), scalar.clone()];
            for (r, what, ret) in [
                (select, "select", TensorType::new(Vec::new(), DType::I1)),
                (scatter, "scatter", scalar.clone()),
            ] {
                scalar_args(f, op, r, &want, what)?;
                verify_block(m, f, &r.ops, BlockKind::Reduce)?;
                check_region_return(f, op, r, &[&ret])?;
            }
        }
        OpKind::DeviceCollective { op: c, .. } if c.reduces() => {
            // The reducer: (scalar, scalar) -> scalar of the element type.
            let r = region(op)?;
            let scalar = TensorType::new(Vec::new(), ins[0].dtype);
            if r.args.len() != 2 || r.args.iter().any(|&a| f.value(a).ty != scalar) {
                return Err(err(op, format!("the reducer must take two {scalar}")));
            }
            verify_block(m, f, &r.ops, BlockKind::Reduce)?;
            check_region_return(f, op, r, &[&scalar])?;
        }
        OpKind::NamedComputation {
            in_shardings,
            out_shardings,
            ..
        } => {
            let r = region(op)?;
            let arg_tys: Vec<&TensorType> = r.args.iter().map(|&a| &f.value(a).ty).collect();
            if arg_tys != ins {
                return Err(err(
                    op,
                    format!(
                        "block argument types ({}) differ from operand types ({})",
                        join(&arg_tys),
                        join(&ins)
                    ),
                ));
            }
            check_list_ranks(op, in_shardings.as_deref(), &ins, "in_shardings")?;
            check_list_ranks(op, out_shardings.as_deref(), &outs, "out_shardings")?;
            verify_block(m, f, &r.ops, BlockKind::Computation)?;
            check_region_return(f, op, r, &outs)?;
        }
        OpKind::ManualComputation {
            in_shardings,
            out_shardings,
            manual_axes,
        } => {
            let r = region(op)?;
            check_list_ranks(op, Some(in_shardings), &ins, "in_shardings")?;
            check_list_ranks(op, Some(out_shardings), &outs, "out_shardings")?;
            if r.args.len() != ins.len() {
                return Err(err(
                    op,
                    format!(
                        "has {} block arguments for {} operands",
                        r.args.len(),
                        ins.len()
                    ),
                ));
            }
            let local = |s: &TensorSharding, t: &TensorType| -> Result<TensorType, IrError> {
                let mesh = s
                    .resolve_mesh(&m.meshes)
                    .ok_or_else(|| err(op, format!("unknown mesh in {}", s.to_bare())))?;
                let mut shape = t.shape.clone();
                for (d, dim) in s.dims.iter().enumerate() {
                    for a in dim.axes.iter().filter(|a| manual_axes.contains(&a.name)) {
                        let k = a.size(mesh).map_err(|e| err(op, e.to_string()))?;
                        if k == 0 || shape[d] % k != 0 {
                            return Err(err(
                                op,
                                format!("dim {d} of {t} is not divisible by manual axis {a}"),
                            ));
                        }
                        shape[d] /= k;
                    }
                }
                Ok(TensorType::new(shape, t.dtype))
            };
            for (i, (&a, s)) in r.args.iter().zip(in_shardings).enumerate() {
                let want = local(s, ins[i])?;
                if f.value(a).ty != want {
                    return Err(err(op, format!("block argument #{i} has type {} but the local shape of operand #{i} is {want}", f.value(a).ty)));
                }
            }
            verify_block(m, f, &r.ops, BlockKind::Computation)?;
            let locals: Vec<TensorType> = outs
                .iter()
                .zip(out_shardings)
                .map(|(t, s)| local(s, t))
                .collect::<Result<_, _>>()?;
            check_region_return(f, op, r, &locals.iter().collect::<Vec<_>>())?;
        }
        OpKind::Call { callee } => {
            let g = m.func(callee).ok_or_else(|| {
                err(
                    op,
                    format!("calls @{callee}, which the module does not define"),
                )
            })?;
            let g_ins = g.arg_types();
            let g_in_refs: Vec<&TensorType> = g_ins.iter().collect();
            let g_out_refs: Vec<&TensorType> = g.result_types.iter().collect();
            if g_in_refs != ins || g_out_refs != outs {
                return Err(err(
                    op,
                    format!(
                        "type ({}) -> ({}) does not match @{callee}: ({}) -> ({})",
                        join(&ins),
                        join(&outs),
                        join(&g_in_refs),
                        join(&g_out_refs)
                    ),
                ));
            }
        }
        _ => {
            if !op.regions.is_empty() {
                return Err(err(op, "takes no regions"));
            }
        }
    }
    if op.kind.is_collective()
        || matches!(
            op.kind,
            OpKind::Reshard { .. } | OpKind::ShardingConstraint { .. }
        )
    {
        check_collective_axes(m, op)?;
    }
    Ok(())
}

/// The region's arguments must be exactly `want`.
fn scalar_args(
    f: &Func,
    op: &Op,
    r: &Region,
    want: &[TensorType],
    what: &str,
) -> Result<(), IrError> {
    let got: Vec<&TensorType> = r.args.iter().map(|&a| &f.value(a).ty).collect();
    let want_refs: Vec<&TensorType> = want.iter().collect();
    if got != want_refs {
        return Err(err(
            op,
            format!(
                "the {what} takes ({}), expected ({})",
                join(&got),
                join(&want_refs)
            ),
        ));
    }
    Ok(())
}

fn region(op: &Op) -> Result<&Region, IrError> {
    if op.regions.len() != 1 {
        return Err(err(
            op,
            format!("needs one region, found {}", op.regions.len()),
        ));
    }
    Ok(&op.regions[0])
}

fn check_list_ranks(
    op: &Op,
    list: Option<&[TensorSharding]>,
    tys: &[&TensorType],
    what: &str,
) -> Result<(), IrError> {
    if let Some(list) = list {
        if list.len() != tys.len() {
            return Err(err(
                op,
                format!(
                    "{what} has {} shardings for {} values",
                    list.len(),
                    tys.len()
                ),
            ));
        }
        for (s, t) in list.iter().zip(tys) {
            check_sharding_rank(s, t).map_err(|e| err(op, format!("{what}: {e}")))?;
        }
    }
    Ok(())
}

fn check_region_return(f: &Func, op: &Op, r: &Region, want: &[&TensorType]) -> Result<(), IrError> {
    let ret = r
        .ops
        .last()
        .map(|&id| f.op(id))
        .ok_or_else(|| err(op, "has an empty region"))?;
    let got: Vec<&TensorType> = ret.operands.iter().map(|&v| &f.value(v).ty).collect();
    if got != want {
        return Err(err(
            ret,
            format!(
                "returns ({}) but the enclosing op expects ({})",
                join(&got),
                join(want)
            ),
        ));
    }
    Ok(())
}

fn verify_reduce_body(m: &Module, f: &Func, op: &Op) -> Result<(), IrError> {
    let r = region(op)?;
    let k = op.operands.len() / 2;
    if r.args.len() != 2 * k {
        return Err(err(
            op,
            format!("body takes {} arguments, expected {}", r.args.len(), 2 * k),
        ));
    }
    for (i, &a) in r.args.iter().enumerate() {
        let want = &f.value(op.operands[k + i % k]).ty;
        if &f.value(a).ty != want {
            return Err(err(
                op,
                format!(
                    "body argument #{i} has type {} but the init value is {want}",
                    f.value(a).ty
                ),
            ));
        }
    }
    verify_block(m, f, &r.ops, BlockKind::Reduce)?;
    let want: Vec<&TensorType> = (0..k).map(|i| &f.value(op.operands[k + i]).ty).collect();
    check_region_return(f, op, r, &want)
}

fn check_rule(
    rule: &super::rule::OpShardingRule,
    ins: &[&TensorType],
    outs: &[&TensorType],
) -> Result<(), String> {
    if rule.operand_mappings.len() != ins.len() || rule.result_mappings.len() != outs.len() {
        return Err(format!(
            "maps {} operands and {} results, the op has {} and {}",
            rule.operand_mappings.len(),
            rule.result_mappings.len(),
            ins.len(),
            outs.len()
        ));
    }
    for (maps, tys, what) in [
        (&rule.operand_mappings, ins, "operand"),
        (&rule.result_mappings, outs, "result"),
    ] {
        for (i, (dims, t)) in maps.iter().zip(tys.iter()).enumerate() {
            if dims.len() != t.rank() {
                return Err(format!(
                    "{what} #{i} mapping has {} dims but {t} has rank {}",
                    dims.len(),
                    t.rank()
                ));
            }
            for (d, factors) in dims.iter().enumerate() {
                let size = factors
                    .iter()
                    .try_fold(1u64, |a, &f| {
                        rule.factor_sizes.get(f).and_then(|&s| a.checked_mul(s))
                    })
                    .ok_or_else(|| format!("{what} #{i} dim {d} uses a factor without a size"))?;
                // Factors that need replication or permutation (slice, pad, concatenate,
                // dynamic_slice) may be sized by the largest dim they map, not by each.
                let relaxed = factors.iter().any(|f| {
                    rule.need_replication_factors.contains(f)
                        || rule.permutation_factors.contains(f)
                });
                if size != t.shape[d] && !relaxed {
                    return Err(format!(
                        "{what} #{i} dim {d}: factors multiply to {size}, the dim has size {}",
                        t.shape[d]
                    ));
                }
            }
        }
    }
    Ok(())
}

fn check_collective_axes(m: &Module, op: &Op) -> Result<(), IrError> {
    let (s, lists): (&TensorSharding, Vec<&crate::mesh::AxisRef>) = match &op.kind {
        OpKind::AllGather {
            gathering_axes: a,
            out_sharding,
        }
        | OpKind::AllSlice {
            slicing_axes: a,
            out_sharding,
        }
        | OpKind::ReduceScatter {
            scatter_axes: a,
            out_sharding,
        } => (out_sharding, a.iter().flatten().collect()),
        OpKind::AllReduce {
            reduction_axes,
            out_sharding,
        } => (out_sharding, reduction_axes.iter().collect()),
        OpKind::AllToAll {
            params,
            out_sharding,
        } => (
            out_sharding,
            params.iter().flat_map(|p| p.axes.iter()).collect(),
        ),
        OpKind::CollectivePermute { out_sharding } => (out_sharding, Vec::new()),
        OpKind::Reshard { sharding } | OpKind::ShardingConstraint { sharding } => {
            (sharding, Vec::new())
        }
        _ => return Ok(()),
    };
    let Some(mesh) = s.resolve_mesh(&m.meshes) else {
        return Err(err(
            op,
            format!("refers to an unknown mesh in {}", s.to_bare()),
        ));
    };
    for a in lists {
        a.validate(mesh)
            .map_err(|e| err(op, format!("axis {a}: {e}")))?;
    }
    Ok(())
}
