//! Sharding propagation in Shardy's semantics: projections of tensor shardings
//! onto an op's factors, and factor propagation (basic and aggressive). The
//! program-level driver (worklist, op-priority and user-priority schedules)
//! builds on these.

mod calls;
mod clones;
mod dead;
pub mod driver;
pub mod factor;
mod groups;
mod manual;
mod meshes;
pub mod projection;
mod split;
mod unreduced;

pub use driver::{
    propagate_module, propagate_module_with, Options, PropagateError, Report, Step, Strategy,
};
pub use factor::{
    compatible_major_axes, propagate_factors, Direction, FactorContext, FactorStrategy, Updated,
};
pub use manual::free_part;
pub use projection::{
    is_strict_prefix, prefix_status, FactorSharding, PrefixStatus, Projection,
    TensorFactorShardings,
};
