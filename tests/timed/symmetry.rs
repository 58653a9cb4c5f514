//! Symmetry in the timed run: one timeline per class of equivalent devices
//! gives byte for byte the summary and traces of the full per-device run, on
//! 8, 64 and 512 devices, with and without jitter, stragglers, link faults
//! and out-of-memory reports; and the classes are as coarse as they should be.

use shardsim::engine::{FaultKind, Jitter, LinkFault, Stragglers, Time};
use shardsim::exec::timed::{report, run_timed, run_timed_classes, trace, OomPolicy, TimedOptions};
use shardsim::ir::mlir::parse_and_verify;
use shardsim::partition::{partition, SpmdProgram};
use shardsim::propagate::{propagate_module, Strategy};
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

#[test]
fn reduced_runs_equal_full_runs_with_and_without_perturbations() {
    for (data, model) in [(2u64, 4u64), (8, 8), (64, 8)] {
        let n = data * model;
        let p = program(data, model);
        let topo = machine(n, None);
        let clean = TimedOptions::default();
        assert_eq!(
            check(&p, &topo, &clean, "clean"),
            1,
            "{n} devices: one class"
        );

        let mut stragglers = Stragglers::new();
        stragglers.insert(3, 1.5).unwrap();
        stragglers.insert(n - 2, 2.0).unwrap();
        let opts = TimedOptions {
            stragglers,
            ..TimedOptions::default()
        };
        let k = check(&p, &topo, &opts, "stragglers");
        assert!(k > 2 && k < n as usize, "{n} devices: {k} classes");

        // Jitter draws per device: every device its own class (at 512
        // devices that is the full run twice; 8 and 64 show it).
        if n <= 64 {
            let opts = TimedOptions {
                jitter: Some(Jitter::new(0.05).unwrap()),
                seed: 7,
                ..TimedOptions::default()
            };
            assert_eq!(check(&p, &topo, &opts, "jitter"), n as usize);
        }

        let clean_run = run_timed(&p, &topo, &clean).unwrap();
        let mid = Time(clean_run.makespan_ps / 3);
        let link = clean_run.links.first().map_or(0, |l| l.link);
        let opts = TimedOptions {
            faults: vec![LinkFault {
                link,
                at: mid,
                kind: FaultKind::Degrade(0.25),
            }],
            ..TimedOptions::default()
        };
        check(&p, &topo, &opts, "link fault");

        // Out of memory: HBM a little under the clean run's peak.
        let peak = clean_run.peaks.iter().map(|p| p.peak).max().unwrap();
        let small = machine(n, Some(&format!("{}B", peak - 1)));
        for on_oom in [OomPolicy::Stop, OomPolicy::Continue] {
            let opts = TimedOptions {
                on_oom,
                ..TimedOptions::default()
            };
            check(&p, &small, &opts, "out of memory");
            let t = run_timed(&p, &small, &opts).unwrap();
            assert!(!t.ooms.is_empty(), "{n} devices: an out-of-memory report");
        }
    }
}
