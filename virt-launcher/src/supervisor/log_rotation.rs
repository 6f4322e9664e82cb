//! Bounded logs, as virtlogd keeps them where upstream runs it. Without virtlogd, libvirt writes
//! QEMU's stdio to the domain log and QEMU writes the serial console log itself, and nothing would
//! stop a guest that writes to its console without end from filling the pod's disk. The launcher
//! watches both files and rotates one that grew past virtlogd's `max_size` (2 MiB, which
//! upstream's launcher keeps), keeping virtlogd's `max_backups` (3) older files: `<log>.0` the
//! newest, `<log>.2` the oldest.
//!
//! The writers keep their descriptor, so a file cannot be renamed away from them: its bytes are
//! copied to `<log>.0` and the file is emptied in place. Both writers opened it with `O_APPEND`
//! (QEMU's `append=on` chardev log, libvirt's domain log), so they go on at its new end. What a
//! writer adds between the copy and the emptying is lost, as with logrotate's `copytruncate`.
//! The console itself (`virtctl console`, the local run's terminal) streams from the serial
//! socket, not from the log, so a rotation never interrupts it.

use std::fs::{File, OpenOptions};
use std::io::{self, Read as _, Seek as _, SeekFrom, Write as _};
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

/// virtlogd's `max_size`.
pub const MAX_SIZE: u64 = 2 * 1024 * 1024;
/// virtlogd's `max_backups`.
pub const MAX_BACKUPS: u32 = 3;
/// How often the logs' sizes are read: a stat of each, nothing more. A guest writes at most a few
/// MiB a second to an emulated serial port, so a log overshoots `max_size` by well under that.
pub const POLL: Duration = Duration::from_millis(250);

/// How large a log may grow and how many older files it keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogLimit {
    /// Rotate once the file is larger than this, in bytes.
    pub max_size: u64,
    /// Older files kept.
    pub max_backups: u32,
}

impl Default for LogLimit {
    fn default() -> Self {
        Self {
            max_size: MAX_SIZE,
            max_backups: MAX_BACKUPS,
        }
    }
}

/// The `n`th backup of the log at `path` (`<log>.0` the newest).
#[must_use]
pub fn backup(path: &Path, n: u32) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".{n}"));
    PathBuf::from(name)
}

/// Rotates the log at `path` when it is larger than `limit.max_size`; returns whether it did. A
/// missing log is not an error (the domain has not written it yet, or has none).
///
/// # Errors
/// A backup could not be written, or the log not emptied.
pub fn rotate_if_full(path: &Path, limit: LogLimit) -> io::Result<bool> {
    let size = match std::fs::metadata(path) {
        Ok(meta) => meta.len(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    if size <= limit.max_size {
        return Ok(false);
    }
    if limit.max_backups == 0 {
        OpenOptions::new().write(true).open(path)?.set_len(0)?;
        return Ok(true);
    }
    for n in (1..limit.max_backups).rev() {
        match std::fs::rename(backup(path, n - 1), backup(path, n)) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
    }
    let mut log = OpenOptions::new().read(true).write(true).open(path)?;
    let mut copy = File::create(backup(path, 0))?;
    // Everything up to now, then empty it at once: the less time between, the less is lost.
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    log.seek(SeekFrom::Start(0))?;
    log.read_to_end(&mut bytes)?;
    log.set_len(0)?;
    copy.write_all(&bytes)?;
    Ok(true)
}

/// Keeps the logs at `paths` within `limit` until `stop`, looking every [`POLL`].
pub async fn keep_bounded(paths: Vec<PathBuf>, limit: LogLimit, stop: CancellationToken) {
    let mut ticks = tokio::time::interval(POLL);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = ticks.tick() => {}
        }
        for path in &paths {
            match rotate_if_full(path, limit) {
                Ok(true) => debug!(log = %path.display(), "log rotated"),
                Ok(false) => {}
                Err(e) => warn!(log = %path.display(), error = %e, "cannot rotate the log"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_log_moves_to_its_newest_backup_and_the_oldest_goes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = dir.path().join("virt-serial0-log");
        let limit = LogLimit {
            max_size: 100,
            max_backups: 2,
        };
        // The writer keeps its O_APPEND descriptor across rotations, as QEMU does.
        let mut writer = OpenOptions::new().create(true).append(true).open(&log).expect("log");
        assert!(!rotate_if_full(&dir.path().join("missing"), limit).expect("missing log"));
        for round in 0..4_u8 {
            writer.write_all(&[b'a' + round; 150]).expect("write");
            assert!(rotate_if_full(&log, limit).expect("rotate"), "round {round}");
            assert_eq!(std::fs::metadata(&log).expect("log").len(), 0);
        }
        writer.write_all(b"newest").expect("write");
        assert_eq!(
            std::fs::read(&log).expect("log"),
            b"newest",
            "the writer goes on at the new end"
        );
        assert_eq!(std::fs::read(backup(&log, 0)).expect(".0"), vec![b'd'; 150]);
        assert_eq!(std::fs::read(backup(&log, 1)).expect(".1"), vec![b'c'; 150]);
        assert!(!backup(&log, 2).exists(), "two backups kept");
        assert!(!rotate_if_full(&log, limit).expect("small log"), "under the limit");
    }
}
