//! Scenarios, `shardsim run`, sweeps and reports: every regression scenario
//! in `scenarios/` holds its expectations; failed expectations and meshes
//! that do not match the machine are errors that say so; sweep results do
//! not depend on the job count or sharding; the HTML report renders in a
//! headless Chromium.

use crate::common::{shardsim, shardsim_json};
use std::path::{Path, PathBuf};
use std::process::Command;

use shardsim::scenario::{run_scenario, ProgramCache, RunConfig, Scenario};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn temp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("shardsim-scenario-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn scenario_files() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(root().join("scenarios"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    v.sort();
    v
}

#[test]
fn every_regression_scenario_holds_its_expectations() {
    let cache = ProgramCache::new();
    let cfg = RunConfig {
        record_memory: false,
        ..RunConfig::default()
    };
    let files = scenario_files();
    assert!(files.len() >= 10, "only {} scenarios", files.len());
    let mut presets = Vec::new();
    let (mut numerics, mut faults, mut stragglers) = (0, 0, 0);
    for f in &files {
        let sc = Scenario::load(f).unwrap();
        let r = run_scenario(&sc, &cache, cfg).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        let failed: Vec<String> = r
            .summary
            .checks
            .iter()
            .filter(|c| !c.ok)
            .map(|c| format!("{}: {}", c.what, c.message))
            .collect();
        assert!(failed.is_empty(), "{}: {}", f.display(), failed.join("; "));
        assert!(
            !r.summary.checks.is_empty(),
            "{} checks nothing",
            f.display()
        );
        let preset = sc.file.topology.preset.clone().unwrap_or_default();
        presets.push(preset.split(':').next().unwrap().to_string());
        numerics += usize::from(r.summary.numerics.is_some());
        faults += usize::from(
            r.summary
                .perturbations
                .iter()
                .any(|p| p.starts_with("link fault")),
        );
        stragglers += usize::from(
            r.summary
                .perturbations
                .iter()
                .any(|p| p.starts_with("straggler")),
        );
    }
    for family in shardsim::topology::preset_names() {
        assert!(
            presets.iter().any(|p| p == family),
            "no scenario on {family}"
        );
    }
    assert!(numerics >= 3 && faults >= 1 && stragglers >= 1);
}

#[test]
fn a_failed_expectation_exits_1_saying_which_and_by_how_much() {
    let out_dir = temp("fail");
    let f = root().join("scenarios/mlp_block_dgx_h100_megatron.toml");
    let out = shardsim(&[
        "run",
        f.to_str().unwrap(),
        "--set",
        "set.nvlink.bandwidth=100GB/s",
        "--no-plots",
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("step_time: 10.972 ms is 35.21% above the expected 8.114 ms"),
        "{err}"
    );
    let summary =
        std::fs::read_to_string(out_dir.join("mlp_block_dgx_h100_megatron/summary.json")).unwrap();
    assert!(
        summary.contains("\"nvlink.bandwidth=100GB/s\""),
        "overrides not recorded"
    );
    assert!(
        summary.contains("\"mesh\": \"<[\\\"data\\\"=2, \\\"model\\\"=4]>\""),
        "{summary}"
    );
    let _ = std::fs::remove_dir_all(&out_dir);
}

#[test]
fn a_mesh_that_leaves_devices_idle_is_an_error_naming_both_counts() {
    let model = root().join("models/gpt3_mlp_block.mlir");
    let out = shardsim(&[
        "exec",
        model.to_str().unwrap(),
        "--topology",
        "dgx-h100",
        "--nodes",
        "4",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("mesh has 8 devices but dgx-h100 x 4 nodes has 32"),
        "{err}"
    );
    let f = root().join("scenarios/mlp_block_dgx_h100_megatron.toml");
    let out = shardsim(&[
        "run",
        f.to_str().unwrap(),
        "--set",
        "topology.nodes=4",
        "--no-plots",
        "-o",
        "/nonexistent",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("the mesh has 8 devices but the topology has 32"),
        "{err}"
    );
    let out = shardsim(&[
        "run",
        f.to_str().unwrap(),
        "--set",
        "workload.model=llama-7b",
        "--no-plots",
    ]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("give either `program` or `model`"));
    let out = shardsim(&[
        "run",
        f.to_str().unwrap(),
        "--set",
        "mesh.sahpe=[2,4]",
        "--no-plots",
    ]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown field `sahpe`"));
}

fn sweep(args: &[&str]) {
    let out = shardsim(args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn sweep_results_do_not_depend_on_jobs_or_shards() {
    let dir = temp("sweep");
    let file = root().join("tests/fixtures/scenario/tiny_sweep.toml");
    let f = file.to_str().unwrap();
    let path = |n: &str| dir.join(n).to_str().unwrap().to_string();
    sweep(&["sweep", f, "--jobs", "1", "--out", &path("one.csv")]);
    sweep(&[
        "sweep",
        f,
        "--jobs",
        "3",
        "--no-plots",
        "--out",
        &path("three.csv"),
    ]);
    for i in 0..3 {
        sweep(&[
            "sweep",
            f,
            "--shard",
            &format!("{i}/3"),
            "--jobs",
            "2",
            "--out",
            &path(&format!("s{i}.csv")),
        ]);
    }
    sweep(&[
        "merge",
        "--sweep",
        f,
        &path("s0.csv"),
        &path("s2.csv"),
        &path("s1.csv"),
        "--out",
        &path("merged.csv"),
    ]);
    let one = std::fs::read(path("one.csv")).unwrap();
    assert_eq!(one, std::fs::read(path("three.csv")).unwrap());
    assert_eq!(one, std::fs::read(path("merged.csv")).unwrap());
    let text = String::from_utf8(one.clone()).unwrap();
    assert_eq!(text.lines().count(), 7, "{text}");
    assert!(!text.contains(",error,"), "{text}");
    // Resume: a file with some points keeps them and runs the rest.
    let partial: String = text.lines().take(3).map(|l| format!("{l}\n")).collect();
    std::fs::write(path("resumed.csv"), partial).unwrap();
    sweep(&[
        "sweep",
        f,
        "--resume",
        "--no-plots",
        "--out",
        &path("resumed.csv"),
    ]);
    assert_eq!(one, std::fs::read(path("resumed.csv")).unwrap());
    // Merging with points missing is refused, naming them: a whole shard
    // (points 1 and 4), and the trailing point of the last shard (5), which
    // no numbering gap would show.
    let refused = |inputs: &[&str]| {
        let bad = path("bad.csv");
        let mut args = vec!["merge", "--sweep", f];
        args.extend_from_slice(inputs);
        args.extend_from_slice(&["--out", &bad]);
        let out = shardsim(&args);
        assert_eq!(out.status.code(), Some(2), "{inputs:?}");
        assert!(!dir.join("bad.csv").exists());
        String::from_utf8(out.stderr).unwrap()
    };
    let points_in = |file: &str| -> std::collections::BTreeSet<usize> {
        std::fs::read_to_string(path(file))
            .unwrap()
            .lines()
            .skip(1)
            .map(|l| l.split(',').next().unwrap().parse().unwrap())
            .collect()
    };
    // "2 of 6 points missing: 1, 3-4 (...)" -> {1, 3, 4}.
    let named = |err: &str| -> std::collections::BTreeSet<usize> {
        let list = err
            .split("missing: ")
            .nth(1)
            .unwrap()
            .split(" (")
            .next()
            .unwrap();
        list.split(", ")
            .flat_map(|r| {
                let (a, b) = r.split_once('-').unwrap_or((r, r));
                a.parse::<usize>().unwrap()..=b.parse::<usize>().unwrap()
            })
            .collect()
    };
    let err = refused(&[&path("s0.csv"), &path("s2.csv")]);
    let s1 = points_in("s1.csv");
    assert!(
        err.contains(&format!("{} of 6 points missing", s1.len())),
        "{err}"
    );
    assert_eq!(named(&err), s1, "{err}");
    // The last point is the last row of whichever shard ran it.
    let last = (0..3)
        .map(|i| format!("s{i}.csv"))
        .find(|f| points_in(f).contains(&5))
        .unwrap();
    let text = std::fs::read_to_string(path(&last)).unwrap();
    assert!(text.lines().last().unwrap().starts_with("5,"), "{text}");
    let cut: String = text
        .lines()
        .take(text.lines().count() - 1)
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(path("cut.csv"), cut).unwrap();
    let others: Vec<String> = (0..3)
        .map(|i| format!("s{i}.csv"))
        .filter(|f| *f != last)
        .map(|f| path(&f))
        .collect();
    let err = refused(&[&others[0], &others[1], &path("cut.csv")]);
    assert!(err.contains("1 of 6 points missing: 5 "), "{err}");
    // A shard given twice, and a shard of another sweep, are refused too.
    let err = refused(&[&path("s0.csv"), &path("s0.csv")]);
    let first = points_in("s0.csv").into_iter().next().unwrap();
    assert!(err.contains(&format!("point {first} is in both")), "{err}");
    let other = root().join("tests/fixtures/scenario/tiny_nodes_sweep.toml");
    let out = shardsim(&[
        "merge",
        "--sweep",
        other.to_str().unwrap(),
        &path("s0.csv"),
        "--out",
        &path("bad.csv"),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("other columns"));
    for pic in [
        "heatmap.svg",
        "heatmap.png",
        "pareto.svg",
        "pareto.png",
        "report.html",
    ] {
        assert!(dir.join(pic).exists(), "{pic} missing");
    }
    let leftovers: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A headless Chromium from Debian's package, if there is one.
fn chromium() -> Option<PathBuf> {
    [
        "/usr/bin/chromium",
        "/usr/bin/chromium-browser",
        "/usr/bin/google-chrome",
    ]
    .iter()
    .map(PathBuf::from)
    .find(|p| p.exists())
}

/// Screenshot `html` with Chromium; None (with the reason printed) when
/// Chromium is not installed.
fn screenshot(html: &Path, png: &Path, profile: &Path) -> Option<()> {
    let Some(bin) = chromium() else {
        println!("skipped: no chromium (install Debian's `chromium` package; .ci/run does)");
        return None;
    };
    let out = Command::new(bin)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            &format!("--user-data-dir={}", profile.display()),
            &format!("--screenshot={}", png.display()),
            "--window-size=1200,2000",
            &format!("file://{}", html.display()),
        ])
        .output()
        .expect("chromium starts");
    assert!(
        png.exists(),
        "no screenshot: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(())
}

#[test]
fn the_run_report_renders_in_chromium_and_is_not_blank() {
    let dir = temp("report");
    let out = shardsim(&["run", "--out", dir.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("step time") && text.contains("all_reduce"),
        "{text}"
    );
    let report = dir.join("default");
    for f in [
        "summary.json",
        "summary.csv",
        "trace.json",
        "events.csv",
        "gantt.svg",
        "links.png",
        "memory.svg",
        "breakdown.png",
        "report.html",
    ] {
        assert!(report.join(f).exists(), "{f} missing");
    }
    let html = std::fs::read_to_string(report.join("report.html")).unwrap();
    assert_eq!(html.matches("<svg").count(), 4);
    assert!(
        !html.contains("src=\"http") && !html.contains("<script"),
        "not self-contained"
    );
    assert_renders(&report.join("report.html"), &dir);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `html` renders in Chromium (when there is one) to a picture that is not
/// blank: many colours and enough dark pixels for text and axes.
pub fn assert_renders(html: &Path, scratch: &Path) {
    let png = scratch.join("shot.png");
    if screenshot(html, &png, &scratch.join("profile")).is_none() {
        return;
    }
    let img = image::open(&png).expect("a PNG").to_rgb8();
    let distinct: std::collections::BTreeSet<[u8; 3]> = img.pixels().map(|p| p.0).collect();
    let dark = img
        .pixels()
        .filter(|p| p.0.iter().all(|&c| c < 100))
        .count();
    assert!(
        distinct.len() > 20 && dark > 1000,
        "{}: blank screenshot: {} colours, {dark} dark pixels",
        html.display(),
        distinct.len()
    );
}

/// Every picture a PNG of its stated size that is not blank.
fn assert_pngs(dir: &Path, names: &[&str]) {
    for n in names {
        let p = dir.join(format!("{n}.png"));
        let img = image::open(&p)
            .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
            .to_rgb8();
        let dark = img
            .pixels()
            .filter(|p| p.0.iter().all(|&c| c < 100))
            .count();
        assert!(dark > 500, "{}: blank ({dark} dark pixels)", p.display());
        let svg = std::fs::read_to_string(dir.join(format!("{n}.svg"))).unwrap();
        assert!(svg.starts_with("<svg"), "{n}.svg");
    }
}

#[test]
fn the_sweep_report_renders_in_chromium_with_every_plot() {
    let dir = temp("sweep-report");
    let file = root().join("tests/fixtures/scenario/tiny_nodes_sweep.toml");
    let csv = dir.join("results.csv");
    sweep(&[
        "sweep",
        file.to_str().unwrap(),
        "--out",
        csv.to_str().unwrap(),
    ]);
    assert_pngs(&dir, &["heatmap", "scaling", "pareto"]);
    // Four shards (0/4 ... 3/4) merged equal the single run byte for byte.
    let f = file.to_str().unwrap();
    let shards: Vec<String> = (0..4)
        .map(|i| dir.join(format!("shard{i}.csv")).display().to_string())
        .collect();
    for (i, s) in shards.iter().enumerate() {
        let shard = format!("{i}/4");
        sweep(&["sweep", f, "--shard", &shard, "--jobs", "1", "--out", s]);
    }
    let merged = dir.join("merged.csv");
    let mut args = vec!["merge", "--sweep", f];
    args.extend(shards.iter().rev().map(String::as_str));
    args.extend(["--out", merged.to_str().unwrap()]);
    sweep(&args);
    assert_eq!(
        std::fs::read(&merged).unwrap(),
        std::fs::read(&csv).unwrap()
    );
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert_eq!(html.matches("<svg").count(), 3, "heatmap, scaling, pareto");
    // Axis labels keep the sweep keys as written (dots included).
    for key in ["topology.nodes", "set.nvlink.bandwidth", "mesh.shape"] {
        assert!(html.contains(key), "{key} missing from the report");
    }
    // Each varying key names its scaling curve: 2 meshes x 2 bandwidths.
    let scaling = std::fs::read_to_string(dir.join("scaling.svg")).unwrap();
    for (m, b) in [("-1x2", "100GB/s"), ("-1x8", "450GB/s")] {
        let label = format!("mesh.shape = {m}, set.nvlink.bandwidth = {b}");
        assert!(scaling.contains(&label), "{label} missing from scaling.svg");
    }
    assert!(!html.contains("<script") && !html.contains("src=\"http"));
    assert_renders(&dir.join("report.html"), &dir);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_collective_report_overlays_the_measured_curve_and_renders() {
    let dir = temp("collective-report");
    let measured = root().join("tests/fixtures/report/a100_1node_allreduce.csv");
    let v = shardsim_json(&[
        "collective",
        "--topology",
        "dgx-a100",
        "--op",
        "all_reduce",
        "--sizes",
        "1MiB:1GiB:x4",
        "--set",
        "nvlink.bandwidth=300GB/s",
        "--format",
        "json",
        "--out",
        dir.to_str().unwrap(),
        "--measured",
        measured.to_str().unwrap(),
    ]);
    assert_eq!(v["op"], "all_reduce");
    assert_eq!(
        v["overrides"],
        serde_json::json!(["nvlink.bandwidth=300GB/s"])
    );
    assert_eq!(v["devices"][7], "n0.gpu7");
    let saved: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("summary.json")).unwrap()).unwrap();
    assert_eq!(saved, v);
    assert_pngs(&dir, &["busbw"]);
    let svg = std::fs::read_to_string(dir.join("busbw.svg")).unwrap();
    assert!(
        svg.contains("measured (a100_1node_allreduce)"),
        "no measured curve"
    );
    assert!(
        svg.contains("simulated (8 ranks, dgx-a100)"),
        "no simulated curve"
    );
    // The simulated curve is within 10% of the measured one from 16 MiB up
    // (the calibration's claim), read back from the written CSV.
    let rows = std::fs::read_to_string(dir.join("results.csv")).unwrap();
    let measured_at = |size: u64| -> f64 {
        std::fs::read_to_string(&measured)
            .unwrap()
            .lines()
            .filter(|l| !l.starts_with('#'))
            .find_map(|l| {
                let c: Vec<&str> = l.split(',').collect();
                (c[0] == size.to_string()).then(|| c[3].parse().unwrap())
            })
            .unwrap()
    };
    for l in rows.lines().skip(1) {
        let c: Vec<&str> = l.split(',').collect();
        let (size, busbw): (u64, f64) = (c[0].parse().unwrap(), c[4].parse().unwrap());
        if size >= 16 << 20 {
            let m = measured_at(size);
            assert!((busbw - m).abs() / m < 0.1, "{size}: {busbw} vs {m}");
        }
    }
    assert_renders(&dir.join("report.html"), &dir);
    let _ = std::fs::remove_dir_all(&dir);
}

mod model;

/// A sweep keeps every row but its exit code says whether it is whole: a
/// point that cannot run is exit 2 naming the point (it was exit 0, the
/// error only in the CSV), a failed expectation exit 1 (as `run`).
#[test]
fn sweep_exit_code_says_whether_every_point_ran_and_held() {
    let dir = temp("sweep-exit");
    for (fixture, code, says, rows) in [
        (
            "tiny_sweep_broken.toml",
            2,
            "1 of 3 points failed to run (first, point 1: mesh: the mesh has 12 devices",
            3,
        ),
        (
            "tiny_sweep_expect.toml",
            1,
            "expectations failed: 1 of 2 points (point 1): their failed_checks",
            2,
        ),
    ] {
        let file = root().join("tests/fixtures/scenario").join(fixture);
        let csv = dir.join(format!("{fixture}.csv"));
        let out = shardsim(&[
            "sweep",
            file.to_str().unwrap(),
            "--jobs",
            "1",
            "--no-plots",
            "--out",
            csv.to_str().unwrap(),
        ]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{fixture}: {err}");
        assert_eq!(err.lines().count(), 1, "{fixture}: {err}");
        assert!(err.contains(says), "{fixture}: {err}");
        let text = std::fs::read_to_string(&csv).unwrap();
        assert_eq!(text.lines().count(), rows + 1, "{fixture}: {text}");
    }
}
