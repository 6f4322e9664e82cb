//! The binary as a sidecar runs it: it serves its socket, the peer credentials name it, and
//! SIGTERM ends it with 0 and removes the socket.

use std::os::unix::net::UnixStream;

use container_disk::socket_path;
use nix::sys::signal::Signal;

#[test]
fn the_binary_serves_its_socket_and_exits_cleanly_on_sigterm() {
    let dir = tempfile::tempdir().expect("tempdir");
    let copy_path = dir.path().join("disk_0");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_container-disk"))
        .arg("--copy-path")
        .arg(&copy_path)
        .spawn()
        .expect("start container-disk");
    let socket = socket_path(&copy_path);
    let mut connected = None;
    for _ in 0..200 {
        if let Ok(stream) = UnixStream::connect(&socket) {
            connected = Some(stream);
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let stream = connected.expect("the socket answers");
    let peer =
        nix::sys::socket::getsockopt(&stream, nix::sys::socket::sockopt::PeerCredentials).expect("peer credentials");
    assert_eq!(
        u32::try_from(peer.pid()).ok(),
        Some(child.id()),
        "the peer is the process"
    );
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).expect("pid"));
    nix::sys::signal::kill(pid, Signal::SIGTERM).expect("SIGTERM");
    let status = child.wait().expect("wait");
    assert!(status.success(), "{status}");
    assert!(!socket.exists(), "the socket is removed");
    let no_op = std::process::Command::new(env!("CARGO_BIN_EXE_container-disk"))
        .arg("--no-op")
        .status()
        .expect("no-op");
    assert!(no_op.success());
}
