//! Upstream's defaults for a new VMI (`pkg/defaults`): what the mutating webhook fills in before the
//! object is stored. Pure: the cluster configuration, the clock reading and the UUID source come in
//! as arguments.
//!
//! The order is upstream's, because later steps read what earlier ones wrote: the memory request
//! is derived before the guest memory, the CPU topology from the requests, the disk bus after the
//! default disks are added.

mod hyperv;
mod objects;
mod resources;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kubevirt_api::v1::{
    ClusterConfig, CpuTopology, Machine, MemoryStatus, PhaseTransitionTimestamp, VirtualMachineInstance,
    VirtualMachineInstancePhase, VirtualMachineInstanceSpec,
};
use kubevirt_api::well_known::finalizers::VMI_FOREGROUND_DELETE;

pub use hyperv::set_hyperv_dependencies;
pub use resources::{set_default_cpu_topology, set_default_resource_requests, set_guest_memory};

/// The architecture this build defaults VMIs to (upstream: the cluster's default architecture).
pub const DEFAULT_ARCHITECTURE: &str = "amd64";
/// Upstream's `DefaultCPUModel`.
pub const DEFAULT_CPU_MODEL: &str = "host-model";
pub use kubevirt_api::defaults::{
    DEFAULT_NETWORK_NAME, DefaultsError, set_default_network_interface, set_default_volume_disks,
};

/// Fills in a new VMI's spec, metadata and status as upstream's VMI mutator does on `CREATE`.
/// `new_uuid` makes the firmware UUID when the VMI has none.
pub fn set_vmi_create_defaults(
    vmi: &mut VirtualMachineInstance,
    config: &ClusterConfig,
    now: Time,
    new_uuid: &dyn Fn() -> String,
) -> Result<(), DefaultsError> {
    set_vmi_spec_defaults(&mut vmi.spec, config)?;
    objects::set_object_defaults(&mut vmi.spec, new_uuid);
    set_hyperv_dependencies(&mut vmi.spec);
    set_arch_defaults(&mut vmi.spec, config);
    set_emulator_parity(vmi, config);

    let status = vmi.status.get_or_insert_with(Default::default);
    if let Some(guest) = vmi.spec.domain.memory.as_ref().and_then(|m| m.guest.clone()) {
        status.memory = Some(MemoryStatus {
            guest_at_boot: Some(guest.clone()),
            guest_current: Some(guest.clone()),
            guest_requested: Some(guest),
        });
    }
    if let Some(cpu) = &vmi.spec.domain.cpu
        && status.current_cpu_topology.is_none()
    {
        status.current_cpu_topology = Some(CpuTopology {
            cores: cpu.cores,
            sockets: cpu.sockets,
            threads: cpu.threads,
        });
    }

    // Every launcher runs unprivileged unless the Root feature gate says otherwise.
    status.runtime_user = Some(
        if config.is_feature_gate_enabled(kubevirt_api::well_known::ROOT_FEATURE_GATE) {
            0
        } else {
            u64::from(kubevirt_api::well_known::NON_ROOT_UID)
        },
    );

    let finalizers = vmi.metadata.finalizers.get_or_insert_with(Vec::new);
    finalizers.push(VMI_FOREGROUND_DELETE.to_owned());
    status.phase = Some(VirtualMachineInstancePhase::Pending);
    status.phase_transition_timestamps.push(PhaseTransitionTimestamp {
        phase: Some(VirtualMachineInstancePhase::Pending),
        phase_transition_timestamp: Some(now),
    });
    Ok(())
}

/// Copies the cluster's even-parity request for isolated emulator threads onto the VMI, as
/// upstream does under the AlignCPUs gate.
fn set_emulator_parity(vmi: &mut VirtualMachineInstance, config: &ClusterConfig) {
    let isolated = vmi
        .spec
        .domain
        .cpu
        .as_ref()
        .is_some_and(|c| c.isolate_emulator_thread == Some(true));
    if isolated && config.emulator_thread_complete_to_even_parity && config.is_feature_gate_enabled("AlignCPUs") {
        vmi.metadata.annotations.get_or_insert_with(Default::default).insert(
            kubevirt_api::well_known::annotations::EMULATOR_THREAD_COMPLETE_TO_EVEN_PARITY.to_owned(),
            String::new(),
        );
    }
}

/// The spec defaults shared by VMIs and VM templates (upstream's `SetDefaultVirtualMachineInstanceSpec`).
pub fn set_vmi_spec_defaults(
    spec: &mut VirtualMachineInstanceSpec,
    config: &ClusterConfig,
) -> Result<(), DefaultsError> {
    if spec.architecture.as_deref().is_none_or(str::is_empty) {
        spec.architecture = Some(DEFAULT_ARCHITECTURE.to_owned());
    }
    let machine = spec.domain.machine.get_or_insert_with(Machine::default);
    if machine.machine_type.as_deref().is_none_or(str::is_empty) {
        machine.machine_type = Some(config.machine_type.clone());
    }
    set_default_resource_requests(spec, config);
    set_guest_memory(spec);
    set_default_cpu_topology(spec);
    set_container_disk_pull_policies(spec);
    if spec.eviction_strategy.is_none() {
        spec.eviction_strategy.clone_from(&config.eviction_strategy);
    }
    set_default_network_interface(spec, config)?;
    set_default_volume_disks(spec);
    Ok(())
}

/// `Always` for `:latest` or untagged images, else `IfNotPresent`.
fn set_container_disk_pull_policies(spec: &mut VirtualMachineInstanceSpec) {
    for disk in spec.volumes.iter_mut().filter_map(|v| v.container_disk.as_mut()) {
        if disk.image_pull_policy.as_deref().is_none_or(str::is_empty) {
            let always = disk.image.ends_with(":latest") || !disk.image.contains([':', '@']);
            disk.image_pull_policy = Some(if always { "Always" } else { "IfNotPresent" }.to_owned());
        }
    }
}

/// amd64: SATA for disks without a bus, a watchdog action, and the CPU model.
fn set_arch_defaults(spec: &mut VirtualMachineInstanceSpec, config: &ClusterConfig) {
    if spec.architecture.as_deref() == Some(DEFAULT_ARCHITECTURE) {
        let sata = || Some("sata".to_owned());
        for disk in &mut spec.domain.devices.disks {
            if let Some(d) = disk
                .disk
                .as_mut()
                .filter(|d| d.bus.as_deref().is_none_or(str::is_empty))
            {
                d.bus = sata();
            }
            if let Some(c) = disk
                .cdrom
                .as_mut()
                .filter(|c| c.bus.as_deref().is_none_or(str::is_empty))
            {
                c.bus = sata();
            }
            if let Some(l) = disk.lun.as_mut().filter(|l| l.bus.as_deref().is_none_or(str::is_empty)) {
                l.bus = sata();
            }
        }
        // A diag288 (s390x) watchdog is left for the validating webhook to refuse.
        if let Some(watchdog) = spec.domain.devices.watchdog.as_mut().filter(|w| w.diag288.is_none()) {
            let esb = watchdog.i6300esb.get_or_insert_with(Default::default);
            if esb.action.as_deref().is_none_or(str::is_empty) {
                esb.action = Some("reset".to_owned());
            }
        }
    }
    let cpu = spec.domain.cpu.get_or_insert_with(Default::default);
    if cpu.model.as_deref().is_none_or(str::is_empty) {
        cpu.model = Some(config.cpu_model.clone().unwrap_or_else(|| DEFAULT_CPU_MODEL.to_owned()));
    }
}
