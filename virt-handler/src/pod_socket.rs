//! A unix socket in a launcher pod that virt-handler, as root, connects to or listens on for a
//! migration. It is named by a directory the pod cannot change (the pod's volumes directory,
//! which the kubelet makes) and a path below it that the pod can: the pod's own user writes its
//! emptyDirs, so a compromised launcher could put a symbolic link anywhere below. Every
//! component below the root is therefore resolved with
//! `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)`: no link is followed,
//! none leads out. A socket is connected to through the descriptor that resolved it, and bound,
//! given away and removed through its directory's descriptor, so swapping a name for a link
//! between two steps makes the step fail instead of reaching elsewhere on the node.

use std::ffi::OsStr;
use std::os::fd::{AsRawFd as _, OwnedFd};
use std::path::{Component, Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{OFlag, OpenHow, ResolveFlag, open, openat2};
use nix::sys::stat::{Mode, SFlag, fstat, mkdirat};
use nix::unistd::{UnlinkatFlags, unlinkat};

/// A socket at `below`, under the trusted directory `root`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodSocket {
    root: PathBuf,
    below: PathBuf,
}

fn resolve_beneath() -> ResolveFlag {
    ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_SYMLINKS | ResolveFlag::RESOLVE_NO_MAGICLINKS
}

fn invalid(message: &str) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidInput, message.to_owned())
}

impl PodSocket {
    /// The socket `below` (relative, without `..`) the directory `root`.
    #[must_use]
    pub fn new(root: impl Into<PathBuf>, below: impl Into<PathBuf>) -> Self {
        Self {
            root: root.into(),
            below: below.into(),
        }
    }

    /// Where it is on the node, for messages and tests.
    #[must_use]
    pub fn path(&self) -> PathBuf {
        self.root.join(&self.below)
    }

    /// The directory of the socket (made first when `create`, each missing component `0755`)
    /// and the socket's name.
    fn directory(&self, create: bool) -> std::io::Result<(OwnedFd, &OsStr)> {
        let name = self
            .below
            .file_name()
            .ok_or_else(|| invalid("a socket path needs a name"))?;
        let mut dir = open(
            &self.root,
            OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )?;
        for component in self.below.parent().into_iter().flat_map(Path::components) {
            let Component::Normal(part) = component else {
                return Err(invalid("a pod socket path is relative and has no `..`"));
            };
            if create {
                match mkdirat(&dir, part, Mode::from_bits_truncate(0o755)) {
                    Ok(()) | Err(Errno::EEXIST) => {}
                    Err(errno) => return Err(errno.into()),
                }
            }
            let how = OpenHow::new()
                .flags(OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC)
                .resolve(resolve_beneath());
            dir = openat2(&dir, part, how)?;
        }
        Ok((dir, name))
    }

    /// Connects to it. The socket itself may not be a link either.
    ///
    /// # Errors
    /// When a component is missing or a link, when it is no socket, or the connection fails.
    pub async fn connect(&self) -> std::io::Result<tokio::net::UnixStream> {
        let (dir, name) = self.directory(false)?;
        let how = OpenHow::new()
            .flags(OFlag::O_PATH | OFlag::O_CLOEXEC)
            .resolve(resolve_beneath());
        let socket = openat2(&dir, name, how)?;
        let kind = SFlag::from_bits_truncate(fstat(&socket)?.st_mode) & SFlag::S_IFMT;
        if kind != SFlag::S_IFSOCK {
            return Err(invalid("not a socket"));
        }
        let address = format!("/proc/self/fd/{}", socket.as_raw_fd());
        let stream = tokio::net::UnixStream::connect(&address).await;
        drop(socket);
        stream
    }

    /// Listens on it, its directory made first and a stale socket removed, with
    /// [`cmd_protocol::sockets::SOCKET_MODE`] and, when given, `owner` as its owner.
    ///
    /// # Errors
    /// When a component is a link or cannot be made, or the socket cannot be bound.
    pub fn bind_fresh(&self, owner: Option<u32>) -> std::io::Result<tokio::net::UnixListener> {
        let (dir, name) = self.directory(true)?;
        match unlinkat(&dir, name, UnlinkatFlags::NoRemoveDir) {
            Ok(()) | Err(Errno::ENOENT) => {}
            Err(errno) => return Err(errno.into()),
        }
        let dir = std::fs::File::from(dir);
        cmd_protocol::sockets::bind_unix_in(&dir, name, owner)
    }

    /// Removes it (a link put in its place goes, its target stays).
    ///
    /// # Errors
    /// When a component is missing or a link, or the name cannot be removed.
    pub fn remove(&self) -> std::io::Result<()> {
        let (dir, name) = self.directory(false)?;
        unlinkat(&dir, name, UnlinkatFlags::NoRemoveDir).map_err(Into::into)
    }
}

#[cfg(test)]
mod tests;
