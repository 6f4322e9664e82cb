//! How the pod interface's observation passes from virt-handler to the launcher: virt-handler
//! observes it before the wiring changes it, writes it as JSON into the VMI's private directory,
//! then writes an empty marker once the wiring is done; the launcher plans its lease from the same
//! file. Both files are written atomically (a temporary file renamed into place). The directory is
//! the pod's, so neither a read nor a write follows a symlink at the file's name, a read takes only
//! a regular file of bounded size, and never waits on a FIFO.

use std::io::{Read as _, Write as _};
use std::os::unix::fs::OpenOptionsExt as _;
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

/// The largest cache read: an observation is a few hundred bytes.
const MAX_CACHE_BYTES: u64 = 64 * 1024;

/// Reads the observation cached at `path`.
///
/// # Errors
/// [`HandoverError::Read`] naming the file when it cannot be read or does not parse.
pub fn read_observation(path: &Path) -> Result<PodInterface, HandoverError> {
    let read = |message: String| HandoverError::Read {
        path: path.to_owned(),
        message,
    };
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| read(e.to_string()))?;
    let meta = file.metadata().map_err(|e| read(e.to_string()))?;
    if !meta.is_file() {
        return Err(read("not a regular file".to_owned()));
    }
    let mut bytes = Vec::new();
    file.take(MAX_CACHE_BYTES)
        .read_to_end(&mut bytes)
        .map_err(|e| read(e.to_string()))?;
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
    // Whatever is at the temporary name goes (a link is removed, not followed); the file is then
    // created new, so a link put there in between makes the write fail.
    match std::fs::remove_file(&temporary) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(error(e)),
        _ => {}
    }
    {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .mode(0o644)
            .open(&temporary)
            .map_err(error)?;
        file.write_all(contents).map_err(error)?;
    }
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

    #[test]
    fn links_fifos_and_devices_in_the_pods_directory_are_never_followed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let outside = dir.path().join("outside");
        std::fs::write(&outside, b"untouched").expect("outside");
        let path = dir.path().join("pod-interface.json");
        // A link at the temporary name is removed, not written through.
        std::os::unix::fs::symlink(&outside, path.with_extension("tmp")).expect("link");
        write_atomically(&path, b"{}").expect("write");
        assert_eq!(std::fs::read(&outside).expect("outside"), b"untouched");
        // A link at the cache's name is not read through.
        std::fs::remove_file(&path).expect("remove");
        std::os::unix::fs::symlink(&outside, &path).expect("link");
        assert!(read_observation(&path).is_err());
        // Neither a FIFO nor a device is read (a FIFO would block, /dev/zero never ends).
        std::fs::remove_file(&path).expect("remove");
        nix::unistd::mkfifo(&path, nix::sys::stat::Mode::from_bits_truncate(0o600)).expect("fifo");
        let fifo = read_observation(&path).expect_err("a FIFO");
        assert!(fifo.to_string().contains("not a regular file"), "{fifo}");
        assert!(read_observation(Path::new("/dev/zero")).is_err());
    }
}
