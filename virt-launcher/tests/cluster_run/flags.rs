//! The flags virt-controller passes that change what the launcher does: each test fails when its
//! flag is ignored (#31).

use std::path::PathBuf;
use std::time::Duration;

use cmd_protocol::sockets::READY_SOCKET;
use cmd_protocol::transport::CmdClient;

use super::fixture::{PodDirs, Stopper, assert_stops_cleanly, processes_under, spawn_launcher_with, wait_until};
use super::{UID, vmi_request};

/// A cluster-mode launcher with virt-controller's flags and `extra`, serving its command socket:
/// its root directory, the process and the socket.
async fn serving(extra: &[&str]) -> (tempfile::TempDir, std::process::Child, Stopper, PathBuf) {
    let root = tempfile::Builder::new()
        .prefix("kf")
        .tempdir_in("/tmp")
        .expect("tempdir");
    let share = root.path().join("s");
    let launcher = spawn_launcher_with(&PodDirs::new(root.path(), share.clone()), "testguest", UID, extra);
    let stopper = Stopper(launcher.id());
    let socket = share.join("sockets").join(READY_SOCKET);
    wait_until("launcher socket", Duration::from_secs(90), async || {
        socket.exists().then_some(())
    })
    .await;
    (root, launcher, stopper, socket)
}

/// `--qemu-timeout`: a launcher whose guest never starts (no virt-handler syncs it) gives up
/// with upstream's message and a non-zero exit, so its pod and VMI fail, and leaves nothing.
#[tokio::test]
async fn a_launcher_whose_guest_never_starts_gives_up_after_its_qemu_timeout() {
    let (root, mut launcher, _stopper, socket) = serving(&["--qemu-timeout", "3s"]).await;
    let status = wait_until("the launcher's exit", Duration::from_secs(60), async || {
        launcher.try_wait().expect("wait")
    })
    .await;
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut launcher.stderr.take().expect("stderr"), &mut stderr).expect("stderr");
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("timed out waiting for domain to be defined"),
        "{stderr}"
    );
    assert!(!socket.exists(), "the socket is removed");
    let left = processes_under(root.path());
    assert!(left.is_empty(), "processes left behind: {left:?}");
}

/// `--qemu-timeout` counts only until the guest runs: a guest started in time keeps running
/// past it. The launcher's clock starts once it serves; 45 s leave room for a fresh machine's
/// first define, which waits out libvirt's capabilities probe (about 8 s here).
#[tokio::test]
async fn a_guest_started_in_time_outlives_the_qemu_timeout() {
    const TIMEOUT: Duration = Duration::from_secs(45);
    let (root, mut launcher, _stopper, socket) = serving(&["--qemu-timeout", "45s"]).await;
    let spawned = std::time::Instant::now();
    let mut client = CmdClient::connect(&socket).await.expect("connect");
    client.sync(vmi_request()).await.expect("sync");
    assert!(spawned.elapsed() < TIMEOUT, "the guest started only after the timeout");
    // Watches past the timeout and a few of the launcher's 1 s checks: it must still serve the
    // running guest.
    while spawned.elapsed() < TIMEOUT + Duration::from_secs(4) {
        assert!(launcher.try_wait().expect("wait").is_none(), "the launcher exited");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(
        client.domain().await.expect("GetDomain").is_some(),
        "the guest is still defined"
    );
    assert_stops_cleanly(launcher, root.path(), &socket);
}

/// `--disk-memory-limit`: `qemu-img` checks the containerDisk within that much address space;
/// 1 MiB cannot even load it, so the sync fails and names the volume.
#[tokio::test]
async fn the_disk_memory_limit_bounds_the_container_disk_check() {
    let (root, launcher, _stopper, socket) = serving(&["--disk-memory-limit", "1048576"]).await;
    let mut client = CmdClient::connect(&socket).await.expect("connect");
    let refused = client.sync(vmi_request()).await.expect_err("qemu-img over its limit");
    let message = refused.to_string();
    assert!(message.contains("failed to invoke qemu-img"), "{message}");
    assert!(message.contains("spec.volumes[0]"), "{message}");
    assert!(
        client.domain().await.expect("GetDomain").is_none(),
        "no domain was defined"
    );
    assert_stops_cleanly(launcher, root.path(), &socket);
}
