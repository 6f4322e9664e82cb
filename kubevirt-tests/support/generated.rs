//! Generated files the repository commits (CRDs): a test compares them with what the code
//! generates, and rewrites them when `KUBEVIRT_RS_UPDATE_GOLDEN` is set. Shared by the crates'
//! tests through `#[path]`.

use std::path::Path;

/// Fails, naming every stale file and how to regenerate it (`regenerate`), when a file of
/// `files` (name under `dir`, content) differs from the one committed in `dir`; with
/// `KUBEVIRT_RS_UPDATE_GOLDEN` set, writes them first.
pub fn assert_committed(dir: &Path, files: impl IntoIterator<Item = (String, String)>, regenerate: &str) {
    let update = std::env::var_os("KUBEVIRT_RS_UPDATE_GOLDEN").is_some();
    let mut stale = Vec::new();
    for (name, content) in files {
        let path = dir.join(&name);
        if update {
            std::fs::create_dir_all(dir).expect("the directory of the generated files");
            std::fs::write(&path, &content).expect("write a generated file");
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        if committed != content {
            stale.push(name);
        }
    }
    assert!(
        stale.is_empty(),
        "stale {stale:?}: run `{regenerate}` and commit the result"
    );
}
