//! Model workloads in scenarios: `[workload] model` with an inline strategy
//! gives the step time and memory `shardsim train` gives with the same
//! arguments (also under a topology override, as a sweep sets it), and
//! every field that does not apply to a model step is refused by name.

use std::path::{Path, PathBuf};

use shardsim::scenario::spec::StrategySpec;
use shardsim::scenario::sweep::assign;
use shardsim::scenario::{run_scenario, ProgramCache, RunConfig, Scenario};

use crate::common::{fixture, shardsim};

const SCENARIO: &str = "scenarios/llama3_8b_dgx_h100_tp4_pp2.toml";

fn path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(SCENARIO)
}

fn cfg() -> RunConfig {
    RunConfig {
        record_memory: false,
        ..RunConfig::default()
    }
}

/// The scenario with `key = value` assigned (as `run --set` and sweeps do).
fn edited(key: &str, value: toml::Value) -> Result<Scenario, shardsim::scenario::ScenarioError> {
    let text = std::fs::read_to_string(path()).unwrap();
    let mut table: toml::Table = toml::from_str(&text).unwrap();
    assign(&mut table, key, value)?;
    Scenario::from_table(&table, SCENARIO, path().parent().map(Path::to_path_buf))
}

/// `shardsim train` on the scenario's model and strategy (written out as
/// the strategy file `train --strategy` reads), as JSON.
fn train(sc: &Scenario, sets: &[&str]) -> serde_json::Value {
    let dir = std::env::temp_dir().join(format!("shardsim-model-scenario-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let strategy = dir.join(format!("strategy-{}.toml", sets.len()));
    let s = match sc.file.workload.strategy.as_ref().expect("a strategy") {
        StrategySpec::Inline(s) => s,
        StrategySpec::File(f) => panic!("inline strategy expected, not {f}"),
    };
    std::fs::write(&strategy, toml::to_string(s).unwrap()).unwrap();
    let mut args = vec![
        "train",
        sc.file.workload.model.as_deref().unwrap(),
        "--topology",
        sc.file.topology.preset.as_deref().unwrap(),
        "--strategy",
        strategy.to_str().unwrap(),
        "--format",
        "json",
    ];
    for s in sets {
        args.extend(["--set", s]);
    }
    let out = shardsim(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn model_scenario_step_equals_train_with_the_same_arguments() {
    let cache = ProgramCache::new();
    for (key, value, sets) in [
        (None, None, vec![]),
        (
            Some("set.nvlink.bandwidth"),
            Some("900GB/s"),
            vec!["nvlink.bandwidth=900GB/s"],
        ),
    ] {
        let sc = match (key, value) {
            (Some(k), Some(v)) => edited(k, toml::Value::String(v.into())).unwrap(),
            _ => Scenario::load(&path()).unwrap(),
        };
        let r = run_scenario(&sc, &cache, cfg()).unwrap();
        let t = train(&sc, &sets);
        let step = r.summary.model_step.as_ref().expect("a model step");
        assert_eq!(
            r.summary.timing.step_time_ps,
            t["step_time_ps"].as_u64().unwrap(),
            "{sets:?}"
        );
        assert_eq!(step.step_time_ps, r.summary.timing.step_time_ps);
        let peak = r.summary.timing.peak_memory.iter().map(|p| p.peak).max();
        assert_eq!(peak, t["memory"]["peak_bytes"].as_u64(), "{sets:?}");
        assert!(r.summary.timing.ooms.is_empty());
    }
}

#[test]
fn model_scenario_refuses_fields_that_do_not_apply() {
    let text = std::fs::read_to_string(fixture("scenario/model_bad_fields.toml")).unwrap();
    let table: toml::Table = toml::from_str(&text).unwrap();
    let cases = table["case"].as_array().unwrap();
    assert!(cases.len() >= 10);
    let cache = ProgramCache::new();
    for c in cases {
        let key = c["key"].as_str().unwrap();
        let want = c["error"].as_str().unwrap();
        let err = edited(key, c["value"].clone())
            .and_then(|sc| run_scenario(&sc, &cache, cfg()).map(|_| ()))
            .expect_err(key)
            .to_string();
        assert!(err.contains(want), "{key}: `{err}` lacks `{want}`");
        assert!(!err.contains('\n'), "{key}: one line: {err}");
    }
}

#[test]
fn model_scenario_user_error_exits_2_naming_both_counts() {
    let out = shardsim(&[
        "run",
        path().to_str().unwrap(),
        "--set",
        "topology.nodes=2",
        "--no-plots",
        "-o",
        std::env::temp_dir().to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("uses 8 devices") && err.contains("has 16"),
        "{err}"
    );
}

/// Context parallelism from a scenario: `cp = 2` on two nodes gives the step
/// `shardsim train` gives with the same strategy.
#[test]
fn model_scenario_with_context_parallelism_equals_train() {
    let text = std::fs::read_to_string(path()).unwrap();
    let mut table: toml::Table = toml::from_str(&text).unwrap();
    assign(&mut table, "workload.strategy.cp", toml::Value::Integer(2)).unwrap();
    assign(&mut table, "topology.nodes", toml::Value::Integer(2)).unwrap();
    let sc =
        Scenario::from_table(&table, SCENARIO, path().parent().map(Path::to_path_buf)).unwrap();
    let r = run_scenario(&sc, &ProgramCache::new(), cfg()).unwrap();
    let t = train(&sc, &[]);
    assert_eq!(t["gpus"], 16);
    assert_eq!(
        r.summary.timing.step_time_ps,
        t["step_time_ps"].as_u64().unwrap()
    );
    assert!(
        r.summary.mesh.contains("\"context\"=2"),
        "{}",
        r.summary.mesh
    );
}

/// A model step that does not fit, in a scenario that does not expect it,
/// is an out-of-memory run: `run` exits 3 naming the stage and the bytes.
#[test]
fn model_scenario_that_does_not_fit_exits_3() {
    let text = std::fs::read_to_string(path()).unwrap();
    let mut table: toml::Table = toml::from_str(&text).unwrap();
    // Llama-3 70B on 8 GPUs (TP4 x PP2) without ZeRO: about 140 GB of
    // model states per GPU.
    assign(
        &mut table,
        "workload.model",
        toml::Value::String("llama3-70b".into()),
    )
    .unwrap();
    table.remove("expect");
    let dir = std::env::temp_dir().join(format!("shardsim-model-oom-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("oom.toml");
    std::fs::write(&file, toml::to_string(&table).unwrap()).unwrap();
    let out = shardsim(&[
        "run",
        file.to_str().unwrap(),
        "--no-plots",
        "-o",
        dir.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        err.contains("out of memory") && err.contains("stage 0"),
        "{err}"
    );
}

/// `strategy = "file.toml"`: the strategy read from a file next to the
/// scenario gives the step the inline table gives; a missing file is a user
/// error naming it.
#[test]
fn model_scenario_reads_a_strategy_file() {
    let inline = Scenario::load(&path()).unwrap();
    let dir = std::env::temp_dir().join(format!("shardsim-strategy-file-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let s = match inline.file.workload.strategy.as_ref().unwrap() {
        StrategySpec::Inline(s) => s.clone(),
        StrategySpec::File(_) => unreachable!(),
    };
    std::fs::write(dir.join("tp4_pp2.toml"), toml::to_string(&s).unwrap()).unwrap();
    let text = std::fs::read_to_string(path()).unwrap();
    let mut table: toml::Table = toml::from_str(&text).unwrap();
    assign(
        &mut table,
        "workload.strategy",
        toml::Value::String("tp4_pp2.toml".into()),
    )
    .unwrap();
    let cache = ProgramCache::new();
    let sc = Scenario::from_table(&table, "file.toml", Some(dir.clone())).unwrap();
    let a = run_scenario(&sc, &cache, cfg()).unwrap();
    let b = run_scenario(&inline, &cache, cfg()).unwrap();
    assert_eq!(a.summary.timing.step_time_ps, b.summary.timing.step_time_ps);
    assign(
        &mut table,
        "workload.strategy",
        toml::Value::String("missing.toml".into()),
    )
    .unwrap();
    let sc = Scenario::from_table(&table, "file.toml", Some(dir)).unwrap();
    let err = run_scenario(&sc, &cache, cfg()).unwrap_err().to_string();
    assert!(err.contains("missing.toml"), "{err}");
}

/// A model step is timed per chunk, not as a timeline of kernels and
/// collectives: its sweep row gives the step time, devices and memory, and
/// leaves the busy and communication columns empty (they were zeros, which
/// read as a step that communicates nothing).
#[test]
fn model_scenario_sweep_row_leaves_the_timeline_columns_empty() {
    use shardsim::scenario::sweep::{metric_cells, METRICS};
    let sc = Scenario::load(&path()).unwrap();
    let r = run_scenario(&sc, &ProgramCache::new(), cfg()).unwrap();
    let cells = metric_cells(&r);
    let cell = |name: &str| &cells[METRICS.iter().position(|m| *m == name).unwrap()];
    assert_eq!(cell("status"), "ok");
    assert_eq!(cell("devices"), "8");
    assert!(cell("step_time_us").parse::<f64>().unwrap() > 0.0);
    assert!(cell("peak_memory_bytes").parse::<u64>().unwrap() > 0);
    // From the compute column to the bytes moved.
    let at = |name: &str| METRICS.iter().position(|m| *m == name).unwrap();
    for name in &METRICS[at("compute_busy_us")..=at("comm_bytes")] {
        assert_eq!(cell(name), "", "{name}");
    }
}
