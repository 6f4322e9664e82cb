//! Writing a disk back to its device while the image still streams in. A write lands in the
//! page cache, and without a push the kernel keeps it there until the final `fsync`, which then
//! waits for all of it while the download sits idle. Asking for writeback after every window
//! written lets the device work while the network does, so the final `fsync` finds little left.
//! Nothing waits for it here, and nothing fails for it: the final `fsync` stays what makes the
//! disk durable.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd as _;

/// How much is written between two requests for writeback.
pub const WINDOW: u64 = 32 * 1024 * 1024;

/// Counts what is written into one file and starts its writeback every [`WINDOW`]. The request
/// is a hint: the kernel may refuse it for a while (a filesystem short of memory or of free
/// clusters answers `ENOMEM` or `ENOSPC` where the final `fsync` would wait and succeed), so a
/// refusal is logged once and the import goes on without asking again.
#[derive(Debug)]
pub struct Writeback<'a> {
    file: &'a File,
    pending: u64,
    refused: bool,
}

impl<'a> Writeback<'a> {
    /// Follows the writes into `file`.
    #[must_use]
    pub fn new(file: &'a File) -> Self {
        Self {
            file,
            pending: 0,
            refused: false,
        }
    }

    /// Counts `bytes` written, and starts the writeback of the file's dirty pages once a window
    /// is full.
    pub fn wrote(&mut self, bytes: u64) {
        if self.refused {
            return;
        }
        self.pending += bytes;
        if self.pending < WINDOW {
            return;
        }
        self.pending = 0;
        if let Err(error) = start(self.file) {
            tracing::info!(%error, "the disk is written back at the end only: the kernel refused an early writeback");
            self.refused = true;
        }
    }
}

/// Starts writing back every dirty page of `file` without waiting for any of it
/// (`sync_file_range` with `SYNC_FILE_RANGE_WRITE` over the whole file). Pages already being
/// written are passed over, so each call costs only what was written since the last one.
#[allow(unsafe_code)]
fn start(file: &File) -> io::Result<()> {
    // SAFETY: one system call on a descriptor that `file` keeps open; it reads and writes none
    // of this process's memory.
    let result = unsafe { nix::libc::sync_file_range(file.as_raw_fd(), 0, 0, nix::libc::SYNC_FILE_RANGE_WRITE) };
    if result == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use super::*;

    /// Whether the kernel wrote a page back early cannot be seen per file; what must hold is
    /// that each full window asks without an error, the count starts again, and the file reads
    /// back as written.
    #[test]
    fn windows_start_writeback_and_keep_the_data() {
        let mut file = tempfile::NamedTempFile::new().expect("temp file");
        let chunk = vec![7_u8; 1 << 20];
        let mut writeback = Writeback::new(file.as_file());
        let mut written = 0;
        for _ in 0..(2 * WINDOW / (1 << 20) + 3) {
            file.as_file().write_all(&chunk).expect("write");
            written += chunk.len() as u64;
            writeback.wrote(chunk.len() as u64);
        }
        assert_eq!(
            writeback.pending,
            3 << 20,
            "two full windows started, three MiB pending"
        );
        assert!(!writeback.refused, "a regular file's writeback is taken");
        file.flush().expect("flush");
        let back = std::fs::read(file.path()).expect("read back");
        assert_eq!(back.len() as u64, written);
        assert!(back.iter().all(|&b| b == 7));
    }

    #[test]
    fn a_refused_writeback_is_not_asked_again_and_fails_nothing() {
        let (reader, _writer) = std::io::pipe().expect("pipe");
        let file = File::from(std::os::fd::OwnedFd::from(reader));
        let error = start(&file).expect_err("a pipe has no pages to write back");
        assert_eq!(error.raw_os_error(), Some(nix::libc::ESPIPE), "{error}");
        let mut writeback = Writeback::new(&file);
        writeback.wrote(WINDOW);
        assert!(writeback.refused);
        writeback.wrote(WINDOW);
        assert_eq!(writeback.pending, 0, "not counted, not asked again");
    }
}
