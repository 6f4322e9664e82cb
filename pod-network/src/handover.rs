//! How the pod interface's observation passes from virt-handler to the launcher: virt-handler
//! observes it before the wiring changes it, writes it as JSON into the VMI's private directory,
//! then writes an empty marker once the wiring is done; the launcher plans its lease from the same
//! file. Both files are written atomically (a temporary file renamed into place).

use std::path::{Path, PathBuf};

use crate::plan::PodInterface;

/// Why the cached observation or the marker could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum HandoverError {
    /// The cache is unreadable or malformed.
    #[error("cannot read {path}: {message}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// A file could not be written.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// Reads the observation cached at `path`.
///
/// # Errors
/// [`HandoverError::Read`] naming the file when it cannot be read or does not parse.
pub fn read_observation(path: &Path) -> Result<PodInterface, HandoverError> {
    let read = |message: String| HandoverError::Read {
        path: path.to_owned(),
        message,
    };
    let bytes = std::fs::read(path).map_err(|e| read(e.to_string()))?;
    serde_json::from_slice(&bytes).map_err(|e| read(e.to_string()))
}

/// Caches `pod` at `path`.
///
/// # Errors
/// [`HandoverError::Write`] naming the file.
pub fn write_observation(path: &Path, pod: &PodInterface) -> Result<(), HandoverError> {
    let json = serde_json::to_vec_pretty(pod).map_err(|e| HandoverError::Write {
        path: path.to_owned(),
        source: e.into(),
    })?;
    write_atomically(path, &json)
}

/// Writes `contents` to `path` through a temporary file renamed into place, creating the directory.
///
/// # Errors
/// [`HandoverError::Write`] naming the file.
pub fn write_atomically(path: &Path, contents: &[u8]) -> Result<(), HandoverError> {
    let error = |source| HandoverError::Write {
        path: path.to_owned(),
        source,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(error)?;
    }
    let temporary = path.with_extension("tmp");
    std::fs::write(&temporary, contents).map_err(error)?;
    std::fs::rename(&temporary, path).map_err(error)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Ipv4Cidr;

    #[test]
    fn an_observation_reads_back_as_written() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("private/pod-interface.json");
        let pod = PodInterface {
            name: "eth0".to_owned(),
            mac: [0x0a, 0x58, 0x0a, 0xf4, 0, 5],
            mtu: 1450,
            address: Ipv4Cidr::parse("10.244.0.5/24"),
            gateway: Some("10.244.0.1".parse().expect("gateway")),
        };
        write_observation(&path, &pod).expect("write");
        assert_eq!(read_observation(&path).expect("read"), pod);
        assert!(
            !path.with_extension("tmp").exists(),
            "the temporary file is renamed away"
        );
    }

    #[test]
    fn a_missing_or_malformed_cache_is_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("pod-interface.json");
        let missing = read_observation(&path).expect_err("missing");
        assert!(
            missing
                .to_string()
                .starts_with(&format!("cannot read {}", path.display())),
            "{missing}"
        );
        std::fs::write(&path, b"{").expect("write");
        let malformed = read_observation(&path).expect_err("malformed");
        assert!(malformed.to_string().contains("EOF"), "{malformed}");
    }
}
