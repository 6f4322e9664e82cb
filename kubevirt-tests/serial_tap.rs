//! The guest's serial port read straight from a launcher pod's socket on the node, each line
//! stamped with the host's clock when it arrived: what the migration tests measure the guest's
//! ticker (`kubevirt_rs.ticker`, a line every 10 ms) with. A migration moves the guest from the
//! source pod's socket to the target pod's; the gap between the last tick read from the one and the
//! first read from the other is the downtime the guest had, as the network-namespace rig measures
//! it. QEMU serves one client per serial socket, so `virtctl console` cannot be used on a pod while
//! its tap is open.

use std::io::{BufRead as _, BufReader};
use std::os::fd::AsRawFd as _;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// One line of the ticker: `KUBEVIRT-RS-TICK <n> <guest uptime>`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tick {
    /// When the host read it.
    pub at: Instant,
    /// The ticker's counter.
    pub n: u64,
    /// The guest's uptime then, in seconds.
    pub uptime: f64,
}

/// The serial socket of the launcher pod `pod_uid` for VMI `vmi_uid` on `node` of the test cluster
/// whose state is in `cluster_dir`.
#[must_use]
pub fn serial_socket(cluster_dir: &Path, node: &str, pod_uid: &str, vmi_uid: &str) -> PathBuf {
    cluster_dir
        .join("nodes")
        .join(node)
        .join("kubelet/pods")
        .join(pod_uid)
        .join("volumes/kubernetes.io~empty-dir/private")
        .join(vmi_uid)
        .join("virt-serial0")
}

/// The serial console's log file (everything the guest printed) beside [`serial_socket`].
#[must_use]
pub fn serial_log(cluster_dir: &Path, node: &str, pod_uid: &str, vmi_uid: &str) -> PathBuf {
    serial_socket(cluster_dir, node, pod_uid, vmi_uid).with_file_name("virt-serial0-log")
}

/// A reader of one serial socket, until dropped.
#[derive(Debug)]
pub struct SerialTap {
    connected_at: Instant,
    lines: Arc<Mutex<Vec<(Instant, String)>>>,
    stop: Arc<AtomicBool>,
    reader: Option<JoinHandle<()>>,
}

/// Connects to the unix socket at `path`, however long the path (a socket address holds 107
/// bytes): through the `/proc/self/fd` link of its directory.
fn connect(path: &Path) -> std::io::Result<UnixStream> {
    let dir = std::fs::File::open(path.parent().unwrap_or(Path::new("/")))?;
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    UnixStream::connect(format!("/proc/self/fd/{}/{name}", dir.as_raw_fd()))
}

impl SerialTap {
    /// Reads the socket at `path` once it accepts a connection, trying every 100 ms for at most
    /// `timeout`.
    ///
    /// # Errors
    /// The last connection error when none succeeded in time.
    pub fn open(path: &Path, timeout: Duration) -> std::io::Result<Self> {
        let deadline = Instant::now() + timeout;
        let stream = loop {
            match connect(path) {
                Ok(stream) => break stream,
                Err(e) if Instant::now() >= deadline => {
                    return Err(std::io::Error::new(e.kind(), format!("{}: {e}", path.display())));
                }
                Err(_) => std::thread::sleep(Duration::from_millis(100)),
            }
        };
        let connected_at = Instant::now();
        stream.set_read_timeout(Some(Duration::from_millis(100)))?;
        let lines: Arc<Mutex<Vec<(Instant, String)>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let reader = {
            let (lines, stop) = (Arc::clone(&lines), Arc::clone(&stop));
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream);
                let mut line = String::new();
                while !stop.load(Ordering::Relaxed) {
                    match reader.read_line(&mut line) {
                        Ok(0) => break,
                        Ok(_) if line.ends_with('\n') => {
                            let text = line.trim_end().to_owned();
                            lines
                                .lock()
                                .unwrap_or_else(PoisonError::into_inner)
                                .push((Instant::now(), text));
                            line.clear();
                        }
                        Ok(_) => {}
                        Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                        }
                        Err(_) => break,
                    }
                }
            })
        };
        Ok(Self {
            connected_at,
            lines,
            stop,
            reader: Some(reader),
        })
    }

    /// When it connected: QEMU drops what the guest writes while no client is connected.
    #[must_use]
    pub fn connected_at(&self) -> Instant {
        self.connected_at
    }

    /// The ticks read so far.
    #[must_use]
    pub fn ticks(&self) -> Vec<Tick> {
        self.lines
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter_map(|(at, line)| {
                let rest = &line[line.find("KUBEVIRT-RS-TICK ")? + "KUBEVIRT-RS-TICK ".len()..];
                let mut fields = rest.split_whitespace();
                let n = fields.next()?.parse().ok()?;
                let uptime = fields.next()?.parse().ok()?;
                Some(Tick { at: *at, n, uptime })
            })
            .collect()
    }

    /// The last lines read, for a failure's message.
    #[must_use]
    pub fn text(&self) -> String {
        let lines = self.lines.lock().unwrap_or_else(PoisonError::into_inner);
        let start = lines.len().saturating_sub(20);
        lines[start..]
            .iter()
            .map(|(_, l)| l.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Drop for SerialTap {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
    }
}

/// The largest gap between two ticks the host read, over both taps in turn (the source's, then
/// the target's): the guest's downtime across a migration.
#[must_use]
pub fn largest_gap(source: &[Tick], target: &[Tick]) -> Duration {
    let all: Vec<&Tick> = source.iter().chain(target).collect();
    all.windows(2)
        .map(|w| w[1].at.saturating_duration_since(w[0].at))
        .max()
        .unwrap_or_default()
}
