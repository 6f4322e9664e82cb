//! A typed model of libvirt's domain XML, the subset KubeVirt renders, that both writes and reads.
//!
//! Reading matters as much as writing: libvirt's own `dumpxml` output (with the addresses, aliases
//! and defaults it adds) must parse into this model, so elements we do not model are skipped on
//! input. Attributes are `@name`, text content is `$text`; every optional element or attribute is an
//! `Option` that is left out when `None`.

mod cpu;
mod devices;
mod os;
mod peripherals;
mod tuning;

pub use cpu::*;
pub use devices::*;
pub use os::*;
pub use tuning::*;

use serde::{Deserialize, Serialize};

/// The KubeVirt metadata namespace inside `<metadata>`.
pub const KUBEVIRT_NAMESPACE: &str = "http://kubevirt.io";
/// libvirt's QEMU namespace, declared on `<domain>` as upstream does.
pub const QEMU_NAMESPACE: &str = "http://libvirt.org/schemas/domain/qemu/1.0";

/// Why a domain could not be written or read as XML.
#[derive(Debug, thiserror::Error)]
pub enum XmlError {
    /// Serialization failed.
    #[error("cannot write domain XML")]
    Write(#[from] quick_xml::SeError),
    /// The text is not a domain this model reads.
    #[error("cannot read domain XML")]
    Read(#[from] quick_xml::DeError),
}

/// `<domain>`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename = "domain")]
pub struct Domain {
    /// `kvm` or `qemu` (TCG).
    #[serde(rename = "@type")]
    pub domain_type: String,
    /// Declares the `qemu:` prefix.
    #[serde(rename = "@xmlns:qemu")]
    pub xmlns_qemu: Option<String>,
    /// `<namespace>_<name>`.
    pub name: String,
    /// Domain UUID; libvirt takes the SMBIOS system UUID when this is absent.
    pub uuid: Option<String>,
    /// KubeVirt's metadata.
    pub metadata: Option<Metadata>,
    /// Maximum memory, for memory hotplug.
    #[serde(rename = "maxMemory")]
    pub max_memory: Option<MaxMemory>,
    /// Guest memory.
    pub memory: ScaledInteger,
    /// Current memory, as libvirt reports it.
    #[serde(rename = "currentMemory")]
    pub current_memory: Option<ScaledInteger>,
    /// Hugepages and memfd.
    #[serde(rename = "memoryBacking")]
    pub memory_backing: Option<MemoryBacking>,
    /// vCPU count.
    pub vcpu: Vcpu,
    /// Per-vCPU state for CPU hotplug.
    pub vcpus: Option<Vcpus>,
    /// IOThread count.
    pub iothreads: Option<u32>,
    /// vCPU, emulator and IOThread pinning.
    pub cputune: Option<CpuTune>,
    /// Host NUMA placement of guest memory.
    pub numatune: Option<NumaTune>,
    /// SMBIOS strings.
    pub sysinfo: Option<Sysinfo>,
    /// Boot configuration.
    pub os: Os,
    /// Hypervisor features.
    pub features: Option<Features>,
    /// CPU model and topology.
    pub cpu: Option<Cpu>,
    /// Clock offset and timers.
    pub clock: Option<Clock>,
    /// What happens when the guest powers off.
    pub on_poweroff: Option<String>,
    /// What happens when the guest reboots.
    pub on_reboot: Option<String>,
    /// What happens when the guest crashes.
    pub on_crash: Option<String>,
    /// Devices.
    pub devices: Devices,
    /// Arguments passed to QEMU directly, for what libvirt 9.0 cannot express.
    #[serde(rename = "qemu:commandline")]
    pub qemu_commandline: Option<QemuCommandline>,
}

/// `<qemu:commandline>`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QemuCommandline {
    /// The arguments, in order.
    #[serde(rename = "qemu:arg", default)]
    pub arg: Vec<QemuArg>,
}

/// `<qemu:arg value='...'/>`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QemuArg {
    /// One argument.
    #[serde(rename = "@value")]
    pub value: String,
}

/// An integer with a unit attribute, e.g. `<memory unit='b'>1073741824</memory>`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScaledInteger {
    /// `b`, `KiB`, `MiB`, ...; libvirt's default is KiB.
    #[serde(rename = "@unit")]
    pub unit: Option<String>,
    /// The number.
    #[serde(rename = "$text")]
    pub value: u64,
}

impl ScaledInteger {
    /// A value in bytes.
    #[must_use]
    pub fn bytes(value: u64) -> Self {
        Self {
            unit: Some("b".to_owned()),
            value,
        }
    }

    /// The value in bytes, whatever unit it was written in; `None` for an unknown unit or overflow.
    #[must_use]
    pub fn to_bytes(&self) -> Option<u64> {
        let multiplier: u64 = match self.unit.as_deref().unwrap_or("KiB") {
            "b" | "bytes" => 1,
            "KB" => 1000,
            "k" | "K" | "KiB" => 1 << 10,
            "MB" => 1_000_000,
            "M" | "MiB" => 1 << 20,
            "GB" => 1_000_000_000,
            "G" | "GiB" => 1 << 30,
            "TB" => 1_000_000_000_000,
            "T" | "TiB" => 1 << 40,
            _ => return None,
        };
        self.value.checked_mul(multiplier)
    }
}

/// `<maxMemory>`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MaxMemory {
    /// Memory slots.
    #[serde(rename = "@slots")]
    pub slots: Option<u32>,
    /// Unit.
    #[serde(rename = "@unit")]
    pub unit: Option<String>,
    /// The number.
    #[serde(rename = "$text")]
    pub value: u64,
}

/// `<metadata>` holding `<kubevirt:kubevirt>`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Metadata {
    /// KubeVirt's own metadata (the only child we model).
    #[serde(rename = "kubevirt:kubevirt", alias = "kubevirt")]
    pub kubevirt: Option<KubeVirtMetadata>,
}

/// `<kubevirt:kubevirt xmlns:kubevirt="http://kubevirt.io">`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct KubeVirtMetadata {
    /// The namespace declaration; libvirt may move it to `<metadata>` in `dumpxml`.
    #[serde(rename = "@xmlns:kubevirt")]
    pub xmlns: Option<String>,
    /// VMI UID.
    #[serde(rename = "kubevirt:uid", alias = "uid")]
    pub uid: Option<String>,
    /// Grace period of a graceful shutdown.
    #[serde(rename = "kubevirt:graceperiod", alias = "graceperiod")]
    pub grace_period: Option<GracePeriodMetadata>,
}

/// `<kubevirt:graceperiod>`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GracePeriodMetadata {
    /// `terminationGracePeriodSeconds`.
    #[serde(rename = "kubevirt:deletionGracePeriodSeconds", alias = "deletionGracePeriodSeconds")]
    pub deletion_grace_period_seconds: Option<i64>,
}

/// `<memoryBacking>`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MemoryBacking {
    /// Back memory with hugepages.
    pub hugepages: Option<Hugepages>,
    /// Keep the host from merging the guest's pages (KSM).
    pub nosharepages: Option<Empty>,
    /// `memfd`, `file` or `anonymous`.
    pub source: Option<TypeAttr>,
    /// `shared` or `private`.
    pub access: Option<MemoryAccess>,
    /// When the memory is allocated.
    pub allocation: Option<Allocation>,
}

/// `<access mode=..>`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryAccess {
    /// `shared` or `private`.
    #[serde(rename = "@mode")]
    pub mode: String,
}

/// An element whose presence is its meaning, e.g. `<acpi/>`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Empty {}

/// An element with just a `type` attribute.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TypeAttr {
    /// The type.
    #[serde(rename = "@type")]
    pub kind: String,
}

/// An element with just a `state='on|off'` attribute.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct State {
    /// `on` or `off`.
    #[serde(rename = "@state")]
    pub state: Option<String>,
}

impl State {
    /// `state='on'` or `state='off'`.
    #[must_use]
    pub fn on_off(on: bool) -> Self {
        Self {
            state: Some(if on { "on" } else { "off" }.to_owned()),
        }
    }
}

/// `<vcpu placement='static'>N</vcpu>`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Vcpu {
    /// `static` or `auto`.
    #[serde(rename = "@placement")]
    pub placement: Option<String>,
    /// Maximum vCPUs.
    #[serde(rename = "$text")]
    pub count: u32,
}

/// `<vcpus>`, one entry per possible vCPU.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Vcpus {
    /// The vCPUs.
    #[serde(default)]
    pub vcpu: Vec<VcpuEntry>,
}

/// `<vcpus><vcpu id enabled hotpluggable/>`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VcpuEntry {
    /// vCPU id.
    #[serde(rename = "@id")]
    pub id: u32,
    /// `yes` or `no`.
    #[serde(rename = "@enabled")]
    pub enabled: String,
    /// `yes` or `no`.
    #[serde(rename = "@hotpluggable")]
    pub hotpluggable: String,
}

impl Domain {
    /// Writes the domain as XML.
    pub fn to_xml(&self) -> Result<String, XmlError> {
        let mut out = String::new();
        let mut serializer = quick_xml::se::Serializer::new(&mut out);
        serializer.indent(' ', 2);
        self.serialize(serializer)?;
        out.push('\n');
        Ok(out)
    }

    /// Reads a domain from XML, ours or libvirt's `dumpxml`.
    pub fn from_xml(xml: &str) -> Result<Self, XmlError> {
        Ok(quick_xml::de::from_str(xml)?)
    }
}
