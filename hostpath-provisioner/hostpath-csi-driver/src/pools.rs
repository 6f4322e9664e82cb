//! The node's storage pools, as upstream's `--datadir` gives them: a JSON list of
//! `{"name", "path"}` (upstream's `snapshotPath`, `snapshotProvider` and `shared` are refused by
//! name: this driver makes no snapshots and no shared pools). A request names its pool in the
//! `storagePool` parameter; without one it is upstream's `legacy` pool.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// The pool a request without `storagePool` gets (upstream's).
pub const DEFAULT_POOL: &str = "legacy";

/// One pool, as `--datadir` lists it.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
struct PoolEntry {
    name: String,
    path: String,
    #[serde(default, rename = "snapshotPath")]
    snapshot_path: Option<String>,
    #[serde(default, rename = "snapshotProvider")]
    snapshot_provider: Option<String>,
    #[serde(default)]
    shared: bool,
}

/// Why `--datadir` cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PoolsError {
    /// Not a JSON list of pools.
    #[error("--datadir is not a JSON list of {{\"name\", \"path\"}} pools: {0}")]
    Json(String),
    /// No pool at all.
    #[error("--datadir lists no storage pool")]
    Empty,
    /// A pool without its name or path, or named twice.
    #[error("--datadir: storage pool {0:?}: {1}")]
    Pool(String, &'static str),
}

/// The node's pools, by name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pools(BTreeMap<String, PathBuf>);

/// Why a pool cannot be found.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unable to locate path for storage pool {0}")]
pub struct UnknownPool(pub String);

impl Pools {
    /// Reads `--datadir`. A relative path is taken from `/`, as upstream's container runs.
    ///
    /// # Errors
    /// [`PoolsError`], naming the pool.
    pub fn parse(datadir: &str) -> Result<Self, PoolsError> {
        let entries: Vec<PoolEntry> = serde_json::from_str(datadir).map_err(|e| PoolsError::Json(e.to_string()))?;
        if entries.is_empty() {
            return Err(PoolsError::Empty);
        }
        let mut pools = BTreeMap::new();
        for entry in entries {
            if entry.name.is_empty() {
                return Err(PoolsError::Pool(entry.path, "has no name"));
            }
            if entry.path.is_empty() {
                return Err(PoolsError::Pool(entry.name, "has no path"));
            }
            if entry.snapshot_path.is_some() || entry.snapshot_provider.is_some() {
                return Err(PoolsError::Pool(
                    entry.name,
                    "snapshots are not supported by this driver",
                ));
            }
            if entry.shared {
                return Err(PoolsError::Pool(
                    entry.name,
                    "shared pools are not supported by this driver",
                ));
            }
            let path = Path::new("/").join(&entry.path);
            if pools.insert(entry.name.clone(), path).is_some() {
                return Err(PoolsError::Pool(entry.name, "is listed twice"));
            }
        }
        Ok(Self(pools))
    }

    /// The pool `parameters` name (`storagePool`, else [`DEFAULT_POOL`]).
    ///
    /// # Errors
    /// [`UnknownPool`] (upstream's message).
    pub fn named_by(&self, parameters: &std::collections::HashMap<String, String>) -> Result<&Path, UnknownPool> {
        let name = parameters
            .get(crate::POOL_PARAMETER)
            .map_or(DEFAULT_POOL, String::as_str);
        self.0
            .get(name)
            .map(PathBuf::as_path)
            .ok_or_else(|| UnknownPool(name.to_owned()))
    }

    /// Every pool's path.
    pub fn paths(&self) -> impl Iterator<Item = &Path> {
        self.0.values().map(PathBuf::as_path)
    }
}

/// Whether `id` can name a volume's directory: one path component, not `.` or `..`.
#[must_use]
pub fn valid_volume_id(id: &str) -> bool {
    !id.is_empty() && id != "." && id != ".." && !id.contains('/') && !id.contains('\0')
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn upstreams_datadir_is_read_and_a_request_names_its_pool() {
        let pools = Pools::parse(r#"[{"name":"local","path":"local-data-dir/csi","shared":false},{"name":"legacy","path":"/var/hpvolumes"}]"#)
            .expect("pools");
        let named = HashMap::from([("storagePool".to_owned(), "local".to_owned())]);
        assert_eq!(pools.named_by(&named), Ok(Path::new("/local-data-dir/csi")));
        assert_eq!(pools.named_by(&HashMap::new()), Ok(Path::new("/var/hpvolumes")));
        let other = HashMap::from([("storagePool".to_owned(), "fast".to_owned())]);
        assert_eq!(
            pools.named_by(&other).map_err(|e| e.to_string()),
            Err("unable to locate path for storage pool fast".to_owned())
        );
    }

    #[test]
    fn a_bad_datadir_is_refused_by_name() {
        for (datadir, message) in [
            ("", "--datadir is not a JSON list"),
            ("[]", "--datadir lists no storage pool"),
            (r#"[{"name":"a","path":""}]"#, "storage pool \"a\": has no path"),
            (
                r#"[{"name":"a","path":"/x"},{"name":"a","path":"/y"}]"#,
                "is listed twice",
            ),
            (
                r#"[{"name":"a","path":"/x","snapshotProvider":"reflink"}]"#,
                "snapshots are not supported",
            ),
            (
                r#"[{"name":"a","path":"/x","shared":true}]"#,
                "shared pools are not supported",
            ),
            (r#"[{"name":"a","path":"/x","size":1}]"#, "unknown field `size`"),
        ] {
            let error = Pools::parse(datadir).expect_err(datadir).to_string();
            assert!(error.contains(message), "{datadir}: {error}");
        }
    }

    #[test]
    fn a_volume_id_is_one_path_component() {
        assert!(valid_volume_id("pvc-1234"));
        for bad in ["", ".", "..", "a/b", "../x"] {
            assert!(!valid_volume_id(bad), "{bad:?}");
        }
    }
}
