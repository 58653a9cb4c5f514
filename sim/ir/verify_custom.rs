//! Type checks of the custom-call targets whose rules come from Shardy's
//! registry (`attrs::POINTWISE_CUSTOM_CALLS`, `RULED_CUSTOM_CALLS`,
//! `NO_RULE_CUSTOM_CALLS`): their result types are taken as written, so the
//! shapes each rule reads are checked here and a mismatch is a located error,
//! never a wrong rule.

use crate::base::TensorType;

use super::attrs::{NO_RULE_CUSTOM_CALLS, POINTWISE_CUSTOM_CALLS, RULED_CUSTOM_CALLS};

/// True for the targets this module checks.
pub fn is_registry_custom_call(target: &str) -> bool {
    POINTWISE_CUSTOM_CALLS.contains(&target)
        || RULED_CUSTOM_CALLS.contains(&target)
        || NO_RULE_CUSTOM_CALLS.contains(&target)
}

fn arity(what: &str, t: &[&TensorType], k: usize) -> Result<(), String> {
    if t.len() != k {
        return Err(format!("takes {k} {what}(s), found {}", t.len()));
    }
    Ok(())
}

fn same_shape(a: &TensorType, b: &TensorType, what: &str) -> Result<(), String> {
    if a.shape != b.shape {
        return Err(format!("{what} has type {b}, expected the shape of {a}"));
    }
    Ok(())
}

/// The leading (batch) dims and the last two of a matrix operand.
fn matrix(t: &TensorType, what: &str) -> Result<(usize, u64, u64), String> {
    let r = t
        .rank()
        .checked_sub(2)
        .ok_or_else(|| format!("{what} must have rank 2 or more, found {t}"))?;
    Ok((r, t.shape[r], t.shape[r + 1]))
}

/// Checks a custom call to `target` with these operand and result types.
pub fn check(target: &str, ops: &[&TensorType], res: &[&TensorType]) -> Result<(), String> {
    if NO_RULE_CUSTOM_CALLS.contains(&target) {
        return Ok(());
    }
    if POINTWISE_CUSTOM_CALLS.contains(&target) {
        let first = ops
            .first()
            .ok_or_else(|| format!("custom_call @{target} takes at least one operand"))?;
        for (i, t) in ops.iter().enumerate().skip(1) {
            same_shape(first, t, &format!("operand {i}"))?;
        }
        for (i, t) in res.iter().enumerate() {
            same_shape(first, t, &format!("result {i}"))?;
        }
        return Ok(());
    }
    match target {
        "X64Combine" => {
            arity("operand", ops, 2)?;
            arity("result", res, 1)?;
            same_shape(ops[0], ops[1], "operand 1")?;
            same_shape(ops[0], res[0], "result 0")
        }
        "Eigh" => {
            arity("operand", ops, 1)?;
            arity("result", res, 2)?;
            let (r, m, n) = matrix(ops[0], "the operand")?;
            if m != n {
                return Err(format!("the operand must be square, found {}", ops[0]));
            }
            same_shape(ops[0], res[0], "result 0 (eigenvectors)")?;
            if res[1].shape[..] != [&ops[0].shape[..r], &[n][..]].concat()[..] {
                return Err(format!(
                    "result 1 (eigenvalues) has type {}, expected the operand's batch dims and {n}",
                    res[1]
                ));
            }
            Ok(())
        }
        "Qr" | "QrDecompositionBlock" => {
            arity("operand", ops, 1)?;
            arity("result", res, 2)?;
            let (r, m, n) = matrix(ops[0], "the operand")?;
            same_shape(ops[0], res[0], "result 0")?;
            if res[1].shape[..] != [&ops[0].shape[..r], &[m.min(n)][..]].concat()[..] {
                return Err(format!(
                    "result 1 (taus) has type {}, expected the operand's batch dims and {}",
                    res[1],
                    m.min(n)
                ));
            }
            Ok(())
        }
        "ProductOfElementaryHouseholderReflectors" => {
            arity("operand", ops, 2)?;
            arity("result", res, 1)?;
            let (r, _, _) = matrix(ops[0], "operand 0")?;
            if ops[1].rank() != r + 1 || ops[1].shape[..r] != ops[0].shape[..r] {
                return Err(format!(
                    "operand 1 (taus) has type {}, expected operand 0's batch dims and one more",
                    ops[1]
                ));
            }
            same_shape(ops[0], res[0], "result 0")
        }
        "mhlo.topk" => {
            arity("operand", ops, 1)?;
            arity("result", res, 2)?;
            shortened(ops[0], res)
        }
        "ApproxTopK" | "PartialReduce" => {
            arity("operand", ops, 4)?;
            arity("result", res, 2)?;
            same_shape(ops[0], ops[1], "operand 1")?;
            for i in [2, 3] {
                if ops[i].rank() != 0 {
                    return Err(format!("operand {i} must be a scalar, found {}", ops[i]));
                }
            }
            shortened(ops[0], res)
        }
        _ => Err(format!("custom_call target @{target} is not supported")),
    }
}

/// Two results of one shape, the operand's but for one dim at most, which
/// is no longer than the operand's.
fn shortened(a: &TensorType, res: &[&TensorType]) -> Result<(), String> {
    same_shape(res[0], res[1], "result 1")?;
    let out = &res[0].shape;
    let changed: Vec<usize> = (0..a.rank())
        .filter(|&d| out.get(d) != a.shape.get(d))
        .collect();
    if out.len() != a.rank() || changed.len() > 1 || changed.iter().any(|&d| out[d] > a.shape[d]) {
        return Err(format!(
            "results have type {}, expected the operand's shape {a} with one dim shortened at most",
            res[0]
        ));
    }
    Ok(())
}
