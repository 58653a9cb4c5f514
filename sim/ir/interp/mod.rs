//! The reference interpreter: evaluates a module on one device with real data,
//! ignoring shardings. Every kernel comes from [`crate::tensor`] (dot and
//! reduce accumulate floats in f64 and round once). This is the numerics
//! reference for the partitioner, the executor and the collectives.
//!
//! Sharding ops (`sharding_constraint`, `reshard`, barriers, data-flow edges)
//! and the sdy collectives are identities on the global value; named
//! computations and calls evaluate their bodies; a `manual_computation` body is
//! per-device code, run for every device of the mesh in lockstep with its
//! device collectives (see [`manual`]).

mod custom;
mod eval;
mod linalg;
pub mod manual;
mod select_scatter;
mod structured;

use crate::base::TensorType;
use crate::tensor::{Tensor, TensorError};

use super::{Func, Loc, Module};

pub use eval::{eval_func, eval_single_op, reduce_kind_of, taken_branch};

/// Why a program could not be evaluated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InterpError {
    /// The inputs do not match the entry function's signature.
    #[error("{0}")]
    Inputs(String),
    /// An op failed (bad parameters the verifier let through, unsupported op, ...).
    #[error("{loc}: '{op}': {message}")]
    Op {
        loc: Loc,
        op: String,
        message: String,
    },
    #[error("no function @{0}")]
    NoFunction(String),
}

impl InterpError {
    pub(crate) fn op(loc: Loc, op: &str, e: impl ToString) -> InterpError {
        InterpError::Op {
            loc,
            op: op.to_string(),
            message: e.to_string(),
        }
    }
}

impl From<(Loc, &str, TensorError)> for InterpError {
    fn from((loc, op, e): (Loc, &str, TensorError)) -> Self {
        InterpError::op(loc, op, e)
    }
}

/// The entry arguments from `inputs`: a `!stablehlo.token` argument holds no
/// data, so inputs may leave tokens out (one per other argument, in order)
/// and each token argument then gets a fresh token.
pub fn complete_inputs(func: &Func, inputs: &[Tensor]) -> Vec<Tensor> {
    let types = func.arg_types();
    let tokens = types.iter().filter(|t| t.is_token()).count();
    if tokens == 0 || inputs.len() != types.len() - tokens {
        return inputs.to_vec();
    }
    let mut given = inputs.iter();
    types
        .iter()
        .map(|t| match t.is_token() {
            true => Tensor::token(),
            false => given.next().cloned().unwrap_or_else(Tensor::token),
        })
        .collect()
}

/// Check `inputs` against `func`'s argument types, naming the first mismatch.
pub fn check_inputs(func: &Func, inputs: &[Tensor]) -> Result<(), InterpError> {
    let want = func.arg_types();
    if want.len() != inputs.len() {
        return Err(InterpError::Inputs(format!(
            "@{} takes {} arguments but {} inputs were given",
            func.name,
            want.len(),
            inputs.len()
        )));
    }
    for (i, (w, t)) in want.iter().zip(inputs).enumerate() {
        let got = TensorType::new(t.shape().to_vec(), t.dtype());
        if &got != w {
            return Err(InterpError::Inputs(format!(
                "input {i} is {got} but argument {i} of @{} is {w}",
                func.name
            )));
        }
    }
    Ok(())
}

/// Evaluate the module's entry function on `inputs`.
pub fn interpret(module: &Module, inputs: &[Tensor]) -> Result<Vec<Tensor>, InterpError> {
    let func = module
        .entry()
        .ok_or_else(|| InterpError::NoFunction("main".into()))?;
    let inputs = complete_inputs(func, inputs);
    check_inputs(func, &inputs)?;
    eval_func(module, func, inputs)
}
