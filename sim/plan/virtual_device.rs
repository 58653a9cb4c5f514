//! TVM's `VirtualDevice`: a quadruple (device type, virtual device id, target,
//! memory scope), each part possibly unconstrained, with `join` and `default`
//! as the seed document defines them. A target fixes the device type, so a
//! virtual device never holds a target of another device type.

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

use super::PlanError;

/// DLPack's device types (`DLDeviceType`), plus `tpu` (no DLPack code).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DeviceType {
    Cpu,
    Cuda,
    CudaHost,
    Opencl,
    Vulkan,
    Metal,
    Vpi,
    Rocm,
    RocmHost,
    ExtDev,
    CudaManaged,
    Oneapi,
    Webgpu,
    Hexagon,
    Maia,
    Tpu,
}

impl DeviceType {
    pub const ALL: [DeviceType; 16] = [
        DeviceType::Cpu,
        DeviceType::Cuda,
        DeviceType::CudaHost,
        DeviceType::Opencl,
        DeviceType::Vulkan,
        DeviceType::Metal,
        DeviceType::Vpi,
        DeviceType::Rocm,
        DeviceType::RocmHost,
        DeviceType::ExtDev,
        DeviceType::CudaManaged,
        DeviceType::Oneapi,
        DeviceType::Webgpu,
        DeviceType::Hexagon,
        DeviceType::Maia,
        DeviceType::Tpu,
    ];

    pub fn name(self) -> &'static str {
        match self {
            DeviceType::Cpu => "cpu",
            DeviceType::Cuda => "cuda",
            DeviceType::CudaHost => "cuda_host",
            DeviceType::Opencl => "opencl",
            DeviceType::Vulkan => "vulkan",
            DeviceType::Metal => "metal",
            DeviceType::Vpi => "vpi",
            DeviceType::Rocm => "rocm",
            DeviceType::RocmHost => "rocm_host",
            DeviceType::ExtDev => "ext_dev",
            DeviceType::CudaManaged => "cuda_managed",
            DeviceType::Oneapi => "oneapi",
            DeviceType::Webgpu => "webgpu",
            DeviceType::Hexagon => "hexagon",
            DeviceType::Maia => "maia",
            DeviceType::Tpu => "tpu",
        }
    }

    /// DLPack's number for the type (`kDLCPU` = 1, `kDLCUDA` = 2, ...); none for `tpu`.
    pub fn dlpack_code(self) -> Option<u32> {
        Some(match self {
            DeviceType::Cpu => 1,
            DeviceType::Cuda => 2,
            DeviceType::CudaHost => 3,
            DeviceType::Opencl => 4,
            DeviceType::Vulkan => 7,
            DeviceType::Metal => 8,
            DeviceType::Vpi => 9,
            DeviceType::Rocm => 10,
            DeviceType::RocmHost => 11,
            DeviceType::ExtDev => 12,
            DeviceType::CudaManaged => 13,
            DeviceType::Oneapi => 14,
            DeviceType::Webgpu => 15,
            DeviceType::Hexagon => 16,
            DeviceType::Maia => 17,
            DeviceType::Tpu => return None,
        })
    }

    /// The type named `name` (as printed by [`DeviceType::name`]).
    pub fn from_name(name: &str) -> Option<DeviceType> {
        DeviceType::ALL.into_iter().find(|t| t.name() == name)
    }
}

impl fmt::Display for DeviceType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A compilation target, `kind -key=value -flag ...` as TVM writes it
/// (`cuda -arch=sm_80`); its kind determines the device type it runs on.
/// Two targets are the same only with the same kind and attributes.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Target {
    pub kind: String,
    pub device_type: DeviceType,
    /// `(key, value)` in the order given; a bare `-flag` has an empty value.
    pub attrs: Vec<(String, String)>,
}

impl Target {
    /// A target from its text: a known kind (`llvm`/`c`: cpu; `cuda`/`nvptx`;
    /// `rocm`; `opencl`; `vulkan`; `metal`; `webgpu`; `hexagon`; `ext_dev`;
    /// `tpu`), then `-key=value` or `-flag` attributes (each key once).
    pub fn new(text: &str) -> Result<Target, PlanError> {
        let mut words = text.split_whitespace();
        let kind = words.next().unwrap_or("");
        let device_type = match kind {
            "llvm" | "c" => DeviceType::Cpu,
            "cuda" | "nvptx" => DeviceType::Cuda,
            "rocm" => DeviceType::Rocm,
            "opencl" => DeviceType::Opencl,
            "vulkan" => DeviceType::Vulkan,
            "metal" => DeviceType::Metal,
            "webgpu" => DeviceType::Webgpu,
            "hexagon" => DeviceType::Hexagon,
            "ext_dev" => DeviceType::ExtDev,
            "tpu" => DeviceType::Tpu,
            other => return Err(PlanError::UnknownTarget(other.to_string())),
        };
        let mut attrs: Vec<(String, String)> = Vec::new();
        for w in words {
            let bad = |reason: &str| PlanError::BadText {
                text: text.to_string(),
                reason: reason.to_string(),
            };
            let body = w
                .strip_prefix('-')
                .ok_or_else(|| bad("target attributes are -key=value or -flag"))?;
            let (k, v) = body.split_once('=').unwrap_or((body, ""));
            if k.is_empty()
                || !k
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            {
                return Err(bad("a target attribute needs a name"));
            }
            if attrs.iter().any(|(a, _)| a == k) {
                return Err(bad("a target attribute is given twice"));
            }
            attrs.push((k.to_string(), v.to_string()));
        }
        Ok(Target {
            kind: kind.to_string(),
            device_type,
            attrs,
        })
    }

    /// The attribute `key`, if given.
    pub fn attr(&self, key: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.kind)?;
        for (k, v) in &self.attrs {
            if v.is_empty() {
                write!(f, " -{k}")?;
            } else {
                write!(f, " -{k}={v}")?;
            }
        }
        Ok(())
    }
}

/// A (possibly partially) constrained place for data and code.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Default)]
pub struct VirtualDevice {
    device_type: Option<DeviceType>,
    virtual_device_id: Option<u32>,
    target: Option<Target>,
    memory_scope: Option<String>,
}

impl VirtualDevice {
    /// A virtual device; a target without a device type gives its device type,
    /// a target of another device type is an error; an empty scope is unconstrained.
    pub fn new(
        device_type: Option<DeviceType>,
        virtual_device_id: Option<u32>,
        target: Option<Target>,
        memory_scope: Option<&str>,
    ) -> Result<VirtualDevice, PlanError> {
        let device_type = match (&target, device_type) {
            (Some(t), Some(d)) if t.device_type != d => {
                return Err(PlanError::TargetMismatch {
                    target: t.to_string(),
                    target_type: t.device_type.to_string(),
                    device_type: d.to_string(),
                })
            }
            (Some(t), _) => Some(t.device_type),
            (None, d) => d,
        };
        Ok(VirtualDevice {
            device_type,
            virtual_device_id,
            target,
            memory_scope: memory_scope.filter(|s| !s.is_empty()).map(str::to_string),
        })
    }

    /// The fully unconstrained virtual device.
    pub fn unconstrained() -> VirtualDevice {
        <VirtualDevice as Default>::default()
    }

    /// Only a memory scope (e.g. `host` for host-pinned data).
    pub fn scope(scope: &str) -> VirtualDevice {
        VirtualDevice::new(None, None, None, Some(scope)).expect("no target, no conflict")
    }

    pub fn device_type(&self) -> Option<DeviceType> {
        self.device_type
    }
    pub fn virtual_device_id(&self) -> Option<u32> {
        self.virtual_device_id
    }
    pub fn target(&self) -> Option<&Target> {
        self.target.as_ref()
    }
    pub fn memory_scope(&self) -> Option<&str> {
        self.memory_scope.as_deref()
    }

    /// No device type, id, target or scope.
    pub fn is_fully_unconstrained(&self) -> bool {
        self.device_type.is_none()
            && self.virtual_device_id.is_none()
            && self.target.is_none()
            && self.memory_scope.is_none()
    }

    /// Target, id and scope all given (the target implies the device type).
    pub fn is_fully_constrained(&self) -> bool {
        self.target.is_some() && self.virtual_device_id.is_some() && self.memory_scope.is_some()
    }

    /// TVM's `ToDevice`: (device type, id) when both are constrained.
    pub fn to_device(&self) -> Option<(DeviceType, u32)> {
        Some((self.device_type?, self.virtual_device_id?))
    }

    /// The most constrained virtual device that agrees with both, or `None`
    /// when a part is constrained differently in each (or the result would
    /// pair a target with another device type).
    pub fn join(lhs: &VirtualDevice, rhs: &VirtualDevice) -> Option<VirtualDevice> {
        fn field<T: Clone + PartialEq>(a: &Option<T>, b: &Option<T>) -> Result<Option<T>, ()> {
            match (a, b) {
                (Some(x), Some(y)) if x != y => Err(()),
                (Some(x), _) => Ok(Some(x.clone())),
                (None, y) => Ok(y.clone()),
            }
        }
        let device_type = field(&lhs.device_type, &rhs.device_type).ok()?;
        let virtual_device_id = field(&lhs.virtual_device_id, &rhs.virtual_device_id).ok()?;
        let target = field(&lhs.target, &rhs.target).ok()?;
        let memory_scope = field(&lhs.memory_scope, &rhs.memory_scope).ok()?;
        VirtualDevice::new(
            device_type,
            virtual_device_id,
            target,
            memory_scope.as_deref(),
        )
        .ok()
    }

    /// Each part of `lhs`, or where `lhs` leaves it unconstrained the part of
    /// `rhs`; `rhs`'s target is taken only when it runs on the resulting device type.
    pub fn default(lhs: &VirtualDevice, rhs: &VirtualDevice) -> VirtualDevice {
        let device_type = lhs.device_type.or(rhs.device_type);
        let target = match &lhs.target {
            Some(t) => Some(t.clone()),
            None => rhs
                .target
                .as_ref()
                .filter(|t| device_type.is_none() || Some(t.device_type) == device_type)
                .cloned(),
        };
        VirtualDevice::new(
            device_type,
            lhs.virtual_device_id.or(rhs.virtual_device_id),
            target,
            lhs.memory_scope.as_deref().or(rhs.memory_scope.as_deref()),
        )
        .expect("the target is kept only when it matches the device type")
    }
}

/// `(cuda, 0, cuda, global)`; `?` marks an unconstrained part.
impl fmt::Display for VirtualDevice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let q = |s: Option<String>| s.unwrap_or_else(|| "?".into());
        write!(
            f,
            "({}, {}, {}, {})",
            q(self.device_type.map(|d| d.to_string())),
            q(self.virtual_device_id.map(|d| d.to_string())),
            q(self.target.as_ref().map(|t| t.to_string())),
            q(self.memory_scope.clone())
        )
    }
}

impl FromStr for VirtualDevice {
    type Err = PlanError;
    fn from_str(text: &str) -> Result<VirtualDevice, PlanError> {
        let bad = |reason: &str| PlanError::BadText {
            text: text.to_string(),
            reason: reason.to_string(),
        };
        let inner = text
            .trim()
            .strip_prefix('(')
            .and_then(|t| t.strip_suffix(')'))
            .ok_or_else(|| bad("expected parentheses"))?;
        let parts: Vec<&str> = inner.split(',').map(str::trim).collect();
        if parts.len() != 4 {
            return Err(bad("expected 4 parts"));
        }
        let given = |p: &str| {
            if p == "?" || p.is_empty() {
                None
            } else {
                Some(p.to_string())
            }
        };
        let device_type = match given(parts[0]) {
            None => None,
            Some(d) => Some(
                DeviceType::from_name(&d).ok_or_else(|| {
                    bad("unknown device type (cpu, cuda, cuda_host, opencl, vulkan, metal, vpi, rocm, rocm_host, ext_dev, cuda_managed, oneapi, webgpu, hexagon, maia, tpu)")
                })?,
            ),
        };
        let id = match given(parts[1]) {
            None => None,
            Some(i) => Some(
                i.parse::<u32>()
                    .map_err(|_| bad("virtual device id must be a number or ?"))?,
            ),
        };
        let target = given(parts[2]).map(|t| Target::new(&t)).transpose()?;
        VirtualDevice::new(device_type, id, target, given(parts[3]).as_deref())
    }
}
