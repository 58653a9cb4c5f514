//! The device mesh: named axes (major to minor) and the device at each position.

use std::collections::BTreeMap;

use serde::Serialize;

use super::{MeshAxis, MeshError};

/// Device ids of a TVM `DeviceMesh`: an explicit list or a `Range(start, stop, step)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceIds {
    List(Vec<u64>),
    Range { start: u64, stop: u64, step: u64 },
}

impl DeviceIds {
    /// The ids in order.
    pub fn to_vec(&self) -> Result<Vec<u64>, MeshError> {
        match self {
            DeviceIds::List(v) => Ok(v.clone()),
            DeviceIds::Range { start, stop, step } => {
                if *step == 0 {
                    return Err(MeshError::Other("Range step must be positive".into()));
                }
                if stop <= start {
                    return Err(MeshError::Other(format!(
                        "Range({start}, {stop}, {step}) is empty"
                    )));
                }
                let count = stop.saturating_sub(*start).div_ceil(*step);
                if count > MAX_DEVICES {
                    return Err(MeshError::TooManyDevices(count));
                }
                Ok((*start..*stop).step_by(*step as usize).collect())
            }
        }
    }
}

/// The most devices a mesh may have (as many as the largest topology): larger
/// meshes are refused before anything per device is allocated.
pub const MAX_DEVICES: u64 = 1 << 16;

/// A device mesh. Device ids are `None` when they are `iota(product(axes))`
/// (Shardy's implicit order); a mesh without axes is the maximal mesh of one device.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct Mesh {
    axes: Vec<MeshAxis>,
    device_ids: Option<Vec<u64>>,
    #[serde(skip)]
    strides: Vec<u64>,
}

impl Mesh {
    /// A mesh with named axes and implicit (iota) device ids.
    pub fn new(axes: Vec<MeshAxis>) -> Result<Mesh, MeshError> {
        Mesh::with_device_ids(axes, None)
    }

    /// Convenience: axes from `(name, size)` pairs, iota device ids.
    pub fn from_pairs(pairs: &[(&str, u64)]) -> Result<Mesh, MeshError> {
        Mesh::new(
            pairs
                .iter()
                .map(|(n, s)| MeshAxis {
                    name: n.to_string(),
                    size: *s,
                })
                .collect(),
        )
    }

    /// A mesh with an explicit device order, checked as Shardy checks it:
    /// a permutation of `0..n`, not equal to iota (which must be omitted);
    /// a mesh without axes takes exactly one device id of any value.
    pub fn with_device_ids(
        axes: Vec<MeshAxis>,
        device_ids: Option<Vec<u64>>,
    ) -> Result<Mesh, MeshError> {
        for (i, a) in axes.iter().enumerate() {
            if a.size < 1 {
                return Err(MeshError::BadAxisSize {
                    name: a.name.clone(),
                    size: a.size,
                });
            }
            if axes[..i].iter().any(|b| b.name == a.name) {
                return Err(MeshError::DuplicateAxis(a.name.clone()));
            }
        }
        let total = axes
            .iter()
            .try_fold(1u64, |acc, a| acc.checked_mul(a.size))
            .ok_or_else(|| MeshError::Other("mesh size overflows 64 bits".into()))?;
        if total > MAX_DEVICES {
            return Err(MeshError::TooManyDevices(total));
        }
        if let Some(ids) = &device_ids {
            if axes.is_empty() {
                if ids.len() != 1 {
                    return Err(MeshError::MaximalDeviceCount(ids.len()));
                }
            } else {
                if ids.len() as u64 != total {
                    return Err(MeshError::DeviceCount {
                        expected: total,
                        found: ids.len(),
                    });
                }
                let mut sorted = ids.clone();
                sorted.sort_unstable();
                if sorted.iter().enumerate().any(|(i, &d)| d != i as u64) {
                    return Err(MeshError::NotPermutation(total, format!("{ids:?}")));
                }
                if ids.iter().enumerate().all(|(i, &d)| d == i as u64) {
                    return Err(MeshError::IotaDeviceIds(total));
                }
            }
        }
        let mut strides = vec![1u64; axes.len()];
        for i in (0..axes.len().saturating_sub(1)).rev() {
            strides[i] = strides[i + 1] * axes[i + 1].size;
        }
        Ok(Mesh {
            axes,
            device_ids,
            strides,
        })
    }

    /// Like [`Mesh::with_device_ids`] but an explicit list equal to iota is
    /// accepted and dropped (for front ends other than Shardy's text).
    pub fn with_device_order(axes: Vec<MeshAxis>, device_ids: Vec<u64>) -> Result<Mesh, MeshError> {
        // Only a complete iota list is dropped: a short one (`0,1,2` for 8
        // devices) must reach the count check.
        let total = axes.iter().try_fold(1u64, |acc, a| acc.checked_mul(a.size));
        let iota = total == Some(device_ids.len() as u64)
            && device_ids.iter().enumerate().all(|(i, &d)| d == i as u64);
        if iota && !axes.is_empty() {
            Mesh::with_device_ids(axes, None)
        } else {
            Mesh::with_device_ids(axes, Some(device_ids))
        }
    }

    /// TVM's `DeviceMesh(shape, device_ids | Range)`. Axes are unnamed in TVM;
    /// they get the names `names` (or `d0`, `d1`, ... when `names` is empty).
    pub fn tvm(shape: &[u64], device_ids: DeviceIds, names: &[String]) -> Result<Mesh, MeshError> {
        if !names.is_empty() && names.len() != shape.len() {
            return Err(MeshError::Other(format!(
                "{} axis names given for a {}-dimensional mesh",
                names.len(),
                shape.len()
            )));
        }
        let axes = shape
            .iter()
            .enumerate()
            .map(|(i, &size)| MeshAxis {
                name: names.get(i).cloned().unwrap_or_else(|| format!("d{i}")),
                size,
            })
            .collect();
        Mesh::with_any_device_ids(axes, device_ids.to_vec()?)
    }

    /// A mesh over any distinct device ids (TVM's `DeviceMesh` takes ids that
    /// need not be `0..n`, e.g. the second half of a machine); a list equal to
    /// iota is dropped. Shardy's text cannot print such a mesh; TVM's can.
    pub fn with_any_device_ids(
        axes: Vec<MeshAxis>,
        device_ids: Vec<u64>,
    ) -> Result<Mesh, MeshError> {
        let mut sorted = device_ids.clone();
        sorted.sort_unstable();
        if sorted.iter().enumerate().all(|(i, &d)| d == i as u64) {
            return Mesh::with_device_order(axes, device_ids);
        }
        let mut mesh = Mesh::new(axes)?;
        if device_ids.len() as u64 != mesh.num_devices() {
            return Err(MeshError::DeviceCount {
                expected: mesh.num_devices(),
                found: device_ids.len(),
            });
        }
        if let Some(w) = sorted.windows(2).find(|w| w[0] == w[1]) {
            return Err(MeshError::Other(format!(
                "device id {} is listed twice",
                w[0]
            )));
        }
        mesh.device_ids = Some(device_ids);
        Ok(mesh)
    }

    /// The empty mesh `<[]>` (one implicit device 0).
    pub fn empty() -> Mesh {
        Mesh::with_device_ids(Vec::new(), None).expect("empty mesh is valid")
    }

    /// The maximal mesh `<[], device_ids=[d]>`: everything on one device.
    pub fn maximal(device: u64) -> Mesh {
        Mesh::with_device_ids(Vec::new(), Some(vec![device])).expect("maximal mesh is valid")
    }

    /// Axes, major to minor.
    pub fn axes(&self) -> &[MeshAxis] {
        &self.axes
    }

    /// Explicit device ids, if any (None means iota).
    pub fn explicit_device_ids(&self) -> Option<&[u64]> {
        self.device_ids.as_deref()
    }

    /// True for a mesh with no axes and an explicit device id.
    pub fn is_maximal(&self) -> bool {
        self.axes.is_empty() && self.device_ids.is_some()
    }

    /// Number of devices.
    pub fn num_devices(&self) -> u64 {
        self.axes.iter().map(|a| a.size).product()
    }

    /// Sizes of the axes (the mesh shape).
    pub fn shape(&self) -> Vec<u64> {
        self.axes.iter().map(|a| a.size).collect()
    }

    /// Axis names, major to minor (TF DTensor `dim_names`).
    pub fn dim_names(&self) -> Vec<&str> {
        self.axes.iter().map(|a| a.name.as_str()).collect()
    }

    /// True when the mesh has an axis `name` (TF DTensor `contains_dim`).
    pub fn contains_dim(&self, name: &str) -> bool {
        self.axes.iter().any(|a| a.name == name)
    }

    /// Position of axis `name`.
    pub fn axis_index(&self, name: &str) -> Result<usize, MeshError> {
        self.axes
            .iter()
            .position(|a| a.name == name)
            .ok_or_else(|| {
                MeshError::UnknownAxis(name.to_string(), format!("{:?}", self.dim_names()))
            })
    }

    /// Size of axis `name` (TF DTensor `dim_size`).
    pub fn axis_size(&self, name: &str) -> Result<u64, MeshError> {
        Ok(self.axes[self.axis_index(name)?].size)
    }

    /// Alias of [`Mesh::axis_size`] with TF DTensor's name.
    pub fn dim_size(&self, name: &str) -> Result<u64, MeshError> {
        self.axis_size(name)
    }

    /// Row-major strides of the mesh positions: for shape `[a, b, c, d]`, `[b*c*d, c*d, d, 1]`.
    pub fn strides(&self) -> &[u64] {
        &self.strides
    }

    /// Device id at mesh position `pos` (row-major over the axes).
    pub fn device_at(&self, pos: u64) -> u64 {
        match &self.device_ids {
            Some(ids) => ids[pos as usize],
            None => pos,
        }
    }

    /// All device ids in mesh-position order.
    pub fn device_ids(&self) -> Vec<u64> {
        match &self.device_ids {
            Some(ids) => ids.clone(),
            None => (0..self.num_devices()).collect(),
        }
    }

    /// Mesh position of device `device`.
    pub fn position_of(&self, device: u64) -> Result<u64, MeshError> {
        match &self.device_ids {
            Some(ids) => ids
                .iter()
                .position(|&d| d == device)
                .map(|p| p as u64)
                .ok_or(MeshError::UnknownDevice(device)),
            None if device < self.num_devices() => Ok(device),
            None => Err(MeshError::UnknownDevice(device)),
        }
    }

    /// Coordinates of mesh position `pos`: `(pos // strides) % shape`.
    pub fn coords_of_position(&self, pos: u64) -> Vec<u64> {
        self.axes
            .iter()
            .zip(&self.strides)
            .map(|(a, &s)| (pos / s) % a.size)
            .collect()
    }

    /// Coordinates of device `device` (TF DTensor `coords`).
    pub fn coords(&self, device: u64) -> Result<Vec<u64>, MeshError> {
        Ok(self.coords_of_position(self.position_of(device)?))
    }

    /// Mesh position of the given coordinates.
    pub fn position_of_coords(&self, coords: &[u64]) -> u64 {
        coords.iter().zip(&self.strides).map(|(c, s)| c * s).sum()
    }

    /// TF DTensor's `unravel_index`: device id -> {dim name: index}, ordered by device id.
    pub fn unravel_index(&self) -> BTreeMap<u64, Vec<(String, u64)>> {
        (0..self.num_devices())
            .map(|pos| {
                let coords = self.coords_of_position(pos);
                let named = self
                    .axes
                    .iter()
                    .zip(coords)
                    .map(|(a, c)| (a.name.clone(), c))
                    .collect();
                (self.device_at(pos), named)
            })
            .collect()
    }
}
