//! Applying an instance type to a VMI spec, as upstream's `pkg/instancetype/apply` does: each field
//! the instance type sets is copied in, and a field the VM sets too is a conflict. Every conflict
//! is collected; with any, the spec must not be used.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::topology::layout;
use super::{Conflicts, VirtualMachineInstancetypeSpec, VirtualMachinePreferenceSpec};
use crate::v1::{Cpu, DiskIoThreads, Memory, VirtualMachineInstanceSpec};

/// Applies `instancetype` to `spec` (found at `prefix`, e.g. `spec.template.spec`) and its
/// annotations to `annotations`; the preference decides the CPU topology.
pub fn apply_instancetype(
    instancetype: &VirtualMachineInstancetypeSpec,
    preference: Option<&VirtualMachinePreferenceSpec>,
    spec: &mut VirtualMachineInstanceSpec,
    annotations: &mut BTreeMap<String, String>,
    prefix: &str,
) -> Conflicts {
    let mut conflicts = Conflicts::default();
    if let Some(selector) = &instancetype.node_selector {
        if spec.node_selector.is_some() {
            conflicts.push(format!("{prefix}.nodeSelector"));
        } else {
            spec.node_selector = Some(selector.clone());
        }
    }
    if let Some(scheduler) = instancetype.scheduler_name.as_ref().filter(|s| !s.is_empty()) {
        if spec.scheduler_name.as_deref().is_some_and(|s| !s.is_empty()) {
            conflicts.push(format!("{prefix}.schedulerName"));
        } else {
            spec.scheduler_name = Some(scheduler.clone());
        }
    }
    apply_cpu(instancetype, preference, spec, prefix, &mut conflicts);
    apply_memory(instancetype, spec, prefix, &mut conflicts);
    apply_io_and_security(instancetype, spec, prefix, &mut conflicts);
    apply_devices(instancetype, spec, prefix, &mut conflicts);
    for (key, value) in instancetype.annotations.iter().flatten() {
        match annotations.get(key) {
            Some(existing) if existing != value => conflicts.push(format!("annotations.{key}")),
            Some(_) => {}
            None => {
                annotations.insert(key.clone(), value.clone());
            }
        }
    }
    conflicts
}

fn apply_cpu(
    instancetype: &VirtualMachineInstancetypeSpec,
    preference: Option<&VirtualMachinePreferenceSpec>,
    spec: &mut VirtualMachineInstanceSpec,
    prefix: &str,
    conflicts: &mut Conflicts,
) {
    let wanted = &instancetype.cpu;
    let resources = spec.domain.resources.as_ref();
    for kind in ["requests", "limits"] {
        let list = resources.and_then(|r| {
            if kind == "requests" {
                r.requests.as_ref()
            } else {
                r.limits.as_ref()
            }
        });
        if list.is_some_and(|l| l.contains_key("cpu")) {
            conflicts.push(format!("{prefix}.domain.resources.{kind}.cpu"));
        }
    }
    let cpu = spec.domain.cpu.get_or_insert_with(Cpu::default);
    for (name, value) in [("sockets", cpu.sockets), ("cores", cpu.cores), ("threads", cpu.threads)] {
        if value.is_some_and(|v| v != 0) {
            conflicts.push(format!("{prefix}.domain.cpu.{name}"));
        }
    }
    let (sockets, cores, threads) = layout(wanted.guest, preference);
    (cpu.sockets, cpu.cores, cpu.threads) = (Some(sockets), Some(cores), Some(threads));
    if let Some(model) = wanted.model.as_ref().filter(|m| !m.is_empty()) {
        if cpu.model.as_deref().is_some_and(|m| !m.is_empty()) {
            conflicts.push(format!("{prefix}.domain.cpu.model"));
        } else {
            cpu.model = Some(model.clone());
        }
    }
    for (name, wanted, current) in [
        (
            "dedicatedCPUPlacement",
            wanted.dedicated_cpu_placement,
            &mut cpu.dedicated_cpu_placement,
        ),
        (
            "isolateEmulatorThread",
            wanted.isolate_emulator_thread,
            &mut cpu.isolate_emulator_thread,
        ),
    ] {
        if let Some(value) = wanted {
            if *current == Some(true) {
                conflicts.push(format!("{prefix}.domain.cpu.{name}"));
            } else {
                *current = Some(value);
            }
        }
    }
    if let Some(numa) = &wanted.numa {
        if cpu.numa.is_some() {
            conflicts.push(format!("{prefix}.domain.cpu.numa"));
        } else {
            cpu.numa = Some(numa.clone());
        }
    }
    if let Some(realtime) = &wanted.realtime {
        if cpu.realtime.is_some() {
            conflicts.push(format!("{prefix}.domain.cpu.realtime"));
        } else {
            cpu.realtime = Some(realtime.clone());
        }
    }
    if let Some(max) = wanted.max_sockets {
        cpu.max_sockets = Some(max);
    }
}

fn apply_memory(
    instancetype: &VirtualMachineInstancetypeSpec,
    spec: &mut VirtualMachineInstanceSpec,
    prefix: &str,
    conflicts: &mut Conflicts,
) {
    let wanted = &instancetype.memory;
    let resources = spec.domain.resources.as_ref();
    let has = |kind: &str| {
        resources
            .and_then(|r| {
                if kind == "requests" {
                    r.requests.as_ref()
                } else {
                    r.limits.as_ref()
                }
            })
            .is_some_and(|l| l.contains_key("memory"))
    };
    // As upstream: the first conflict alone is reported, each at the field that conflicts.
    let memory = spec.domain.memory.get_or_insert_with(Memory::default);
    let conflict = if memory.guest.is_some() {
        Some("domain.memory.guest")
    } else if memory.hugepages.is_some() && wanted.hugepages.is_some() {
        Some("domain.memory.hugepages")
    } else if memory.max_guest.is_some() && wanted.max_guest.is_some() {
        Some("domain.memory.maxGuest")
    } else if has("requests") {
        Some("domain.resources.requests.memory")
    } else if has("limits") {
        Some("domain.resources.limits.memory")
    } else {
        None
    };
    if let Some(field) = conflict {
        conflicts.push(format!("{prefix}.{field}"));
        return;
    }
    memory.guest = Some(wanted.guest.clone());
    if let Some(hugepages) = &wanted.hugepages {
        memory.hugepages = Some(hugepages.clone());
    }
    if let Some(max_guest) = &wanted.max_guest {
        memory.max_guest = Some(max_guest.clone());
    }
    if wanted.overcommit_percent > 0
        && let Ok(bytes) = crate::quantity::to_bytes(&wanted.guest)
    {
        let request = overcommitted_request(bytes, wanted.overcommit_percent);
        let requests = spec
            .domain
            .resources
            .get_or_insert_with(Default::default)
            .requests
            .get_or_insert_with(BTreeMap::new);
        requests.insert(
            "memory".to_owned(),
            Quantity(crate::quantity::format(
                i128::from(request),
                crate::quantity::is_binary(&wanted.guest),
            )),
        );
    }
}

/// The memory request of an instance type that overcommits `percent` of `guest` bytes, in
/// upstream's single-precision arithmetic (1Gi at 10 % requests 966367616 bytes).
#[allow(
    clippy::cast_precision_loss,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "upstream computes in float32 and truncates; the same bytes need the same arithmetic"
)]
#[must_use]
pub fn overcommitted_request(guest: u64, percent: i32) -> u64 {
    let factor = 1.0_f32 - (percent as f32) / 100.0;
    (guest as f32 * factor) as u64
}

fn apply_io_and_security(
    instancetype: &VirtualMachineInstancetypeSpec,
    spec: &mut VirtualMachineInstanceSpec,
    prefix: &str,
    conflicts: &mut Conflicts,
) {
    if let Some(policy) = &instancetype.io_threads_policy {
        if spec.domain.io_threads_policy.is_some() {
            conflicts.push(format!("{prefix}.domain.ioThreadsPolicy"));
        } else {
            spec.domain.io_threads_policy = Some(policy.clone());
        }
    }
    if let Some(count) = instancetype
        .io_threads
        .as_ref()
        .and_then(|t| t.supplemental_pool_thread_count)
    {
        let current = spec.domain.io_threads.get_or_insert_with(DiskIoThreads::default);
        if current.supplemental_pool_thread_count.is_some() {
            conflicts.push(format!("{prefix}.domain.ioThreads.supplementalPoolThreadCount"));
        } else {
            current.supplemental_pool_thread_count = Some(count);
        }
    }
    if let Some(security) = &instancetype.launch_security {
        if spec.domain.launch_security.is_some() {
            conflicts.push(format!("{prefix}.domain.launchSecurity"));
        } else {
            spec.domain.launch_security = Some(security.clone());
        }
    }
}

fn apply_devices(
    instancetype: &VirtualMachineInstancetypeSpec,
    spec: &mut VirtualMachineInstanceSpec,
    prefix: &str,
    conflicts: &mut Conflicts,
) {
    let devices = &mut spec.domain.devices;
    if !instancetype.gpus.is_empty() {
        if devices.gpus.is_empty() {
            devices.gpus.clone_from(&instancetype.gpus);
        } else {
            conflicts.push(format!("{prefix}.domain.devices.gpus"));
        }
    }
    if !instancetype.host_devices.is_empty() {
        if devices.host_devices.is_empty() {
            devices.host_devices.clone_from(&instancetype.host_devices);
        } else {
            conflicts.push(format!("{prefix}.domain.devices.hostDevices"));
        }
    }
}
