//! Device planning after TVM's PlanDevices: virtual devices (device type,
//! virtual device id, target, memory scope) with `join` and `default`, and a
//! solver over a small dataflow description that places every value and op,
//! reports conflicting constraints by their sources, and lists the
//! `device_copy` ops to insert where a producer and a consumer disagree.

mod program;
mod solver;
mod virtual_device;

pub use program::{plan_func, plan_func_with, plan_module, CallHints, PlannedFunc};
pub use solver::{plan_devices, Dataflow, DeviceCopy, OpId, Plan, Port, ValueId};
pub use virtual_device::{DeviceType, Target, VirtualDevice};

/// Errors of device planning.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// A target whose device type differs from the virtual device's.
    #[error("target {target} runs on {target_type} but the device type is {device_type}")]
    TargetMismatch {
        target: String,
        target_type: String,
        device_type: String,
    },
    #[error("unknown target kind \"{0}\" (known: llvm, c, cuda, nvptx, rocm, opencl, vulkan, metal, webgpu, hexagon, ext_dev, tpu)")]
    UnknownTarget(String),
    #[error("bad virtual device \"{text}\": {reason} (expected e.g. (cuda, 0, cuda, global) with ? for unconstrained)")]
    BadText { text: String, reason: String },
    /// Two constraints that cannot both hold, with where each came from.
    #[error("conflicting device constraints on {place}: {first} from {first_source} and {second} from {second_source}")]
    Conflict {
        place: String,
        first: String,
        first_source: String,
        second: String,
        second_source: String,
    },
    #[error("bad dataflow: {0}")]
    BadDataflow(String),
}
