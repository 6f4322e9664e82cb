//! virt-handler's part of a live migration, decided: which side of it this node is, the next
//! step on each side, and the VMI status each side writes. Pure; the reconciler carries the steps
//! out ([`crate::reconciler`]).
//!
//! - The **target** node (the VMI's `migrationState.targetNode`) prepares its launcher pod
//!   (`SyncMigrationTarget`), opens the migration proxies and publishes their address and ports;
//!   it records when the domain arrives and runs; once the source reports the end and no failure,
//!   it takes the VMI over: `nodeName`, the node label, `completed`.
//! - The **source** node (the VMI's `nodeName`) waits for the target's ports, opens its proxy
//!   sockets in the source pod, asks its launcher to migrate, copies the launcher's progress into
//!   the VMI's migration state, and asks it to abort when the migration is cancelled.

use cmd_protocol::domain::DomainSnapshot;
use cmd_protocol::migration::{AbortStatus, Channel, MigrationMetadata, MigrationMode, MigrationOptions};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kubevirt_api::domain_state::DomainState;
use kubevirt_api::migration_settings::MigrationSettings;
use kubevirt_api::v1::{MigrationState, VirtualMachineInstance, VirtualMachineInstanceStatus};

/// This node's side of the VMI's migration.
#[derive(Clone, Debug, PartialEq)]
pub enum Role {
    /// The guest runs here and moves away.
    Source(MigrationState),
    /// The guest moves here.
    Target(MigrationState),
}

/// The migration this node takes part in, if any; a finished one (completed, or failed and
/// ended) is none.
#[must_use]
pub fn role(vmi: &VirtualMachineInstance, node: &str) -> Option<Role> {
    let status = vmi.status.as_ref()?;
    let state = status.migration_state.as_ref()?;
    state.migration_uid.as_ref()?;
    if state.completed == Some(true) {
        return None;
    }
    let here = status.node_name.as_deref() == Some(node);
    let target_here = state.target_node.as_deref() == Some(node);
    match (here, target_here) {
        (true, false) => Some(Role::Source(state.clone())),
        (false, true) if state.failed != Some(true) => Some(Role::Target(state.clone())),
        _ => None,
    }
}

/// What the target side knows besides the migration state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[allow(clippy::struct_excessive_bools, reason = "each is one observation")]
pub struct TargetSeen {
    /// The target launcher serves commands.
    pub launcher_ready: bool,
    /// Its pod network must be wired and is not yet.
    pub needs_pod_network: bool,
    /// `SyncMigrationTarget` succeeded.
    pub prepared: bool,
    /// The proxies listen.
    pub proxy_open: bool,
    /// The domain arrived and runs (or was paused by its user).
    pub domain_running: bool,
}

/// The target side's next step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TargetStep {
    /// Wire the target pod's network (phase 1), as for any launcher.
    WirePodNetwork,
    /// `SyncMigrationTarget`.
    Prepare,
    /// Open the proxies and publish them.
    OpenProxy,
    /// Take the VMI over: the guest runs here now.
    Finalize,
    /// Nothing to do now.
    Wait,
}

/// The target side's next step.
#[must_use]
pub fn target_step(state: &MigrationState, seen: TargetSeen) -> TargetStep {
    if !seen.launcher_ready {
        return TargetStep::Wait;
    }
    if seen.needs_pod_network {
        return TargetStep::WirePodNetwork;
    }
    if !seen.prepared {
        return TargetStep::Prepare;
    }
    if !seen.proxy_open {
        return TargetStep::OpenProxy;
    }
    let source_done = state.end_timestamp.is_some() && state.failed != Some(true);
    if source_done && seen.domain_running {
        return TargetStep::Finalize;
    }
    TargetStep::Wait
}

/// The target's status writes before the take-over: its proxies' address and ports, and when the
/// domain was first seen and first ran here.
#[must_use]
pub fn target_status(
    status: &VirtualMachineInstanceStatus,
    published: Option<(&str, &std::collections::BTreeMap<String, i32>)>,
    domain: Option<&DomainSnapshot>,
    now: &Time,
) -> VirtualMachineInstanceStatus {
    let mut status = status.clone();
    let Some(state) = status.migration_state.as_mut() else {
        return status;
    };
    if let Some((address, ports)) = published {
        state.target_node_address = Some(address.to_owned());
        state.target_direct_migration_node_ports.clone_from(ports);
    }
    if domain.is_some_and(|d| d.status.state() != DomainState::NoState) {
        state.target_node_domain_detected = Some(true);
    }
    if domain.is_some_and(runs_on_target) && state.target_node_domain_ready_timestamp.is_none() {
        state.target_node_domain_ready_timestamp = Some(now.clone());
    }
    status
}

/// The migrated domain runs on the target: running, or paused by its user (not the pause of an
/// incoming migration, reason `Migration`, or of a domain starting up).
#[must_use]
pub fn runs_on_target(domain: &DomainSnapshot) -> bool {
    use kubevirt_api::domain_state::StateReason;
    match domain.status.state() {
        DomainState::Running => true,
        DomainState::Paused => !matches!(domain.status.reason(), StateReason::Migration | StateReason::StartingUp),
        _ => false,
    }
}

/// The take-over: the VMI runs on `node` now, and its migration completed. An evacuation that
/// sent it here is over, so the evacuation mark goes.
#[must_use]
pub fn finalized(status: &VirtualMachineInstanceStatus, node: &str, now: &Time) -> VirtualMachineInstanceStatus {
    let mut status = status.clone();
    status.node_name = Some(node.to_owned());
    status.evacuation_node_name = None;
    if let Some(state) = status.migration_state.as_mut() {
        state.completed = Some(true);
        state.end_timestamp.get_or_insert_with(|| now.clone());
    }
    status
}

/// What the source side knows besides the migration state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SourceSeen<'a> {
    /// The source launcher serves commands.
    pub launcher_ready: bool,
    /// The proxy sockets of this migration are open in the source pod.
    pub proxy_open: bool,
    /// `MigrateVirtualMachine` was sent for this migration.
    pub migrate_sent: bool,
    /// The launcher's report of its migration, if it runs or ran one.
    pub reported: Option<&'a MigrationMetadata>,
}

/// The source side's next step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourceStep {
    /// Open the proxy sockets in the source pod.
    OpenProxy,
    /// `MigrateVirtualMachine`.
    Migrate,
    /// `CancelVirtualMachineMigration`.
    Cancel,
    /// Cancelled before it started: record it failed (aborted) in the VMI, as the launcher
    /// would have.
    AbortUnstarted,
    /// Close the proxy sockets: the migration is over here.
    CloseProxy,
    /// Nothing to do now.
    Wait,
}

/// The source side's next step.
#[must_use]
pub fn source_step(state: &MigrationState, seen: SourceSeen<'_>) -> SourceStep {
    let ours = seen.reported.filter(|m| Some(&m.uid) == state.migration_uid.as_ref());
    if let Some(report) = ours
        && (report.completed || report.failed)
    {
        return if seen.proxy_open {
            SourceStep::CloseProxy
        } else {
            SourceStep::Wait
        };
    }
    if state.failed == Some(true) {
        return if seen.proxy_open {
            SourceStep::CloseProxy
        } else {
            SourceStep::Wait
        };
    }
    if !seen.launcher_ready {
        return SourceStep::Wait;
    }
    let ports_published = state.target_node_address.is_some() && !state.target_direct_migration_node_ports.is_empty();
    match ours {
        // Sent, and its report is on the way: whatever comes next needs it.
        None if seen.migrate_sent => SourceStep::Wait,
        None if state.abort_requested == Some(true) => SourceStep::AbortUnstarted,
        None if !ports_published => SourceStep::Wait,
        None if !seen.proxy_open => SourceStep::OpenProxy,
        None => SourceStep::Migrate,
        Some(report) if state.abort_requested == Some(true) && report.abort_status.is_none() => SourceStep::Cancel,
        Some(_) => SourceStep::Wait,
    }
}

/// A migration cancelled before the source launcher started it: failed and aborted, as the
/// launcher reports an aborted one.
#[must_use]
pub fn aborted_unstarted(state: &MigrationState, now: &Time) -> MigrationState {
    MigrationState {
        failed: Some(true),
        failure_reason: Some("Live migration aborted ".to_owned()),
        abort_status: Some("Succeeded".to_owned()),
        start_timestamp: state.start_timestamp.clone().or_else(|| Some(now.clone())),
        end_timestamp: Some(now.clone()),
        ..state.clone()
    }
}

/// The VMI's migration state with the source launcher's report copied in (upstream copies the
/// start, the end, the failure, the abort status and the mode; the target writes `completed`).
#[must_use]
pub fn reported_state(state: &MigrationState, report: &MigrationMetadata) -> MigrationState {
    let mut state = state.clone();
    if state.migration_uid.as_deref() != Some(report.uid.as_str()) {
        return state;
    }
    let time = |text: &Option<String>| {
        text.as_deref()
            .and_then(|t| t.parse::<k8s_openapi::jiff::Timestamp>().ok())
            .map(Time)
    };
    if state.start_timestamp.is_none() {
        state.start_timestamp = time(&report.start_timestamp);
    }
    if state.end_timestamp.is_none() {
        state.end_timestamp = time(&report.end_timestamp);
    }
    if report.failed {
        state.failed = Some(true);
        state.failure_reason = Some(report.failure_reason.clone()).filter(|r| !r.is_empty());
    }
    state.abort_status = report.abort_status.map(|a| {
        match a {
            AbortStatus::Aborting => "Aborting",
            AbortStatus::Succeeded => "Succeeded",
            AbortStatus::Failed => "Failed",
        }
        .to_owned()
    });
    state.mode = report.mode.map(|m| {
        match m {
            MigrationMode::PreCopy => "PreCopy",
            MigrationMode::PostCopy => "PostCopy",
        }
        .to_owned()
    });
    state
}

/// The options the source launcher migrates with: the settings recorded in the migration state
/// at the hand-off, or the cluster's.
#[must_use]
pub fn options(state: &MigrationState, cluster: &MigrationSettings) -> MigrationOptions {
    let settings = state
        .migration_configuration
        .as_ref()
        .map_or_else(|| cluster.clone(), |c| MigrationSettings::from_configuration(Some(c)));
    MigrationOptions {
        migration_uid: state.migration_uid.clone().unwrap_or_default(),
        bandwidth_mib_per_second: settings.bandwidth_mib_per_second,
        allow_auto_converge: settings.allow_auto_converge,
        allow_post_copy: settings.post_copy(),
        unsafe_migration: settings.unsafe_migration_override,
        completion_timeout_per_gib: settings.completion_timeout_per_gib,
        progress_timeout_seconds: settings.progress_timeout,
        max_downtime_ms: settings.max_downtime_ms,
    }
}

/// The target's published ports as the source proxy needs them: channel to TCP port.
#[must_use]
pub fn target_ports(state: &MigrationState) -> std::collections::BTreeMap<Channel, u16> {
    state
        .target_direct_migration_node_ports
        .iter()
        .filter_map(|(port, key)| {
            let channel = Channel::from_port_key(u16::try_from(*key).ok()?)?;
            Some((channel, port.parse().ok()?))
        })
        .collect()
}

#[cfg(test)]
mod tests;
