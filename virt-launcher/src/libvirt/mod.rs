//! libvirt behind a trait: [`DomainManager`] manages the launcher's one domain, with a real adapter
//! over the `virt` crate ([`LibvirtDomainManager`]) and an in-memory fake (`FakeDomainManager`, feature `testing`).

mod adapter;
#[cfg(any(test, feature = "testing"))]
mod fake;
pub mod ffi;
pub mod vcpu_threads;

use std::future::Future;

pub use adapter::{LibvirtDomainManager, daemon_answers};
pub use cmd_protocol::migration::MigrationProgress;
pub use cmd_protocol::stats::DomainStats;
#[cfg(any(test, feature = "testing"))]
pub use fake::{AcpiBehaviour, FakeDomainManager};
pub use ffi::LifecycleEvent;
use kubevirt_api::domain_state::{DomainState, StateReason};

/// A domain's state and why it is in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DomainStatus {
    /// The state.
    pub state: DomainState,
    /// The reason.
    pub reason: StateReason,
}

impl DomainStatus {
    /// The domain does not exist.
    pub const NON_EXISTENT: Self = Self {
        state: DomainState::NoState,
        reason: StateReason::NonExistent,
    };

    /// From libvirt's numeric state and reason.
    #[must_use]
    pub fn from_libvirt(state: u32, reason: u32) -> Self {
        let state = DomainState::from_libvirt(state);
        Self {
            state,
            reason: StateReason::from_libvirt(state, reason),
        }
    }
}

/// How the domain migrates: libvirt's peer-to-peer live migration, the source's libvirtd talking
/// to the target's over `destination_uri`, every connection through a unix socket.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MigrationParams {
    /// The target libvirtd, e.g. `qemu+unix:///session?socket=<proxy socket>`.
    pub destination_uri: String,
    /// QEMU's migration stream, `unix://<path>`: the same path in both pods.
    pub stream_uri: String,
    /// The copied disks' NBD stream, `unix://<path>`, when `copied_disks` is not empty.
    pub disks_uri: Option<String>,
    /// Target names (`vda`) of the disks whose images are copied to the target.
    pub copied_disks: Vec<String>,
    /// MiB/s; 0 is unlimited.
    pub bandwidth_mib_per_second: u64,
    /// Throttle the vCPUs when it does not converge.
    pub auto_converge: bool,
    /// Allow switching to post-copy.
    pub post_copy: bool,
    /// Migrate even what libvirt considers unsafe (disks cached other than `none`).
    pub unsafe_migration: bool,
}

/// Why a domain operation failed.
#[derive(Debug, thiserror::Error)]
pub enum DomainError {
    /// libvirt refused or failed.
    #[error("libvirt {operation} failed: {message}")]
    Libvirt {
        /// The operation, e.g. `define`.
        operation: &'static str,
        /// libvirt's message.
        message: String,
    },
    /// The daemon did not accept a connection in time.
    #[error("cannot connect to libvirt at {uri}: {message}")]
    Connect {
        /// The URI.
        uri: String,
        /// libvirt's message.
        message: String,
    },
    /// The libvirt thread is gone (the launcher is shutting down).
    #[error("the libvirt worker thread has stopped")]
    WorkerGone,
    /// The guest agent does not answer (not installed, not started yet, or stuck).
    #[error("the guest agent is not connected: {message}")]
    AgentUnavailable {
        /// libvirt's message.
        message: String,
    },
}

/// Manages the launcher's single domain. Every call is one libvirt operation.
pub trait DomainManager: Send + Sync {
    /// Defines (or redefines) the domain from XML.
    fn define(&self, xml: String) -> impl Future<Output = Result<(), DomainError>> + Send;
    /// Starts the domain, paused if asked.
    fn start(&self, paused: bool) -> impl Future<Output = Result<(), DomainError>> + Send;
    /// Pauses the guest.
    fn pause(&self) -> impl Future<Output = Result<(), DomainError>> + Send;
    /// Resumes a paused guest.
    fn resume(&self) -> impl Future<Output = Result<(), DomainError>> + Send;
    /// Presses the ACPI power button.
    fn shutdown(&self) -> impl Future<Output = Result<(), DomainError>> + Send;
    /// Stops the guest at once.
    fn destroy(&self) -> impl Future<Output = Result<(), DomainError>> + Send;
    /// Removes the definition, with its NVRAM unless `keep_nvram` (EFI variables on VM state
    /// storage outlive the domain).
    fn undefine(&self, keep_nvram: bool) -> impl Future<Output = Result<(), DomainError>> + Send;
    /// The domain's state; [`DomainStatus::NON_EXISTENT`] when it is not defined.
    fn status(&self) -> impl Future<Output = Result<DomainStatus, DomainError>> + Send;
    /// CPU, memory, disk and network counters of the running domain.
    fn stats(&self) -> impl Future<Output = Result<DomainStats, DomainError>> + Send;
    /// The domain's live XML: what libvirt filled in (machine type, MACs, channel states).
    fn live_xml(&self) -> impl Future<Output = Result<String, DomainError>> + Send;
    /// Replaces `user`'s SSH authorized keys in the guest, through the guest agent.
    fn set_authorized_keys(
        &self,
        user: String,
        keys: Vec<String>,
    ) -> impl Future<Output = Result<(), DomainError>> + Send;
    /// Sets `user`'s password in the guest, through the guest agent.
    fn set_user_password(&self, user: String, password: String)
    -> impl Future<Output = Result<(), DomainError>> + Send;
    /// Migrates the running domain live; resolves when the migration is over (done, failed or
    /// aborted). Other calls go on meanwhile.
    fn migrate(&self, params: MigrationParams) -> impl Future<Output = Result<(), DomainError>> + Send;
    /// The running migration's counters; `None` when no migration runs.
    fn migration_progress(&self) -> impl Future<Output = Result<Option<MigrationProgress>, DomainError>> + Send;
    /// Aborts the running migration.
    fn abort_migration(&self) -> impl Future<Output = Result<(), DomainError>> + Send;
    /// Switches the running migration to post-copy.
    fn start_post_copy(&self) -> impl Future<Output = Result<(), DomainError>> + Send;
    /// Sets the longest pause of the guest at the switch-over of the running migration
    /// (`virDomainMigrateSetMaxDowntime`), in milliseconds.
    fn set_max_downtime(&self, milliseconds: u64) -> impl Future<Output = Result<(), DomainError>> + Send;
}
