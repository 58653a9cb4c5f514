//! Writes never destroy what they replace: symlinks are written through,
//! FIFOs and devices written into, directories refused, temporary files never
//! left behind, a failed run keeps none of its outputs; a full or closed
//! stdout is an error (exit 2), never a panic.

use std::io::Read;
use std::os::unix::fs::FileTypeExt;
use std::process::{Command, Stdio};

use shardsim::base::files::{write_file, OutputSet};

use super::{names_in, scratch, user_error};
use crate::common::{fixture, shardsim};

fn add_relu() -> String {
    fixture("jax/add_relu/lowered.mlir").display().to_string()
}

#[test]
fn output_through_a_symlink_replaces_the_target_not_the_link() {
    let dir = scratch("symlink");
    let target = dir.join("real.mlir");
    std::fs::write(&target, "old").unwrap();
    let link = dir.join("link.mlir");
    std::os::unix::fs::symlink("real.mlir", &link).unwrap();
    let out = shardsim(&["propagate", &add_relu(), "-o", link.to_str().unwrap()]);
    assert!(out.status.success(), "{out:?}");
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    let text = std::fs::read_to_string(&target).unwrap();
    assert!(text.starts_with("module @jit"), "{text}");
    assert_eq!(names_in(&dir), ["link.mlir", "real.mlir"]);
}

#[test]
fn a_dangling_symlink_creates_its_target() {
    let dir = scratch("dangling");
    let link = dir.join("link.csv");
    std::os::unix::fs::symlink("made.csv", &link).unwrap();
    write_file(&link, b"a,b\n").unwrap();
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(std::fs::read(dir.join("made.csv")).unwrap(), b"a,b\n");
}

#[test]
fn output_onto_a_directory_is_refused_and_leaves_nothing() {
    let dir = scratch("ontodir");
    let target = dir.join("d");
    std::fs::create_dir(&target).unwrap();
    user_error(
        &["propagate", &add_relu(), "-o", target.to_str().unwrap()],
        "is a directory",
    );
    assert!(target.is_dir());
    assert_eq!(names_in(&dir), ["d"]);
    assert!(names_in(&target).is_empty());
}

#[test]
fn output_into_a_fifo_writes_into_it() {
    let dir = scratch("fifo");
    let fifo = dir.join("pipe");
    let made = Command::new("mkfifo").arg(&fifo).status();
    if !made.is_ok_and(|s| s.success()) {
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
    let out = shardsim(&["propagate", &add_relu(), "-o", fifo.to_str().unwrap()]);
    assert!(out.status.success(), "{out:?}");
    let text = reader.join().unwrap();
    assert!(text.starts_with("module @jit"), "{text}");
    assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
    assert_eq!(names_in(&dir), ["pipe"]);
}

#[test]
fn output_to_dev_full_is_an_error_and_keeps_the_device() {
    let full = std::path::Path::new("/dev/full");
    if !full.exists() {
        return;
    }
    user_error(
        &["propagate", &add_relu(), "-o", "/dev/full"],
        "No space left on device",
    );
    assert!(std::fs::metadata(full)
        .unwrap()
        .file_type()
        .is_char_device());
    // The library call, as every writer uses it.
    assert!(write_file(full, b"x").is_err());
    assert!(std::fs::metadata(full)
        .unwrap()
        .file_type()
        .is_char_device());
}

#[test]
fn stdout_on_a_full_disk_exits_2_with_one_line() {
    let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") else {
        return;
    };
    for args in [
        vec!["check".to_string(), add_relu()],
        vec!["propagate".to_string(), add_relu()],
        vec!["mesh".into(), "--shape".into(), "2,4".into()],
        vec!["topology".into(), "show".into(), "ring:8".into()],
        vec!["topology".into(), "list".into()],
        vec!["plan".to_string(), add_relu()],
        vec!["partition".to_string(), add_relu()],
        vec![
            "exec".to_string(),
            add_relu(),
            "--topology".into(),
            "ring:8".into(),
        ],
        vec![
            "collective".into(),
            "--topology".into(),
            "ring:8".into(),
            "--sizes".into(),
            "1MiB".into(),
        ],
        vec![
            "train".into(),
            "llama3-8b".into(),
            "--tp".into(),
            "8".into(),
        ],
        vec!["infer".into(), "llama3-8b".into()],
        vec![
            "bench".into(),
            "fuzz".into(),
            "--cases".into(),
            "1".into(),
            "--only".into(),
            "npy".into(),
        ],
        // Help and version are written to stdout too (they exited 0).
        vec!["--help".into()],
        vec!["check".into(), "--help".into()],
        vec!["--version".into()],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_shardsim"))
            .args(&args)
            .stdout(full.try_clone().unwrap())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains("cannot write to stdout"), "{args:?}: {err}");
    }
}

#[test]
fn stdout_closed_by_the_reader_exits_2_with_one_line() {
    // 65,536 device lines: far more than a pipe buffer, so the write fails.
    let mut child = Command::new(env!("CARGO_BIN_EXE_shardsim"))
        .args(["mesh", "--shape", "256,256"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("closed the pipe"), "{err}");
}

#[test]
fn a_failed_run_keeps_none_of_its_outputs() {
    // argmax_sharded has two results: out1.npy cannot be written (a folder is
    // there), so out0.npy must not be left behind either, nor any temporary file.
    let dir = scratch("partial");
    std::fs::create_dir(dir.join("out1.npy")).unwrap();
    let case = fixture("jax/argmax_sharded");
    user_error(
        &[
            "interp",
            case.join("lowered.mlir").to_str().unwrap(),
            "--inputs",
            case.join("in0.npy").to_str().unwrap(),
            "--out",
            dir.to_str().unwrap(),
        ],
        "is a directory",
    );
    assert_eq!(names_in(&dir), ["out1.npy"]);
}

#[test]
fn an_output_set_replaces_nothing_until_commit_and_cleans_up_on_drop() {
    let dir = scratch("set");
    std::fs::write(dir.join("a.txt"), "old a").unwrap();
    {
        let mut set = OutputSet::new();
        set.write(&dir.join("a.txt"), b"new a").unwrap();
        set.write(&dir.join("b.txt"), b"new b").unwrap();
        // Dropped without commit: the old file is intact, no temporaries stay.
    }
    assert_eq!(names_in(&dir), ["a.txt"]);
    assert_eq!(std::fs::read(dir.join("a.txt")).unwrap(), b"old a");
    let mut set = OutputSet::new();
    set.write(&dir.join("a.txt"), b"new a").unwrap();
    set.write(&dir.join("b.txt"), b"new b").unwrap();
    set.commit().unwrap();
    assert_eq!(names_in(&dir), ["a.txt", "b.txt"]);
    assert_eq!(std::fs::read(dir.join("a.txt")).unwrap(), b"new a");
}

#[test]
fn a_write_into_a_missing_folder_fails_without_leftovers() {
    let dir = scratch("missing");
    let err = write_file(&dir.join("nope").join("x.csv"), b"x").unwrap_err();
    assert!(err.to_string().contains("nope"), "{err}");
    assert!(names_in(&dir).is_empty());
}
