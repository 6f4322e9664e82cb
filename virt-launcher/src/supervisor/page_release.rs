//! The launcher's side of `libvirtd-pages.so`: libvirtd lets go of its start-up pages when the
//! launcher asks, once the domain runs.
//!
//! The library (`preload/libvirtd_pages.rs`, built by `build.rs` and embedded in the launcher) is
//! written once into the daemon's directory ([`install`]). Each libvirtd the launcher starts
//! preloads it and gets the read end of a fresh pipe ([`preload`]); the launcher keeps the write
//! end of the current libvirtd's pipe, and [`request`] writes one byte to it: libvirtd then drops
//! the resident pages of its loaded objects' clean read-only segments, as the launcher does with
//! its own ([`crate::resident_pages`]). A launcher has one libvirtd, so the pipe is the process's.

use std::fs::File;
use std::io::Write as _;
use std::os::fd::OwnedFd;
use std::os::unix::fs::PermissionsExt as _;
use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::Command;
use std::sync::{Mutex, PoisonError};

use nix::fcntl::{FcntlArg, FdFlag, OFlag, fcntl};

/// The library, as `build.rs` built it.
static LIBRARY: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/libvirtd-pages.so"));

#[path = "../../preload/protocol.rs"]
mod protocol;

pub use protocol::REQUEST_FD;

/// The current libvirtd's request pipe: its write end, non-blocking.
static REQUESTS: Mutex<Option<File>> = Mutex::new(None);

/// Why libvirtd cannot be given the library.
#[derive(Debug, thiserror::Error)]
pub enum PageReleaseError {
    /// The library could not be written.
    #[error("cannot write {path}")]
    Install {
        /// Where.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The loader would split the library's path (it separates `LD_PRELOAD` entries with spaces
    /// and colons).
    #[error("cannot preload {0}: the path holds a space or a colon")]
    Path(std::path::PathBuf),
    /// The request pipe could not be made.
    #[error("cannot make libvirtd's page-release pipe")]
    Pipe(#[source] nix::Error),
}

/// Writes the library to `path` (read-only and executable for its owner, the launcher's user).
///
/// # Errors
/// [`PageReleaseError::Install`] naming the path.
pub fn install(path: &Path) -> Result<(), PageReleaseError> {
    let error = |source| PageReleaseError::Install {
        path: path.to_owned(),
        source,
    };
    let staging = path.with_extension("so.staging");
    // A staging file left read-only by an earlier launcher of this pod cannot be written over.
    let _ = std::fs::remove_file(&staging);
    std::fs::write(&staging, LIBRARY).map_err(error)?;
    std::fs::set_permissions(&staging, std::fs::Permissions::from_mode(0o500)).map_err(error)?;
    std::fs::rename(&staging, path).map_err(error)
}

/// Makes `command` (a libvirtd about to start) preload the library at `library` with a fresh
/// request pipe, whose write end becomes the one [`request`] writes to.
///
/// # Errors
/// [`PageReleaseError::Path`] or [`PageReleaseError::Pipe`]; `command` is then left as it was.
#[allow(unsafe_code)]
pub fn preload(command: &mut Command, library: &Path) -> Result<(), PageReleaseError> {
    if library
        .as_os_str()
        .as_encoded_bytes()
        .iter()
        .any(|b| b.is_ascii_whitespace() || *b == b':')
    {
        return Err(PageReleaseError::Path(library.to_owned()));
    }
    let (read, write) = nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(PageReleaseError::Pipe)?;
    fcntl(&write, FcntlArg::F_SETFL(OFlag::O_NONBLOCK)).map_err(PageReleaseError::Pipe)?;
    let read_fd = std::os::fd::AsRawFd::as_raw_fd(&read);
    command.env("LD_PRELOAD", library).env(REQUEST_FD, read_fd.to_string());
    // The read end lives in the closure, so the launcher's copy closes with the command.
    let read: OwnedFd = read;
    // SAFETY: the closure runs in the child between fork and exec and makes one fcntl syscall on
    // a descriptor opened before the fork; it allocates nothing.
    unsafe {
        command.pre_exec(move || {
            fcntl(&read, FcntlArg::F_SETFD(FdFlag::empty()))?;
            Ok(())
        });
    }
    *REQUESTS.lock().unwrap_or_else(PoisonError::into_inner) = Some(File::from(write));
    Ok(())
}

/// Whether `line` (of libvirtd's standard error) is the library's report of a drop that worked,
/// which the launcher logs as information rather than as a warning.
#[must_use]
pub fn is_success_report(line: &str) -> bool {
    line.strip_prefix(protocol::PREFIX)
        .is_some_and(|rest| rest.starts_with(protocol::RELEASED))
}

/// Asks the current libvirtd to drop its start-up pages; it does so on its own thread, and logs
/// the outcome in its log. A request still pending counts as this one.
pub fn request() {
    let mut requests = REQUESTS.lock().unwrap_or_else(PoisonError::into_inner);
    let Some(pipe) = requests.as_mut() else {
        tracing::debug!("libvirtd does not preload the page-release library; its start-up pages stay");
        return;
    };
    match pipe.write(&[1]) {
        Ok(_) => tracing::debug!("libvirtd asked to release its start-up pages"),
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
            tracing::debug!("libvirtd has page-release requests pending");
        }
        Err(e) => tracing::warn!(error = %e, "cannot ask libvirtd to release its start-up pages"),
    }
}
