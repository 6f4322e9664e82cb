//! The migration RPCs over the fake domain manager: the parameters libvirt gets, the metadata the
//! snapshots carry through success, cancel and the monitor's abort, and the target's preparation.

use std::path::Path;
use std::sync::Arc;

use cmd_protocol::cmd::cmd_server::Cmd;
use cmd_protocol::cmd::{MigrationRequest, Vmi, VmiRequest};
use cmd_protocol::migration::{AbortStatus, MigrationMetadata, MigrationMode, MigrationProgress};
use kubevirt_api::domain_state::{DomainState, StateReason};
use tokio::sync::mpsc::UnboundedReceiver;
use tonic::{Code, Request};

use super::MIGRATION_EVENT;
use crate::cluster::service::LauncherService;
use crate::domain::{ConvertContext, DomainType, PathLayout};
use crate::libvirt::{AcpiBehaviour, DomainManager, FakeDomainManager, LifecycleEvent};
use crate::supervisor::reaper::DirectRunner;

const UID: &str = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0";

struct Launcher {
    manager: Arc<FakeDomainManager>,
    service: Arc<LauncherService<FakeDomainManager, DirectRunner>>,
    announced: UnboundedReceiver<LifecycleEvent>,
    dir: tempfile::TempDir,
}

fn launcher() -> Launcher {
    let dir = tempfile::tempdir().expect("tempdir");
    let under = |d: &str| dir.path().join(d).to_string_lossy().into_owned();
    let (events, _) = tokio::sync::mpsc::unbounded_channel();
    let manager = Arc::new(FakeDomainManager::new(AcpiBehaviour::PowerOff, events));
    let base = ConvertContext {
        domain_type: DomainType::Qemu,
        layout: PathLayout {
            private_dir: under("private"),
            ephemeral_disk_dir: under("ephemeral"),
            container_disk_dir: under("container-disks"),
            empty_disk_dir: under("empty"),
            ..PathLayout::default()
        },
        ..ConvertContext::default()
    };
    let (announce, announced) = tokio::sync::mpsc::unbounded_channel();
    let service = LauncherService::new(manager.clone(), DirectRunner, base).with_migration(
        dir.path().join("share"),
        "session",
        announce,
    );
    Launcher {
        manager,
        service: Arc::new(service),
        announced,
        dir,
    }
}

fn vmi_json() -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
        "metadata": {"name": "web", "namespace": "prod", "uid": UID},
        "spec": {"domain": {"memory": {"guest": "64Mi"}, "devices": {"disks": [
                    {"name": "root", "disk": {}}, {"name": "data", "disk": {}}]}},
                 "volumes": [{"name": "root", "containerDisk": {"image": "example/disk"}},
                             {"name": "data", "persistentVolumeClaim": {"claimName": "shared"}}]}
    }))
    .expect("json")
}

fn vmi_request() -> VmiRequest {
    VmiRequest {
        vmi: Some(Vmi { vmi_json: vmi_json() }),
        options: None,
    }
}

fn migration_request(options: &serde_json::Value) -> MigrationRequest {
    MigrationRequest {
        vmi: Some(Vmi { vmi_json: vmi_json() }),
        options: serde_json::to_vec(options).expect("json"),
    }
}

fn options(progress_timeout: u64, post_copy: bool) -> serde_json::Value {
    serde_json::json!({
        "migrationUid": "m-1", "completionTimeoutPerGib": 150, "progressTimeoutSeconds": progress_timeout,
        "bandwidthMibPerSecond": 64, "allowAutoConverge": true, "allowPostCopy": post_copy,
        "unsafeMigration": post_copy
    })
}

impl Launcher {
    async fn running(self) -> Self {
        let xml = r#"<domain type="qemu"><name>prod_web</name><memory unit="b">67108864</memory><vcpu>1</vcpu><os><type>hvm</type></os><devices>
            <disk type="file" device="disk"><source file="/e/root.qcow2"/><target dev="vda" bus="virtio"/><alias name="ua-root"/></disk>
            <disk type="file" device="disk"><source file="/pvc/disk.img"/><target dev="vdb" bus="virtio"/><alias name="ua-data"/></disk>
            </devices></domain>"#;
        self.manager.define(xml.to_owned()).await.expect("define");
        self.manager.start(false).await.expect("start");
        self
    }

    fn migration(&self) -> MigrationMetadata {
        self.service.remembered().migration.clone().expect("migration metadata")
    }

    async fn wait_until_over(&self) -> MigrationMetadata {
        for _ in 0..2000 {
            let metadata = self.migration();
            if metadata.completed || metadata.failed {
                return metadata;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        panic!("the migration did not end: {:?}", self.migration());
    }

    /// Starts a migration with `options(progress_timeout, post_copy)` and waits until libvirt's
    /// migrate is called.
    async fn start_migration(&self, progress_timeout: u64, post_copy: bool) {
        self.service
            .migrate_virtual_machine(Request::new(migration_request(&options(progress_timeout, post_copy))))
            .await
            .expect("migrate");
        self.wait_for_migrate_call().await;
    }

    async fn wait_for_migrate_call(&self) {
        for _ in 0..200 {
            if self.manager.migration_params().is_some() {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        panic!("libvirt's migrate was never called");
    }
}

#[tokio::test]
async fn a_migration_goes_through_the_pods_sockets_and_reports_its_success() {
    let mut launcher = launcher().running().await;
    launcher.start_migration(150, false).await;
    let params = launcher.manager.migration_params().expect("params");
    let proxy = format!("{}/share/migrationproxy/{UID}", launcher.dir.path().display());
    assert_eq!(
        params.destination_uri,
        format!("qemu+unix:///session?socket={proxy}-source.sock")
    );
    assert_eq!(params.stream_uri, format!("unix://{proxy}-49152-source.sock"));
    assert_eq!(params.disks_uri, Some(format!("unix://{proxy}-49153-source.sock")));
    assert_eq!(
        params.copied_disks,
        ["vda"],
        "the containerDisk is copied, the shared claim is not"
    );
    assert_eq!(params.bandwidth_mib_per_second, 64);
    assert!(params.auto_converge && !params.post_copy && !params.unsafe_migration);
    let started = launcher.migration();
    assert_eq!(started.uid, "m-1");
    assert!(started.start_timestamp.is_some() && started.end_timestamp.is_none());
    assert_eq!(started.mode, Some(MigrationMode::PreCopy));
    assert_eq!(launcher.announced.recv().await.map(|e| e.event), Some(MIGRATION_EVENT));

    // Asking again for the same migration starts nothing new.
    launcher
        .service
        .migrate_virtual_machine(Request::new(migration_request(&options(150, false))))
        .await
        .expect("same migration again");
    launcher.manager.end_migration(Ok(()));
    let over = launcher.wait_until_over().await;
    assert!(over.completed && !over.failed, "{over:?}");
    assert!(over.end_timestamp.is_some());
    let status = launcher.manager.status().await.expect("status");
    assert_eq!(
        (status.state, status.reason),
        (DomainState::Shutoff, StateReason::Migrated)
    );
    assert_eq!(
        launcher.manager.calls().iter().filter(|c| **c == "migrate").count(),
        1,
        "{:?}",
        launcher.manager.calls()
    );
    let snapshot = launcher.service.snapshot().await.expect("snapshot").expect("domain");
    assert_eq!(snapshot.metadata.migration, Some(over));
    // virt-handler deletes what is left of the domain: the launcher's work is over.
    launcher
        .service
        .delete_virtual_machine(Request::new(vmi_request()))
        .await
        .expect("delete");
    tokio::time::timeout(std::time::Duration::from_secs(1), launcher.service.migrated_away())
        .await
        .expect("the launcher learns it is done");
}

#[tokio::test]
async fn cancel_aborts_the_job_and_the_guest_stays() {
    let launcher = launcher().running().await;
    launcher.start_migration(150, false).await;
    launcher
        .service
        .cancel_virtual_machine_migration(Request::new(vmi_request()))
        .await
        .expect("cancel");
    let over = launcher.wait_until_over().await;
    assert!(over.failed && !over.completed, "{over:?}");
    assert_eq!(over.failure_reason, "Live migration aborted ");
    assert_eq!(over.abort_status, Some(AbortStatus::Succeeded));
    assert_eq!(
        launcher.manager.status().await.expect("status").state,
        DomainState::Running
    );
    let again = launcher
        .service
        .cancel_virtual_machine_migration(Request::new(vmi_request()))
        .await
        .expect_err("nothing to cancel");
    assert_eq!(again.code(), Code::FailedPrecondition);
    assert_eq!(again.message(), "failed to cancel migration - vmi is not migrating");
}

#[tokio::test(start_paused = true)]
async fn the_maximum_downtime_is_set_once_the_migration_job_runs() {
    let launcher = launcher().running().await;
    let mut with_downtime = options(150, false);
    with_downtime["maxDowntimeMs"] = serde_json::json!(250);
    launcher
        .service
        .migrate_virtual_machine(Request::new(migration_request(&with_downtime)))
        .await
        .expect("migrate");
    launcher.wait_for_migrate_call().await;
    for _ in 0..200 {
        if launcher.manager.migration_max_downtime().is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(launcher.manager.migration_max_downtime(), Some(250));
    let calls = launcher.manager.calls();
    assert_eq!(
        calls.iter().filter(|c| **c == "set max downtime").count(),
        1,
        "once: {calls:?}"
    );
    launcher.manager.end_migration(Ok(()));
    assert!(launcher.wait_until_over().await.completed);
}

#[tokio::test(start_paused = true)]
async fn without_a_maximum_downtime_qemus_stays() {
    let launcher = launcher().running().await;
    launcher.start_migration(150, false).await;
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    assert!(!launcher.manager.calls().contains(&"set max downtime"));
    launcher.manager.end_migration(Ok(()));
    assert!(launcher.wait_until_over().await.completed);
}

#[tokio::test(start_paused = true)]
async fn a_stalled_migration_is_aborted_at_the_progress_timeout() {
    let launcher = launcher().running().await;
    launcher.start_migration(3, false).await;
    launcher.manager.set_migration_progress(MigrationProgress {
        data_remaining_bytes: 1000,
        data_total_bytes: 4000,
        ..MigrationProgress::default()
    });
    let over = launcher.wait_until_over().await;
    assert!(over.failed, "{over:?}");
    assert!(
        over.failure_reason.starts_with("Live migration stuck for ")
            && over.failure_reason.ends_with(" seconds and has been aborted"),
        "{}",
        over.failure_reason
    );
    assert_eq!(over.abort_status, None, "the monitor's abort is not a user's cancel");
    assert_eq!(over.progress.map(|p| p.data_remaining_bytes), Some(1000));
    assert!(launcher.manager.calls().contains(&"abort migration"));
    assert_eq!(
        launcher.manager.status().await.expect("status").state,
        DomainState::Running
    );
}

#[tokio::test]
async fn a_failed_migration_keeps_libvirts_reason() {
    let launcher = launcher().running().await;
    launcher.start_migration(150, true).await;
    launcher
        .manager
        .end_migration(Err("unable to connect to server: Connection refused".to_owned()));
    let over = launcher.wait_until_over().await;
    assert!(over.failed);
    assert!(
        over.failure_reason.contains("Connection refused"),
        "{}",
        over.failure_reason
    );
}

#[tokio::test]
async fn a_post_copy_refused_for_userfaultfd_says_what_would_allow_it() {
    let launcher = launcher().running().await;
    launcher.start_migration(150, true).await;
    let qemu = "internal error: unable to execute QEMU command 'migrate-set-capabilities': \
                Postcopy is not supported: Userfaultfd not available: Operation not permitted";
    launcher.manager.end_migration(Err(qemu.to_owned()));
    let over = launcher.wait_until_over().await;
    assert!(over.failed);
    assert!(over.failure_reason.contains(qemu), "{}", over.failure_reason);
    assert!(
        over.failure_reason
            .contains("sysctl vm.unprivileged_userfaultfd is 1 and the pod's seccomp profile allows it"),
        "{}",
        over.failure_reason
    );
}

#[tokio::test]
async fn only_a_running_domain_migrates_and_bad_options_are_named() {
    let launcher = launcher();
    let refused = launcher
        .service
        .migrate_virtual_machine(Request::new(migration_request(&options(150, false))))
        .await
        .expect_err("no domain");
    assert_eq!(refused.code(), Code::FailedPrecondition);
    let launcher = launcher.running().await;
    let mut bad = options(150, false);
    bad["bandwidth"] = serde_json::json!(5);
    let refused = launcher
        .service
        .migrate_virtual_machine(Request::new(migration_request(&bad)))
        .await
        .expect_err("unknown option");
    assert_eq!(refused.code(), Code::InvalidArgument);
    assert!(refused.message().contains("bandwidth"), "{}", refused.message());
    assert!(launcher.manager.migration_params().is_none());
}

/// A VMI with no volume: the target's preparation needs no image.
fn diskless_request() -> VmiRequest {
    let vmi = serde_json::json!({
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
        "metadata": {"name": "web", "namespace": "prod", "uid": UID},
        "spec": {"domain": {"memory": {"guest": "64Mi"}, "devices": {}}}
    });
    VmiRequest {
        vmi: Some(Vmi {
            vmi_json: serde_json::to_vec(&vmi).expect("json"),
        }),
        options: None,
    }
}

#[tokio::test]
async fn the_target_prepares_its_pod_and_waits_for_the_domain() {
    let launcher = launcher();
    launcher
        .service
        .sync_migration_target(Request::new(diskless_request()))
        .await
        .expect("prepare the target");
    launcher
        .service
        .sync_migration_target(Request::new(diskless_request()))
        .await
        .expect("again");
    let private = launcher.service.base.layout.vmi_private_dir(UID);
    assert!(Path::new(&private).is_dir(), "the VMI's private directory exists");
    assert!(
        launcher.dir.path().join("share/migrationproxy").is_dir(),
        "the target's QEMU listens in the proxy directory"
    );
    let refused = launcher
        .service
        .sync_virtual_machine(Request::new(diskless_request()))
        .await
        .expect_err("no domain of its own");
    assert_eq!(refused.code(), Code::FailedPrecondition);
    assert!(launcher.manager.calls().is_empty(), "{:?}", launcher.manager.calls());
}

/// Every file under `dir` whose name ends with `suffix`.
fn files_ending(dir: &Path, suffix: &str) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(files_ending(&path, suffix));
        } else if path.to_string_lossy().ends_with(suffix) {
            found.push(path);
        }
    }
    found
}

#[tokio::test]
#[cfg_attr(
    not(feature = "host-tests"),
    ignore = "needs xorrisofs: make test runs it (feature host-tests)"
)]
async fn the_target_makes_the_config_drive_the_domain_will_read() {
    let launcher = launcher();
    let vmi = serde_json::json!({
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
        "metadata": {"name": "web", "namespace": "prod", "uid": UID},
        "spec": {"domain": {"memory": {"guest": "64Mi"}, "devices": {"disks": [{"name": "seed", "disk": {}}]}},
                 "volumes": [{"name": "seed", "cloudInitConfigDrive": {"userData": "#cloud-config\n"}}]}
    });
    let request = VmiRequest {
        vmi: Some(Vmi {
            vmi_json: serde_json::to_vec(&vmi).expect("json"),
        }),
        options: None,
    };
    launcher
        .service
        .sync_migration_target(Request::new(request))
        .await
        .expect("prepare the target");
    let isos = files_ending(launcher.dir.path(), ".iso");
    assert_eq!(isos.len(), 1, "the ConfigDrive ISO: {isos:?}");
    assert!(launcher.manager.calls().is_empty(), "no domain of its own");
}

/// Regression (#31): the first ACPI press is announced, so virt-handler's snapshot carries when
/// the graceful stop began and its grace period can run out.
#[tokio::test]
async fn the_first_power_button_press_is_announced() {
    let mut launcher = launcher().running().await;
    launcher
        .service
        .shutdown_virtual_machine(Request::new(vmi_request()))
        .await
        .expect("shutdown");
    assert_eq!(
        launcher.announced.recv().await.map(|e| e.event),
        Some(crate::cluster::service::GRACEFUL_SHUTDOWN_EVENT)
    );
    let snapshot = launcher.service.snapshot().await.expect("snapshot").expect("a domain");
    assert!(snapshot.metadata.graceful_shutdown_started.is_some());
    assert!(launcher.announced.try_recv().is_err(), "one announcement");
}
