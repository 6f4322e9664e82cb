//! `<devices>` and its storage and network children. The other devices are in [`super::peripherals`].

use serde::{Deserialize, Serialize};

use super::Empty;
pub use super::peripherals::*;

/// `<devices>`. Lists keep libvirt's element names; `overlapped-lists` lets libvirt interleave them.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Devices {
    /// QEMU binary (libvirt fills it in).
    pub emulator: Option<String>,
    /// Disks, in guest order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub disk: Vec<Disk>,
    /// Controllers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub controller: Vec<Controller>,
    /// NICs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub interface: Vec<Interface>,
    /// Serial ports.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub serial: Vec<Serial>,
    /// Consoles.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub console: Vec<Console>,
    /// virtio-serial channels.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub channel: Vec<Channel>,
    /// Input devices.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub input: Vec<Input>,
    /// Graphics (VNC).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub graphics: Vec<Graphics>,
    /// Video cards.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub video: Vec<Video>,
    /// Watchdogs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub watchdog: Vec<Watchdog>,
    /// Random number generators.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rng: Vec<Rng>,
    /// TPMs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tpm: Vec<Tpm>,
    /// Sound cards.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sound: Vec<Sound>,
    /// USB redirection.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub redirdev: Vec<Redirdev>,
    /// Memory devices (virtio-mem).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub memory: Vec<MemoryDevice>,
    /// Memory balloon.
    pub memballoon: Option<Memballoon>,
    /// vsock.
    pub vsock: Option<Vsock>,
    /// Panic notifiers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub panic: Vec<Panic>,
}

/// `<alias name='ua-..'/>`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Alias {
    /// Alias name.
    #[serde(rename = "@name")]
    pub name: String,
}

impl Alias {
    /// The user alias upstream gives a device named in the VMI spec: `ua-<name>`.
    #[must_use]
    pub fn user(name: &str) -> Self {
        Self {
            name: format!("ua-{name}"),
        }
    }
}

/// `<address>` of any type (pci, drive, ...). Numbers stay strings: libvirt writes them in hex.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Address {
    /// `pci`, `drive`, `virtio-serial`, ...
    #[serde(rename = "@type")]
    pub address_type: String,
    /// PCI domain.
    #[serde(rename = "@domain")]
    pub domain: Option<String>,
    /// Controller (drive addresses).
    #[serde(rename = "@controller")]
    pub controller: Option<String>,
    /// Bus.
    #[serde(rename = "@bus")]
    pub bus: Option<String>,
    /// PCI slot.
    #[serde(rename = "@slot")]
    pub slot: Option<String>,
    /// PCI function.
    #[serde(rename = "@function")]
    pub function: Option<String>,
    /// Drive target.
    #[serde(rename = "@target")]
    pub target: Option<String>,
    /// Drive unit.
    #[serde(rename = "@unit")]
    pub unit: Option<String>,
    /// Port (virtio-serial, usb).
    #[serde(rename = "@port")]
    pub port: Option<String>,
}

/// `<boot order='N'/>`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Boot {
    /// Boot order.
    #[serde(rename = "@order")]
    pub order: u32,
}

/// `<disk>`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Disk {
    /// `file`, `block`, `network`.
    #[serde(rename = "@type")]
    pub disk_type: String,
    /// `disk`, `cdrom`, `lun`.
    #[serde(rename = "@device")]
    pub device: String,
    /// `virtio-non-transitional`, `virtio-transitional`.
    #[serde(rename = "@model")]
    pub model: Option<String>,
    /// QEMU driver options.
    pub driver: Option<DiskDriver>,
    /// Where the data is.
    pub source: Option<DiskSource>,
    /// The image under an overlay.
    #[serde(rename = "backingStore")]
    pub backing_store: Option<BackingStore>,
    /// Guest device.
    pub target: DiskTarget,
    /// Serial number.
    pub serial: Option<String>,
    /// Read-only.
    pub readonly: Option<Empty>,
    /// Shareable between domains.
    pub shareable: Option<Empty>,
    /// Block sizes.
    pub blockio: Option<BlockIo>,
    /// Boot order.
    pub boot: Option<Boot>,
    /// Alias, `ua-<disk name>`.
    pub alias: Option<Alias>,
    /// Address.
    pub address: Option<Address>,
}

/// `<disk><driver>`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiskDriver {
    /// `qemu`.
    #[serde(rename = "@name")]
    pub name: Option<String>,
    /// `raw` or `qcow2`.
    #[serde(rename = "@type")]
    pub format: Option<String>,
    /// Cache mode.
    #[serde(rename = "@cache")]
    pub cache: Option<String>,
    /// `stop`, `ignore`, `report`, `enospace`.
    #[serde(rename = "@error_policy")]
    pub error_policy: Option<String>,
    /// `native` or `threads`.
    #[serde(rename = "@io")]
    pub io: Option<String>,
    /// IOThread id.
    #[serde(rename = "@iothread")]
    pub iothread: Option<u32>,
    /// `unmap` or `ignore`.
    #[serde(rename = "@discard")]
    pub discard: Option<String>,
    /// Queues.
    #[serde(rename = "@queues")]
    pub queues: Option<u32>,
}

/// `<disk><source>`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiskSource {
    /// File path, for `type='file'`.
    #[serde(rename = "@file")]
    pub file: Option<String>,
    /// Device path, for `type='block'`.
    #[serde(rename = "@dev")]
    pub dev: Option<String>,
    /// Volume name.
    #[serde(rename = "@name")]
    pub name: Option<String>,
    /// SCSI persistent reservations.
    pub reservations: Option<Reservations>,
}

/// `<reservations managed='no'><source type='unix' path mode='client'/></reservations>`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reservations {
    /// `no`: the pr-helper is external.
    #[serde(rename = "@managed")]
    pub managed: String,
    /// The pr-helper socket.
    pub source: UnixSource,
}

/// A unix socket source: `<source type='unix' path mode/>` or `<source mode path/>`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnixSource {
    /// `unix` where the element needs a type.
    #[serde(rename = "@type")]
    pub source_type: Option<String>,
    /// `bind` or `client`.
    #[serde(rename = "@mode")]
    pub mode: Option<String>,
    /// Socket path.
    #[serde(rename = "@path")]
    pub path: Option<String>,
}

/// `<backingStore type><format type/><source/></backingStore>`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackingStore {
    /// `file` or `block`.
    #[serde(rename = "@type")]
    pub store_type: Option<String>,
    /// Image format.
    pub format: Option<super::TypeAttr>,
    /// Where the image is.
    pub source: Option<DiskSource>,
}

/// `<target dev bus tray>`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiskTarget {
    /// `vda`, `sda`, ...
    #[serde(rename = "@dev")]
    pub dev: String,
    /// `virtio`, `sata`, `scsi`, `usb`.
    #[serde(rename = "@bus")]
    pub bus: Option<String>,
    /// `open` or `closed` (cdrom).
    #[serde(rename = "@tray")]
    pub tray: Option<String>,
    /// `1` for a solid-state drive (SATA and SCSI).
    #[serde(rename = "@rotation_rate")]
    pub rotation_rate: Option<u32>,
}

/// `<blockio>`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockIo {
    /// Logical block size.
    #[serde(rename = "@logical_block_size")]
    pub logical_block_size: Option<u32>,
    /// Physical block size.
    #[serde(rename = "@physical_block_size")]
    pub physical_block_size: Option<u32>,
    /// Discard granularity.
    #[serde(rename = "@discard_granularity")]
    pub discard_granularity: Option<u32>,
}

/// `<controller>`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Controller {
    /// `usb`, `virtio-serial`, `scsi`, `pci`, `sata`.
    #[serde(rename = "@type")]
    pub controller_type: String,
    /// Index.
    #[serde(rename = "@index")]
    pub index: Option<String>,
    /// Model.
    #[serde(rename = "@model")]
    pub model: Option<String>,
    /// Driver options.
    pub driver: Option<ControllerDriver>,
    /// The 64-bit PCI hole's size, on the `pcie-root` controller.
    pub pcihole64: Option<PciHole64>,
    /// Alias.
    pub alias: Option<Alias>,
    /// Address.
    pub address: Option<Address>,
}

/// `<controller><pcihole64 unit>`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PciHole64 {
    /// Its unit, `KiB`.
    #[serde(rename = "@unit")]
    pub unit: Option<String>,
    /// Its size.
    #[serde(rename = "$text")]
    pub size: u64,
}

/// `<controller><driver iothread queues>`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControllerDriver {
    /// IOThread id.
    #[serde(rename = "@iothread")]
    pub iothread: Option<u32>,
    /// Queues.
    #[serde(rename = "@queues")]
    pub queues: Option<u32>,
}

/// `<interface>`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Interface {
    /// `ethernet` for the core bindings.
    #[serde(rename = "@type")]
    pub interface_type: String,
    /// MAC address.
    pub mac: Option<Mac>,
    /// tap device.
    pub target: Option<InterfaceTarget>,
    /// NIC model.
    pub model: Option<super::TypeAttr>,
    /// vhost driver and queues.
    pub driver: Option<InterfaceDriver>,
    /// MTU.
    pub mtu: Option<Mtu>,
    /// Link state.
    pub link: Option<super::State>,
    /// Boot order.
    pub boot: Option<Boot>,
    /// Option ROM.
    pub rom: Option<Rom>,
    /// ACPI index.
    pub acpi: Option<AcpiIndex>,
    /// Alias, `ua-<interface name>`.
    pub alias: Option<Alias>,
    /// Address.
    pub address: Option<Address>,
}

/// `<mac address>`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mac {
    /// MAC address.
    #[serde(rename = "@address")]
    pub address: String,
}

/// `<target dev managed>`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InterfaceTarget {
    /// tap name.
    #[serde(rename = "@dev")]
    pub dev: String,
    /// `no`: the tap exists already.
    #[serde(rename = "@managed")]
    pub managed: Option<String>,
}

/// `<driver name queues>`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InterfaceDriver {
    /// `vhost`.
    #[serde(rename = "@name")]
    pub name: Option<String>,
    /// Queues.
    #[serde(rename = "@queues")]
    pub queues: Option<u32>,
}

/// `<mtu size>`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mtu {
    /// MTU.
    #[serde(rename = "@size")]
    pub size: u32,
}

/// `<rom enabled>`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rom {
    /// `no` to disable iPXE.
    #[serde(rename = "@enabled")]
    pub enabled: Option<String>,
}

/// `<acpi index>`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AcpiIndex {
    /// Index.
    #[serde(rename = "@index")]
    pub index: u32,
}
