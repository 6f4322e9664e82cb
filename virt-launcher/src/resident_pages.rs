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

mod loaded_objects;

pub use loaded_objects::{CleanMapping, DropError, Dropped, clean_file_mappings, drop_clean_file_pages, droppable};

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
    use super::loaded_objects::{field_kib, mapping_header};
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
