//! Calibration: per-protocol latencies and achievable bandwidth fractions,
//! per device model, from `calibration.toml` (compiled in). The file says how
//! each figure was fitted; `Calibration::ideal` is the alpha-beta model with
//! no protocol latency and full bandwidth (for closed-form tests).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::engine::Time;
use crate::topology::Topology;

use super::kinds::{Algorithm, Protocol};
use super::CollectiveError;

/// The compiled-in calibration table.
pub const CALIBRATION_TOML: &str = include_str!("calibration.toml");

/// Latencies (microseconds) and bandwidth fractions of one protocol.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProtocolParams {
    pub base_us: f64,
    pub nvlink_hop_us: f64,
    pub network_hop_us: f64,
    pub nvlink_fraction: f64,
    pub network_fraction: f64,
    /// A tree's hop inside a node, where it differs from a ring step's
    /// (`nvlink_hop_us`): NCCL's own latency table has one per algorithm
    /// (`hwLat[NVLINK][TREE]` against `[RING]`). None: the same.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tree_nvlink_hop_us: Option<f64>,
}

impl ProtocolParams {
    const IDEAL: ProtocolParams = ProtocolParams {
        base_us: 0.0,
        nvlink_hop_us: 0.0,
        network_hop_us: 0.0,
        nvlink_fraction: 1.0,
        network_fraction: 1.0,
        tree_nvlink_hop_us: None,
    };
}

/// Parameters for every protocol on one kind of device.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Calibration {
    /// A pipeline chunk: NCCL's Simple step, `NCCL_BUFFSIZE / NCCL_STEPS`
    /// (4 MiB / 8 by default).
    pub chunk_bytes: u64,
    pub max_chunks: usize,
    /// Payload rate (GB/s) at which one NCCL channel (one thread block) of a
    /// tree moves Simple data at each rank, whatever its links could take:
    /// NCCL's `perChMaxTreeBw` (its busbw) halved to the channel's algbw.
    /// 0: links only.
    #[serde(default)]
    pub tree_channel_gbs: f64,
    /// A sender's next send in a channel of a pipelined algorithm (ring,
    /// tree, NVLS-tree) waits for its last one to have *left*, not arrived:
    /// NCCL's connection FIFO of `NCCL_STEPS` = 8 slots. Off by default:
    /// the table's hops and fractions were fitted with the last send's
    /// delivery gating the next (README, "Steps in flight").
    #[serde(default)]
    pub send_on_departure: bool,
    /// A Simple ring step that crosses the network goes in two slices
    /// (NCCL's `SlicePerChunk`, `timing::ring_slices`). Off by default, as
    /// `send_on_departure`.
    #[serde(default)]
    pub ring_slices: bool,
    pub ll: ProtocolParams,
    pub ll128: ProtocolParams,
    pub simple: ProtocolParams,
    pub nvls: ProtocolParams,
    /// CollNet's network step, SHARP's reduction and multicast included
    /// (CollNet runs Simple otherwise): NCCL's own figure by default
    /// ([`COLLNET_NETWORK_HOP_US`]; no measured CollNet curve to fit).
    #[serde(default = "collnet_hop_default")]
    pub collnet_network_hop_us: f64,
    /// The chunk of a tree across nodes where a caller fixes it (a period's
    /// run, [`super::tuner::TreePeriod`], cut like the message it stands
    /// for); `None`: the run's NCCL release decides
    /// ([`super::tuner::tree_chunk_bytes`]). Never read from a file.
    #[serde(skip)]
    pub tree_chunk_fixed: Option<u64>,
}

impl Calibration {
    /// No protocol latency, full link bandwidth, full payload is still
    /// applied per protocol (use `Protocol::Simple` for the pure alpha-beta model).
    pub fn ideal() -> Calibration {
        Calibration {
            chunk_bytes: 1 << 19,
            max_chunks: 64,
            tree_channel_gbs: 0.0,
            send_on_departure: false,
            ring_slices: false,
            ll: ProtocolParams::IDEAL,
            ll128: ProtocolParams::IDEAL,
            simple: ProtocolParams::IDEAL,
            nvls: ProtocolParams::IDEAL,
            collnet_network_hop_us: 0.0,
            tree_chunk_fixed: None,
        }
    }

    /// The table entry for `device_model`, or `default`.
    pub fn for_model(device_model: &str) -> Result<Calibration, CollectiveError> {
        let table = table()?;
        table
            .get(device_model)
            .or_else(|| table.get("default"))
            .copied()
            .ok_or_else(|| CollectiveError::Calibration("no [default] entry".into()))
    }

    /// Parameters of `proto` (NVLS has its own, it always runs Simple) as
    /// `algo` pays them: a tree's hop inside a node is the protocol's
    /// `tree_nvlink_hop_us` where given. CollNet (Simple only) pays NCCL's
    /// latency for it: no launch figure (`baseLat` 0) and its network step
    /// ([`Self::collnet_network_hop_us`]).
    pub fn params(&self, algo: Algorithm, proto: Protocol) -> ProtocolParams {
        let p = match (algo, proto) {
            (Algorithm::Nvls | Algorithm::NvlsTree, _) => self.nvls,
            (Algorithm::CollNet, _) => ProtocolParams {
                base_us: 0.0,
                network_hop_us: self.collnet_network_hop_us,
                ..self.simple
            },
            (_, Protocol::Ll) => self.ll,
            (_, Protocol::Ll128) => self.ll128,
            (_, Protocol::Simple) => self.simple,
        };
        match (algo, p.tree_nvlink_hop_us) {
            (Algorithm::Tree, Some(h)) => ProtocolParams {
                nvlink_hop_us: h,
                ..p
            },
            _ => p,
        }
    }

    /// The payload rate (bytes/s) of one tree send ([`Self::tree_channel_gbs`]):
    /// each tree of our channels is one NCCL channel. `None` where only the
    /// links bound it (not a tree, not Simple, or no figure).
    pub fn tree_channel_rate(&self, algo: Algorithm, proto: Protocol) -> Option<f64> {
        (algo == Algorithm::Tree && proto == Protocol::Simple && self.tree_channel_gbs > 0.0)
            .then_some(self.tree_channel_gbs * 1e9)
    }

    /// Pipeline chunks for a message of `bytes`.
    pub fn chunks_for(&self, bytes: u64) -> usize {
        (bytes.div_ceil(self.chunk_bytes.max(1)) as usize).clamp(1, self.max_chunks.max(1))
    }
}

/// NCCL's latency of CollNet Direct's network step, SHARP's reduction and
/// multicast included: `hwLat[NET][COLLNET_DIRECT][SIMPLE]`, 31 us
/// (`src/graph/tuning.cc` at v2.21.5-1; `baseLat` 0).
pub const COLLNET_NETWORK_HOP_US: f64 = 31.0;

fn collnet_hop_default() -> f64 {
    COLLNET_NETWORK_HOP_US
}

/// Microseconds to engine time (rounded to the picosecond).
pub fn us(x: f64) -> Time {
    Time((x * 1e6).round().max(0.0) as u64)
}

/// Parse the compiled-in table (model name -> calibration).
pub fn table() -> Result<BTreeMap<String, Calibration>, CollectiveError> {
    parse_table(CALIBRATION_TOML)
}

/// Parse a calibration table from TOML text, checking every figure.
pub fn parse_table(text: &str) -> Result<BTreeMap<String, Calibration>, CollectiveError> {
    let t: BTreeMap<String, Calibration> = toml::from_str(text)
        .map_err(|e| CollectiveError::Calibration(crate::base::cursor::toml_located(&e, text)))?;
    check_table(&t)?;
    Ok(t)
}

impl Calibration {
    /// The calibration of `device_model` on `topo`: the topology file's own
    /// `[collective]` table (what `shardsim calibrate --measured` writes) when
    /// it has one, else the compiled-in table ([`Calibration::for_model`]).
    pub fn for_topology(
        topo: &Topology,
        device_model: &str,
    ) -> Result<Calibration, CollectiveError> {
        let Some(own) = topo.collective_calibration() else {
            return Calibration::for_model(device_model);
        };
        let table = topology_table(own).map_err(|e| {
            // Read from the file's text again, the error has its line and
            // column (an override's value has none: the message as is).
            match topo
                .source()
                .and_then(|(file, text)| located_in_text(file, text))
            {
                Some(at) => CollectiveError::Calibration(at),
                None => CollectiveError::Calibration(format!(
                    "topology \"{}\" [collective]: {e}",
                    topo.name
                )),
            }
        })?;
        match table.get(device_model).or_else(|| table.get("default")) {
            Some(c) => Ok(*c),
            None => Calibration::for_model(device_model),
        }
    }
}

/// A topology file's text read for its `[collective]` device tables only:
/// each one a [`Calibration`], the run's settings beside them skipped, so a
/// bad field is reported where it stands in the file.
#[derive(Deserialize)]
struct CollectiveInText {
    #[serde(default, rename = "collective")]
    _collective: Option<DeviceTables>,
}

struct DeviceTables;

impl<'de> Deserialize<'de> for DeviceTables {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Tables;
        impl<'de> serde::de::Visitor<'de> for Tables {
            type Value = DeviceTables;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a table of device models' calibrations")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut m: A,
            ) -> Result<DeviceTables, A::Error> {
                while let Some(key) = m.next_key::<String>()? {
                    if is_setting_key(&key) {
                        m.next_value::<serde::de::IgnoredAny>()?;
                        continue;
                    }
                    m.next_value::<CheckedCalibration>()?;
                }
                Ok(DeviceTables)
            }
        }
        d.deserialize_map(Tables)
    }
}

/// A device model's table read and checked ([`check_one`]): a figure out
/// of range is an error of the table itself, so it is placed there.
struct CheckedCalibration;

impl<'de> Deserialize<'de> for CheckedCalibration {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let c = Calibration::deserialize(d)?;
        check_one(&c).map_err(serde::de::Error::custom)?;
        Ok(CheckedCalibration)
    }
}

/// `file:line:col: message` for the first bad field of `text`'s
/// `[collective]` device tables, if the text shows one.
fn located_in_text(file: &str, text: &str) -> Option<String> {
    let e = toml::from_str::<CollectiveInText>(text).err()?;
    let at = crate::base::cursor::toml_located(&e, text);
    Some(format!("{file}:{at} (in [collective])"))
}

/// Is `key` of a `[collective]` table one of the run's settings
/// (`policy.rs`, the chooser, the NCCL release), not a device model's table?
fn is_setting_key(key: &str) -> bool {
    crate::topology::settings::SETTING_KEYS.contains(&key)
        || key == crate::topology::CHOOSER_KEY
        || key == crate::topology::NCCL_VERSION_KEY
        || key == crate::topology::COLLNET_KEY
}

/// A topology file's `[collective]` table as calibrations, checked.
pub fn topology_table(own: &toml::Table) -> Result<BTreeMap<String, Calibration>, CollectiveError> {
    // The run's settings sit beside the device models' tables.
    let mut own = own.clone();
    own.retain(|k, _| !is_setting_key(k));
    let t: BTreeMap<String, Calibration> = toml::Value::Table(own)
        .try_into()
        .map_err(|e: toml::de::Error| CollectiveError::Calibration(e.message().to_string()))?;
    check_table(&t)?;
    Ok(t)
}

fn check_table(t: &BTreeMap<String, Calibration>) -> Result<(), CollectiveError> {
    for (name, c) in t {
        check_one(c).map_err(|why| CollectiveError::Calibration(format!("[{name}]: {why}")))?;
    }
    Ok(())
}

/// What is out of range in one device model's calibration, if anything.
fn check_one(c: &Calibration) -> Result<(), &'static str> {
    for p in [c.ll, c.ll128, c.simple, c.nvls] {
        let fractions_ok = [p.nvlink_fraction, p.network_fraction]
            .iter()
            .all(|f| *f > 0.0 && *f <= 1.0);
        let lat_ok = [
            p.base_us,
            p.nvlink_hop_us,
            p.network_hop_us,
            p.tree_nvlink_hop_us.unwrap_or(0.0),
        ]
        .iter()
        .all(|l| l.is_finite() && *l >= 0.0);
        if !fractions_ok || !lat_ok {
            return Err("fractions must be in (0, 1] and latencies >= 0");
        }
    }
    if !(c.collnet_network_hop_us.is_finite() && c.collnet_network_hop_us >= 0.0) {
        return Err("collnet_network_hop_us must be a number >= 0");
    }
    if !(c.tree_channel_gbs.is_finite() && c.tree_channel_gbs >= 0.0) {
        return Err("tree_channel_gbs must be a number >= 0");
    }
    if c.chunk_bytes == 0 || c.max_chunks == 0 {
        return Err("chunk_bytes and max_chunks must be positive");
    }
    Ok(())
}
