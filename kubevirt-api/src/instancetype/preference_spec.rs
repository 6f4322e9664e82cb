//! `VirtualMachinePreferenceSpec`: defaults and requirements a preference gives a VM.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::v1::{
    BlockSize, ClockOffsetUtc, CpuFeature, Efi, EmptyObject, FeatureApic, FeatureHyperv, FeatureKvm, FeatureState,
    Timer, Tpm, VgpuOptions,
};

/// `spec` of a VirtualMachinePreference or VirtualMachineClusterPreference.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachinePreferenceSpec {
    /// Clock defaults.
    pub clock: Option<ClockPreferences>,
    /// CPU topology and features.
    pub cpu: Option<CpuPreferences>,
    /// Device defaults.
    pub devices: Option<DevicePreferences>,
    /// Hypervisor feature defaults.
    pub features: Option<FeaturePreferences>,
    /// Firmware defaults.
    pub firmware: Option<FirmwarePreferences>,
    /// Machine type default.
    pub machine: Option<MachinePreferences>,
    /// Storage class for the VM's DataVolumes.
    pub volumes: Option<VolumePreferences>,
    /// Default `spec.subdomain`.
    pub preferred_subdomain: Option<String>,
    /// Default `spec.terminationGracePeriodSeconds`.
    pub preferred_termination_grace_period_seconds: Option<i64>,
    /// Minimum resources the VM must have.
    pub requirements: Option<PreferenceRequirements>,
    /// Annotations the VMI gets where it has none of its own.
    pub annotations: Option<BTreeMap<String, String>>,
    /// Sockets per core for the `spread` topology (deprecated; `cpu.spreadOptions.ratio`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub prefer_spread_socket_to_core_ratio: u32,
    /// Default `spec.architecture`.
    pub preferred_architecture: Option<String>,
}

#[allow(
    clippy::trivially_copy_pass_by_ref,
    reason = "serde's skip_serializing_if passes a reference"
)]
fn is_zero(value: &u32) -> bool {
    *value == 0
}

/// `spec.cpu` of a preference.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CpuPreferences {
    /// `sockets` (the default), `cores`, `threads`, `spread` or `any` (and the deprecated
    /// `preferSockets`, `preferCores`, `preferThreads`, `preferSpread`, `preferAny`).
    #[serde(rename = "preferredCPUTopology")]
    pub preferred_cpu_topology: Option<String>,
    /// How `spread` lays out vCPUs.
    pub spread_options: Option<SpreadOptions>,
    /// CPU features added where the VM does not name them.
    #[serde(rename = "preferredCPUFeatures", default, skip_serializing_if = "Vec::is_empty")]
    pub preferred_cpu_features: Vec<CpuFeature>,
}

/// `spec.cpu.spreadOptions`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SpreadOptions {
    /// `SocketsCores` (the default), `CoresThreads` or `SocketsCoresThreads`.
    pub across: Option<String>,
    /// Ratio between the spread units; 2 when unset.
    pub ratio: Option<u32>,
}

/// `spec.devices` of a preference: each applies only where the VM leaves the field unset.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DevicePreferences {
    /// `autoattachGraphicsDevice`.
    pub preferred_autoattach_graphics_device: Option<bool>,
    /// `autoattachMemBalloon`.
    pub preferred_autoattach_mem_balloon: Option<bool>,
    /// `autoattachPodInterface`.
    pub preferred_autoattach_pod_interface: Option<bool>,
    /// `autoattachSerialConsole`.
    pub preferred_autoattach_serial_console: Option<bool>,
    /// `autoattachInputDevice`.
    pub preferred_autoattach_input_device: Option<bool>,
    /// `disableHotplug` (always applied).
    pub preferred_disable_hotplug: Option<bool>,
    /// vGPU display options.
    #[serde(rename = "preferredVirtualGPUOptions")]
    pub preferred_virtual_gpu_options: Option<VgpuOptions>,
    /// The sound card's model.
    pub preferred_sound_model: Option<String>,
    /// `useVirtioTransitional`.
    pub preferred_use_virtio_transitional: Option<bool>,
    /// Input devices' bus.
    pub preferred_input_bus: Option<String>,
    /// Input devices' type.
    pub preferred_input_type: Option<String>,
    /// Disks' bus.
    pub preferred_disk_bus: Option<String>,
    /// LUNs' bus.
    pub preferred_lun_bus: Option<String>,
    /// CD-ROMs' bus.
    pub preferred_cdrom_bus: Option<String>,
    /// `dedicatedIOThread` of virtio disks.
    pub preferred_disk_dedicated_io_thread: Option<bool>,
    /// Disks' cache mode.
    pub preferred_disk_cache: Option<String>,
    /// Disks' IO mode.
    #[serde(rename = "preferredDiskIO")]
    pub preferred_disk_io: Option<String>,
    /// Disks' block sizes.
    pub preferred_disk_block_size: Option<BlockSize>,
    /// Interfaces' model.
    pub preferred_interface_model: Option<String>,
    /// A random number generator, written `{}`.
    pub preferred_rng: Option<EmptyObject>,
    /// `blockMultiQueue`.
    pub preferred_block_multi_queue: Option<bool>,
    /// `networkInterfaceMultiqueue`.
    pub preferred_network_interface_multi_queue: Option<bool>,
    /// An emulated TPM.
    #[serde(rename = "preferredTPM")]
    pub preferred_tpm: Option<Tpm>,
    /// The masquerade binding for interfaces on the pod network without one, written `{}`.
    pub preferred_interface_masquerade: Option<EmptyObject>,
    /// Model of panic devices that name none.
    pub preferred_panic_device_model: Option<String>,
    /// Type of the video device when the VM names none, e.g. `virtio`.
    pub preferred_video_type: Option<String>,
}

/// `spec.features` of a preference.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FeaturePreferences {
    /// ACPI (always applied).
    pub preferred_acpi: Option<FeatureState>,
    /// APIC.
    pub preferred_apic: Option<FeatureApic>,
    /// Hyper-V enlightenments, each where the VM sets none.
    pub preferred_hyperv: Option<FeatureHyperv>,
    /// KVM features.
    pub preferred_kvm: Option<FeatureKvm>,
    /// Paravirtual spinlocks.
    pub preferred_pvspinlock: Option<FeatureState>,
    /// System Management Mode.
    pub preferred_smm: Option<FeatureState>,
}

/// `spec.firmware` of a preference.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FirmwarePreferences {
    /// BIOS when the VM chooses no bootloader.
    pub preferred_use_bios: Option<bool>,
    /// BIOS output on the serial console.
    pub preferred_use_bios_serial: Option<bool>,
    /// EFI when the VM chooses no bootloader (deprecated: `preferredEfi`).
    pub preferred_use_efi: Option<bool>,
    /// Secure Boot for EFI (deprecated: `preferredEfi`).
    pub preferred_use_secure_boot: Option<bool>,
    /// The EFI bootloader when the VM chooses none.
    pub preferred_efi: Option<Efi>,
}

/// `spec.machine` of a preference.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachinePreferences {
    /// Machine type.
    pub preferred_machine_type: Option<String>,
}

/// `spec.clock` of a preference.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClockPreferences {
    /// Clock offset: UTC or a time zone.
    pub preferred_clock_offset: Option<ClockOffset>,
    /// Timers.
    pub preferred_timer: Option<Timer>,
}

/// A clock offset: exactly one of UTC and a time zone.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClockOffset {
    /// UTC with an offset.
    pub utc: Option<ClockOffsetUtc>,
    /// A time zone.
    pub timezone: Option<String>,
}

/// `spec.volumes` of a preference.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VolumePreferences {
    /// Storage class of the VM's DataVolumes (CDI; never applied to the VMI).
    pub preferred_storage_class_name: Option<String>,
}

/// `spec.requirements` of a preference.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PreferenceRequirements {
    /// Minimum vCPUs.
    pub cpu: Option<CpuRequirement>,
    /// Minimum guest memory.
    pub memory: Option<MemoryRequirement>,
    /// Required architecture.
    pub architecture: Option<String>,
}

/// `spec.requirements.cpu`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CpuRequirement {
    /// Minimum vCPUs.
    pub guest: u32,
}

/// `spec.requirements.memory`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemoryRequirement {
    /// Minimum guest memory.
    pub guest: Quantity,
}
