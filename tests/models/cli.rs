//! `shardsim train` as a user meets it: a preset with a strategy prints its
//! figures (JSON has them all), a faster NVLink makes a tensor-parallel step
//! faster, a step that cannot fit says so, and wrong input exits 2 with the
//! numbers.

use crate::common::shardsim;

fn json(args: &[&str]) -> serde_json::Value {
    let out = shardsim(args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn train_reports_a_step_and_follows_the_machine() {
    let base = [
        "train",
        "llama3-8b",
        "--tp",
        "8",
        "--dp",
        "2",
        "--global-batch",
        "4",
        "--seq",
        "2048",
        "--sequence-parallel",
        "--flash-attention",
        "--format",
        "json",
    ];
    let r = json(&base);
    assert_eq!(r["gpus"], 16);
    assert_eq!(r["microbatches"], 2);
    let time = r["step_time_ps"].as_u64().unwrap();
    assert!(time > 0 && r["mfu"].as_f64().unwrap() > 0.05);
    assert!(r["memory"]["fits"].as_bool().unwrap());
    let mut faster = base.to_vec();
    faster.extend(["--set", "nvlink.bandwidth=1800GB/s"]);
    let f = json(&faster);
    assert!(f["step_time_ps"].as_u64().unwrap() < time);
}

#[test]
fn train_says_when_a_step_does_not_fit() {
    let out = shardsim(&[
        "train",
        "llama3-70b",
        "--tp",
        "8",
        "--dp",
        "2",
        "--global-batch",
        "2",
    ]);
    // The report is printed, and the exit code (3) says the step does not fit.
    assert_eq!(out.status.code(), Some(3));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        String::from_utf8_lossy(&out.stderr).starts_with("error: out of memory: stage"),
        "{out:?}"
    );
    assert!(
        text.contains("OUT OF MEMORY") && text.contains("the device has 80 GiB"),
        "{text}"
    );
}

#[test]
fn train_refuses_what_does_not_divide() {
    for (args, says) in [
        (
            vec!["train", "llama3-70b", "--tp", "16"],
            "do not split over tp = 16",
        ),
        (vec!["train", "gpt3-175b", "--pp", "7"], "96 layers"),
        (vec!["train", "no-such-model"], "no model preset"),
        (
            vec!["train", "gpt3-175b", "--tp", "3", "--dp", "1"],
            "vocab 51200 does not split over tp = 3",
        ),
        (
            vec![
                "train",
                "gpt3-175b",
                "--tp",
                "4",
                "--dp",
                "1",
                "--topology",
                "dgx-h100",
            ],
            "not a whole number",
        ),
    ] {
        let out = shardsim(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
    }
}
