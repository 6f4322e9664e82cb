//! Making a disk durable while the image still streams in. A write lands in the page cache, and
//! left there it all waits for the final `fsync`, which then writes everything and flushes the
//! device's cache while the download sits idle: on the virtual disks of this project's machines
//! that wait was a third of an upload's time. A thread of its own instead calls `fdatasync` on
//! the disk each time another window has been written, so the device writes and flushes while
//! the network delivers, and the final `fsync` finds little left.
//!
//! The writer never waits for the thread: one flush runs, at most one more waits, and a window
//! written meanwhile joins the waiting one. A flush that fails is an error of the import, never
//! a hint: Linux reports a failed writeback once per open file, so an error the thread saw would
//! not be seen again by the final `fsync`.

use std::fs::File;
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, SyncSender, TrySendError};
use std::thread::JoinHandle;

/// How much is written between two requests for a flush.
pub const WINDOW: u64 = 32 * 1024 * 1024;

/// The thread that flushes, the way to wake it, and the way to tell it that a flush still
/// waiting is not wanted (the caller's final `fsync` does that one).
#[derive(Debug)]
struct Flusher {
    wake: SyncSender<()>,
    stop: Arc<AtomicBool>,
    thread: JoinHandle<io::Result<()>>,
}

/// Counts what is written into one file and asks for a flush every [`WINDOW`].
#[derive(Debug)]
pub struct Writeback {
    pending: u64,
    flusher: Option<Flusher>,
}

impl Writeback {
    /// Follows the writes into `file`. Without a second descriptor or a thread (a process at its
    /// limits) nothing is flushed early, which is logged: the final `fsync` does it all.
    #[must_use]
    pub fn new(file: &File) -> Self {
        let flusher = match start(file) {
            Ok(flusher) => Some(flusher),
            Err(error) => {
                tracing::info!(%error, "the disk is flushed at the end only: no flusher thread");
                None
            }
        };
        Self { pending: 0, flusher }
    }

    /// Counts `bytes` written, and asks for a flush once a window is full.
    ///
    /// # Errors
    /// A flush failed: the disk cannot be trusted, and the import stops.
    pub fn wrote(&mut self, bytes: u64) -> io::Result<()> {
        self.pending += bytes;
        if self.pending < WINDOW {
            return Ok(());
        }
        self.pending = 0;
        let Some(flusher) = &self.flusher else {
            return Ok(());
        };
        match flusher.wake.try_send(()) {
            // Full: a flush is already waiting, and it will take these pages too.
            Ok(()) | Err(TrySendError::Full(())) => Ok(()),
            // The thread ended, which it does only on a failed flush.
            Err(TrySendError::Disconnected(())) => self.finish(),
        }
    }

    /// Stops the thread once the flush it is running is done, with that flush's outcome; one
    /// still waiting is skipped, the caller's final `fsync` following at once. An error such a
    /// skipped flush would have met is then that `fsync`'s, since no one has taken it.
    ///
    /// # Errors
    /// A flush failed.
    pub fn finish(&mut self) -> io::Result<()> {
        let Some(Flusher { wake, stop, thread }) = self.flusher.take() else {
            return Ok(());
        };
        stop.store(true, Ordering::Release);
        drop(wake);
        thread
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("the disk's flusher thread panicked")))
    }
}

impl Drop for Writeback {
    /// A write that failed or a stream that broke leaves the import without [`Writeback::finish`]:
    /// the thread is still stopped and waited for. A flush that failed meanwhile is logged, since
    /// the final `fsync` would no longer see it.
    fn drop(&mut self) {
        if let Err(error) = self.finish() {
            tracing::warn!(%error, "flushing the disk failed");
        }
    }
}

/// A thread flushing a second descriptor of `file` each time it is woken, until the first
/// failure or until nothing can wake it any more.
fn start(file: &File) -> io::Result<Flusher> {
    let file = file.try_clone()?;
    let (wake, woken) = mpsc::sync_channel::<()>(1);
    let stop = Arc::new(AtomicBool::new(false));
    let stopped = Arc::clone(&stop);
    let thread = std::thread::Builder::new()
        .name("disk-flusher".to_owned())
        .spawn(move || {
            while woken.recv().is_ok() && !stopped.load(Ordering::Acquire) {
                file.sync_data()?;
            }
            Ok(())
        })?;
    Ok(Flusher { wake, stop, thread })
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use super::*;

    /// Whether the device flushed early cannot be seen per file; what must hold is that full
    /// windows are taken without an error, the count starts again, the thread ends cleanly and
    /// the file reads back as written.
    #[test]
    fn windows_are_flushed_and_the_data_kept() {
        let mut file = tempfile::NamedTempFile::new().expect("temp file");
        let chunk = vec![7_u8; 1 << 20];
        let mut writeback = Writeback::new(file.as_file());
        assert!(writeback.flusher.is_some(), "a flusher thread starts");
        let mut written = 0;
        for _ in 0..(2 * WINDOW / (1 << 20) + 3) {
            file.as_file().write_all(&chunk).expect("write");
            written += chunk.len() as u64;
            writeback.wrote(chunk.len() as u64).expect("flushes succeed");
        }
        assert_eq!(
            writeback.pending,
            3 << 20,
            "two full windows asked for, three MiB pending"
        );
        writeback.finish().expect("the last flush succeeds");
        assert!(writeback.flusher.is_none(), "the thread is gone");
        writeback.finish().expect("finishing twice is harmless");
        file.flush().expect("flush");
        let back = std::fs::read(file.path()).expect("read back");
        assert_eq!(back.len() as u64, written);
        assert!(back.iter().all(|&b| b == 7));
    }

    /// A descriptor that cannot be flushed (a pipe) stands for a device whose writeback failed:
    /// the failure reaches the writer, at its next window or at the end, never lost.
    #[test]
    fn a_failed_flush_fails_the_writer() {
        let (reader, _writer) = std::io::pipe().expect("pipe");
        let file = File::from(std::os::fd::OwnedFd::from(reader));
        let mut writeback = Writeback::new(&file);
        writeback.wrote(WINDOW).expect("the first window only wakes the thread");
        let error = loop {
            // The thread ends on its failure; the window after that reports it.
            match writeback.wrote(WINDOW) {
                Ok(()) if writeback.flusher.is_some() => std::thread::yield_now(),
                Ok(()) => panic!("the failure was lost"),
                Err(error) => break error,
            }
        };
        assert_eq!(error.raw_os_error(), Some(nix::libc::EINVAL), "{error}");
        assert!(writeback.flusher.is_none());
    }

    /// A flush the thread had started when the writer finished is waited for, and its failure
    /// reported then.
    #[test]
    fn the_failure_is_also_reported_at_the_end() {
        let (reader, _writer) = std::io::pipe().expect("pipe");
        let file = File::from(std::os::fd::OwnedFd::from(reader));
        let mut writeback = Writeback::new(&file);
        writeback.wrote(WINDOW).expect("the first window only wakes the thread");
        // The thread has taken the wake-up (and so started its flush) once the channel is empty
        // again (a second wake-up then fits) or once it has ended.
        let flusher = writeback.flusher.as_ref().expect("a flusher");
        while let Err(TrySendError::Full(())) = flusher.wake.try_send(()) {
            std::thread::yield_now();
        }
        let error = writeback.finish().expect_err("the flush failed");
        assert_eq!(error.raw_os_error(), Some(nix::libc::EINVAL), "{error}");
    }
}
