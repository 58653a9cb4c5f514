//! Symmetry in the timed run: one timeline per class of equivalent devices
//! gives byte for byte the summary and traces of the full per-device run, on
//! 8, 64 and 512 devices, with and without jitter, stragglers, link faults
//! and out-of-memory reports (cases in `tests/fixtures/timed/symmetry.toml`);
//! and the classes are exactly as many as worked out by hand.

use shardsim::exec::timed::{report, run_timed, run_timed_classes, trace, TimedOptions};
use shardsim::ir::mlir::parse_and_verify;
use shardsim::partition::{partition, SpmdProgram};
use shardsim::propagate::{propagate_module, Strategy};
use shardsim::scenario::options::timed_options;
use shardsim::scenario::spec::RunSpec;
use shardsim::topology::{self, preset_text, Override, Topology};

/// Two data-parallel x tensor-parallel MLP layers and a weight gradient:
/// all-reduces over `model` (inside a node) and over `data` (across nodes).
fn program(data: u64, model: u64) -> SpmdProgram {
    let (b, d, f) = (2 * data, 64, 32 * model);
    let mut s = format!(
        "module @sym {{\n  sdy.mesh @mesh = <[\"data\"={data}, \"model\"={model}]>\n  \
func.func @main(%x: tensor<{b}x{d}xf32> {{sdy.sharding = #sdy.sharding<@mesh, [{{\"data\"}}, {{}}]>}}, \
%w1: tensor<{d}x{f}xf32> {{sdy.sharding = #sdy.sharding<@mesh, [{{}}, {{\"model\"}}]>}}, \
%w2: tensor<{f}x{d}xf32> {{sdy.sharding = #sdy.sharding<@mesh, [{{\"model\"}}, {{}}]>}}) \
-> (tensor<{b}x{d}xf32>, tensor<{f}x{d}xf32>) {{\n"
    );
    let mut x = "%x".to_string();
    for i in 0..2 {
        s += &format!(
            "    %h{i} = stablehlo.dot_general {x}, %w1, contracting_dims = [1] x [0] : (tensor<{b}x{d}xf32>, tensor<{d}x{f}xf32>) -> tensor<{b}x{f}xf32>\n\
    %a{i} = stablehlo.tanh %h{i} : tensor<{b}x{f}xf32>\n\
    %y{i} = stablehlo.dot_general %a{i}, %w2, contracting_dims = [1] x [0] : (tensor<{b}x{f}xf32>, tensor<{f}x{d}xf32>) -> tensor<{b}x{d}xf32>\n\
    %x{i} = stablehlo.add {x}, %y{i} : tensor<{b}x{d}xf32>\n"
        );
        x = format!("%x{i}");
    }
    s += &format!(
        "    %g = stablehlo.dot_general %a1, {x}, contracting_dims = [0] x [0] : (tensor<{b}x{f}xf32>, tensor<{b}x{d}xf32>) -> tensor<{f}x{d}xf32>\n\
    %w2n = stablehlo.subtract %w2, %g : tensor<{f}x{d}xf32>\n\
    return {x}, %w2n : tensor<{b}x{d}xf32>, tensor<{f}x{d}xf32>\n  }}\n}}\n"
    );
    let mut m = parse_and_verify(&s).unwrap();
    propagate_module(&mut m, Strategy::default()).unwrap();
    partition(&m).unwrap()
}

/// DGX H100 nodes for `devices` GPUs, optionally with a smaller HBM.
fn machine(devices: u64, hbm: Option<&str>) -> Topology {
    let mut text = preset_text("dgx-h100").unwrap().to_string();
    if let Some(c) = hbm {
        text = text.replace("capacity = \"80GiB\"", &format!("capacity = \"{c}\""));
    }
    let nodes = Override {
        key: "nodes".into(),
        value: (devices / 8).to_string(),
    };
    let overrides = if devices > 8 { vec![nodes] } else { vec![] };
    topology::load_text(&text, "sym.toml", &overrides).unwrap()
}

/// Summary JSON, Chrome trace and CSV of the full run and of the reduced
/// run must be the same bytes; returns the number of classes.
fn check(p: &SpmdProgram, topo: &Topology, opts: &TimedOptions, what: &str) -> usize {
    let full = run_timed(
        p,
        topo,
        &TimedOptions {
            per_device: true,
            ..opts.clone()
        },
    )
    .unwrap();
    let reduced = run_timed_classes(p, topo, opts).unwrap();
    let json = |s: &report::Summary| serde_json::to_string_pretty(s).unwrap();
    assert_eq!(
        json(&report::summarize(&full, topo)),
        json(&report::summarize_classes(&reduced, topo)),
        "{what}: summary"
    );
    let expanded = reduced.expand();
    assert_eq!(
        trace::events_csv(&full),
        trace::events_csv(&expanded),
        "{what}: csv"
    );
    assert_eq!(
        trace::chrome_trace(&full, topo),
        trace::chrome_trace(&expanded, topo),
        "{what}: trace"
    );
    assert_eq!(full, expanded, "{what}: timeline");
    reduced.classes.len()
}

/// One case of `tests/fixtures/timed/symmetry.toml`.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    data: u64,
    model: u64,
    #[serde(default)]
    run: RunSpec,
    #[serde(default)]
    tight_hbm: bool,
    classes: Option<usize>,
}

#[derive(serde::Deserialize)]
struct Cases {
    case: Vec<Case>,
}

#[test]
fn reduced_runs_equal_full_runs_with_and_without_perturbations() {
    let path = crate::common::fixture("timed/symmetry.toml");
    let cases: Cases = toml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let mut programs: std::collections::BTreeMap<(u64, u64), SpmdProgram> = Default::default();
    let mut sizes = std::collections::BTreeSet::new();
    for (i, case) in cases.case.iter().enumerate() {
        let (data, model) = (case.data, case.model);
        let n = data * model;
        sizes.insert(n);
        let p = programs
            .entry((data, model))
            .or_insert_with(|| program(data, model));
        let topo = machine(n, None);
        let clean = run_timed(p, &topo, &TimedOptions::default()).unwrap();
        let topo = if case.tight_hbm {
            let peak = clean.peaks.iter().map(|p| p.peak).max().unwrap();
            machine(n, Some(&format!("{}B", peak - 1)))
        } else {
            topo
        };
        let opts = timed_options(&case.run, &topo, n).unwrap();
        let what = format!("case {i} ({data} x {model}, {:?})", case.run);
        let classes = check(p, &topo, &opts, &what);
        if let Some(k) = case.classes {
            assert_eq!(classes, k, "{what}: classes");
        }
        // Every perturbation must change the run, or the case checks nothing.
        let perturbed = run_timed(p, &topo, &opts).unwrap();
        if case.tight_hbm {
            assert!(
                !perturbed.ooms.is_empty(),
                "{what}: no out-of-memory report"
            );
        } else if case.run != RunSpec::default() {
            assert_ne!(
                perturbed.makespan_ps, clean.makespan_ps,
                "{what}: the perturbation changes nothing (clean step {} ps)",
                clean.makespan_ps
            );
        }
    }
    assert_eq!(sizes.into_iter().collect::<Vec<_>>(), vec![8, 64, 512]);
}

/// The progress hook sees the run's steps over every device, never more
/// than the total, and a last call with everything done; it changes nothing.
#[test]
fn the_progress_hook_counts_every_devices_steps_and_changes_nothing() {
    use shardsim::exec::timed::{ProgressHook, RunProgress};
    use std::sync::{Arc, Mutex};
    let p = program(8, 8);
    let topo = machine(64, None);
    let calls: Arc<Mutex<Vec<RunProgress>>> = Arc::default();
    let seen = Arc::clone(&calls);
    let opts = TimedOptions {
        progress: Some(ProgressHook(Arc::new(move |r| {
            seen.lock().unwrap().push(r)
        }))),
        ..TimedOptions::default()
    };
    let with = run_timed_classes(&p, &topo, &opts).unwrap();
    let without = run_timed_classes(&p, &topo, &TimedOptions::default()).unwrap();
    assert_eq!(with, without);
    let calls = calls.lock().unwrap();
    let last = *calls.last().unwrap();
    // Every step of the partitioned program (loops none here) on 64 devices.
    assert_eq!(last.total, 64 * p.steps.len() as u64);
    assert_eq!((last.done, last.finished), (last.total, true));
    assert!(calls.iter().all(|c| c.done <= c.total));
    assert_eq!(calls.iter().filter(|c| c.finished).count(), 1);
}

/// One record per link (`link_totals`) gives the same summary (its link
/// figures included) and step as one record per collective step and link,
/// with far fewer records.
#[test]
fn link_totals_give_the_same_summary_with_one_record_per_link() {
    let p = program(64, 8);
    let topo = machine(512, None);
    let each = run_timed_classes(&p, &topo, &TimedOptions::default()).unwrap();
    let totals = run_timed_classes(
        &p,
        &topo,
        &TimedOptions {
            link_totals: true,
            ..TimedOptions::default()
        },
    )
    .unwrap();
    let json = |s: &report::Summary| serde_json::to_string_pretty(s).unwrap();
    assert_eq!(
        json(&report::summarize_classes(&each, &topo)),
        json(&report::summarize_classes(&totals, &topo))
    );
    // Every link once, the bytes of all its collective steps together.
    let links: std::collections::BTreeSet<usize> = each.links.iter().map(|l| l.link).collect();
    assert_eq!(totals.links.len(), links.len());
    assert!(each.links.len() > totals.links.len());
    let bytes = |t: &[shardsim::exec::timed::LinkBusy]| t.iter().map(|l| l.bytes).sum::<u64>();
    assert_eq!(bytes(&each.links), bytes(&totals.links));
}

/// A degraded GPU uplink on node 1 of 8 x 8 slows only the collectives of
/// the group whose links it is (node 1's "model" row): every other group's
/// collective takes exactly its fault-free time (the same step's span in the
/// clean run, one figure for all groups), row 1's take longer; the reduced
/// run splits off just that row and equals the per-device run.
#[test]
fn a_link_fault_slows_only_the_groups_it_reaches() {
    use shardsim::exec::timed::StreamKind;
    use shardsim::partition::Step;
    let p = program(8, 8);
    let topo = machine(64, None);
    let clean = run_timed(&p, &topo, &TimedOptions::default()).unwrap();
    let run = RunSpec {
        link_faults: vec!["n1.gpu1->n1.nvswitch@0us:0.25".into()],
        ..RunSpec::default()
    };
    let opts = timed_options(&run, &topo, 64).unwrap();
    assert_eq!(check(&p, &topo, &opts, "fault on n1.gpu1"), 2);
    let faulted = run_timed(&p, &topo, &opts).unwrap();
    // Fault-free duration of every collective step (the same on every device).
    let mut clean_dur: std::collections::BTreeMap<usize, u64> = Default::default();
    for s in clean.spans.iter().filter(|s| s.stream == StreamKind::Comm) {
        let d = s.end_ps - s.start_ps;
        assert_eq!(*clean_dur.entry(s.step).or_insert(d), d, "step {}", s.step);
    }
    // Per step: does the group of device 9 stay inside node 1 (a "model" row)?
    let row_step = |step: usize| match &p.steps[step] {
        Step::Collective(c) => c
            .groups
            .iter()
            .find(|g| g.contains(&9))
            .is_some_and(|g| g.iter().all(|d| (8..16).contains(d))),
        _ => unreachable!("comm spans are collectives"),
    };
    let (mut slower, mut same) = (0, 0);
    for s in faulted
        .spans
        .iter()
        .filter(|s| s.stream == StreamKind::Comm)
    {
        let (d, c) = (s.end_ps - s.start_ps, clean_dur[&s.step]);
        if (8..16).contains(&s.device) && row_step(s.step) {
            assert!(d > c, "device {} step {}: {d} <= {c}", s.device, s.step);
            slower += 1;
        } else {
            assert_eq!(d, c, "device {} step {}", s.device, s.step);
            same += 1;
        }
    }
    assert!(
        slower >= 8 && same > slower,
        "{slower} slower, {same} unchanged"
    );
    assert!(faulted.makespan_ps > clean.makespan_ps);
}
