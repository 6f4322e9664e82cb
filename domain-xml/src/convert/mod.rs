//! The conversion itself: [`render`] turns a VMI plus a [`ConvertContext`] into a [`Domain`].
//!
//! Each area of the domain has its own module; they run in a fixed order because later ones read
//! what earlier ones decided (the vCPU count, the NUMA cell's CPU list). Every rejection is a
//! [`ConvertError`] naming the field path, as upstream's webhook and converter name them.

mod acpi;
mod cpu;
mod dedicated;
mod devices;
mod disks;
mod error;
mod firmware;
mod guest_events;
mod interfaces;
mod layout;
mod memory;
mod numa;
mod placement;
mod platform;
mod volumes;

use std::collections::{BTreeMap, BTreeSet};

use kubevirt_api::v1::{Devices as SpecDevices, VirtualMachineInstance};

pub use cpu::Topology;
pub use dedicated::is_dedicated;
pub use disks::device_suffix;
pub use error::ConvertError;
pub use interfaces::{apply_links as apply_interface_links, tap_name};
pub use layout::PathLayout;
pub use placement::{CpuPool, FitError, HostCell, HostCpu, HostCpus, parse_cpu_list};

use crate::model::{Address, Devices, Domain, QEMU_NAMESPACE, ScaledInteger, Vcpu};

/// libvirt's `<domain type>`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DomainType {
    /// Hardware virtualization through `/dev/kvm`.
    #[default]
    Kvm,
    /// Software emulation (TCG).
    Qemu,
}

impl DomainType {
    /// Decides between KVM and TCG. `allow_emulation` is upstream's `--allow-emulation`: TCG only
    /// where `/dev/kvm` is absent. `force_emulation` renders TCG even where `/dev/kvm` exists, for
    /// machines whose KVM cannot run guests (nested virtualization).
    pub fn decide(is_kvm_present: bool, allow_emulation: bool, force_emulation: bool) -> Result<Self, ConvertError> {
        match (force_emulation, is_kvm_present, allow_emulation) {
            (true, _, _) | (false, false, true) => Ok(Self::Qemu),
            (false, true, _) => Ok(Self::Kvm),
            (false, false, false) => Err(ConvertError::KvmNotPresent),
        }
    }

    /// The attribute value.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Kvm => "kvm",
            Self::Qemu => "qemu",
        }
    }
}

/// Who provides the tap device behind each interface.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum InterfaceTaps {
    /// The pod's network setup created them, with upstream's names: `tap0` for the pod (or default
    /// Multus) network, `tap<hash>` for a secondary Multus network. libvirt must not manage them.
    #[default]
    PreCreated,
    /// libvirt creates and removes them itself (local mode without pod networking).
    LibvirtManaged,
}

/// Cluster SMBIOS strings (`KubeVirt.spec.configuration.smbios`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SmbiosDefaults {
    /// Manufacturer.
    pub manufacturer: String,
    /// Family.
    pub family: String,
    /// Product.
    pub product: String,
    /// SKU.
    pub sku: String,
    /// Version.
    pub version: String,
}

impl Default for SmbiosDefaults {
    fn default() -> Self {
        Self {
            manufacturer: "KubeVirt".to_owned(),
            family: "KubeVirt".to_owned(),
            product: "None".to_owned(),
            sku: String::new(),
            version: String::new(),
        }
    }
}

/// Everything the conversion needs besides the VMI.
#[allow(
    clippy::struct_excessive_bools,
    reason = "independent cluster settings, each upstream's own flag"
)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConvertContext {
    /// KVM or TCG.
    pub domain_type: DomainType,
    /// Where volumes, sockets and firmware are.
    pub layout: PathLayout,
    /// Cluster SMBIOS strings.
    pub smbios: SmbiosDefaults,
    /// Balloon statistics period in seconds; 0 turns statistics off.
    pub mem_balloon_stats_period: u32,
    /// Let the guest report free pages to the balloon.
    pub free_page_reporting: bool,
    /// Log the serial console to a file.
    pub serial_console_log: bool,
    /// Use the bochs display for EFI guests (upstream's default; the KubeVirt CR's
    /// `kubevirt.io/vga-display-efi-x86` annotation asks for VGA).
    pub bochs_display_for_efi: bool,
    /// The launcher runs as root (decides the NVRAM directory).
    pub run_as_root: bool,
    /// PVC and DataVolume volumes in block mode.
    pub block_volumes: BTreeSet<String>,
    /// Image format (`raw`, `qcow2`) of each containerDisk volume, as virt-handler reports it.
    pub container_disk_formats: BTreeMap<String, String>,
    /// Image file of a containerDisk volume, where it is not in the layout's place (local mode).
    pub container_disk_sources: BTreeMap<String, String>,
    /// Who provides the interfaces' tap devices.
    pub interface_taps: InterfaceTaps,
    /// MAC and MTU the pod network's setup chose, by interface name.
    pub interface_links: BTreeMap<String, InterfaceLink>,
    /// The pod's cpuset and the host's CPU layout, for dedicated CPUs (read by the launcher).
    pub host_cpus: Option<HostCpus>,
}

/// What the network setup chose for one interface (upstream's phase 2 fills these in).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InterfaceLink {
    /// The guest's MAC address.
    pub mac: String,
    /// The link MTU.
    pub mtu: u32,
}

impl Default for ConvertContext {
    fn default() -> Self {
        Self {
            domain_type: DomainType::Kvm,
            layout: PathLayout::default(),
            smbios: SmbiosDefaults::default(),
            mem_balloon_stats_period: kubevirt_api::v1::DEFAULT_MEM_BALLOON_STATS_PERIOD,
            free_page_reporting: true,
            serial_console_log: true,
            bochs_display_for_efi: true,
            run_as_root: true,
            block_volumes: BTreeSet::new(),
            container_disk_formats: BTreeMap::new(),
            container_disk_sources: BTreeMap::new(),
            interface_taps: InterfaceTaps::PreCreated,
            interface_links: BTreeMap::new(),
            host_cpus: None,
        }
    }
}

impl ConvertContext {
    /// A context for `domain_type` in which every containerDisk of `vmi` whose format is not
    /// known yet is taken to be `format` (tests, benchmarks, and checks before images are read).
    #[must_use]
    pub fn assuming_container_disk_format(domain_type: DomainType, vmi: &VirtualMachineInstance, format: &str) -> Self {
        let mut ctx = Self {
            domain_type,
            ..Self::default()
        };
        ctx.assume_container_disk_format(vmi, format);
        ctx
    }

    /// Takes every containerDisk of `vmi` whose format is not known yet to be `format`.
    pub fn assume_container_disk_format(&mut self, vmi: &VirtualMachineInstance, format: &str) {
        for volume in vmi.spec.volumes.iter().filter(|v| v.container_disk.is_some()) {
            self.container_disk_formats
                .entry(volume.name.clone())
                .or_insert_with(|| format.to_owned());
        }
    }

    /// Where EFI variable stores go.
    #[must_use]
    pub fn nvram_dir(&self) -> String {
        if self.run_as_root {
            self.layout.root_nvram_dir.clone()
        } else {
            format!("{}/libvirt/qemu/nvram", self.layout.private_dir)
        }
    }
}

/// Boot orders are unique across disks and interfaces.
#[derive(Debug, Default)]
pub struct BootOrders(BTreeMap<u32, String>);

impl BootOrders {
    /// Records `order` for `field`, failing when it is 0 or already taken.
    pub fn claim(&mut self, order: u32, field: &str) -> Result<(), ConvertError> {
        if order == 0 {
            return Err(ConvertError::invalid(field, "must have a boot order > 0, if supplied"));
        }
        if let Some(other) = self.0.insert(order, field.to_owned()) {
            return Err(ConvertError::invalid(
                field,
                format!("Boot order {order} already set for a different device ({other})"),
            ));
        }
        Ok(())
    }
}

/// The virtio model every virtio device uses: transitional for old guests when asked.
#[must_use]
pub fn virtio_model(devices: &SpecDevices) -> String {
    if devices.use_virtio_transitional == Some(true) {
        "virtio-transitional"
    } else {
        "virtio-non-transitional"
    }
    .to_owned()
}

/// Parses `dddd:bb:ss.f` into a PCI `<address>`.
pub fn pci_address(text: &str, field: &str) -> Result<Address, ConvertError> {
    let malformed = || {
        ConvertError::invalid(
            field,
            format!("PCI address {text:?} is not of the form dddd:bb:ss.f (hexadecimal)"),
        )
    };
    let (domain, rest) = text.split_once(':').ok_or_else(malformed)?;
    let (bus, rest) = rest.split_once(':').ok_or_else(malformed)?;
    let (slot, function) = rest.split_once('.').ok_or_else(malformed)?;
    let hex = |part: &str, width: usize, max: u32| -> Result<String, ConvertError> {
        let is_hex = part.len() == width && part.chars().all(|c| c.is_ascii_hexdigit());
        let value = u32::from_str_radix(part, 16)
            .ok()
            .filter(|v| is_hex && *v <= max)
            .ok_or_else(malformed)?;
        Ok(format!("0x{value:0width$x}"))
    };
    Ok(Address {
        address_type: "pci".to_owned(),
        domain: Some(hex(domain, 4, 0xffff)?),
        bus: Some(hex(bus, 2, 0xff)?),
        slot: Some(hex(slot, 2, 0x1f)?),
        function: Some(hex(function, 1, 0x7)?),
        ..Address::default()
    })
}

/// Every network must be used by exactly one interface.
fn check_networks(vmi: &VirtualMachineInstance) -> Result<(), ConvertError> {
    let mut names = BTreeMap::new();
    for (i, network) in vmi.spec.networks.iter().enumerate() {
        let field = format!("spec.networks[{i}]");
        if let Some(first) = names.insert(network.name.as_str(), i) {
            return Err(ConvertError::invalid(
                format!("{field}.name"),
                format!(
                    "Network with name {} already exists (networks[{first}]), every network must have a unique name",
                    network.name
                ),
            ));
        }
        if usize::from(network.pod.is_some()) + usize::from(network.multus.is_some()) != 1 {
            return Err(ConvertError::invalid(
                &field,
                "should have exactly one network type (pod or multus)",
            ));
        }
        if !vmi
            .spec
            .domain
            .devices
            .interfaces
            .iter()
            .any(|iface| iface.name == network.name)
        {
            let name_field = format!("{field}.name");
            return Err(ConvertError::invalid(
                &name_field,
                format!("{name_field} '{}' not found.", network.name),
            ));
        }
    }
    Ok(())
}

/// Renders a VMI into a libvirt domain.
pub fn render(vmi: &VirtualMachineInstance, ctx: &ConvertContext) -> Result<Domain, ConvertError> {
    let name = vmi
        .metadata
        .name
        .as_deref()
        .filter(|n| !n.is_empty())
        .ok_or_else(|| ConvertError::invalid("metadata.name", "must be set"))?;
    let namespace = vmi
        .metadata
        .namespace
        .as_deref()
        .filter(|n| !n.is_empty())
        .unwrap_or("default");
    let refused = kubevirt_api::support::vmi_spec(&vmi.spec, "spec")
        .into_iter()
        .chain(kubevirt_api::support::vmi_metadata(&vmi.metadata, "metadata"));
    if let Some(first) = refused.into_iter().next() {
        return Err(ConvertError::unsupported(first.field, first.feature));
    }
    check_networks(vmi)?;
    let topology = cpu::topology(&vmi.spec)?;
    let mut domain = Domain {
        domain_type: ctx.domain_type.as_str().to_owned(),
        xmlns_qemu: Some(QEMU_NAMESPACE.to_owned()),
        name: format!("{namespace}_{name}"),
        metadata: Some(firmware::metadata(vmi)),
        memory: ScaledInteger::default(),
        vcpu: Vcpu::default(),
        devices: Devices::default(),
        ..Domain::default()
    };
    cpu::apply(&vmi.spec, &topology, &mut domain)?;
    // The guest's NUMA cell holds every vCPU it may ever have, hotplugged ones too.
    memory::apply(vmi, topology.max_vcpus(), &mut domain)?;
    firmware::apply_os(vmi, ctx, &mut domain)?;
    acpi::apply(vmi, ctx, &mut domain)?;
    firmware::apply_sysinfo(vmi, ctx, &mut domain);
    platform::apply_clock(vmi, &mut domain)?;
    platform::apply_features(vmi, &mut domain)?;
    let mut boot_orders = BootOrders::default();
    let disk_needs = disks::apply(vmi, ctx, topology.vcpus(), &mut boot_orders, &mut domain)?;
    interfaces::apply(
        vmi,
        topology.vcpus(),
        ctx.interface_taps,
        &ctx.interface_links,
        &mut boot_orders,
        &mut domain,
    )?;
    devices::apply(vmi, ctx, topology.vcpus(), &disk_needs, &mut domain)?;
    dedicated::apply(vmi, &topology, ctx.host_cpus.as_ref(), &mut domain)?;
    guest_events::apply(vmi, &mut domain)?;
    Ok(domain)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn domain_type_follows_kvm_presence_and_the_emulation_flags() {
        assert_eq!(DomainType::decide(true, false, false), Ok(DomainType::Kvm));
        assert_eq!(DomainType::decide(true, true, false), Ok(DomainType::Kvm));
        assert_eq!(DomainType::decide(false, true, false), Ok(DomainType::Qemu));
        assert_eq!(
            DomainType::decide(false, false, false),
            Err(ConvertError::KvmNotPresent)
        );
        for kvm in [true, false] {
            for allow in [true, false] {
                assert_eq!(DomainType::decide(kvm, allow, true), Ok(DomainType::Qemu));
            }
        }
    }

    #[test]
    fn pci_addresses_parse_into_hex_fields() {
        let address = pci_address("0000:81:01.0", "f").expect("valid");
        assert_eq!(
            (
                address.domain.as_deref(),
                address.bus.as_deref(),
                address.slot.as_deref(),
                address.function.as_deref()
            ),
            (Some("0x0000"), Some("0x81"), Some("0x01"), Some("0x0"))
        );
        for bad in [
            "",
            "0000:81:01",
            "0000:81:20.0",
            "0000:81:01.8",
            "zzzz:81:01.0",
            "00:81:01.0",
        ] {
            assert!(pci_address(bad, "f").is_err(), "{bad:?}");
        }
    }

    #[test]
    fn tap_names_follow_upstreams_scheme() {
        use kubevirt_api::v1::{MultusNetwork, Network, PodNetwork};
        let pod = Network {
            name: "default".to_owned(),
            pod: Some(PodNetwork::default()),
            multus: None,
        };
        let multus = |default| Network {
            name: "blue".to_owned(),
            pod: None,
            multus: Some(MultusNetwork {
                network_name: "ns/blue".to_owned(),
                default,
            }),
        };
        assert_eq!(tap_name(&pod), "tap0");
        assert_eq!(tap_name(&multus(Some(true))), "tap0");
        // sha256("blue") = 16477688c0e00699c6cfa4497a3612d7e83c532062b64b250fed8908128ed548
        assert_eq!(tap_name(&multus(None)), "tap16477688c0e");
        assert!(
            tap_name(&multus(None)).len() <= 15,
            "kernel interface names are at most 15 bytes"
        );
    }

    #[test]
    fn boot_orders_must_be_positive_and_unique() {
        let mut orders = BootOrders::default();
        assert!(orders.claim(1, "a").is_ok());
        assert!(orders.claim(1, "b").is_err());
        assert!(orders.claim(0, "c").is_err());
    }
}
