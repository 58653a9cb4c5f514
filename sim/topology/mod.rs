//! Hardware topologies: a graph of devices (with FLOP/s and memory scopes),
//! switches, NICs, PCIe switches and hosts joined by directed links with
//! bandwidth and latency; reproducible routes as lists of link ids; presets
//! loaded from TOML files; mapping a device mesh onto the devices.

mod build;
mod graph;
mod load;
mod mesh_map;
mod presets;
mod route;
pub mod settings;
mod spec;
mod summary;
pub mod units;

pub use build::{FatTree, Pods, SemanticError};
pub use graph::{
    Component, ComponentId, ComponentKind, Link, LinkClass, LinkId, MemoryScope, RoutingPolicy,
    Topology,
};
pub use load::{load_path, load_text, parse_file_text, Override};
pub use mesh_map::MeshMapping;
pub use presets::{fit_radix, load, load_nodes, preset_names, preset_text, PRESETS};
pub use settings::{CollectiveSettings, Origin, Setting};
pub use spec::{
    collnet_enabled, nccl_release, DeviceKind, DeviceSpec, FabricSpec, Layout, MemorySpec,
    NetworkRouting, TopologyFile, CHOOSERS, CHOOSER_KEY, COLLNET_KEY, FORMAT_VERSION,
    NCCL_VERSIONS, NCCL_VERSION_KEY,
};
pub use summary::{NeighbourClass, Summary};
pub use units::{Bandwidth, ByteSize, Duration, FlopRate, UnitError};

/// Anything that goes wrong loading, building or querying a topology.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TopologyError {
    /// A bad topology file: where, which field, what is wrong.
    #[error("{file}:{}field `{field}`: {message}", position(*line, *col))]
    File {
        file: String,
        line: Option<usize>,
        col: Option<usize>,
        field: String,
        message: String,
    },
    #[error("--set {key}: {message}")]
    Override { key: String, message: String },
    #[error("unknown topology \"{name}\" ({known})")]
    UnknownPreset { name: String, known: String },
    /// `NAME:DIMS` with a different number of dimensions than the preset's
    /// layout has (`tpu-v4:4x4` on a 3-D torus).
    #[error(
        "topology \"{name}\": {preset} takes {want} dimension(s) such as {example}, not {got}"
    )]
    PresetDims {
        name: String,
        preset: String,
        want: usize,
        got: usize,
        example: String,
    },
    #[error("cannot read {path}: {message}")]
    Io { path: String, message: String },
    /// An input file that could not be read (too large, not UTF-8...).
    #[error(transparent)]
    Read(#[from] crate::base::files::FileError),
    #[error("no route from {from} to {to}")]
    NoRoute { from: String, to: String },
    #[error("no component {0}")]
    NoSuchComponent(String),
    #[error("no device {0} (the topology has devices 0..{1})")]
    NoSuchDevice(u32, u32),
    #[error("{device} has no memory scope \"{scope}\" (it has: {known})")]
    NoSuchScope {
        device: String,
        scope: String,
        known: String,
    },
    #[error("the mesh has {mesh} devices but the topology has {topology}")]
    MeshSize { mesh: u64, topology: u32 },
    #[error("{0}")]
    Mesh(#[from] crate::mesh::MeshError),
}

fn position(line: Option<usize>, col: Option<usize>) -> String {
    match (line, col) {
        (Some(l), Some(c)) => format!("{l}:{c}: "),
        _ => " ".to_string(),
    }
}
