//! Shared fixtures for the cross-component tests: where the repository's manifests are.

use std::path::{Path, PathBuf};

/// The repository root.
#[must_use]
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every file under `manifests/examples/`, sorted.
#[must_use]
pub fn example_manifests() -> Vec<PathBuf> {
    let dir = repo_root().join("manifests/examples");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|entries| entries.filter_map(Result::ok).map(|e| e.path()).collect())
        .unwrap_or_default();
    files.retain(|p| p.extension().is_some_and(|e| e == "yaml"));
    files.sort();
    files
}
