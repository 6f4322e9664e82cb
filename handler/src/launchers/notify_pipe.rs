//! The notify pipe: a socket virt-handler places in each launcher pod's share directory and
//! forwards, connection by connection, to its own notify server. The launcher only knows the path
//! inside its pod; the handler reaches it through the kubelet's pods directory.

use std::path::{Path, PathBuf};

use tokio::net::{UnixListener, UnixStream};
use tracing::debug;

/// A running pipe; dropping it stops forwarding and removes the socket.
#[derive(Debug)]
pub struct NotifyPipe {
    path: PathBuf,
    task: tokio::task::JoinHandle<()>,
}

impl NotifyPipe {
    /// Listens at `path` (replacing a stale socket) and forwards every connection to `server`.
    pub fn start(path: &Path, server: &Path) -> std::io::Result<Self> {
        match std::fs::remove_file(path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        let listener = UnixListener::bind(path)?;
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

    use super::*;

    #[tokio::test]
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
        let pipe = NotifyPipe::start(&pipe_path, &server_path).expect("pipe");
        let mut client = UnixStream::connect(pipe.path()).await.expect("connect");
        client.write_all(b"ping").await.expect("write");
        let mut answer = [0_u8; 4];
        client.read_exact(&mut answer).await.expect("read");
        assert_eq!(&answer, b"PING");
        drop(pipe);
        assert!(!pipe_path.exists());
    }
}
