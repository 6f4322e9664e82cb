//! Two virt-handlers, source (node-a) and target (node-b), over one in-memory API server, each
//! with its own simulated launcher of the VMI and real migration proxies on loopback: the target
//! prepares its launcher and publishes its proxies, the source opens its proxy sockets and
//! migrates, the launchers' reports reach the VMI's migration state, the target takes the VMI
//! over, and the source undefines its migrated domain. A connection to the source pod's libvirt
//! socket reaches the target pod's, through both proxies.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cmd_protocol::migration::Channel;
use kubevirt_api::v1::VirtualMachineInstance;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio_util::sync::CancellationToken;
use virt_handler::cluster_api::{ClusterApi, FakeClusterApi};
use virt_handler::launchers::{FakeLaunchers, Launchers};
use virt_handler::reconciler::{MigrationNetwork, Reconciler, ReconcilerConfig};
use virt_handler::runner::{RunOptions, channels, run};

const UID: &str = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d";
const KEY: &str = "prod/vm1";

struct Node {
    reconciler: Arc<Reconciler<FakeClusterApi, FakeLaunchers, kubevirt_api::clock::SystemClock>>,
    task: tokio::task::JoinHandle<()>,
}

fn start(api: &FakeClusterApi, node: &str, sockets: &std::path::Path, stop: &CancellationToken) -> Node {
    let (senders, inputs) = channels();
    let launchers = FakeLaunchers::new(senders.domains.clone());
    launchers.keep_migration_sockets_in(&sockets.join(node));
    launchers.start_launcher(UID);
    let mut config = ReconcilerConfig::for_node(node);
    config.retry = Duration::from_millis(50);
    config.migration = MigrationNetwork {
        address: Some(IpAddr::V4(Ipv4Addr::LOCALHOST)),
        tls: None,
    };
    let reconciler = Arc::new(Reconciler::new(
        config,
        api.clone(),
        launchers,
        kubevirt_api::clock::SystemClock,
    ));
    let task = tokio::spawn(run(
        reconciler.clone(),
        api.watch_vmis(node),
        inputs,
        RunOptions {
            workers: 2,
            resync: Duration::from_millis(200),
        },
        stop.clone(),
    ));
    Node { reconciler, task }
}

async fn wait_for<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let begin = Instant::now();
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(begin.elapsed() < Duration::from_secs(10), "no {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The VMI as virt-controller leaves it on node-a; the source handler starts it.
fn scheduled_vmi() -> VirtualMachineInstance {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
        "metadata": {"name": "vm1", "namespace": "prod", "uid": UID,
                     "labels": {"kubevirt.io/nodeName": "node-a"}},
        "spec": {"domain": {"devices": {}}},
        "status": {"phase": "Scheduled", "nodeName": "node-a", "runtimeUser": 0}
    }))
    .expect("vmi")
}

/// A unix listener that answers `libvirt:` and what it read, standing in for a libvirt daemon.
fn echo(path: &std::path::Path) {
    std::fs::create_dir_all(path.parent().expect("dir")).expect("dir");
    let listener = cmd_protocol::sockets::bind_unix(path).expect("bind");
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let mut buffer = [0_u8; 32];
            if let Ok(n) = stream.read(&mut buffer).await {
                let mut answer = b"libvirt:".to_vec();
                answer.extend_from_slice(&buffer[..n]);
                let _ = stream.write_all(&answer).await;
            }
        }
    });
}

type Nodes = (tempfile::TempDir, FakeClusterApi, CancellationToken, Node, Node);

/// node-a and node-b's handlers, the VMI running on node-a.
async fn two_nodes() -> Nodes {
    let sockets = tempfile::tempdir().expect("tempdir");
    let api = FakeClusterApi::new();
    api.apply(scheduled_vmi());
    let stop = CancellationToken::new();
    let source = start(&api, "node-a", sockets.path(), &stop);
    let target = start(&api, "node-b", sockets.path(), &stop);
    wait_for("the guest running on node-a", || {
        (api.vmi(KEY)?.status?.phase == Some(kubevirt_api::v1::VirtualMachineInstancePhase::Running)).then_some(())
    })
    .await;
    (sockets, api, stop, source, target)
}

/// virt-controller's hand-off: the VMI's migration state and its target node label.
fn hand_off(api: &FakeClusterApi, state: &serde_json::Value) {
    api.modify(KEY, |vmi| {
        vmi.metadata
            .labels
            .get_or_insert_default()
            .insert("kubevirt.io/migrationTargetNodeName".to_owned(), "node-b".to_owned());
        vmi.status.get_or_insert_default().migration_state = serde_json::from_value(state.clone()).expect("state");
    });
}

#[tokio::test]
#[allow(clippy::too_many_lines, reason = "one migration from the hand-off to the take-over")]
async fn two_handlers_move_a_vmi_from_the_source_node_to_the_target() {
    let (_sockets, api, stop, source, target) = two_nodes().await;
    // The target pod's libvirt daemon.
    let target_paths = target
        .reconciler
        .launchers()
        .migration_paths(&FakeLaunchers::socket_of(UID));
    echo(&target_paths.libvirt().path());

    // virt-controller's hand-off.
    hand_off(
        &api,
        &serde_json::json!({
            "migrationUid": "mig-1", "sourceNode": "node-a", "targetNode": "node-b",
            "migrationConfiguration": {"bandwidthPerMigration": "16Mi", "completionTimeoutPerGiB": 60,
                                       "progressTimeout": 30, "allowAutoConverge": true,
                                       "disableTLS": true}
        }),
    );
    let published = wait_for("the target's proxies", || {
        api.vmi(KEY)?.status?.migration_state?.target_node_address
    })
    .await;
    assert_eq!(published, "127.0.0.1");
    assert_eq!(target.reconciler.launchers().command_count("sync_migration_target"), 1);
    assert_eq!(
        target.reconciler.launchers().command_count("sync"),
        0,
        "no domain of its own"
    );

    let options = wait_for("the source's migrate call", || {
        source.reconciler.launchers().migrations(UID).first().cloned()
    })
    .await;
    assert_eq!(options.migration_uid, "mig-1");
    assert_eq!(options.bandwidth_mib_per_second, 16);
    assert_eq!(options.completion_timeout_per_gib, 60);
    assert!(options.allow_auto_converge);
    let started = wait_for("the start in the VMI", || {
        api.vmi(KEY)?.status?.migration_state?.start_timestamp
    })
    .await;
    let _ = started;

    // The source pod's libvirt socket reaches the target pod's daemon.
    let source_paths = source
        .reconciler
        .launchers()
        .migration_paths(&FakeLaunchers::socket_of(UID));
    let mut stream = cmd_protocol::sockets::connect_unix(&source_paths.channel_socket(UID, Channel::Libvirt).path())
        .await
        .expect("the source pod's proxy socket");
    stream.write_all(b"hello").await.expect("write");
    let mut answer = vec![0_u8; 32];
    let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut answer))
        .await
        .expect("an answer in time")
        .expect("read");
    assert_eq!(&answer[..n], b"libvirt:hello");

    // The guest arrives on the target; the source reports success.
    target
        .reconciler
        .launchers()
        .receive_migrated_domain(UID, &api.vmi(KEY).expect("vmi"));
    source.reconciler.launchers().end_migration(UID, Ok(()));
    let moved = wait_for("the take-over", || {
        let vmi = api.vmi(KEY)?;
        let labelled = vmi.metadata.labels.as_ref()?.get("kubevirt.io/nodeName")? == "node-b";
        (labelled && vmi.status.as_ref()?.migration_state.as_ref()?.completed == Some(true)).then_some(vmi)
    })
    .await;
    let status = moved.status.expect("status");
    assert_eq!(status.node_name.as_deref(), Some("node-b"));
    let state = status.migration_state.expect("state");
    assert!(state.end_timestamp.is_some() && state.target_node_domain_ready_timestamp.is_some());
    assert_eq!(state.target_node_domain_detected, Some(true));
    wait_for("the source domain undefined", || {
        (source.reconciler.launchers().command_count("delete") == 1).then_some(())
    })
    .await;
    assert!(
        !source_paths.channel_socket(UID, Channel::Libvirt).path().exists(),
        "the source's proxy sockets are gone"
    );
    // The target handler runs the VMI as its own now.
    wait_for("the target's sync", || {
        (target.reconciler.launchers().command_count("sync") >= 1).then_some(())
    })
    .await;
    stop.cancel();
    source.task.await.expect("source handler");
    target.task.await.expect("target handler");
}

#[tokio::test]
async fn a_failed_migration_leaves_the_vmi_on_the_source() {
    let (_sockets, api, stop, source, target) = two_nodes().await;
    hand_off(
        &api,
        &serde_json::json!({
            "migrationUid": "mig-2", "sourceNode": "node-a", "targetNode": "node-b",
            "migrationConfiguration": {"disableTLS": true}
        }),
    );
    wait_for("the source's migrate call", || {
        source.reconciler.launchers().migrations(UID).first().cloned()
    })
    .await;
    // virt-controller asks for an abort; the source launcher aborts.
    api.modify(KEY, |vmi| {
        if let Some(state) = vmi.status.as_mut().and_then(|s| s.migration_state.as_mut()) {
            state.abort_requested = Some(true);
        }
    });
    wait_for("the cancel", || {
        (source.reconciler.launchers().command_count("cancel_migration") == 1).then_some(())
    })
    .await;
    source
        .reconciler
        .launchers()
        .end_migration(UID, Err("Live migration aborted "));
    let state = wait_for("the failure in the VMI", || {
        api.vmi(KEY)?.status?.migration_state.filter(|s| s.failed == Some(true))
    })
    .await;
    assert_eq!(state.failure_reason.as_deref(), Some("Live migration aborted "));
    assert_eq!(state.abort_status.as_deref(), Some("Succeeded"));
    let vmi = api.vmi(KEY).expect("vmi");
    assert_eq!(vmi.status.and_then(|s| s.node_name).as_deref(), Some("node-a"));
    assert_eq!(
        source.reconciler.launchers().command_count("delete"),
        0,
        "the guest stays"
    );
    assert_eq!(target.reconciler.launchers().command_count("sync"), 0);
    stop.cancel();
    source.task.await.expect("source handler");
    target.task.await.expect("target handler");
}

#[tokio::test]
async fn a_migration_cancelled_before_it_started_is_recorded_aborted() {
    let sockets = tempfile::tempdir().expect("tempdir");
    let api = FakeClusterApi::new();
    api.apply(scheduled_vmi());
    let stop = CancellationToken::new();
    // Only the source: no target ever publishes its proxies.
    let source = start(&api, "node-a", sockets.path(), &stop);
    wait_for("the guest running on node-a", || {
        (api.vmi(KEY)?.status?.phase == Some(kubevirt_api::v1::VirtualMachineInstancePhase::Running)).then_some(())
    })
    .await;
    hand_off(
        &api,
        &serde_json::json!({
            "migrationUid": "mig-3", "sourceNode": "node-a", "targetNode": "node-b",
            "migrationConfiguration": {"disableTLS": true}, "abortRequested": true
        }),
    );
    let state = wait_for("the abort in the VMI", || {
        api.vmi(KEY)?.status?.migration_state.filter(|s| s.failed == Some(true))
    })
    .await;
    assert_eq!(state.abort_status.as_deref(), Some("Succeeded"));
    assert_eq!(state.failure_reason.as_deref(), Some("Live migration aborted "));
    assert!(state.end_timestamp.is_some());
    assert!(
        source.reconciler.launchers().migrations(UID).is_empty(),
        "never migrated"
    );
    stop.cancel();
    source.task.await.expect("source handler");
}

/// `--graceful-shutdown-seconds` (#31): a stopping handler opens no new migration proxy; the
/// migration's step fails with the reason, and nothing listens.
#[tokio::test]
async fn a_draining_target_handler_opens_no_migration_proxy() {
    let (_sockets, api, stop, source, target) = two_nodes().await;
    target.reconciler.begin_drain();
    hand_off(
        &api,
        &serde_json::json!({
            "migrationUid": "mig-3", "sourceNode": "node-a", "targetNode": "node-b",
            "migrationConfiguration": {"disableTLS": true}
        }),
    );
    wait_for("the target's refusal", || {
        api.writes().into_iter().find(|write| {
            matches!(write, virt_handler::cluster_api::Write::Event { event, .. }
                if event.message.contains("virt-handler is shutting down"))
        })
    })
    .await;
    assert_eq!(target.reconciler.open_proxies(), 0);
    let state = api.vmi(KEY).and_then(|v| v.status?.migration_state).expect("state");
    assert_eq!(state.target_node_address, None, "no proxy published");
    stop.cancel();
    source.task.await.expect("source handler");
    target.task.await.expect("target handler");
}
