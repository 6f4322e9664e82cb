//! `spec.domain.devices`: disks, interfaces and the other devices a guest sees.
//!
//! Enumerated strings (bus, cache mode, model) stay `String` here, as upstream's Go types do, so a
//! bad value reaches the validating webhook and is rejected with its field path instead of failing
//! to parse.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::EmptyObject;

/// `spec.domain.devices`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Devices {
    /// Use virtio-transitional models so that old guests find their devices.
    pub use_virtio_transitional: Option<bool>,
    /// Do not add the controllers that hotplug needs.
    pub disable_hotplug: Option<bool>,
    /// Disks, in the order the guest enumerates them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub disks: Vec<Disk>,
    /// Watchdog device.
    pub watchdog: Option<Watchdog>,
    /// Network interfaces; each names a network in `spec.networks`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub interfaces: Vec<Interface>,
    /// Input devices (tablets).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<Input>,
    /// Add the default pod interface when none is given; true when unset.
    pub autoattach_pod_interface: Option<bool>,
    /// Add VNC and a video device; true when unset.
    pub autoattach_graphics_device: Option<bool>,
    /// Add a serial console; true when unset.
    pub autoattach_serial_console: Option<bool>,
    /// Log the serial console to a file that the launcher streams.
    pub log_serial_console: Option<bool>,
    /// Add a memory balloon; true when unset.
    pub autoattach_mem_balloon: Option<bool>,
    /// Add a default input device.
    pub autoattach_input_device: Option<bool>,
    /// Add a virtio vsock device.
    #[serde(rename = "autoattachVSOCK")]
    pub autoattach_vsock: Option<bool>,
    /// Random number generator, written `rng: {}`.
    pub rng: Option<EmptyObject>,
    /// One queue per vCPU on virtio disks.
    pub block_multi_queue: Option<bool>,
    /// One queue per vCPU on virtio NICs.
    pub network_interface_multiqueue: Option<bool>,
    /// GPUs passed through from the host.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpus: Vec<HostDevice>,
    /// Other host devices passed through.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub host_devices: Vec<HostDevice>,
    /// Shared file systems (virtiofs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub filesystems: Vec<Filesystem>,
    /// USB redirection from a client, written `clientPassthrough: {}`.
    pub client_passthrough: Option<EmptyObject>,
    /// Sound card.
    pub sound: Option<SoundDevice>,
    /// Emulated TPM.
    pub tpm: Option<Tpm>,
    /// Video device model.
    pub video: Option<Video>,
    /// Downward metrics as a virtio-serial port, written `downwardMetrics: {}`.
    pub downward_metrics: Option<EmptyObject>,
}

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

/// `spec.domain.devices.watchdog`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Watchdog {
    /// Name, used in the device alias.
    pub name: String,
    /// Intel 6300ESB watchdog.
    pub i6300esb: Option<I6300Esb>,
}

/// `watchdog.i6300esb`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct I6300Esb {
    /// `poweroff`, `reset` or `shutdown`; upstream defaults to `reset`.
    pub action: Option<String>,
}

/// Parses a MAC address as `macAddress` takes it: six pairs of hex digits separated by `:` or `-`.
#[must_use]
pub fn parse_mac_address(text: &str) -> Option<[u8; 6]> {
    let mut mac = [0_u8; 6];
    let mut parts = text.split([':', '-']);
    for byte in &mut mac {
        let part = parts.next()?;
        if part.len() != 2 || !part.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        *byte = u8::from_str_radix(part, 16).ok()?;
    }
    parts.next().is_none().then_some(mac)
}

/// One entry of `spec.domain.devices.interfaces`. Exactly one binding method is set.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Interface {
    /// Name; matches a network in `spec.networks`.
    pub name: String,
    /// NIC model, e.g. `virtio` or `e1000`.
    pub model: Option<String>,
    /// A network binding plugin.
    pub binding: Option<PluginBinding>,
    /// Bridge binding: the guest takes the pod's address.
    pub bridge: Option<EmptyObject>,
    /// Slirp binding (removed upstream).
    pub slirp: Option<EmptyObject>,
    /// Masquerade binding: NAT from the pod address to the guest.
    pub masquerade: Option<EmptyObject>,
    /// SR-IOV binding.
    pub sriov: Option<EmptyObject>,
    /// passt binding (core binding in older releases).
    pub passt: Option<EmptyObject>,
    /// macvtap binding (core binding in older releases).
    pub macvtap: Option<EmptyObject>,
    /// Ports to forward (masquerade) or to allow.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<Port>,
    /// MAC address.
    pub mac_address: Option<String>,
    /// Boot order; lower boots first.
    pub boot_order: Option<u32>,
    /// PCI address, `dddd:bb:ss.f`.
    pub pci_address: Option<String>,
    /// Extra DHCP options served to the guest.
    pub dhcp_options: Option<DhcpOptions>,
    /// Tag for device-role metadata.
    pub tag: Option<String>,
    /// ACPI index, for stable interface names in the guest.
    pub acpi_index: Option<u32>,
    /// `up`, `down` or `absent`.
    pub state: Option<String>,
}

/// `interfaces[].binding`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PluginBinding {
    /// Name of a binding plugin registered in the KubeVirt CR.
    pub name: String,
}

/// `interfaces[].ports[]`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Port {
    /// Optional name.
    pub name: Option<String>,
    /// `TCP` or `UDP`; TCP when unset.
    pub protocol: Option<String>,
    /// Port number, 1–65535.
    pub port: i32,
}

/// `interfaces[].dhcpOptions`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DhcpOptions {
    /// Boot file name (option 67).
    pub boot_file_name: Option<String>,
    /// TFTP server name (option 66).
    pub tftp_server_name: Option<String>,
    /// NTP servers (option 42).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ntp_servers: Vec<String>,
    /// Private options 224–254.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub private_options: Vec<DhcpPrivateOption>,
}

/// `dhcpOptions.privateOptions[]`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DhcpPrivateOption {
    /// Option code, 224–254.
    pub option: i32,
    /// Option value.
    pub value: String,
}

/// One entry of `spec.domain.devices.inputs`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Input {
    /// `usb` or `virtio`; usb when unset.
    pub bus: Option<String>,
    /// `tablet`.
    #[serde(rename = "type", default)]
    pub input_type: String,
    /// Name, used in the device alias.
    pub name: String,
}

/// A host device or GPU passed through (`gpus[]`, `hostDevices[]`).
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HostDevice {
    /// Name.
    pub name: String,
    /// Resource name the device plugin advertises.
    pub device_name: String,
    /// Tag for device-role metadata.
    pub tag: Option<String>,
}

/// `spec.domain.devices.filesystems[]`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Filesystem {
    /// Name; matches a volume.
    pub name: String,
    /// Share it over virtiofs, written `virtiofs: {}`.
    pub virtiofs: Option<EmptyObject>,
}

/// `spec.domain.devices.sound`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SoundDevice {
    /// Name.
    pub name: String,
    /// `ich9` or `ac97`.
    pub model: Option<String>,
}

/// `spec.domain.devices.tpm`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Tpm {
    /// Whether the TPM is attached; true when unset.
    pub enabled: Option<bool>,
    /// Keep the TPM state across restarts.
    pub persistent: Option<bool>,
}

/// `spec.domain.devices.video`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Video {
    /// Video model, e.g. `vga`, `bochs` or `virtio`.
    #[serde(rename = "type")]
    pub video_type: Option<String>,
}

#[cfg(test)]
mod mac_tests {
    use super::parse_mac_address;

    #[test]
    fn a_mac_address_is_six_hex_pairs_with_colons_or_dashes() {
        assert_eq!(
            parse_mac_address("02:AB:cd:00:11:ff"),
            Some([2, 0xab, 0xcd, 0, 0x11, 0xff])
        );
        assert_eq!(
            parse_mac_address("02-ab-cd-00-11-ff"),
            Some([2, 0xab, 0xcd, 0, 0x11, 0xff])
        );
        for bad in [
            "02:ab:cd:00:11",
            "02:ab:cd:00:11:ff:00",
            "02:ab:cd:00:11:fff",
            "zz:ab:cd:00:11:ff",
            "+2:ab:cd:00:11:ff",
            "",
        ] {
            assert_eq!(parse_mac_address(bad), None, "{bad}");
        }
    }
}
