//! Hand-built qcow2 images: the layouts the reader takes, and each it hands to scratch space.

use std::io::Cursor;
use std::os::unix::fs::MetadataExt as _;

use super::*;

use super::test_image::{Image, expected};

fn stream_into(bytes: &[u8], usable: u64) -> (Result<u64, StreamError>, tempfile::NamedTempFile) {
    let target = tempfile::NamedTempFile::new().expect("target");
    let result = write(&mut Cursor::new(bytes.to_vec()), target.as_file(), usable);
    (result, target)
}

fn not_streamable(bytes: &[u8]) -> String {
    match stream_into(bytes, u64::MAX).0 {
        Err(StreamError::NotStreamable(reason)) => reason,
        other => panic!("not streamable: {other:?}"),
    }
}

#[test]
fn clusters_land_at_their_guest_offsets_and_the_rest_stays_holes() {
    // Guest clusters out of order in the file, a zero-filled one, a partial last cluster.
    let image = Image::new(20 * 512 + 100, &[(7, 0xa7), (0, 0x10), (3, 0), (20, 0xee), (1, 0x11)]);
    let (result, target) = stream_into(&image.bytes(), u64::MAX);
    assert_eq!(result.expect("streams"), image.virtual_size);
    assert_eq!(std::fs::read(target.path()).expect("read"), expected(&image));
    let blocks = target.as_file().metadata().expect("meta").blocks();
    assert!(
        blocks * 512 < image.virtual_size,
        "unmapped clusters are holes: {blocks} blocks"
    );
}

#[test]
fn an_entry_that_reads_as_zeros_is_a_hole() {
    let mut image = Image::new(8 * 512, &[(2, 0x22), (5, 0x55)]);
    image.flags = vec![(5, ZERO)];
    let (result, target) = stream_into(&image.bytes(), u64::MAX);
    result.expect("streams");
    assert_eq!(std::fs::read(target.path()).expect("read"), expected(&image));
}

#[test]
fn layouts_and_features_one_pass_cannot_take_go_to_scratch_space() {
    let mut late_table = Image::new(8 * 512, &[(1, 0x11)]);
    late_table.l2_last = true;
    assert!(not_streamable(&late_table.bytes()).contains("comes before"));

    let mut compressed = Image::new(8 * 512, &[(1, 0x11)]);
    compressed.flags = vec![(1, COMPRESSED)];
    assert!(not_streamable(&compressed.bytes()).contains("compressed"));

    let mut backed = Image::new(8 * 512, &[(1, 0x11)]);
    backed.backing = true;
    assert!(not_streamable(&backed.bytes()).contains("backing"));

    let mut external = Image::new(8 * 512, &[(1, 0x11)]);
    external.incompatible = 1 << 2;
    assert!(not_streamable(&external.bytes()).contains("incompatible"));

    let whole = Image::new(8 * 512, &[(1, 0x11)]).bytes();
    assert!(not_streamable(&whole[..whole.len() - 100]).contains("ends at byte"));

    let mut short_l1 = Image::new(70 * 512 * 64, &[(1, 0x11)]).bytes();
    short_l1[36..40].copy_from_slice(&1_u32.to_be_bytes());
    assert!(not_streamable(&short_l1).contains("L1 table has 1 entries"));

    let mut encrypted = whole.clone();
    encrypted[32..36].copy_from_slice(&1_u32.to_be_bytes());
    assert!(not_streamable(&encrypted).contains("encrypted"));
}

#[test]
fn a_dirty_image_streams() {
    let mut dirty = Image::new(8 * 512, &[(4, 0x44)]);
    dirty.incompatible = 1;
    let (result, target) = stream_into(&dirty.bytes(), u64::MAX);
    result.expect("streams");
    assert_eq!(std::fs::read(target.path()).expect("read"), expected(&dirty));
}

#[test]
fn a_disk_larger_than_the_volume_is_refused_before_anything_is_written() {
    let image = Image::new(64 * 512, &[(1, 0x11)]);
    let (result, target) = stream_into(&image.bytes(), 63 * 512);
    assert!(matches!(result, Err(StreamError::TooLarge(_))), "{result:?}");
    assert_eq!(target.as_file().metadata().expect("meta").len(), 0);
}

/// Counts what is read, as the checksum and the progress do.
struct Counted(Cursor<Vec<u8>>, u64);

impl Read for Counted {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        let n = self.0.read(buffer)?;
        self.1 += n as u64;
        Ok(n)
    }
}

#[test]
fn the_whole_stream_is_read() {
    let mut bytes = Image::new(8 * 512, &[(1, 0x11)]).bytes();
    bytes.extend_from_slice(&[0x99; 5000]);
    let total = bytes.len() as u64;
    let mut counted = Counted(Cursor::new(bytes), 0);
    let target = tempfile::NamedTempFile::new().expect("target");
    write(&mut counted, target.as_file(), u64::MAX).expect("streams");
    assert_eq!(counted.1, total);
}
