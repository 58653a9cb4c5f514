//! TF DTensor's `Mesh`: named dimensions over global device ids (sequential),
//! the ids and device names local to one client, optional global device names,
//! its string form (`name|x=2,y=4|0,...|0,...|/job:localhost/replica:0/task:0/device:GPU:0,...`)
//! and its protobuf form (`MeshProto`, see [`super::dtensor_proto`]).
//!
//! Rules checked at construction, after TF's `Mesh.__init__`/`Mesh::GetMesh`:
//! global ids increase by one from 0 (from their minimum when `global_devices`
//! is given: one mesh among several); local ids are distinct global ids, one
//! per local device; devices parse as `/job:J[/replica:R]/task:T/device:TYPE:N`
//! and share one device type. [`DTensorMesh::check_clients`] checks the rule
//! across clients: the same global mesh, local ids disjoint and covering.

use std::fmt;

use super::{Mesh, MeshAxis, MeshError};

/// A device name: `/job:localhost/replica:0/task:0/device:GPU:3`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DeviceSpec {
    pub job: String,
    pub replica: Option<u64>,
    pub task: u64,
    pub device_type: String,
    pub id: u64,
}

impl DeviceSpec {
    /// The device on `job`/replica 0/`task` of type `device_type` with ordinal `id`.
    pub fn new(job: &str, task: u64, device_type: &str, id: u64) -> DeviceSpec {
        DeviceSpec {
            job: job.to_string(),
            replica: Some(0),
            task,
            device_type: device_type.to_string(),
            id,
        }
    }

    /// Parse a full device name; job, task and device (type and ordinal) are required.
    pub fn parse(text: &str) -> Result<DeviceSpec, MeshError> {
        let bad = |why: &str| MeshError::BadDevice(text.to_string(), why.to_string());
        let mut job = None;
        let mut replica = None;
        let mut task = None;
        let mut device = None;
        let rest = text
            .strip_prefix('/')
            .ok_or_else(|| bad("a device name starts with '/'"))?;
        for part in rest.split('/') {
            let (key, value) = part
                .split_once(':')
                .ok_or_else(|| bad("each part is key:value"))?;
            let number = |v: &str| v.parse::<u64>().map_err(|_| bad("not a number"));
            match key {
                "job" if job.is_none() && !value.is_empty() => job = Some(value.to_string()),
                "replica" if replica.is_none() => replica = Some(number(value)?),
                "task" if task.is_none() => task = Some(number(value)?),
                "device" if device.is_none() => {
                    let (t, n) = value
                        .rsplit_once(':')
                        .ok_or_else(|| bad("device is TYPE:ordinal"))?;
                    if t.is_empty() || !t.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                        return Err(bad("device type must be a word such as CPU, GPU or TPU"));
                    }
                    device = Some((t.to_string(), number(n)?));
                }
                _ => return Err(bad(&format!("unexpected or repeated part '{key}'"))),
            }
        }
        let (device_type, id) = device.ok_or_else(|| bad("no device:TYPE:ordinal part"))?;
        Ok(DeviceSpec {
            job: job.ok_or_else(|| bad("no job part"))?,
            replica,
            task: task.ok_or_else(|| bad("no task part"))?,
            device_type,
            id,
        })
    }

    /// The same device slot with another device type (TF's `spec.replace(device_type=...)`).
    pub fn with_type(&self, device_type: &str) -> DeviceSpec {
        DeviceSpec {
            device_type: device_type.to_string(),
            ..self.clone()
        }
    }
}

impl fmt::Display for DeviceSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "/job:{}", self.job)?;
        if let Some(r) = self.replica {
            write!(f, "/replica:{r}")?;
        }
        write!(
            f,
            "/task:{}/device:{}:{}",
            self.task, self.device_type, self.id
        )
    }
}

/// The marker TF appends to a mesh string when ops on it use XLA SPMD.
pub const USE_XLA_SPMD: &str = "use_xla_spmd";

/// A TF DTensor mesh as one client sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DTensorMesh {
    name: String,
    /// The mesh dimensions over mesh positions; its device ids are the local
    /// devices' ordinals when one task holds every device, positions otherwise.
    mesh: Mesh,
    global_device_ids: Vec<u64>,
    local_device_ids: Vec<u64>,
    local_devices: Vec<DeviceSpec>,
    global_devices: Vec<DeviceSpec>,
    use_xla_spmd: bool,
}

impl DTensorMesh {
    /// A mesh, checked as TF checks it (see the module doc).
    pub fn new(
        name: &str,
        dims: Vec<MeshAxis>,
        global_device_ids: Vec<u64>,
        local_device_ids: Vec<u64>,
        local_devices: Vec<DeviceSpec>,
        global_devices: Vec<DeviceSpec>,
        use_xla_spmd: bool,
    ) -> Result<DTensorMesh, MeshError> {
        let logical = Mesh::new(dims)?;
        let n = logical.num_devices();
        if global_device_ids.is_empty() {
            return Err(MeshError::DTensorIds(
                "global_device_ids must be non-empty".into(),
            ));
        }
        if global_device_ids.len() as u64 != n {
            return Err(MeshError::DeviceCount {
                expected: n,
                found: global_device_ids.len(),
            });
        }
        let first = global_device_ids[0];
        if first != 0 && global_devices.is_empty() {
            return Err(MeshError::DTensorIds(format!(
                "global_device_ids must increase sequentially from 0, found {first} first \
                 (a mesh starting elsewhere is one of several and lists its global_devices)"
            )));
        }
        if let Some((i, g)) = global_device_ids
            .iter()
            .enumerate()
            .find(|(i, &g)| Some(g) != first.checked_add(*i as u64))
        {
            return Err(MeshError::DTensorIds(format!(
                "global_device_ids must increase sequentially: position {i} holds {g}, expected {}",
                first.saturating_add(i as u64)
            )));
        }
        if local_device_ids.len() != local_devices.len() {
            return Err(MeshError::DTensorIds(format!(
                "{} local_device_ids but {} local_devices; they correspond 1:1",
                local_device_ids.len(),
                local_devices.len()
            )));
        }
        if local_devices.is_empty() && global_devices.is_empty() {
            return Err(MeshError::DTensorIds(
                "a mesh needs local devices or global devices".into(),
            ));
        }
        let mut seen = std::collections::BTreeSet::new();
        for &l in &local_device_ids {
            if l < first || l - first >= n {
                return Err(MeshError::DTensorIds(format!(
                    "local device id {l} is not a global device id ({first}..{})",
                    first + n
                )));
            }
            if !seen.insert(l) {
                return Err(MeshError::DTensorIds(format!(
                    "local device id {l} is listed twice"
                )));
            }
        }
        // TF allows one host CPU to stand for every local device; otherwise distinct.
        let mut names = std::collections::BTreeSet::new();
        let one_host_cpu = local_devices.windows(2).all(|w| w[0] == w[1])
            && local_devices
                .first()
                .is_some_and(|d| d.device_type == "CPU");
        if !one_host_cpu {
            if let Some(d) = local_devices.iter().find(|d| !names.insert(d.to_string())) {
                return Err(MeshError::DTensorIds(format!("device {d} is listed twice")));
            }
        }
        if !global_devices.is_empty() && global_devices.len() as u64 != n {
            return Err(MeshError::DTensorIds(format!(
                "{} global_devices for a mesh of {n} devices",
                global_devices.len()
            )));
        }
        let types: std::collections::BTreeSet<&str> = local_devices
            .iter()
            .chain(&global_devices)
            .map(|d| d.device_type.as_str())
            .collect();
        if types.len() > 1 {
            return Err(MeshError::DTensorIds(format!(
                "devices of several types in one mesh: {}",
                types.into_iter().collect::<Vec<_>>().join(", ")
            )));
        }
        let mesh =
            Self::physical(&logical, first, &local_device_ids, &local_devices).unwrap_or(logical);
        Ok(DTensorMesh {
            name: name.to_string(),
            mesh,
            global_device_ids,
            local_device_ids,
            local_devices,
            global_devices,
            use_xla_spmd,
        })
    }

    /// The mesh with the local devices' ordinals as device order, when one
    /// task holds every device and the ordinals are a permutation.
    fn physical(logical: &Mesh, first: u64, local: &[u64], devices: &[DeviceSpec]) -> Option<Mesh> {
        let n = logical.num_devices();
        if local.len() as u64 != n || devices.windows(2).any(|w| w[0].task != w[1].task) {
            return None;
        }
        let mut order = vec![0u64; n as usize];
        for (&l, d) in local.iter().zip(devices) {
            order[(l - first) as usize] = d.id;
        }
        Mesh::with_device_order(logical.axes().to_vec(), order).ok()
    }

    /// Every device local to one client: global and local ids `0..n`, device
    /// `i` of the mesh order named `/job:localhost/replica:0/task:0/device:TYPE:id`.
    pub fn from_mesh(mesh: &Mesh, name: &str, device_type: &str) -> Result<DTensorMesh, MeshError> {
        DeviceSpec::parse(&DeviceSpec::new("localhost", 0, device_type, 0).to_string())?;
        let ids: Vec<u64> = (0..mesh.num_devices()).collect();
        let devices = (0..mesh.num_devices())
            .map(|p| DeviceSpec::new("localhost", 0, device_type, mesh.device_at(p)))
            .collect();
        DTensorMesh::new(
            name,
            mesh.axes().to_vec(),
            ids.clone(),
            ids,
            devices,
            Vec::new(),
            false,
        )
    }

    /// The mesh's name (TF's `mesh_name` / `name`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The dimensions and device order as a [`Mesh`].
    pub fn mesh(&self) -> &Mesh {
        &self.mesh
    }

    /// A dimension by name (TF's `mesh[dim_name]`).
    pub fn dim(&self, dim_name: &str) -> Result<MeshAxis, MeshError> {
        Ok(self.mesh.axes()[self.mesh.axis_index(dim_name)?].clone())
    }

    /// Number of devices in the mesh (TF's `size`).
    pub fn size(&self) -> u64 {
        self.mesh.num_devices()
    }

    /// The global device ids, flattened in mesh order.
    pub fn global_device_ids(&self) -> &[u64] {
        &self.global_device_ids
    }

    /// The ids this client holds.
    pub fn local_device_ids(&self) -> &[u64] {
        &self.local_device_ids
    }

    /// The devices this client holds, as strings, 1:1 with [`Self::local_device_ids`].
    pub fn local_devices(&self) -> Vec<String> {
        self.local_devices.iter().map(|d| d.to_string()).collect()
    }

    /// The global device names, when given (several meshes in use).
    pub fn global_devices(&self) -> Option<Vec<String>> {
        (!self.global_devices.is_empty())
            .then(|| self.global_devices.iter().map(|d| d.to_string()).collect())
    }

    /// Number of devices this client holds.
    pub fn num_local_devices(&self) -> usize {
        self.local_devices.len()
    }

    /// The smallest global device id.
    pub fn min_global_device_id(&self) -> u64 {
        self.global_device_ids[0]
    }

    /// True when this client holds none of the mesh's devices.
    pub fn is_remote(&self) -> bool {
        self.local_device_ids.is_empty()
    }

    /// The device type: of the first global device when given, else of the first local one.
    pub fn device_type(&self) -> &str {
        self.global_devices
            .first()
            .or(self.local_devices.first())
            .map(|d| d.device_type.as_str())
            .unwrap_or("")
    }

    /// True when ops on this mesh use XLA SPMD.
    pub fn use_xla_spmd(&self) -> bool {
        self.use_xla_spmd
    }

    /// `{dim name: index}` of each local device, in local order (TF's `local_device_locations`).
    pub fn local_device_locations(&self) -> Vec<Vec<(String, u64)>> {
        let first = self.min_global_device_id();
        self.local_device_ids
            .iter()
            .map(|&id| {
                self.mesh
                    .axes()
                    .iter()
                    .zip(self.mesh.coords_of_position(id - first))
                    .map(|(a, c)| (a.name.clone(), c))
                    .collect()
            })
            .collect()
    }

    /// The 1-1 mapped host mesh: the same ids with every device a CPU of the
    /// same task (the mesh itself when it is a CPU mesh). As in TF, the host
    /// mesh has no name.
    pub fn host_mesh(&self) -> DTensorMesh {
        if self.device_type().eq_ignore_ascii_case("CPU") {
            return self.clone();
        }
        let cpu = |ds: &[DeviceSpec]| ds.iter().map(|d| d.with_type("CPU")).collect();
        DTensorMesh::new(
            "",
            self.mesh.axes().to_vec(),
            self.global_device_ids.clone(),
            self.local_device_ids.clone(),
            cpu(&self.local_devices),
            cpu(&self.global_devices),
            false,
        )
        .expect("the same ids and devices with one type stay valid")
    }

    /// TF's rule across the clients of one mesh: each describes the same
    /// global mesh, their local ids are disjoint, and together they cover
    /// every global id.
    pub fn check_clients(clients: &[DTensorMesh]) -> Result<(), MeshError> {
        let Some(first) = clients.first() else {
            return Err(MeshError::DTensorIds("no clients".into()));
        };
        let mut owner: Vec<Option<usize>> = vec![None; first.global_device_ids.len()];
        let base = first.min_global_device_id();
        for (c, client) in clients.iter().enumerate() {
            if client.mesh.axes() != first.mesh.axes()
                || client.global_device_ids != first.global_device_ids
            {
                return Err(MeshError::DTensorIds(format!(
                    "client {c} describes another global mesh than client 0"
                )));
            }
            for &l in &client.local_device_ids {
                let slot = &mut owner[(l - base) as usize];
                if let Some(other) = slot {
                    return Err(MeshError::DTensorIds(format!(
                        "local device id {l} is held by client {other} and client {c}"
                    )));
                }
                *slot = Some(c);
            }
        }
        if let Some(p) = owner.iter().position(Option::is_none) {
            return Err(MeshError::DTensorIds(format!(
                "global device id {} is local to no client",
                base + p as u64
            )));
        }
        Ok(())
    }

    /// TF's `from_string`: `name|dims|global ids|local ids|local devices`,
    /// then optionally `|global devices` and `|use_xla_spmd`; or TF's test
    /// form `name|dims|*TYPE` (every device local to task 0).
    pub fn from_string(text: &str) -> Result<DTensorMesh, MeshError> {
        let bad = |what: String| MeshError::BadDTensorString(what);
        let parts: Vec<&str> = text.split('|').collect();
        if !matches!(parts.len(), 3 | 5..=7) {
            return Err(bad(format!(
                "expected 5 to 7 '|'-separated fields (name|dims|global ids|local ids|local devices[|global devices][|{USE_XLA_SPMD}]), found {}",
                parts.len()
            )));
        }
        let mut dims = Vec::new();
        for dim in parts[1].split(',').filter(|d| !d.is_empty()) {
            let (n, s) = dim
                .split_once('=')
                .ok_or_else(|| bad(format!("dimension '{dim}' is not name=size")))?;
            let size = s.parse::<u64>().map_err(|_| {
                bad(format!(
                    "dimension size '{s}' is not a non-negative integer"
                ))
            })?;
            dims.push(MeshAxis {
                name: n.to_string(),
                size,
            });
        }
        if parts.len() == 3 {
            let device_type = parts[2].strip_prefix('*').ok_or_else(|| {
                bad(format!(
                    "expected '*TYPE' in the third field, found '{}'",
                    parts[2]
                ))
            })?;
            let mesh = Mesh::new(dims)?;
            return DTensorMesh::from_mesh(&mesh, parts[0], device_type);
        }
        let ids = |field: &str, what: &str| -> Result<Vec<u64>, MeshError> {
            field
                .split(',')
                .filter(|d| !d.is_empty())
                .map(|d| {
                    d.parse::<u64>()
                        .map_err(|_| bad(format!("{what} '{d}' is not a non-negative integer")))
                })
                .collect()
        };
        let devices = |field: &str| -> Result<Vec<DeviceSpec>, MeshError> {
            field
                .split(',')
                .filter(|d| !d.is_empty())
                .map(DeviceSpec::parse)
                .collect()
        };
        let global = ids(parts[2], "global device id")?;
        let local = ids(parts[3], "local device id")?;
        let local_devices = devices(parts[4])?;
        let mut global_devices = Vec::new();
        let mut xla = false;
        for (i, extra) in parts.iter().enumerate().skip(5) {
            if *extra == USE_XLA_SPMD {
                xla = true;
            } else if i == 5 {
                global_devices = devices(extra)?;
            } else if !extra.is_empty() {
                return Err(bad(format!(
                    "expected '{USE_XLA_SPMD}' as the 7th field, found '{extra}'"
                )));
            }
        }
        DTensorMesh::new(
            parts[0],
            dims,
            global,
            local,
            local_devices,
            global_devices,
            xla,
        )
    }
}

/// TF's `to_string`, the inverse of [`DTensorMesh::from_string`].
impl fmt::Display for DTensorMesh {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let join = |v: &mut dyn Iterator<Item = String>| v.collect::<Vec<_>>().join(",");
        write!(
            f,
            "{}|{}|{}|{}|{}",
            self.name,
            join(
                &mut self
                    .mesh
                    .axes()
                    .iter()
                    .map(|a| format!("{}={}", a.name, a.size))
            ),
            join(&mut self.global_device_ids.iter().map(u64::to_string)),
            join(&mut self.local_device_ids.iter().map(u64::to_string)),
            join(&mut self.local_devices.iter().map(DeviceSpec::to_string)),
        )?;
        if !self.global_devices.is_empty() {
            write!(
                f,
                "|{}",
                join(&mut self.global_devices.iter().map(DeviceSpec::to_string))
            )?;
        }
        if self.use_xla_spmd {
            write!(f, "|{USE_XLA_SPMD}")?;
        }
        Ok(())
    }
}

impl Mesh {
    /// TF DTensor's `to_string` of this mesh with every device local (see [`DTensorMesh::from_mesh`]).
    pub fn to_dtensor_string(&self, name: &str, device_type: &str) -> String {
        match DTensorMesh::from_mesh(self, name, device_type) {
            Ok(m) => m.to_string(),
            Err(e) => format!("(no DTensor form: {e})"),
        }
    }

    /// TF DTensor's `from_string`.
    pub fn from_dtensor_string(text: &str) -> Result<DTensorMesh, MeshError> {
        DTensorMesh::from_string(text)
    }
}
