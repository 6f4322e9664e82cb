//! Letting go of start-up code once the domain runs.
//!
//! Starting a domain touches far more of the launcher than supervising it does: the manifest
//! parser, the domain renderer, libvirt's connection set-up, the TLS and XML libraries libvirt.so
//! loads. The kernel maps file pages around every fault (fault-around), so those pages stay in
//! the launcher's page tables, counted in its RSS and PSS, for the life of the VM.
//!
//! [`drop_clean_file_pages`] unmaps, once, every page of the launcher's read-only private file
//! mappings that holds nothing but the file's own bytes (no page of the mapping was ever copied on
//! write). The page cache keeps the data, so a page the launcher needs again comes back with a
//! minor fault; what stays resident afterwards is what supervising really uses. Writable mappings
//! and read-only ones with a copied page (relocated data) are never touched: dropping those would
//! lose their contents.

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

/// What a drop released.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Dropped {
    /// Mappings unmapped.
    pub mappings: usize,
    /// Resident kibibytes they held.
    pub kib: u64,
}

/// Why the drop did not happen.
#[derive(Debug, thiserror::Error)]
pub enum DropError {
    /// `/proc/self/smaps`.
    #[error("cannot read /proc/self/smaps")]
    Smaps(#[source] std::io::Error),
    /// One mapping.
    #[error("madvise(MADV_DONTNEED) of {start:#x}+{len:#x} failed")]
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

/// Drops the resident pages of this process's clean file mappings (see the module's docs).
pub fn drop_clean_file_pages() -> Result<Dropped, DropError> {
    let smaps = std::fs::read_to_string("/proc/self/smaps").map_err(DropError::Smaps)?;
    let mut dropped = Dropped::default();
    for mapping in clean_file_mappings(&smaps) {
        let Some(start) = NonNull::new(mapping.start as *mut std::ffi::c_void) else {
            continue;
        };
        advise_dontneed(start, mapping.len).map_err(|source| DropError::Madvise {
            start: mapping.start,
            len: mapping.len,
            source,
        })?;
        dropped.mappings += 1;
        dropped.kib += mapping.resident_kib;
    }
    Ok(dropped)
}

#[allow(unsafe_code)]
fn advise_dontneed(start: NonNull<std::ffi::c_void>, len: usize) -> nix::Result<()> {
    // SAFETY: `start..start+len` is a whole mapping this process has, read from its own smaps: a
    // private, read-only file mapping none of whose pages was ever copied on write, so every page
    // equals the file's bytes and MADV_DONTNEED only unmaps them; the next access maps the same
    // bytes again from the page cache. Nothing can write to it (it is not writable), so no page
    // becomes a copy between the read of smaps and this call.
    unsafe { nix::sys::mman::madvise(start, len, nix::sys::mman::MmapAdvise::MADV_DONTNEED) }
}

/// Drops the launcher's clean file pages and logs the outcome: called once the domain runs.
pub fn after_domain_start() {
    match drop_clean_file_pages() {
        Ok(dropped) => tracing::debug!(
            mappings = dropped.mappings,
            kib = dropped.kib,
            "start-up pages released"
        ),
        Err(e) => tracing::warn!(error = %e, "cannot release the start-up pages"),
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

    #[test]
    fn a_read_file_mapping_is_unmapped_and_reads_back_the_same() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("data");
        let bytes: Vec<u8> = (0..64 * 4096u32)
            .map(|i| u8::try_from(i % 251).expect("below 251"))
            .collect();
        std::fs::write(&path, &bytes).expect("write");
        let file = std::fs::File::open(&path).expect("open");
        // A read-only private mapping, read through so every page is resident.
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
        assert!(resident_kib_of(address) >= 256, "read through, so resident");
        let dropped = drop_clean_file_pages().expect("drop");
        assert!(dropped.mappings >= 1 && dropped.kib >= 256, "{dropped:?}");
        assert_eq!(resident_kib_of(address), 0, "no page of it is mapped any more");
        assert_eq!(view, &bytes[..], "and every byte reads back from the page cache");
        #[allow(unsafe_code)]
        // SAFETY: `view` is not used after this.
        unsafe { nix::sys::mman::munmap(mapped, bytes.len()) }.expect("munmap");
    }
}
