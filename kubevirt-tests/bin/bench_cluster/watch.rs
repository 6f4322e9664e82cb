//! When each VMI was first seen in each phase, when its launcher pod was first seen bound to a
//! node, and when each launcher pod and each of the floor's plain pods (label
//! `kubevirt-rs.io/bench-floor`) was first seen in each phase (as `pod/<name>`): `kubectl get ...
//! -w -o json`, read as it streams, with the wall-clock time of each object's arrival.

use std::collections::BTreeMap;
use std::io::BufReader;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use anyhow::Context;
use serde_json::Value;

/// First sightings: VMI name -> phase ("" for created) -> when.
pub type Sightings = BTreeMap<String, BTreeMap<String, SystemTime>>;

/// Running watches of the default namespace's VMIs and launcher pods.
pub struct PhaseWatch {
    /// The watches, stopped when this is dropped.
    _children: Vec<WatchProcess>,
    seen: Arc<Mutex<Sightings>>,
    uids: Arc<Mutex<BTreeMap<String, String>>>,
    bound: Arc<Mutex<BTreeMap<String, SystemTime>>>,
    /// Launcher pod name by its VMI's UID.
    launchers: Arc<Mutex<BTreeMap<String, String>>>,
}

/// Records `object`'s phase as `pod/<name>` in `seen`, at `now`.
fn record_pod(seen: &Mutex<Sightings>, object: &Value, now: SystemTime) {
    let name = format!("pod/{}", object["metadata"]["name"].as_str().unwrap_or_default());
    let phase = object["status"]["phase"].as_str().unwrap_or_default().to_owned();
    let mut seen = seen.lock().unwrap_or_else(PoisonError::into_inner);
    let phases = seen.entry(name).or_default();
    phases.entry(String::new()).or_insert(now);
    phases.entry(phase).or_insert(now);
}

/// A `kubectl get -w` child, killed and reaped when dropped.
pub struct WatchProcess(Child);

impl WatchProcess {
    /// How the child ended, once it has (`None` while it runs).
    pub fn exit_status(&mut self) -> Option<std::process::ExitStatus> {
        self.0.try_wait().ok().flatten()
    }
}

impl Drop for WatchProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs `kubectl get <what> -n default -w -o json` and calls `record` with each object as it
/// arrives.
pub fn spawn_watch(
    kubectl: &Path,
    kubeconfig: &Path,
    args: &[&str],
    mut record: impl FnMut(&Value, SystemTime) + Send + 'static,
) -> anyhow::Result<WatchProcess> {
    let mut child = Command::new(kubectl)
        .env("KUBECONFIG", kubeconfig)
        .args(args)
        .args(["-n", "default", "-w", "-o", "json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("kubectl get -w")?;
    let stdout = child.stdout.take().context("watch stdout")?;
    std::thread::spawn(move || {
        let stream = serde_json::Deserializer::from_reader(BufReader::new(stdout)).into_iter::<Value>();
        for object in stream.map_while(Result::ok) {
            record(&object, SystemTime::now());
        }
    });
    Ok(WatchProcess(child))
}

impl PhaseWatch {
    /// Starts watching the VMIs and the launcher pods.
    pub fn start(kubectl: &Path, kubeconfig: &Path) -> anyhow::Result<Self> {
        let seen: Arc<Mutex<Sightings>> = Arc::default();
        let uids: Arc<Mutex<BTreeMap<String, String>>> = Arc::default();
        let bound: Arc<Mutex<BTreeMap<String, SystemTime>>> = Arc::default();
        let launchers: Arc<Mutex<BTreeMap<String, String>>> = Arc::default();
        let (seen_in, uids_in, bound_in) = (seen.clone(), uids.clone(), bound.clone());
        let (pods_seen, launchers_in, floor_seen) = (seen.clone(), launchers.clone(), seen.clone());
        let vmis = spawn_watch(kubectl, kubeconfig, &["get", "vmi"], move |object, now| {
            let name = object["metadata"]["name"].as_str().unwrap_or_default().to_owned();
            let phase = object["status"]["phase"].as_str().unwrap_or_default().to_owned();
            if let Some(uid) = object["metadata"]["uid"].as_str() {
                uids_in
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(name.clone(), uid.to_owned());
            }
            let mut seen = seen_in.lock().unwrap_or_else(PoisonError::into_inner);
            let phases = seen.entry(name).or_default();
            phases.entry(String::new()).or_insert(now);
            phases.entry(phase).or_insert(now);
        })?;
        let pods = spawn_watch(
            kubectl,
            kubeconfig,
            &["get", "pods", "-l", "kubevirt.io=virt-launcher"],
            move |object, now| {
                let vmi_uid = object["metadata"]["labels"]["kubevirt.io/created-by"]
                    .as_str()
                    .unwrap_or_default();
                record_pod(&pods_seen, object, now);
                if let Some(name) = object["metadata"]["name"].as_str() {
                    launchers_in
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .entry(vmi_uid.to_owned())
                        .or_insert_with(|| name.to_owned());
                }
                if object["spec"]["nodeName"].as_str().is_some_and(|n| !n.is_empty()) {
                    bound_in
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .entry(vmi_uid.to_owned())
                        .or_insert(now);
                }
            },
        )?;
        let floor = spawn_watch(
            kubectl,
            kubeconfig,
            &["get", "pods", "-l", "kubevirt-rs.io/bench-floor"],
            move |object, now| record_pod(&floor_seen, object, now),
        )?;
        // The watches list what exists first; give them a moment to be established.
        std::thread::sleep(Duration::from_millis(700));
        Ok(Self {
            _children: vec![vmis, pods, floor],
            seen,
            uids,
            bound,
            launchers,
        })
    }

    /// When the launcher pod of the VMI with `uid` was first seen bound to a node.
    pub fn pod_bound(&self, vmi_uid: &str) -> Option<SystemTime> {
        self.bound
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(vmi_uid)
            .copied()
    }

    /// The launcher pod of the VMI with `uid` (the first seen).
    pub fn launcher_pod(&self, vmi_uid: &str) -> Option<String> {
        self.launchers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(vmi_uid)
            .cloned()
    }

    /// Waits until `name` (a VMI, or `pod/<name>`) was seen in `phase`.
    pub fn wait_for(&self, name: &str, phase: &str, timeout: Duration) -> anyhow::Result<SystemTime> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(at) = self.when(name, phase) {
                return Ok(at);
            }
            if Instant::now() > deadline {
                anyhow::bail!("{name} not seen {phase} within {timeout:?}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// When VMI `name` (or pod `pod/<name>`) was first seen in `phase` ("" for its creation).
    pub fn when(&self, name: &str, phase: &str) -> Option<SystemTime> {
        self.seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(name)?
            .get(phase)
            .copied()
    }

    /// The UID of VMI `name`.
    pub fn uid(&self, name: &str) -> Option<String> {
        self.uids
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(name)
            .cloned()
    }

    /// Waits until every VMI of `names` was seen Running.
    pub fn wait_running(&self, names: &[String], timeout: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + timeout;
        while names.iter().any(|n| self.when(n, "Running").is_none()) {
            // One that failed will not come.
            let failed: Vec<_> = names.iter().filter(|n| self.when(n, "Failed").is_some()).collect();
            if !failed.is_empty() {
                anyhow::bail!("Failed before Running: {failed:?}");
            }
            if Instant::now() > deadline {
                let missing: Vec<_> = names.iter().filter(|n| self.when(n, "Running").is_none()).collect();
                anyhow::bail!("not Running within {timeout:?}: {missing:?}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }
}
