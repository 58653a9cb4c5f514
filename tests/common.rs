//! Helpers shared by the integration tests.

use std::path::PathBuf;

/// Path of a file under `tests/fixtures/`.
#[allow(dead_code)]
pub fn fixture(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel)
}
