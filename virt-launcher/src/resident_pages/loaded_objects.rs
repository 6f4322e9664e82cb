//! Dropping the resident pages of the loaded objects' clean read-only segments (see the parent
//! module's docs for why and what is safe to drop).
//!
//! This file uses nothing but `std` and the C library, declared here. Linux, 64-bit only.

use std::ffi::{c_int, c_long, c_void};
use std::ptr::NonNull;

/// One mapping whose resident pages can be dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CleanMapping {
    /// First address.
    pub start: usize,
    /// Length in bytes.
    pub len: usize,
    /// Resident kibibytes before the drop.
    pub resident_kib: u64,
}

/// The mappings in `smaps` (the text of `/proc/<pid>/smaps`) that are private, not writable,
/// backed by a file, resident, and hold no anonymous (copied-on-write) page.
#[must_use]
pub fn clean_file_mappings(smaps: &str) -> Vec<CleanMapping> {
    let mut found = Vec::new();
    let mut current: Option<(CleanMapping, bool)> = None;
    let mut anonymous = 0u64;
    for line in smaps.lines() {
        if let Some((range, candidate)) = mapping_header(line) {
            flush(current.take(), anonymous, &mut found);
            anonymous = 0;
            current = Some((
                CleanMapping {
                    start: range.0,
                    len: range.1.saturating_sub(range.0),
                    resident_kib: 0,
                },
                candidate,
            ));
        } else if let Some((field, kib)) = field_kib(line)
            && let Some((mapping, _)) = current.as_mut()
        {
            match field {
                "Rss" => mapping.resident_kib = kib,
                // A copied page, or one the kernel may not drop: the mapping is left alone.
                "Anonymous" | "Locked" | "Swap" => anonymous += kib,
                _ => {}
            }
        }
    }
    flush(current, anonymous, &mut found);
    found
}

/// Keeps `current` when it is a candidate with resident pages and no anonymous one.
fn flush(current: Option<(CleanMapping, bool)>, anonymous: u64, found: &mut Vec<CleanMapping>) {
    if let Some((mapping, true)) = current
        && anonymous == 0
        && mapping.resident_kib > 0
    {
        found.push(mapping);
    }
}

/// A mapping's header line: its address range, and whether it is a read-only private mapping of
/// a file. `None` for the field lines that follow it.
pub(crate) fn mapping_header(line: &str) -> Option<((usize, usize), bool)> {
    let mut parts = line.split_whitespace();
    let (start, end) = parts.next()?.split_once('-')?;
    let start = usize::from_str_radix(start, 16).ok()?;
    let end = usize::from_str_radix(end, 16).ok()?;
    let perms = parts.next()?.as_bytes();
    let _offset = parts.next()?;
    let _device = parts.next()?;
    let inode: u64 = parts.next()?.parse().ok()?;
    let path = parts.next().unwrap_or("");
    let candidate = perms.len() == 4
        && perms[0] == b'r'
        && perms[1] == b'-'
        && perms[3] == b'p'
        && inode != 0
        && path.starts_with('/');
    Some(((start, end), candidate))
}

/// A `Name:   123 kB` field line.
pub(crate) fn field_kib(line: &str) -> Option<(&str, u64)> {
    let (name, value) = line.split_once(':')?;
    let kib = value.trim().strip_suffix("kB")?.trim().parse().ok()?;
    Some((name, kib))
}

/// What a drop covered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Dropped {
    /// Address ranges dropped.
    pub ranges: usize,
    /// Their length in bytes (resident or not).
    pub bytes: usize,
}

/// Why the drop did not happen.
#[derive(Debug)]
pub enum DropError {
    /// `/proc/self/smaps` could not be read.
    Smaps(std::io::Error),
    /// One mapping could not be dropped (the other ranges were).
    Madvise {
        /// First address.
        start: usize,
        /// Length.
        len: usize,
        /// Why.
        source: std::io::Error,
    },
}

impl std::fmt::Display for DropError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Smaps(_) => write!(f, "cannot read /proc/self/smaps"),
            Self::Madvise { start, len, .. } => write!(
                f,
                "madvise(MADV_DONTNEED) of {start:#x}+{len:#x} failed (the other ranges were dropped)"
            ),
        }
    }
}

impl std::error::Error for DropError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Smaps(source) | Self::Madvise { source, .. } => Some(source),
        }
    }
}

/// The page-aligned parts of the read-only segments `segments` (`[start, end)`) that lie in
/// `clean` mappings.
#[must_use]
pub fn droppable(segments: &[(usize, usize)], clean: &[CleanMapping], page: usize) -> Vec<(usize, usize)> {
    let mut ranges = Vec::new();
    for &(start, end) in segments {
        let (start, end) = (start.next_multiple_of(page), end - end % page);
        for mapping in clean {
            let (from, to) = (start.max(mapping.start), end.min(mapping.start + mapping.len));
            if from < to {
                ranges.push((from, to));
            }
        }
    }
    ranges
}

/// What the loader callback works with.
struct Work {
    /// The clean mappings, read from smaps at the first object, with the loader's lock held.
    clean: Option<Vec<CleanMapping>>,
    smaps_error: Option<std::io::Error>,
    page: usize,
    dropped: Dropped,
    failed: Option<(usize, usize, std::io::Error)>,
}

/// Drops the resident pages of this process's loaded objects' clean read-only segments (see the
/// module's docs). A range madvise refuses is skipped; the first refusal is returned after all the
/// others were tried.
pub fn drop_clean_file_pages() -> Result<Dropped, DropError> {
    let mut work = Work {
        clean: None,
        smaps_error: None,
        page: page_size(),
        dropped: Dropped::default(),
        failed: None,
    };
    for_each_loaded_object(&mut work);
    if let Some(source) = work.smaps_error {
        return Err(DropError::Smaps(source));
    }
    match work.failed {
        Some((start, len, source)) => Err(DropError::Madvise { start, len, source }),
        None => Ok(work.dropped),
    }
}

/// The C library's declarations this file needs (glibc, Linux, 64-bit).
mod c {
    use std::ffi::{c_char, c_int, c_long, c_void};

    /// `_SC_PAGESIZE`.
    pub const SC_PAGESIZE: c_int = 30;
    /// `MADV_DONTNEED`.
    pub const MADV_DONTNEED: c_int = 4;
    /// `PT_LOAD`.
    pub const PT_LOAD: u32 = 1;
    /// `PF_W`.
    pub const PF_W: u32 = 2;

    /// `Elf64_Phdr`.
    #[repr(C)]
    pub struct ProgramHeader {
        pub p_type: u32,
        pub p_flags: u32,
        pub p_offset: u64,
        pub p_vaddr: u64,
        pub p_paddr: u64,
        pub p_filesz: u64,
        pub p_memsz: u64,
        pub p_align: u64,
    }

    /// The leading fields of `struct dl_phdr_info`, the only ones read (the loader passes the
    /// whole structure's size, and later fields are optional by design).
    #[repr(C)]
    pub struct ObjectInfo {
        pub dlpi_addr: u64,
        pub dlpi_name: *const c_char,
        pub dlpi_phdr: *const ProgramHeader,
        pub dlpi_phnum: u16,
    }

    /// The callback `dl_iterate_phdr` calls for each loaded object.
    pub type Visit = unsafe extern "C" fn(*mut ObjectInfo, usize, *mut c_void) -> c_int;

    #[allow(unsafe_code)]
    unsafe extern "C" {
        pub fn sysconf(name: c_int) -> c_long;
        pub fn madvise(address: *mut c_void, len: usize, advice: c_int) -> c_int;
        pub fn dl_iterate_phdr(visit: Option<Visit>, data: *mut c_void) -> c_int;
    }
}

#[allow(unsafe_code)]
fn page_size() -> usize {
    // SAFETY: sysconf only reads a constant of the system.
    let size: c_long = unsafe { c::sysconf(c::SC_PAGESIZE) };
    usize::try_from(size).ok().filter(|&s| s > 0).unwrap_or(4096)
}

#[allow(unsafe_code)]
fn for_each_loaded_object(work: &mut Work) {
    // SAFETY: `visit` only reads the program headers the loader passes it, for the duration of the
    // call, and `work` outlives dl_iterate_phdr, which calls `visit` synchronously.
    unsafe {
        c::dl_iterate_phdr(Some(visit), std::ptr::from_mut(work).cast());
    }
}

/// Called by `dl_iterate_phdr` for each loaded object, with the loader's lock held.
#[allow(unsafe_code)]
unsafe extern "C" fn visit(info: *mut c::ObjectInfo, _size: usize, data: *mut c_void) -> c_int {
    // SAFETY: `data` is the `Work` passed to dl_iterate_phdr above, and `info` the loader's
    // description of one object, valid during this call; its `dlpi_phnum` headers are at
    // `dlpi_phdr`.
    let (work, info) = unsafe { (&mut *data.cast::<Work>(), &*info) };
    // The mappings are read with the loader's lock held, so that none of them is an object's
    // that is unloaded, or loaded at the same place, before the drop.
    if work.clean.is_none() {
        match std::fs::read_to_string("/proc/self/smaps") {
            Ok(smaps) => work.clean = Some(clean_file_mappings(&smaps)),
            Err(e) => {
                work.smaps_error = Some(e);
                return 1;
            }
        }
    }
    if info.dlpi_phdr.is_null() {
        return 0;
    }
    // SAFETY: as above.
    let headers = unsafe { std::slice::from_raw_parts(info.dlpi_phdr, usize::from(info.dlpi_phnum)) };
    let base = usize::try_from(info.dlpi_addr).unwrap_or(0);
    let segments: Vec<(usize, usize)> = headers
        .iter()
        .filter(|h| h.p_type == c::PT_LOAD && h.p_flags & c::PF_W == 0)
        .filter_map(|h| {
            let start = base.checked_add(usize::try_from(h.p_vaddr).ok()?)?;
            Some((start, start.checked_add(usize::try_from(h.p_memsz).ok()?)?))
        })
        .collect();
    let ranges = droppable(&segments, work.clean.as_deref().unwrap_or_default(), work.page);
    for (start, end) in ranges {
        let Some(address) = NonNull::new(start as *mut c_void) else {
            continue;
        };
        match advise_dontneed(address, end - start) {
            Ok(()) => {
                work.dropped.ranges += 1;
                work.dropped.bytes += end - start;
            }
            Err(e) => {
                work.failed.get_or_insert((start, end - start, e));
            }
        }
    }
    0
}

#[allow(unsafe_code)]
fn advise_dontneed(start: NonNull<c_void>, len: usize) -> std::io::Result<()> {
    // SAFETY: `start..start+len` lies in a read-only loadable segment of an object the loader has
    // loaded, inside a private file mapping that smaps showed with no page copied on write, locked
    // or swapped. The loader's lock is held, so the object cannot be unloaded or relocated now, and
    // nothing else makes a loaded object's read-only segment writable: every page equals the
    // file's bytes, and MADV_DONTNEED only drops them from the page tables; the next access maps
    // the same bytes again from the page cache.
    let outcome = unsafe { c::madvise(start.as_ptr(), len, c::MADV_DONTNEED) };
    if outcome == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}
