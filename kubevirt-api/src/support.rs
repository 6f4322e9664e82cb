//! Which parts of upstream's API kubevirt-rs does not act on, in one place.
//!
//! Every field of upstream's `kubevirt.io/v1` VMI and VM parses (`kubevirt-api/upstream/fields.tsv`
//! lists them). A field is then either honoured as upstream honours it, or refused here: the
//! validating webhook returns these as `FieldValueNotSupported` causes, and `virt-launcher render`
//! and `run` stop with them before anything is created. A field is never parsed and silently
//! ignored. The test `kubevirt-api/tests/upstream_fields.rs` sets each field of the list in turn
//! and checks that this module refuses exactly the fields the list marks `refused`.

use crate::v1::{Interface, VirtualMachine, VirtualMachineInstanceSpec, Volume};
use crate::validation::{Cause, CauseType};

/// A field set to something kubevirt-rs does not implement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unsupported {
    /// The field path, e.g. `spec.domain.devices.gpus`.
    pub field: String,
    /// What it asks for, e.g. `GPU passthrough`.
    pub feature: String,
}

impl Unsupported {
    /// The message users see after the field path.
    #[must_use]
    pub fn message(&self) -> String {
        format!("{} is not supported by kubevirt-rs", self.feature)
    }
}

impl From<Unsupported> for Cause {
    fn from(u: Unsupported) -> Self {
        let message = u.message();
        Self {
            kind: CauseType::NotSupported,
            field: u.field,
            message,
        }
    }
}

impl std::fmt::Display for Unsupported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.message())
    }
}

/// Collects refusals under a base path.
struct Refusals<'a> {
    base: &'a str,
    found: Vec<Unsupported>,
}

impl Refusals<'_> {
    fn refuse_if(&mut self, present: bool, field: &str, feature: &str) {
        if present {
            self.found.push(Unsupported {
                field: format!("{}.{field}", self.base),
                feature: feature.to_owned(),
            });
        }
    }
}

/// The refusals of a VMI spec found at `base` (`spec`, or `spec.template.spec` in a VM).
#[must_use]
pub fn vmi_spec(spec: &VirtualMachineInstanceSpec, base: &str) -> Vec<Unsupported> {
    let mut r = Refusals {
        base,
        found: Vec::new(),
    };
    cpu_and_memory(spec, &mut r);
    firmware_and_features(spec, &mut r);
    devices(spec, &mut r);
    for (i, disk) in spec.domain.devices.disks.iter().enumerate() {
        let at = format!("domain.devices.disks[{i}]");
        r.refuse_if(
            disk.changed_block_tracking == Some(true),
            &format!("{at}.changedBlockTracking"),
            "changed block tracking",
        );
        let block_size = disk.block_size.as_ref();
        r.refuse_if(
            block_size
                .and_then(|b| b.match_volume.as_ref())
                .is_some_and(|m| m.enabled != Some(false)),
            &format!("{at}.blockSize.matchVolume"),
            "matching the volume's block size",
        );
        r.refuse_if(
            block_size
                .and_then(|b| b.custom.as_ref())
                .is_some_and(|c| c.discard_granularity.is_some()),
            &format!("{at}.blockSize.custom.discardGranularity"),
            "a custom discard granularity (libvirt 9.0 has none)",
        );
        r.refuse_if(
            disk.lun.as_ref().is_some_and(|l| l.reservation == Some(true)),
            &format!("{at}.lun.reservation"),
            "SCSI persistent reservation (it needs the pr-helper daemon)",
        );
    }
    for (i, iface) in spec.domain.devices.interfaces.iter().enumerate() {
        interface(iface, &format!("domain.devices.interfaces[{i}]"), &mut r);
    }
    for (i, volume) in spec.volumes.iter().enumerate() {
        volume_source(volume, &format!("volumes[{i}]"), &mut r);
    }
    for (i, network) in spec.networks.iter().enumerate() {
        let at = format!("networks[{i}]");
        r.refuse_if(network.multus.is_some(), &format!("{at}.multus"), "Multus networks");
        r.refuse_if(
            network.pod.as_ref().is_some_and(|p| p.vm_ipv6_network_cidr.is_some()),
            &format!("{at}.pod.vmIPv6NetworkCIDR"),
            "IPv6 on the pod network",
        );
    }
    scheduling_and_guest(spec, &mut r);
    r.found
}

fn cpu_and_memory(spec: &VirtualMachineInstanceSpec, r: &mut Refusals<'_>) {
    if let Some(memory) = &spec.domain.memory {
        r.refuse_if(
            memory.file_backed.is_some(),
            "domain.memory.fileBacked",
            "file-backed guest memory",
        );
        r.refuse_if(
            memory.reserved_overhead.is_some(),
            "domain.memory.reservedOverhead",
            "reserved memory overhead and memory locking",
        );
    }
    r.refuse_if(
        spec.domain.io_threads_policy.as_deref() == Some("supplementalPool"),
        "domain.ioThreadsPolicy",
        "the supplementalPool IOThreads policy",
    );
    r.refuse_if(
        spec.domain.io_threads.is_some(),
        "domain.ioThreads",
        "a supplemental IOThread pool",
    );
}

fn firmware_and_features(spec: &VirtualMachineInstanceSpec, r: &mut Refusals<'_>) {
    let tlbflush = spec
        .domain
        .features
        .as_ref()
        .and_then(|f| f.hyperv.as_ref())
        .and_then(|h| h.tlbflush.as_ref());
    for (name, state) in [
        ("direct", tlbflush.and_then(|t| t.direct.as_ref())),
        ("extended", tlbflush.and_then(|t| t.extended.as_ref())),
    ] {
        r.refuse_if(
            state.is_some_and(crate::v1::FeatureState::is_enabled),
            &format!("domain.features.hyperv.tlbflush.{name}"),
            &format!("the {name} Hyper-V TLB flush (libvirt 9.0 has none)"),
        );
    }
    r.refuse_if(
        spec.domain.launch_security.is_some(),
        "domain.launchSecurity",
        "confidential computing launch security (SEV, SEV-SNP, TDX)",
    );
}

fn devices(spec: &VirtualMachineInstanceSpec, r: &mut Refusals<'_>) {
    let devices = &spec.domain.devices;
    r.refuse_if(!devices.gpus.is_empty(), "domain.devices.gpus", "GPU passthrough");
    r.refuse_if(
        !devices.host_devices.is_empty(),
        "domain.devices.hostDevices",
        "host device passthrough",
    );
    r.refuse_if(
        !devices.filesystems.is_empty(),
        "domain.devices.filesystems",
        "virtiofs file systems",
    );
    r.refuse_if(
        devices.downward_metrics.is_some(),
        "domain.devices.downwardMetrics",
        "the downward metrics device",
    );
    for (i, panic) in devices.panic_devices.iter().enumerate() {
        r.refuse_if(
            panic.model.as_deref() == Some(crate::v1::UNSUPPORTED_PANIC_DEVICE_MODEL),
            &format!("domain.devices.panicDevices[{i}].model"),
            "the pvpanic panic device (libvirt 9.0 has only isa and hyperv)",
        );
    }
    r.refuse_if(
        devices.iommu.is_some(),
        "domain.devices.iommu",
        "a virtual IOMMU (smmuv3 exists on arm64 only)",
    );
    r.refuse_if(
        devices.watchdog.as_ref().is_some_and(|w| w.diag288.is_some()),
        "domain.devices.watchdog.diag288",
        "the diag288 watchdog (s390x only)",
    );
}

fn interface(iface: &Interface, at: &str, r: &mut Refusals<'_>) {
    r.refuse_if(iface.sriov.is_some(), &format!("{at}.sriov"), "the SR-IOV binding");
    r.refuse_if(
        iface.passt_binding.is_some(),
        &format!("{at}.passtBinding"),
        "the passt binding",
    );
    r.refuse_if(
        iface.binding.is_some(),
        &format!("{at}.binding"),
        "network binding plugins",
    );
    r.refuse_if(
        !iface.port_ranges.is_empty(),
        &format!("{at}.portRanges"),
        "port ranges",
    );
}

fn volume_source(volume: &Volume, at: &str, r: &mut Refusals<'_>) {
    let hotpluggable = volume
        .persistent_volume_claim
        .as_ref()
        .and_then(|p| p.hotpluggable)
        .or_else(|| volume.data_volume.as_ref().and_then(|d| d.hotpluggable));
    r.refuse_if(
        hotpluggable == Some(true),
        &format!(
            "{at}.{}.hotpluggable",
            if volume.data_volume.is_some() {
                "dataVolume"
            } else {
                "persistentVolumeClaim"
            }
        ),
        "volume hotplug",
    );
    let kinds = [
        (
            volume.downward_metrics.is_some(),
            "downwardMetrics",
            "the downward metrics volume",
        ),
        (volume.memory_dump.is_some(), "memoryDump", "memory dump volumes"),
        (
            volume.container_path.is_some(),
            "containerPath",
            "containerPath volumes",
        ),
    ];
    for (present, kind, feature) in kinds {
        r.refuse_if(present, &format!("{at}.{kind}"), feature);
    }
}

fn scheduling_and_guest(spec: &VirtualMachineInstanceSpec, r: &mut Refusals<'_>) {
    r.refuse_if(spec.liveness_probe.is_some(), "livenessProbe", "liveness probes");
    r.refuse_if(spec.readiness_probe.is_some(), "readinessProbe", "readiness probes");
    r.refuse_if(
        !spec.resource_claims.is_empty(),
        "resourceClaims",
        "dynamic resource allocation",
    );
    r.refuse_if(!spec.utility_volumes.is_empty(), "utilityVolumes", "utility volumes");
}

/// What an unprivileged launcher pod cannot do yet (docs/security.md), refused for a VMI spec
/// (at `base`) that will run unprivileged (`unprivileged`: the `Root` feature gate is off):
/// realtime vCPUs need `SCHED_FIFO` and NUMA passthrough needs `mbind`, neither of which a
/// process without `CAP_SYS_NICE` gets.
#[must_use]
pub fn unprivileged_vmi(spec: &VirtualMachineInstanceSpec, base: &str, unprivileged: bool) -> Vec<Unsupported> {
    let cpu_base = format!("{base}.domain.cpu");
    let mut r = Refusals {
        base: &cpu_base,
        found: Vec::new(),
    };
    if !unprivileged {
        return r.found;
    }
    let cpu = spec.domain.cpu.as_ref();
    let limit = "in an unprivileged launcher pod (turn on the Root feature gate)";
    r.refuse_if(
        cpu.is_some_and(|c| c.realtime.is_some()),
        "realtime",
        &format!("realtime vCPUs {limit}"),
    );
    r.refuse_if(
        cpu.and_then(|c| c.numa.as_ref())
            .is_some_and(|n| n.guest_mapping_passthrough.is_some()),
        "numa.guestMappingPassthrough",
        &format!("NUMA passthrough {limit}"),
    );
    r.found
}

/// The annotation asking for hook sidecars.
const HOOK_SIDECARS: &str = "hooks.kubevirt.io/hookSidecars";

/// The refusals of a VMI's metadata (or a VM template's) found at `base`: annotations that ask
/// for what kubevirt-rs does not do.
#[must_use]
pub fn vmi_metadata(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta, base: &str) -> Vec<Unsupported> {
    let hooks = meta
        .annotations
        .as_ref()
        .and_then(|a| a.get(HOOK_SIDECARS))
        .is_some_and(|v| !v.is_empty());
    let mut r = Refusals {
        base,
        found: Vec::new(),
    };
    r.refuse_if(hooks, &format!("annotations.{HOOK_SIDECARS}"), "hook sidecars");
    r.found
}

/// The refusals of a VM: its own fields and its template's spec and metadata.
#[must_use]
pub fn vm(vm: &VirtualMachine) -> Vec<Unsupported> {
    let mut r = Refusals {
        base: "spec",
        found: Vec::new(),
    };
    let spec = &vm.spec;
    r.refuse_if(
        spec.update_volumes_strategy.as_deref() == Some("Migration"),
        "updateVolumesStrategy",
        "volume migration",
    );
    r.refuse_if(
        !spec.resource_claim_templates.is_empty(),
        "resourceClaimTemplates",
        "dynamic resource allocation",
    );
    if let Some(template) = &spec.template.spec {
        r.found.extend(vmi_spec(template, "spec.template.spec"));
    }
    if let Some(meta) = &spec.template.metadata {
        r.found.extend(vmi_metadata(meta, "spec.template.metadata"));
    }
    r.found
}
