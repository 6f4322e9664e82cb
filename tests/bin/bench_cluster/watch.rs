//! When each VMI was first seen in each phase: `kubectl get vmi -w -o json`, read as it streams,
//! with the wall-clock time of each object's arrival.

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

/// A running watch of the default namespace's VMIs.
pub struct PhaseWatch {
    child: Child,
    seen: Arc<Mutex<Sightings>>,
    uids: Arc<Mutex<BTreeMap<String, String>>>,
}

impl PhaseWatch {
    /// Starts `kubectl get vmi -w`.
    pub fn start(kubectl: &Path, kubeconfig: &Path) -> anyhow::Result<Self> {
        let mut child = Command::new(kubectl)
            .env("KUBECONFIG", kubeconfig)
            .args(["get", "vmi", "-n", "default", "-w", "-o", "json"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .context("kubectl get vmi -w")?;
        let stdout = child.stdout.take().context("watch stdout")?;
        let seen: Arc<Mutex<Sightings>> = Arc::default();
        let uids: Arc<Mutex<BTreeMap<String, String>>> = Arc::default();
        let (seen_in, uids_in) = (seen.clone(), uids.clone());
        std::thread::spawn(move || {
            let stream = serde_json::Deserializer::from_reader(BufReader::new(stdout)).into_iter::<Value>();
            for object in stream.map_while(Result::ok) {
                let now = SystemTime::now();
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
            }
        });
        // The watch lists what exists first; give it a moment to be established.
        std::thread::sleep(Duration::from_millis(700));
        Ok(Self { child, seen, uids })
    }

    /// When VMI `name` was first seen in `phase` ("" for its creation).
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
            if Instant::now() > deadline {
                let missing: Vec<_> = names.iter().filter(|n| self.when(n, "Running").is_none()).collect();
                anyhow::bail!("not Running within {timeout:?}: {missing:?}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }
}

impl Drop for PhaseWatch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
