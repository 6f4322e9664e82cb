//! An in-memory [`DomainManager`] for tests: a small domain state machine that records calls and
//! emits lifecycle events as libvirt would.

use std::sync::{Mutex, PoisonError};

use kubevirt_api::domain_state::{DomainState, StateReason};
use tokio::sync::mpsc::UnboundedSender;

use super::{
    DomainError, DomainManager, DomainStats, DomainStatus, LifecycleEvent, MigrationParams, MigrationProgress,
};

/// What the fake guest does on an ACPI power-button press.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AcpiBehaviour {
    /// Powers off at once.
    PowerOff,
    /// Ignores it (a guest without ACPI support, or one still booting).
    Ignore,
}

#[derive(Debug)]
struct Inner {
    status: DomainStatus,
    acpi: AcpiBehaviour,
    calls: Vec<&'static str>,
    xml: String,
    agent_connected: bool,
    guest_credentials: Vec<(String, String)>,
    /// Why every `start` fails, when set.
    start_failure: Option<String>,
    /// The migration under way, if any.
    migration: Option<FakeMigration>,
}

/// A migration the test drives: it runs until the test ends it or it is aborted.
#[derive(Debug)]
struct FakeMigration {
    params: MigrationParams,
    progress: MigrationProgress,
    /// What `set_max_downtime` set, in milliseconds.
    max_downtime_ms: Option<u64>,
    /// How it ended, once it did: `Ok` moved the guest away, `Err` carries libvirt's message.
    outcome: Option<Result<(), String>>,
}

/// The fake.
#[derive(Debug)]
pub struct FakeDomainManager {
    inner: Mutex<Inner>,
    events: UnboundedSender<LifecycleEvent>,
    migration_ended: tokio::sync::Notify,
}

impl FakeDomainManager {
    /// A fake with no domain defined yet.
    #[must_use]
    pub fn new(acpi: AcpiBehaviour, events: UnboundedSender<LifecycleEvent>) -> Self {
        Self {
            inner: Mutex::new(Inner {
                status: DomainStatus::NON_EXISTENT,
                acpi,
                calls: Vec::new(),
                xml: String::new(),
                agent_connected: true,
                guest_credentials: Vec::new(),
                start_failure: None,
                migration: None,
            }),
            events,
            migration_ended: tokio::sync::Notify::new(),
        }
    }

    /// Makes every `start` fail with `message`, as libvirt's would when QEMU cannot start.
    pub fn fail_start(&self, message: &str) {
        self.lock().start_failure = Some(message.to_owned());
    }

    /// The running migration's parameters.
    #[must_use]
    pub fn migration_params(&self) -> Option<MigrationParams> {
        self.lock().migration.as_ref().map(|m| m.params.clone())
    }

    /// The maximum downtime set for the running migration, in milliseconds.
    #[must_use]
    pub fn migration_max_downtime(&self) -> Option<u64> {
        self.lock().migration.as_ref().and_then(|m| m.max_downtime_ms)
    }

    /// Sets what the running migration reports as its progress.
    pub fn set_migration_progress(&self, progress: MigrationProgress) {
        if let Some(migration) = self.lock().migration.as_mut() {
            migration.progress = progress;
        }
    }

    /// Ends the running migration: `Ok` moves the guest to the target (this domain shuts off,
    /// reason `Migrated`), `Err` fails it with libvirt's `message`.
    pub fn end_migration(&self, outcome: Result<(), String>) {
        if let Some(migration) = self.lock().migration.as_mut() {
            migration.outcome.get_or_insert(outcome);
        }
        self.migration_ended.notify_waiters();
    }

    /// Connects or disconnects the fake guest agent.
    pub fn set_agent_connected(&self, connected: bool) {
        self.lock().agent_connected = connected;
    }

    /// What the guest agent was told, in order: `("keys <user>", "<key>\n<key>")` and
    /// `("password <user>", "<password>")`.
    #[must_use]
    pub fn guest_credentials(&self) -> Vec<(String, String)> {
        self.lock().guest_credentials.clone()
    }

    fn agent(&self, call: &'static str, what: String, value: String) -> Result<(), DomainError> {
        let status = self.record(call);
        Self::need(status, call, status.state == DomainState::Running)?;
        let mut inner = self.lock();
        if !inner.agent_connected {
            return Err(DomainError::AgentUnavailable {
                message: "QEMU guest agent is not connected".to_owned(),
            });
        }
        inner.guest_credentials.push((what, value));
        Ok(())
    }

    /// Every call made so far, in order.
    #[must_use]
    pub fn calls(&self) -> Vec<&'static str> {
        self.lock().calls.clone()
    }

    /// Makes the guest stop on its own, as a crash or `kill -9` of QEMU would.
    pub fn stop_on_its_own(&self, reason: StateReason) {
        self.set(
            DomainStatus {
                state: DomainState::Shutoff,
                reason,
            },
            5,
        );
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn set(&self, status: DomainStatus, event: i32) {
        self.lock().status = status;
        let _ = self.events.send(LifecycleEvent { event, detail: 0 });
    }

    fn record(&self, call: &'static str) -> DomainStatus {
        let mut inner = self.lock();
        inner.calls.push(call);
        inner.status
    }

    fn need(status: DomainStatus, operation: &'static str, ok: bool) -> Result<(), DomainError> {
        if ok {
            Ok(())
        } else {
            Err(DomainError::Libvirt {
                operation,
                message: format!("domain is {} ({})", status.state, status.reason),
            })
        }
    }
}

impl DomainManager for FakeDomainManager {
    async fn define(&self, xml: String) -> Result<(), DomainError> {
        let status = self.record("define");
        self.lock().xml = xml;
        if status == DomainStatus::NON_EXISTENT {
            self.set(
                DomainStatus {
                    state: DomainState::Shutoff,
                    reason: StateReason::Unknown,
                },
                0,
            );
        }
        Ok(())
    }

    async fn start(&self, paused: bool) -> Result<(), DomainError> {
        let status = self.record("start");
        if let Some(message) = self.lock().start_failure.clone() {
            return Err(DomainError::Libvirt {
                operation: "start",
                message,
            });
        }
        Self::need(status, "start", status.state == DomainState::Shutoff)?;
        let (state, reason, event) = if paused {
            (DomainState::Paused, StateReason::User, 3)
        } else {
            (DomainState::Running, StateReason::Unknown, 2)
        };
        self.set(DomainStatus { state, reason }, event);
        Ok(())
    }

    async fn pause(&self) -> Result<(), DomainError> {
        let status = self.record("pause");
        Self::need(status, "pause", status.state == DomainState::Running)?;
        self.set(
            DomainStatus {
                state: DomainState::Paused,
                reason: StateReason::User,
            },
            3,
        );
        Ok(())
    }

    async fn resume(&self) -> Result<(), DomainError> {
        let status = self.record("resume");
        Self::need(status, "resume", status.state == DomainState::Paused)?;
        self.set(
            DomainStatus {
                state: DomainState::Running,
                reason: StateReason::Unknown,
            },
            4,
        );
        Ok(())
    }

    async fn shutdown(&self) -> Result<(), DomainError> {
        let status = self.record("shutdown");
        Self::need(status, "shutdown", status.state == DomainState::Running)?;
        if self.lock().acpi == AcpiBehaviour::PowerOff {
            self.set(
                DomainStatus {
                    state: DomainState::Shutoff,
                    reason: StateReason::Shutdown,
                },
                5,
            );
        }
        Ok(())
    }

    async fn destroy(&self) -> Result<(), DomainError> {
        let status = self.record("destroy");
        Self::need(
            status,
            "destroy",
            matches!(status.state, DomainState::Running | DomainState::Paused),
        )?;
        self.set(
            DomainStatus {
                state: DomainState::Shutoff,
                reason: StateReason::Destroyed,
            },
            5,
        );
        Ok(())
    }

    async fn undefine(&self, keep_nvram: bool) -> Result<(), DomainError> {
        let status = self.record(if keep_nvram {
            "undefine keeping nvram"
        } else {
            "undefine"
        });
        Self::need(status, "undefine", status != DomainStatus::NON_EXISTENT)?;
        self.set(DomainStatus::NON_EXISTENT, 1);
        Ok(())
    }

    async fn status(&self) -> Result<DomainStatus, DomainError> {
        Ok(self.lock().status)
    }

    async fn stats(&self) -> Result<DomainStats, DomainError> {
        let status = self.record("stats");
        Self::need(status, "get stats", status != DomainStatus::NON_EXISTENT)?;
        Ok(DomainStats {
            name: "fake".to_owned(),
            vcpus: 1,
            ..DomainStats::default()
        })
    }

    async fn live_xml(&self) -> Result<String, DomainError> {
        // Not recorded: it is a read, like `status`.
        let status = self.lock().status;
        Self::need(status, "get XML", status != DomainStatus::NON_EXISTENT)?;
        Ok(self.lock().xml.clone())
    }

    async fn set_authorized_keys(&self, user: String, keys: Vec<String>) -> Result<(), DomainError> {
        self.agent("set SSH keys", format!("keys {user}"), keys.join("\n"))
    }

    async fn set_user_password(&self, user: String, password: String) -> Result<(), DomainError> {
        self.agent("set user password", format!("password {user}"), password)
    }

    async fn migrate(&self, params: MigrationParams) -> Result<(), DomainError> {
        let status = self.record("migrate");
        Self::need(status, "migrate", status.state == DomainState::Running)?;
        self.lock().migration = Some(FakeMigration {
            params,
            progress: MigrationProgress::default(),
            max_downtime_ms: None,
            outcome: None,
        });
        let outcome = loop {
            let ended = self.migration_ended.notified();
            if let Some(outcome) = self.lock().migration.as_ref().and_then(|m| m.outcome.clone()) {
                break outcome;
            }
            ended.await;
        };
        self.lock().migration = None;
        match outcome {
            Ok(()) => {
                self.set(
                    DomainStatus {
                        state: DomainState::Shutoff,
                        reason: StateReason::Migrated,
                    },
                    5,
                );
                Ok(())
            }
            Err(message) => Err(DomainError::Libvirt {
                operation: "migrate",
                message,
            }),
        }
    }

    async fn migration_progress(&self) -> Result<Option<MigrationProgress>, DomainError> {
        Ok(self.lock().migration.as_ref().map(|m| m.progress))
    }

    async fn abort_migration(&self) -> Result<(), DomainError> {
        let status = self.record("abort migration");
        let running = self.lock().migration.is_some();
        Self::need(status, "abort migration", running)?;
        self.end_migration(Err(
            "operation aborted: migration out job: canceled by client".to_owned()
        ));
        Ok(())
    }

    async fn start_post_copy(&self) -> Result<(), DomainError> {
        let status = self.record("start post-copy");
        let running = self.lock().migration.as_ref().is_some_and(|m| m.params.post_copy);
        Self::need(status, "start post-copy", running)
    }

    async fn set_max_downtime(&self, milliseconds: u64) -> Result<(), DomainError> {
        let status = self.record("set max downtime");
        let mut inner = self.lock();
        let running = inner
            .migration
            .as_mut()
            .map(|m| m.max_downtime_ms = Some(milliseconds))
            .is_some();
        drop(inner);
        Self::need(status, "set max downtime", running)
    }
}
