//! TF DTensor's `MeshProto` (tensorflow/dtensor/proto/layout.proto) as prost
//! messages with the same field numbers and types, so bytes written by TF's
//! `Mesh.as_proto().SerializeToString()` decode here and ours decode there.

use prost::Message;

use super::{DTensorMesh, DeviceSpec, MeshAxis, MeshError};

/// `MeshDimensionProto`: a dimension's name and length.
#[derive(Clone, PartialEq, Message)]
pub struct MeshDimensionProto {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(int64, tag = "2")]
    pub size: i64,
}

/// `MeshProto`, field for field.
#[derive(Clone, PartialEq, Message)]
pub struct MeshProto {
    #[prost(message, repeated, tag = "1")]
    pub mesh_dimensions: Vec<MeshDimensionProto>,
    #[prost(int64, repeated, tag = "2")]
    pub global_device_ids: Vec<i64>,
    #[prost(string, tag = "3")]
    pub name: String,
    #[prost(int64, repeated, tag = "4")]
    pub local_device_ids: Vec<i64>,
    #[prost(string, repeated, tag = "5")]
    pub local_devices: Vec<String>,
    #[prost(string, repeated, tag = "6")]
    pub global_devices: Vec<String>,
    #[prost(bool, tag = "7")]
    pub use_xla_spmd: bool,
    /// Set only for a single-device mesh, which has no dimensions or ids.
    #[prost(string, tag = "8")]
    pub single_device: String,
}

impl DTensorMesh {
    /// TF's `as_proto`.
    pub fn as_proto(&self) -> MeshProto {
        let ids = |v: &[u64]| v.iter().map(|&d| d as i64).collect();
        MeshProto {
            mesh_dimensions: self
                .mesh()
                .axes()
                .iter()
                .map(|a| MeshDimensionProto {
                    name: a.name.clone(),
                    size: a.size as i64,
                })
                .collect(),
            global_device_ids: ids(self.global_device_ids()),
            name: self.name().to_string(),
            local_device_ids: ids(self.local_device_ids()),
            local_devices: self.local_devices(),
            global_devices: self.global_devices().unwrap_or_default(),
            use_xla_spmd: self.use_xla_spmd(),
            single_device: String::new(),
        }
    }

    /// The serialized `MeshProto`.
    pub fn to_proto_bytes(&self) -> Vec<u8> {
        self.as_proto().encode_to_vec()
    }

    /// TF's `from_proto`, with every rule of [`DTensorMesh::new`] checked.
    pub fn from_proto(proto: &MeshProto) -> Result<DTensorMesh, MeshError> {
        if !proto.single_device.is_empty() {
            return Err(MeshError::BadProto(format!(
                "single-device mesh '{}' has no dimensions; not supported",
                proto.single_device
            )));
        }
        let non_negative = |v: i64, what: &str| {
            u64::try_from(v).map_err(|_| MeshError::BadProto(format!("{what} {v} is negative")))
        };
        let dims = proto
            .mesh_dimensions
            .iter()
            .map(|d| {
                Ok(MeshAxis {
                    name: d.name.clone(),
                    size: non_negative(d.size, "dimension size")?,
                })
            })
            .collect::<Result<Vec<_>, MeshError>>()?;
        let ids = |v: &[i64], what: &str| -> Result<Vec<u64>, MeshError> {
            v.iter().map(|&d| non_negative(d, what)).collect()
        };
        let devices = |v: &[String]| -> Result<Vec<DeviceSpec>, MeshError> {
            v.iter().map(|d| DeviceSpec::parse(d)).collect()
        };
        DTensorMesh::new(
            &proto.name,
            dims,
            ids(&proto.global_device_ids, "global device id")?,
            ids(&proto.local_device_ids, "local device id")?,
            devices(&proto.local_devices)?,
            devices(&proto.global_devices)?,
            proto.use_xla_spmd,
        )
    }

    /// Decode serialized `MeshProto` bytes and check them.
    pub fn from_proto_bytes(bytes: &[u8]) -> Result<DTensorMesh, MeshError> {
        let proto = MeshProto::decode(bytes)
            .map_err(|e| MeshError::BadProto(format!("not a MeshProto: {e}")))?;
        DTensorMesh::from_proto(&proto)
    }
}
