//! Letting go of start-up code once the domain runs.
//!
//! Starting a domain touches far more of the launcher than supervising it does: the manifest
//! parser, the domain renderer, libvirt's connection set-up, the TLS and XML libraries libvirt.so
//! loads. The kernel maps file pages around every fault (fault-around), so those pages stay in
//! the launcher's page tables, counted in its RSS and PSS, for the life of the VM.
//!
//! [`drop_clean_file_pages`] drops, once, the resident pages of the read-only loadable segments of
//! every object the dynamic loader has loaded (the executable and its libraries: code and read-only
//! data), where `/proc/self/smaps` shows the mapping holds nothing but the file's own bytes (no
//! page copied on write, none locked or swapped). The mappings stay; the page cache keeps the
//! bytes, so a page the launcher needs again comes back with a minor fault, and what stays resident
//! afterwards is what supervising really uses. Nothing writable is touched, nor relocated data (the
//! RELRO part of a writable segment), nor any mapping that is not a loaded object's: the loader's
//! lock is held throughout (the drop runs inside `dl_iterate_phdr`), so no object is loaded,
//! relocated or unloaded meanwhile.

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
fn mapping_header(line: &str) -> Option<((usize, usize), bool)> {
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
fn field_kib(line: &str) -> Option<(&str, u64)> {
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
#[derive(Debug, thiserror::Error)]
pub enum DropError {
    /// `/proc/self/smaps`.
    #[error("cannot read /proc/self/smaps")]
    Smaps(#[source] std::io::Error),
    /// One mapping.
    #[error("madvise(MADV_DONTNEED) of {start:#x}+{len:#x} failed (the other ranges were dropped)")]
    Madvise {
        /// First address.
        start: usize,
        /// Length.
        len: usize,
        /// Why.
        #[source]
        source: nix::Error,
    },
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
struct Work<'a> {
    clean: &'a [CleanMapping],
    page: usize,
    dropped: Dropped,
    failed: Option<(usize, usize, nix::Error)>,
}

/// Drops the resident pages of this process's loaded objects' clean read-only segments (see the
/// module's docs). A range madvise refuses is skipped; the first refusal is returned after all the
/// others were tried.
pub fn drop_clean_file_pages() -> Result<Dropped, DropError> {
    let smaps = std::fs::read_to_string("/proc/self/smaps").map_err(DropError::Smaps)?;
    let clean = clean_file_mappings(&smaps);
    let page = page_size();
    let mut work = Work {
        clean: &clean,
        page,
        dropped: Dropped::default(),
        failed: None,
    };
    for_each_loaded_object(&mut work);
    match work.failed {
        Some((start, len, source)) => Err(DropError::Madvise { start, len, source }),
        None => Ok(work.dropped),
    }
}

#[allow(unsafe_code)]
fn page_size() -> usize {
    // SAFETY: sysconf only reads a constant of the system.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(size).ok().filter(|&s| s > 0).unwrap_or(4096)
}

#[allow(unsafe_code)]
fn for_each_loaded_object(work: &mut Work<'_>) {
    // SAFETY: `visit` only reads the program headers the loader passes it, for the duration of the
    // call, and `work` outlives dl_iterate_phdr, which calls `visit` synchronously.
    unsafe {
        libc::dl_iterate_phdr(Some(visit), std::ptr::from_mut(work).cast());
    }
}

/// Called by `dl_iterate_phdr` for each loaded object, with the loader's lock held.
#[allow(unsafe_code)]
unsafe extern "C" fn visit(
    info: *mut libc::dl_phdr_info,
    _size: libc::size_t,
    data: *mut std::ffi::c_void,
) -> libc::c_int {
    // SAFETY: `data` is the `Work` passed to dl_iterate_phdr above, and `info` the loader's
    // description of one object, valid during this call; its `dlpi_phnum` headers are at
    // `dlpi_phdr`.
    let (work, info) = unsafe { (&mut *data.cast::<Work<'_>>(), &*info) };
    if info.dlpi_phdr.is_null() {
        return 0;
    }
    // SAFETY: as above.
    let headers = unsafe { std::slice::from_raw_parts(info.dlpi_phdr, usize::from(info.dlpi_phnum)) };
    let base = usize::try_from(info.dlpi_addr).unwrap_or(0);
    let segments: Vec<(usize, usize)> = headers
        .iter()
        .filter(|h| h.p_type == libc::PT_LOAD && h.p_flags & libc::PF_W == 0)
        .filter_map(|h| {
            let start = base.checked_add(usize::try_from(h.p_vaddr).ok()?)?;
            Some((start, start.checked_add(usize::try_from(h.p_memsz).ok()?)?))
        })
        .collect();
    for (start, end) in droppable(&segments, work.clean, work.page) {
        let Some(address) = NonNull::new(start as *mut std::ffi::c_void) else {
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
fn advise_dontneed(start: NonNull<std::ffi::c_void>, len: usize) -> nix::Result<()> {
    // SAFETY: `start..start+len` lies in a read-only loadable segment of an object the loader has
    // loaded, inside a private file mapping that smaps showed with no page copied on write, locked
    // or swapped. The loader's lock is held, so the object cannot be unloaded or relocated now, and
    // nothing else makes a loaded object's read-only segment writable: every page equals the
    // file's bytes, and MADV_DONTNEED only drops them from the page tables; the next access maps
    // the same bytes again from the page cache.
    unsafe { nix::sys::mman::madvise(start, len, nix::sys::mman::MmapAdvise::MADV_DONTNEED) }
}

/// Drops the launcher's clean file pages and logs the outcome: called once the domain runs.
pub fn after_domain_start() {
    match drop_clean_file_pages() {
        Ok(dropped) => tracing::debug!(
            ranges = dropped.ranges,
            bytes = dropped.bytes,
            "start-up pages released"
        ),
        Err(e) => tracing::warn!(
            error = %kubevirt_api::error_report::one_line(&e),
            "cannot release some of the start-up pages"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMAPS: &str = "\
55d0c0000000-55d0c0100000 r--p 00000000 fd:01 1234 /usr/bin/virt-launcher
Size:               1024 kB
Rss:                 512 kB
Anonymous:             0 kB
Locked:                0 kB
55d0c0100000-55d0c0600000 r-xp 00100000 fd:01 1234 /usr/bin/virt-launcher
Size:               5120 kB
Rss:                4096 kB
Anonymous:             0 kB
55d0c0600000-55d0c0700000 r--p 00600000 fd:01 1234 /usr/bin/virt-launcher
Rss:                 800 kB
Anonymous:           192 kB
55d0c0700000-55d0c0710000 rw-p 00700000 fd:01 1234 /usr/bin/virt-launcher
Rss:                  64 kB
Anonymous:            64 kB
7f0000000000-7f0000100000 rw-p 00000000 00:00 0 
Rss:                 300 kB
Anonymous:           300 kB
7f0000200000-7f0000300000 r--s 00000000 fd:01 99 /usr/lib/locale/locale-archive
Rss:                 100 kB
Anonymous:             0 kB
7f0000300000-7f0000400000 r-xp 00000000 fd:01 77 /usr/lib/libvirt.so.0
Rss:                   0 kB
Anonymous:             0 kB
7f0000400000-7f0000500000 r-xp 00000000 fd:01 78 /usr/lib/libpinned.so
Rss:                  40 kB
Anonymous:             0 kB
Locked:               40 kB
7ffd00000000-7ffd00021000 r-xp 00000000 00:00 0 [vdso]
Rss:                   4 kB
";

    #[test]
    fn only_unwritten_read_only_private_file_mappings_are_dropped() {
        let found = clean_file_mappings(SMAPS);
        assert_eq!(
            found,
            [
                CleanMapping {
                    start: 0x55d0_c000_0000,
                    len: 0x10_0000,
                    resident_kib: 512
                },
                CleanMapping {
                    start: 0x55d0_c010_0000,
                    len: 0x50_0000,
                    resident_kib: 4096
                },
            ],
            "relocated data, writable data, anonymous, shared, empty, locked and [vdso] stay"
        );
    }

    #[test]
    fn only_page_aligned_parts_of_segments_inside_clean_mappings_are_dropped() {
        let clean = [
            CleanMapping {
                start: 0x1000,
                len: 0x4000,
                resident_kib: 16,
            },
            CleanMapping {
                start: 0x9000,
                len: 0x1000,
                resident_kib: 4,
            },
        ];
        // A segment from the middle of a page to past the first mapping, one over both, one in
        // no clean mapping (a writable or relocated neighbour).
        let segments = [(0x1800, 0x6000), (0x8000, 0xa000), (0xb000, 0xc000)];
        assert_eq!(
            droppable(&segments, &clean, 0x1000),
            [(0x2000, 0x5000), (0x9000, 0xa000)]
        );
    }

    fn resident_kib_of(address: usize) -> u64 {
        let smaps = std::fs::read_to_string("/proc/self/smaps").expect("smaps");
        let mut inside = false;
        for line in smaps.lines() {
            if let Some(((start, end), _)) = mapping_header(line) {
                inside = (start..end).contains(&address);
            } else if inside && let Some(("Rss", kib)) = field_kib(line) {
                return kib;
            }
        }
        panic!("no mapping holds {address:#x}");
    }

    fn clean_resident_kib() -> u64 {
        let smaps = std::fs::read_to_string("/proc/self/smaps").expect("smaps");
        clean_file_mappings(&smaps).iter().map(|m| m.resident_kib).sum()
    }

    #[test]
    fn loaded_code_is_dropped_and_other_file_mappings_stay() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("data");
        let bytes: Vec<u8> = (0..64 * 4096u32)
            .map(|i| u8::try_from(i % 251).expect("below 251"))
            .collect();
        std::fs::write(&path, &bytes).expect("write");
        let file = std::fs::File::open(&path).expect("open");
        // A read-only private mapping that is no loaded object's, read through so it is resident.
        #[allow(unsafe_code)]
        // SAFETY: a fresh read-only private mapping of a file this test owns; it is unmapped below
        // and no reference into it outlives that.
        let mapped = unsafe {
            nix::sys::mman::mmap(
                None,
                std::num::NonZeroUsize::new(bytes.len()).expect("non-empty"),
                nix::sys::mman::ProtFlags::PROT_READ,
                nix::sys::mman::MapFlags::MAP_PRIVATE,
                &file,
                0,
            )
        }
        .expect("mmap");
        #[allow(unsafe_code)]
        // SAFETY: the mapping is `bytes.len()` long, readable and alive until munmap below.
        let view = unsafe { std::slice::from_raw_parts(mapped.as_ptr().cast::<u8>(), bytes.len()) };
        assert_eq!(view, &bytes[..]);
        let address = mapped.as_ptr() as usize;
        let before = clean_resident_kib();
        let dropped = drop_clean_file_pages().expect("drop");
        let after = clean_resident_kib();
        let data_after = resident_kib_of(address);
        #[allow(unsafe_code)]
        // SAFETY: `view` is not used after this.
        unsafe { nix::sys::mman::munmap(mapped, bytes.len()) }.expect("munmap");
        assert!(dropped.ranges > 0 && dropped.bytes > 0, "{dropped:?}");
        assert!(
            after < before,
            "the loaded objects' clean pages went: {before} KiB resident before, {after} KiB after"
        );
        assert_eq!(data_after, 256, "a mapping that is no loaded object's stays resident");
    }
}
