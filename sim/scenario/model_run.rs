//! A `model` workload: a model preset (or model `.toml`) under the inline
//! `[workload.strategy]`, one training step simulated by the model builders
//! on the scenario's topology, exactly as `shardsim train` does it. Its step
//! time and memory feed the same summary, expectations, report files and
//! sweep metrics as a program run; what only a program run has
//! (perturbations, numerics, `[mesh]`, per-collective figures) is refused by
//! name rather than silently ignored.

use std::path::Path;

use crate::exec::timed::memory::{OomReport, ScopePeak};
use crate::exec::timed::report;
use crate::exec::timed::Timeline;
use crate::models::step::{model_timed_options, simulate_step, StepReport};
use crate::models::{ModelSpec, Strategy};
use crate::topology::{Override, Topology};

use super::expect::check_all;
use super::runner::{override_strings, topology_name, ScenarioResult, ScenarioSummary};
use super::spec::StrategySpec;
use super::{Scenario, ScenarioError};

/// Run the model workload of `sc` on `topo` (already loaded with `overrides`).
pub fn run_model(
    sc: &Scenario,
    topo: Topology,
    overrides: &[Override],
) -> Result<ScenarioResult, ScenarioError> {
    let w = &sc.file.workload;
    if w.program.is_some() {
        return Err(ScenarioError::Workload(
            "give either `program` or `model`, not both".into(),
        ));
    }
    refuse_inapplicable(sc)?;
    let name = w.model.as_deref().unwrap_or_default();
    let model = load_model(name, sc.base.as_deref())?;
    let strategy = match &w.strategy {
        Some(StrategySpec::Inline(s)) => s.clone(),
        Some(StrategySpec::File(f)) => load_strategy(f, sc.base.as_deref())?,
        None => {
            return Err(ScenarioError::Workload(format!(
                "model '{name}' needs a [workload.strategy] table (tp, pp, dp, micro_batch, global_batch, ... as `shardsim train --strategy` reads) or a strategy file"
            )))
        }
    };
    // The strategy's own errors (a size of 0, a split that does not
    // divide) first: its device count means nothing until it holds.
    strategy.check(&model)?;
    let devices = u64::from(topo.num_devices());
    if strategy.devices() != devices {
        return Err(ScenarioError::Workload(format!(
            "the strategy uses {} devices (tp {} x pp {} x dp {} x cp {}) but the topology has {devices}: set [topology] nodes or the strategy to match",
            strategy.devices(),
            strategy.tp,
            strategy.pp,
            strategy.dp,
            strategy.cp
        )));
    }
    let step = simulate_step(&model, &strategy, &topo, &model_timed_options())?;
    let timeline = step_timeline(&step, &strategy, devices);
    let timing = report::summarize(&timeline, &topo);
    let checks = check_all(&sc.file.expect, &timing, None);
    let summary = ScenarioSummary {
        scenario: sc.name.clone(),
        description: sc.file.description.clone(),
        program: format!("model:{}", step.model),
        topology: topology_name(sc),
        nodes: sc.file.topology.nodes,
        overrides: override_strings(overrides),
        mesh: if strategy.cp > 1 {
            format!(
                "[\"pipeline\"={}, \"data\"={}, \"context\"={}, \"tensor\"={}]",
                strategy.pp, strategy.dp, strategy.cp, strategy.tp
            )
        } else {
            format!(
                "[\"pipeline\"={}, \"data\"={}, \"tensor\"={}]",
                strategy.pp, strategy.dp, strategy.tp
            )
        },
        placement: Vec::new(),
        seed: sc.file.run.seed,
        perturbations: Vec::new(),
        numerics: None,
        passed: checks.iter().all(|c| c.ok),
        checks,
        timing,
        model_step: Some(step),
    };
    Ok(ScenarioResult {
        summary,
        timeline,
        topology: topo,
    })
}

/// A preset name, or a model file relative to the scenario's directory.
fn load_model(name: &str, base: Option<&Path>) -> Result<ModelSpec, ScenarioError> {
    if !name.ends_with(".toml") {
        return Ok(ModelSpec::preset(name)?);
    }
    let path = base
        .ok_or_else(|| {
            ScenarioError::Workload(format!(
                "model file {name} needs a scenario file's directory"
            ))
        })?
        .join(name);
    let text = crate::base::files::read_text(&path)?;
    ModelSpec::from_toml(&text)
        .map_err(|e| ScenarioError::Workload(e.in_file(&path.display().to_string())))
}

/// A strategy file relative to the scenario's directory.
fn load_strategy(name: &str, base: Option<&Path>) -> Result<Strategy, ScenarioError> {
    let path = base
        .ok_or_else(|| {
            ScenarioError::Workload(format!(
                "strategy file {name} needs a scenario file's directory"
            ))
        })?
        .join(name);
    let text = crate::base::files::read_text(&path)?;
    // As `train --strategy FILE` reads it: `global_batch` may be left out.
    Strategy::from_file_toml(&text)
        .map(|(s, _)| s)
        .map_err(|e| ScenarioError::Workload(e.in_file(&path.display().to_string())))
}

/// The fields a model step does not produce, each refused by name.
fn refuse_inapplicable(sc: &Scenario) -> Result<(), ScenarioError> {
    let f = &sc.file;
    let e = &f.expect;
    let r = &f.run;
    let mut bad: Vec<String> = [
        (
            f.mesh.is_some(),
            "[mesh] (the strategy's pp x dp x tp is the mesh)",
        ),
        (f.workload.avg_means, "workload.avg_means"),
        (r.jitter.is_some(), "run.jitter"),
        (!r.stragglers.is_empty(), "run.stragglers"),
        (r.random_stragglers.is_some(), "run.random_stragglers"),
        (!r.link_faults.is_empty(), "run.link_faults"),
        (r.random_link_failures.is_some(), "run.random_link_failures"),
        (r.numerics, "run.numerics"),
        (e.exposed_comm.is_some(), "expect.exposed_comm"),
        (!e.comm_time.is_empty(), "expect.comm_time"),
        (!e.comm_bytes.is_empty(), "expect.comm_bytes"),
        (e.numerics_error.is_some(), "expect.numerics_error"),
    ]
    .into_iter()
    .filter(|(on, _)| *on)
    .map(|(_, what)| what.to_string())
    .collect();
    bad.extend(
        e.peak_memory
            .keys()
            .filter(|k| k.as_str() != "global")
            .map(|k| format!("expect.peak_memory.{k} (a model step has `global` only)")),
    );
    if bad.is_empty() {
        return Ok(());
    }
    Err(ScenarioError::Workload(format!(
        "a model workload does not take {} (it supports expect.step_time, expect.peak_memory.global and expect.ooms)",
        bad.join(", ")
    )))
}

/// The step as a timeline without spans: the step time, the fullest
/// device's peak (the first device of the fullest pipeline stage: stages are
/// the outermost `dp x tp` blocks of device ids) and, when it does not fit,
/// one out-of-memory report for it.
fn step_timeline(step: &StepReport, strategy: &Strategy, devices: u64) -> Timeline {
    let m = &step.memory;
    let device = m.stage * strategy.dp * strategy.tp * strategy.cp;
    let ooms = if m.fits {
        Vec::new()
    } else {
        vec![OomReport {
            device,
            scope: "global".into(),
            time_ps: 0,
            value: format!(
                "stage {} activations and transients over its model states",
                m.stage
            ),
            bytes: m.activation_bytes + m.transient_bytes,
            capacity: m.capacity_bytes,
            in_use: m.model_state_bytes,
            live: Vec::new(),
        }]
    };
    Timeline {
        makespan_ps: step.step_time_ps,
        devices: (0..devices).collect(),
        spans: Vec::new(),
        links: Vec::new(),
        peaks: vec![ScopePeak {
            device,
            scope: "global".into(),
            capacity: m.capacity_bytes,
            peak: m.peak_bytes,
            peak_at_ps: 0,
        }],
        memory: Vec::new(),
        stopped: !m.fits,
        ooms,
        ooms_dropped: 0,
        events: 0,
    }
}
