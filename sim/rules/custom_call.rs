//! Rules of the custom-call targets Shardy's registry knows (linear algebra,
//! top-k, x64 emulation, host and debug markers): pointwise markers map every
//! dim to one factor; Eigh, Qr and the Householder product make their leading
//! dims batch factors and give the matrix dims factors of their own; top-k
//! and approximate top-k give the shortened dim a factor that needs
//! replication and blocks propagation; X64Combine feeding an
//! rng_bit_generator state is replicated and never propagates.

use crate::base::TensorType;
use crate::ir::attrs::{IDENTITY_CUSTOM_CALLS, POINTWISE_CUSTOM_CALLS};
use crate::ir::OpShardingRule;

use super::builder::{FactorKind, RuleBuilder};

/// Shardy's rule for a custom call to `target` with these types;
/// `feeds_rng_state`: its result is the state of an rng_bit_generator.
/// None for targets without a rule (host callbacks, debug logs) or types
/// the rule cannot describe.
pub fn custom_call_rule(
    target: &str,
    operands: &[&TensorType],
    results: &[&TensorType],
    feeds_rng_state: bool,
) -> Option<OpShardingRule> {
    let op_ranks: Vec<usize> = operands.iter().map(|t| t.rank()).collect();
    let res_ranks: Vec<usize> = results.iter().map(|t| t.rank()).collect();
    let mut b = RuleBuilder::new(&op_ranks, &res_ranks);
    let default = |_: usize| FactorKind::Default;
    let first_in = operands.first().map(|t| t.shape.as_slice());
    match target {
        "X64Combine" if feeds_rng_state => {
            // The rng state must stay replicated, and a ui64 value cannot be
            // resharded: one blocked factor that needs replication.
            let out = &results.first()?.shape;
            if out.len() != 1 {
                return None;
            }
            let f = b.factor(
                &vec![Some(0); operands.len()],
                &[Some(0)],
                out[0],
                FactorKind::NeedReplication,
            );
            b.block(f);
        }
        t if t == "Sharding"
            || t == "X64Combine"
            || POINTWISE_CUSTOM_CALLS.contains(&t)
            || IDENTITY_CUSTOM_CALLS.contains(&t) =>
        {
            let shape = results.first().or(operands.first())?.shape.as_slice();
            b.pointwise(shape, &op_ranks, &res_ranks, &default);
        }
        "Eigh" => {
            // Batch dims, then the rows (eigenvectors only) and the columns
            // (eigenvectors' columns and the eigenvalues' last dim).
            let a = first_in?;
            let r = a.len().checked_sub(2)?;
            batch(&mut b, &a[..r], &op_ranks, &res_ranks);
            b.factor(&[Some(r)], &[Some(r), None], a[r], FactorKind::Default);
            b.factor(
                &[Some(r + 1)],
                &[Some(r + 1), Some(r)],
                a[r + 1],
                FactorKind::Default,
            );
        }
        "Qr" | "QrDecompositionBlock" => {
            // The matrix dims and the taus' dim all need replication.
            let a = first_in?;
            let r = a.len().checked_sub(2)?;
            let taus = results.get(1)?.shape.get(r)?;
            batch(&mut b, &a[..r], &op_ranks, &res_ranks);
            b.factor(
                &[Some(r)],
                &[Some(r), None],
                a[r],
                FactorKind::NeedReplication,
            );
            b.factor(
                &[Some(r + 1)],
                &[Some(r + 1), None],
                a[r + 1],
                FactorKind::NeedReplication,
            );
            b.factor(&[], &[None, Some(r)], *taus, FactorKind::NeedReplication);
        }
        "ProductOfElementaryHouseholderReflectors" => {
            let a = first_in?;
            let r = a.len().checked_sub(2)?;
            let taus = operands.get(1)?.shape.get(r)?;
            batch(&mut b, &a[..r], &op_ranks, &res_ranks);
            b.factor(
                &[Some(r), None],
                &[Some(r)],
                a[r],
                FactorKind::NeedReplication,
            );
            b.factor(
                &[Some(r + 1), None],
                &[Some(r + 1)],
                a[r + 1],
                FactorKind::NeedReplication,
            );
            b.factor(
                &[None, Some(r)],
                &[None],
                *taus,
                FactorKind::NeedReplication,
            );
        }
        "mhlo.topk" => {
            // Dims of equal size are pointwise; the shortened one takes the
            // operand's size, needs replication and is blocked.
            let (a, out) = (first_in?, &results.first()?.shape);
            if a.len() != out.len() {
                return None;
            }
            for (d, (&i, &o)) in a.iter().zip(out).enumerate() {
                let all = [Some(d)];
                let f = b.factor(
                    &all,
                    &[Some(d), Some(d)],
                    i,
                    if i == o {
                        FactorKind::Default
                    } else {
                        FactorKind::NeedReplication
                    },
                );
                if i != o {
                    b.block(f);
                }
            }
        }
        "ApproxTopK" | "PartialReduce" => {
            // Operands: values, iota, two scalar inits; the reduced dim has
            // one factor in the operands and another, blocked and needing
            // replication, in the results.
            let (a, out) = (first_in?, &results.first()?.shape);
            if a.len() != out.len() {
                return None;
            }
            for (d, (&i, &o)) in a.iter().zip(out).enumerate() {
                if i == o {
                    b.factor(
                        &[Some(d), Some(d)],
                        &[Some(d), Some(d)],
                        i,
                        FactorKind::Default,
                    );
                } else {
                    b.factor(&[Some(d), Some(d)], &[], i, FactorKind::Default);
                    let f = b.factor(&[], &[Some(d), Some(d)], o, FactorKind::NeedReplication);
                    b.block(f);
                }
            }
        }
        _ => return None,
    }
    Some(b.build())
}

/// One factor per leading (batch) dim, mapped to that dim of every tensor.
fn batch(b: &mut RuleBuilder, dims: &[u64], op_ranks: &[usize], res_ranks: &[usize]) {
    for (d, &size) in dims.iter().enumerate() {
        let at = |r: &usize| (*r > d).then_some(d);
        let ops: Vec<Option<usize>> = op_ranks.iter().map(at).collect();
        let res: Vec<Option<usize>> = res_ranks.iter().map(at).collect();
        b.factor(&ops, &res, size, FactorKind::Default);
    }
}
