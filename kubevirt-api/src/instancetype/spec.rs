//! `VirtualMachineInstancetypeSpec`: the hardware an instance type gives a VM.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::v1::{DiskIoThreads, Gpu, HostDevice, Hugepages, LaunchSecurity, Numa, Realtime};

/// `spec` of a VirtualMachineInstancetype or VirtualMachineClusterInstancetype.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineInstancetypeSpec {
    /// Node labels the VM's launcher pod must match.
    pub node_selector: Option<BTreeMap<String, String>>,
    /// Scheduler of the launcher pod.
    pub scheduler_name: Option<String>,
    /// vCPUs and CPU placement.
    pub cpu: CpuInstancetype,
    /// Guest memory.
    pub memory: MemoryInstancetype,
    /// GPUs passed through.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpus: Vec<Gpu>,
    /// Host devices passed through.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub host_devices: Vec<HostDevice>,
    /// `shared`, `auto` or `supplementalPool`.
    pub io_threads_policy: Option<String>,
    /// IOThreads of the supplemental pool.
    pub io_threads: Option<DiskIoThreads>,
    /// Confidential-computing launch security.
    pub launch_security: Option<LaunchSecurity>,
    /// Annotations the VMI must carry.
    pub annotations: Option<BTreeMap<String, String>>,
}

/// `spec.cpu` of an instance type.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CpuInstancetype {
    /// vCPUs the guest gets; laid out by the preference's preferred topology.
    pub guest: u32,
    /// CPU model.
    pub model: Option<String>,
    /// Pin vCPUs to dedicated host CPUs.
    #[serde(rename = "dedicatedCPUPlacement")]
    pub dedicated_cpu_placement: Option<bool>,
    /// Guest NUMA topology.
    pub numa: Option<Numa>,
    /// A dedicated CPU for the emulator thread.
    pub isolate_emulator_thread: Option<bool>,
    /// Realtime vCPUs.
    pub realtime: Option<Realtime>,
    /// Sockets the VM may grow to (CPU hotplug).
    pub max_sockets: Option<u32>,
}

/// `spec.memory` of an instance type.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemoryInstancetype {
    /// Guest memory.
    pub guest: Quantity,
    /// Back guest memory with hugepages.
    pub hugepages: Option<Hugepages>,
    /// Percent of guest memory not requested from the node (0-100).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub overcommit_percent: i32,
    /// Memory the VM may grow to (memory hotplug).
    pub max_guest: Option<Quantity>,
}

#[allow(
    clippy::trivially_copy_pass_by_ref,
    reason = "serde's skip_serializing_if passes a reference"
)]
fn is_zero(value: &i32) -> bool {
    *value == 0
}
