//! What a containerDisk sidecar runs in a launcher pod, as upstream's `container-disk`: it holds
//! the image's root file system alive for as long as the VMI runs and tells virt-handler where it
//! is. It listens on `<copy path>.sock`; virt-handler connects, learns this process from the
//! socket's peer credentials, and bind-mounts the disk out of this process's root into the
//! launcher's container-disks directory. `--no-op` (the init containers that pull the images
//! early) exits at once. SIGTERM or SIGINT removes the socket and ends the process with 0.
//!
//! The binary is built statically: containerDisk images are `FROM scratch` with the disk only, and
//! the launcher pod's init container copies this binary in from the launcher image.

use std::ffi::OsString;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};

use nix::sys::signal::{SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};

/// How to call it.
pub const USAGE: &str = "usage: container-disk --copy-path PATH | --no-op";

/// What the arguments ask for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    /// Exit at once (`--no-op`).
    NoOp,
    /// Listen on `<copy_path>.sock` until stopped (`--copy-path PATH`, `-c PATH`).
    Serve {
        /// The path whose `.sock` is the socket.
        copy_path: PathBuf,
    },
}

/// Why the process cannot do what it was asked.
#[derive(Debug, thiserror::Error)]
pub enum ContainerDiskError {
    /// The arguments are not understood.
    #[error("{0}")]
    Usage(String),
    /// The socket cannot be made.
    #[error("cannot listen on {path}: {source}")]
    Listen {
        /// The socket.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The signals cannot be waited for.
    #[error("cannot wait for SIGTERM: {0}")]
    Signals(#[from] nix::Error),
}

impl Command {
    /// Parses the arguments after the program name.
    ///
    /// # Errors
    /// [`ContainerDiskError::Usage`] naming the argument that is wrong or missing.
    pub fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Self, ContainerDiskError> {
        let mut args = args.into_iter();
        let mut command = None;
        while let Some(arg) = args.next() {
            let next = match arg.to_str() {
                Some("--no-op") => Self::NoOp,
                Some("--copy-path" | "-c") => {
                    let path = args
                        .next()
                        .ok_or_else(|| ContainerDiskError::Usage("--copy-path needs a path".to_owned()))?;
                    Self::Serve {
                        copy_path: PathBuf::from(path),
                    }
                }
                _ => {
                    return Err(ContainerDiskError::Usage(format!(
                        "unknown argument {}",
                        arg.to_string_lossy()
                    )));
                }
            };
            if command.replace(next).is_some() {
                return Err(ContainerDiskError::Usage(
                    "give one of --copy-path and --no-op, once".to_owned(),
                ));
            }
        }
        command.ok_or_else(|| ContainerDiskError::Usage("--copy-path or --no-op is required".to_owned()))
    }
}

/// The socket of `copy_path`: the path with `.sock` appended.
#[must_use]
pub fn socket_path(copy_path: &Path) -> PathBuf {
    let mut socket = copy_path.as_os_str().to_owned();
    socket.push(".sock");
    PathBuf::from(socket)
}

/// How often the signals and the socket's existence are looked at.
pub const WAKE_UP: std::time::Duration = std::time::Duration::from_millis(200);

/// Listens on `<copy_path>.sock` until SIGTERM or SIGINT, or until the socket is removed (the
/// launcher's exit), then removes the socket.
///
/// # Errors
/// [`ContainerDiskError`] when the socket cannot be made or the signals cannot be waited for.
pub fn serve(copy_path: &Path) -> Result<(), ContainerDiskError> {
    // Blocked before any thread starts, so that every thread inherits the mask and the signals
    // wait in the signalfd below instead of ending the process (PID 1 ignores them otherwise).
    let mut signals = SigSet::empty();
    signals.add(Signal::SIGTERM);
    signals.add(Signal::SIGINT);
    signals.thread_block()?;
    let socket = socket_path(copy_path);
    // A socket left by an earlier run of this container is replaced.
    let _ = std::fs::remove_file(&socket);
    let listener = UnixListener::bind(&socket).map_err(|source| ContainerDiskError::Listen {
        path: socket.clone(),
        source,
    })?;
    // virt-handler only needs the peer credentials of its connection; each one is closed at once
    // so that the backlog never fills.
    std::thread::spawn(move || {
        for connection in listener.incoming() {
            drop(connection);
        }
    });
    // The launcher removes the socket when it exits, so that the pod completes even where the
    // runtime's SIGTERM never comes (upstream's container-disk looks every second too): a socket
    // gone ends the wait as SIGTERM does.
    let pending = SignalFd::with_flags(&signals, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC)?;
    let waited = loop {
        match pending.read_signal() {
            Ok(Some(_)) => break Ok(()),
            Ok(None) if !socket.exists() => break Ok(()),
            Ok(None) => std::thread::sleep(WAKE_UP),
            Err(e) => break Err(e),
        }
    };
    let _ = std::fs::remove_file(&socket);
    waited?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Command, String> {
        Command::parse(args.iter().map(OsString::from)).map_err(|e| e.to_string())
    }

    #[test]
    fn the_arguments_name_a_copy_path_or_no_op() {
        assert_eq!(
            parse(&["--copy-path", "/d/disk_0"]),
            Ok(Command::Serve {
                copy_path: PathBuf::from("/d/disk_0")
            })
        );
        assert_eq!(
            parse(&["-c", "/d/kernel-boot"]),
            Ok(Command::Serve {
                copy_path: PathBuf::from("/d/kernel-boot")
            })
        );
        assert_eq!(parse(&["--no-op"]), Ok(Command::NoOp));
    }

    #[test]
    fn wrong_arguments_are_refused_with_what_is_wrong() {
        assert_eq!(parse(&[]), Err("--copy-path or --no-op is required".to_owned()));
        assert_eq!(parse(&["--copy-path"]), Err("--copy-path needs a path".to_owned()));
        assert_eq!(parse(&["--disk", "x"]), Err("unknown argument --disk".to_owned()));
        assert_eq!(
            parse(&["--no-op", "--copy-path", "x"]),
            Err("give one of --copy-path and --no-op, once".to_owned())
        );
    }

    #[test]
    fn the_socket_is_the_copy_path_with_sock_appended() {
        assert_eq!(
            socket_path(Path::new(
                "/var/run/kubevirt-ephemeral-disks/container-disk-data/u/disk_0"
            )),
            PathBuf::from("/var/run/kubevirt-ephemeral-disks/container-disk-data/u/disk_0.sock")
        );
    }

    #[test]
    fn serving_ends_when_the_launcher_removes_the_socket() {
        let dir = std::env::temp_dir().join(format!("container-disk-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let copy_path = dir.join("disk_0");
        let server = {
            let copy_path = copy_path.clone();
            std::thread::spawn(move || serve(&copy_path))
        };
        let socket = socket_path(&copy_path);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !socket.exists() {
            assert!(std::time::Instant::now() < deadline, "the socket never appeared");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        std::fs::remove_file(&socket).expect("remove the socket");
        while !server.is_finished() {
            assert!(std::time::Instant::now() < deadline, "serve did not end");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(server.join().expect("thread").is_ok());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_missing_directory_is_an_error_naming_the_socket() {
        let error = serve(Path::new("/nonexistent/kubevirt-rs/disk_0")).expect_err("no directory");
        assert!(
            error
                .to_string()
                .starts_with("cannot listen on /nonexistent/kubevirt-rs/disk_0.sock"),
            "{error}"
        );
    }
}
