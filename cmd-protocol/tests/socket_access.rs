//! Who may connect: the sockets the launcher and virt-handler listen on (the command socket, the
//! notify server, the notify pipes and the device plugins, all through `sockets::bind_unix`) are
//! mode 0600, so a process of another uid is refused. Needs root, to run that process as `nobody`.

use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::Path;

use cmd_protocol::sockets::SOCKET_MODE;
use cmd_protocol::transport::listen;
use nix::errno::Errno;
use nix::sys::socket::{AddressFamily, SockFlag, SockType, UnixAddr, connect, socket};
use nix::sys::wait::{WaitStatus, waitpid};
use nix::unistd::{ForkResult, Gid, Uid, fork, setgid, setgroups, setuid};

/// `nobody` and `nogroup` on Debian.
const NOBODY: u32 = 65534;

/// Connects to `path` from a child process running as `nobody`; the errno of a refusal.
#[allow(unsafe_code)]
fn connect_as_nobody(path: &Path) -> Result<(), Errno> {
    // Everything the child needs is made before the fork: it only makes system calls.
    let address = UnixAddr::new(path).expect("socket address");
    // SAFETY: the child calls only async-signal-safe system calls (setgroups, setgid, setuid,
    // socket, connect) on memory prepared above, and leaves with _exit.
    match unsafe { fork() }.expect("fork") {
        ForkResult::Child => {
            let outcome = setgroups(&[])
                .and_then(|()| setgid(Gid::from_raw(NOBODY)))
                .and_then(|()| setuid(Uid::from_raw(NOBODY)))
                .and_then(|()| socket(AddressFamily::Unix, SockType::Stream, SockFlag::empty(), None))
                .and_then(|fd| connect(std::os::fd::AsRawFd::as_raw_fd(&fd), &address));
            let code = match outcome {
                Ok(()) => 0,
                Err(errno) => errno as i32,
            };
            // SAFETY: ends the child at once, running no destructors or atexit handlers.
            unsafe { nix::libc::_exit(code) }
        }
        ForkResult::Parent { child } => match waitpid(child, None).expect("wait for the child") {
            WaitStatus::Exited(_, 0) => Ok(()),
            WaitStatus::Exited(_, code) => Err(Errno::from_raw(code)),
            other => panic!("the connecting child ended as {other:?}"),
        },
    }
}

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
    assert_eq!(connect_as_nobody(&guarded), Err(Errno::EACCES), "nobody is refused");
    assert_eq!(connect_as_nobody(&guarded), Err(Errno::EACCES), "and refused again");

    // The control: the same socket opened to everyone lets nobody in, so the refusal above came
    // from the mode and not from anything else about the child.
    std::fs::set_permissions(&guarded, std::fs::Permissions::from_mode(0o666)).expect("chmod socket");
    assert_eq!(connect_as_nobody(&guarded), Ok(()), "nobody connects to an open socket");
}
