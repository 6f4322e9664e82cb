//! The phase table, the status the handler writes, and its conditions.

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
fn next_status_says_whether_and_how_the_vmi_migrates() {
    let mut vmi: VirtualMachineInstance = serde_json::from_value(serde_json::json!({
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
        "metadata": {"name": "v", "namespace": "default"},
        "spec": {
            "domain": {"devices": {"disks": [{"name": "root", "disk": {}}],
                                   "interfaces": [{"name": "default", "bridge": {}}]}},
            "networks": [{"name": "default", "pod": {}}],
            "volumes": [{"name": "root", "containerDisk": {"image": "example/disk"}}]
        },
        "status": {"phase": "Running"}
    }))
    .expect("vmi");
    let now = Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
    let running = domain(DomainState::Running, StateReason::Unknown);
    let condition = |status: &VirtualMachineInstanceStatus| {
        status
            .conditions
            .iter()
            .find(|c| c.condition_type == "LiveMigratable")
            .cloned()
            .expect("LiveMigratable")
    };
    let status = next_status(
        &vmi,
        "n",
        Some(&running),
        LauncherView::Responsive,
        &now,
        &BTreeMap::new(),
    );
    let bridged = condition(&status);
    assert_eq!(
        (bridged.status.as_str(), bridged.reason.as_deref()),
        ("False", Some("InterfaceNotLiveMigratable"))
    );
    assert_eq!(status.migration_method.as_deref(), Some("BlockMigration"));
    vmi.spec.domain.devices.interfaces[0].bridge = None;
    vmi.spec.domain.devices.interfaces[0].masquerade = Some(kubevirt_api::v1::EmptyObject::default());
    let status = next_status(
        &vmi,
        "n",
        Some(&running),
        LauncherView::Responsive,
        &now,
        &BTreeMap::new(),
    );
    let masquerade = condition(&status);
    assert_eq!((masquerade.status.as_str(), masquerade.reason), ("True", None));
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

#[test]
fn only_a_new_phase_is_written_while_the_vmi_is_scheduled() {
    let status = |phase| VirtualMachineInstanceStatus {
        phase: Some(phase),
        ..VirtualMachineInstanceStatus::default()
    };
    let scheduled = status(Phase::Scheduled);
    let mut starting = scheduled.clone();
    starting.machine = Some(Machine {
        machine_type: Some("q35".to_owned()),
    });
    assert!(waits_for_the_start(Some(&scheduled), &starting));
    for next in [Phase::Running, Phase::Failed, Phase::Succeeded] {
        assert!(!waits_for_the_start(Some(&scheduled), &status(next)), "{next:?}");
    }
    for current in [Phase::Pending, Phase::Scheduling, Phase::Running] {
        assert!(
            !waits_for_the_start(Some(&status(current)), &status(current)),
            "{current:?}"
        );
    }
    assert!(!waits_for_the_start(None, &scheduled));
}
