//! The scenario file (`scenarios/*.toml`, format 1, unknown fields refused):
//! topology, mesh and its placement, workload, run options and expectations.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::topology::{ByteSize, Duration};

/// The scenario format this build reads.
pub const FORMAT_VERSION: u32 = 1;

/// A whole scenario file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioFile {
    /// Must be [`FORMAT_VERSION`].
    pub format: u32,
    /// Report directory name; the file stem when absent.
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub description: String,
    pub topology: TopologySpec,
    /// Required for a `program` workload; a `model` workload takes its mesh
    /// from its strategy (`dp` x `pp` x `tp`) and refuses one.
    #[serde(default)]
    pub mesh: Option<MeshSpec>,
    pub workload: WorkloadSpec,
    #[serde(default)]
    pub run: RunSpec,
    #[serde(default)]
    pub expect: ExpectSpec,
}

/// The machine: a preset or a topology file, nodes and `--set` overrides.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopologySpec {
    /// A preset name (`dgx-h100`, `ring:16`).
    #[serde(default)]
    pub preset: Option<String>,
    /// A topology `.toml` file, relative to the scenario file.
    #[serde(default)]
    pub file: Option<String>,
    /// Nodes joined by the preset's fat tree (the `nodes` override).
    #[serde(default)]
    pub nodes: Option<u32>,
    /// Overrides as `--set` takes them: `"nvlink.bandwidth" = "900GB/s"` or
    /// nested tables (`[topology.set.nvlink] bandwidth = ...`).
    #[serde(default)]
    pub set: toml::Table,
}

/// The device mesh and where its axes lie on the topology.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MeshSpec {
    /// Axis sizes, major first; one may be -1: the devices left over.
    pub shape: Vec<i64>,
    /// Axis names, as the program's shardings use them.
    pub axes: Vec<String>,
    /// Mesh axes in topology order, outermost first: the last varies fastest
    /// over device ids (inside a node), the first spans nodes. Default: the
    /// mesh's own axis order.
    #[serde(default)]
    pub placement: Option<Vec<String>>,
}

/// What runs: a `.mlir` program (its mesh rewritten to the scenario's) or a
/// model preset with its parallelism strategy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadSpec {
    /// A StableHLO + sdy program, relative to the scenario file.
    #[serde(default)]
    pub program: Option<String>,
    /// A model preset (`llama3-8b`, `gpt3-175b`, ...) or a model `.toml`
    /// file relative to the scenario file.
    #[serde(default)]
    pub model: Option<String>,
    /// The model's parallel strategy, inline (`[workload.strategy]`, the
    /// fields of `shardsim train --strategy FILE.toml`) or such a file
    /// relative to the scenario file (`strategy = "tp4.toml"`); its devices
    /// must be the topology's.
    #[serde(default, deserialize_with = "strategy_spec")]
    pub strategy: Option<StrategySpec>,
    /// Finish means with an averaging all-reduce (`--avg-means`).
    #[serde(default)]
    pub avg_means: bool,
}

/// Run options: perturbations, numerics, memory policy.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunSpec {
    #[serde(default)]
    pub seed: u64,
    /// Random spread of every step's duration (0.05: up to +-5%).
    #[serde(default)]
    pub jitter: Option<f64>,
    /// `DEVICE:FACTOR` slowed devices.
    #[serde(default)]
    pub stragglers: Vec<String>,
    /// `COUNT:FACTOR` devices drawn from the seed.
    #[serde(default)]
    pub random_stragglers: Option<String>,
    /// `FROM->TO@TIME[:FRACTION]` link faults.
    #[serde(default)]
    pub link_faults: Vec<String>,
    /// `COUNT@WINDOW` link failures drawn from the seed.
    #[serde(default)]
    pub random_link_failures: Option<String>,
    /// Run the numerics on every device with seeded random inputs and compare
    /// with the single-device interpreter.
    #[serde(default)]
    pub numerics: bool,
    /// Keep going after an out-of-memory report.
    #[serde(default)]
    pub continue_on_oom: bool,
}

/// An expected figure: `value` within a relative `tolerance`, and/or bounds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Bound<T> {
    #[serde(default)]
    pub value: Option<T>,
    /// Relative tolerance around `value` (0.02 = 2%).
    #[serde(default = "default_tolerance", deserialize_with = "tolerance")]
    pub tolerance: f64,
    #[serde(default)]
    pub min: Option<T>,
    #[serde(default)]
    pub max: Option<T>,
}

fn default_tolerance() -> f64 {
    0.02
}

/// A tolerance is a finite fraction of at least 0: a negative one failed
/// every value (printed as "tolerance -100%"), NaN passed every one.
fn tolerance<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    let t = f64::deserialize(d)?;
    if t.is_finite() && t >= 0.0 {
        Ok(t)
    } else {
        Err(serde::de::Error::custom(format!(
            "tolerance {t}: expected a finite fraction of at least 0 (0.01 = 1%)"
        )))
    }
}

/// Expectations; a failed one makes `shardsim run` exit non-zero.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectSpec {
    #[serde(default)]
    pub step_time: Option<Bound<Duration>>,
    /// Mean exposed communication per device.
    #[serde(default)]
    pub exposed_comm: Option<Bound<Duration>>,
    /// Mean time per device by collective kind (`all_reduce`, ...).
    #[serde(default)]
    pub comm_time: BTreeMap<String, Bound<Duration>>,
    /// Bytes per device by collective kind.
    #[serde(default)]
    pub comm_bytes: BTreeMap<String, Bound<ByteSize>>,
    /// Largest peak over devices, by memory scope (`global`, `host`).
    #[serde(default)]
    pub peak_memory: BTreeMap<String, Bound<ByteSize>>,
    /// Largest absolute error of any output against the interpreter.
    #[serde(default)]
    pub numerics_error: Option<Bound<f64>>,
    /// Number of out-of-memory reports.
    #[serde(default)]
    pub ooms: Option<Bound<u64>>,
}

/// `[topology.set]` as `--set` overrides (`key=value`), nested tables
/// flattened to dotted keys, in key order.
pub fn flatten_set(set: &toml::Table) -> Vec<(String, String)> {
    fn walk(prefix: &str, t: &toml::Table, out: &mut Vec<(String, String)>) {
        for (k, v) in t {
            let key = if prefix.is_empty() {
                k.clone()
            } else {
                format!("{prefix}.{k}")
            };
            match v {
                toml::Value::Table(inner) => walk(&key, inner, out),
                toml::Value::String(s) => out.push((key, s.clone())),
                other => out.push((key, other.to_string())),
            }
        }
    }
    let mut out = Vec::new();
    walk("", set, &mut out);
    out
}

/// A model workload's strategy: inline, or a strategy file.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum StrategySpec {
    Inline(crate::models::Strategy),
    /// A strategy `.toml` relative to the scenario file.
    File(String),
}

/// A strategy table or a file name; a table's errors name its field.
fn strategy_spec<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<StrategySpec>, D::Error> {
    use serde::de::Error;
    match toml::Value::deserialize(d)? {
        toml::Value::String(f) => Ok(Some(StrategySpec::File(f))),
        toml::Value::Table(mut t) => {
            // As a strategy file: `global_batch` may be left out
            // (dp x micro_batch x pp, one microbatch per stage and replica).
            let given = t.contains_key("global_batch");
            if !given {
                t.insert("global_batch".into(), toml::Value::Integer(1));
            }
            let mut s = crate::models::Strategy::deserialize(toml::Value::Table(t))
                .map_err(|e| D::Error::custom(format!("strategy: {}", e.message().trim())))?;
            if !given {
                s.global_batch = s
                    .default_global_batch()
                    .map_err(|e| D::Error::custom(format!("strategy: {e}")))?;
            }
            Ok(Some(StrategySpec::Inline(s)))
        }
        other => Err(D::Error::custom(format!(
            "strategy: expected a table or a strategy file name, found {}",
            other.type_str()
        ))),
    }
}
