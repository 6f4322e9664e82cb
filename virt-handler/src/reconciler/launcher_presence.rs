//! The reconciler's view of a VMI's launcher: whether it is there, starting, gone or no longer
//! answering, and on first sight the domain it already runs (a restarted handler re-adopts it).

use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kubevirt_api::v1::VirtualMachineInstance;
use tracing::{debug, info, warn};

use super::Reconciler;
use crate::clock::Clock;
use crate::cluster_api::ClusterApi;
use crate::launchers::{LauncherError, Launchers, Presence};
use crate::plan::LauncherState;

impl<C: ClusterApi, L: Launchers, K: Clock> Reconciler<C, L, K> {
    /// Finds the launcher; on first sight since this handler started, asks it for its domain, so a
    /// restarted handler re-adopts running domains.
    pub(super) async fn observe_launcher(
        &self,
        key: &str,
        vmi: &VirtualMachineInstance,
    ) -> (LauncherState, Option<PathBuf>) {
        let presence = self.launchers.locate(vmi);
        let socket = match presence {
            Presence::Ready(socket) => socket,
            Presence::Starting => return (LauncherState::Starting, None),
            Presence::Absent => {
                let remembered = self.known().sockets.get(key).cloned();
                return match remembered {
                    Some(socket) if !self.launchers.is_unresponsive(&socket) => (LauncherState::Ready, Some(socket)),
                    _ => (LauncherState::Absent, None),
                };
            }
        };
        if self.launchers.is_unresponsive(&socket) {
            return (LauncherState::Unresponsive, Some(socket));
        }
        let first_sight = {
            let mut known = self.known();
            known.sockets.insert(key.to_owned(), socket.clone());
            !known.listed.contains(key)
        };
        if first_sight {
            match self.launchers.domain(&socket).await {
                Ok(domain) => {
                    let mut known = self.known();
                    known.listed.insert(key.to_owned());
                    if let Some(domain) = domain {
                        info!(vmi = %key, state = %domain.status.status, "adopted the launcher's domain");
                        known.domains.insert(key.to_owned(), domain);
                    }
                    known.failing_since.remove(key);
                }
                Err(error) => {
                    debug!(vmi = %key, error = %error, "cannot read the domain yet");
                    if self.note_call_failure(key, Some(&socket), &error, self.clock.now()) {
                        return (LauncherState::Unresponsive, Some(socket));
                    }
                }
            }
        }
        (LauncherState::Ready, Some(socket))
    }

    /// Counts a failed call: a launcher unreachable for too long is marked unresponsive (returns
    /// true); one that answered, even with an error or too late, is there.
    pub(super) fn note_call_failure(
        &self,
        key: &str,
        socket: Option<&PathBuf>,
        error: &LauncherError,
        now: Timestamp,
    ) -> bool {
        let Some(socket) = socket else { return false };
        if !error.is_unreachable() {
            self.known().failing_since.remove(key);
            return false;
        }
        let since = *self.known().failing_since.entry(key.to_owned()).or_insert(now);
        let failing = Duration::try_from(now.duration_since(since)).unwrap_or(Duration::ZERO);
        if failing >= self.config.unresponsive_after {
            warn!(vmi = %key, socket = %socket.display(), "the launcher stopped answering");
            self.launchers.mark_unresponsive(socket);
            return true;
        }
        false
    }
}
