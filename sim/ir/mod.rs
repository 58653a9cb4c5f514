//! The program IR: a typed SSA tensor program (module → `sdy.mesh` symbols and
//! functions → ops with regions), shape/type inference and a verifier, Shardy's
//! op sharding rules, and the MLIR text import/export in [`mlir`].

pub mod attrs;
pub mod inline;
pub mod interp;
pub mod loops;
pub mod mlir;
pub mod model;
pub mod ops;
pub mod rule;
pub mod verify;
mod verify_custom;
pub mod verify_linalg;
mod verify_sdy;
pub mod verify_structured;

pub use model::{
    Func, Loc, Module, Op, OpId, RawAttr, Region, Value, ValueDef, ValueId, Visibility,
};
pub use ops::{
    AllToAllParam, BinaryOp, Channel, CompareDir, CompareType, DenseValue, DeviceCollective,
    DotDims, OpKind, PropagationDirection, Scalar, TransposeA, UnaryOp,
};
pub use rule::OpShardingRule;
pub use verify::{infer_result_types, verify_module};

use crate::base::TextError;

/// An error reading or checking a program.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IrError {
    /// The text does not parse: `line:col: expected X, found Y`.
    #[error("{0}")]
    Parse(#[from] TextError),
    /// The program parses but breaks an op's rules.
    #[error("{loc}: '{op}' op {message}")]
    Verify {
        loc: Loc,
        op: String,
        message: String,
    },
}

impl IrError {
    /// Line and column of the error.
    pub fn line_col(&self) -> (usize, usize) {
        match self {
            IrError::Parse(e) => (e.line, e.col),
            IrError::Verify { loc, .. } => (loc.line as usize, loc.col as usize),
        }
    }

    /// The error with a file name in front: `file:line:col: ...`.
    pub fn in_file(&self, file: &str) -> String {
        format!("{file}:{self}")
    }
}
