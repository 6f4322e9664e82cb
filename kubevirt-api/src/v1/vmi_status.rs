//! `VirtualMachineInstance.status`: written by virt-controller (Pending, Scheduling, Scheduled) and
//! virt-handler (Running and after).

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `status` of a `VirtualMachineInstance`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineInstanceStatus {
    /// Node the VMI runs on.
    pub node_name: Option<String>,
    /// Short machine-readable reason for a failure.
    pub reason: Option<String>,
    /// Conditions: Ready, Paused, AgentConnected, LiveMigratable and others.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<VirtualMachineInstanceCondition>,
    /// Lifecycle phase.
    pub phase: Option<VirtualMachineInstancePhase>,
    /// When each phase was entered.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub phase_transition_timestamps: Vec<PhaseTransitionTimestamp>,
    /// Guest network interfaces and their addresses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub interfaces: Vec<VirtualMachineInstanceNetworkInterface>,
    /// Guest OS as reported by the guest agent.
    #[serde(rename = "guestOSInfo")]
    pub guest_os_info: Option<GuestOsInfo>,
    /// Live-migration state.
    pub migration_state: Option<super::MigrationState>,
    /// `BlockMigration` or `LiveMigration`.
    pub migration_method: Option<String>,
    /// Transport used for migration.
    pub migration_transport: Option<String>,
    /// QoS class of the launcher pod.
    pub qos_class: Option<String>,
    /// Image of the virt-launcher that runs the VMI.
    pub launcher_container_image_version: Option<String>,
    /// Node an eviction moves the VMI away from.
    pub evacuation_node_name: Option<String>,
    /// Launcher pods by pod UID, with the node each runs on.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub active_pods: BTreeMap<String, String>,
    /// State of each volume.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volume_status: Vec<VolumeStatus>,
    /// Kernel-boot image state.
    pub kernel_boot_status: Option<KernelBootStatus>,
    /// File system freeze state of the guest.
    pub fs_freeze_status: Option<String>,
    /// Hints for the topology of the guest.
    pub topology_hints: Option<TopologyHints>,
    /// ControllerRevision the VMI was created from.
    pub virtual_machine_revision_name: Option<String>,
    /// UID the launcher runs as (0 for root, 107 for non-root).
    pub runtime_user: Option<u64>,
    /// Context id of the VSOCK device.
    #[serde(rename = "VSOCKCID")]
    pub vsock_cid: Option<u32>,
    /// SELinux context of the launcher.
    pub selinux_context: Option<String>,
    /// Machine type the domain runs with.
    pub machine: Option<super::Machine>,
    /// CPU topology currently in the guest.
    #[serde(rename = "currentCPUTopology")]
    pub current_cpu_topology: Option<CpuTopology>,
    /// Guest memory at boot, now and requested.
    pub memory: Option<MemoryStatus>,
    /// Volumes moved to other PVCs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub migrated_volumes: Vec<super::StorageMigratedVolumeInfo>,
    /// Changed block tracking.
    pub changed_block_tracking: Option<super::ChangedBlockTrackingStatus>,
}

/// `status.kernelBootStatus`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KernelBootStatus {
    /// The kernel image.
    pub kernel_info: Option<ChecksumInfo>,
    /// The initrd image.
    pub initrd_info: Option<ChecksumInfo>,
}

/// A checksum of an image (`kernelInfo`, `initrdInfo`, `containerDiskVolume`).
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChecksumInfo {
    /// CRC32 of the image.
    pub checksum: Option<u32>,
}

/// `status.phase`. The set of phases and their meanings follow upstream.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum VirtualMachineInstancePhase {
    /// No phase yet: the object was just created.
    #[default]
    #[serde(rename = "")]
    Unset,
    /// Accepted; the launcher pod is not created yet.
    Pending,
    /// The launcher pod exists and waits for a node.
    Scheduling,
    /// The launcher pod runs on a node and the VM is being started.
    Scheduled,
    /// The guest runs.
    Running,
    /// The guest ended cleanly.
    Succeeded,
    /// The guest ended with an error.
    Failed,
    /// The state cannot be read.
    Unknown,
    /// A migration target waits for the source to sync.
    WaitingForSync,
}

impl VirtualMachineInstancePhase {
    /// Every phase, for tables and matrix tests.
    pub const ALL: [Self; 9] = [
        Self::Unset,
        Self::Pending,
        Self::Scheduling,
        Self::Scheduled,
        Self::Running,
        Self::Succeeded,
        Self::Failed,
        Self::Unknown,
        Self::WaitingForSync,
    ];

    /// The string upstream writes.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unset => "",
            Self::Pending => "Pending",
            Self::Scheduling => "Scheduling",
            Self::Scheduled => "Scheduled",
            Self::Running => "Running",
            Self::Succeeded => "Succeeded",
            Self::Failed => "Failed",
            Self::Unknown => "Unknown",
            Self::WaitingForSync => "WaitingForSync",
        }
    }

    /// Succeeded and Failed are final: a VMI never leaves them.
    #[must_use]
    pub fn is_final(self) -> bool {
        match self {
            Self::Succeeded | Self::Failed => true,
            Self::Unset
            | Self::Pending
            | Self::Scheduling
            | Self::Scheduled
            | Self::Running
            | Self::Unknown
            | Self::WaitingForSync => false,
        }
    }
}

impl fmt::Display for VirtualMachineInstancePhase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A condition in `status.conditions` of a VMI or a VM.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineInstanceCondition {
    /// Condition type, e.g. `Ready`.
    #[serde(rename = "type")]
    pub condition_type: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// Last time the condition was checked.
    pub last_probe_time: Option<Time>,
    /// Last time the status changed.
    pub last_transition_time: Option<Time>,
    /// Machine-readable reason.
    pub reason: Option<String>,
    /// Human-readable message.
    pub message: Option<String>,
}

/// One entry of `status.phaseTransitionTimestamps`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PhaseTransitionTimestamp {
    /// The phase entered.
    pub phase: Option<VirtualMachineInstancePhase>,
    /// When it was entered.
    pub phase_transition_timestamp: Option<Time>,
}

/// One entry of `status.interfaces`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineInstanceNetworkInterface {
    /// Primary IP address.
    pub ip_address: Option<String>,
    /// MAC address.
    pub mac: Option<String>,
    /// Name of the interface in the VMI spec.
    pub name: Option<String>,
    /// Every IP address.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ip_addresses: Vec<String>,
    /// Name of the interface inside the guest.
    pub interface_name: Option<String>,
    /// Where the data came from: `domain`, `guest-agent`, `multus-status`.
    pub info_source: Option<String>,
    /// Number of queues.
    pub queue_count: Option<i32>,
    /// `up` or `down`.
    pub link_state: Option<String>,
    /// Name of the pod interface backing it.
    pub pod_interface_name: Option<String>,
}

/// `status.guestOSInfo`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GuestOsInfo {
    /// OS name.
    pub name: Option<String>,
    /// Kernel release.
    pub kernel_release: Option<String>,
    /// OS version.
    pub version: Option<String>,
    /// Pretty name.
    pub pretty_name: Option<String>,
    /// Version id.
    pub version_id: Option<String>,
    /// Kernel version.
    pub kernel_version: Option<String>,
    /// Machine architecture.
    pub machine: Option<String>,
    /// OS id.
    pub id: Option<String>,
}

/// One entry of `status.volumeStatus`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VolumeStatus {
    /// Volume name.
    pub name: String,
    /// Target device in the guest, e.g. `vda`; kept stable across hotplug.
    pub target: String,
    /// Hotplug phase.
    pub phase: Option<String>,
    /// Machine-readable reason.
    pub reason: Option<String>,
    /// Human-readable message.
    pub message: Option<String>,
    /// Information about the PVC.
    pub persistent_volume_claim_info: Option<super::PersistentVolumeClaimInfo>,
    /// Hotplug attachment pod.
    pub hotplug_volume: Option<HotplugVolumeStatus>,
    /// Size in bytes.
    pub size: Option<i64>,
    /// Memory dump state.
    pub memory_dump_volume: Option<DomainMemoryDumpInfo>,
    /// Container disk checksum.
    pub container_disk_volume: Option<ChecksumInfo>,
}

/// `volumeStatus[].hotplugVolume`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HotplugVolumeStatus {
    /// The attachment pod.
    pub attach_pod_name: Option<String>,
    /// Its UID.
    #[serde(rename = "attachPodUID")]
    pub attach_pod_uid: Option<String>,
}

/// `volumeStatus[].memoryDumpVolume`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DomainMemoryDumpInfo {
    /// When the dump started.
    pub start_timestamp: Option<Time>,
    /// When it ended.
    pub end_timestamp: Option<Time>,
    /// The PVC.
    pub claim_name: Option<String>,
    /// The dump file's name.
    pub target_file_name: Option<String>,
}

/// `status.topologyHints`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TopologyHints {
    /// TSC frequency in Hz that the guest expects.
    pub tsc_frequency: Option<i64>,
}

/// `status.currentCPUTopology`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CpuTopology {
    /// Cores per socket.
    pub cores: Option<u32>,
    /// Sockets.
    pub sockets: Option<u32>,
    /// Threads per core.
    pub threads: Option<u32>,
}

/// `status.memory`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemoryStatus {
    /// Guest memory at boot.
    pub guest_at_boot: Option<k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
    /// Guest memory now.
    pub guest_current: Option<k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
    /// Guest memory requested.
    pub guest_requested: Option<k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
}
