//! The run loop against the fake domain manager, on tokio's paused clock: the ACPI cadence, grace
//! expiry, second stop requests and guests that stop on their own.

use std::time::Duration;

use kubevirt_api::domain_state::StateReason;
use kubevirt_api::v1::VirtualMachineInstancePhase::{Failed, Succeeded};
use tokio::sync::mpsc::unbounded_channel;
use virt_launcher::libvirt::{AcpiBehaviour, DomainManager, FakeDomainManager};
use virt_launcher::supervisor::lifecycle::Policy;
use virt_launcher::supervisor::supervise::supervise;

const POLICY: Policy = Policy {
    grace: Duration::from_secs(12),
    has_acpi: true,
};

async fn running(
    acpi: AcpiBehaviour,
) -> (
    FakeDomainManager,
    tokio::sync::mpsc::UnboundedReceiver<virt_launcher::libvirt::LifecycleEvent>,
) {
    let (events_tx, events) = unbounded_channel();
    let fake = FakeDomainManager::new(acpi, events_tx);
    fake.define("<domain/>".to_owned()).await.expect("define");
    fake.start(false).await.expect("start");
    (fake, events)
}

#[tokio::test(start_paused = true)]
async fn a_stop_presses_the_power_button_once_for_a_cooperative_guest() {
    let (fake, mut events) = running(AcpiBehaviour::PowerOff).await;
    let (stop, mut stops) = unbounded_channel();
    stop.send(()).expect("stop");
    let phase = supervise(&fake, &mut events, &mut stops, POLICY)
        .await
        .expect("supervise");
    assert_eq!(phase, Succeeded);
    assert_eq!(fake.calls(), ["define", "start", "shutdown"]);
}

#[tokio::test(start_paused = true)]
async fn an_ignoring_guest_gets_the_button_every_five_seconds_then_is_destroyed() {
    let (fake, mut events) = running(AcpiBehaviour::Ignore).await;
    let (stop, mut stops) = unbounded_channel();
    stop.send(()).expect("stop");
    let begin = tokio::time::Instant::now();
    let phase = supervise(&fake, &mut events, &mut stops, POLICY)
        .await
        .expect("supervise");
    assert_eq!(phase, Failed, "destroyed after its grace period: it had to be killed");
    let calls = fake.calls();
    assert_eq!(
        calls.iter().filter(|c| **c == "shutdown").count(),
        3,
        "at 0, 5 and 10 s: {calls:?}"
    );
    assert_eq!(calls.last(), Some(&"destroy"));
    let took = begin.elapsed();
    assert!(
        took >= POLICY.grace && took < POLICY.grace + Duration::from_secs(1),
        "{took:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_second_stop_request_destroys_without_waiting_for_the_grace_period() {
    let (fake, mut events) = running(AcpiBehaviour::Ignore).await;
    let (stop, mut stops) = unbounded_channel();
    stop.send(()).expect("stop");
    stop.send(()).expect("second stop");
    let begin = tokio::time::Instant::now();
    let phase = supervise(&fake, &mut events, &mut stops, POLICY)
        .await
        .expect("supervise");
    assert_eq!(phase, Failed);
    assert!(begin.elapsed() < Duration::from_secs(2), "{:?}", begin.elapsed());
    assert_eq!(fake.calls().last(), Some(&"destroy"));
}

#[tokio::test(start_paused = true)]
async fn a_crashed_guest_ends_failed_without_any_stop() {
    let (fake, mut events) = running(AcpiBehaviour::PowerOff).await;
    let (_stop, mut stops) = unbounded_channel::<()>();
    fake.stop_on_its_own(StateReason::Crashed);
    let phase = supervise(&fake, &mut events, &mut stops, POLICY)
        .await
        .expect("supervise");
    assert_eq!(phase, Failed);
    assert_eq!(fake.calls(), ["define", "start"], "nothing is sent to a crashed guest");
}

#[tokio::test(start_paused = true)]
async fn a_guest_that_powers_off_ends_succeeded() {
    let (fake, mut events) = running(AcpiBehaviour::PowerOff).await;
    let (_stop, mut stops) = unbounded_channel::<()>();
    fake.stop_on_its_own(StateReason::Shutdown);
    assert_eq!(
        supervise(&fake, &mut events, &mut stops, POLICY)
            .await
            .expect("supervise"),
        Succeeded
    );
}

#[tokio::test(start_paused = true)]
async fn without_acpi_a_stop_destroys_at_once_and_that_is_succeeded() {
    let (fake, mut events) = running(AcpiBehaviour::PowerOff).await;
    let (stop, mut stops) = unbounded_channel();
    stop.send(()).expect("stop");
    let no_acpi = Policy {
        grace: Duration::from_secs(12),
        has_acpi: false,
    };
    assert_eq!(
        supervise(&fake, &mut events, &mut stops, no_acpi)
            .await
            .expect("supervise"),
        Succeeded
    );
    assert_eq!(fake.calls(), ["define", "start", "destroy"]);
}
