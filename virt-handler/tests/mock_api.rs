//! The handler against kube-rs's client on a `tower-test` mock API server: every request the
//! handler sends is captured and compared, body and all, with what upstream's virt-handler sends.

use std::sync::{Arc, Mutex};

use http::{Request, Response};
use k8s_openapi::jiff::Timestamp;
use kube::client::Body;
use kube::runtime::watcher::Event;
use kubevirt_api::domain_state::{DomainState, StateReason};
use kubevirt_api::v1::VirtualMachineInstance;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedReceiver;
use virt_handler::clock::ManualClock;
use virt_handler::cluster_api::{ClusterApi, KubeClusterApi};
use virt_handler::launchers::FakeLaunchers;
use virt_handler::notify_server::DomainNotification;
use virt_handler::reconciler::{Reconciler, ReconcilerConfig};

#[path = "../../kubevirt-tests/support/rbac.rs"]
mod rbac;

/// Launchers that fail: calls refused, never answered, answered late.
#[path = "mock_api/launcher_failures.rs"]
mod launcher_failures;

const NODE: &str = "node01";
const UID: &str = "5b2c8a8e-2d4f-4d6e-9a51-0c6f1e2d3a4b";

/// One request as the API server saw it.
#[derive(Debug, PartialEq)]
struct Seen {
    method: String,
    path: String,
    body: Value,
}

/// Answers like an API server and records every request.
fn api_server() -> (kube::Client, Arc<Mutex<Vec<Seen>>>) {
    let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    tokio::spawn(async move {
        let mut version = 100;
        while let Some((request, respond)) = handle.next_request().await {
            let method = request.method().to_string();
            let path = request.uri().path().to_owned();
            if let Some(refusal) = rbac::forbidden("kubevirt-handler", &method, request.uri()) {
                record.lock().expect("seen").push(Seen {
                    method,
                    path,
                    body: refusal.clone(),
                });
                let response = Response::builder()
                    .status(403)
                    .body(Body::from(refusal.to_string().into_bytes()))
                    .expect("response");
                respond.send_response(response);
                continue;
            }
            let bytes = request.into_body().collect_bytes().await.expect("body");
            let body: Value = if bytes.is_empty() {
                Value::Null
            } else {
                serde_json::from_slice(&bytes).expect("JSON body")
            };
            let mut answer = body.clone();
            if method == "PUT" {
                version += 1;
                answer["metadata"]["resourceVersion"] = json!(version.to_string());
            }
            if method == "POST" {
                answer["metadata"]["name"] = json!("testvmi.1");
            }
            if method == "PATCH" {
                answer = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE}});
            }
            record.lock().expect("seen").push(Seen { method, path, body });
            let response = Response::builder()
                .status(200)
                .body(Body::from(serde_json::to_vec(&answer).expect("answer")))
                .expect("response");
            respond.send_response(response);
        }
    });
    (kube::Client::new(service, "default"), seen)
}

fn start() -> Timestamp {
    "2026-11-21T10:00:00Z".parse().expect("time")
}

fn scheduled_vmi() -> VirtualMachineInstance {
    serde_json::from_value(json!({
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstance",
        "metadata": {
            "name": "testvmi",
            "namespace": "default",
            "uid": UID,
            "resourceVersion": "42",
            "labels": {"kubevirt.io/nodeName": NODE}
        },
        "spec": {"domain": {"devices": {}, "resources": {"requests": {"memory": "128Mi"}}}},
        "status": {
            "phase": "Scheduled",
            "nodeName": NODE,
            "activePods": {"pod-uid": NODE},
            "phaseTransitionTimestamps": [{"phase": "Scheduled", "phaseTransitionTimestamp": "2026-11-21T09:59:58Z"}]
        }
    }))
    .expect("VMI")
}

type Handler = Reconciler<KubeClusterApi, FakeLaunchers, Arc<ManualClock>>;

/// The reconciler, the domain events its fake launchers send, its clock and what the API saw.
type Setup = (
    Handler,
    UnboundedReceiver<DomainNotification>,
    Arc<ManualClock>,
    Arc<Mutex<Vec<Seen>>>,
);

fn handler() -> Setup {
    let (client, seen) = api_server();
    let (events, domain_events) = tokio::sync::mpsc::unbounded_channel();
    let launchers = FakeLaunchers::new(events);
    launchers.start_launcher(UID);
    let clock = Arc::new(ManualClock::new(start()));
    let reconciler = Reconciler::new(
        ReconcilerConfig::for_node(NODE),
        KubeClusterApi::new(client),
        launchers,
        clock.clone(),
    );
    (reconciler, domain_events, clock, seen)
}

/// The scheduled VMI is synced, its domain reported and the VMI written Running; what was sent
/// on the way is dropped.
async fn bring_up(
    handler: &Handler,
    domain_events: &mut UnboundedReceiver<DomainNotification>,
    seen: &Arc<Mutex<Vec<Seen>>>,
) {
    handler.on_vmi_event(Event::Apply(scheduled_vmi()));
    handler.reconcile("default/testvmi").await;
    handler.on_domain_event(domain_events.try_recv().expect("ADDED"));
    handler.reconcile("default/testvmi").await;
    taken(seen);
}

fn taken(seen: &Arc<Mutex<Vec<Seen>>>) -> Vec<Seen> {
    std::mem::take(&mut *seen.lock().expect("seen"))
}

fn event(reason: &str, kind: &str, message: &str) -> Seen {
    Seen {
        method: "POST".to_owned(),
        path: "/api/v1/namespaces/default/events".to_owned(),
        body: json!({
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": "testvmi.", "namespace": "default"},
            "involvedObject": {
                "apiVersion": "kubevirt.io/v1",
                "kind": "VirtualMachineInstance",
                "name": "testvmi",
                "namespace": "default",
                "uid": UID,
                "resourceVersion": "__rv__"
            },
            "type": kind,
            "reason": reason,
            "message": message,
            "source": {"component": "virt-handler", "host": NODE},
            "reportingComponent": "virt-handler",
            "reportingInstance": NODE,
            "firstTimestamp": "__now__",
            "lastTimestamp": "__now__",
            "count": 1
        }),
    }
}

/// Event bodies carry the wall-clock time and the VMI's resourceVersion at that moment; the test
/// checks their shape and fills those two in from what was sent.
fn normalise_events(seen: &mut [Seen]) {
    for request in seen.iter_mut().filter(|s| s.method == "POST") {
        let body = &mut request.body;
        assert!(
            body["firstTimestamp"]
                .as_str()
                .is_some_and(|t| t.parse::<Timestamp>().is_ok())
        );
        body["firstTimestamp"] = json!("__now__");
        body["lastTimestamp"] = json!("__now__");
        body["involvedObject"]["resourceVersion"] = json!("__rv__");
    }
}

#[tokio::test]
async fn a_scheduled_vmi_is_synced_and_written_running_with_exact_bodies() {
    let (handler, mut domain_events, clock, seen) = handler();
    let key = "default/testvmi";
    handler.on_vmi_event(Event::Apply(scheduled_vmi()));

    // First pass: the launcher defines and starts the domain; no domain reported yet, and the
    // VMI stays Scheduled, so its status waits for the Running write.
    assert_eq!(handler.reconcile(key).await, None);
    let mut first = taken(&seen);
    normalise_events(&mut first);
    assert_eq!(
        first,
        vec![event("Created", "Normal", "VirtualMachineInstance defined.")]
    );

    // The launcher reports the running domain: the VMI turns Running, in one write.
    let added = domain_events.try_recv().expect("ADDED");
    assert_eq!(added.kind, "ADDED");
    handler.on_domain_event(added);
    clock.advance(std::time::Duration::from_secs(2));
    assert_eq!(handler.reconcile(key).await, None);
    let mut second = taken(&seen);
    normalise_events(&mut second);
    // Nothing pins this VMI to its node, and it has no disk to copy.
    let live_migratable = json!({
        "type": "LiveMigratable",
        "status": "True",
        "lastTransitionTime": "2026-11-21T10:00:02Z"
    });
    let expected_body = json!({
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstance",
        "metadata": {
            "name": "testvmi",
            "namespace": "default",
            "uid": UID,
            "resourceVersion": "42",
            "labels": {"kubevirt.io/nodeName": NODE}
        },
        "spec": {"domain": {"devices": {}, "resources": {"requests": {"memory": "128Mi"}}}},
        "status": {
            "phase": "Running",
            "nodeName": NODE,
            "activePods": {"pod-uid": NODE},
            "phaseTransitionTimestamps": [
                {"phase": "Scheduled", "phaseTransitionTimestamp": "2026-11-21T09:59:58Z"},
                {"phase": "Running", "phaseTransitionTimestamp": "2026-11-21T10:00:02Z"}
            ],
            "conditions": [
                {"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-21T10:00:02Z"},
                live_migratable
            ],
            "migrationMethod": "LiveMigration",
            "machine": {"type": "pc-q35-7.2"}
        }
    });
    assert_eq!(
        second,
        vec![
            Seen {
                method: "PUT".to_owned(),
                path: "/apis/kubevirt.io/v1/namespaces/default/virtualmachineinstances/testvmi/status".to_owned(),
                body: expected_body,
            },
            event("Started", "Normal", "VirtualMachineInstance started."),
        ]
    );

    // Nothing changed: nothing is written.
    assert_eq!(handler.reconcile(key).await, None);
    assert_eq!(taken(&seen), vec![]);
}

#[tokio::test]
async fn a_crash_turns_the_vmi_failed_and_a_deleted_vmi_is_shut_down_then_succeeds() {
    let (handler, mut domain_events, clock, seen) = handler();
    let key = "default/testvmi";
    bring_up(&handler, &mut domain_events, &seen).await;

    // Deleting: ACPI is pressed, the guest powers off, the VMI succeeds.
    handler.on_vmi_event(Event::Apply({
        let mut vmi = handler_vmi(&handler, key);
        vmi.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(start()));
        vmi
    }));
    assert_eq!(handler.reconcile(key).await, Some(std::time::Duration::from_secs(5)));
    let mut shutting = taken(&seen);
    normalise_events(&mut shutting);
    assert_eq!(
        shutting,
        vec![event("ShuttingDown", "Normal", "Signaled Graceful Shutdown")]
    );
    let off = domain_events.try_recv().expect("MODIFIED");
    assert_eq!(off.snapshot.status.reason, "Shutdown");
    handler.on_domain_event(off);
    clock.advance(std::time::Duration::from_secs(1));
    handler.reconcile(key).await;
    let mut stopped = taken(&seen);
    normalise_events(&mut stopped);
    assert_eq!(stopped[0].body["status"]["phase"], json!("Succeeded"));
    assert_eq!(
        stopped[0].body["status"]["phaseTransitionTimestamps"][2],
        json!({"phase": "Succeeded", "phaseTransitionTimestamp": "2026-11-21T10:00:01Z"})
    );
    assert_eq!(
        stopped[0].body["status"]["conditions"],
        json!([{
            "type": "Ready", "status": "False", "lastTransitionTime": "2026-11-21T10:00:01Z",
            "reason": "GuestNotRunning", "message": "Guest VM is not reported as running"
        }, {
            "type": "LiveMigratable", "status": "True", "lastTransitionTime": "2026-11-21T10:00:00Z"
        }])
    );
    assert_eq!(
        stopped[1],
        event("Stopped", "Normal", "The VirtualMachineInstance was shut down.")
    );
}

fn handler_vmi(handler: &Handler, key: &str) -> VirtualMachineInstance {
    handler
        .node_view()
        .phases
        .into_iter()
        .map(|(vmi, _)| vmi.as_ref().clone())
        .find(|vmi| vmi.key() == key)
        .expect("known VMI")
}

#[tokio::test]
async fn a_crashed_domain_turns_the_vmi_failed() {
    let (handler, mut domain_events, _clock, seen) = handler();
    let key = "default/testvmi";
    bring_up(&handler, &mut domain_events, &seen).await;
    handler
        .launchers()
        .domain_changes(UID, DomainState::Shutoff, StateReason::Crashed);
    handler.on_domain_event(domain_events.try_recv().expect("MODIFIED"));
    handler.reconcile(key).await;
    let mut failed = taken(&seen);
    normalise_events(&mut failed);
    assert_eq!(failed[0].body["status"]["phase"], json!("Failed"));
    assert_eq!(
        failed[1],
        event("Stopped", "Warning", "The VirtualMachineInstance crashed.")
    );
}

#[tokio::test]
async fn the_heartbeat_patches_the_node_labels_and_annotation() {
    let (client, seen) = api_server();
    let api = KubeClusterApi::new(client);
    api.patch_node(
        NODE,
        virt_handler::heartbeat::node_patch(true, virt_handler::heartbeat::NodeFacts::default(), start()),
    )
    .await
    .expect("patch");
    assert_eq!(
        taken(&seen),
        vec![Seen {
            method: "PATCH".to_owned(),
            path: format!("/api/v1/nodes/{NODE}"),
            body: json!({"metadata": {
                "labels": {"kubevirt.io/schedulable": "true", "cpumanager": "false"},
                "annotations": {"kubevirt.io/heartbeat": "2026-11-21T10:00:00Z"}
            }}),
        }]
    );
}

#[tokio::test]
async fn the_watch_lists_only_this_nodes_vmis_by_label() {
    use futures::StreamExt as _;
    let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let api = KubeClusterApi::new(kube::Client::new(service, "default"));
    let server = tokio::spawn(async move {
        // Two watches: the node's VMIs, and those migrating to it.
        let mut queries = Vec::new();
        for _ in 0..2 {
            let (request, respond) = handle.next_request().await.expect("list request");
            let uri = request.uri().clone();
            let query = uri.query().unwrap_or_default().to_owned();
            let items = if query.contains("kubevirt.io%2FnodeName%3D") {
                vec![scheduled_vmi()]
            } else {
                Vec::new()
            };
            let list = json!({
                "apiVersion": "kubevirt.io/v1",
                "kind": "VirtualMachineInstanceList",
                "metadata": {"resourceVersion": "7"},
                "items": items
            });
            respond.send_response(
                Response::builder()
                    .body(Body::from(serde_json::to_vec(&list).expect("list")))
                    .expect("response"),
            );
            assert_eq!(uri.path(), "/apis/kubevirt.io/v1/virtualmachineinstances");
            queries.push(query);
        }
        queries
    });
    let mut stream = api.watch_vmis(NODE);
    match stream.next().await {
        Some(Ok(Event::Apply(vmi))) => assert_eq!(vmi.metadata.uid.as_deref(), Some(UID)),
        other => panic!("expected the listed VMI, got {other:?}"),
    }
    let mut queries = server.await.expect("server");
    queries.sort();
    assert!(
        queries[0].contains("labelSelector=kubevirt.io%2FmigrationTargetNodeName%3Dnode01"),
        "{queries:?}"
    );
    assert!(
        queries[1].contains("labelSelector=kubevirt.io%2FnodeName%3Dnode01"),
        "{queries:?}"
    );
}

/// Wiring the pod network is a step of its own, taken once before the first Sync of a VMI on the
/// pod network, and never for a VMI without one.
#[tokio::test]
async fn the_pod_network_is_wired_once_before_the_first_sync() {
    let (handler, mut domain_events, _clock, seen) = handler();
    let key = "default/testvmi";
    let mut on_pod_network = scheduled_vmi();
    on_pod_network.spec.networks = vec![kubevirt_api::v1::Network {
        name: "default".to_owned(),
        pod: Some(kubevirt_api::v1::PodNetwork::default()),
        ..kubevirt_api::v1::Network::default()
    }];
    on_pod_network.spec.domain.devices.interfaces = vec![kubevirt_api::v1::Interface {
        name: "default".to_owned(),
        masquerade: Some(kubevirt_api::v1::EmptyObject::default()),
        ..kubevirt_api::v1::Interface::default()
    }];
    handler.on_vmi_event(Event::Apply(on_pod_network));
    handler.reconcile(key).await;
    let launchers = handler.launchers();
    assert_eq!(
        (
            launchers.command_count("wire_pod_network"),
            launchers.command_count("sync")
        ),
        (1, 1)
    );
    handler.on_domain_event(domain_events.try_recv().expect("ADDED"));
    handler.reconcile(key).await;
    assert_eq!(launchers.command_count("wire_pod_network"), 1, "wired once");
    assert_eq!(launchers.command_count("sync"), 2);
    taken(&seen);

    let (plain, _events, _clock, _seen) = self::handler();
    plain.on_vmi_event(Event::Apply(scheduled_vmi()));
    plain.reconcile(key).await;
    assert_eq!(
        (
            plain.launchers().command_count("wire_pod_network"),
            plain.launchers().command_count("sync")
        ),
        (0, 1),
        "no pod network, no wiring"
    );
}
