//! `spec.domain.devices`: disks, interfaces and the other devices a guest sees.
//!
//! Enumerated strings (bus, cache mode, model) stay `String` here, as upstream's Go types do, so a
//! bad value reaches the validating webhook and is rejected with its field path instead of failing
//! to parse.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Disk, EmptyObject, Interface};

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
    pub gpus: Vec<Gpu>,
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
    /// Devices through which the guest reports a crash to the host.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub panic_devices: Vec<PanicDevice>,
    /// A virtual IOMMU (`smmuv3`, arm64 only).
    pub iommu: Option<IommuDevice>,
}

/// `spec.domain.devices.iommu`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IommuDevice {
    /// IOMMU model; `smmuv3` when unset.
    pub model: Option<String>,
    /// Driver options.
    pub driver: Option<IommuDriver>,
}

/// `spec.domain.devices.iommu.driver`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IommuDriver {
    /// PCI bus the IOMMU sits on.
    pub pci_bus: Option<u32>,
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
    /// s390x diag288 watchdog.
    pub diag288: Option<I6300Esb>,
}

/// `watchdog.i6300esb` and `watchdog.diag288`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct I6300Esb {
    /// `poweroff`, `reset` or `shutdown`; upstream defaults to `reset`.
    pub action: Option<String>,
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

/// A host device passed through (`hostDevices[]`).
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HostDevice {
    /// Name.
    pub name: String,
    /// Resource name the device plugin advertises.
    pub device_name: Option<String>,
    /// A dynamic resource claim in `spec.resourceClaims` (DRA).
    pub claim_name: Option<String>,
    /// The request of that claim.
    pub request_name: Option<String>,
    /// Tag for device-role metadata.
    pub tag: Option<String>,
}

/// A GPU passed through (`gpus[]`).
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Gpu {
    /// Name.
    pub name: String,
    /// Resource name the device plugin advertises.
    pub device_name: Option<String>,
    /// A dynamic resource claim in `spec.resourceClaims` (DRA).
    pub claim_name: Option<String>,
    /// The request of that claim.
    pub request_name: Option<String>,
    /// Display options of a mediated (virtual) GPU.
    #[serde(rename = "virtualGPUOptions")]
    pub virtual_gpu_options: Option<VgpuOptions>,
    /// Tag for device-role metadata.
    pub tag: Option<String>,
}

/// `gpus[].virtualGPUOptions`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VgpuOptions {
    /// The vGPU's display.
    pub display: Option<VgpuDisplayOptions>,
}

/// `gpus[].virtualGPUOptions.display`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VgpuDisplayOptions {
    /// Whether the display is on; true when unset.
    pub enabled: Option<bool>,
    /// A ramfb boot display; on when unset.
    #[serde(rename = "ramFB")]
    pub ram_fb: Option<super::FeatureState>,
}

/// One entry of `spec.domain.devices.panicDevices`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PanicDevice {
    /// `hyperv`, `isa` or `pvpanic`; the architecture's default when unset.
    pub model: Option<String>,
}

/// The panic device models upstream accepts on x86_64. kubevirt-rs refuses `pvpanic`
/// ([`crate::support`]); the domain has the others.
pub const PANIC_DEVICE_MODELS: [&str; 3] = ["hyperv", "isa", "pvpanic"];

/// The panic device model libvirt 9.0 cannot render: a PCI `pvpanic` needs libvirt 9.1.
pub const UNSUPPORTED_PANIC_DEVICE_MODEL: &str = "pvpanic";

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
