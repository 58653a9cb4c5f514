//! MLIR text import and export: the pretty and generic forms JAX
//! (`jax.jit(f).lower(...).as_text()`) and XLA's Shardy dumps print.

mod dense;
mod lex;
mod parser;
mod printer;
mod structured;

pub use dense::format_float;
pub use parser::{parse_module, MAX_REGION_DEPTH};
pub use printer::{print_canonical, print_module};

use super::{verify_module, IrError, Module};

/// Parse and verify a module.
pub fn parse_and_verify(text: &str) -> Result<Module, IrError> {
    let m = parse_module(text)?;
    verify_module(&m)?;
    Ok(m)
}

/// Structural equality: same meshes, functions, ops, types, shardings, rules and
/// attributes, whatever the value names and source locations.
pub fn same_structure(a: &Module, b: &Module) -> bool {
    print_canonical(a) == print_canonical(b)
}
