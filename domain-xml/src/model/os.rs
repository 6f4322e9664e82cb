//! `<os>`, `<sysinfo>`, `<features>` and `<clock>`.

use serde::{Deserialize, Serialize};

use super::{Empty, State};

/// `<os>`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Os {
    /// Firmware auto-selection, e.g. `efi`.
    #[serde(rename = "@firmware")]
    pub firmware: Option<String>,
    /// `<type arch machine>hvm</type>`.
    #[serde(rename = "type")]
    pub os_type: OsType,
    /// Firmware image.
    pub loader: Option<Loader>,
    /// EFI variable store.
    pub nvram: Option<Nvram>,
    /// Direct kernel boot: kernel.
    pub kernel: Option<String>,
    /// Direct kernel boot: initrd.
    pub initrd: Option<String>,
    /// Direct kernel boot: command line.
    pub cmdline: Option<String>,
    /// Boot menu.
    pub bootmenu: Option<BootMenu>,
    /// `<smbios mode='sysinfo'/>`.
    pub smbios: Option<Smbios>,
    /// `<bios useserial='yes'/>`.
    pub bios: Option<OsBios>,
    /// ACPI tables passed to the guest.
    pub acpi: Option<AcpiTables>,
}

/// `<os><acpi>`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AcpiTables {
    /// The tables.
    #[serde(default)]
    pub table: Vec<AcpiTable>,
}

/// `<table type='slic'>/path</table>`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AcpiTable {
    /// Table signature; libvirt 9.0 knows `slic` only.
    #[serde(rename = "@type")]
    pub table_type: String,
    /// The file holding the table.
    #[serde(rename = "$text")]
    pub path: String,
}

/// `<os><type>`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OsType {
    /// `x86_64`.
    #[serde(rename = "@arch")]
    pub arch: Option<String>,
    /// Machine type, e.g. `q35`.
    #[serde(rename = "@machine")]
    pub machine: Option<String>,
    /// `hvm`.
    #[serde(rename = "$text")]
    pub value: String,
}

/// `<loader>`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Loader {
    /// `yes`.
    #[serde(rename = "@readonly")]
    pub readonly: Option<String>,
    /// `yes` for Secure Boot.
    #[serde(rename = "@secure")]
    pub secure: Option<String>,
    /// `pflash` or `rom`.
    #[serde(rename = "@type")]
    pub loader_type: Option<String>,
    /// Path of the firmware.
    #[serde(rename = "$text")]
    pub path: Option<String>,
}

/// `<nvram template=..>path</nvram>`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Nvram {
    /// Template the store is copied from.
    #[serde(rename = "@template")]
    pub template: Option<String>,
    /// Path of the store.
    #[serde(rename = "$text")]
    pub path: Option<String>,
}

/// `<bootmenu enable timeout>`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BootMenu {
    /// `yes` or `no`.
    #[serde(rename = "@enable")]
    pub enable: String,
    /// Milliseconds.
    #[serde(rename = "@timeout")]
    pub timeout: Option<u32>,
}

/// `<smbios mode>`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Smbios {
    /// `sysinfo`.
    #[serde(rename = "@mode")]
    pub mode: String,
}

/// `<os><bios useserial>`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OsBios {
    /// `yes` to show the BIOS on the serial console.
    #[serde(rename = "@useserial")]
    pub useserial: Option<String>,
}

/// `<sysinfo type='smbios'>`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sysinfo {
    /// `smbios`.
    #[serde(rename = "@type")]
    pub sysinfo_type: String,
    /// System entries.
    pub system: Option<SysinfoBlock>,
    /// Chassis entries.
    pub chassis: Option<SysinfoBlock>,
}

/// A block of `<entry name=..>value</entry>`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SysinfoBlock {
    /// The entries.
    #[serde(default)]
    pub entry: Vec<SysinfoEntry>,
}

/// `<entry name=..>value</entry>`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SysinfoEntry {
    /// Entry name, e.g. `uuid`.
    #[serde(rename = "@name")]
    pub name: String,
    /// Value.
    #[serde(rename = "$text")]
    pub value: String,
}

/// `<features>`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Features {
    /// ACPI.
    pub acpi: Option<Empty>,
    /// APIC.
    pub apic: Option<Apic>,
    /// Hyper-V enlightenments.
    pub hyperv: Option<Hyperv>,
    /// KVM features.
    pub kvm: Option<KvmFeatures>,
    /// Paravirtual spinlocks.
    pub pvspinlock: Option<State>,
    /// System Management Mode.
    pub smm: Option<State>,
    /// VMware IO port.
    pub vmport: Option<State>,
    /// Performance monitoring unit.
    pub pmu: Option<State>,
}

/// `<apic eoi>`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Apic {
    /// `on` or `off`.
    #[serde(rename = "@eoi")]
    pub eoi: Option<String>,
}

/// `<hyperv>`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hyperv {
    /// `custom` or `passthrough`.
    #[serde(rename = "@mode")]
    pub mode: Option<String>,
    /// Relaxed timing.
    pub relaxed: Option<State>,
    /// Virtual APIC.
    pub vapic: Option<State>,
    /// Spinlocks.
    pub spinlocks: Option<Spinlocks>,
    /// Virtual processor index.
    pub vpindex: Option<State>,
    /// Runtime accounting.
    pub runtime: Option<State>,
    /// Synthetic interrupt controller.
    pub synic: Option<State>,
    /// Synthetic timers.
    pub stimer: Option<Stimer>,
    /// Reset.
    pub reset: Option<State>,
    /// Vendor id.
    pub vendor_id: Option<VendorId>,
    /// Frequency MSRs.
    pub frequencies: Option<State>,
    /// Re-enlightenment.
    pub reenlightenment: Option<State>,
    /// TLB flush.
    pub tlbflush: Option<State>,
    /// IPI.
    pub ipi: Option<State>,
    /// Enlightened VMCS.
    pub evmcs: Option<State>,
}

/// `<spinlocks state retries>`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Spinlocks {
    /// `on` or `off`.
    #[serde(rename = "@state")]
    pub state: Option<String>,
    /// Retries.
    #[serde(rename = "@retries")]
    pub retries: Option<u32>,
}

/// `<stimer state><direct state/></stimer>`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stimer {
    /// `on` or `off`.
    #[serde(rename = "@state")]
    pub state: Option<String>,
    /// Direct mode.
    pub direct: Option<State>,
}

/// `<vendor_id state value>`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VendorId {
    /// `on` or `off`.
    #[serde(rename = "@state")]
    pub state: Option<String>,
    /// Vendor id.
    #[serde(rename = "@value")]
    pub value: Option<String>,
}

/// `<kvm>`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KvmFeatures {
    /// Hide the KVM signature.
    pub hidden: Option<State>,
    /// Tell the guest its vCPUs have host CPUs of their own.
    #[serde(rename = "hint-dedicated")]
    pub hint_dedicated: Option<State>,
}

/// `<clock>`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Clock {
    /// `utc`, `timezone`, `localtime` or `variable`.
    #[serde(rename = "@offset")]
    pub offset: String,
    /// `reset` or seconds.
    #[serde(rename = "@adjustment")]
    pub adjustment: Option<String>,
    /// Time zone name.
    #[serde(rename = "@timezone")]
    pub timezone: Option<String>,
    /// Timers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub timer: Vec<ClockTimer>,
}

/// `<timer>`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClockTimer {
    /// `rtc`, `pit`, `hpet`, `kvmclock`, `hypervclock`, `tsc`.
    #[serde(rename = "@name")]
    pub name: String,
    /// Tick policy.
    #[serde(rename = "@tickpolicy")]
    pub tickpolicy: Option<String>,
    /// `yes` or `no`.
    #[serde(rename = "@present")]
    pub present: Option<String>,
    /// `guest` or `wall`.
    #[serde(rename = "@track")]
    pub track: Option<String>,
    /// Frequency in Hz (tsc).
    #[serde(rename = "@frequency")]
    pub frequency: Option<i64>,
}
