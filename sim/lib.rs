//! shardsim: a deterministic discrete-event simulator and cost-model testbed for
//! sharded (SPMD) tensor programs.
//!
//! Parts, lowest first (a part never imports one above it; see ARCHITECTURE.md):
//! `base` → `mesh` → `sharding` → (program IR, rules, propagation, partitioner,
//! topology, engine, collectives, execution, calibration, scenarios: added by later work).

pub mod base;
pub mod calibrate;
pub mod collective;
pub mod engine;
pub mod exec;
pub mod ir;
pub mod mesh;
pub mod models;
pub mod net;
pub mod partition;
pub mod plan;
pub mod propagate;
pub mod report;
pub mod rules;
pub mod runtime;
pub mod scenario;
pub mod sharding;
pub mod tensor;
pub mod topology;
