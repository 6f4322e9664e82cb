//! Reading a tar archive (an image layer) as a stream, entry by entry, without holding it: each
//! header says an entry's path, kind and size, and the entry wanted is then read in place. POSIX
//! ustar, GNU long names and PAX `path` and `size` records are understood, as the tools that build
//! container images write them. Each header's checksum is checked, so a stream that is not a tar
//! archive is told apart.

use std::io::{self, Read};

use crate::layers::Stream;

const BLOCK: usize = 512;

/// What an entry is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryKind {
    /// A regular file.
    File,
    /// A directory.
    Directory,
    /// Anything else (links, devices, FIFOs).
    Other,
}

/// An entry's header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Its path in the archive.
    pub path: String,
    /// Its kind.
    pub kind: EntryKind,
    /// Its data's size.
    pub size: u64,
}

/// Why the archive could not be read.
#[derive(Debug, thiserror::Error)]
pub enum TarError {
    /// Reading failed.
    #[error("reading the archive: {0}")]
    Read(#[from] io::Error),
    /// A header is not a tar header.
    #[error("not a tar archive: {0}")]
    Invalid(&'static str),
}

/// An archive being read.
pub struct TarStream {
    inner: Stream,
    /// Bytes of the current entry (and its padding) not read yet.
    unread: u64,
    /// The current entry's data size.
    current: u64,
}

/// The largest entry size taken (Go's reader refuses larger ones too).
const MAX_SIZE: u64 = i64::MAX as u64;

impl std::fmt::Debug for TarStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TarStream")
            .field("unread", &self.unread)
            .finish_non_exhaustive()
    }
}

/// `size` rounded up to whole blocks (sizes are at most [`MAX_SIZE`], so this cannot overflow).
fn padded(size: u64) -> u64 {
    size.div_ceil(BLOCK as u64) * BLOCK as u64
}

fn checked_size(size: u64) -> Result<u64, TarError> {
    if size > MAX_SIZE {
        return Err(TarError::Invalid("an entry's size is larger than a tar entry may be"));
    }
    Ok(size)
}

/// A NUL- (or space-) ended field.
fn text(field: &[u8]) -> &[u8] {
    let end = field.iter().position(|&b| b == 0).unwrap_or(field.len());
    &field[..end]
}

fn octal(field: &[u8]) -> Result<u64, TarError> {
    // GNU's base-256 form for values too large for the octal digits.
    if field.first().is_some_and(|b| b & 0x80 != 0) {
        let mut value: u64 = u64::from(field[0] & 0x7f);
        for &b in &field[1..] {
            value = value
                .checked_mul(256)
                .and_then(|v| v.checked_add(u64::from(b)))
                .ok_or(TarError::Invalid("a size too large"))?;
        }
        return Ok(value);
    }
    let digits = String::from_utf8_lossy(text(field));
    let digits = digits.trim_matches(|c: char| c == ' ' || c == '\0');
    if digits.is_empty() {
        return Ok(0);
    }
    u64::from_str_radix(digits, 8).map_err(|_| TarError::Invalid("a number field is not octal"))
}

fn checksum_matches(header: &[u8; BLOCK]) -> Result<bool, TarError> {
    let stored = octal(&header[148..156])?;
    let sum: u64 = header
        .iter()
        .enumerate()
        .map(|(i, &b)| {
            if (148..156).contains(&i) {
                u64::from(b' ')
            } else {
                u64::from(b)
            }
        })
        .sum();
    Ok(stored == sum)
}

/// PAX records: `LEN key=value\n`, each.
fn pax_records(data: &[u8]) -> Result<Vec<(String, String)>, TarError> {
    let mut records = Vec::new();
    let mut rest = data;
    while !rest.is_empty() && rest[0] != 0 {
        let space = rest
            .iter()
            .position(|&b| b == b' ')
            .ok_or(TarError::Invalid("a PAX record without a length"))?;
        let length: usize = std::str::from_utf8(&rest[..space])
            .ok()
            .and_then(|l| l.parse().ok())
            .filter(|&l| l > space && l <= rest.len())
            .ok_or(TarError::Invalid("a PAX record's length is wrong"))?;
        let record = String::from_utf8_lossy(&rest[space + 1..length]);
        let record = record.strip_suffix('\n').unwrap_or(&record);
        if let Some((key, value)) = record.split_once('=') {
            records.push((key.to_owned(), value.to_owned()));
        }
        rest = &rest[length..];
    }
    Ok(records)
}

impl TarStream {
    /// Reads the archive in `inner`.
    #[must_use]
    pub fn new(inner: Stream) -> Self {
        Self {
            inner,
            unread: 0,
            current: 0,
        }
    }

    fn skip_unread(&mut self) -> Result<(), TarError> {
        let skipped = io::copy(&mut (&mut self.inner).take(self.unread), &mut io::sink())?;
        if skipped != self.unread {
            return Err(TarError::Read(io::ErrorKind::UnexpectedEof.into()));
        }
        self.unread = 0;
        Ok(())
    }

    /// Reads a block, or `None` at the stream's end.
    fn block(&mut self) -> Result<Option<[u8; BLOCK]>, TarError> {
        let mut block = [0_u8; BLOCK];
        let mut filled = 0;
        while filled < BLOCK {
            match self.inner.read(&mut block[filled..]) {
                Ok(0) if filled == 0 => return Ok(None),
                Ok(0) => return Err(TarError::Read(io::ErrorKind::UnexpectedEof.into())),
                Ok(n) => filled += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(Some(block))
    }

    /// The data of a metadata entry (a long name, PAX records), read whole.
    fn metadata(&mut self, size: u64) -> Result<Vec<u8>, TarError> {
        if size > 1 << 20 {
            return Err(TarError::Invalid("a metadata entry larger than 1 MiB"));
        }
        let mut data = Vec::new();
        (&mut self.inner).take(padded(size)).read_to_end(&mut data)?;
        if (data.len() as u64) < padded(size) {
            return Err(TarError::Read(io::ErrorKind::UnexpectedEof.into()));
        }
        data.truncate(usize::try_from(size).unwrap_or(usize::MAX));
        Ok(data)
    }

    /// The next entry's header, its data left to read; `None` at the archive's end. The data of
    /// the entry before, if not read, is skipped.
    ///
    /// # Errors
    /// [`TarError`].
    pub fn next_entry(&mut self) -> Result<Option<Entry>, TarError> {
        self.skip_unread()?;
        let mut long_name: Option<String> = None;
        let mut pax_path: Option<String> = None;
        let mut pax_size: Option<u64> = None;
        loop {
            let Some(header) = self.block()? else {
                return Ok(None);
            };
            if header.iter().all(|&b| b == 0) {
                return Ok(None);
            }
            if !checksum_matches(&header)? {
                return Err(TarError::Invalid("a header's checksum is wrong"));
            }
            let size = checked_size(octal(&header[124..136])?)?;
            match header[156] {
                b'L' => {
                    long_name = Some(String::from_utf8_lossy(text(&self.metadata(size)?)).into_owned());
                    continue;
                }
                b'x' => {
                    for (key, value) in pax_records(&self.metadata(size)?)? {
                        match key.as_str() {
                            "path" => pax_path = Some(value),
                            "size" => {
                                pax_size = Some(checked_size(
                                    value
                                        .parse()
                                        .map_err(|_| TarError::Invalid("a PAX size is not a number"))?,
                                )?);
                            }
                            _ => {}
                        }
                    }
                    continue;
                }
                b'g' | b'K' => {
                    self.metadata(size)?;
                    continue;
                }
                _ => {}
            }
            let name = String::from_utf8_lossy(text(&header[..100])).into_owned();
            let ustar = &header[257..263] == b"ustar\0";
            let prefix = if ustar {
                String::from_utf8_lossy(text(&header[345..500])).into_owned()
            } else {
                String::new()
            };
            let path = pax_path.or(long_name).unwrap_or_else(|| {
                if prefix.is_empty() {
                    name
                } else {
                    format!("{prefix}/{name}")
                }
            });
            let size = pax_size.unwrap_or(size);
            let kind = match header[156] {
                // An old-style entry whose name ends in a slash is a directory (as Go reads it).
                0 if path.ends_with('/') => EntryKind::Directory,
                b'0' | 0 | b'7' => EntryKind::File,
                b'5' => EntryKind::Directory,
                _ => EntryKind::Other,
            };
            // Links, devices, directories and FIFOs (types 1 to 6) have no data, whatever their
            // size field says; any other type's data is skipped by its size.
            let size = if matches!(header[156], b'1'..=b'6') || kind == EntryKind::Directory {
                0
            } else {
                size
            };
            self.unread = padded(size);
            self.current = size;
            return Ok(Some(Entry { path, kind, size }));
        }
    }

    /// The data of the entry `next_entry` gave last, as a stream of its size; a stream that ends
    /// before is an [`io::ErrorKind::UnexpectedEof`] error, never a short entry.
    #[must_use]
    pub fn into_entry(self) -> Stream {
        Box::new(Exact {
            inner: self.inner.take(self.current),
            left: self.current,
        })
    }
}

/// An entry's data: exactly its size.
struct Exact<R> {
    inner: R,
    left: u64,
}

impl<R: Read> Read for Exact<R> {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buffer)?;
        if n == 0 && self.left > 0 && !buffer.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("the layer ended {} bytes before the end of the entry", self.left),
            ));
        }
        self.left -= n as u64;
        Ok(n)
    }
}

#[cfg(test)]
mod tests;
