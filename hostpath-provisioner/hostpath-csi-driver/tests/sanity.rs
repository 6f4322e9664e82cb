//! csi-sanity (kubernetes-csi/csi-test, built from its Go module by
//! `hostpath-provisioner/build-go-tool.sh csi-sanity`) against the real driver: Identity, Controller and
//! Node as the CSI spec has them, bind mounts included (so as root). Upstream's own sanity run
//! skips the same one test: a volume's capacity is its pool's, whatever was asked.

#![cfg(feature = "host-tests")]

use std::process::Command;
use std::sync::Arc;

use hostpath_csi_driver::host::RealHost;
use hostpath_csi_driver::pools::Pools;
use hostpath_csi_driver::server::{Driver, serve};

fn csi_sanity() -> String {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../build-go-tool.sh");
    let output = Command::new(script)
        .arg("csi-sanity")
        .output()
        .expect("running build-go-tool.sh");
    assert!(
        output.status.success(),
        "building csi-sanity failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn csi_sanity_passes() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "csi-sanity publishes volumes with bind mounts: run as root"
    );
    let sanity = csi_sanity();
    let dir = tempfile::tempdir().expect("tempdir");
    let pool = dir.path().join("pool");
    let socket = dir.path().join("csi.sock");
    let pools = Pools::parse(&format!(r#"[{{"name":"legacy","path":"{}"}}]"#, pool.display())).expect("pools");
    std::fs::create_dir(&pool).expect("pool");
    let stop = tokio_util::sync::CancellationToken::new();
    let driver = Driver {
        name: hostpath_csi_driver::DRIVER_NAME.to_owned(),
        version: "test".to_owned(),
        node_id: "node1".to_owned(),
        pools,
    };
    let server = tokio::spawn(serve(driver, Arc::new(RealHost), socket.clone(), stop.clone()));
    let output = tokio::task::spawn_blocking({
        let dir = dir.path().to_owned();
        move || {
            Command::new(sanity)
                .arg(format!("--csi.endpoint=unix://{}", socket.display()))
                .arg(format!("--csi.mountdir={}", dir.join("mount").display()))
                .arg(format!("--csi.stagingdir={}", dir.join("staging").display()))
                .arg("--csi.testvolumesize=1048576")
                .arg("--ginkgo.no-color")
                .arg("--ginkgo.skip=should fail when requesting to create a volume with already existing name and different capacity")
                .output()
                .expect("running csi-sanity")
        }
    })
    .await
    .expect("csi-sanity's thread");
    stop.cancel();
    let _ = server.await;
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "csi-sanity failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    // The create, delete, capacity, publish and stats specs run, not only the argument checks.
    let passed: u32 = stdout
        .split_whitespace()
        .collect::<Vec<_>>()
        .windows(2)
        .find_map(|w| (w[1] == "Passed").then(|| w[0].parse().ok()).flatten())
        .unwrap_or_else(|| panic!("no summary: {stdout}"));
    assert!(passed >= 30, "only {passed} specs passed: {stdout}");
    let left: Vec<_> = std::fs::read_dir(&pool).expect("pool").collect();
    assert!(left.is_empty(), "every volume was deleted: {left:?}");
}
