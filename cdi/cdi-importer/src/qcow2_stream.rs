//! Writing a qcow2 image into a disk file as it streams in, without saving it to scratch space
//! first. A qcow2 file maps the guest's clusters to clusters of its own through a two-level table
//! (L1, then one-cluster L2 tables); in images as `qemu-img` and QEMU write them, the L1 table
//! comes before every L2 table and each L2 table before the clusters it maps, so one pass in file
//! order knows, at each cluster, where it goes. An image laid out otherwise (a data cluster before
//! its table), or one this reader does not take (compressed clusters, a backing file, encryption,
//! an external data file, extended L2 entries), is [`StreamError::NotStreamable`]: the import
//! then goes the way it always could, through scratch space and `qemu-img convert`. Unmapped
//! and zero clusters stay holes; the file ends at the virtual size.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::FileExt as _;

use crate::space::{self, TooLarge};
use crate::sparse_copy::{CopyError, all_zeros};
use crate::writeback::Writeback;

/// The header's magic number, `QFI\xfb`.
const MAGIC: u32 = 0x5146_49fb;
/// The bits of a table entry that hold a cluster's offset.
const OFFSET_MASK: u64 = 0x00ff_ffff_ffff_fe00;
/// An L2 entry's compressed-cluster flag.
const COMPRESSED: u64 = 1 << 62;
/// An L2 entry's reads-as-zeros flag (version 3).
const ZERO: u64 = 1;
/// Incompatible features this reader can ignore: the dirty bit (the refcounts may be stale,
/// which a copy does not read) and the compression type (only compressed clusters use it, and
/// those are refused).
const IGNORABLE_INCOMPATIBLE: u64 = 0b1001;
/// How much of the guest's disk is gathered before a write.
const WRITE_BATCH: usize = 4 << 20;
/// The largest L1 table taken (32 MiB: with 64 KiB clusters, a 256 PiB disk).
const MAX_L1_BYTES: u64 = 32 << 20;
/// The most clusters known ahead of the stream at once (some 64 MiB of bookkeeping). Images as
/// qemu-img writes them keep one L2 table's clusters ahead; one with every table first
/// (`preallocation=metadata`) may need more, and goes through scratch space instead.
const MAX_AHEAD: usize = 1 << 20;

/// Why streaming stopped.
#[derive(Debug, thiserror::Error)]
pub enum StreamError {
    /// The image cannot be written in one pass: it must go through scratch space.
    #[error("the qcow2 image cannot be streamed: {0}")]
    NotStreamable(String),
    /// Reading or writing failed.
    #[error(transparent)]
    Copy(#[from] CopyError),
    /// The disk does not fit.
    #[error(transparent)]
    TooLarge(#[from] TooLarge),
}

fn not_streamable(reason: impl Into<String>) -> StreamError {
    StreamError::NotStreamable(reason.into())
}

/// What the header says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Header {
    cluster_size: u64,
    virtual_size: u64,
    l1_entries: u64,
    l1_offset: u64,
}

fn be_u32(bytes: &[u8], at: usize) -> u32 {
    let mut word = [0_u8; 4];
    word.copy_from_slice(&bytes[at..at + 4]);
    u32::from_be_bytes(word)
}

fn be_u64(bytes: &[u8], at: usize) -> u64 {
    let mut word = [0_u8; 8];
    word.copy_from_slice(&bytes[at..at + 8]);
    u64::from_be_bytes(word)
}

/// The header's first 104 bytes (version 3's fixed part; version 2's is 72).
const HEADER_BYTES: usize = 104;

fn parse_header(bytes: &[u8; HEADER_BYTES]) -> Result<Header, StreamError> {
    if be_u32(bytes, 0) != MAGIC {
        return Err(not_streamable("no qcow2 magic"));
    }
    let version = be_u32(bytes, 4);
    if !(2..=3).contains(&version) {
        return Err(not_streamable(format!("version {version}")));
    }
    if be_u64(bytes, 8) != 0 {
        return Err(not_streamable("it has a backing file"));
    }
    let cluster_bits = be_u32(bytes, 20);
    if !(9..=21).contains(&cluster_bits) {
        return Err(not_streamable(format!("cluster bits {cluster_bits}")));
    }
    if be_u32(bytes, 32) != 0 {
        return Err(not_streamable("it is encrypted"));
    }
    if version == 3 {
        let incompatible = be_u64(bytes, 72) & !IGNORABLE_INCOMPATIBLE;
        if incompatible != 0 {
            return Err(not_streamable(format!("incompatible features {incompatible:#x}")));
        }
    }
    Ok(Header {
        cluster_size: 1 << cluster_bits,
        virtual_size: be_u64(bytes, 24),
        l1_entries: u64::from(be_u32(bytes, 36)),
        l1_offset: be_u64(bytes, 40),
    })
}

/// What lies at a cluster of the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Region {
    /// The L1 table.
    L1,
    /// An L2 table, for this L1 index.
    L2(u64),
    /// A data cluster, for this guest offset.
    Data(u64),
}

/// The stream, read in file order.
struct Reader<'a> {
    stream: &'a mut dyn Read,
    position: u64,
}

impl Reader<'_> {
    /// Reads exactly `buffer`'s length; the stream ending first is the image's problem.
    fn read_exact(&mut self, buffer: &mut [u8]) -> Result<(), StreamError> {
        let mut filled = 0;
        while filled < buffer.len() {
            match self.stream.read(&mut buffer[filled..]) {
                Ok(0) => {
                    return Err(not_streamable(format!(
                        "the image ends at byte {} before what its tables name",
                        self.position + filled as u64
                    )));
                }
                Ok(n) => filled += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(CopyError::Read(e).into()),
            }
        }
        self.position += buffer.len() as u64;
        Ok(())
    }

    /// Reads and drops what lies before `offset`.
    fn skip_to(&mut self, offset: u64, scratch: &mut [u8]) -> Result<(), StreamError> {
        while self.position < offset {
            let step = usize::try_from(offset - self.position).map_or(scratch.len(), |left| left.min(scratch.len()));
            self.read_exact(&mut scratch[..step])?;
        }
        Ok(())
    }

    /// Reads the rest, so that whatever checks the whole stream (a checksum) sees all of it.
    fn drain(&mut self, scratch: &mut [u8]) -> Result<(), StreamError> {
        loop {
            match self.stream.read(scratch) {
                Ok(0) => return Ok(()),
                Ok(n) => self.position += n as u64,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(CopyError::Read(e).into()),
            }
        }
    }
}

/// Guest clusters gathered into one write while they follow each other.
struct Batch<'a> {
    target: &'a File,
    start: u64,
    bytes: Vec<u8>,
    writeback: Writeback,
}

impl Batch<'_> {
    fn flush(&mut self) -> Result<(), StreamError> {
        if !self.bytes.is_empty() {
            self.target
                .write_all_at(&self.bytes, self.start)
                .map_err(CopyError::Write)?;
            self.writeback
                .wrote(self.bytes.len() as u64)
                .map_err(CopyError::Write)?;
            self.bytes.clear();
        }
        Ok(())
    }

    fn add(&mut self, guest_offset: u64, data: &[u8]) -> Result<(), StreamError> {
        if self.bytes.is_empty()
            || guest_offset != self.start + self.bytes.len() as u64
            || self.bytes.len() >= WRITE_BATCH
        {
            self.flush()?;
            self.start = guest_offset;
        }
        self.bytes.extend_from_slice(data);
        Ok(())
    }
}

/// Adds `region` at `offset`, which must lie ahead of `position` and not be taken (a cluster
/// two entries share, which QEMU never writes in the active tables, is left to qemu-img).
fn plan_region(
    regions: &mut BTreeMap<u64, Region>,
    offset: u64,
    position: u64,
    cluster_size: u64,
    region: Region,
) -> Result<(), StreamError> {
    if !offset.is_multiple_of(cluster_size) {
        return Err(not_streamable(format!("a table names the unaligned offset {offset}")));
    }
    if offset < position {
        return Err(not_streamable(format!(
            "a cluster at byte {offset} comes before the table that maps it (at byte {position})"
        )));
    }
    if regions.len() >= MAX_AHEAD {
        return Err(not_streamable(format!(
            "more than {MAX_AHEAD} clusters are mapped ahead of the stream"
        )));
    }
    if regions.insert(offset, region).is_some() {
        return Err(not_streamable(format!("the cluster at byte {offset} is named twice")));
    }
    Ok(())
}

/// Writes the qcow2 image `stream` holds into `target` from its start, as raw, if it fits in
/// `usable` bytes; gives the virtual size. The file ends at that size. What was written stays on
/// an error (the caller removes a half-written disk).
///
/// # Errors
/// [`StreamError`].
pub fn write(stream: &mut dyn Read, target: &File, usable: u64) -> Result<u64, StreamError> {
    let mut reader = Reader { stream, position: 0 };
    let mut fixed = [0_u8; HEADER_BYTES];
    reader.read_exact(&mut fixed)?;
    let header = parse_header(&fixed)?;
    space::check_fits(header.virtual_size, usable)?;
    let cluster_size = header.cluster_size;
    let entries_per_l2 = cluster_size / 8;
    let l2_span = entries_per_l2 * cluster_size;
    let needed_l1 = header.virtual_size.div_ceil(l2_span);
    if header.l1_entries < needed_l1 {
        return Err(not_streamable(format!(
            "its L1 table has {} entries where the disk needs {needed_l1}",
            header.l1_entries
        )));
    }
    let l1_entries = needed_l1;
    let l1_bytes = l1_entries * 8;
    if l1_bytes > MAX_L1_BYTES {
        return Err(not_streamable(format!("an L1 table of {l1_bytes} bytes")));
    }
    let cluster = usize::try_from(cluster_size).map_err(|_| not_streamable("cluster size"))?;
    let mut buffer = vec![0_u8; cluster.max(WRITE_BATCH)];
    let mut regions = BTreeMap::new();
    if l1_entries > 0 {
        if header.l1_offset < reader.position || !header.l1_offset.is_multiple_of(8) {
            return Err(not_streamable(format!("the L1 table at byte {}", header.l1_offset)));
        }
        regions.insert(header.l1_offset, Region::L1);
    }
    let mut batch = Batch {
        target,
        start: 0,
        bytes: Vec::with_capacity(WRITE_BATCH),
        writeback: Writeback::new(target),
    };
    while let Some((offset, region)) = regions.pop_first() {
        reader.skip_to(offset, &mut buffer)?;
        match region {
            Region::L1 => {
                let mut table = vec![0_u8; usize::try_from(l1_bytes).map_err(|_| not_streamable("L1 size"))?];
                reader.read_exact(&mut table)?;
                for (index, entry) in table.chunks_exact(8).enumerate() {
                    let l2 = be_u64(entry, 0) & OFFSET_MASK;
                    if l2 != 0 {
                        plan_region(
                            &mut regions,
                            l2,
                            reader.position,
                            cluster_size,
                            Region::L2(index as u64),
                        )?;
                    }
                }
            }
            Region::L2(index) => {
                let table = &mut buffer[..cluster];
                reader.read_exact(table)?;
                for (slot, entry) in table.chunks_exact(8).enumerate() {
                    let entry = be_u64(entry, 0);
                    let guest = index * l2_span + slot as u64 * cluster_size;
                    if entry & COMPRESSED != 0 {
                        return Err(not_streamable("it has compressed clusters"));
                    }
                    let data = entry & OFFSET_MASK;
                    if data == 0 || entry & ZERO != 0 || guest >= header.virtual_size {
                        continue;
                    }
                    plan_region(&mut regions, data, reader.position, cluster_size, Region::Data(guest))?;
                }
            }
            Region::Data(guest) => {
                let data = &mut buffer[..cluster];
                reader.read_exact(data)?;
                if all_zeros(data) {
                    continue;
                }
                let length = usize::try_from((header.virtual_size - guest).min(cluster_size)).unwrap_or(cluster);
                batch.add(guest, &data[..length])?;
            }
        }
    }
    batch.flush()?;
    // The rest of the stream (read for its checksum) drains while the last flush runs.
    reader.drain(&mut buffer)?;
    batch.writeback.finish().map_err(CopyError::Write)?;
    target.set_len(header.virtual_size).map_err(CopyError::Write)?;
    Ok(header.virtual_size)
}

#[cfg(test)]
pub(crate) mod test_image;
#[cfg(test)]
mod tests;
