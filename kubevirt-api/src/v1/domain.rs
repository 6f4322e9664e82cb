//! `spec.domain`: the virtual hardware of a VMI, apart from its devices and hypervisor features.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Devices, Features};

/// `spec.domain`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DomainSpec {
    /// Resources requested and limited for the VMI's launcher pod.
    pub resources: Option<ResourceRequirements>,
    /// CPU topology, model and placement.
    pub cpu: Option<Cpu>,
    /// Guest memory, hugepages and hotplug maximum.
    pub memory: Option<Memory>,
    /// Emulated machine type.
    pub machine: Option<Machine>,
    /// Firmware, bootloader and SMBIOS identity.
    pub firmware: Option<Firmware>,
    /// Guest clock offset and timers.
    pub clock: Option<Clock>,
    /// Hypervisor features.
    pub features: Option<Features>,
    /// Devices attached to the guest.
    pub devices: Devices,
    /// How IOThreads are allocated: `shared`, `auto` or `supplementalPool`.
    pub io_threads_policy: Option<String>,
    /// IOThread settings for the `supplementalPool` policy.
    pub io_threads: Option<DiskIoThreads>,
    /// SMBIOS chassis information.
    pub chassis: Option<Chassis>,
    /// Confidential-computing launch security (SEV, SEV-SNP, TDX).
    pub launch_security: Option<super::LaunchSecurity>,
    /// `Reboot` (the default) lets the guest reboot; `Terminate` ends the VMI when the guest
    /// reboots, so that a VM controller can start it again with its current spec.
    pub reboot_policy: Option<String>,
}

/// `spec.domain.resources`. Quantities keep the string the user wrote.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceRequirements {
    /// Requests, e.g. `memory: 1Gi`, `cpu: 500m`.
    pub requests: Option<BTreeMap<String, Quantity>>,
    /// Limits, e.g. `memory: 2Gi`.
    pub limits: Option<BTreeMap<String, Quantity>>,
    /// Do not add the launcher overhead to the pod's memory request.
    pub overcommit_guest_overhead: Option<bool>,
}

/// `spec.domain.cpu`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Cpu {
    /// Cores per socket.
    pub cores: Option<u32>,
    /// Sockets.
    pub sockets: Option<u32>,
    /// Maximum sockets, for CPU hotplug.
    pub max_sockets: Option<u32>,
    /// Threads per core.
    pub threads: Option<u32>,
    /// `host-model`, `host-passthrough` or a named libvirt CPU model.
    pub model: Option<String>,
    /// CPU features to require or disable.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub features: Vec<CpuFeature>,
    /// Pin vCPUs to dedicated host CPUs.
    pub dedicated_cpu_placement: Option<bool>,
    /// Give the emulator thread its own dedicated CPU.
    pub isolate_emulator_thread: Option<bool>,
    /// Guest NUMA topology.
    pub numa: Option<Numa>,
    /// Realtime vCPU scheduling.
    pub realtime: Option<Realtime>,
}

/// One entry of `spec.domain.cpu.features`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CpuFeature {
    /// libvirt feature name, e.g. `pcid`.
    pub name: String,
    /// `force`, `require`, `optional`, `disable` or `forbid`; upstream defaults to `require`.
    pub policy: Option<String>,
}

/// `spec.domain.cpu.numa`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Numa {
    /// Mirror the host NUMA topology of the pinned CPUs into the guest.
    pub guest_mapping_passthrough: Option<EmptyObject>,
}

/// `spec.domain.cpu.realtime`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Realtime {
    /// vCPUs that run with realtime scheduling, in libvirt's cpuset syntax.
    pub mask: Option<String>,
}

/// An object whose presence is its meaning, written `{}` (for example `pod: {}` or `rng: {}`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct EmptyObject {}

/// `spec.domain.memory`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Memory {
    /// Back guest memory with hugepages.
    pub hugepages: Option<Hugepages>,
    /// Memory the guest sees; defaults from the memory request.
    pub guest: Option<Quantity>,
    /// Maximum guest memory, for memory hotplug.
    pub max_guest: Option<Quantity>,
    /// Back guest memory with a file on a volume.
    pub file_backed: Option<FileBacked>,
    /// Extra memory reserved for the launcher, and whether guest memory is locked.
    pub reserved_overhead: Option<ReservedOverhead>,
}

/// `spec.domain.memory.reservedOverhead`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReservedOverhead {
    /// Memory added to the launcher pod's overhead.
    pub added_overhead: Option<Quantity>,
    /// `Required` or `NotRequired`: lock guest and overhead memory (for DMA devices).
    pub mem_lock: Option<String>,
}

/// `spec.domain.memory.fileBacked`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FileBacked {
    /// The volume (in `spec.volumes`) that holds the memory file.
    pub volume_name: String,
}

/// `spec.domain.memory.hugepages`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Hugepages {
    /// Page size, e.g. `2Mi` or `1Gi`.
    pub page_size: Option<String>,
}

/// `spec.domain.machine`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Machine {
    /// QEMU machine type, e.g. `q35`; upstream defaults it on x86_64.
    #[serde(rename = "type")]
    pub machine_type: Option<String>,
}

/// `spec.domain.firmware`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Firmware {
    /// SMBIOS system UUID.
    pub uuid: Option<String>,
    /// BIOS or EFI bootloader.
    pub bootloader: Option<Bootloader>,
    /// SMBIOS system serial number.
    pub serial: Option<String>,
    /// Boot a kernel and initrd directly.
    pub kernel_boot: Option<KernelBoot>,
    /// ACPI tables passed from secrets.
    pub acpi: Option<AcpiTables>,
}

/// `spec.domain.firmware.bootloader`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Bootloader {
    /// Legacy BIOS (SeaBIOS).
    pub bios: Option<Bios>,
    /// UEFI (OVMF).
    pub efi: Option<Efi>,
}

/// `spec.domain.firmware.bootloader.bios`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Bios {
    /// Show BIOS output on the serial console.
    pub use_serial: Option<bool>,
}

/// `spec.domain.firmware.bootloader.efi`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Efi {
    /// Secure Boot; upstream defaults it to true and then requires SMM.
    pub secure_boot: Option<bool>,
    /// Keep the NVRAM across restarts.
    pub persistent: Option<bool>,
}

/// `spec.domain.firmware.kernelBoot`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KernelBoot {
    /// Kernel command line.
    pub kernel_args: Option<String>,
    /// The image that carries the kernel and initrd.
    pub container: Option<KernelBootContainer>,
}

/// `spec.domain.firmware.kernelBoot.container`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KernelBootContainer {
    /// Image reference.
    pub image: String,
    /// Secret for pulling the image.
    pub image_pull_secret: Option<String>,
    /// Path of the kernel inside the image.
    pub kernel_path: Option<String>,
    /// Path of the initrd inside the image.
    pub initrd_path: Option<String>,
    /// `Always`, `IfNotPresent` or `Never`.
    pub image_pull_policy: Option<String>,
}

/// `spec.domain.firmware.acpi`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AcpiTables {
    /// Volume holding a SLIC table.
    pub slic_name_ref: Option<String>,
    /// Volume holding an MSDM table.
    pub msdm_name_ref: Option<String>,
}

/// `spec.domain.clock`. Exactly one of `utc` and `timezone` sets the offset.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Clock {
    /// UTC, with an optional offset.
    pub utc: Option<ClockOffsetUtc>,
    /// A named time zone, e.g. `Europe/Berlin`.
    pub timezone: Option<String>,
    /// Timers presented to the guest.
    pub timer: Option<Timer>,
}

/// `spec.domain.clock.utc`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClockOffsetUtc {
    /// Seconds added to UTC.
    pub offset_seconds: Option<i32>,
}

/// `spec.domain.clock.timer`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Timer {
    /// High Precision Event Timer.
    pub hpet: Option<TickTimer>,
    /// KVM paravirtual clock.
    pub kvm: Option<PresentTimer>,
    /// Programmable Interval Timer.
    pub pit: Option<TickTimer>,
    /// Real-time clock.
    pub rtc: Option<RtcTimer>,
    /// Hyper-V reference clock.
    pub hyperv: Option<PresentTimer>,
}

/// A timer with a tick policy (`hpet`, `pit`).
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TickTimer {
    /// `delay`, `catchup`, `merge` or `discard`.
    pub tick_policy: Option<String>,
    /// Whether the guest sees the timer; true when unset.
    pub present: Option<bool>,
}

/// A timer that can only be present or absent (`kvm`, `hyperv`).
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PresentTimer {
    /// Whether the guest sees the timer; true when unset.
    pub present: Option<bool>,
}

/// `spec.domain.clock.timer.rtc`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RtcTimer {
    /// `delay` or `catchup`.
    pub tick_policy: Option<String>,
    /// Whether the guest sees the timer; true when unset.
    pub present: Option<bool>,
    /// `guest` or `wall`.
    pub track: Option<String>,
}

/// `spec.domain.ioThreads`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DiskIoThreads {
    /// Number of IOThreads in the supplemental pool.
    pub supplemental_pool_thread_count: Option<u32>,
}

/// `spec.domain.chassis`: SMBIOS chassis strings.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Chassis {
    /// Manufacturer.
    pub manufacturer: Option<String>,
    /// Version.
    pub version: Option<String>,
    /// Serial number.
    pub serial: Option<String>,
    /// Asset tag.
    pub asset: Option<String>,
    /// SKU.
    pub sku: Option<String>,
}
