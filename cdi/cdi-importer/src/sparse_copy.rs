//! Writing a raw image as it streams in. Into a file, runs of zeros become holes (as upstream's
//! importer skips all-zero 32 KiB chunks), so a mostly empty disk takes only what it holds; a
//! block device gets every byte, since what it held before is unknown.

use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::FileExt as _;

use crate::writeback::Writeback;

/// The size of the chunks looked at for zeros (upstream's).
pub const ZERO_CHUNK: usize = 32 * 1024;
/// How much is read before it is written: large enough that writes are few.
const BUFFER: usize = 4 * 1024 * 1024;

/// Where the bytes go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Holes {
    /// Zeros are skipped and the file is extended to its length at the end.
    Punch,
    /// Every byte is written.
    WriteZeros,
}

/// What is being written, which decides whether it is pushed to the device as it fills.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Written {
    /// The disk: flushed to its device as it fills ([`crate::writeback`]).
    Disk,
    /// A copy in the scratch space, read back at once and removed: left to the page cache.
    ScratchCopy,
}

/// Why a copy stopped.
#[derive(Debug, thiserror::Error)]
pub enum CopyError {
    /// Reading the stream failed (the source, or a decoder).
    #[error("reading the image: {0}")]
    Read(#[source] io::Error),
    /// Writing the target failed.
    #[error("writing the image: {0}")]
    Write(#[source] io::Error),
    /// The stream went past what the target may take (upstream's words, which the controller
    /// shortens to "DataVolume too small to contain image").
    #[error("virtual image size is larger than the reported available storage {limit}. A larger PVC is required")]
    TooLarge {
        /// What the target may take.
        limit: u64,
    },
}

/// Fills `buffer` from `stream`, short only at the stream's end.
fn fill(stream: &mut dyn Read, buffer: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buffer.len() {
        match stream.read(&mut buffer[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

/// Whether `chunk` holds only zeros. Each 512-byte piece is or-ed whole, which the compiler turns
/// into vector instructions; a byte-by-byte search that stops at the first non-zero byte is not,
/// and cost a quarter of a raw import's time.
#[must_use]
pub fn all_zeros(chunk: &[u8]) -> bool {
    chunk
        .chunks(512)
        .all(|piece| piece.iter().fold(0_u8, |acc, &b| acc | b) == 0)
}

/// Writes the non-zero runs of `data` at `offset` (every byte with [`Holes::WriteZeros`]).
pub(crate) fn write_runs(target: &File, data: &[u8], offset: u64, holes: Holes) -> io::Result<()> {
    if holes == Holes::WriteZeros {
        return target.write_all_at(data, offset);
    }
    let mut run_start: Option<usize> = None;
    for (index, chunk) in data.chunks(ZERO_CHUNK).enumerate() {
        let at = index * ZERO_CHUNK;
        let zero = all_zeros(chunk);
        match (zero, run_start) {
            (false, None) => run_start = Some(at),
            (true, Some(start)) => {
                target.write_all_at(&data[start..at], offset + start as u64)?;
                run_start = None;
            }
            _ => {}
        }
    }
    if let Some(start) = run_start {
        target.write_all_at(&data[start..], offset + start as u64)?;
    }
    Ok(())
}

/// Copies `stream` into `target` from its start, taking no more than `limit` bytes, and returns
/// how many it took. With [`Holes::Punch`] the file ends at exactly that length.
///
/// # Errors
/// [`CopyError`]; what was written stays (the caller removes a half-written image).
pub fn copy(
    stream: &mut dyn Read,
    target: &File,
    holes: Holes,
    written_as: Written,
    limit: u64,
) -> Result<u64, CopyError> {
    let mut buffer = vec![0_u8; BUFFER];
    let mut written: u64 = 0;
    let mut writeback = (written_as == Written::Disk).then(|| Writeback::new(target));
    loop {
        let n = fill(stream, &mut buffer).map_err(CopyError::Read)?;
        if n == 0 {
            break;
        }
        let end = written + n as u64;
        if end > limit {
            return Err(CopyError::TooLarge { limit });
        }
        write_runs(target, &buffer[..n], written, holes).map_err(CopyError::Write)?;
        if let Some(writeback) = writeback.as_mut() {
            writeback.wrote(n as u64).map_err(CopyError::Write)?;
        }
        written = end;
    }
    if let Some(writeback) = writeback.as_mut() {
        writeback.finish().map_err(CopyError::Write)?;
    }
    if holes == Holes::Punch {
        target.set_len(written).map_err(CopyError::Write)?;
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;
    use std::os::unix::fs::MetadataExt as _;

    use super::*;

    #[test]
    fn all_zeros_finds_a_single_byte_anywhere() {
        let mut chunk = vec![0_u8; ZERO_CHUNK + 3];
        assert!(all_zeros(&chunk));
        assert!(all_zeros(&[]));
        for at in [0, 1, 511, 512, 4095, ZERO_CHUNK, ZERO_CHUNK + 2] {
            chunk[at] = 0x80;
            assert!(!all_zeros(&chunk), "a byte at {at}");
            chunk[at] = 0;
        }
    }

    /// 8 MiB: a non-zero first chunk, zeros, a non-zero run across a buffer boundary, zeros to
    /// the end.
    fn mostly_zeros() -> Vec<u8> {
        let mut data = vec![0_u8; 8 << 20];
        data[..100].fill(1);
        data[BUFFER - 10..BUFFER + 70_000].fill(2);
        data
    }

    fn copied(data: &[u8], holes: Holes) -> (Vec<u8>, u64, tempfile::NamedTempFile) {
        let file = tempfile::NamedTempFile::new().expect("temp file");
        let written = copy(
            &mut Cursor::new(data.to_vec()),
            file.as_file(),
            holes,
            Written::Disk,
            u64::MAX,
        )
        .expect("copied");
        assert_eq!(written, data.len() as u64);
        let back = std::fs::read(file.path()).expect("read back");
        let allocated = file.as_file().metadata().expect("metadata").blocks() * 512;
        (back, allocated, file)
    }

    #[test]
    fn zeros_become_holes_and_the_file_reads_back_the_same() {
        let data = mostly_zeros();
        let (back, allocated, _file) = copied(&data, Holes::Punch);
        assert!(back == data, "the file reads back as the stream");
        assert!(
            allocated < 1 << 20,
            "only the non-zero runs take space ({allocated} bytes)"
        );
    }

    #[test]
    fn a_block_device_gets_every_byte() {
        let data = mostly_zeros();
        let (back, allocated, _file) = copied(&data, Holes::WriteZeros);
        assert!(back == data);
        assert!(allocated >= data.len() as u64, "zeros were written ({allocated} bytes)");
    }

    #[test]
    fn a_stream_of_only_zeros_or_nothing_keeps_its_length() {
        for data in [vec![0_u8; 3 * ZERO_CHUNK + 5], Vec::new(), vec![9_u8; 5]] {
            let (back, _, _file) = copied(&data, Holes::Punch);
            assert_eq!(back, data);
        }
    }

    #[test]
    fn a_stream_past_the_limit_stops_with_the_limit_named() {
        let file = tempfile::NamedTempFile::new().expect("temp file");
        let error = copy(
            &mut Cursor::new(vec![1_u8; 1000]),
            file.as_file(),
            Holes::Punch,
            Written::Disk,
            999,
        )
        .expect_err("too large");
        assert!(matches!(error, CopyError::TooLarge { limit: 999 }), "{error}");
    }

    #[test]
    fn a_failing_stream_is_a_read_error() {
        struct Broken;
        impl Read for Broken {
            fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
                Err(io::Error::new(io::ErrorKind::ConnectionReset, "reset"))
            }
        }
        let file = tempfile::NamedTempFile::new().expect("temp file");
        let error = copy(&mut Broken, file.as_file(), Holes::Punch, Written::Disk, u64::MAX).expect_err("broken");
        assert!(matches!(error, CopyError::Read(_)), "{error}");
    }

    /// `/dev/null` takes every write but no flush: the disk's failed flush fails the copy, at a
    /// window or at the end, and a scratch copy, which is never flushed, succeeds.
    #[test]
    fn a_failed_flush_of_the_disk_fails_the_copy() {
        let null = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/null")
            .expect("/dev/null");
        let data = vec![1_u8; usize::try_from(2 * crate::writeback::WINDOW).expect("size") + 7];
        let error = copy(
            &mut Cursor::new(&data),
            &null,
            Holes::WriteZeros,
            Written::Disk,
            u64::MAX,
        )
        .expect_err("the flush fails");
        match error {
            CopyError::Write(error) => assert_eq!(error.raw_os_error(), Some(nix::libc::EINVAL), "{error}"),
            other => panic!("not a write error: {other}"),
        }
        let copied = copy(
            &mut Cursor::new(&data),
            &null,
            Holes::WriteZeros,
            Written::ScratchCopy,
            u64::MAX,
        )
        .expect("a scratch copy is not flushed");
        assert_eq!(copied, data.len() as u64);
    }
}
