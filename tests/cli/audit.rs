//! What a demanding user met (the audit): each wrong input of
//! `tests/fixtures/audit/bad_input.toml` is one clear line and its exit code
//! (it was a panic, an abort or a wrapped figure), and the fixed behaviours
//! give the same figures as the commands they stand for.

use std::path::PathBuf;

use serde::Deserialize;

use crate::common::{fixture, shardsim, shardsim_json};

#[derive(Deserialize)]
struct Cases {
    case: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    why: String,
    args: Vec<String>,
    code: i32,
    says: String,
}

fn scratch(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("shardsim-audit-{name}-{}", std::process::id()))
}

#[test]
fn audit_bad_inputs_are_one_clear_line_and_their_exit_code() {
    let text = std::fs::read_to_string(fixture("audit/bad_input.toml")).unwrap();
    let cases: Cases = toml::from_str(&text).unwrap();
    assert!(cases.case.len() >= 9);
    let out_dir = scratch("bad");
    let scenarios = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    for c in &cases.case {
        let args: Vec<String> = c
            .args
            .iter()
            .map(|a| {
                a.replace("{scenarios}", &scenarios.display().to_string())
                    .replace("{fixtures}", &fixture("audit").display().to_string())
                    .replace("{out}", &out_dir.display().to_string())
            })
            .collect();
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = shardsim(&refs);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(c.code),
            "{} ({:?}): {err}",
            c.why,
            c.args
        );
        assert_eq!(err.lines().count(), 1, "{}: {err}", c.why);
        assert!(
            err.starts_with("error: ") && err.contains(&c.says),
            "{}: {err}",
            c.why
        );
        // A refused run leaves nothing behind (a failed expectation, exit
        // 1, keeps its report).
        if c.code == 2 {
            assert!(!out_dir.exists(), "{}: wrote {}", c.why, out_dir.display());
        }
        let _ = std::fs::remove_dir_all(&out_dir);
    }
}

/// `train --strategy FILE` where the file has no `global_batch`: the flag
/// gives it, or the default `dp x micro-batch x pp` does, exactly as with
/// no file (it was "missing field `global_batch`" even with the flag).
#[test]
fn audit_a_strategy_file_without_global_batch_takes_the_flag_or_the_default() {
    let file = fixture("audit/strategy_no_global_batch.toml");
    let file = file.to_str().unwrap();
    let common = ["train", "llama3-8b", "--seq", "1024", "--format", "json"];
    let flags = ["--tp", "8", "--sequence-parallel", "--flash-attention"];
    let run = |extra: &[&str]| shardsim_json(&[&common[..], extra].concat());
    let with_flag = run(&["--strategy", file, "--global-batch", "2"]);
    assert_eq!(with_flag["microbatches"], 2);
    assert_eq!(
        with_flag["step_time_ps"],
        run(&[&flags[..], &["--global-batch", "2"]].concat())["step_time_ps"]
    );
    let default = run(&["--strategy", file]);
    assert_eq!(default["microbatches"], 1);
    assert_eq!(default["step_time_ps"], run(&flags)["step_time_ps"]);
    // A model scenario reads the same file the same way, and an inline
    // [workload.strategy] table without `global_batch` too.
    let full = shardsim_json(&["train", "llama3-8b", "--strategy", file, "--format", "json"]);
    for (name, scenario) in [
        ("model-file", "audit/model_strategy_file.toml"),
        ("model-inline", "audit/model_strategy_inline.toml"),
    ] {
        let dir = scratch(name);
        let runs = shardsim_json(&[
            "run",
            fixture(scenario).to_str().unwrap(),
            "--format",
            "json",
            "--out",
            dir.to_str().unwrap(),
        ]);
        assert_eq!(runs[0]["model_step"]["microbatches"], 1, "{scenario}");
        assert_eq!(
            runs[0]["model_step"]["step_time_ps"], full["step_time_ps"],
            "{scenario}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
    // A file that gives it keeps it; its errors keep their line and column.
    let dir = scratch("strategy");
    std::fs::create_dir_all(&dir).unwrap();
    let given = dir.join("given.toml");
    std::fs::write(&given, "tp = 8\nglobal_batch = 3\n").unwrap();
    let g = run(&["--strategy", given.to_str().unwrap()]);
    assert_eq!(g["microbatches"], 3);
    let typo = dir.join("typo.toml");
    std::fs::write(&typo, "tp = 8\ntp_typo = 1\n").unwrap();
    let out = shardsim(&["train", "llama3-8b", "--strategy", typo.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        err.contains("typo.toml:2:1:") && err.contains("tp_typo"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Without context parallelism any sequence length trains (an odd one
/// was refused as "does not split into 2 x cp = 2 x 1 chunks"); with it the
/// two chunks per rank still need an even split.
#[test]
fn audit_an_odd_sequence_trains_without_context_parallelism() {
    let r = shardsim_json(&[
        "train",
        "llama3-8b",
        "--tp",
        "8",
        "--seq",
        "1023",
        "--format",
        "json",
    ]);
    let even = shardsim_json(&[
        "train",
        "llama3-8b",
        "--tp",
        "8",
        "--seq",
        "1024",
        "--format",
        "json",
    ]);
    let (odd_ps, even_ps) = (
        r["step_time_ps"].as_u64().unwrap(),
        even["step_time_ps"].as_u64().unwrap(),
    );
    assert!(odd_ps > 0 && odd_ps <= even_ps, "{odd_ps} vs {even_ps}");
    let out = shardsim(&[
        "train",
        "llama3-8b",
        "--tp",
        "4",
        "--cp",
        "2",
        "--seq",
        "1023",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("2 x cp = 2 x 2"));
}

/// `sweep --resume` keeps only rows that are this sweep's points: a row
/// with another sweep's key values, or past the last point, was kept and
/// counted as done (the file then held 10 rows of a 9-point sweep).
#[test]
fn audit_resume_refuses_rows_of_another_sweep() {
    let sweep = fixture("scenario/tiny_sweep.toml");
    let dir = scratch("resume");
    std::fs::create_dir_all(&dir).unwrap();
    for (file, says) in [
        (
            "resume_other_sweep.csv",
            "point 1 has set.nvlink.bandwidth = 999GB/s but the sweep gives 450GB/s",
        ),
        (
            "resume_past_the_end.csv",
            "point 9 is not in the sweep (it has 6 points)",
        ),
    ] {
        let out = dir.join(file);
        let before = std::fs::read(fixture(&format!("audit/{file}"))).unwrap();
        std::fs::write(&out, &before).unwrap();
        let r = shardsim(&[
            "sweep",
            sweep.to_str().unwrap(),
            "--resume",
            "--no-plots",
            "--out",
            out.to_str().unwrap(),
        ]);
        let err = String::from_utf8_lossy(&r.stderr);
        assert_eq!(r.status.code(), Some(2), "{file}: {err}");
        assert!(
            err.contains("--resume: ") && err.contains(says),
            "{file}: {err}"
        );
        // Refused before any point ran: the file is as it was.
        assert_eq!(std::fs::read(&out).unwrap(), before, "{file}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `sweep --out FIFO`: one whole CSV, once, and the sweep ends (its rows
/// were written at most once a second: the reader took the first partial
/// CSV and left, and the next write waited for a reader forever).
#[test]
fn audit_a_sweep_into_a_fifo_writes_one_whole_csv_and_ends() {
    use std::io::Read;
    let dir = scratch("fifo");
    std::fs::create_dir_all(&dir).unwrap();
    let fifo = dir.join("results.csv");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    if !made.is_ok_and(|s| s.success()) {
        std::fs::remove_dir_all(&dir).unwrap();
        return; // no mkfifo on this machine: nothing to check
    }
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || {
            let mut s = String::new();
            std::fs::File::open(&fifo)
                .unwrap()
                .read_to_string(&mut s)
                .unwrap();
            s
        })
    };
    // 18 model steps: over a second, so rows went out more than once.
    let sweep = fixture("audit/slow_sweep.toml");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_shardsim"))
        .args([
            "sweep",
            sweep.to_str().unwrap(),
            "--no-plots",
            "--jobs",
            "1",
            "--out",
        ])
        .arg(&fifo)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if start.elapsed().as_secs() > 120 {
            child.kill().unwrap();
            let _ = child.wait();
            // Unblock the reader so the test ends.
            let _ = std::fs::OpenOptions::new().write(true).open(&fifo);
            panic!("sweep into a FIFO did not end in 120 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert!(status.success(), "{status:?}");
    let text = reader.join().unwrap();
    let (_, rows) = shardsim::scenario::sweep::read_csv_from(text.as_bytes(), "fifo").unwrap();
    let points = shardsim::scenario::sweep::Sweep::load(&sweep)
        .unwrap()
        .points
        .len();
    assert_eq!(rows.len(), points, "{text}");
    assert_eq!(text.matches("point,").count(), 1, "one header: {text}");
    std::fs::remove_dir_all(&dir).unwrap();
}
