//! `<cpu>`: mode, model, topology, features and NUMA cells.

use serde::{Deserialize, Serialize};

/// `<cpu>`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cpu {
    /// `host-model`, `host-passthrough` or `custom`.
    #[serde(rename = "@mode")]
    pub mode: Option<String>,
    /// Named model for `custom`.
    pub model: Option<CpuModel>,
    /// Topology.
    pub topology: Option<CpuTopology>,
    /// Features.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub feature: Vec<CpuFeature>,
    /// NUMA cells.
    pub numa: Option<CpuNuma>,
}

/// `<model>Name</model>`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuModel {
    /// `allow` or `forbid`.
    #[serde(rename = "@fallback")]
    pub fallback: Option<String>,
    /// Model name.
    #[serde(rename = "$text")]
    pub name: String,
}

/// `<topology sockets cores threads>`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuTopology {
    /// Sockets.
    #[serde(rename = "@sockets")]
    pub sockets: u32,
    /// Dies per socket (libvirt adds it).
    #[serde(rename = "@dies")]
    pub dies: Option<u32>,
    /// Cores per socket.
    #[serde(rename = "@cores")]
    pub cores: u32,
    /// Threads per core.
    #[serde(rename = "@threads")]
    pub threads: u32,
}

/// `<feature name policy>`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuFeature {
    /// Policy.
    #[serde(rename = "@policy")]
    pub policy: String,
    /// Feature name.
    #[serde(rename = "@name")]
    pub name: String,
}

/// `<numa>`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuNuma {
    /// Cells.
    #[serde(default)]
    pub cell: Vec<NumaCell>,
}

/// `<cell id cpus memory unit>`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NumaCell {
    /// Cell id.
    #[serde(rename = "@id")]
    pub id: Option<u32>,
    /// CPU list, e.g. `0-3`.
    #[serde(rename = "@cpus")]
    pub cpus: Option<String>,
    /// Memory.
    #[serde(rename = "@memory")]
    pub memory: u64,
    /// Unit of `memory`.
    #[serde(rename = "@unit")]
    pub unit: Option<String>,
    /// `shared` or `private`.
    #[serde(rename = "@memAccess")]
    pub mem_access: Option<String>,
}
