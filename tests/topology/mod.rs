//! Topologies, memory scopes and device planning: preset figures against
//! ../shared/data/hardware.md, closed-form bisection bandwidths, routing
//! invariants, bad topology files, the TVM VirtualDevice seed document and
//! the PlanDevices solver, and the `shardsim topology` command line.

mod bisection;
mod cli;
mod files;
mod nics;
mod plan;
mod plan_program;
mod presets;
mod routing;
mod units;
mod virtual_device;
