//! Sharding rules: for every op of the IR, the factor-based
//! [`OpShardingRule`](crate::ir::OpShardingRule) Shardy gives it (how operand
//! and result dims map to factors, and which factors need reduction,
//! replication or permutation). The rules are checked against the
//! `sdy.sharding_rule` attributes that Shardy prints in the JAX fixtures.

mod builder;
mod custom_call;
mod registry;
mod structured;

pub use builder::RuleBuilder;
pub use registry::{rule_for, rule_for_mode, rule_for_types};
