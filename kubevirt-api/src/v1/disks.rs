//! `spec.domain.devices.disks`: how each volume appears to the guest.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One entry of `spec.domain.devices.disks`. At most one of `disk`, `lun` and `cdrom` is set;
/// none means a plain disk.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Disk {
    /// Name; matches a volume in `spec.volumes`.
    pub name: String,
    /// Attach as a disk.
    pub disk: Option<DiskTarget>,
    /// Attach as a SCSI LUN.
    pub lun: Option<LunTarget>,
    /// Attach as a CD-ROM.
    pub cdrom: Option<CdRomTarget>,
    /// Boot order; lower boots first.
    pub boot_order: Option<u32>,
    /// Serial number the guest sees.
    pub serial: Option<String>,
    /// Give this disk its own IOThread.
    #[serde(rename = "dedicatedIOThread")]
    pub dedicated_io_thread: Option<bool>,
    /// `none`, `writethrough` or `writeback`.
    pub cache: Option<String>,
    /// `native`, `threads` or `default`.
    pub io: Option<String>,
    /// Tag for device-role metadata.
    pub tag: Option<String>,
    /// Logical and physical block sizes.
    pub block_size: Option<BlockSize>,
    /// Several VMs may attach the disk at once.
    pub shareable: Option<bool>,
    /// `stop`, `ignore`, `report` or `enospace`; upstream defaults to `stop`.
    pub error_policy: Option<String>,
    /// Track changed blocks for incremental backups.
    pub changed_block_tracking: Option<bool>,
}

/// `disks[].disk`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DiskTarget {
    /// `virtio`, `sata`, `scsi` or `usb`.
    pub bus: Option<String>,
    /// Read-only disk.
    pub readonly: Option<bool>,
    /// PCI address, `dddd:bb:ss.f`; virtio only.
    pub pci_address: Option<String>,
    /// Present the disk as a solid-state drive (no rotation); SATA and SCSI only.
    pub solid_state: Option<bool>,
}

/// `disks[].lun`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LunTarget {
    /// `scsi` (or `sata`).
    pub bus: Option<String>,
    /// Read-only LUN.
    pub readonly: Option<bool>,
    /// Allow SCSI persistent reservations through the pr-helper.
    pub reservation: Option<bool>,
}

/// `disks[].cdrom`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CdRomTarget {
    /// `sata` or `scsi`.
    pub bus: Option<String>,
    /// Read-only; true when unset.
    pub readonly: Option<bool>,
    /// `open` or `closed`; closed when unset.
    pub tray: Option<String>,
}

/// `disks[].blockSize`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BlockSize {
    /// Explicit sizes.
    pub custom: Option<CustomBlockSize>,
    /// Take the sizes from the volume.
    pub match_volume: Option<MatchVolume>,
}

/// `disks[].blockSize.custom`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CustomBlockSize {
    /// Logical block size in bytes.
    pub logical: u32,
    /// Physical block size in bytes.
    pub physical: u32,
    /// Discard granularity in bytes.
    pub discard_granularity: Option<u32>,
}

/// `disks[].blockSize.matchVolume`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MatchVolume {
    /// Whether to match the volume's block sizes.
    pub enabled: Option<bool>,
}
