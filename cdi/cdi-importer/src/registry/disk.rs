//! Finding the disk in a containerDisk image's layers, as upstream's importer does.

use tracing::{info, warn};

use super::manifest::Descriptor;
use super::tar_stream::{EntryKind, TarStream};
use super::{Client, DISK_DIR, RegistryError};
use crate::layers::{self, Stream};

/// Where a file is in a containerDisk image (upstream's tests: under `disk/`, not a whiteout).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum DiskPath {
    /// Not the disk.
    Elsewhere,
    /// `disk/<name>`: the disk.
    Disk,
    /// Deeper under `disk/`: upstream's import fails on it.
    Nested,
}

pub(super) fn disk_path(path: &str) -> DiskPath {
    let path = path.strip_prefix("./").unwrap_or(path);
    let Some(rest) = path.strip_prefix(DISK_DIR) else {
        return DiskPath::Elsewhere;
    };
    let name = rest.rsplit('/').next().unwrap_or_default();
    if name.is_empty() || name.starts_with(".wh.") {
        DiskPath::Elsewhere
    } else if rest.contains('/') {
        DiskPath::Nested
    } else {
        DiskPath::Disk
    }
}

/// The disk found in a layer: its path in the image and its bytes.
pub struct Disk {
    /// Its path in the image.
    pub path: String,
    /// Its size.
    pub size: u64,
    /// Its bytes.
    pub stream: Stream,
}

impl std::fmt::Debug for Disk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Disk")
            .field("path", &self.path)
            .field("size", &self.size)
            .finish_non_exhaustive()
    }
}

/// Finds the disk in `layers`, base first: a layer that cannot be read as an archive is passed
/// over, as upstream's importer does. Blocking: call it from a blocking thread, with `runtime`
/// the runtime the client's requests run on.
///
/// # Errors
/// [`RegistryError::NoDisk`] when no layer has one, [`RegistryError::Nested`] when the first file
/// under `disk/` is in a directory of its own.
pub fn find_disk(
    runtime: &tokio::runtime::Handle,
    client: &Client,
    layers: &[Descriptor],
) -> Result<Disk, RegistryError> {
    let mut passed_over = None;
    for layer in layers {
        info!(digest = %layer.digest, size = layer.size, media_type = %layer.media_type, "reading layer");
        let blob = match runtime.block_on(client.blob(layer)) {
            Ok(blob) => blob,
            Err(error) => {
                warn!(digest = %layer.digest, %error, "passing over a layer that could not be fetched");
                passed_over = Some(format!("{}: {error}", layer.digest));
                continue;
            }
        };
        let stream = match layers::open(blob) {
            Ok(opened) => opened.stream,
            Err(error) => {
                warn!(digest = %layer.digest, %error, "passing over a layer that could not be opened");
                passed_over = Some(format!("{}: {error}", layer.digest));
                continue;
            }
        };
        let mut archive = TarStream::new(stream);
        loop {
            match archive.next_entry() {
                Ok(Some(entry)) if entry.kind == EntryKind::File => match disk_path(&entry.path) {
                    DiskPath::Disk => {
                        info!(path = %entry.path, size = entry.size, "found the disk");
                        return Ok(Disk {
                            path: entry.path,
                            size: entry.size,
                            stream: archive.into_entry(),
                        });
                    }
                    DiskPath::Nested => return Err(RegistryError::Nested(entry.path)),
                    DiskPath::Elsewhere => {}
                },
                Ok(Some(_)) => {}
                Ok(None) => break,
                Err(error) => {
                    warn!(digest = %layer.digest, %error, "passing over a layer that could not be read");
                    passed_over = Some(format!("{}: {error}", layer.digest));
                    break;
                }
            }
        }
    }
    Err(RegistryError::NoDisk { passed_over })
}
