//! A cgroup named as the kubelet names a pod's, standing in for a pod in tests that run launchers
//! outside Kubernetes (feature `testing`): virt-handler trusts a launcher only inside its pod's
//! cgroup ([`super::PodProcess`]).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

/// Tells the cgroups of one test process apart.
static NEXT: AtomicU32 = AtomicU32::new(0);

/// A cgroup `kubevirt-rs-test-<pid>-<n>/pod<uid>` in the `pids` hierarchy (cgroup v1) or the
/// unified one (v2). Dropping it moves whatever still runs in it back to the hierarchy's root and
/// removes it. Creating it needs root, as the suite does.
#[derive(Debug)]
pub struct PodCgroup {
    hierarchy: PathBuf,
    dir: PathBuf,
}

impl PodCgroup {
    /// Creates the cgroup of the pod whose UID is `pod_uid`.
    ///
    /// # Errors
    /// The I/O error naming the directory that could not be made.
    pub fn create(pod_uid: &str) -> std::io::Result<Self> {
        let hierarchy = if Path::new("/sys/fs/cgroup/cgroup.controllers").exists() {
            PathBuf::from("/sys/fs/cgroup")
        } else {
            PathBuf::from("/sys/fs/cgroup/pids")
        };
        let parent = format!(
            "kubevirt-rs-test-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let dir = hierarchy.join(parent).join(format!("pod{pod_uid}"));
        std::fs::create_dir_all(&dir)
            .map_err(|e| std::io::Error::new(e.kind(), format!("creating {}: {e}", dir.display())))?;
        Ok(Self { hierarchy, dir })
    }

    /// Moves process `pid` (all its threads) into the cgroup; what it starts from then on is in
    /// it too.
    ///
    /// # Errors
    /// The I/O error of the write.
    pub fn add(&self, pid: u32) -> std::io::Result<()> {
        std::fs::write(self.dir.join("cgroup.procs"), pid.to_string())
    }
}

impl Drop for PodCgroup {
    fn drop(&mut self) {
        let remaining = std::fs::read_to_string(self.dir.join("cgroup.procs")).unwrap_or_default();
        for pid in remaining.lines() {
            let _ = std::fs::write(self.hierarchy.join("cgroup.procs"), pid);
        }
        let _ = std::fs::remove_dir(&self.dir);
        if let Some(parent) = self.dir.parent() {
            let _ = std::fs::remove_dir(parent);
        }
    }
}
