//! The VMI status virt-handler writes: the phase computed from the domain (upstream's
//! `calculateVmPhaseForStatusReason` in `pkg/virt-handler/vm.go`), the Paused condition, the node
//! name and machine type, and a transition timestamp per phase change. Pure: the caller passes the
//! time and what it observed.

use std::collections::BTreeMap;

use cmd_protocol::domain::DomainSnapshot;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kubevirt_api::domain_state::{DomainState, StateReason, phase_for_domain};
use kubevirt_api::v1::{
    Machine, PhaseTransitionTimestamp, VirtualMachineInstance, VirtualMachineInstanceCondition,
    VirtualMachineInstanceNetworkInterface, VirtualMachineInstancePhase as Phase, VirtualMachineInstanceStatus,
};
use kubevirt_api::well_known::conditions;

/// What the handler knows about the launcher when there is no domain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LauncherView {
    /// The launcher answers.
    Responsive,
    /// The launcher is still starting (only its init socket exists).
    Starting,
    /// The launcher's socket is gone or it was marked unresponsive.
    Unresponsive,
}

/// The phase to write, or `None` to keep the current one (and requeue, when the launcher is still
/// starting).
#[must_use]
pub fn compute_phase(current: Phase, domain: Option<&DomainSnapshot>, launcher: LauncherView) -> Option<Phase> {
    if current.is_final() {
        return None;
    }
    let Some(domain) = domain else {
        return match (current, launcher) {
            // The domain disappeared under a running VM, or its launcher stopped answering.
            (Phase::Running, _) | (_, LauncherView::Unresponsive) => Some(Phase::Failed),
            (_, LauncherView::Starting) => None,
            (_, LauncherView::Responsive) => Some(Phase::Scheduled).filter(|p| *p != current),
        };
    };
    let (state, reason) = (domain.status.state(), domain.status.reason());
    if (state, reason) == (DomainState::NoState, StateReason::NonExistent) {
        return (current == Phase::Running).then_some(Phase::Failed);
    }
    let acpi_usable = domain.spec.has_acpi && domain.metadata.grace_period_seconds.unwrap_or(30) > 0;
    phase_for_domain(state, reason, acpi_usable).filter(|phase| *phase != current)
}

/// The reason of the Paused condition for a paused domain, as upstream names it.
fn paused_reason(domain: &DomainSnapshot) -> Option<&'static str> {
    (domain.status.state() == DomainState::Paused).then(|| match domain.status.reason() {
        StateReason::User => "PausedByUser",
        StateReason::IoError => "PausedIOError",
        _ => "Paused",
    })
}

/// Sets (or, with `None`, removes) the condition of `kind`; its transition time moves only when
/// its status does, so writing the same observation twice changes nothing.
fn set_condition(
    conditions: &mut Vec<VirtualMachineInstanceCondition>,
    kind: &str,
    wanted: Option<(&str, &str, &str)>,
    now: &Time,
) {
    let Some((status, reason, message)) = wanted else {
        conditions.retain(|c| c.condition_type != kind);
        return;
    };
    let since = conditions
        .iter()
        .find(|c| c.condition_type == kind && c.status == status)
        .and_then(|c| c.last_transition_time.clone())
        .unwrap_or_else(|| now.clone());
    let condition = VirtualMachineInstanceCondition {
        condition_type: kind.to_owned(),
        status: status.to_owned(),
        last_probe_time: None,
        last_transition_time: Some(since),
        reason: Some(reason.to_owned()).filter(|r| !r.is_empty()),
        message: Some(message.to_owned()).filter(|m| !m.is_empty()),
    };
    match conditions.iter_mut().find(|c| c.condition_type == kind) {
        Some(existing) => *existing = condition,
        None => conditions.push(condition),
    }
}

/// The interfaces the domain reports, merged into what the status already knows (addresses
/// learnt elsewhere are kept), with the pod's addresses for the pod network's interface, as
/// upstream reports them without a guest agent.
fn interfaces(
    known: &[VirtualMachineInstanceNetworkInterface],
    domain: &DomainSnapshot,
    pod_addresses: &BTreeMap<String, Vec<String>>,
) -> Vec<VirtualMachineInstanceNetworkInterface> {
    domain
        .spec
        .interfaces
        .iter()
        .map(|iface| {
            let mut status = known
                .iter()
                .find(|k| k.name.as_deref() == Some(iface.name.as_str()))
                .cloned()
                .unwrap_or_default();
            status.name = Some(iface.name.clone());
            status.mac.clone_from(&iface.mac);
            status.info_source = Some(INFO_SOURCE_DOMAIN.to_owned());
            if let Some(addresses) = pod_addresses.get(&iface.name).filter(|a| !a.is_empty()) {
                status.ip_address = addresses.first().cloned();
                status.ip_addresses.clone_from(addresses);
            }
            status
        })
        .collect()
}

/// Where an interface's status came from, as upstream writes it.
pub const INFO_SOURCE_DOMAIN: &str = "domain";

/// The status to write: `vmi`'s status with the new phase and its timestamp, the node name,
/// machine type, interfaces, launcher image, the Ready, Paused, AgentConnected and LiveMigratable
/// conditions and the migration method.
/// Fields the handler does not own are kept.
#[must_use]
pub fn next_status(
    vmi: &VirtualMachineInstance,
    node: &str,
    domain: Option<&DomainSnapshot>,
    launcher: LauncherView,
    now: &Time,
    pod_addresses: &BTreeMap<String, Vec<String>>,
) -> VirtualMachineInstanceStatus {
    let mut status = vmi.status.clone().unwrap_or_default();
    let current = status.phase.unwrap_or_default();
    if let Some(phase) = compute_phase(current, domain, launcher) {
        status.phase = Some(phase);
        status.phase_transition_timestamps.push(PhaseTransitionTimestamp {
            phase: Some(phase),
            phase_transition_timestamp: Some(now.clone()),
        });
        if phase == Phase::Failed && domain.is_none() {
            status.reason = Some(
                if launcher == LauncherView::Unresponsive {
                    REASON_LAUNCHER_UNRESPONSIVE
                } else {
                    REASON_DOMAIN_DISAPPEARED
                }
                .to_owned(),
            );
        }
    }
    status.node_name = Some(node.to_owned());
    let phase = status.phase.unwrap_or_default();
    if let Some(domain) = domain.filter(|d| d.status.state() != DomainState::NoState) {
        if let Some(machine) = domain.spec.machine.clone() {
            status.machine = Some(Machine {
                machine_type: Some(machine),
            });
        }
        if !domain.spec.interfaces.is_empty() {
            status.interfaces = interfaces(&status.interfaces, domain, pod_addresses);
        }
        if let Some(image) = domain.metadata.launcher_image.clone() {
            status.launcher_container_image_version = Some(image);
        }
    }
    let paused = domain.and_then(paused_reason);
    let paused_condition = paused.map(|reason| (conditions::TRUE, reason, "VMI was paused"));
    set_condition(&mut status.conditions, conditions::PAUSED, paused_condition, now);
    let running = domain.is_some_and(|d| d.status.state() == DomainState::Running);
    let ready = if phase == Phase::Running && running {
        (conditions::TRUE, "", "")
    } else if paused.is_some() {
        (conditions::FALSE, "Paused", "VMI was paused")
    } else {
        (
            conditions::FALSE,
            "GuestNotRunning",
            "Guest VM is not reported as running",
        )
    };
    set_condition(&mut status.conditions, conditions::READY, Some(ready), now);
    let agent = match domain.and_then(|d| d.spec.guest_agent_connected) {
        Some(true) if !phase.is_final() => Some((conditions::TRUE, "", "")),
        _ => None,
    };
    set_condition(&mut status.conditions, conditions::AGENT_CONNECTED, agent, now);
    if !phase.is_final() {
        let migratable = kubevirt_api::migratable::live_migratable(vmi);
        let wanted = match &migratable {
            Ok(()) => (conditions::TRUE, "", ""),
            Err(why) => (conditions::FALSE, why.reason, why.message.as_str()),
        };
        set_condition(&mut status.conditions, conditions::LIVE_MIGRATABLE, Some(wanted), now);
        status.migration_method = Some(kubevirt_api::migratable::migration_method(vmi).as_str().to_owned());
    }
    // The source launcher's report of the migration, into the VMI's migration state.
    if let (Some(state), Some(report)) = (
        status.migration_state.as_ref(),
        domain.and_then(|d| d.metadata.migration.as_ref()),
    ) {
        status.migration_state = Some(crate::migration::reported_state(state, report));
    }
    if let Some(report) = domain.and_then(|d| d.metadata.access_credential.as_ref()) {
        let state = if report.succeeded {
            conditions::TRUE
        } else {
            conditions::FALSE
        };
        let wanted = Some((state, "", report.message.as_str()));
        set_condition(
            &mut status.conditions,
            conditions::ACCESS_CREDENTIALS_SYNCHRONIZED,
            wanted,
            now,
        );
    }
    status
}

/// The event for a changed `AccessCredentialsSynchronized` condition, as upstream records it.
#[must_use]
pub fn access_credentials_event(
    old: Option<&VirtualMachineInstanceStatus>,
    new: &VirtualMachineInstanceStatus,
) -> Option<crate::cluster_api::VmiEvent> {
    let find = |status: &VirtualMachineInstanceStatus| {
        status
            .conditions
            .iter()
            .find(|c| c.condition_type == conditions::ACCESS_CREDENTIALS_SYNCHRONIZED)
            .map(|c| (c.status.clone(), c.message.clone().unwrap_or_default()))
    };
    let (state, message) = find(new)?;
    if old.and_then(find) == Some((state.clone(), message.clone())) {
        return None;
    }
    Some(if state == conditions::TRUE {
        let text = if message.is_empty() {
            "Access credentials sync successful.".to_owned()
        } else {
            format!("Access credentials sync successful: {message}")
        };
        crate::cluster_api::VmiEvent::normal("AccessCredentialsSyncSuccess", text)
    } else {
        crate::cluster_api::VmiEvent::warning(
            "AccessCredentialsSyncFailed",
            format!("Access credentials sync failed: {message}"),
        )
    })
}

/// `status.reason` of a VMI whose launcher stopped answering.
pub const REASON_LAUNCHER_UNRESPONSIVE: &str = "LauncherUnresponsive";
/// `status.reason` of a running VMI whose domain vanished.
pub const REASON_DOMAIN_DISAPPEARED: &str = "DomainDisappeared";

/// Whether a status with no new phase may wait: while the VMI stays Scheduled (its domain is
/// being defined or started), what changes (the machine, the launcher image, the Ready and
/// LiveMigratable conditions) goes with the write that makes it Running or Failed a moment
/// later, so a start costs virt-handler one status write.
#[must_use]
pub fn waits_for_the_start(
    current: Option<&VirtualMachineInstanceStatus>,
    next: &VirtualMachineInstanceStatus,
) -> bool {
    let scheduled = Some(Phase::Scheduled);
    current.and_then(|c| c.phase) == scheduled && next.phase == scheduled
}

#[cfg(test)]
mod tests;
