//! The `compute` container's resources (upstream's
//! `pkg/virt-controller/services/renderresources.go`): the VMI's requests and limits, the memory
//! overhead, a CPU request per vCPU, ephemeral storage for logs, and the device-plugin resources
//! that give it /dev/kvm, /dev/net/tun and /dev/vhost-net.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ResourceRequirements;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kubevirt_api::quantity;
use kubevirt_api::v1::VirtualMachineInstance;

use super::PodConfig;
use crate::overhead::{emulator_cpus, guest_memory_request, has_dedicated_cpus, memory_overhead, vcpus};

/// `devices.kubevirt.io/kvm`.
pub const KVM: &str = "devices.kubevirt.io/kvm";
/// `devices.kubevirt.io/tun`.
pub const TUN: &str = "devices.kubevirt.io/tun";
/// `devices.kubevirt.io/vhost-net`.
pub const VHOST_NET: &str = "devices.kubevirt.io/vhost-net";
/// Log space for the launcher and QEMU (`ephemeralStorageOverheadSize`).
pub const EPHEMERAL_STORAGE: u64 = 50_000_000;

fn bytes(value: u64) -> Quantity {
    Quantity(value.to_string())
}

fn millicores(value: u64) -> Quantity {
    if value.is_multiple_of(1000) {
        Quantity((value / 1000).to_string())
    } else {
        Quantity(format!("{value}m"))
    }
}

fn add(map: &mut BTreeMap<String, Quantity>, key: &str, extra: u64) {
    let current = map.get(key).and_then(|q| quantity::to_bytes(q).ok()).unwrap_or(0);
    map.insert(key.to_owned(), bytes(current + extra));
}

/// Whether the pod network gives the VMI an interface (explicit, or the default one).
#[must_use]
pub fn has_pod_interface(vmi: &VirtualMachineInstance) -> bool {
    let devices = &vmi.spec.domain.devices;
    !devices.interfaces.is_empty() || devices.autoattach_pod_interface != Some(false)
}

/// Whether some NIC is virtio (the default model), so vhost-net helps.
fn has_virtio_nic(vmi: &VirtualMachineInstance) -> bool {
    let interfaces = &vmi.spec.domain.devices.interfaces;
    if interfaces.is_empty() {
        return has_pod_interface(vmi);
    }
    interfaces
        .iter()
        .any(|i| i.model.as_deref().is_none_or(|m| m == "virtio"))
}

/// The hugepage size of the guest, when it asks for hugepages.
#[must_use]
pub fn hugepage_size(vmi: &VirtualMachineInstance) -> Option<String> {
    vmi.spec
        .domain
        .memory
        .as_ref()
        .and_then(|m| m.hugepages.as_ref())
        .and_then(|h| h.page_size.clone())
}

/// The `compute` container's resources.
#[must_use]
pub fn compute_resources(vmi: &VirtualMachineInstance, config: &PodConfig) -> ResourceRequirements {
    let resources = vmi.spec.domain.resources.as_ref();
    let mut requests = resources.and_then(|r| r.requests.clone()).unwrap_or_default();
    let mut limits = resources.and_then(|r| r.limits.clone()).unwrap_or_default();
    let overcommit = resources.and_then(|r| r.overcommit_guest_overhead).unwrap_or(false);
    let overhead = memory_overhead(vmi, config.additional_guest_memory_overhead_ratio);
    let guest = guest_memory_request(vmi).unwrap_or(0);
    if let Some(size) = hugepage_size(vmi) {
        // The guest's memory comes from hugepages; the container's memory is the overhead.
        let key = format!("hugepages-{size}");
        requests.insert(key.clone(), bytes(guest));
        limits.insert(key, bytes(guest));
        requests.insert("memory".to_owned(), bytes(overhead));
    } else if !overcommit {
        if !requests.contains_key("memory") {
            // Overcommit: the guest may use more than the pod requests.
            let percent = u64::from(config.memory_overcommit.max(1));
            requests.insert("memory".to_owned(), bytes(guest * 100 / percent));
        }
        add(&mut requests, "memory", overhead);
    }
    if limits.contains_key("memory") && !overcommit {
        add(&mut limits, "memory", overhead);
    }
    let vcpus = vcpus(vmi);
    if has_dedicated_cpus(vmi) {
        // Whole CPUs, requests equal to limits: the kubelet's static CPU manager then gives the
        // container CPUs of its own, one per vCPU and one or two for an isolated emulator.
        let cpus = (vcpus + emulator_cpus(vmi)) * 1000;
        limits.insert("cpu".to_owned(), millicores(cpus));
        requests.insert("cpu".to_owned(), millicores(cpus));
        if let Some(memory) = requests.get("memory").cloned() {
            limits.insert("memory".to_owned(), memory);
        }
    } else if !requests.contains_key("cpu") {
        let ratio = u64::from(config.cpu_allocation_ratio.max(1));
        requests.insert("cpu".to_owned(), millicores(vcpus * 1000 / ratio));
    }
    add(&mut requests, "ephemeral-storage", EPHEMERAL_STORAGE);
    if limits.contains_key("ephemeral-storage") {
        add(&mut limits, "ephemeral-storage", EPHEMERAL_STORAGE);
    }
    if config.emulation.requests_kvm() {
        limits.insert(KVM.to_owned(), Quantity("1".to_owned()));
    }
    if has_pod_interface(vmi) {
        limits.insert(TUN.to_owned(), Quantity("1".to_owned()));
        if config.emulation.requests_kvm() && has_virtio_nic(vmi) {
            limits.insert(VHOST_NET.to_owned(), Quantity("1".to_owned()));
        }
    }
    ResourceRequirements {
        requests: Some(requests),
        limits: Some(limits),
        ..ResourceRequirements::default()
    }
}
