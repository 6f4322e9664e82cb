//! Who may connect: the sockets the launcher and virt-handler listen on (the command socket, the
//! notify server, the notify pipes and the device plugins, all through `sockets::bind_unix`) are
//! mode 0600, so a process of another uid is refused. Needs root, to run that process as `nobody`.

use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};

use cmd_protocol::access_check::{NOBODY, Refusal, connect_as};
use cmd_protocol::sockets::SOCKET_MODE;
use cmd_protocol::transport::listen;
use nix::errno::Errno;
use nix::unistd::Uid;

#[tokio::test]
async fn a_process_of_another_uid_cannot_connect_to_a_listening_socket() {
    assert!(
        Uid::effective().is_root(),
        "this test runs a process as nobody and needs root: run it as root (make test does)"
    );
    let dir = tempfile::tempdir().expect("tempdir");
    // The directory lets anyone through, so only the socket's own mode can refuse.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod dir");
    let guarded = dir.path().join("launcher-sock");
    let _listener = listen(&guarded).expect("listen");
    let meta = std::fs::metadata(&guarded).expect("stat the socket");
    assert_eq!(meta.mode() & 0o777, SOCKET_MODE, "the socket's mode");
    let refused = Err(Refusal::Connect(Errno::EACCES));
    assert_eq!(connect_as(NOBODY, &guarded), refused, "nobody is refused");
    assert_eq!(connect_as(NOBODY, &guarded), refused, "and refused again");

    // The control: the same socket opened to everyone lets nobody in, so the refusal above came
    // from the mode and not from anything else about the child.
    std::fs::set_permissions(&guarded, std::fs::Permissions::from_mode(0o666)).expect("chmod socket");
    assert_eq!(
        connect_as(NOBODY, &guarded),
        Ok(()),
        "nobody connects to an open socket"
    );

    // A directory on the way that keeps nobody out is told apart from the socket's refusal.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).expect("chmod dir");
    assert_eq!(
        connect_as(NOBODY, &guarded),
        Err(Refusal::PathUnreachable(Errno::EACCES)),
        "the directory keeps nobody out"
    );
}
