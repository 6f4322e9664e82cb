//! The real libvirt adapter on libvirt's in-process `test:///default` driver (no daemon, no QEMU):
//! every lifecycle operation, the state each one leaves, and the lifecycle events libvirt emits.

use std::time::Duration;

use kubevirt_api::domain_state::{DomainState, StateReason};
use virt_launcher::libvirt::{DomainManager, DomainStatus, LibvirtDomainManager, LifecycleEvent};

const XML: &str = "<domain type='test'><name>default_adapter</name><memory unit='MiB'>64</memory>\
                   <os><type arch='x86_64'>hvm</type></os></domain>";

fn status(state: DomainState, reason: StateReason) -> DomainStatus {
    DomainStatus { state, reason }
}

async fn next_event(events: &mut tokio::sync::mpsc::UnboundedReceiver<LifecycleEvent>) -> LifecycleEvent {
    tokio::time::timeout(Duration::from_secs(5), events.recv())
        .await
        .expect("an event in time")
        .expect("event channel open")
}

#[tokio::test]
async fn every_lifecycle_operation_changes_the_state_and_emits_an_event() {
    let (events_tx, mut events) = tokio::sync::mpsc::unbounded_channel();
    let manager = LibvirtDomainManager::new(
        "test:///default",
        "default_adapter",
        std::path::PathBuf::from("/nonexistent/qemu.pid"),
        events_tx,
    )
    .expect("adapter");
    manager.connect().await.expect("connect");
    assert_eq!(manager.status().await.expect("status"), DomainStatus::NON_EXISTENT);

    manager.define(XML.to_owned()).await.expect("define");
    assert_eq!(next_event(&mut events).await.event, 0, "VIR_DOMAIN_EVENT_DEFINED");
    assert_eq!(manager.status().await.expect("status").state, DomainState::Shutoff);

    // (The test driver has no start-paused; local_run starts a real paused domain.)
    manager.start(false).await.expect("start");
    assert_eq!(manager.status().await.expect("status").state, DomainState::Running);
    manager.pause().await.expect("pause");
    assert_eq!(
        manager.status().await.expect("status"),
        status(DomainState::Paused, StateReason::User)
    );
    manager.resume().await.expect("resume");

    // (The test driver has no ACPI power button; local_run presses it on real QEMU.)
    manager.destroy().await.expect("destroy");
    assert_eq!(
        manager.status().await.expect("status"),
        status(DomainState::Shutoff, StateReason::Destroyed)
    );

    manager.undefine(false).await.expect("undefine");
    assert_eq!(manager.status().await.expect("status"), DomainStatus::NON_EXISTENT);

    let mut kinds = Vec::new();
    while let Ok(Some(event)) = tokio::time::timeout(Duration::from_millis(200), events.recv()).await {
        kinds.push(event.event);
    }
    for (code, name) in [
        (2, "started"),
        (3, "suspended"),
        (4, "resumed"),
        (5, "stopped"),
        (1, "undefined"),
    ] {
        assert!(kinds.contains(&code), "no {name} event in {kinds:?}");
    }
}

#[tokio::test]
async fn libvirt_errors_come_back_as_errors_naming_the_operation() {
    let (events_tx, _events) = tokio::sync::mpsc::unbounded_channel();
    let manager = LibvirtDomainManager::new(
        "test:///default",
        "default_missing",
        std::path::PathBuf::from("/nonexistent/qemu.pid"),
        events_tx,
    )
    .expect("adapter");
    let err = manager.start(false).await.expect_err("no such domain");
    assert!(err.to_string().starts_with("libvirt start failed: "), "{err}");
    let bad = manager
        .define("<domain><name>broken".to_owned())
        .await
        .expect_err("malformed XML");
    assert!(bad.to_string().starts_with("libvirt define failed"), "{bad}");
}

#[tokio::test]
async fn an_unreachable_daemon_is_a_connect_error_naming_the_uri() {
    let (events_tx, _events) = tokio::sync::mpsc::unbounded_channel();
    let uri = "qemu+unix:///system?socket=/nonexistent/libvirt-sock";
    let manager = LibvirtDomainManager::new(
        uri,
        "default_x",
        std::path::PathBuf::from("/nonexistent/qemu.pid"),
        events_tx,
    )
    .expect("adapter");
    let err = manager.connect().await.expect_err("no daemon");
    assert!(err.to_string().contains(uri), "{err}");
}
