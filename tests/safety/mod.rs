//! Input that must never hurt (issue 19): outputs that never destroy what they
//! replace, bounded resources, `.npy` checks, located errors, refused rates,
//! the silent wrong answers turned into errors, and fuzzing of every text format.

mod bounds;
mod fuzz;
mod outputs;
mod values;

use std::path::PathBuf;

/// A fresh, empty scratch folder for one test, removed when dropped.
pub struct Scratch(PathBuf);

impl std::ops::Deref for Scratch {
    type Target = std::path::Path;
    fn deref(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A fresh, empty scratch folder named after the test.
pub fn scratch(name: &str) -> Scratch {
    let dir = std::env::temp_dir().join(format!("shardsim-safety-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    Scratch(dir)
}

/// Run `shardsim`, expect a user error: exit 2 and one line on stderr that
/// contains `says`; returns the line.
pub fn user_error<S: AsRef<str> + std::fmt::Debug>(args: &[S], says: &str) -> String {
    let strs: Vec<&str> = args.iter().map(AsRef::as_ref).collect();
    let out = crate::common::shardsim(&strs);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
    assert!(!err.contains("panicked"), "{args:?}: {err}");
    assert!(err.contains(says), "{args:?}: expected `{says}` in {err}");
    err
}

/// Every file name in `dir` (sorted).
pub fn names_in(dir: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}
