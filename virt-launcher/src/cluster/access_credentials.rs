//! Access credentials propagated through the QEMU guest agent (upstream's access credential
//! manager): SSH public keys replace each listed user's `authorized_keys`, and each file of a
//! userPassword Secret sets the password of the user it is named after. The Secrets are mounted
//! whole, so the kubelet refreshes them; the launcher reads them on every tick and propagates what
//! changed, everything again every five minutes, and retries while the agent is offline. The
//! outcome becomes the VMI's `AccessCredentialsSynchronized` condition.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kubevirt_api::v1::VirtualMachineInstance;

use crate::domain::PathLayout;
use crate::libvirt::{DomainError, DomainManager};

/// How often the Secrets are looked at (upstream's resync check interval).
pub const TICK: Duration = Duration::from_secs(15);
/// How often everything is propagated again, changed or not.
pub const FULL_RESYNC: Duration = Duration::from_secs(300);

/// What the guest should have: each user's SSH keys and passwords.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Desired {
    /// Authorized keys by user.
    pub keys: BTreeMap<String, Vec<String>>,
    /// Passwords by user.
    pub passwords: BTreeMap<String, String>,
}

/// The outcome of the last propagation, as the VMI condition reports it.
pub use cmd_protocol::domain::AccessCredentialStatus as Report;

/// Whether any credential of `vmi` goes through the guest agent.
#[must_use]
pub fn uses_agent(vmi: &VirtualMachineInstance) -> bool {
    vmi.spec.access_credentials.iter().any(|c| {
        c.user_password.as_ref().is_some_and(|p| {
            p.propagation_method
                .as_ref()
                .is_some_and(|m| m.qemu_guest_agent.is_some())
        }) || c.ssh_public_key.as_ref().is_some_and(|k| {
            k.propagation_method
                .as_ref()
                .is_some_and(|m| m.qemu_guest_agent.is_some())
        })
    })
}

/// The regular files of a mounted Secret, by name, without the kubelet's `..` entries.
fn secret_files(dir: &Path) -> Result<Vec<(String, String)>, String> {
    crate::mounted::files(dir)
        .map_err(|e| {
            format!(
                "error occurred while reading the list of secrets files from the base directory {}: {e}",
                dir.display()
            )
        })?
        .into_iter()
        .map(|path| {
            let name = path.file_name().unwrap_or_default().to_string_lossy().into_owned();
            std::fs::read_to_string(&path).map(|text| (name, text)).map_err(|e| {
                format!(
                    "error occurred while reading the access credential secret file [{}]: {e}",
                    path.display()
                )
            })
        })
        .collect()
}

/// Reads what the guest agent credentials of `vmi` ask for from their mounted Secrets.
pub fn read_desired(vmi: &VirtualMachineInstance, layout: &PathLayout) -> Result<Desired, String> {
    let mut desired = Desired::default();
    for credential in &vmi.spec.access_credentials {
        let Some(secret) = credential.secret_name() else {
            continue;
        };
        let dir = PathBuf::from(layout.secret_dir(&format!("{secret}-access-cred")));
        if let Some(users) = credential
            .ssh_public_key
            .as_ref()
            .and_then(|k| k.propagation_method.as_ref())
            .and_then(|m| m.qemu_guest_agent.as_ref())
        {
            let keys: Vec<String> = secret_files(&dir)?
                .iter()
                .flat_map(|(_, text)| text.split('\n').map(str::trim).map(str::to_owned).collect::<Vec<_>>())
                .filter(|k| !k.is_empty())
                .collect();
            for user in &users.users {
                desired
                    .keys
                    .entry(user.clone())
                    .or_default()
                    .extend(keys.iter().cloned());
            }
        }
        let by_agent = credential.user_password.as_ref().is_some_and(|p| {
            p.propagation_method
                .as_ref()
                .is_some_and(|m| m.qemu_guest_agent.is_some())
        });
        if by_agent {
            for (user, text) in secret_files(&dir)? {
                let password = text.trim();
                if !password.is_empty() {
                    desired.passwords.insert(user, password.to_owned());
                }
            }
        }
    }
    Ok(desired)
}

/// Hands `desired` to the guest agent.
pub async fn propagate(manager: &impl DomainManager, desired: &Desired) -> Report {
    let mut failures = Vec::new();
    for (user, keys) in &desired.keys {
        match manager.set_authorized_keys(user.clone(), keys.clone()).await {
            Ok(()) => {}
            Err(DomainError::AgentUnavailable { .. }) => return offline(),
            Err(e) => failures.push(format!(
                "Error encountered writing ssh pub key access credentials for user [{user}]: {e}"
            )),
        }
    }
    for (user, password) in &desired.passwords {
        match manager.set_user_password(user.clone(), password.clone()).await {
            Ok(()) => {}
            Err(DomainError::AgentUnavailable { .. }) => return offline(),
            Err(e) => failures.push(format!("Error encountered setting password for user [{user}]: {e}")),
        }
    }
    Report {
        succeeded: failures.is_empty(),
        message: failures.join("; "),
    }
}

fn offline() -> Report {
    Report {
        succeeded: false,
        message: "Guest agent is offline".to_owned(),
    }
}

/// When to propagate: on a change, after a failure, and every [`FULL_RESYNC`].
#[derive(Debug, Default)]
pub struct Propagation {
    applied: Option<(Desired, Instant)>,
}

impl Propagation {
    /// Whether `desired` must be propagated at `now`.
    #[must_use]
    pub fn is_due(&self, desired: &Desired, now: Instant) -> bool {
        match &self.applied {
            Some((applied, at)) => applied != desired || now.duration_since(*at) >= FULL_RESYNC,
            None => true,
        }
    }

    /// Records a propagation of `desired` at `now` that ended with `report`.
    pub fn record(&mut self, desired: Desired, report: &Report, now: Instant) {
        self.applied = report.succeeded.then_some((desired, now));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::libvirt::{AcpiBehaviour, FakeDomainManager};
    use crate::mounted::pod_layout_with_secrets;

    fn vmi(credentials: &serde_json::Value) -> VirtualMachineInstance {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
            "metadata": {"name": "vm"},
            "spec": {"domain": {"devices": {}}, "accessCredentials": credentials}
        }))
        .expect("vmi")
    }

    #[test]
    fn keys_are_split_into_lines_and_passwords_are_named_by_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let layout = pod_layout_with_secrets(
            dir.path(),
            &[
                ("some-secret-123-access-cred/authorized_keys", "first key\nsecond key\n"),
                ("pw-access-cred/fakeuser", "fakepassword\n"),
                ("pw-access-cred/emptyuser", "  \n"),
            ],
        );
        let vmi = vmi(&serde_json::json!([
            {"sshPublicKey": {"source": {"secret": {"secretName": "some-secret-123"}},
                              "propagationMethod": {"qemuGuestAgent": {"users": ["fakeuser", "root"]}}}},
            {"userPassword": {"source": {"secret": {"secretName": "pw"}},
                              "propagationMethod": {"qemuGuestAgent": {}}}}
        ]));
        assert!(uses_agent(&vmi));
        let desired = read_desired(&vmi, &layout).expect("read");
        let keys = vec!["first key".to_owned(), "second key".to_owned()];
        assert_eq!(desired.keys.get("fakeuser"), Some(&keys));
        assert_eq!(desired.keys.get("root"), Some(&keys));
        assert_eq!(
            desired.passwords.into_iter().collect::<Vec<_>>(),
            [("fakeuser".to_owned(), "fakepassword".to_owned())]
        );
        let missing = vmi_with_missing_secret();
        let error = read_desired(&missing, &layout).expect_err("no secret mounted");
        assert!(error.starts_with("error occurred while reading the list of secrets files from the base directory"));
    }

    fn vmi_with_missing_secret() -> VirtualMachineInstance {
        vmi(&serde_json::json!([
            {"userPassword": {"source": {"secret": {"secretName": "absent"}},
                              "propagationMethod": {"qemuGuestAgent": {}}}}
        ]))
    }

    #[tokio::test]
    async fn an_offline_agent_is_reported_and_retried_and_a_change_is_propagated_again() {
        let (events, _rx) = tokio::sync::mpsc::unbounded_channel();
        let manager = FakeDomainManager::new(AcpiBehaviour::PowerOff, events);
        manager.define(String::new()).await.expect("define");
        manager.start(false).await.expect("start");
        let desired = Desired {
            keys: BTreeMap::from([("root".to_owned(), vec!["ssh-ed25519 AAAA".to_owned()])]),
            passwords: BTreeMap::from([("root".to_owned(), "secret".to_owned())]),
        };
        let mut propagation = Propagation::default();
        let now = Instant::now();
        manager.set_agent_connected(false);
        assert!(propagation.is_due(&desired, now));
        let report = propagate(&manager, &desired).await;
        assert_eq!(report, offline());
        propagation.record(desired.clone(), &report, now);
        assert!(propagation.is_due(&desired, now), "a failure is retried");

        manager.set_agent_connected(true);
        let report = propagate(&manager, &desired).await;
        assert_eq!(
            report,
            Report {
                succeeded: true,
                message: String::new()
            }
        );
        assert_eq!(
            manager.guest_credentials(),
            [
                ("keys root".to_owned(), "ssh-ed25519 AAAA".to_owned()),
                ("password root".to_owned(), "secret".to_owned()),
            ]
        );
        propagation.record(desired.clone(), &report, now);
        assert!(!propagation.is_due(&desired, now + TICK), "nothing changed");
        assert!(
            propagation.is_due(&desired, now + FULL_RESYNC),
            "the periodic full resync"
        );
        let mut changed = desired;
        changed.passwords.insert("root".to_owned(), "rotated".to_owned());
        assert!(propagation.is_due(&changed, now + TICK), "a rotated password");
    }
}
