//! Hand-built qcow2 images for tests: small clusters, one L2 table, data in any order.

use super::{MAGIC, ZERO};

pub(crate) const CLUSTER_BITS: u32 = 9;
pub(crate) const CLUSTER: usize = 1 << CLUSTER_BITS;

/// A version-3 image of 512-byte clusters: the header (cluster 0), the L1 table (cluster 1), one
/// L2 table (cluster 2), then `data` clusters in the order given, each `(guest cluster, fill)`.
pub(crate) struct Image {
    pub(crate) virtual_size: u64,
    pub(crate) data: Vec<(u64, u8)>,
    /// L2 entries' extra flags, by guest cluster.
    pub(crate) flags: Vec<(u64, u64)>,
    /// Put the L2 table after the data.
    pub(crate) l2_last: bool,
    pub(crate) incompatible: u64,
    pub(crate) backing: bool,
}

impl Image {
    pub(crate) fn new(virtual_size: u64, data: &[(u64, u8)]) -> Self {
        Self {
            virtual_size,
            data: data.to_vec(),
            flags: Vec::new(),
            l2_last: false,
            incompatible: 0,
            backing: false,
        }
    }

    pub(crate) fn bytes(&self) -> Vec<u8> {
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
pub(crate) fn expected(image: &Image) -> Vec<u8> {
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
