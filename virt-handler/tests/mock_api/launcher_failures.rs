//! Launchers that fail a call, stop answering or answer late: the events and status writes the
//! API server sees.

use kube::runtime::watcher::Event;
use pretty_assertions::assert_eq;
use serde_json::json;

use super::{Seen, UID, bring_up, handler, normalise_events, scheduled_vmi, taken};

#[tokio::test]
async fn a_failed_sync_names_its_cause_in_the_event_and_is_retried() {
    let (handler, _domain_events, _clock, seen) = handler();
    handler.launchers().refuse_devices(UID);
    handler.on_vmi_event(Event::Apply(scheduled_vmi()));
    assert!(handler.reconcile("default/testvmi").await.is_some(), "retried");
    let failed: Vec<Seen> = taken(&seen)
        .into_iter()
        .filter(|s| s.body["reason"] == json!("SyncFailed"))
        .collect();
    assert_eq!(failed.len(), 1, "{failed:#?}");
    let message = failed[0].body["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("cannot give /proc/1/root/dev/kvm to uid 107") && message.contains("EPERM"),
        "the event says what failed and why: {message}"
    );
}

#[tokio::test]
async fn a_launcher_that_stops_answering_turns_its_vmi_failed_with_a_reason() {
    let (handler, mut domain_events, clock, seen) = handler();
    let key = "default/testvmi";
    bring_up(&handler, &mut domain_events, &seen).await;

    handler.launchers().stop_answering(UID);
    assert_eq!(
        handler.reconcile(key).await,
        Some(std::time::Duration::from_secs(1)),
        "a failed call is retried"
    );
    let mut failed_sync = taken(&seen);
    normalise_events(&mut failed_sync);
    assert_eq!(failed_sync[0].body["reason"], json!("SyncFailed"));
    assert_eq!(failed_sync.len(), 1, "the status did not change yet: {failed_sync:#?}");

    clock.advance(std::time::Duration::from_secs(30));
    handler.reconcile(key).await;
    handler.reconcile(key).await;
    let written: Vec<Seen> = taken(&seen).into_iter().filter(|s| s.method == "PUT").collect();
    let status = &written.last().expect("a status write").body["status"];
    assert_eq!(status["phase"], json!("Failed"));
    assert_eq!(status["reason"], json!("LauncherUnresponsive"));
}

/// A launcher that answers, if only with an error or too late, is there: only an unreachable
/// socket counts towards an unresponsive launcher, as upstream's failed dial. Fifty VMs starting
/// at once on two cores made slow launchers time out calls for over 30 s, and they were failed.
#[tokio::test]
async fn a_launcher_that_answers_late_or_with_errors_is_not_declared_unresponsive() {
    for slow in [true, false] {
        let (handler, _domain_events, clock, seen) = handler();
        let key = "default/testvmi";
        if slow {
            handler.launchers().answer_late(UID);
        } else {
            handler.launchers().refuse_devices(UID);
        }
        handler.on_vmi_event(Event::Apply(scheduled_vmi()));
        for _ in 0..3 {
            assert!(handler.reconcile(key).await.is_some(), "retried");
            clock.advance(std::time::Duration::from_secs(30));
        }
        handler.reconcile(key).await;
        let written = taken(&seen);
        assert!(
            written
                .iter()
                .all(|s| s.body["status"]["reason"] != json!("LauncherUnresponsive")
                    && s.body["status"]["phase"] != json!("Failed")),
            "slow: {slow}: {written:#?}"
        );
        let reported = written
            .iter()
            .filter(|s| s.body["reason"] == json!("SyncFailed"))
            .filter_map(|s| s.body["message"].as_str())
            .any(|m| !slow || m.contains("Timeout expired"));
        assert!(reported, "slow: {slow}: the failures are reported: {written:#?}");
    }
}

#[tokio::test]
async fn a_claim_image_made_smaller_than_asked_is_said_in_a_normal_event() {
    let (handler, _domain_events, _clock, seen) = handler();
    let notice =
        "PV size too small: expected 104857600 B, found 99614720 B. Using it anyway, it is within 10 % toleration";
    handler.launchers().tolerate_small_volume(UID, notice);
    handler.on_vmi_event(Event::Apply(scheduled_vmi()));
    handler.reconcile("default/testvmi").await;
    let tolerated: Vec<Seen> = taken(&seen)
        .into_iter()
        .filter(|s| s.body["reason"] == json!("ToleratedSmallPV"))
        .collect();
    assert_eq!(tolerated.len(), 1, "{tolerated:#?}");
    assert_eq!(tolerated[0].body["type"], json!("Normal"));
    assert_eq!(tolerated[0].body["message"], json!(notice));
}
