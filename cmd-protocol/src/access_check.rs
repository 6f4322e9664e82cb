//! Who may connect to a socket, tried for real: a child process takes another uid and connects,
//! as an unprivileged process on the node would. For tests (feature `testing`); needs root, to
//! take the other uid.

use std::ffi::CString;
use std::io::Read as _;
use std::os::fd::AsRawFd as _;
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::sys::socket::{AddressFamily, SockFlag, SockType, UnixAddr, connect, socket};
use nix::sys::wait::{WaitStatus, waitpid};
use nix::unistd::{ForkResult, Gid, Uid, fork, pipe2, setgid, setgroups, setuid};

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

/// The step at which the child stopped, as it reports it to the parent.
const CONNECTED: u8 = 0;
const SETUP_FAILED: u8 = 1;
const UNREACHABLE: u8 = 2;
const REFUSED: u8 = 3;

/// Connects to the unix socket at `path` from a child process running as `uid` and group `uid`,
/// with no supplementary groups. The child first checks that it can reach the path (`chdir` into
/// its directory, `stat` the socket), so that a refusal names the socket and not a directory on
/// the way; it connects by the socket's name, so a path longer than a socket address holds works.
///
/// # Panics
/// When `path` cannot be a socket address, or the child cannot be started, take the uid, make a
/// socket, or be waited for: these are faults of the test, not outcomes.
#[allow(unsafe_code)]
pub fn connect_as(uid: u32, path: &Path) -> Result<(), Refusal> {
    // Everything the child needs is made before the fork: it only makes system calls.
    let directory = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path.file_name().expect("a socket path names a file");
    let c_directory = CString::new(directory.as_os_str().as_bytes()).expect("a path without NUL");
    let c_name = CString::new(name.as_bytes()).expect("a name without NUL");
    let address = UnixAddr::new(Path::new(name)).expect("socket address");
    let mut stat_buf = std::mem::MaybeUninit::<nix::libc::stat>::zeroed();
    // Close-on-exec: processes other threads of the test start meanwhile must not inherit it.
    let (report_read, report_write) = pipe2(OFlag::O_CLOEXEC).expect("a pipe for the child's report");
    // SAFETY: the child runs one thread and calls only system calls (setgroups, setgid, setuid,
    // chdir, stat, socket, connect, write) on memory prepared above, and leaves with _exit.
    match unsafe { fork() }.expect("fork") {
        ForkResult::Child => {
            let (step, errno) = match setgroups(&[])
                .and_then(|()| setgid(Gid::from_raw(uid)))
                .and_then(|()| setuid(Uid::from_raw(uid)))
            {
                Err(errno) => (SETUP_FAILED, errno as i32),
                // SAFETY: both are valid C strings and `stat_buf` is writable memory.
                Ok(())
                    if unsafe {
                        nix::libc::chdir(c_directory.as_ptr()) != 0
                            || nix::libc::stat(c_name.as_ptr(), stat_buf.as_mut_ptr()) != 0
                    } =>
                {
                    (UNREACHABLE, Errno::last_raw())
                }
                Ok(()) => match socket(AddressFamily::Unix, SockType::Stream, SockFlag::empty(), None) {
                    Err(errno) => (SETUP_FAILED, errno as i32),
                    Ok(fd) => match connect(fd.as_raw_fd(), &address) {
                        Ok(()) => (CONNECTED, 0),
                        Err(errno) => (REFUSED, errno as i32),
                    },
                },
            };
            let mut report = [0_u8; 5];
            report[0] = step;
            report[1..].copy_from_slice(&errno.to_ne_bytes());
            // SAFETY: writes the prepared bytes to the pipe, then ends the child at once, running
            // no destructors or atexit handlers.
            unsafe {
                nix::libc::write(report_write.as_raw_fd(), report.as_ptr().cast(), report.len());
                nix::libc::_exit(0)
            }
        }
        ForkResult::Parent { child } => {
            drop(report_write);
            loop {
                match waitpid(child, None) {
                    Ok(WaitStatus::Exited(_, 0)) => break,
                    Err(Errno::EINTR) => {}
                    other => panic!("the connecting child ended as {other:?}"),
                }
            }
            let mut report = [0_u8; 5];
            std::fs::File::from(report_read)
                .read_exact(&mut report)
                .expect("the child's report");
            let errno = Errno::from_raw(i32::from_ne_bytes([report[1], report[2], report[3], report[4]]));
            match report[0] {
                CONNECTED => Ok(()),
                UNREACHABLE => Err(Refusal::PathUnreachable(errno)),
                REFUSED => Err(Refusal::Connect(errno)),
                _ => panic!("the child could not take uid {uid} or make a socket: {errno}"),
            }
        }
    }
}
