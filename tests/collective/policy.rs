//! A run's collective settings (`[collective] algorithms`, `protocols`,
//! `tuner`, `tuner_file`: NCCL_ALGO, NCCL_PROTO and a tuner plugin's table):
//! what `auto` chooses under them (fixtures/collective/policy/choices.toml),
//! what a bad setting says and where (errors.toml), the row limit, and the
//! CLI's `--tuner` and exit codes.

use serde::Deserialize;
use shardsim::collective::{
    choose, policy::MAX_TUNER_ROWS, time_collective, Algorithm, Calibration, CollectiveOp, Group,
    Protocol,
};
use shardsim::topology::{self, Override};

use crate::common::{fixture, shardsim, shardsim_stdout};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ChoiceCase {
    name: String,
    topology: String,
    #[serde(default)]
    set: Vec<String>,
    #[serde(default = "allreduce")]
    op: String,
    #[serde(default)]
    algo: Option<String>,
    #[serde(default)]
    proto: Option<String>,
    bytes: u64,
    expect: String,
}

fn allreduce() -> String {
    "allreduce".into()
}

#[derive(Deserialize)]
struct Cases<T> {
    case: Vec<T>,
}

fn overrides(set: &[String]) -> Vec<Override> {
    set.iter().map(|s| Override::parse(s).unwrap()).collect()
}

/// `auto`'s choice for one call, or the error it gives.
fn choice(
    topo: &topology::Topology,
    op: &str,
    bytes: u64,
    algo: Option<&str>,
    proto: Option<&str>,
) -> Result<String, String> {
    let g = Group::first(topo, topo.num_devices()).unwrap();
    let cal = Calibration::for_topology(topo, &g.device_model(topo)).map_err(|e| e.to_string())?;
    let op = CollectiveOp::parse(op, g.len()).unwrap();
    let algo = algo.map(|a| a.parse::<Algorithm>().unwrap());
    let proto = proto.map(|p| p.parse::<Protocol>().unwrap());
    choose(topo, &g, &op, bytes / 4, 4, &cal, algo, proto)
        .map(|(c, _)| format!("{}/{}", c.algo, c.proto))
        .map_err(|e| e.to_string())
}

#[test]
fn auto_chooses_within_the_runs_settings_and_tuner_table() {
    let text = std::fs::read_to_string(fixture("collective/policy/choices.toml")).unwrap();
    let cases: Cases<ChoiceCase> = toml::from_str(&text).unwrap();
    assert!(cases.case.len() >= 15);
    let mut failures = String::new();
    for c in &cases.case {
        let name = if c.topology.ends_with(".toml") {
            fixture(&c.topology).to_string_lossy().into_owned()
        } else {
            c.topology.clone()
        };
        let topo =
            topology::load(&name, &overrides(&c.set)).unwrap_or_else(|e| panic!("{}: {e}", c.name));
        let got = choice(&topo, &c.op, c.bytes, c.algo.as_deref(), c.proto.as_deref());
        if got.as_deref() != Ok(c.expect.as_str()) {
            failures += &format!("{}: want {}, got {got:?}\n", c.name, c.expect);
        }
    }
    assert!(failures.is_empty(), "{failures}");
}

/// The case the issue names: where `auto` alone picks LL128, the run's
/// NCCL_PROTO=Simple makes it pick Simple, and the same algorithm, under
/// our estimate (`collective.chooser = "model"`; under the default NCCL's
/// model picks the algorithm among the enabled pairs, which may differ).
#[test]
fn restricting_protocols_turns_an_ll128_choice_into_simple() {
    let a3 = fixture("collective/a3mega_topology.toml");
    let a3 = a3.to_string_lossy();
    let load = |set: &[&str]| {
        let set: Vec<String> = set.iter().map(|s| s.to_string()).collect();
        topology::load(&a3, &overrides(&set)).unwrap()
    };
    let free = load(&[
        "nodes=2",
        "collective.algorithms=^",
        "collective.protocols=^",
        "collective.tuner_file=\"\"",
        "collective.chooser=model",
    ]);
    let simple = load(&[
        "nodes=2",
        "collective.tuner_file=\"\"",
        "collective.chooser=model",
    ]);
    for size in [32u64 << 20, 64 << 20] {
        let a = choice(&free, "allreduce", size, None, None).unwrap();
        let b = choice(&simple, "allreduce", size, None, None).unwrap();
        assert!(a.ends_with("/LL128"), "{size}: {a}");
        assert_eq!(b, a.replace("LL128", "Simple"), "{size}");
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ErrorCase {
    name: String,
    #[serde(default)]
    collective: String,
    #[serde(default)]
    set: Vec<String>,
    #[serde(default)]
    algo: Option<String>,
    #[serde(default)]
    proto: Option<String>,
    #[serde(default)]
    at: Option<(usize, usize)>,
    #[serde(default)]
    error: String,
    #[serde(default)]
    ok: bool,
}

#[test]
fn bad_settings_are_located_errors() {
    let text = std::fs::read_to_string(fixture("collective/policy/errors.toml")).unwrap();
    let cases: Cases<ErrorCase> = toml::from_str(&text).unwrap();
    let base = topology::preset_text("switch").unwrap();
    let file = fixture("collective/policy/case.toml");
    let file = file.to_string_lossy();
    let mut failures = String::new();
    for c in &cases.case {
        let body = format!(
            "{base}\n[collective]\n{}\n",
            c.collective.trim_start_matches('\n')
        );
        let header = body.lines().position(|l| l == "[collective]").unwrap() + 1;
        let got = topology::load_text(&body, &file, &overrides(&c.set))
            .map_err(|e| e.to_string())
            .and_then(|t| {
                choice(
                    &t,
                    "allreduce",
                    1 << 20,
                    c.algo.as_deref(),
                    c.proto.as_deref(),
                )
            });
        if c.ok {
            if let Err(e) = &got {
                failures += &format!("{}: want success, got {e}\n", c.name);
            }
            continue;
        }
        let at = c.at.map(|(l, col)| format!("{file}:{}:{col}", header + l));
        let want = c.error.replace("{at}", at.as_deref().unwrap_or(""));
        match got {
            Ok(ch) => failures += &format!("{}: want an error, chose {ch}\n", c.name),
            Err(e) => {
                let placed = at.as_ref().map_or(true, |a| e.contains(a.as_str()));
                if !e.contains(&want) || !placed {
                    failures += &format!("{}:\n  got  {e}\n  want {want} at {at:?}\n", c.name);
                }
            }
        }
    }
    assert!(failures.is_empty(), "{failures}");
}

/// A table of more rows than the limit is an error at the first row over
/// it; one of exactly the limit loads.
#[test]
fn tuner_tables_are_bounded() {
    let dir = std::env::temp_dir().join(format!("shardsim-tuner-rows-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let row = "allreduce,0,1024,ring,simple,-1,-1,-1\n";
    for (rows, ok) in [(MAX_TUNER_ROWS, true), (MAX_TUNER_ROWS + 1, false)] {
        let path = dir.join(format!("rows{rows}.csv"));
        std::fs::write(&path, format!("# {rows} rows\n{}", row.repeat(rows))).unwrap();
        let set = vec![format!("collective.tuner_file='{}'", path.display())];
        let topo = topology::load("switch", &overrides(&set)).unwrap();
        let got = choice(&topo, "allreduce", 1024, None, None);
        if ok {
            assert_eq!(got.as_deref(), Ok("ring/Simple"));
        } else {
            let e = got.unwrap_err();
            let at = format!("rows{rows}.csv:{}:1", rows + 1);
            assert!(e.contains(&at) && e.contains("more than 1024 rows"), "{e}");
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `--tuner FILE` on `collective` is `--set collective.tuner_file=FILE`;
/// errors exit 2 naming the setting; `exec` and `calibrate` take it where
/// they take a topology.
#[test]
fn cli_takes_a_tuner_file_and_refuses_disabled_choices() {
    let a3 = fixture("collective/a3mega_topology.toml");
    let a3 = a3.to_str().unwrap();
    let table = fixture("collective/a3mega_tuner.csv");
    let run = |extra: &[&str]| {
        let mut args = vec![
            "collective",
            "--topology",
            a3,
            "--nodes",
            "2",
            "--sizes",
            "64MiB",
            "--format",
            "csv",
            "--set",
            "collective.tuner_file=\"\"",
        ];
        args.extend_from_slice(extra);
        shardsim(&args)
    };
    let last = |o: &std::process::Output| {
        let out = String::from_utf8_lossy(&o.stdout).into_owned();
        out.lines().last().unwrap_or("").to_string()
    };
    let without = run(&[]);
    assert!(
        last(&without).ends_with(",ring,Simple"),
        "{}",
        last(&without)
    );
    // The table as a file on the command line: the same rows the fixture
    // names in its own [collective] section.
    let mut args = vec![
        "collective",
        "--topology",
        a3,
        "--nodes",
        "2",
        "--sizes",
        "64MiB",
        "--format",
        "csv",
        "--tuner",
    ];
    args.push(table.to_str().unwrap());
    let with = shardsim(&args);
    assert!(
        with.status.success(),
        "{}",
        String::from_utf8_lossy(&with.stderr)
    );
    assert!(last(&with).ends_with(",tree,Simple"), "{}", last(&with));

    for (extra, says) in [
        (
            &["--algo", "ring", "--proto", "LL128"][..],
            "LL128 is not allowed by collective.protocols = \"Simple\"",
        ),
        (
            &["--set", "collective.algorithms=Rign"][..],
            "--set collective.algorithms=Rign: collective.algorithms: unknown algorithm \"Rign\"",
        ),
        (
            &["--set", "collective.algorithms=NVLS"][..],
            "leave no algorithm and protocol the simulator runs here",
        ),
    ] {
        // What the topology cannot run (NVLS here) is known per call only.
        let early = !says.starts_with("leave");
        let out = run(extra);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {err}");
        assert!(err.contains(says), "{extra:?}: {err}");
        assert!(
            !early || !err.contains("size "),
            "said once, before any size: {err}"
        );
    }
    let bad = fixture("collective/policy/bad_tuner.csv");
    let out = shardsim(&[
        "collective",
        "--topology",
        "switch",
        "--tuner",
        bad.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("bad_tuner.csv:4:19: collective.tuner"),
        "{err}"
    );
    // `exec` and `run` take it as they take --set.
    let model = fixture("../../models/gpt3_mlp_block.mlir");
    let ring_ll = fixture("collective/policy/ring_ll.csv");
    let exec = |extra: &[&str]| {
        let mut args = vec!["exec", model.to_str().unwrap(), "--topology", "dgx-h100"];
        args.extend_from_slice(extra);
        let text = shardsim_stdout(&args);
        text.lines()
            .find(|l| l.trim_start().starts_with("all_reduce"))
            .unwrap_or_else(|| panic!("{text}"))
            .to_string()
    };
    let plain = exec(&[]);
    let tuned = exec(&["--tuner", ring_ll.to_str().unwrap()]);
    let listed = exec(&[
        "--set",
        "collective.algorithms=Ring",
        "--set",
        "collective.protocols=LL",
    ]);
    assert_ne!(plain, tuned);
    assert_eq!(tuned, listed);
    let scenario = fixture("../../scenarios/gpt_tiny_switch_link_fault.toml");
    let dir = std::env::temp_dir().join(format!("shardsim-tuner-run-{}", std::process::id()));
    let out = shardsim(&[
        "run",
        scenario.to_str().unwrap(),
        "--no-plots",
        "-o",
        dir.to_str().unwrap(),
        "--tuner",
        bad.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("bad_tuner.csv:4:19"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
    // Where a command takes a topology it takes --tuner; without one, not.
    let out = shardsim(&["calibrate", "--backend", "threads", "--tuner", "x.csv"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--tuner goes with --measured"));
}

/// NCCL's names the lists below draw from (CollNet and PAT: accepted, not
/// run by the simulator).
const ALGO_NAMES: [&str; 6] = ["Ring", "Tree", "NVLS", "NVLSTree", "CollNetDirect", "PAT"];
const PROTO_NAMES: [&str; 3] = ["LL", "LL128", "Simple"];

/// `names` picked by `mask`, in any case (`upper`), as a list; or, with
/// `exclude`, as `^` and the names not picked (the same set).
fn list(names: &[&str], mask: u32, exclude: bool, upper: u32) -> String {
    let pick: Vec<String> = names
        .iter()
        .enumerate()
        .filter(|(i, _)| (mask >> i) & 1 == u32::from(!exclude))
        .map(|(i, n)| {
            if (upper >> i) & 1 == 1 {
                n.to_ascii_uppercase()
            } else {
                n.to_ascii_lowercase()
            }
        })
        .collect();
    format!("{}{}", if exclude { "^" } else { "" }, pick.join(","))
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]

    /// Under any lists, `auto` picks an enabled pair, and under our estimate
    /// (`collective.chooser = "model"`) the cheapest one: its estimate is
    /// the least of every enabled pair's asked for explicitly (on the
    /// machine without settings), or, where it ranks by times (`tuner.rs`:
    /// near ties, trees past the chunk budget), its time is no more than
    /// that of the pair with the least estimate; where no enabled pair runs,
    /// it is an error, under the default chooser too. A list and its `^`
    /// complement are the same.
    #[test]
    fn auto_under_lists_is_the_cheapest_enabled_pair(
        algos in 1u32..64,
        protos in 1u32..8,
        exclude in proptest::bool::ANY,
        upper in 0u32..64,
        log_bytes in 3u32..31,
    ) {
        let bytes = 1u64 << log_bytes;
        let free = topology::load("dgx-h100", &overrides(&["nodes=2".into()])).unwrap();
        let g = Group::first(&free, free.num_devices()).unwrap();
        let cal = Calibration::for_topology(&free, &g.device_model(&free)).unwrap();
        let op = CollectiveOp::AllReduce;
        let mut cheapest: Option<f64> = None;
        let mut first: Option<(Algorithm, Protocol)> = None;
        let mut enabled = Vec::new();
        for (i, a) in ["ring", "tree", "nvls", "nvls-tree"].iter().enumerate() {
            for (j, p) in ["LL", "LL128", "Simple"].iter().enumerate() {
                if (algos >> i) & 1 == 0 || (protos >> j) & 1 == 0 {
                    continue;
                }
                let (a, p) = (a.parse::<Algorithm>().unwrap(), p.parse::<Protocol>().unwrap());
                if let Ok((c, _)) = choose(&free, &g, &op, bytes / 4, 4, &cal, Some(a), Some(p)) {
                    enabled.push(format!("{a}/{p}"));
                    if cheapest.map_or(true, |b| c.estimate_ps < b) {
                        cheapest = Some(c.estimate_ps);
                        first = Some((a, p));
                    }
                }
            }
        }
        let mut got = Vec::new();
        for ex in [exclude, !exclude] {
            let mut set = vec![
                "nodes=2".to_string(),
                format!("collective.algorithms={}", list(&ALGO_NAMES, algos, ex, upper)),
                format!("collective.protocols={}", list(&PROTO_NAMES, protos, ex, upper)),
            ];
            // The default chooser (NCCL's algorithm across nodes) picks an
            // enabled pair too, or the same error.
            let t = topology::load("dgx-h100", &overrides(&set)).unwrap();
            match choose(&t, &g, &op, bytes / 4, 4, &cal, None, None) {
                Ok((c, _)) => {
                    let pair = format!("{}/{}", c.algo, c.proto);
                    proptest::prop_assert!(enabled.contains(&pair), "default: {pair} not in {enabled:?}");
                }
                Err(e) => proptest::prop_assert!(cheapest.is_none(), "default: {e} with enabled {enabled:?}"),
            }
            set.push("collective.chooser=model".to_string());
            let t = topology::load("dgx-h100", &overrides(&set)).unwrap();
            let r = choose(&t, &g, &op, bytes / 4, 4, &cal, None, None);
            match (&r, cheapest) {
                (Ok((c, _)), Some(best)) => {
                    let pair = format!("{}/{}", c.algo, c.proto);
                    proptest::prop_assert!(enabled.contains(&pair), "{pair} not in {enabled:?}");
                    if c.estimate_ps != best {
                        // Ranked by times (a near tie across nodes, or a tree
                        // past the chunk budget and its rivals): its figure is
                        // its pair's time, no more than the time of the pair
                        // the estimates put first.
                        let time = |(a, p): (Algorithm, Protocol)| {
                            let r = time_collective(&free, &g, &op, bytes / 4, 4, &cal, Some(a), Some(p));
                            r.unwrap().time.ps() as f64
                        };
                        proptest::prop_assert_eq!(c.estimate_ps, time((c.algo, c.proto)));
                        proptest::prop_assert!(c.estimate_ps <= time(first.unwrap()));
                    }
                }
                (Err(e), None) => {
                    proptest::prop_assert!(e.to_string().contains("leave no algorithm"), "{e}");
                }
                _ => proptest::prop_assert!(false, "{r:?} with enabled {enabled:?}"),
            }
            got.push(r.map(|(c, _)| (c.algo, c.proto)).map_err(|_| ()));
        }
        proptest::prop_assert_eq!(&got[0], &got[1]);
    }

    /// A row matching every call with an enabled pair gives what asking
    /// for that pair does; a row that matches no call changes nothing.
    #[test]
    fn a_matching_row_is_the_pair_asked_for_and_a_missing_one_nothing(
        pair in 0usize..6,
        log_bytes in 3u32..31,
    ) {
        let bytes = 1u64 << log_bytes;
        let (a, p) = [("ring", "ll"), ("ring", "ll128"), ("ring", "simple"), ("tree", "ll"), ("tree", "simple"), ("nvls_tree", "simple")][pair];
        let load = |rows: &str| {
            let set = vec!["nodes=2".to_string(), format!("collective.tuner=[{rows}]")];
            topology::load("dgx-h100", &overrides(&set)).unwrap()
        };
        let every = load(&format!("\"allreduce,0,{},{a},{p},-1,-1,-1\"", u64::MAX));
        let none = load(&format!("\"allreduce,0,{},{a},{p},-1,3,-1\", \"allgather,0,{},{a},{p},-1,-1,-1\"", u64::MAX, u64::MAX));
        let free = topology::load("dgx-h100", &overrides(&["nodes=2".into()])).unwrap();
        let ours = if a == "nvls_tree" { "nvls-tree" } else { a };
        let tuned = choice(&every, "allreduce", bytes, None, None);
        let asked = choice(&free, "allreduce", bytes, Some(ours), Some(p));
        proptest::prop_assert_eq!(tuned, asked);
        proptest::prop_assert_eq!(
            choice(&none, "allreduce", bytes, None, None),
            choice(&free, "allreduce", bytes, None, None)
        );
    }
}
