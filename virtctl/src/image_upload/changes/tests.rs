use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use serde_json::json;

use super::*;

#[path = "../../../../kubevirt-tests/support/mock_api_server.rs"]
mod mock_api_server;

/// Longer than any test may take: a wait that sleeps it out fails the test's own deadline.
const FOREVER: Duration = Duration::from_secs(3600);
const DEADLINE: Duration = Duration::from_secs(60);

fn claim(phase: &str) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
           "metadata": {"name": "disk", "namespace": "vms", "annotations": {"cdi.kubevirt.io/storage.pod.phase": phase}}})
}

fn changes(answers: Vec<(u16, serde_json::Value)>) -> (Changes<PersistentVolumeClaim>, mock_api_server::Log) {
    let (client, log) = mock_api_server::api_server(answers);
    (Changes::new(Api::namespaced(client, "vms"), "disk"), log)
}

#[tokio::test]
async fn a_change_ends_the_wait_at_once() {
    let (mut waits, log) = changes(vec![(200, json!({"type": "MODIFIED", "object": claim("Succeeded")}))]);
    tokio::time::timeout(DEADLINE, waits.next(FOREVER))
        .await
        .expect("the change ended the wait, not the poll");
    let paths: Vec<String> = log.lock().expect("log").iter().map(|r| r.path.clone()).collect();
    assert_eq!(
        paths,
        [
            "/api/v1/namespaces/vms/persistentvolumeclaims?&watch=true&timeoutSeconds=290&fieldSelector=metadata.name%3Ddisk&allowWatchBookmarks=true&resourceVersion=0"
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_bookmark_is_no_change_and_an_ended_watch_is_opened_again() {
    let bookmark = json!({"type": "BOOKMARK", "object": {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"resourceVersion": "12"}}});
    let (mut waits, log) = changes(vec![
        (200, bookmark),
        (200, json!({"type": "ADDED", "object": claim("Running")})),
    ]);
    let started = tokio::time::Instant::now();
    waits.next(Duration::from_secs(2)).await;
    // The bookmark changed nothing, and the watch then ended: the poll was slept out.
    assert!(started.elapsed() >= Duration::from_secs(2), "{:?}", started.elapsed());
    let started = tokio::time::Instant::now();
    waits.next(FOREVER).await;
    assert!(started.elapsed() < FOREVER, "the reopened watch's event ended the wait");
    assert_eq!(log.lock().expect("log").len(), 2, "opened twice");
}

#[tokio::test(start_paused = true)]
async fn a_refused_watch_leaves_plain_polls() {
    let forbidden = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Forbidden",
        "code": 403, "message": "cannot watch"});
    let (mut waits, log) = changes(vec![(403, forbidden)]);
    for _ in 0..3 {
        let started = tokio::time::Instant::now();
        waits.next(Duration::from_secs(2)).await;
        assert!(started.elapsed() >= Duration::from_secs(2));
    }
    assert_eq!(log.lock().expect("log").len(), 1, "asked once, then only polls");
}

#[tokio::test(start_paused = true)]
async fn an_error_event_closes_the_watch_and_sleeps_the_poll_out() {
    let gone = json!({"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "status": "Failure",
        "reason": "Expired", "code": 410, "message": "too old"}});
    let (mut waits, log) = changes(vec![
        (200, gone),
        (200, json!({"type": "MODIFIED", "object": claim("Succeeded")})),
    ]);
    let started = tokio::time::Instant::now();
    waits.next(Duration::from_secs(2)).await;
    assert!(started.elapsed() >= Duration::from_secs(2));
    waits.next(FOREVER).await;
    assert_eq!(log.lock().expect("log").len(), 2, "opened again after the error");
}
