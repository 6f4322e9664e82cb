//! Live migration on real libvirt and QEMU between two "nodes": two network namespaces joined by a
//! veth pair, each with a launcher pod (an unprivileged launcher, its session libvirtd and QEMU)
//! and virt-handler's migration proxy. The source launcher migrates peer to peer through the
//! unix sockets in its pod; the proxies carry them over TCP between the namespaces to the target
//! pod's libvirtd and QEMU. The test guest's ticker must go on across the migration.

use std::path::Path;
use std::time::Duration;

use cmd_protocol::cmd::MigrationRequest;
use cmd_protocol::transport::CmdClient;
use kubevirt_api::v1::VirtualMachineInstance;

use super::fixture::{in_pod, processes_under, wait_until};
use super::migration_rig::{
    Nodes, Pod, migration_over, options, ready_to_migrate, ready_to_migrate_with, request, snapshot, ticks,
};

/// Starts migrating at 1 MiB/s, so that it is still under way long after it moved its first
/// bytes; returns once it has.
async fn slow_migration_under_way(source: &Pod, vmi: &VirtualMachineInstance, migration: &str) -> CmdClient {
    let mut client = source.client().await;
    client
        .migrate(MigrationRequest {
            vmi: request(vmi).vmi,
            options: options(migration, 1),
        })
        .await
        .expect("migrate");
    wait_until("migration progress", Duration::from_secs(60), async || {
        snapshot(&mut client)
            .await
            .and_then(|s| s.metadata.migration?.progress)
            .filter(|p| p.data_processed_bytes > 0)
    })
    .await;
    client
}

/// The guest on the source goes on printing ticks.
async fn still_ticking(log: &Path) {
    let count = ticks(log).len();
    wait_until("the ticker on the source", Duration::from_secs(30), async || {
        (ticks(log).len() > count + 20).then_some(())
    })
    .await;
}

/// Stops both launchers: each exits 0 and nothing of this VMI keeps running.
fn stop_both(source: Pod, target: Pod, name: &str) {
    assert!(source.stop().success(), "the source launcher exits cleanly");
    assert!(target.stop().success(), "the target launcher exits cleanly");
    let left = processes_under(Path::new(&format!("default_{name}")));
    assert!(left.is_empty(), "processes left behind: {left:?}");
}

#[tokio::test]
async fn the_guest_moves_between_nodes_and_its_ticker_goes_on() {
    let root = tempfile::tempdir().expect("tempdir");
    let nodes = Nodes::new(0);
    let (name, uid) = ("migrant", "7b8c9d0e-1f2a-4b3c-8d4e-5f6a7b8c9d01");
    let (source, target, vmi, proxies) = ready_to_migrate(root.path(), &nodes, name, uid).await;
    let mut source_client = source.client().await;
    source_client
        .migrate(MigrationRequest {
            vmi: request(&vmi).vmi,
            options: options("mig-1", 0),
        })
        .await
        .expect("migrate");
    let over = migration_over(&mut source_client).await;
    assert!(over.completed && !over.failed, "{over:?}");
    assert!(over.start_timestamp.is_some() && over.end_timestamp.is_some());

    let source_domain = snapshot(&mut source_client).await.expect("the source's domain");
    assert_eq!(
        (
            source_domain.status.status.as_str(),
            source_domain.status.reason.as_str()
        ),
        ("Shutoff", "Migrated")
    );
    let mut target_client = target.client().await;
    let target_domain = wait_until("the domain on the target", Duration::from_secs(30), async || {
        snapshot(&mut target_client)
            .await
            .filter(|s| s.status.status == "Running")
    })
    .await;
    assert_eq!(target_domain.metadata.uid, uid, "the target names the VMI");

    // The ticker goes on from where it was, on the target, and the guest did not restart.
    let before = ticks(&source.serial_log(uid));
    let last_before = *before.last().expect("ticks on the source");
    let target_log = target.serial_log(uid);
    let after = wait_until("ticks on the target", Duration::from_secs(30), async || {
        let ticks = ticks(&target_log);
        (ticks.len() > 20).then_some(ticks)
    })
    .await;
    let first_after = after[0];
    assert!(
        first_after.0 <= last_before.0 + 2 && first_after.0 + 2 >= last_before.0,
        "the counter continues: {last_before:?} on the source, then {first_after:?} on the target"
    );
    assert!(
        first_after.1 >= last_before.1,
        "the guest's uptime goes on: {last_before:?} then {first_after:?}"
    );
    assert!(
        after.windows(2).all(|w| w[1].0 == w[0].0 + 1),
        "no tick lost on the target"
    );
    let in_pod = in_pod(&source.dirs);
    assert!(in_pod.share.starts_with("/mnt"), "{}", in_pod.share.display());

    drop(proxies);
    // virt-handler deletes the migrated domain; the source launcher then ends by itself.
    source_client
        .delete(request(&vmi))
        .await
        .expect("delete the migrated domain");
    let mut source = source;
    let exited = wait_until("the source launcher's exit", Duration::from_secs(30), async || {
        source.launcher.try_wait().ok().flatten()
    })
    .await;
    assert!(exited.success(), "the source launcher ends cleanly");
    assert!(target.stop().success(), "the target launcher exits cleanly");
    let left = processes_under(Path::new(&format!("default_{name}")));
    assert!(left.is_empty(), "processes left behind: {left:?}");
}

#[tokio::test]
async fn a_cancelled_migration_leaves_the_guest_on_the_source() {
    let root = tempfile::tempdir().expect("tempdir");
    let nodes = Nodes::new(1);
    let (name, uid) = ("stayer", "8c9d0e1f-2a3b-4c4d-9e5f-6a7b8c9d0e02");
    let (source, target, vmi, proxies) = ready_to_migrate(root.path(), &nodes, name, uid).await;
    // 1 MiB/s: the guest's 256 MiB cannot move before the cancel.
    let mut source_client = slow_migration_under_way(&source, &vmi, "mig-2").await;
    source_client.cancel_migration(request(&vmi)).await.expect("cancel");
    let over = migration_over(&mut source_client).await;
    assert!(over.failed && !over.completed, "{over:?}");
    assert_eq!(over.failure_reason, "Live migration aborted ");
    assert_eq!(over.abort_status, Some(cmd_protocol::migration::AbortStatus::Succeeded));
    let domain = snapshot(&mut source_client).await.expect("domain");
    assert_eq!(domain.status.status, "Running", "the guest stays on the source");
    still_ticking(&source.serial_log(uid)).await;
    let mut target_client = target.client().await;
    assert!(
        snapshot(&mut target_client)
            .await
            .is_none_or(|s| s.status.status != "Running"),
        "nothing runs on the target"
    );
    drop(proxies);
    stop_both(source, target, name);
}

/// The pids of `pid` and everything under it.
fn process_tree(pid: u32) -> Vec<i32> {
    let parents: Vec<(i32, i32)> = std::fs::read_dir("/proc")
        .expect("proc")
        .filter_map(Result::ok)
        .filter_map(|e| {
            let child = e.file_name().to_str()?.parse::<i32>().ok()?;
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            // The parent pid is the second field after the command name in parentheses.
            let parent = stat.rsplit_once(')')?.1.split_whitespace().nth(1)?.parse().ok()?;
            Some((child, parent))
        })
        .collect();
    let mut tree = vec![i32::try_from(pid).expect("pid")];
    let mut index = 0;
    while index < tree.len() {
        let parent = tree[index];
        tree.extend(parents.iter().filter(|(_, p)| *p == parent).map(|(c, _)| *c));
        index += 1;
    }
    tree
}

#[tokio::test]
async fn a_target_pod_dying_midway_fails_the_migration_and_the_guest_stays() {
    let root = tempfile::tempdir().expect("tempdir");
    let nodes = Nodes::new(2);
    let (name, uid) = ("survivor", "9d0e1f2a-3b4c-4d5e-8f6a-7b8c9d0e1f03");
    let (source, target, vmi, proxies) = ready_to_migrate(root.path(), &nodes, name, uid).await;
    let mut source_client = slow_migration_under_way(&source, &vmi, "mig-3").await;
    // The whole pod goes, as when its node fails: the launcher, its libvirtd and its QEMU.
    for pid in process_tree(target.launcher.id()) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
    }
    let over = migration_over(&mut source_client).await;
    assert!(over.failed && !over.completed, "{over:?}");
    assert!(!over.failure_reason.is_empty());
    assert_eq!(over.abort_status, None);
    let domain = snapshot(&mut source_client).await.expect("domain");
    assert_eq!(domain.status.status, "Running", "the guest stays on the source");
    still_ticking(&source.serial_log(uid)).await;
    drop(proxies);
    let mut target = target;
    let _ = target.launcher.wait();
    assert!(source.stop().success(), "the source launcher exits cleanly");
    let left = processes_under(Path::new(&format!("default_{name}")));
    assert!(left.is_empty(), "processes left behind: {left:?}");
}

#[tokio::test]
async fn under_a_dirtying_load_a_starved_migration_stops_at_the_progress_timeout_and_auto_converge_finishes() {
    let root = tempfile::tempdir().expect("tempdir");
    let nodes = Nodes::new(3);
    let (name, uid) = ("dirtier", "0e1f2a3b-4c5d-4e6f-9a7b-8c9d0e1f2a04");
    let (source, target, vmi, proxies) =
        ready_to_migrate_with(root.path(), &nodes, name, uid, "kubevirt_rs.ticker kubevirt_rs.dirty").await;
    let mut source_client = source.client().await;
    // 2 MiB/s cannot keep up with the guest rewriting 64 MiB: the remaining data stops falling.
    let starved = serde_json::json!({
        "migrationUid": "mig-4a", "completionTimeoutPerGib": 1000, "progressTimeoutSeconds": 3,
        "bandwidthMibPerSecond": 2
    });
    source_client
        .migrate(MigrationRequest {
            vmi: request(&vmi).vmi,
            options: serde_json::to_vec(&starved).expect("json"),
        })
        .await
        .expect("migrate");
    let over = migration_over(&mut source_client).await;
    assert!(over.failed, "{over:?}");
    assert!(
        over.failure_reason.starts_with("Live migration stuck for "),
        "{}",
        over.failure_reason
    );
    assert_eq!(
        snapshot(&mut source_client).await.expect("domain").status.status,
        "Running",
        "the guest stays on the source"
    );
    // Again, without a bandwidth limit and with auto-converge: it finishes.
    let converging = serde_json::json!({
        "migrationUid": "mig-4b", "completionTimeoutPerGib": 150, "progressTimeoutSeconds": 150,
        "allowAutoConverge": true
    });
    source_client
        .migrate(MigrationRequest {
            vmi: request(&vmi).vmi,
            options: serde_json::to_vec(&converging).expect("json"),
        })
        .await
        .expect("migrate again");
    let over = wait_until("the second migration's end", Duration::from_secs(120), async || {
        snapshot(&mut source_client)
            .await
            .and_then(|s| s.metadata.migration)
            .filter(|m| m.uid == "mig-4b" && (m.completed || m.failed))
    })
    .await;
    assert!(over.completed, "{over:?}");
    let target_log = target.serial_log(uid);
    wait_until("ticks on the target", Duration::from_secs(30), async || {
        (ticks(&target_log).len() > 20).then_some(())
    })
    .await;
    drop(proxies);
    stop_both(source, target, name);
}
