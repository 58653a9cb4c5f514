//! TF DTensor's mesh string, `name|x=2,y=4|0,1,...|0,1,...|/job:localhost/replica:0/task:0/device:CPU:0,...`,
//! and TVM's `R.device_mesh((2, 4), I.Range(0, 8))` form.

use super::{Mesh, MeshAxis, MeshError};

/// A mesh as TF DTensor names it: the mesh plus its name and device type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DTensorMesh {
    pub name: String,
    pub device_type: String,
    pub mesh: Mesh,
}

impl Mesh {
    /// TF DTensor's `to_string`: `name|dims|global ids|local ids|local devices`
    /// (every device is local in a simulation).
    pub fn to_dtensor_string(&self, name: &str, device_type: &str) -> String {
        let dims: Vec<String> = self
            .axes()
            .iter()
            .map(|a| format!("{}={}", a.name, a.size))
            .collect();
        let ids: Vec<String> = self.device_ids().iter().map(u64::to_string).collect();
        let devices: Vec<String> = self
            .device_ids()
            .iter()
            .map(|d| format!("/job:localhost/replica:0/task:0/device:{device_type}:{d}"))
            .collect();
        format!(
            "{name}|{}|{}|{}|{}",
            dims.join(","),
            ids.join(","),
            ids.join(","),
            devices.join(",")
        )
    }

    /// TF DTensor's `from_string`, the inverse of [`Mesh::to_dtensor_string`].
    pub fn from_dtensor_string(text: &str) -> Result<DTensorMesh, MeshError> {
        let bad =
            |what: &str| MeshError::Other(format!("bad DTensor mesh string: {what} in '{text}'"));
        let parts: Vec<&str> = text.trim().split('|').collect();
        if parts.len() < 5 {
            return Err(bad(
                "expected 5 '|'-separated fields (name|dims|global ids|local ids|devices)",
            ));
        }
        let mut axes = Vec::new();
        if !parts[1].is_empty() {
            for dim in parts[1].split(',') {
                let (n, s) = dim
                    .split_once('=')
                    .ok_or_else(|| bad(&format!("dimension '{dim}' is not name=size")))?;
                let size = s
                    .parse::<u64>()
                    .map_err(|_| bad(&format!("size '{s}' is not an integer")))?;
                axes.push(MeshAxis {
                    name: n.to_string(),
                    size,
                });
            }
        }
        let parse_ids = |field: &str| -> Result<Vec<u64>, MeshError> {
            if field.is_empty() {
                return Ok(Vec::new());
            }
            field
                .split(',')
                .map(|d| {
                    d.parse::<u64>()
                        .map_err(|_| bad(&format!("device id '{d}' is not an integer")))
                })
                .collect()
        };
        let global = parse_ids(parts[2])?;
        let local = parse_ids(parts[3])?;
        if local.iter().any(|d| !global.contains(d)) {
            return Err(bad("a local device id is not a global device id"));
        }
        let device_type = parts[4]
            .split(',')
            .next()
            .and_then(|d| d.rsplit('/').next())
            .and_then(|d| d.strip_prefix("device:"))
            .and_then(|d| d.split(':').next())
            .unwrap_or("CPU")
            .to_string();
        let mesh = Mesh::with_device_order(axes, global)?;
        Ok(DTensorMesh {
            name: parts[0].to_string(),
            device_type,
            mesh,
        })
    }

    /// TVM's printed form: `R.device_mesh((2, 4), I.Range(0, 8))`, or with an id list.
    pub fn to_tvm_text(&self) -> String {
        let shape: Vec<String> = self.shape().iter().map(u64::to_string).collect();
        let shape = if shape.len() == 1 {
            format!("({},)", shape[0])
        } else {
            format!("({})", shape.join(", "))
        };
        match self.explicit_device_ids() {
            None => format!("R.device_mesh({shape}, I.Range(0, {}))", self.num_devices()),
            Some(ids) => {
                let ids: Vec<String> = ids.iter().map(u64::to_string).collect();
                format!("R.device_mesh({shape}, [{}])", ids.join(", "))
            }
        }
    }
}
