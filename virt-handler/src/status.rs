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
/// machine type, interfaces, launcher image and the Ready, Paused and AgentConnected conditions.
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

#[cfg(test)]
mod tests {
    use cmd_protocol::domain::{DomainMetadata, DomainSpecSummary, DomainStatusSnapshot};

    use super::*;

    fn domain(state: DomainState, reason: StateReason) -> DomainSnapshot {
        DomainSnapshot {
            metadata: DomainMetadata {
                grace_period_seconds: Some(30),
                ..DomainMetadata::default()
            },
            spec: DomainSpecSummary {
                has_acpi: true,
                machine: Some("pc-q35-7.2".to_owned()),
                ..DomainSpecSummary::default()
            },
            status: DomainStatusSnapshot::from_state(state, reason),
        }
    }

    #[test]
    fn without_a_domain_the_phase_follows_the_launcher() {
        use LauncherView::{Responsive, Starting, Unresponsive};
        assert_eq!(
            compute_phase(Phase::Scheduled, None, Starting),
            None,
            "keep, and requeue"
        );
        assert_eq!(compute_phase(Phase::Scheduled, None, Unresponsive), Some(Phase::Failed));
        assert_eq!(
            compute_phase(Phase::Scheduled, None, Responsive),
            None,
            "already Scheduled"
        );
        assert_eq!(
            compute_phase(Phase::Running, None, Responsive),
            Some(Phase::Failed),
            "the domain disappeared"
        );
    }

    #[test]
    fn with_a_domain_the_phase_follows_upstreams_table() {
        let d = |s, r| Some(domain(s, r));
        let running = d(DomainState::Running, StateReason::Unknown);
        assert_eq!(
            compute_phase(Phase::Scheduled, running.as_ref(), LauncherView::Responsive),
            Some(Phase::Running)
        );
        assert_eq!(
            compute_phase(Phase::Running, running.as_ref(), LauncherView::Responsive),
            None
        );
        let off = d(DomainState::Shutoff, StateReason::Shutdown);
        assert_eq!(
            compute_phase(Phase::Running, off.as_ref(), LauncherView::Responsive),
            Some(Phase::Succeeded)
        );
        let killed = d(DomainState::Shutoff, StateReason::Destroyed);
        assert_eq!(
            compute_phase(Phase::Running, killed.as_ref(), LauncherView::Responsive),
            Some(Phase::Failed)
        );
        let gone = d(DomainState::NoState, StateReason::NonExistent);
        assert_eq!(
            compute_phase(Phase::Running, gone.as_ref(), LauncherView::Responsive),
            Some(Phase::Failed)
        );
        assert_eq!(
            compute_phase(Phase::Succeeded, gone.as_ref(), LauncherView::Unresponsive),
            None,
            "final is final"
        );
    }

    #[test]
    fn final_phases_never_change_whatever_is_observed() {
        for final_phase in [Phase::Succeeded, Phase::Failed] {
            for state in DomainState::ALL {
                for reason in StateReason::ALL {
                    for launcher in [
                        LauncherView::Responsive,
                        LauncherView::Starting,
                        LauncherView::Unresponsive,
                    ] {
                        assert_eq!(compute_phase(final_phase, Some(&domain(state, reason)), launcher), None);
                        assert_eq!(compute_phase(final_phase, None, launcher), None);
                    }
                }
            }
        }
    }

    #[test]
    fn next_status_records_the_transition_the_node_the_machine_and_pause() {
        let vmi = VirtualMachineInstance {
            status: Some(VirtualMachineInstanceStatus {
                phase: Some(Phase::Scheduled),
                ..Default::default()
            }),
            ..VirtualMachineInstance::default()
        };
        let now = Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
        let paused = domain(DomainState::Paused, StateReason::User);
        let status = next_status(
            &vmi,
            "node1",
            Some(&paused),
            LauncherView::Responsive,
            &now,
            &BTreeMap::new(),
        );
        assert_eq!(status.phase, Some(Phase::Running));
        assert_eq!(status.phase_transition_timestamps.len(), 1);
        assert_eq!(status.node_name.as_deref(), Some("node1"));
        assert_eq!(
            status.machine.and_then(|m| m.machine_type).as_deref(),
            Some("pc-q35-7.2")
        );
        let condition = status
            .conditions
            .iter()
            .find(|c| c.condition_type == "Paused")
            .expect("Paused condition");
        assert_eq!(condition.reason.as_deref(), Some("PausedByUser"));

        let unresponsive = next_status(&vmi, "node1", None, LauncherView::Unresponsive, &now, &BTreeMap::new());
        assert_eq!(unresponsive.phase, Some(Phase::Failed));
        assert_eq!(unresponsive.reason.as_deref(), Some("LauncherUnresponsive"));
    }

    #[test]
    fn the_guest_agent_credentials_outcome_is_a_condition_with_an_event_per_change() {
        let vmi = VirtualMachineInstance {
            status: Some(VirtualMachineInstanceStatus {
                phase: Some(Phase::Running),
                ..Default::default()
            }),
            ..VirtualMachineInstance::default()
        };
        let now = Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
        let with = |succeeded: bool, message: &str| {
            let mut running = domain(DomainState::Running, StateReason::Unknown);
            running.metadata.access_credential = Some(cmd_protocol::domain::AccessCredentialStatus {
                succeeded,
                message: message.to_owned(),
            });
            next_status(
                &vmi,
                "node1",
                Some(&running),
                LauncherView::Responsive,
                &now,
                &BTreeMap::new(),
            )
        };
        let condition = |status: &VirtualMachineInstanceStatus| {
            status
                .conditions
                .iter()
                .find(|c| c.condition_type == "AccessCredentialsSynchronized")
                .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
        };
        let offline = with(false, "Guest agent is offline");
        assert_eq!(
            condition(&offline),
            Some(("False".to_owned(), None, Some("Guest agent is offline".to_owned())))
        );
        let event = access_credentials_event(vmi.status.as_ref(), &offline).expect("an event");
        assert_eq!(
            (event.event_type, event.reason.as_str(), event.message.as_str()),
            (
                "Warning",
                "AccessCredentialsSyncFailed",
                "Access credentials sync failed: Guest agent is offline"
            )
        );
        assert_eq!(access_credentials_event(Some(&offline), &offline), None, "unchanged");
        let synced = with(true, "");
        assert_eq!(condition(&synced), Some(("True".to_owned(), None, None)));
        let event = access_credentials_event(Some(&offline), &synced).expect("an event");
        assert_eq!(
            (event.reason.as_str(), event.message.as_str()),
            ("AccessCredentialsSyncSuccess", "Access credentials sync successful.")
        );
        let without = next_status(
            &vmi,
            "node1",
            Some(&domain(DomainState::Running, StateReason::Unknown)),
            LauncherView::Responsive,
            &now,
            &BTreeMap::new(),
        );
        assert_eq!(condition(&without), None, "no guest agent credentials, no condition");
    }

    #[test]
    fn the_pod_network_interface_reports_the_pod_address() {
        let vmi = VirtualMachineInstance {
            status: Some(VirtualMachineInstanceStatus {
                phase: Some(Phase::Running),
                ..Default::default()
            }),
            ..VirtualMachineInstance::default()
        };
        let mut running = domain(DomainState::Running, StateReason::Unknown);
        running.spec.interfaces = vec![
            cmd_protocol::domain::DomainInterface {
                name: "default".to_owned(),
                mac: Some("02:00:00:aa:bb:cc".to_owned()),
            },
            cmd_protocol::domain::DomainInterface {
                name: "blue".to_owned(),
                mac: Some("02:00:00:aa:bb:cd".to_owned()),
            },
        ];
        let addresses = BTreeMap::from([("default".to_owned(), vec!["10.244.0.5".to_owned()])]);
        let now = Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
        let status = next_status(
            &vmi,
            "node1",
            Some(&running),
            LauncherView::Responsive,
            &now,
            &addresses,
        );
        let default = &status.interfaces[0];
        assert_eq!(default.name.as_deref(), Some("default"));
        assert_eq!(default.ip_address.as_deref(), Some("10.244.0.5"));
        assert_eq!(default.ip_addresses, ["10.244.0.5"]);
        assert_eq!(default.mac.as_deref(), Some("02:00:00:aa:bb:cc"));
        assert_eq!(default.info_source.as_deref(), Some("domain"));
        assert_eq!(status.interfaces[1].ip_address, None, "not on the pod network");
    }
}
