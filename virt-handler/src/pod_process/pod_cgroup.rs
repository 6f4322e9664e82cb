//! A cgroup named as the kubelet names a pod's, standing in for a pod in tests that run launchers
//! outside Kubernetes (feature `testing`): virt-handler trusts a launcher only inside its pod's
//! cgroup ([`super::PodProcess`]).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

/// Tells the cgroups of one test process apart.
static NEXT: AtomicU32 = AtomicU32::new(0);

/// A cgroup `kubevirt-rs-test-<pid>-<n>/pod<uid>` in the `pids` hierarchy (cgroup v1) or the
/// unified one (v2). Dropping it moves whatever still runs in it back to the cgroup this test
/// process runs in, and removes it. Creating it needs root, as the suite does.
#[derive(Debug)]
pub struct PodCgroup {
    /// The test process's own cgroup in the same hierarchy.
    home: PathBuf,
    dir: PathBuf,
}

impl PodCgroup {
    /// Creates the cgroup of the pod whose UID is `pod_uid`.
    ///
    /// # Errors
    /// The I/O error, naming the file or directory.
    pub fn create(pod_uid: &str) -> std::io::Result<Self> {
        let named = |path: &Path| {
            let path = path.to_owned();
            move |e: std::io::Error| std::io::Error::new(e.kind(), format!("{}: {e}", path.display()))
        };
        let unified = Path::new("/sys/fs/cgroup/cgroup.controllers").exists();
        let (hierarchy, controller) = if unified {
            (PathBuf::from("/sys/fs/cgroup"), "")
        } else {
            (PathBuf::from("/sys/fs/cgroup/pids"), "pids")
        };
        let own = Path::new("/proc/self/cgroup");
        let text = std::fs::read_to_string(own).map_err(named(own))?;
        let home = text
            .lines()
            .filter_map(|line| line.splitn(3, ':').skip(1).collect::<Vec<_>>().try_into().ok())
            .find_map(|[controllers, path]: [&str; 2]| {
                controllers
                    .split(',')
                    .any(|c| c == controller)
                    .then(|| hierarchy.join(path.trim_start_matches('/')))
            })
            .unwrap_or_else(|| hierarchy.clone());
        let parent = format!(
            "kubevirt-rs-test-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let dir = hierarchy.join(parent).join(format!("pod{pod_uid}"));
        std::fs::create_dir_all(&dir).map_err(named(&dir))?;
        Ok(Self { home, dir })
    }

    /// Moves process `pid` (all its threads) into the cgroup; what it starts from then on is in
    /// it too.
    ///
    /// # Errors
    /// The I/O error, naming the cgroup.
    pub fn add(&self, pid: u32) -> std::io::Result<()> {
        let procs = self.dir.join("cgroup.procs");
        std::fs::write(&procs, pid.to_string())
            .map_err(|e| std::io::Error::new(e.kind(), format!("adding {pid} to {}: {e}", procs.display())))
    }
}

impl Drop for PodCgroup {
    fn drop(&mut self) {
        let remaining = std::fs::read_to_string(self.dir.join("cgroup.procs")).unwrap_or_default();
        for pid in remaining.lines() {
            let _ = std::fs::write(self.home.join("cgroup.procs"), pid);
        }
        let _ = std::fs::remove_dir(&self.dir);
        if let Some(parent) = self.dir.parent() {
            let _ = std::fs::remove_dir(parent);
        }
    }
}
