//! Running one scenario: the topology with its overrides, the mesh (exactly
//! the topology's devices) and its placement, the workload partitioned for
//! that mesh, the timed run, the numerics when asked, and the expectations.

use std::path::Path;

use rand::RngExt as _;
use serde::Serialize;

use crate::engine::component_rng;
use crate::exec::execute;
use crate::exec::timed::report::{self, Summary};
use crate::exec::timed::{run_timed, Timeline};
use crate::ir::interp::interpret;
use crate::ir::Module;
use crate::mesh::AxisRef;
use crate::tensor::{max_abs_rel_error, Tensor};
use crate::topology::{MeshMapping, Override, Topology};

use super::expect::{check_all, Check};
use super::mesh::build_mesh;
use super::options::{describe_perturbations, timed_options};
use super::spec::flatten_set;
use super::workload::ProgramCache;
use super::{Scenario, ScenarioError};

/// What a run records beyond the summary.
#[derive(Debug, Clone, Copy)]
pub struct RunConfig {
    /// Bytes in use over time (for the memory plot).
    pub record_memory: bool,
    /// Refuse numerics above this many bytes of device buffers.
    pub max_data_bytes: u64,
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            record_memory: true,
            max_data_bytes: 1 << 30,
        }
    }
}

/// One mesh axis: its size and the link classes its collectives cross.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AxisPlacement {
    pub axis: String,
    pub size: u64,
    pub links: Vec<String>,
}

/// The numerics of a run against the single-device interpreter.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Numerics {
    pub outputs: usize,
    pub max_abs_error: f64,
    pub max_rel_error: f64,
}

/// What `summary.json` holds: the scenario as run (topology, overrides,
/// mesh, placement) and its results.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScenarioSummary {
    pub scenario: String,
    pub description: String,
    pub program: String,
    pub topology: String,
    pub nodes: Option<u32>,
    /// Every `--set` override applied, `key=value`.
    pub overrides: Vec<String>,
    /// The mesh in Shardy's syntax (device order included).
    pub mesh: String,
    pub placement: Vec<AxisPlacement>,
    pub seed: u64,
    pub perturbations: Vec<String>,
    pub numerics: Option<Numerics>,
    pub timing: Summary,
    pub checks: Vec<Check>,
    pub passed: bool,
    /// A model workload's training step (what `shardsim train` reports).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_step: Option<crate::models::step::StepReport>,
}

/// A finished run.
#[derive(Debug, Clone)]
pub struct ScenarioResult {
    pub summary: ScenarioSummary,
    pub timeline: Timeline,
    pub topology: Topology,
}

/// The scenario's topology with its overrides (`nodes` first, then `set`).
pub fn load_topology(sc: &Scenario) -> Result<(Topology, Vec<Override>), ScenarioError> {
    let t = &sc.file.topology;
    let mut overrides = Vec::new();
    if let Some(n) = t.nodes {
        overrides.push(Override {
            key: "nodes".into(),
            value: n.to_string(),
        });
    }
    for (key, value) in flatten_set(&t.set) {
        overrides.push(Override { key, value });
    }
    // Switches as large as the nodes need, as `shardsim train --nodes` builds them.
    use crate::topology::fit_radix;
    let topo = match (&t.preset, &t.file) {
        (Some(p), None) => fit_radix(&overrides, |o| crate::topology::load(p, o))?,
        (None, Some(f)) => {
            let path = sc.base.as_deref().unwrap_or(Path::new(".")).join(f);
            fit_radix(&overrides, |o| crate::topology::load_path(&path, o))?
        }
        _ => {
            return Err(ScenarioError::Options(
                "[topology] needs exactly one of `preset` and `file`".into(),
            ))
        }
    };
    Ok((topo, overrides))
}

/// The scenario's topology preset or file, for reports.
pub(crate) fn topology_name(sc: &Scenario) -> String {
    let t = &sc.file.topology;
    t.preset
        .clone()
        .or_else(|| t.file.clone())
        .unwrap_or_default()
}

/// The overrides as `key=value` (without `nodes`, reported apart).
pub(crate) fn override_strings(overrides: &[Override]) -> Vec<String> {
    overrides
        .iter()
        .filter(|o| o.key != "nodes")
        .map(|o| format!("{}={}", o.key, o.value))
        .collect()
}

/// Seeded random inputs for the entry function: floats uniform in [-1, 1),
/// integers in [0, 8), booleans fair.
pub fn random_inputs(module: &Module, seed: u64) -> Result<Vec<Tensor>, ScenarioError> {
    let f = module
        .entry()
        .ok_or_else(|| ScenarioError::Numerics("the program has no entry function".into()))?;
    let mut rng = component_rng(seed, "inputs");
    f.args
        .iter()
        .map(|&a| {
            let ty = &f.value(a).ty;
            let n: u64 = ty.shape.iter().product();
            let values: Vec<f64> = (0..n)
                .map(|_| {
                    if ty.dtype.is_float() {
                        rng.random_range(-1.0..1.0)
                    } else if ty.dtype == crate::base::DType::I1 {
                        f64::from(u8::from(rng.random_bool(0.5)))
                    } else {
                        f64::from(rng.random_range(0u8..8))
                    }
                })
                .collect();
            Tensor::from_f64_values(ty.shape.clone(), ty.dtype, &values)
                .map_err(|e| ScenarioError::Numerics(e.to_string()))
        })
        .collect()
}

/// Run `sc`, partitioning through `cache`.
pub fn run_scenario(
    sc: &Scenario,
    cache: &ProgramCache,
    cfg: RunConfig,
) -> Result<ScenarioResult, ScenarioError> {
    let (topo, overrides) = load_topology(sc)?;
    if sc.file.workload.model.is_some() {
        return super::model_run::run_model(sc, topo, &overrides);
    }
    let devices = u64::from(topo.num_devices());
    let mesh_spec = sc.file.mesh.as_ref().ok_or_else(|| {
        ScenarioError::Mesh("a `program` workload needs a [mesh] (shape and axes)".into())
    })?;
    let mesh = build_mesh(mesh_spec, devices)?;
    let mapping = MeshMapping::new(&topo, &mesh)?;
    let placement = mesh
        .axes()
        .iter()
        .map(|a| {
            let classes = mapping.axis_link_classes(&[AxisRef::full(&a.name)])?;
            Ok(AxisPlacement {
                axis: a.name.clone(),
                size: a.size,
                links: classes.iter().map(|c| c.to_string()).collect(),
            })
        })
        .collect::<Result<Vec<_>, ScenarioError>>()?;
    let prepared = cache.prepare(&sc.file.workload, sc.base.as_deref(), &mesh)?;
    let program = &prepared.program;
    let mut opts = timed_options(&sc.file.run, &topo, devices)?;
    opts.record_memory = cfg.record_memory;
    let timeline = run_timed(program, &topo, &opts)?;
    let timing = report::summarize(&timeline, &topo);
    let numerics = if sc.file.run.numerics {
        let data_bytes: u64 = program
            .values
            .iter()
            .map(|v| v.local_bytes().saturating_mul(program.num_devices()))
            .fold(0, u64::saturating_add);
        if data_bytes > cfg.max_data_bytes {
            return Err(ScenarioError::Numerics(format!(
                "device buffers would take {data_bytes} bytes, above the {} allowed: turn numerics off or use a smaller model",
                cfg.max_data_bytes
            )));
        }
        let inputs = random_inputs(&prepared.module, sc.file.run.seed)?;
        let outs = execute(program, &inputs).map_err(|e| ScenarioError::Numerics(e.to_string()))?;
        let reference = interpret(&prepared.module, &inputs)
            .map_err(|e| ScenarioError::Numerics(e.to_string()))?;
        let (mut abs, mut rel) = (0.0f64, 0.0f64);
        for (o, r) in outs.iter().zip(&reference) {
            let (a, b) =
                max_abs_rel_error(o, r).map_err(|e| ScenarioError::Numerics(e.to_string()))?;
            abs = abs.max(a);
            rel = rel.max(b);
        }
        Some(Numerics {
            outputs: outs.len(),
            max_abs_error: abs,
            max_rel_error: rel,
        })
    } else {
        None
    };
    let checks = check_all(
        &sc.file.expect,
        &timing,
        numerics.as_ref().map(|n| n.max_abs_error),
    );
    let summary = ScenarioSummary {
        scenario: sc.name.clone(),
        description: sc.file.description.clone(),
        program: prepared.source.clone(),
        topology: topology_name(sc),
        nodes: sc.file.topology.nodes,
        overrides: override_strings(&overrides),
        mesh: mesh.to_string(),
        placement,
        seed: sc.file.run.seed,
        perturbations: describe_perturbations(&opts, &topo),
        numerics,
        passed: checks.iter().all(|c| c.ok),
        checks,
        timing,
        model_step: None,
    };
    Ok(ScenarioResult {
        summary,
        timeline,
        topology: topo,
    })
}
