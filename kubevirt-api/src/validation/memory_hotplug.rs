//! The rules of upstream's VM admitter for memory hotplug (`memory.maxGuest` in a VM template):
//! not with realtime, encrypted, dedicated-CPU or NUMA-passthrough VMs, guest memory set, no more
//! than maxGuest, both aligned to the 2 MiB hotplug block, on x86_64 only.

use super::{Cause, CauseType, cause};
use crate::quantity;
use crate::v1::VirtualMachineInstanceSpec;

/// The hotplug block: memory is plugged in 2 MiB pieces.
const BLOCK: u64 = 2 << 20;

pub(super) fn check_memory_hotplug(spec: &VirtualMachineInstanceSpec, base: &str, causes: &mut Vec<Cause>) {
    let Some(memory) = spec.domain.memory.as_ref() else {
        return;
    };
    let Some(max_guest) = memory.max_guest.as_ref() else {
        return;
    };
    let mut invalid = |field: &str, message: &str| {
        causes.push(cause(CauseType::Invalid, format!("{base}.{field}"), message.to_owned()));
    };
    let cpu = spec.domain.cpu.as_ref();
    if cpu.is_some_and(|c| c.realtime.is_some()) {
        invalid(
            "domain.cpu.realtime",
            "Memory hotplug is not compatible with realtime VMs",
        );
    }
    if spec.domain.launch_security.is_some() {
        invalid(
            "domain.launchSecurity",
            "Memory hotplug is not compatible with encrypted VMs",
        );
    }
    if cpu.is_some_and(|c| c.dedicated_cpu_placement == Some(true)) {
        invalid(
            "domain.cpu.dedicatedCpuPlacement",
            "Memory hotplug is not compatible with dedicated CPUs",
        );
    }
    if cpu
        .and_then(|c| c.numa.as_ref())
        .is_some_and(|n| n.guest_mapping_passthrough.is_some())
    {
        invalid(
            "domain.cpu.numa.guestMappingPassthrough",
            "Memory hotplug is not compatible with guest mapping passthrough",
        );
    }
    let max = quantity::to_bytes(max_guest).ok();
    match memory.guest.as_ref().map(quantity::to_bytes) {
        None => invalid(
            "domain.memory.guest",
            "Guest memory must be configured when memory hotplug is enabled",
        ),
        Some(Ok(guest)) => {
            if max.is_some_and(|m| guest > m) {
                invalid(
                    "domain.memory.guest",
                    "Guest memory is greater than the configured maxGuest memory",
                );
            }
            if !guest.is_multiple_of(BLOCK) {
                invalid("domain.memory.guest", "Guest memory must be 2Mi aligned");
            }
        }
        Some(Err(_)) => {}
    }
    if max.is_some_and(|m| !m.is_multiple_of(BLOCK)) {
        invalid("domain.memory.maxGuest", "MaxGuest must be 2Mi aligned");
    }
    if spec
        .architecture
        .as_deref()
        .is_some_and(|a| !a.is_empty() && a != "amd64")
    {
        invalid("architecture", "Memory hotplug is only available for x86_64 VMs");
    }
}
