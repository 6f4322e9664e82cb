//! Mounts in the node's mount namespace, where the kubelet and the container runtime mount pod
//! volumes and container root file systems. virt-handler runs in a pod of its own, and the kernel
//! bind-mounts only within one namespace, so each mount is made by a short-lived copy of this
//! binary that enters the node's namespace first ([`crate::mount_helper`], as upstream's
//! `virt-chroot`).
//!
//! [`NodeMounts`] is the seam: [`HostMounts`] is the real adapter, and the tests use a recording
//! fake. The parsing of `/proc/<pid>/mountinfo` is pure and tested here.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt as _;
use std::path::{Path, PathBuf};

use crate::mount_helper::HELPER_COMMAND;
use crate::pod_process::PodProcess;

/// Why a mount could not be made or read.
#[derive(Debug, thiserror::Error)]
pub enum MountError {
    /// Reading a process's files failed.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A container's root file system is not mounted in the node's namespace.
    #[error("the root file system of process {pid} is not mounted in the node's mount namespace")]
    RootNotFound {
        /// The container's process.
        pid: i32,
    },
    /// The helper failed.
    #[error("mounting in the node's namespace failed ({what} {target}): {message}")]
    Helper {
        /// `bind` or `unmount`.
        what: &'static str,
        /// The mount point.
        target: PathBuf,
        /// The helper's message.
        message: String,
    },
}

/// The node's mounts, as virt-handler uses them.
pub trait NodeMounts: Send + Sync + 'static {
    /// Where the root file system of `process` is mounted in the node's namespace.
    ///
    /// # Errors
    /// [`MountError`] when the process or the node's mount table cannot be read, or the root is
    /// not there.
    fn root_in_node(&self, process: &PodProcess) -> Result<PathBuf, MountError>;
    /// Bind-mounts the file `file` of the container root `root` onto `target` under `dir`,
    /// read-only; `root` and `dir` as the node sees them, `file` and `target` within them, each
    /// reached without following a symbolic link (both are under a pod's control).
    ///
    /// # Errors
    /// [`MountError::Helper`] with the reason.
    fn bind_read_only(&self, root: &Path, file: &Path, dir: &Path, target: &Path) -> Result<(), MountError>;
    /// Unmounts `target` (lazily: a file QEMU still holds stays usable to it).
    ///
    /// # Errors
    /// [`MountError::Helper`] with the kernel's message.
    fn unmount(&self, target: &Path) -> Result<(), MountError>;
    /// The node's mount points under `dir`, deepest first.
    ///
    /// # Errors
    /// [`MountError::Read`] when the node's mount table cannot be read.
    fn mounted_under(&self, dir: &Path) -> Result<Vec<PathBuf>, MountError>;
}

/// The real node: its mount namespace and mount table are those of a process in it (PID 1 from a
/// pod with `hostPID`, as upstream assumes).
#[derive(Clone, Debug)]
pub struct HostMounts {
    node_process: PathBuf,
    helper: PathBuf,
}

impl HostMounts {
    /// The node of `node_process` (`/proc/1`); mounts are made by running `helper` (this binary).
    #[must_use]
    pub fn new(node_process: &Path, helper: &Path) -> Self {
        Self {
            node_process: node_process.to_owned(),
            helper: helper.to_owned(),
        }
    }

    fn read(path: &Path) -> Result<String, MountError> {
        std::fs::read_to_string(path).map_err(|source| MountError::Read {
            path: path.to_owned(),
            source,
        })
    }

    fn node_mountinfo(&self) -> Result<String, MountError> {
        Self::read(&self.node_process.join("mountinfo"))
    }

    fn run(&self, what: &'static str, args: &[&std::ffi::OsStr], target: &Path) -> Result<(), MountError> {
        let output = std::process::Command::new(&self.helper)
            .arg(HELPER_COMMAND)
            .arg(self.node_process.join("ns/mnt"))
            .args(args)
            .output()
            .map_err(|e| MountError::Helper {
                what,
                target: target.to_owned(),
                message: format!("cannot run {}: {e}", self.helper.display()),
            })?;
        if output.status.success() {
            return Ok(());
        }
        Err(MountError::Helper {
            what,
            target: target.to_owned(),
            message: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        })
    }
}

impl NodeMounts for HostMounts {
    fn root_in_node(&self, process: &PodProcess) -> Result<PathBuf, MountError> {
        let own = Self::read(&process.mountinfo())?;
        find_root_in(&own, &self.node_mountinfo()?).ok_or(MountError::RootNotFound { pid: process.pid() })
    }

    fn bind_read_only(&self, root: &Path, file: &Path, dir: &Path, target: &Path) -> Result<(), MountError> {
        let args = [
            "bind".as_ref(),
            root.as_os_str(),
            file.as_os_str(),
            dir.as_os_str(),
            target.as_os_str(),
        ];
        self.run("bind", &args, &dir.join(target))
    }

    fn unmount(&self, target: &Path) -> Result<(), MountError> {
        self.run("unmount", &["unmount".as_ref(), target.as_os_str()], target)
    }

    fn mounted_under(&self, dir: &Path) -> Result<Vec<PathBuf>, MountError> {
        Ok(mount_points_under(&self.node_mountinfo()?, dir))
    }
}

/// One line of `/proc/<pid>/mountinfo`: the device, the root of the mount within its file system
/// and the mount point.
#[derive(Debug, PartialEq, Eq)]
struct MountLine {
    device: String,
    root: PathBuf,
    mount_point: PathBuf,
}

/// mountinfo writes space, tab, newline and backslash as `\ooo`.
fn unescape(field: &str) -> PathBuf {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .and_then(|d| std::str::from_utf8(d).ok().and_then(|d| u8::from_str_radix(d, 8).ok()));
        match (bytes[i], octal) {
            (b'\\', Some(byte)) => {
                out.push(byte);
                i += 4;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    PathBuf::from(OsString::from_vec(out))
}

fn parse_mountinfo(text: &str) -> Vec<MountLine> {
    text.lines()
        .filter_map(|line| {
            let mut fields = line.split(' ');
            let device = fields.nth(2)?;
            let root = fields.next()?;
            let mount_point = fields.next()?;
            Some(MountLine {
                device: device.to_owned(),
                root: unescape(root),
                mount_point: unescape(mount_point),
            })
        })
        .collect()
}

/// Where the file system a process sees as `/` (from its own mountinfo) is mounted in the node's
/// mountinfo: the mount of the same device and root. The last such mount is the visible one.
fn find_root_in(own: &str, node: &str) -> Option<PathBuf> {
    let root = parse_mountinfo(own)
        .into_iter()
        .rev()
        .find(|m| m.mount_point == Path::new("/"))?;
    parse_mountinfo(node)
        .into_iter()
        .rev()
        .find(|m| m.device == root.device && m.root == root.root)
        .map(|m| m.mount_point)
}

/// The mount points strictly under `dir`, deepest first, each once.
fn mount_points_under(node: &str, dir: &Path) -> Vec<PathBuf> {
    let mut points: Vec<PathBuf> = parse_mountinfo(node)
        .into_iter()
        .map(|m| m.mount_point)
        .filter(|p| p.starts_with(dir) && p != dir)
        .collect();
    points.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    points.dedup();
    points
}

#[cfg(any(test, feature = "testing"))]
pub mod fake {
    //! A node whose mounts are recorded, not made.

    use std::collections::BTreeMap;
    use std::path::{Path, PathBuf};
    use std::sync::{Mutex, PoisonError};

    use super::{MountError, NodeMounts, PodProcess};

    /// Roots by pid, and the bind mounts made (target -> source).
    #[derive(Debug, Default)]
    pub struct FakeMounts {
        /// Where each process's root is in the node.
        pub roots: BTreeMap<i32, PathBuf>,
        /// Bind mounts, by target.
        pub mounts: Mutex<BTreeMap<PathBuf, PathBuf>>,
    }

    impl FakeMounts {
        /// The bind mounts made so far.
        pub fn mounts(&self) -> BTreeMap<PathBuf, PathBuf> {
            self.mounts.lock().unwrap_or_else(PoisonError::into_inner).clone()
        }
    }

    impl NodeMounts for FakeMounts {
        fn root_in_node(&self, process: &PodProcess) -> Result<PathBuf, MountError> {
            let pid = process.pid();
            self.roots.get(&pid).cloned().ok_or(MountError::RootNotFound { pid })
        }

        fn bind_read_only(&self, root: &Path, file: &Path, dir: &Path, target: &Path) -> Result<(), MountError> {
            self.mounts
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(dir.join(target), root.join(file));
            Ok(())
        }

        fn unmount(&self, target: &Path) -> Result<(), MountError> {
            self.mounts
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(target);
            Ok(())
        }

        fn mounted_under(&self, dir: &Path) -> Result<Vec<PathBuf>, MountError> {
            Ok(self
                .mounts()
                .into_keys()
                .filter(|t| t.starts_with(dir) && t != dir)
                .collect())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SIDECAR: &str = "\
1520 1490 0:154 / / ro,relatime master:1 - overlay overlay rw,lowerdir=/var/lib/containerd/l1
1521 1520 0:156 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw
1530 1520 254:0 /var/lib/kubelet/pods/p/volumes/kubernetes.io~empty-dir/container-disks /var/run/kubevirt-ephemeral-disks/container-disk-data/u rw - ext4 /dev/vda rw
";

    const NODE: &str = "\
27 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw
600 27 0:150 / /run/containerd/io.containerd.runtime.v2.task/k8s.io/aaa/rootfs rw shared:300 - overlay overlay rw
610 27 0:154 / /run/containerd/io.containerd.runtime.v2.task/k8s.io/b\\040c/rootfs rw shared:310 - overlay overlay rw
700 27 254:0 /srv/x /var/lib/kubelet/pods/p/volumes/kubernetes.io~empty-dir/container-disks/disk_0.img ro shared:1 - ext4 /dev/vda rw
701 27 254:0 /srv/k /var/lib/kubelet/pods/p/volumes/kubernetes.io~empty-dir/container-disks/kernel-boot/vmlinuz ro shared:1 - ext4 /dev/vda rw
";

    #[test]
    fn a_container_root_is_found_in_the_node_by_device_and_root() {
        assert_eq!(
            find_root_in(SIDECAR, NODE),
            Some(PathBuf::from(
                "/run/containerd/io.containerd.runtime.v2.task/k8s.io/b c/rootfs"
            ))
        );
        let elsewhere = SIDECAR.replace("0:154", "0:999");
        assert_eq!(find_root_in(&elsewhere, NODE), None);
    }

    #[test]
    fn the_mounts_under_a_directory_come_deepest_first() {
        let dir = Path::new("/var/lib/kubelet/pods/p/volumes/kubernetes.io~empty-dir/container-disks");
        assert_eq!(
            mount_points_under(NODE, dir),
            vec![dir.join("kernel-boot/vmlinuz"), dir.join("disk_0.img")]
        );
        assert!(mount_points_under(NODE, Path::new("/var/lib/kubelet/pods/q")).is_empty());
    }

    #[test]
    fn escaped_characters_are_decoded_and_others_kept() {
        assert_eq!(unescape("/a\\040b\\011c\\\\d"), PathBuf::from("/a b\tc\\\\d"));
        assert_eq!(unescape("/a\\134b"), PathBuf::from("/a\\b"));
        assert_eq!(unescape("/tail\\04"), PathBuf::from("/tail\\04"));
    }
}
