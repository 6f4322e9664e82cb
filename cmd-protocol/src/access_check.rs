//! Who may connect to a socket, tried for real: a child process takes another uid and connects,
//! as an unprivileged process on the node would. For tests (feature `testing`); needs root, to
//! take the other uid.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;

use nix::errno::Errno;
use nix::sys::socket::{AddressFamily, SockFlag, SockType, UnixAddr, connect, socket};
use nix::sys::wait::{WaitStatus, waitpid};
use nix::unistd::{ForkResult, Gid, Uid, fork, setgid, setgroups, setuid};

/// `nobody` and `nogroup` on Debian.
pub const NOBODY: u32 = 65534;

/// How a connection attempt as another uid ended, when it did not connect.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The uid could not reach the path at all (a directory on the way kept it out), so the
    /// socket's own mode was never tried.
    PathUnreachable(Errno),
    /// The uid reached the socket, and `connect` failed with this.
    Connect(Errno),
}

/// An exit code above this marks a [`Refusal::PathUnreachable`] (errno values stay below it).
const UNREACHABLE: i32 = 128;

/// Connects to the unix socket at `path` from a child process running as `uid` and group `uid`,
/// with no supplementary groups. The child first checks that it can reach the path (`chdir` into
/// its directory, `stat` the socket), so that a refusal names the socket and not a directory on
/// the way.
///
/// # Panics
/// When `path` cannot be a socket address, or the child cannot be started or waited for: these
/// are faults of the test, not outcomes.
#[allow(unsafe_code)]
pub fn connect_as(uid: u32, path: &Path) -> Result<(), Refusal> {
    // Everything the child needs is made before the fork: it only makes system calls. It moves
    // into the socket's directory and connects by the socket's own name, so that a path longer
    // than a socket address holds works too.
    let directory = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path.file_name().expect("a socket path names a file");
    let c_directory = CString::new(directory.as_os_str().as_bytes()).expect("a path without NUL");
    let c_name = CString::new(name.as_bytes()).expect("a name without NUL");
    let address = UnixAddr::new(Path::new(name)).expect("socket address");
    let mut stat_buf = std::mem::MaybeUninit::<nix::libc::stat>::zeroed();
    // SAFETY: the child calls only async-signal-safe system calls (setgroups, setgid, setuid,
    // chdir, stat, socket, connect) on memory prepared above, and leaves with _exit.
    match unsafe { fork() }.expect("fork") {
        ForkResult::Child => {
            let outcome = setgroups(&[])
                .and_then(|()| setgid(Gid::from_raw(uid)))
                .and_then(|()| setuid(Uid::from_raw(uid)));
            let code = match outcome {
                Err(errno) => UNREACHABLE + errno as i32,
                // SAFETY: both are valid C strings and `stat_buf` is writable memory.
                Ok(())
                    if unsafe {
                        nix::libc::chdir(c_directory.as_ptr()) != 0
                            || nix::libc::stat(c_name.as_ptr(), stat_buf.as_mut_ptr()) != 0
                    } =>
                {
                    UNREACHABLE + Errno::last_raw()
                }
                Ok(()) => match socket(AddressFamily::Unix, SockType::Stream, SockFlag::empty(), None)
                    .and_then(|fd| connect(std::os::fd::AsRawFd::as_raw_fd(&fd), &address))
                {
                    Ok(()) => 0,
                    Err(errno) => errno as i32,
                },
            };
            // SAFETY: ends the child at once, running no destructors or atexit handlers.
            unsafe { nix::libc::_exit(code) }
        }
        ForkResult::Parent { child } => match waitpid(child, None).expect("wait for the child") {
            WaitStatus::Exited(_, 0) => Ok(()),
            WaitStatus::Exited(_, code) if code > UNREACHABLE => {
                Err(Refusal::PathUnreachable(Errno::from_raw(code - UNREACHABLE)))
            }
            WaitStatus::Exited(_, code) => Err(Refusal::Connect(Errno::from_raw(code))),
            other => panic!("the connecting child ended as {other:?}"),
        },
    }
}
