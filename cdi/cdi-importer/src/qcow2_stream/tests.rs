//! Hand-built qcow2 images: the layouts the reader takes, and each it hands to scratch space.

use std::io::Cursor;
use std::os::unix::fs::MetadataExt as _;

use super::*;

const CLUSTER_BITS: u32 = 9;
const CLUSTER: usize = 1 << CLUSTER_BITS;

/// A version-3 image of 512-byte clusters: the header (cluster 0), the L1 table (cluster 1), one
/// L2 table (cluster 2), then `data` clusters in the order given, each `(guest cluster, fill)`.
struct Image {
    virtual_size: u64,
    data: Vec<(u64, u8)>,
    /// L2 entries' extra flags, by guest cluster.
    flags: Vec<(u64, u64)>,
    /// Put the L2 table after the data.
    l2_last: bool,
    incompatible: u64,
    backing: bool,
}

impl Image {
    fn new(virtual_size: u64, data: &[(u64, u8)]) -> Self {
        Self {
            virtual_size,
            data: data.to_vec(),
            flags: Vec::new(),
            l2_last: false,
            incompatible: 0,
            backing: false,
        }
    }

    fn bytes(&self) -> Vec<u8> {
        let clusters = 3 + self.data.len();
        let mut out = vec![0_u8; clusters * CLUSTER];
        out[..4].copy_from_slice(&MAGIC.to_be_bytes());
        out[4..8].copy_from_slice(&3_u32.to_be_bytes());
        if self.backing {
            out[8..16].copy_from_slice(&400_u64.to_be_bytes());
        }
        out[20..24].copy_from_slice(&CLUSTER_BITS.to_be_bytes());
        out[24..32].copy_from_slice(&self.virtual_size.to_be_bytes());
        out[36..40].copy_from_slice(&1_u32.to_be_bytes());
        out[40..48].copy_from_slice(&(CLUSTER as u64).to_be_bytes());
        out[72..80].copy_from_slice(&self.incompatible.to_be_bytes());
        out[100..104].copy_from_slice(&104_u32.to_be_bytes());
        let (l2_cluster, first_data) = if self.l2_last { (2 + self.data.len(), 2) } else { (2, 3) };
        let l2_offset = (l2_cluster * CLUSTER) as u64;
        out[CLUSTER..CLUSTER + 8].copy_from_slice(&(l2_offset | 1 << 63).to_be_bytes());
        for (n, (guest, fill)) in self.data.iter().enumerate() {
            let host = (first_data + n) * CLUSTER;
            out[host..host + CLUSTER].fill(*fill);
            let flags = self.flags.iter().find(|(g, _)| g == guest).map_or(0, |(_, f)| *f);
            let slot = l2_cluster * CLUSTER + usize::try_from(*guest).expect("slot") * 8;
            out[slot..slot + 8].copy_from_slice(&(host as u64 | 1 << 63 | flags).to_be_bytes());
        }
        out
    }
}

/// The disk the image stands for.
fn expected(image: &Image) -> Vec<u8> {
    let mut disk = vec![0_u8; usize::try_from(image.virtual_size).expect("size")];
    for (guest, fill) in &image.data {
        let at = usize::try_from(*guest).expect("guest") * CLUSTER;
        let zeroed = image.flags.iter().any(|(g, f)| g == guest && f & ZERO != 0);
        if at < disk.len() && !zeroed {
            let end = (at + CLUSTER).min(disk.len());
            disk[at..end].fill(*fill);
        }
    }
    disk
}

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
