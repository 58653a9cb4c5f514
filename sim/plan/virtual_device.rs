//! TVM's `VirtualDevice`: a quadruple (device type, virtual device id, target,
//! memory scope), each part possibly unconstrained, with `join` and `default`
//! as the seed document defines them. A target fixes the device type, so a
//! virtual device never holds a target of another device type.

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

use super::PlanError;

/// DLPack-style device types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DeviceType {
    Cpu,
    Cuda,
    Rocm,
    Tpu,
}

impl DeviceType {
    pub const ALL: [DeviceType; 4] = [
        DeviceType::Cpu,
        DeviceType::Cuda,
        DeviceType::Rocm,
        DeviceType::Tpu,
    ];

    pub fn name(self) -> &'static str {
        match self {
            DeviceType::Cpu => "cpu",
            DeviceType::Cuda => "cuda",
            DeviceType::Rocm => "rocm",
            DeviceType::Tpu => "tpu",
        }
    }
}

impl fmt::Display for DeviceType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A compilation target; its kind determines the device type it runs on.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Target {
    pub kind: String,
    pub device_type: DeviceType,
}

impl Target {
    /// A target of a known kind: `llvm` and `c` (CPU), `cuda`, `rocm`, `tpu`.
    pub fn new(kind: &str) -> Result<Target, PlanError> {
        let device_type = match kind {
            "llvm" | "c" => DeviceType::Cpu,
            "cuda" => DeviceType::Cuda,
            "rocm" => DeviceType::Rocm,
            "tpu" => DeviceType::Tpu,
            other => return Err(PlanError::UnknownTarget(other.to_string())),
        };
        Ok(Target {
            kind: kind.to_string(),
            device_type,
        })
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
                    target: t.kind.clone(),
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
            q(self.target.as_ref().map(|t| t.kind.clone())),
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
                DeviceType::ALL
                    .into_iter()
                    .find(|t| t.name() == d)
                    .ok_or_else(|| bad("device type must be cpu, cuda, rocm or tpu"))?,
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
