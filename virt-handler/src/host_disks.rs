//! An unprivileged launcher's hostDisk images. The kubelet makes a `DiskOrCreate` hostDisk's
//! directory (a `hostPath` volume of type `DirectoryOrCreate`) as root, so a launcher running as
//! uid 107 could not create the image in it, and QEMU could not open an image root created. Before
//! the launcher's first Sync, virt-handler creates each missing `DiskOrCreate` image, sparse and
//! as long as its capacity, and gives every `DiskOrCreate` image to the launcher's user, as
//! upstream's virt-handler does. The launcher then finds the image in place. `Disk` images are
//! the user's and are left as they are.
//!
//! A filesystem-mode claim's image, `disk.img` in the claim's directory, is made the same way when
//! it is missing, as upstream's virt-handler does (`pkg/host-disk`): sized from the claim as the
//! VMI's status describes it, within the space the volume has ([`claim_images`]).
//!
//! The images are reached through the launcher's root (`/proc/<pid>/root`, held by
//! [`crate::pod_process::PodProcess`]) with `openat2(RESOLVE_IN_ROOT)`: every symbolic link on the
//! way, absolute or not, resolves inside the launcher's root. The image itself may not be a link,
//! nor a file with other names (a hard link), nor anything but a regular file, and an existing
//! image is never opened for reading or writing, only named. So what is in the pod cannot make
//! virt-handler create or give away another file of the node's than the one the VMI names. The
//! VMI's own `hostDisk.path` is trusted, as upstream trusts it: the `HostDisk` feature gate lets
//! whoever may create VMIs choose any file of the node (see docs/security.md).

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use kubevirt_api::v1::VirtualMachineInstance;
use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, OpenHow, RenameFlags, ResolveFlag, open, openat, openat2, renameat2};
use nix::sys::stat::{Mode, SFlag, fchmod, fstat};
use nix::unistd::{Gid, Uid, UnlinkatFlags, fchown, fchownat, ftruncate, unlinkat};

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
    /// The image is there but is not a regular file with one name.
    #[error("{field}: {node} (seen at {path}) is {what}, not a regular file of its own")]
    NotAFile {
        /// `spec.volumes[i].hostDisk.path`.
        field: String,
        /// The image's path on the node, as the VMI names it.
        node: String,
        /// The image, as the handler reached it.
        path: PathBuf,
        /// What it is instead.
        what: &'static str,
    },
    /// The launcher's root could not be opened (the launcher is gone).
    #[error("cannot open the launcher's root {path}: {source}")]
    Root {
        /// The root, as the handler reached it.
        path: PathBuf,
        /// Why.
        source: nix::Error,
    },
    /// A claim's image cannot be sized or does not fit its volume.
    #[error("{field}: {message}")]
    Space {
        /// `spec.volumes[i].persistentVolumeClaim` (or `dataVolume`).
        field: String,
        /// Why, in upstream's words.
        message: String,
    },
    /// A system call failed.
    #[error("{field}: cannot {action} {node} (seen at {path}): {source}")]
    Io {
        /// `spec.volumes[i].hostDisk.path`.
        field: String,
        /// The image's path on the node, as the VMI names it.
        node: String,
        /// What was being done.
        action: &'static str,
        /// The file or directory, as the handler reached it.
        path: PathBuf,
        /// Why.
        source: nix::Error,
    },
}

/// The suffix of the name an image is made under before it takes its own name.
const STAGING: &str = ".kubevirt-rs-staging";

/// Whether [`prepare`] may have an image to make for `vmi`: a `DiskOrCreate` hostDisk, or a
/// claim's volume (`persistentVolumeClaim`, `dataVolume`).
#[must_use]
pub fn may_make_images(vmi: &VirtualMachineInstance) -> bool {
    vmi.spec.volumes.iter().any(|v| {
        v.host_disk.as_ref().is_some_and(|h| h.disk_type == "DiskOrCreate")
            || v.persistent_volume_claim.is_some()
            || v.data_volume.is_some()
    })
}

/// What [`prepare`] did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Prepared {
    /// The images, as the handler reached them.
    pub images: Vec<PathBuf>,
    /// A claim's image made smaller than asked, within the toleration: upstream's
    /// `ToleratedSmallPV` event message for each.
    pub tolerated: Vec<String>,
}

/// How large a missing image is made.
#[derive(Clone, Copy, Debug)]
enum ImageSize {
    /// A hostDisk's capacity.
    Exactly(i64),
    /// A claim's size, shrunk to what the volume has within the toleration.
    Claim(i64),
}

/// Creates the missing `DiskOrCreate` and filesystem-claim images of `vmi` under the launcher's
/// root `root`, and gives every such image to `owner` (uid and gid). An image is made under a
/// staging name, sized, and given its own name only when it is complete, so a failure or a crash
/// never leaves a short image that a later attempt would take for the user's.
///
/// # Errors
/// [`HostDiskError`] naming the field and the path.
pub fn prepare(root: &Path, vmi: &VirtualMachineInstance, owner: u32) -> Result<Prepared, HostDiskError> {
    let mut prepared = Prepared::default();
    let mut root_dir = None;
    for (index, volume) in vmi.spec.volumes.iter().enumerate() {
        let found = match host_disk_image(root, index, volume)? {
            Some(found) => Some(found),
            None => claim_images::claim_image(root, vmi, index, volume)?,
        };
        let Some((image, size)) = found else {
            continue;
        };
        if root_dir.is_none() {
            let opened = open(
                root,
                OFlag::O_DIRECTORY | OFlag::O_PATH | OFlag::O_CLOEXEC,
                Mode::empty(),
            )
            .map_err(|source| HostDiskError::Root {
                path: root.to_owned(),
                source,
            })?;
            root_dir = Some(opened);
        }
        // Upstream gives away only what it makes, except an unprivileged launcher's hostDisk
        // images, which are the launcher's to open whoever made them.
        let give_existing = matches!(size, ImageSize::Exactly(_)) && owner != 0;
        if let Some(root_dir) = &root_dir
            && let Some(note) = image.prepare(root_dir, size, owner, give_existing)?
        {
            prepared.tolerated.push(note);
        }
        prepared.images.push(image.shown());
    }
    Ok(prepared)
}

/// A `DiskOrCreate` hostDisk's image and capacity.
fn host_disk_image(
    root: &Path,
    index: usize,
    volume: &kubevirt_api::v1::Volume,
) -> Result<Option<(Image, ImageSize)>, HostDiskError> {
    let Some(host) = &volume.host_disk else {
        return Ok(None);
    };
    if host.disk_type != "DiskOrCreate" {
        return Ok(None);
    }
    let field = format!("spec.volumes[{index}].hostDisk");
    let capacity = host
        .capacity
        .as_ref()
        .ok_or_else(|| "DiskOrCreate needs a capacity".to_owned())
        .and_then(|c| kubevirt_api::quantity::to_bytes(c).map_err(|e| e.to_string()))
        .and_then(|bytes| i64::try_from(bytes).map_err(|_| format!("{bytes} bytes is too large for a file")))
        .map_err(|message| HostDiskError::Capacity {
            field: format!("{field}.capacity"),
            message,
        })?;
    let image = Image {
        field: format!("{field}.path"),
        node: host.path.clone(),
        dir: PathBuf::from(volume_dir_in_pod(&volume.name)),
        name: Path::new(&host.path)
            .file_name()
            .map(ToOwned::to_owned)
            .ok_or_else(|| HostDiskError::NotAFile {
                field: format!("{field}.path"),
                node: host.path.clone(),
                path: PathBuf::from(&host.path),
                what: "a directory",
            })?,
        root: root.to_owned(),
    };
    Ok(Some((image, ImageSize::Exactly(capacity))))
}

/// One `DiskOrCreate` image: where the VMI and the pod put it.
struct Image {
    field: String,
    node: String,
    /// Its directory in the pod (the volume's mount).
    dir: PathBuf,
    /// Its name in that directory.
    name: std::ffi::OsString,
    /// The launcher's root, as the handler reaches it.
    root: PathBuf,
}

impl Image {
    /// The image, as the handler reaches it.
    fn shown(&self) -> PathBuf {
        self.root
            .join(self.dir.strip_prefix("/").unwrap_or(&self.dir))
            .join(&self.name)
    }

    fn io(&self, action: &'static str) -> impl FnOnce(nix::Error) -> HostDiskError + '_ {
        move |source| HostDiskError::Io {
            field: self.field.clone(),
            node: self.node.clone(),
            action,
            path: self.shown(),
            source,
        }
    }

    /// Creates the image when it is missing and gives it to `owner`, and gives an existing one
    /// too when `give_existing`; says so when a claim's image was made smaller than asked.
    fn prepare(
        &self,
        root: &OwnedFd,
        size: ImageSize,
        owner: u32,
        give_existing: bool,
    ) -> Result<Option<String>, HostDiskError> {
        // The volume's directory, every link on the way resolved inside the launcher's root.
        let how = OpenHow::new()
            .flags(OFlag::O_DIRECTORY | OFlag::O_PATH | OFlag::O_CLOEXEC)
            .resolve(ResolveFlag::RESOLVE_IN_ROOT | ResolveFlag::RESOLVE_NO_MAGICLINKS);
        let dir = openat2(root, &self.dir, how).map_err(self.io("open the directory of"))?;
        let (uid, gid) = (Some(Uid::from_raw(owner)), Some(Gid::from_raw(owner)));
        if !give_existing {
            // Whatever is there is the user's, and left as it is.
            match openat(
                &dir,
                self.name.as_os_str(),
                OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
                Mode::empty(),
            ) {
                Ok(_) => return Ok(None),
                Err(Errno::ENOENT) => {}
                Err(e) => return Err(self.io("open")(e)),
            }
        } else if let Some(image) = self.existing(&dir)? {
            // Given away through a descriptor that only names it: never opened for reading or
            // writing, so opening has no effect, whatever the file is.
            return fchownat(&image, "", uid, gid, AtFlags::AT_EMPTY_PATH)
                .map_err(self.io("give away"))
                .map(|()| None);
        }
        let (capacity, note) = match size {
            ImageSize::Exactly(capacity) => (capacity, None),
            ImageSize::Claim(wanted) => {
                let available = claim_images::available_bytes(&dir).map_err(self.io("measure the volume of"))?;
                claim_images::fit(wanted, available, &self.node).map_err(|message| HostDiskError::Space {
                    field: self.field.clone(),
                    message,
                })?
            }
        };
        self.create(&dir, capacity, uid, gid).map(|()| note)
    }

    /// The image, if it is there: a regular file with one name, opened without following a link.
    fn existing(&self, dir: &OwnedFd) -> Result<Option<OwnedFd>, HostDiskError> {
        let image = match openat(
            dir,
            self.name.as_os_str(),
            OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        ) {
            Ok(image) => image,
            Err(Errno::ENOENT) => return Ok(None),
            Err(e) => return Err(self.io("open")(e)),
        };
        let stat = fstat(&image).map_err(self.io("inspect"))?;
        let what = match SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT {
            SFlag::S_IFREG if stat.st_nlink == 1 => return Ok(Some(image)),
            SFlag::S_IFREG => "a file with other names (hard links)",
            SFlag::S_IFLNK => "a symbolic link",
            SFlag::S_IFDIR => "a directory",
            _ => "a device, pipe or socket",
        };
        Err(HostDiskError::NotAFile {
            field: self.field.clone(),
            node: self.node.clone(),
            path: self.shown(),
            what,
        })
    }

    /// Makes the image under a staging name (replacing a stale one), sizes it, gives it away and
    /// only then gives it its own name; removes the staging file when a step fails.
    fn create(&self, dir: &OwnedFd, capacity: i64, uid: Option<Uid>, gid: Option<Gid>) -> Result<(), HostDiskError> {
        let mut staging = self.name.clone();
        staging.push(STAGING);
        let staging = PathBuf::from(staging);
        let _ = unlinkat(dir, &staging, UnlinkatFlags::NoRemoveDir);
        let mode = Mode::from_bits_truncate(0o660);
        let flags = OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_RDWR | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let file = openat(dir, &staging, flags, mode).map_err(self.io("create"))?;
        let outcome = fchmod(&file, mode)
            .and_then(|()| ftruncate(&file, capacity))
            .and_then(|()| fchown(&file, uid, gid))
            .map_err(self.io("size and give away"))
            .and_then(|()| {
                renameat2(dir, &staging, dir, self.name.as_os_str(), RenameFlags::RENAME_NOREPLACE)
                    .map_err(self.io("name"))
            });
        if outcome.is_err() {
            let _ = unlinkat(dir, &staging, UnlinkatFlags::NoRemoveDir);
        }
        outcome
    }
}

mod claim_images;
#[cfg(test)]
mod tests;
