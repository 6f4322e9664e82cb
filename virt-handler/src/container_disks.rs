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

use cmd_protocol::sockets;
use kubevirt_api::v1::VirtualMachineInstance;

use crate::node_mounts::{MountError, NodeMounts};
use crate::pod_process::{PodProcess, PodProcessError};

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
    /// The sidecar's process does not run in the pod.
    #[error("the process behind {socket} cannot be trusted: {source}")]
    NotThePods {
        /// The socket.
        socket: PathBuf,
        /// Why.
        source: PodProcessError,
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
///
/// # Errors
/// [`ProvideError::Image`] for a kernel or initrd path that names no file, or two that would
/// share one mount point (the launcher finds them by file name).
pub fn images(vmi: &VirtualMachineInstance) -> Result<Vec<ServedImage>, ProvideError> {
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
        let mut files: Vec<ImageFile> = Vec::new();
        for (key, path) in [
            ("kernelPath", &container.kernel_path),
            ("initrdPath", &container.initrd_path),
        ] {
            let Some(path) = path.as_deref().map(PathBuf::from) else {
                continue;
            };
            let file_field = format!("{field}.{key}");
            let name = path
                .file_name()
                .ok_or_else(|| image_error(&file_field, format!("{} names no file", path.display())))?;
            let target = Path::new("kernel-boot").join(name);
            if files.iter().any(|f| f.target == target) {
                return Err(image_error(
                    &file_field,
                    format!(
                        "{} has the file name of the kernel, and the launcher finds both by file name",
                        path.display()
                    ),
                ));
            }
            files.push(ImageFile {
                target,
                file: FileInImage::Path(path),
                field: file_field,
            });
        }
        images.push(ServedImage {
            field,
            socket: PathBuf::from("kernel-boot.sock"),
            files,
        });
    }
    Ok(images)
}

/// `path` inside the root at `root`, refusing anything that could lead out of it: a relative path,
/// a `..` component, or a symbolic link anywhere on the way. Returns the path relative to the
/// root. (The mount helper walks it again, the same way, when it mounts.)
fn resolve_in_image(root: &Path, path: &Path, field: &str) -> Result<PathBuf, ProvideError> {
    let refuse = |message: String| ProvideError::Image {
        field: field.to_owned(),
        message,
    };
    if !path.has_root() {
        return Err(refuse(format!("{} is not an absolute path", path.display())));
    }
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
            let entries = std::fs::read_dir(root.join(&inside))
                .and_then(Iterator::collect::<Result<Vec<_>, _>>)
                .map_err(|e| image_error(field, format!("{} in the image: {e}", dir.display())))?;
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
/// empty file is a mount point still waiting for its mount). A symbolic link the pod made counts
/// when it leads to data: it can only lead within the pod's own view of its files.
fn is_provided(target: &Path, mounted: &[PathBuf]) -> bool {
    mounted.iter().any(|m| m == target) || std::fs::metadata(target).is_ok_and(|m| m.len() > 0)
}

/// Mounts every image of `vmi` into `dir` (the pod's container-disks directory, the same path for
/// this process and the node), from sidecars checked to run in the pod whose UID is `pod_uid`
/// ([`PodProcess`]). Idempotent: what is mounted already is left alone. `proc` is where this
/// process sees other processes (`/proc`).
///
/// # Errors
/// [`ProvideError::NotStarted`] while a sidecar has not started (try again later),
/// [`ProvideError::NotThePods`] when the process behind a sidecar's socket runs outside the pod;
/// otherwise what failed, naming the field or the path.
pub fn provide(
    mounts: &dyn NodeMounts,
    proc: &Path,
    dir: &Path,
    pod_uid: &str,
    vmi: &VirtualMachineInstance,
) -> Result<(), ProvideError> {
    let images = images(vmi)?;
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
        let process =
            PodProcess::open(proc, peer_pid(&socket)?, pod_uid).map_err(|source| ProvideError::NotThePods {
                socket: socket.clone(),
                source,
            })?;
        let root_seen_here = process.root();
        let root_in_node = mounts.root_in_node(&process)?;
        for ImageFile { file, target, field } in pending {
            let relative = locate(&root_seen_here, file, field)?;
            mounts.bind_read_only(&root_in_node, &relative, dir, target)?;
            tracing::info!(vmi = %vmi.key(), field = %field, target = %dir.join(target).display(), "mounted from the image");
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

/// Unmounts the images of pods whose launcher is gone (no command socket any more), which a
/// handler that was down while their VMI went away could not release. Returns how many.
///
/// # Errors
/// [`MountError`] from reading the node's mounts or from the first unmount that failed.
pub fn release_orphans(mounts: &dyn NodeMounts, pods_dir: &Path) -> Result<usize, MountError> {
    let mut released = 0;
    for target in mounts.mounted_under(pods_dir)? {
        let Some(pod) = target
            .strip_prefix(pods_dir)
            .ok()
            .and_then(|rest| rest.components().next())
            .and_then(|c| c.as_os_str().to_str())
        else {
            continue;
        };
        if !target.starts_with(sockets::container_disk_dir_on_host(pods_dir, pod)) {
            continue;
        }
        let socket_dir = sockets::socket_dir_on_host(pods_dir, pod);
        if socket_dir.join(sockets::READY_SOCKET).exists() || socket_dir.join(sockets::INIT_SOCKET).exists() {
            continue;
        }
        mounts.unmount(&target)?;
        tracing::info!(target = %target.display(), "unmounted the image of a launcher that is gone");
        released += 1;
    }
    Ok(released)
}

#[cfg(test)]
mod tests;
