//! The notify pipe: a socket virt-handler places in each launcher pod's share directory and
//! forwards, connection by connection, to its own notify server. The launcher only knows the path
//! inside its pod; the handler reaches it through the kubelet's pods directory.

use std::path::{Path, PathBuf};

use tokio::net::UnixStream;
use tracing::debug;

/// A running pipe; dropping it stops forwarding and removes the socket.
#[derive(Debug)]
pub struct NotifyPipe {
    path: PathBuf,
    task: tokio::task::JoinHandle<()>,
}

impl NotifyPipe {
    /// Listens at `path` (replacing a stale socket) and forwards every connection to `server`.
    /// The socket is mode 0600 and belongs to `owner` when given: an unprivileged launcher's uid.
    pub fn start(path: &Path, server: &Path, owner: Option<u32>) -> std::io::Result<Self> {
        match std::fs::remove_file(path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        // The kubelet's pod paths are longer than a socket address holds.
        let listener = cmd_protocol::sockets::bind_unix_for(path, owner)?;
        let server = server.to_owned();
        let task = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let server = server.clone();
                tokio::spawn(async move {
                    match UnixStream::connect(&server).await {
                        Ok(mut outbound) => {
                            let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                        }
                        Err(error) => {
                            debug!(error = %error, "the notify server is not there; dropping a pipe connection");
                        }
                    }
                });
            }
        });
        Ok(Self {
            path: path.to_owned(),
            task,
        })
    }

    /// The pipe's socket.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for NotifyPipe {
    fn drop(&mut self) {
        self.task.abort();
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    use tokio::net::UnixListener;

    use super::*;

    /// The kubelet's pod paths (`/var/lib/kubelet/pods/<uid>/volumes/kubernetes.io~empty-dir/
    /// public/domain-notify-pipe.sock`) are longer than a socket address holds; found on a real
    /// cluster, where no launcher event reached the handler.
    #[tokio::test]
    async fn a_pipe_is_placed_at_a_path_longer_than_a_socket_address() {
        let dir = tempfile::tempdir().expect("tempdir");
        let pod = dir
            .path()
            .join("pods/8dd79512-5122-434b-9d03-75802874d9b3/volumes/kubernetes.io~empty-dir/public");
        std::fs::create_dir_all(&pod).expect("pod dir");
        let server_path = dir.path().join("server.sock");
        let server = UnixListener::bind(&server_path).expect("server");
        let pipe_path = pod.join("domain-notify-pipe.sock");
        assert!(pipe_path.as_os_str().len() > 108, "{}", pipe_path.display());
        let pipe = NotifyPipe::start(&pipe_path, &server_path, None).expect("pipe at a long path");
        let mut client = cmd_protocol::sockets::connect_unix(pipe.path()).await.expect("connect");
        client.write_all(b"ping").await.expect("write");
        let (mut conn, _) = server.accept().await.expect("forwarded");
        let mut buf = [0_u8; 4];
        conn.read_exact(&mut buf).await.expect("read");
        assert_eq!(&buf, b"ping");
    }

    #[tokio::test]
    #[cfg_attr(
        not(feature = "host-tests"),
        ignore = "needs root: make test runs it (feature host-tests)"
    )]
    async fn bytes_go_both_ways_and_drop_removes_the_socket() {
        let dir = tempfile::tempdir().expect("tempdir");
        let server_path = dir.path().join("server.sock");
        let server = UnixListener::bind(&server_path).expect("server");
        tokio::spawn(async move {
            let (mut conn, _) = server.accept().await.expect("accept");
            let mut buf = [0_u8; 4];
            conn.read_exact(&mut buf).await.expect("read");
            conn.write_all(&buf.map(|b| b.to_ascii_uppercase()))
                .await
                .expect("write");
        });
        let pipe_path = dir.path().join("pipe.sock");
        std::fs::write(&pipe_path, b"stale").expect("stale file");
        let pipe = NotifyPipe::start(&pipe_path, &server_path, Some(107)).expect("pipe");
        let placed = std::fs::symlink_metadata(pipe.path()).expect("the pipe");
        assert_eq!(
            (
                std::os::unix::fs::MetadataExt::uid(&placed),
                std::os::unix::fs::MetadataExt::gid(&placed),
                std::os::unix::fs::MetadataExt::mode(&placed) & 0o777
            ),
            (107, 107, 0o600),
            "an unprivileged launcher's pipe is its own, and only its own"
        );
        let mut client = UnixStream::connect(pipe.path()).await.expect("connect");
        client.write_all(b"ping").await.expect("write");
        let mut answer = [0_u8; 4];
        client.read_exact(&mut answer).await.expect("read");
        assert_eq!(&answer, b"PING");
        drop(pipe);
        assert!(!pipe_path.exists());
    }
}
