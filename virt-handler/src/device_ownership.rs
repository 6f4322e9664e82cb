//! An unprivileged launcher's devices. The container runtime creates the device nodes a pod gets
//! (from the device plugins) with the host's owner and mode, so a launcher running as uid 107
//! could not open `/dev/kvm` or `/dev/net/tun`. Before the launcher's first Sync, virt-handler gives
//! them to the launcher's user inside the pod's own `/dev` (reached through `/proc/<pid>/root`),
//! as upstream's virt-handler does. The host's nodes are not touched.
//!
//! The walk never follows a symlink: a directory or device replaced by a link inside the pod is
//! skipped, so nothing outside the pod's `/dev` can be given away.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use nix::fcntl::{AtFlags, OFlag, open, openat};
use nix::sys::stat::{Mode, SFlag, fstatat};
use nix::unistd::{Gid, Uid, fchownat};

/// The devices a launcher uses, relative to its `/dev`.
pub const LAUNCHER_DEVICES: [&str; 3] = ["kvm", "net/tun", "vhost-net"];

/// Why a device could not be given to the launcher's user.
#[derive(Debug, thiserror::Error)]
#[error("cannot give {path} to uid {owner}")]
pub struct DeviceOwnershipError {
    /// The device, as the handler reached it.
    pub path: PathBuf,
    /// The launcher's uid.
    pub owner: u32,
    /// Why.
    pub source: nix::Error,
}

/// Opens the directory `path` under `parent` without following a symlink; with no parent, opens
/// `path` itself, following it (`/proc/<pid>/root` is a link to the launcher's root).
fn directory(parent: Option<&OwnedFd>, path: &Path) -> nix::Result<OwnedFd> {
    let flags = OFlag::O_DIRECTORY | OFlag::O_CLOEXEC | OFlag::O_RDONLY;
    match parent {
        Some(parent) => openat(parent, path, flags | OFlag::O_NOFOLLOW, Mode::empty()),
        None => open(path, flags, Mode::empty()),
    }
}

/// Gives the character devices of [`LAUNCHER_DEVICES`] under `root/dev` (a launcher's root,
/// `/proc/<pid>/root`) to `owner` (uid and gid). Returns the devices given; a device the pod does
/// not have, or that is not a character device, is skipped.
///
/// # Errors
/// [`DeviceOwnershipError`] when `root/dev` cannot be opened as a directory (without following a
/// link at `dev`), or a device that is there cannot be given.
pub fn claim_launcher_devices(root: &Path, owner: u32) -> Result<Vec<&'static str>, DeviceOwnershipError> {
    let dev = launcher_dev(root, owner)?;
    let mut claimed = Vec::new();
    for device in LAUNCHER_DEVICES {
        let subdir;
        let (dir, name) = match device.rsplit_once('/') {
            Some((parent, name)) => match directory(Some(&dev), Path::new(parent)) {
                Ok(opened) => {
                    subdir = opened;
                    (&subdir, name)
                }
                Err(_) => continue,
            },
            None => (&dev, device),
        };
        if give(dir, name, SFlag::S_IFCHR, owner).map_err(|source| DeviceOwnershipError {
            path: root.join("dev").join(device),
            owner,
            source,
        })? {
            claimed.push(device);
        }
    }
    Ok(claimed)
}

/// Gives the block devices of the VMI's block-mode claims, `/dev/<volume>` under `root` (where the
/// kubelet puts a claim's `volumeDevices`), to `owner`, as upstream's virt-handler does for an
/// unprivileged launcher. A volume without such a block device (a filesystem claim, or any other
/// kind) is skipped. Returns the volumes given.
///
/// # Errors
/// As [`claim_launcher_devices`].
pub fn claim_block_volumes(
    root: &Path,
    vmi: &kubevirt_api::v1::VirtualMachineInstance,
    owner: u32,
) -> Result<Vec<String>, DeviceOwnershipError> {
    let dev = launcher_dev(root, owner)?;
    let mut claimed = Vec::new();
    for volume in &vmi.spec.volumes {
        let is_claim =
            volume.persistent_volume_claim.is_some() || volume.data_volume.is_some() || volume.ephemeral.is_some();
        // A volume's name is a DNS label; anything else never names a device here.
        if !is_claim || volume.name.is_empty() || volume.name.contains('/') || volume.name.starts_with('.') {
            continue;
        }
        if give(&dev, &volume.name, SFlag::S_IFBLK, owner).map_err(|source| DeviceOwnershipError {
            path: root.join("dev").join(&volume.name),
            owner,
            source,
        })? {
            claimed.push(volume.name.clone());
        }
    }
    Ok(claimed)
}

/// The launcher's `/dev`. A launcher always has one: not reaching it (the launcher gone, or a
/// link in its place) is an error, so the claim is tried again rather than taken as done.
fn launcher_dev(root: &Path, owner: u32) -> Result<OwnedFd, DeviceOwnershipError> {
    directory(None, root)
        .and_then(|root_dir| directory(Some(&root_dir), Path::new("dev")))
        .map_err(|source| DeviceOwnershipError {
            path: root.join("dev"),
            owner,
            source,
        })
}

/// Gives `name` in `dir` to `owner` when it is a device of `kind` (never following a link);
/// whether it was.
fn give(dir: &OwnedFd, name: &str, kind: SFlag, owner: u32) -> nix::Result<bool> {
    let Ok(stat) = fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW) else {
        return Ok(false);
    };
    if SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT != kind {
        return Ok(false);
    }
    fchownat(
        dir,
        name,
        Some(Uid::from_raw(owner)),
        Some(Gid::from_raw(owner)),
        AtFlags::AT_SYMLINK_NOFOLLOW,
    )?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::MetadataExt as _;

    use nix::sys::stat::{makedev, mknod};

    use super::*;

    fn char_device(path: &Path) {
        std::fs::create_dir_all(path.parent().expect("parent")).expect("dir");
        // The memory device "null" (1, 3): any character device will do.
        mknod(path, SFlag::S_IFCHR, Mode::from_bits_truncate(0o600), makedev(1, 3)).expect("mknod (needs root)");
    }

    #[test]
    #[cfg_attr(
        not(feature = "host-tests"),
        ignore = "needs root: make test runs it (feature host-tests)"
    )]
    fn the_pods_devices_become_the_launchers_and_links_are_never_followed() {
        let pod = tempfile::tempdir().expect("tempdir");
        let outside = tempfile::tempdir().expect("tempdir");
        let bystander = outside.path().join("host-file");
        std::fs::write(&bystander, b"").expect("file");
        char_device(&pod.path().join("dev/kvm"));
        char_device(&pod.path().join("dev/net/tun"));
        std::os::unix::fs::symlink(&bystander, pod.path().join("dev/vhost-net")).expect("link");

        // Reached as virt-handler reaches a pod: through a link to its root.
        let root_link = outside.path().join("root");
        std::os::unix::fs::symlink(pod.path(), &root_link).expect("root link");
        let claimed = claim_launcher_devices(&root_link, 107).expect("claimed");
        assert_eq!(claimed, ["kvm", "net/tun"]);
        for device in ["dev/kvm", "dev/net/tun"] {
            let meta = std::fs::symlink_metadata(pod.path().join(device)).expect("device");
            assert_eq!((meta.uid(), meta.gid()), (107, 107), "{device}");
        }
        let target = std::fs::metadata(&bystander).expect("target");
        assert_eq!(target.uid(), 0, "a link's target is never given away");
    }

    #[test]
    #[cfg_attr(
        not(feature = "host-tests"),
        ignore = "needs root: make test runs it (feature host-tests)"
    )]
    fn a_dev_that_is_a_link_or_missing_is_an_error_and_gives_nothing() {
        let pod = tempfile::tempdir().expect("tempdir");
        let outside = tempfile::tempdir().expect("tempdir");
        char_device(&outside.path().join("kvm"));
        let missing = claim_launcher_devices(pod.path(), 107).expect_err("no /dev");
        assert!(missing.to_string().contains("dev"), "{missing}");
        std::os::unix::fs::symlink(outside.path(), pod.path().join("dev")).expect("link");
        claim_launcher_devices(pod.path(), 107).expect_err("a link in place of /dev");
        let meta = std::fs::metadata(outside.path().join("kvm")).expect("device");
        assert_eq!(meta.uid(), 0);
        let empty = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(empty.path().join("dev")).expect("an empty /dev");
        assert_eq!(
            claim_launcher_devices(empty.path(), 107).expect("nothing"),
            Vec::<&str>::new()
        );
    }

    #[test]
    #[cfg_attr(
        not(feature = "host-tests"),
        ignore = "needs root: make test runs it (feature host-tests)"
    )]
    fn block_claims_become_the_launchers_and_nothing_else_does() {
        let pod = tempfile::tempdir().expect("tempdir");
        let outside = tempfile::tempdir().expect("tempdir");
        let dev = pod.path().join("dev");
        std::fs::create_dir(&dev).expect("dev");
        // The loop device "loop0" (7, 0) as a node: nothing opens it.
        let block = |name: &str| {
            mknod(
                &dev.join(name),
                SFlag::S_IFBLK,
                Mode::from_bits_truncate(0o600),
                makedev(7, 0),
            )
            .expect("mknod (needs root)");
        };
        block("fast");
        block("imported");
        block("scratch");
        char_device(&dev.join("home"));
        let bystander = outside.path().join("host-disk");
        std::fs::write(&bystander, b"").expect("file");
        std::os::unix::fs::symlink(&bystander, dev.join("linked")).expect("link");
        let vmi: kubevirt_api::v1::VirtualMachineInstance = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "vmi"},
            "spec": {"domain": {"devices": {}}, "volumes": [
                {"name": "fast", "persistentVolumeClaim": {"claimName": "a"}},
                {"name": "imported", "dataVolume": {"name": "b"}},
                {"name": "home", "persistentVolumeClaim": {"claimName": "c"}},
                {"name": "linked", "persistentVolumeClaim": {"claimName": "d"}},
                {"name": "missing", "persistentVolumeClaim": {"claimName": "e"}},
                {"name": "scratch", "emptyDisk": {"capacity": "1Gi"}}
            ]}
        }))
        .expect("VMI");
        let claimed = claim_block_volumes(pod.path(), &vmi, 107).expect("claimed");
        assert_eq!(claimed, ["fast", "imported"]);
        let owner = |name: &str| std::fs::symlink_metadata(dev.join(name)).expect("node").uid();
        assert_eq!((owner("fast"), owner("imported")), (107, 107));
        assert_eq!(owner("home"), 0, "a character device is no claim's");
        assert_eq!(owner("scratch"), 0, "not a claim's volume");
        assert_eq!(
            std::fs::metadata(&bystander).expect("target").uid(),
            0,
            "a link is never followed"
        );
    }
}
