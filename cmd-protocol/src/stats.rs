//! Domain statistics as the launcher reports them (`GetDomainStats`), for virt-handler's
//! `kubevirt_vmi_*` metrics. Counters are cumulative since the domain started.

use serde::{Deserialize, Serialize};

/// Statistics of one domain.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DomainStats {
    /// `<namespace>_<name>`.
    pub name: String,
    /// CPU time used by the guest, in nanoseconds.
    pub cpu_time_ns: u64,
    /// vCPUs.
    pub vcpus: u32,
    /// Memory, from the balloon driver where the guest reports it.
    pub memory: MemoryStats,
    /// One entry per disk.
    #[serde(default)]
    pub block: Vec<BlockStats>,
    /// One entry per network interface.
    #[serde(default)]
    pub net: Vec<NetStats>,
    /// One entry per vCPU, when the launcher can read QEMU's threads.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub vcpu: Vec<VcpuStats>,
}

/// Statistics of one vCPU (libvirt's `vcpu.<n>.time` and `vcpu.<n>.delay`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VcpuStats {
    /// The vCPU index.
    pub id: u32,
    /// Time the vCPU ran, in nanoseconds.
    pub time_ns: u64,
    /// Time the vCPU was ready to run but waited for a host CPU, in nanoseconds.
    pub delay_ns: u64,
}

/// Memory statistics, in KiB (faults are counts). Absent when the guest does not report them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MemoryStats {
    /// Memory the balloon gives the guest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actual_balloon_kib: Option<u64>,
    /// Resident memory of the QEMU process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rss_kib: Option<u64>,
    /// Memory the guest does not use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unused_kib: Option<u64>,
    /// Memory the guest sees.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub available_kib: Option<u64>,
    /// Memory the guest could use without swapping.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usable_kib: Option<u64>,
    /// Guest page cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk_caches_kib: Option<u64>,
    /// Swapped in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub swap_in_kib: Option<u64>,
    /// Swapped out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub swap_out_kib: Option<u64>,
    /// Major page faults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub major_faults: Option<u64>,
    /// Minor page faults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minor_faults: Option<u64>,
}

/// Statistics of one disk.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockStats {
    /// The disk's name in the VMI spec.
    pub name: String,
    /// The guest device, e.g. `vda`.
    pub target: String,
    /// Bytes read.
    pub read_bytes: u64,
    /// Read requests.
    pub read_requests: u64,
    /// Bytes written.
    pub write_bytes: u64,
    /// Write requests.
    pub write_requests: u64,
}

/// Statistics of one network interface.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetStats {
    /// The interface's name in the VMI spec.
    pub name: String,
    /// The host tap device.
    pub target: String,
    /// Bytes received by the guest.
    pub rx_bytes: u64,
    /// Packets received.
    pub rx_packets: u64,
    /// Receive errors.
    pub rx_errors: u64,
    /// Received packets dropped.
    pub rx_dropped: u64,
    /// Bytes sent by the guest.
    pub tx_bytes: u64,
    /// Packets sent.
    pub tx_packets: u64,
    /// Send errors.
    pub tx_errors: u64,
    /// Sent packets dropped.
    pub tx_dropped: u64,
}
