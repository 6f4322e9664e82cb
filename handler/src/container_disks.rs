//! containerDisks and the kernel-boot container, as upstream's virt-handler provides them to a
//! launcher. Each image runs in a sidecar of the launcher pod (`container-disk`, listening on
//! `<name>.sock` in the pod's `container-disks` emptyDir); before the launcher's first Sync the
//! handler finds each sidecar's process from its socket, finds the image's file in that process's
//! root file system, and bind-mounts it read-only into the same emptyDir, where the launcher reads
//! it: `disk_<n>.img` for `spec.volumes[n]`, `kernel-boot/<file>` for the kernel and initrd. The
//! mounts are removed when the VMI is cleaned up, so that the kubelet can remove the pod's volumes.
//!
//! [`images`] is the pure part (what goes where); [`provide`] and [`release`] apply it through
//! [`NodeMounts`].

use std::path::{Component, Path, PathBuf};

use kubevirt_api::v1::VirtualMachineInstance;

use crate::node_mounts::{MountError, NodeMounts};

/// Where a containerDisk keeps its disk when its volume names no `path` (upstream's fallback).
pub const DISK_DIR_IN_IMAGE: &str = "/disk";

/// Why an image could not be provided.
#[derive(Debug, thiserror::Error)]
pub enum ProvideError {
    /// The sidecar does not serve its socket yet.
    #[error("the sidecar of {field} has not started yet (no {socket})")]
    NotStarted {
        /// The field of the image, e.g. `spec.volumes[0].containerDisk`.
        field: String,
        /// Its socket.
        socket: PathBuf,
    },
    /// The sidecar's process cannot be found.
    #[error("cannot find the process behind {socket}: {source}")]
    Peer {
        /// The socket.
        socket: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The image does not hold what the VMI asks for.
    #[error("{field}: {message}")]
    Image {
        /// The field naming the file, e.g. `spec.volumes[0].containerDisk.path`.
        field: String,
        /// What is wrong.
        message: String,
    },
    /// A mount point could not be made.
    #[error("cannot create {path}: {source}")]
    MountPoint {
        /// The mount point.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Mounting failed.
    #[error(transparent)]
    Mount(#[from] MountError),
}

/// A file to take from an image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FileInImage {
    /// This path.
    Path(PathBuf),
    /// The only file in this directory.
    OnlyFileIn(PathBuf),
}

/// A file of an image and where it goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImageFile {
    /// The file in the image.
    pub file: FileInImage,
    /// Its mount point, relative to the container-disks directory.
    pub target: PathBuf,
    /// The field naming the file, for messages.
    pub field: String,
}

/// One image a sidecar serves, and where its files go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServedImage {
    /// The field the image comes from, for messages.
    pub field: String,
    /// The sidecar's socket, relative to the container-disks directory.
    pub socket: PathBuf,
    /// The image's files.
    pub files: Vec<ImageFile>,
}

/// The images `vmi`'s launcher needs from sidecars, with the names virt-controller gives the
/// sidecars' copy paths (`disk_<index in spec.volumes>`, `kernel-boot`).
#[must_use]
pub fn images(vmi: &VirtualMachineInstance) -> Vec<ServedImage> {
    let mut images: Vec<ServedImage> = vmi
        .spec
        .volumes
        .iter()
        .enumerate()
        .filter_map(|(index, volume)| {
            let disk = volume.container_disk.as_ref()?;
            let field = format!("spec.volumes[{index}].containerDisk");
            let file = match disk.path.as_deref() {
                Some(path) if !path.is_empty() => FileInImage::Path(PathBuf::from(path)),
                _ => FileInImage::OnlyFileIn(PathBuf::from(DISK_DIR_IN_IMAGE)),
            };
            Some(ServedImage {
                socket: PathBuf::from(format!("disk_{index}.sock")),
                files: vec![ImageFile {
                    file,
                    target: PathBuf::from(format!("disk_{index}.img")),
                    field: format!("{field}.path"),
                }],
                field,
            })
        })
        .collect();
    if let Some(container) = vmi.kernel_boot_container() {
        let field = "spec.domain.firmware.kernelBoot.container".to_owned();
        let files = [
            ("kernelPath", &container.kernel_path),
            ("initrdPath", &container.initrd_path),
        ]
        .into_iter()
        .filter_map(|(key, path)| {
            let path = PathBuf::from(path.as_deref()?);
            Some(ImageFile {
                target: Path::new("kernel-boot").join(path.file_name()?),
                file: FileInImage::Path(path),
                field: format!("{field}.{key}"),
            })
        })
        .collect();
        images.push(ServedImage {
            field,
            socket: PathBuf::from("kernel-boot.sock"),
            files,
        });
    }
    images
}

/// `path` inside the root at `root`, refusing anything that could lead out of it: a relative or
/// `..` component, or a symbolic link anywhere on the way (the node would follow it in its own
/// namespace). Returns the path relative to the root.
fn resolve_in_image(root: &Path, path: &Path, field: &str) -> Result<PathBuf, ProvideError> {
    let refuse = |message: String| ProvideError::Image {
        field: field.to_owned(),
        message,
    };
    let mut relative = PathBuf::new();
    for component in path.components() {
        match component {
            Component::RootDir => {}
            Component::Normal(name) => {
                relative.push(name);
                let meta = std::fs::symlink_metadata(root.join(&relative))
                    .map_err(|e| refuse(format!("{} in the image: {e}", path.display())))?;
                if meta.file_type().is_symlink() {
                    return Err(refuse(format!(
                        "{} in the image is or passes through a symbolic link",
                        path.display()
                    )));
                }
            }
            Component::CurDir | Component::ParentDir | Component::Prefix(_) => {
                return Err(refuse(format!("{} is not an absolute path without ..", path.display())));
            }
        }
    }
    if !std::fs::symlink_metadata(root.join(&relative)).is_ok_and(|m| m.is_file()) {
        return Err(refuse(format!("{} in the image is not a file", path.display())));
    }
    Ok(relative)
}

/// The file to mount, relative to the image's root (seen through `/proc/<pid>/root`).
fn locate(root: &Path, file: &FileInImage, field: &str) -> Result<PathBuf, ProvideError> {
    match file {
        FileInImage::Path(path) => resolve_in_image(root, path, field),
        FileInImage::OnlyFileIn(dir) => {
            let inside = resolve_dir(root, dir, field)?;
            let entries: Vec<_> = std::fs::read_dir(root.join(&inside))
                .map_err(|e| image_error(field, format!("{} in the image: {e}", dir.display())))?
                .filter_map(Result::ok)
                .collect();
            match entries.as_slice() {
                [only] => resolve_in_image(root, &dir.join(only.file_name()), field),
                [] => Err(image_error(
                    field,
                    format!("{} in the image holds no disk", dir.display()),
                )),
                _ => Err(image_error(
                    field,
                    format!(
                        "{} in the image holds more than one file: name the disk in path",
                        dir.display()
                    ),
                )),
            }
        }
    }
}

fn image_error(field: &str, message: String) -> ProvideError {
    ProvideError::Image {
        field: field.to_owned(),
        message,
    }
}

fn resolve_dir(root: &Path, dir: &Path, field: &str) -> Result<PathBuf, ProvideError> {
    let relative = dir.strip_prefix("/").unwrap_or(dir);
    let meta = std::fs::symlink_metadata(root.join(relative))
        .map_err(|e| image_error(field, format!("{} in the image: {e}", dir.display())))?;
    if !meta.is_dir() {
        return Err(image_error(
            field,
            format!("{} in the image is not a directory", dir.display()),
        ));
    }
    Ok(relative.to_owned())
}

/// The pid of the process listening on `socket`.
fn peer_pid(socket: &Path) -> Result<i32, ProvideError> {
    let peer = |source| ProvideError::Peer {
        socket: socket.to_owned(),
        source,
    };
    let stream = cmd_protocol::sockets::connect_unix_blocking(socket).map_err(peer)?;
    let credentials = nix::sys::socket::getsockopt(&stream, nix::sys::socket::sockopt::PeerCredentials)
        .map_err(|e| peer(e.into()))?;
    Ok(credentials.pid())
}

/// Whether the launcher finds an image at `target` already: a mount, or a file with data (an
/// empty file is a mount point still waiting for its mount).
fn is_provided(target: &Path, mounted: &[PathBuf]) -> bool {
    mounted.iter().any(|m| m == target) || std::fs::metadata(target).is_ok_and(|m| m.len() > 0)
}

/// Mounts every image of `vmi` into `dir` (the pod's container-disks directory, the same path for
/// this process and the node). Idempotent: what is mounted already is left alone. `proc` is where
/// this process sees other processes (`/proc`).
///
/// # Errors
/// [`ProvideError::NotStarted`] while a sidecar has not started (try again later); otherwise
/// what failed, naming the field or the path.
pub fn provide(
    mounts: &dyn NodeMounts,
    proc: &Path,
    dir: &Path,
    vmi: &VirtualMachineInstance,
) -> Result<(), ProvideError> {
    let images = images(vmi);
    if images.is_empty() {
        return Ok(());
    }
    let mounted = mounts.mounted_under(dir)?;
    for image in images {
        let pending: Vec<_> = image
            .files
            .iter()
            .filter(|f| !is_provided(&dir.join(&f.target), &mounted))
            .collect();
        if pending.is_empty() {
            continue;
        }
        let socket = dir.join(&image.socket);
        if !socket.exists() {
            return Err(ProvideError::NotStarted {
                field: image.field,
                socket,
            });
        }
        let pid = peer_pid(&socket)?;
        let root_seen_here = proc.join(pid.to_string()).join("root");
        let root_in_node = mounts.root_in_node(pid)?;
        for ImageFile { file, target, field } in pending {
            let relative = locate(&root_seen_here, file, field)?;
            let target = dir.join(target);
            if let Some(parent) = target.parent() {
                std::fs::create_dir_all(parent).map_err(|source| ProvideError::MountPoint {
                    path: parent.to_owned(),
                    source,
                })?;
            }
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&target)
                .map_err(|source| ProvideError::MountPoint {
                    path: target.clone(),
                    source,
                })?;
            mounts.bind_read_only(&root_in_node.join(&relative), &target)?;
            tracing::info!(vmi = %vmi.key(), field = %field, target = %target.display(), "mounted from the image");
        }
    }
    Ok(())
}

/// Unmounts everything under `dir` (a pod's container-disks directory).
///
/// # Errors
/// [`MountError`] from the first mount that could not be removed.
pub fn release(mounts: &dyn NodeMounts, dir: &Path) -> Result<(), MountError> {
    for target in mounts.mounted_under(dir)? {
        mounts.unmount(&target)?;
        tracing::info!(target = %target.display(), "unmounted");
    }
    Ok(())
}

#[cfg(test)]
mod tests;
