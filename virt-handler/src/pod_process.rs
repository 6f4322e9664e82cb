//! The process behind a socket in a pod's volume, checked to run in that pod and held so that its
//! pid cannot change hands.
//!
//! virt-handler finds a launcher, or a containerDisk sidecar, through the socket it listens on in
//! its pod's volume: the socket's peer credentials name the pid that listened. Then virt-handler
//! acts as root through that pid: it wires the pod network in its network namespace, gives devices
//! to the launcher's user under its root, and mounts images from a sidecar's root. The pid alone
//! is not enough to do that safely. The process that listened may have exited, or a process of
//! the pod may have passed the socket to another one, and the pid may belong by now to a process
//! of another pod or of the node itself. Acting on that would give a pod, whose QEMU could be
//! compromised, root's help outside its own pod.
//!
//! So [`PodProcess::open`] opens the process's `/proc` directory first, and then checks through
//! that open directory that the process's cgroups are its pod's. The open directory stays tied to
//! that one process: once it exits, every path under it fails, even if its pid is given to a new
//! process. virt-handler reaches the namespace and the root through the held descriptor
//! ([`PodProcess::net_namespace`], [`PodProcess::root`]), never through the pid again.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// Why a socket's process could not be trusted as its pod's.
#[derive(Debug, thiserror::Error)]
pub enum PodProcessError {
    /// The process's `/proc` directory or its cgroups cannot be read (it may have exited).
    #[error("cannot read {path}: {source}")]
    Read {
        /// What was read.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The process is in the pod's cgroup but shares its mount namespace with the node or the
    /// handler.
    #[error("process {pid} shares its mount namespace with {shared_with}, so it is not inside its pod")]
    NodeNamespace {
        /// The pid the socket named.
        pid: i32,
        /// `the node` or `virt-handler`.
        shared_with: &'static str,
    },
    /// The process runs outside the pod.
    #[error("process {pid} does not run in pod {pod}: its cgroups are {cgroups:?}")]
    NotInPod {
        /// The pid the socket named.
        pid: i32,
        /// The pod's UID.
        pod: String,
        /// The process's cgroup paths.
        cgroups: Vec<String>,
    },
}

/// A process checked to run in a given pod, held through its open `/proc` directory.
#[derive(Debug)]
pub struct PodProcess {
    pid: i32,
    dir: File,
}

impl PodProcess {
    /// Opens process `pid` under `proc` (`/proc` outside tests) and checks that it runs in the pod
    /// whose UID is `pod_uid`, in a mount namespace of its own, as every container has: not the
    /// node's (pid 1's) nor this handler's. A pod's cgroup can hold processes that are not inside
    /// the pod: CRI-O can put its `conmon` there, which runs in the node's namespaces, and `runc`
    /// joins a container's cgroup before its namespaces when it starts a process there. Two
    /// processes share a mount namespace exactly when their mount tables list the same mounts:
    /// every mount has an ID of its own, and a new namespace gets copies with new IDs. The mount
    /// table is compared rather than the `ns/mnt` link because the link of a process that is
    /// not dumpable cannot be read even by root in some sandboxes, whereas its mount table can.
    ///
    /// # Errors
    /// [`PodProcessError::Read`] when the process is gone or its cgroups or namespaces cannot be
    /// read, [`PodProcessError::NotInPod`] when its cgroups are not the pod's, and
    /// [`PodProcessError::NodeNamespace`] when it shares its mount namespace with the node or the
    /// handler.
    pub fn open(proc: &Path, pid: i32, pod_uid: &str) -> Result<Self, PodProcessError> {
        let read_error = |path: PathBuf| move |source| PodProcessError::Read { path, source };
        let shown = proc.join(pid.to_string());
        let dir = File::open(&shown).map_err(read_error(shown.clone()))?;
        let process = Self { pid, dir };
        let text = std::fs::read_to_string(process.path().join("cgroup")).map_err(read_error(shown.join("cgroup")))?;
        if !runs_in_pod(&text, pod_uid) {
            return Err(PodProcessError::NotInPod {
                pid,
                pod: pod_uid.to_owned(),
                cgroups: cgroup_paths(&text).map(str::to_owned).collect(),
            });
        }
        let first_mount = |mountinfo: &Path, shown: PathBuf| {
            let text = std::fs::read_to_string(mountinfo).map_err(read_error(shown.clone()))?;
            first_mount_id(&text).ok_or_else(|| PodProcessError::Read {
                path: shown,
                source: std::io::Error::new(std::io::ErrorKind::InvalidData, "no mount listed"),
            })
        };
        let own = first_mount(&process.mountinfo(), shown.join("mountinfo"))?;
        for (other, who) in [("1", "the node"), ("self", "virt-handler")] {
            let path = proc.join(other).join("mountinfo");
            if first_mount(&path, path.clone())? == own {
                return Err(PodProcessError::NodeNamespace { pid, shared_with: who });
            }
        }
        Ok(process)
    }

    /// The pid the socket named.
    #[must_use]
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// The process's `/proc` directory, reached through the held descriptor. The path names this
    /// handler's pid rather than `/proc/self`, so a command virt-handler starts (`nsenter`) can
    /// use it too, for as long as this value lives.
    #[must_use]
    pub fn path(&self) -> PathBuf {
        PathBuf::from(format!("/proc/{}/fd/{}", std::process::id(), self.dir.as_raw_fd()))
    }

    /// The process's network namespace.
    #[must_use]
    pub fn net_namespace(&self) -> PathBuf {
        self.path().join("ns/net")
    }

    /// The process's root directory.
    #[must_use]
    pub fn root(&self) -> PathBuf {
        self.path().join("root")
    }

    /// The process's mount table.
    #[must_use]
    pub fn mountinfo(&self) -> PathBuf {
        self.path().join("mountinfo")
    }
}

/// Whether the cgroups listed in `cgroup` (the text of `/proc/<pid>/cgroup`) are those of the pod
/// whose UID is `pod_uid`: at least one of them names that pod, and none names another pod. The
/// kubelet names a pod's cgroup `pod<uid>` with the cgroupfs driver and
/// `kubepods-<class>-pod<uid with '_' for '-'>.slice` with the systemd driver, under cgroup v1
/// and v2 alike; a cgroup namespace only shortens the path before it (or adds `..`).
#[must_use]
pub fn runs_in_pod(cgroup: &str, pod_uid: &str) -> bool {
    let mut named = cgroup_paths(cgroup)
        .flat_map(|path| path.split('/'))
        .filter_map(pod_named_by);
    let mut any = false;
    named.all(|uid| {
        any = true;
        uid == pod_uid
    }) && any
}

/// The ID of the first mount in the text of `/proc/<pid>/mountinfo`.
fn first_mount_id(mountinfo: &str) -> Option<u64> {
    mountinfo.split_whitespace().next()?.parse().ok()
}

/// The paths in the text of `/proc/<pid>/cgroup` (`hierarchy:controllers:path` per line).
fn cgroup_paths(cgroup: &str) -> impl Iterator<Item = &str> {
    cgroup
        .lines()
        .filter_map(|line| line.splitn(3, ':').nth(2))
        .filter(|path| !path.is_empty())
}

/// The pod UID a cgroup path component names, if it names one.
fn pod_named_by(component: &str) -> Option<String> {
    let cgroupfs = component.strip_prefix("pod");
    let systemd = component
        .strip_suffix(".slice")
        .and_then(|slice| slice.rsplit_once("-pod"))
        .map(|(_, uid)| uid);
    cgroupfs
        .filter(|uid| is_uid(uid, '-'))
        .map(str::to_owned)
        .or_else(|| systemd.filter(|uid| is_uid(uid, '_')).map(|uid| uid.replace('_', "-")))
}

/// Whether `text` has the shape of a Kubernetes UID (8-4-4-4-12 hexadecimal digits) with
/// `separator` between the groups.
fn is_uid(text: &str, separator: char) -> bool {
    let groups: Vec<&str> = text.split(separator).collect();
    groups.len() == 5
        && groups
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(group, len)| group.len() == len && group.chars().all(|c| c.is_ascii_hexdigit()))
}

#[cfg(any(test, feature = "testing"))]
pub mod pod_cgroup;

#[cfg(test)]
mod tests;
