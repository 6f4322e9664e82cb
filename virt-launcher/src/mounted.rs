//! Directories the kubelet fills from ConfigMaps, Secrets, the downward API and service account
//! tokens: their entries, without the kubelet's own `..data` and `..<timestamp>` ones.

use std::path::{Path, PathBuf};

/// The entries of `dir` a user put there, sorted by name.
pub fn entries(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(Result::ok)
        .filter(|e| !e.file_name().to_string_lossy().starts_with(".."))
        .map(|e| e.path())
        .collect();
    entries.sort();
    Ok(entries)
}

/// The regular files among them (links followed, as the kubelet's keys are links).
pub fn files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    Ok(entries(dir)?.into_iter().filter(|p| p.is_file()).collect())
}

/// A pod layout whose private directory is `dir`, with these files (relative paths, text) written
/// under its `secret/` directory, as the pod's Secret volumes mount them.
#[cfg(test)]
pub(crate) fn pod_layout_with_secrets(dir: &Path, files: &[(&str, &str)]) -> crate::domain::PathLayout {
    for (path, text) in files {
        let path = dir.join("secret").join(path);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }
    crate::domain::PathLayout {
        private_dir: dir.display().to_string(),
        ..crate::domain::PathLayout::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kubelets_own_entries_and_directories_are_left_out() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(dir.path().join("..2026_11_25")).expect("mkdir");
        std::fs::write(dir.path().join("..2026_11_25/key"), "v").expect("write");
        std::os::unix::fs::symlink("..2026_11_25", dir.path().join("..data")).expect("link");
        std::os::unix::fs::symlink("..data/key", dir.path().join("key")).expect("link");
        std::fs::create_dir(dir.path().join("nested")).expect("mkdir");
        let names = |paths: Vec<PathBuf>| -> Vec<String> {
            paths
                .iter()
                .map(|p| p.file_name().unwrap_or_default().to_string_lossy().into_owned())
                .collect()
        };
        assert_eq!(names(entries(dir.path()).expect("entries")), ["key", "nested"]);
        assert_eq!(names(files(dir.path()).expect("files")), ["key"]);
        assert!(entries(&dir.path().join("missing")).is_err());
    }
}
