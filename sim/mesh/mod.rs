//! Device meshes in the three views the seed documents give them:
//! Shardy (named axes, optional device order, sub-axes), TF DTensor (dim names,
//! strides, coordinates) and TVM (`DeviceMesh(shape, device_ids | Range)`),
//! plus the device groups a collective over a set of axes runs on.

mod axis;
mod device_mesh;
mod dtensor;
mod dtensor_proto;
mod groups;
mod shardy_text;
mod tvm_text;

pub use axis::{push_or_merge, AxisRef, MeshAxis, SubAxis};
pub use device_mesh::{DeviceIds, Mesh};
pub use dtensor::{DTensorMesh, DeviceSpec, USE_XLA_SPMD};
pub use dtensor_proto::{MeshDimensionProto, MeshProto};

/// A mesh or axis that breaks a rule (unknown axis, bad size, bad device list...).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MeshError {
    #[error("duplicate mesh axis name \"{0}\"")]
    DuplicateAxis(String),
    #[error("mesh axis \"{name}\" has size {size}; sizes must be at least 1")]
    BadAxisSize { name: String, size: u64 },
    #[error("mesh has {expected} devices (product of axis sizes) but device_ids lists {found}")]
    DeviceCount { expected: u64, found: usize },
    #[error("device_ids must be a permutation of 0..{0}: {1}")]
    NotPermutation(u64, String),
    #[error("device_ids equal to iota(0..{0}) must be omitted (Shardy requires it)")]
    IotaDeviceIds(u64),
    #[error("a mesh without axes (maximal mesh) takes exactly one device id, found {0}")]
    MaximalDeviceCount(usize),
    #[error("unknown axis \"{0}\" (mesh axes: {1})")]
    UnknownAxis(String, String),
    #[error("{0}")]
    BadSubAxis(String),
    #[error("axis {0} is used twice")]
    DuplicateAxisRef(String),
    #[error("overlapping axes: {0} and {1}")]
    OverlappingAxes(String, String),
    #[error("device {0} is not in the mesh")]
    UnknownDevice(u64),
    #[error("mesh has {0} devices; at most 65536 are supported")]
    TooManyDevices(u64),
    #[error("{0}")]
    DTensorIds(String),
    #[error("bad device name \"{0}\": {1} (expected /job:NAME/replica:N/task:N/device:TYPE:N)")]
    BadDevice(String, String),
    #[error("bad DTensor mesh string: {0}")]
    BadDTensorString(String),
    #[error("bad MeshProto: {0}")]
    BadProto(String),
    #[error("{0}")]
    Other(String),
}
