//! Host placement: `<cputune>` (vCPU, emulator and IOThread pinning, vCPU scheduling),
//! `<numatune>` and the hugepage backing of guest NUMA cells.

use serde::{Deserialize, Serialize};

/// `<cputune>`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuTune {
    /// One pin per vCPU.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub vcpupin: Vec<VcpuPin>,
    /// The emulator threads' CPUs.
    pub emulatorpin: Option<EmulatorPin>,
    /// One pin per IOThread.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub iothreadpin: Vec<IothreadPin>,
    /// Scheduler policies of vCPUs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub vcpusched: Vec<VcpuSched>,
}

/// `<vcpupin vcpu cpuset>`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VcpuPin {
    /// vCPU id.
    #[serde(rename = "@vcpu")]
    pub vcpu: u32,
    /// Host CPUs, a libvirt CPU list.
    #[serde(rename = "@cpuset")]
    pub cpuset: String,
}

/// `<emulatorpin cpuset>`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EmulatorPin {
    /// Host CPUs, a libvirt CPU list.
    #[serde(rename = "@cpuset")]
    pub cpuset: String,
}

/// `<iothreadpin iothread cpuset>`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IothreadPin {
    /// IOThread id (from 1).
    #[serde(rename = "@iothread")]
    pub iothread: u32,
    /// Host CPUs, a libvirt CPU list.
    #[serde(rename = "@cpuset")]
    pub cpuset: String,
}

/// `<vcpusched vcpus scheduler priority>`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VcpuSched {
    /// The vCPUs, a libvirt bitmap such as `0-3,^1`.
    #[serde(rename = "@vcpus")]
    pub vcpus: String,
    /// `fifo`, `rr`, `batch` or `idle`.
    #[serde(rename = "@scheduler")]
    pub scheduler: String,
    /// Real-time priority.
    #[serde(rename = "@priority")]
    pub priority: Option<u32>,
}

/// `<numatune>`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NumaTune {
    /// Where all guest memory may come from.
    pub memory: Option<NumaTuneMemory>,
    /// Where each guest cell's memory comes from.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub memnode: Vec<MemNode>,
}

/// `<memory mode nodeset>`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NumaTuneMemory {
    /// `strict`, `preferred` or `interleave`.
    #[serde(rename = "@mode")]
    pub mode: String,
    /// Host NUMA nodes.
    #[serde(rename = "@nodeset")]
    pub nodeset: String,
}

/// `<memnode cellid mode nodeset>`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemNode {
    /// Guest cell id.
    #[serde(rename = "@cellid")]
    pub cellid: u32,
    /// `strict`, `preferred` or `interleave`.
    #[serde(rename = "@mode")]
    pub mode: String,
    /// Host NUMA nodes.
    #[serde(rename = "@nodeset")]
    pub nodeset: String,
}

/// `<hugepages>`: with no pages, the default size for all memory.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hugepages {
    /// Page sizes per guest cell.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub page: Vec<HugePage>,
}

/// `<page size unit nodeset>`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HugePage {
    /// Page size.
    #[serde(rename = "@size")]
    pub size: u64,
    /// Unit of `size`.
    #[serde(rename = "@unit")]
    pub unit: Option<String>,
    /// Guest cells backed by this size.
    #[serde(rename = "@nodeset")]
    pub nodeset: Option<String>,
}

/// `<allocation mode>`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Allocation {
    /// `immediate` or `ondemand`.
    #[serde(rename = "@mode")]
    pub mode: String,
}
