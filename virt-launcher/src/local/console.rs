//! The guest's serial console on the launcher's terminal: bytes from the serial socket go to
//! stdout; lines typed on stdin go to the guest. Ctrl-C stays with the launcher, which stops the VM
//! gracefully.

use std::io::BufRead as _;
use std::path::PathBuf;
use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::UnixStream;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tracing::{debug, info};

/// How long QEMU gets to create the console socket after the domain started.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Streams the console at `socket` until the guest closes it.
#[must_use]
pub fn spawn(socket: PathBuf) -> JoinHandle<()> {
    tokio::spawn(async move {
        let deadline = tokio::time::Instant::now() + CONNECT_TIMEOUT;
        let stream = loop {
            match UnixStream::connect(&socket).await {
                Ok(stream) => break stream,
                Err(_) if tokio::time::Instant::now() < deadline => tokio::time::sleep(Duration::from_millis(20)).await,
                Err(e) => {
                    info!(socket = %socket.display(), error = %e, "no serial console");
                    return;
                }
            }
        };
        let (mut from_guest, mut to_guest) = stream.into_split();
        let (lines, mut typed) = mpsc::unbounded_channel::<Vec<u8>>();
        // A plain thread: a blocking stdin read must not hold up the runtime's shutdown.
        let _ = std::thread::Builder::new()
            .name("console-stdin".to_owned())
            .spawn(move || {
                for line in std::io::stdin().lock().lines().map_while(Result::ok) {
                    if lines.send(format!("{line}\n").into_bytes()).is_err() {
                        break;
                    }
                }
            });
        tokio::spawn(async move {
            while let Some(line) = typed.recv().await {
                if to_guest.write_all(&line).await.is_err() {
                    break;
                }
            }
            // Dropping the write half would half-close the socket, and QEMU drops a client that
            // half-closes; keep it open while the guest's output is read.
            std::future::pending::<()>().await;
            drop(to_guest);
        });
        let mut stdout = tokio::io::stdout();
        let mut buffer = [0u8; 4096];
        loop {
            match from_guest.read(&mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if stdout.write_all(&buffer[..n]).await.is_err() || stdout.flush().await.is_err() {
                        break;
                    }
                }
            }
        }
        debug!("serial console closed");
    })
}
