//! An unprivileged launcher's hostDisk images. The kubelet makes a `DiskOrCreate` hostDisk's
//! directory (a `hostPath` volume of type `DirectoryOrCreate`) as root, so a launcher running as
//! uid 107 could not create the image in it, and QEMU could not open an image root created. Before
//! the launcher's first Sync, virt-handler creates each missing `DiskOrCreate` image, sparse and
//! as long as its capacity, and gives every `DiskOrCreate` image to the launcher's user, as
//! upstream's virt-handler does. The launcher then finds the image in place. `Disk` images are
//! the user's and are left as they are.
//!
//! The images are reached through the launcher's root (`/proc/<pid>/root`, held by
//! [`crate::pod_process::PodProcess`]) with `openat2(RESOLVE_IN_ROOT)`: every symbolic link on the
//! way, absolute or not, resolves inside the launcher's root, and the image itself is never a
//! link. So a pod cannot make virt-handler create or give away a file of the node's.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use kubevirt_api::v1::VirtualMachineInstance;
use nix::errno::Errno;
use nix::fcntl::{OFlag, OpenHow, ResolveFlag, open, openat2};
use nix::sys::stat::{Mode, SFlag, fchmod, fstat};
use nix::unistd::{Gid, Uid, fchown, ftruncate};

/// Where the compute container mounts a volume's directory: the controller's pod layout
/// (`virt-controller/src/pod/volumes.rs`), upstream's path.
#[must_use]
pub fn volume_dir_in_pod(volume: &str) -> String {
    format!("/var/run/kubevirt-private/vmi-disks/{volume}")
}

/// Why a hostDisk image could not be made ready for the launcher.
#[derive(Debug, thiserror::Error)]
pub enum HostDiskError {
    /// The capacity is missing or not a size.
    #[error("{field}: {message}")]
    Capacity {
        /// `spec.volumes[i].hostDisk.capacity`.
        field: String,
        /// Why.
        message: String,
    },
    /// The image is there but is not a regular file.
    #[error("{field}: {path} is not a regular file")]
    NotAFile {
        /// `spec.volumes[i].hostDisk.path`.
        field: String,
        /// The image, as the handler reached it.
        path: PathBuf,
    },
    /// A system call failed.
    #[error("{field}: cannot {action} {path}")]
    Io {
        /// `spec.volumes[i].hostDisk.path`.
        field: String,
        /// What was being done.
        action: &'static str,
        /// The file or directory, as the handler reached it.
        path: PathBuf,
        /// Why.
        source: nix::Error,
    },
}

/// Creates the missing `DiskOrCreate` images of `vmi` under the launcher's root `root`, and gives
/// every `DiskOrCreate` image to `owner` (uid and gid). Returns the images, as the handler reached
/// them.
///
/// # Errors
/// [`HostDiskError`] naming the field and the path.
pub fn prepare(root: &Path, vmi: &VirtualMachineInstance, owner: u32) -> Result<Vec<PathBuf>, HostDiskError> {
    let mut prepared = Vec::new();
    for (index, volume) in vmi.spec.volumes.iter().enumerate() {
        let Some(host) = &volume.host_disk else {
            continue;
        };
        if host.disk_type != "DiskOrCreate" {
            continue;
        }
        let field = format!("spec.volumes[{index}].hostDisk");
        let capacity = host
            .capacity
            .as_ref()
            .ok_or_else(|| "DiskOrCreate needs a capacity".to_owned())
            .and_then(|c| kubevirt_api::quantity::to_bytes(c).map_err(|e| e.to_string()))
            .map_err(|message| HostDiskError::Capacity {
                field: format!("{field}.capacity"),
                message,
            })?;
        let name = Path::new(&host.path)
            .file_name()
            .ok_or_else(|| HostDiskError::NotAFile {
                field: format!("{field}.path"),
                path: PathBuf::from(&host.path),
            })?;
        let dir = volume_dir_in_pod(&volume.name);
        let image = Path::new(&dir).join(name);
        let shown = root.join(image.strip_prefix("/").unwrap_or(&image));
        let io = |action, path: &Path| {
            let (field, path) = (format!("{field}.path"), path.to_owned());
            move |source| HostDiskError::Io {
                field,
                action,
                path,
                source,
            }
        };
        let root_dir = open(
            root,
            OFlag::O_DIRECTORY | OFlag::O_PATH | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(io("open", root))?;
        let (file, created) = open_or_create(&root_dir, &image).map_err(io("create", &shown))?;
        let stat = fstat(&file).map_err(io("inspect", &shown))?;
        if SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT != SFlag::S_IFREG {
            return Err(HostDiskError::NotAFile {
                field: format!("{field}.path"),
                path: shown,
            });
        }
        if created {
            let length = i64::try_from(capacity).map_err(|_| HostDiskError::Capacity {
                field: format!("{field}.capacity"),
                message: format!("{capacity} bytes is too large for a file"),
            })?;
            ftruncate(&file, length).map_err(io("size", &shown))?;
        }
        fchown(&file, Some(Uid::from_raw(owner)), Some(Gid::from_raw(owner))).map_err(io("give away", &shown))?;
        prepared.push(shown);
    }
    Ok(prepared)
}

/// Opens the regular file `image` (an absolute path inside the root `root`) for writing, creating
/// it (mode 0660) when it is missing; every link on the way resolves inside `root`, and `image`
/// itself may not be one. Returns the file and whether it was created.
fn open_or_create(root: &OwnedFd, image: &Path) -> nix::Result<(OwnedFd, bool)> {
    let how = |flags: OFlag| {
        OpenHow::new()
            .flags(flags | OFlag::O_RDWR | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW)
            .resolve(ResolveFlag::RESOLVE_IN_ROOT | ResolveFlag::RESOLVE_NO_MAGICLINKS)
    };
    // openat2 takes a mode only with O_CREAT.
    let create = how(OFlag::O_CREAT | OFlag::O_EXCL).mode(Mode::from_bits_truncate(0o660));
    match openat2(root, image, create) {
        Ok(file) => {
            // Whatever this process's umask.
            fchmod(&file, Mode::from_bits_truncate(0o660))?;
            Ok((file, true))
        }
        Err(Errno::EEXIST) => openat2(root, image, how(OFlag::empty())).map(|file| (file, false)),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests;
