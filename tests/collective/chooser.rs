//! `auto` under each chooser (`collective.chooser` = model, nccl,
//! nccl-algo) against every published allreduce curve
//! (fixtures/collective/nccl_chooser.toml lists them with the machine's
//! description, the measured curve's algorithm level per size, and the
//! sizes each chooser misses): the simulated time must be within the
//! curve's bound at every size from `from` except the pinned misses, which
//! must still miss; and NCCL's algorithm must match the measured level at
//! every size where the level is known, except the pinned mismatches. A
//! change that fixes or breaks a size shows here and in README's table.

use std::collections::BTreeMap;

use serde::Deserialize;
use shardsim::collective::{
    time_collective, Algorithm, Calibration, CollectiveOp, Group, Protocol, TimedChoice,
};

use super::multinode::rows;

use crate::common::fixture;

#[derive(Deserialize)]
struct Cases {
    curve: Vec<Curve>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Curve {
    file: String,
    preset: String,
    set: Vec<[String; 2]>,
    /// Smallest size checked, bytes.
    from: u64,
    /// Largest error allowed, as a fraction.
    within: f64,
    /// (from size, algorithm) steps of the measured curve's level; "?"
    /// where the curve does not tell.
    levels: Vec<(u64, String)>,
    /// Sizes where NCCL's algorithm is not the measured level.
    level_misses: Vec<u64>,
    /// Per chooser, the sizes outside `within`.
    misses: BTreeMap<String, Vec<u64>>,
}

/// `auto`'s allreduce of `size` bytes over every device of `c`'s machine
/// under `chooser`.
fn auto_allreduce(c: &Curve, chooser: &str) -> impl Fn(u64) -> TimedChoice {
    let mut set: Vec<(&str, &str)> = c
        .set
        .iter()
        .map(|[k, v]| (k.as_str(), v.as_str()))
        .collect();
    set.push(("collective.chooser", chooser));
    let t = super::load(&c.preset, &set);
    let g = Group::first(&t, t.num_devices()).unwrap();
    let cal = Calibration::for_model(&g.device_model(&t)).unwrap();
    move |size| {
        time_collective(
            &t,
            &g,
            &CollectiveOp::AllReduce,
            size / 4,
            4,
            &cal,
            None,
            None,
        )
        .unwrap()
    }
}

fn cases() -> Cases {
    let text = std::fs::read_to_string(fixture("collective/nccl_chooser.toml")).unwrap();
    toml::from_str(&text).unwrap()
}

fn level_at(c: &Curve, size: u64) -> &str {
    c.levels
        .iter()
        .rev()
        .find(|(from, _)| *from <= size)
        .map_or("?", |(_, l)| l.as_str())
}

/// Every curve, every chooser: the misses are the pinned ones.
#[test]
fn auto_under_each_chooser_against_published_curves() {
    let mut report = String::new();
    let mut failed = Vec::new();
    let cases = cases();
    assert_eq!(
        cases.curve.len(),
        9,
        "one-node A100 and the 8 multi-node curves"
    );
    for c in &cases.curve {
        for chooser in ["model", "nccl", "nccl-algo"] {
            let run = auto_allreduce(c, chooser);
            let mut missed = Vec::new();
            for (size, measured) in rows(&format!("collective/{}", c.file)) {
                if size < c.from {
                    continue;
                }
                let r = run(size);
                let ours = r.time.ps() as f64 / 1e6;
                let err = (ours - measured) / measured;
                report += &format!(
                    "{} {chooser} {size}: {}/{} {:+.1}%\n",
                    c.file,
                    r.algo.name(),
                    r.proto.name(),
                    err * 100.0
                );
                if err.abs() >= c.within {
                    missed.push(size);
                }
            }
            let pinned = c.misses.get(chooser).cloned().unwrap_or_default();
            if missed != pinned {
                failed.push(format!("{} {chooser}: {missed:?} != {pinned:?}", c.file));
            }
        }
    }
    println!("{report}");
    assert!(failed.is_empty(), "{failed:#?}\n{report}");
}

/// NCCL's algorithm (the `nccl-algo` chooser's) against the measured level.
#[test]
fn nccl_algorithm_against_the_measured_level() {
    let mut report = String::new();
    let mut failed = Vec::new();
    for c in &cases().curve {
        let run = auto_allreduce(c, "nccl-algo");
        let mut mismatched = Vec::new();
        for (size, _) in rows(&format!("collective/{}", c.file)) {
            let level = level_at(c, size);
            if size < c.from || level == "?" {
                continue;
            }
            let r = run(size);
            report += &format!("{} {size}: nccl {} level {level}\n", c.file, r.algo.name());
            if r.algo.name() != level {
                mismatched.push(size);
            }
        }
        if mismatched != c.level_misses {
            failed.push(format!(
                "{}: {mismatched:?} != {:?}",
                c.file, c.level_misses
            ));
        }
    }
    println!("{report}");
    assert!(failed.is_empty(), "{failed:#?}\n{report}");
}

/// A bad chooser is a load error naming the key (exit 2 in the CLI).
#[test]
fn bad_chooser_values_are_named_errors() {
    for bad in ["ncc", "3", "true"] {
        let over = [
            shardsim::topology::Override {
                key: "nodes".into(),
                value: "2".into(),
            },
            shardsim::topology::Override {
                key: "collective.chooser".into(),
                value: bad.into(),
            },
        ];
        let e = shardsim::topology::load("dgx-a100", &over)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("collective.chooser") && e.contains("nccl-algo"),
            "{bad}: {e}"
        );
    }
    // A forced algorithm is not re-chosen under `nccl`.
    let t = super::load(
        "dgx-a100",
        &[("nodes", "2"), ("collective.chooser", "nccl")],
    );
    let g = Group::first(&t, 16).unwrap();
    let cal = Calibration::for_model(&g.device_model(&t)).unwrap();
    let op = CollectiveOp::AllReduce;
    let r = time_collective(&t, &g, &op, 1 << 28, 4, &cal, Some(Algorithm::Tree), None).unwrap();
    assert_eq!(r.algo, Algorithm::Tree);
}

/// NCCL's chooser on a machine its model does not cover (a ring of GPUs, a
/// switch) is an error naming the setting, not a silent fall back to the
/// simulator's own pick; `model` there is fine.
#[test]
fn nccl_chooser_outside_nvswitch_nodes_is_an_error() {
    let op = CollectiveOp::AllReduce;
    for preset in ["ring:8", "switch:16"] {
        for chooser in ["nccl", "nccl-algo"] {
            let t = super::load(preset, &[("collective.chooser", chooser)]);
            let g = Group::first(&t, t.num_devices()).unwrap();
            let cal = Calibration::for_model(&g.device_model(&t)).unwrap();
            let e = time_collective(&t, &g, &op, 1 << 18, 4, &cal, None, None)
                .unwrap_err()
                .to_string();
            assert!(
                e.contains(&format!("collective.chooser = \"{chooser}\"")) && e.contains("model"),
                "{preset} {chooser}: {e}"
            );
        }
        let t = super::load(preset, &[("collective.chooser", "model")]);
        let g = Group::first(&t, t.num_devices()).unwrap();
        let cal = Calibration::for_model(&g.device_model(&t)).unwrap();
        assert!(time_collective(&t, &g, &op, 1 << 18, 4, &cal, None, None).is_ok());
    }
}

/// The default chooser (no `collective.chooser`) is `nccl` (NCCL's algorithm
/// and protocol; `nccl-algo` until session 38) wherever NCCL's model covers
/// the machine but for NCCL's NVLS-tree beyond two nodes, which `model`
/// times: two DGX A100 at 1 GiB, where the algorithms differ (NCCL's ring,
/// our tree: README's chooser table), four DGX A100 at 128 MiB, where the
/// protocols differ (NCCL's ring/LL128, `nccl-algo`'s ring/Simple), one DGX
/// H100 at 64 KiB (NCCL's ring, our NVLS) and 16 DGX H100 at 1 GiB (NCCL's
/// NVLS-tree, our ring).
#[test]
fn default_chooser_is_nccl_but_for_nvls_tree_beyond_two_nodes() {
    let op = CollectiveOp::AllReduce;
    for (preset, nodes, size, named, other) in [
        ("dgx-a100", "2", 1u64 << 30, "nccl", "model"),
        ("dgx-a100", "4", 128 << 20, "nccl", "nccl-algo"),
        ("dgx-h100", "1", 64 << 10, "nccl", "model"),
        ("dgx-h100", "16", 1 << 30, "model", "nccl"),
    ] {
        let run = |set: &[(&str, &str)]| {
            let t = super::load(preset, set);
            let g = Group::first(&t, t.num_devices()).unwrap();
            let cal = Calibration::for_model(&g.device_model(&t)).unwrap();
            let r = time_collective(&t, &g, &op, size / 4, 4, &cal, None, None).unwrap();
            (r.algo, r.proto, r.time)
        };
        let default = run(&[("nodes", nodes)]);
        assert_eq!(
            default,
            run(&[("nodes", nodes), ("collective.chooser", named)]),
            "{preset} x {nodes}"
        );
        let theirs = run(&[("nodes", nodes), ("collective.chooser", other)]);
        assert_ne!(
            (default.0, default.1),
            (theirs.0, theirs.1),
            "{preset} x {nodes}"
        );
    }
}

/// `collective.nccl_version` names the release whose tables NCCL's model
/// uses (2.21's where it is not given): wherever two releases' models pick
/// differently (a scan of sizes on two and four DGX A100 and two DGX H100
/// nodes), `auto` under `nccl` takes the stated release's pick.
#[test]
fn nccl_version_picks_the_tables_the_choosers_use() {
    use shardsim::collective::nccl_model::{nccl_choice, system_of};
    use shardsim::collective::{auto_algorithms, NcclVersion};
    let op = CollectiveOp::AllReduce;
    let releases = [
        ("2.19", NcclVersion::V2_19),
        ("2.21", NcclVersion::V2_21),
        ("2.23", NcclVersion::V2_23),
    ];
    let mut differing = 0;
    for (preset, nodes) in [("dgx-a100", "2"), ("dgx-a100", "4"), ("dgx-h100", "2")] {
        let t = super::load(preset, &[("nodes", nodes)]);
        assert_eq!(NcclVersion::of(&t), NcclVersion::V2_21);
        assert_eq!(NcclVersion::named(&t), None);
        let g = Group::first(&t, t.num_devices()).unwrap();
        let sys = system_of(&t, &g).unwrap();
        let ours = auto_algorithms(&op);
        let pick = |v: NcclVersion, size: u64| {
            nccl_choice(&sys, v, &op, size, |a, _| ours.contains(&a)).map(|(a, p, _)| (a, p))
        };
        for log in 10..34 {
            let size = 1u64 << log;
            let picks: Vec<_> = releases.iter().map(|&(_, v)| pick(v, size)).collect();
            if picks.iter().all(|p| *p == picks[0]) {
                continue;
            }
            differing += 1;
            for (&(name, v), want) in releases.iter().zip(&picks) {
                let t = super::load(
                    preset,
                    &[
                        ("nodes", nodes),
                        ("collective.chooser", "nccl"),
                        ("collective.nccl_version", name),
                    ],
                );
                assert_eq!(NcclVersion::of(&t), v);
                let cal = Calibration::for_model(&g.device_model(&t)).unwrap();
                let r = time_collective(&t, &g, &op, size / 4, 4, &cal, None, None).unwrap();
                assert_eq!(
                    Some((r.algo, r.proto)),
                    *want,
                    "{preset} x {nodes} {size} B under {name}"
                );
            }
        }
    }
    assert!(differing > 0, "no size where the releases' models differ");
}

/// A bad `nccl_version` is a load error naming the key; on the command line
/// one line naming the `--set`, exit 2. A patch release names its release.
#[test]
fn bad_nccl_versions_are_named_errors() {
    use shardsim::collective::NcclVersion;
    for bad in ["2.20", "2.18", "3", "v2.19", "2.19.x", "true", "[2, 19]"] {
        let over = [shardsim::topology::Override {
            key: "collective.nccl_version".into(),
            value: bad.into(),
        }];
        let e = shardsim::topology::load("dgx-a100", &over)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("--set collective.nccl_version=")
                && e.contains("field `collective.nccl_version`")
                && e.contains("\"2.19\", \"2.21\" or \"2.23\""),
            "{bad}: {e}"
        );
    }
    let out = crate::common::shardsim(&[
        "collective",
        "--topology",
        "dgx-a100",
        "--nodes",
        "2",
        "--set",
        "collective.nccl_version=2.22",
        "--sizes",
        "1MiB",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--set nodes=2 collective.nccl_version=2.22")
            && err.contains("got 2.22")
            && err.lines().count() == 1,
        "{err}"
    );
    let t = super::load("dgx-a100", &[("collective.nccl_version", "2.19.3")]);
    assert_eq!(NcclVersion::of(&t), NcclVersion::V2_19);
}

/// NCCL's algorithm on one HGX node of 8 GPUs as a user reports it
/// (nccl-tests issue 309, comment of 2025-05-23: "8B~1MB: uses Algo RING
/// proto LL", "2MB~16GB uses Algo NVLS proto SIMPLE", 8 GPU-NIC pairs; its
/// ring at 368.76 GB/s busbw with NVLS off, H100's NVLink4 level): `auto`
/// under the default chooser takes the ring up to 1 MiB and NVLS
/// from 2 MiB to 16 GiB on `dgx-h100` (the protocol is our estimate's: at 1
/// MiB LL128).
#[test]
fn one_h100_node_takes_the_ring_to_1_mib_and_nvls_from_2_mib_as_nccl_did() {
    let op = CollectiveOp::AllReduce;
    let t = super::load("dgx-h100", &[]);
    let g = Group::first(&t, 8).unwrap();
    let cal = Calibration::for_model(&g.device_model(&t)).unwrap();
    let mut size: u64 = 8;
    while size <= 16 << 30 {
        let r = time_collective(&t, &g, &op, size / 4, 4, &cal, None, None).unwrap();
        let want = if size <= 1 << 20 {
            Algorithm::Ring
        } else {
            Algorithm::Nvls
        };
        assert_eq!(r.algo, want, "{size} B");
        if size < 1 << 20 {
            assert_eq!(r.proto, Protocol::Ll, "{size} B");
        } else if size >= 2 << 20 {
            assert_eq!(r.proto, Protocol::Simple, "{size} B");
        }
        size *= 4;
    }
}
