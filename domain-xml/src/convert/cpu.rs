//! CPU topology, vCPU count, CPU model and features.

use kubevirt_api::v1::VirtualMachineInstanceSpec;

use super::ConvertError;
use crate::model::{self, Cpu, CpuFeature, CpuModel, Domain, Vcpu, VcpuEntry, Vcpus};

/// The most vCPUs a q35 guest can have with QEMU 7.2.
pub const MAX_VCPUS: u32 = 288;

/// Feature policies libvirt accepts.
const FEATURE_POLICIES: [&str; 5] = ["force", "require", "optional", "disable", "forbid"];

/// The guest CPU topology.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Topology {
    /// Sockets (the maximum, with CPU hotplug).
    pub sockets: u32,
    /// Cores per socket.
    pub cores: u32,
    /// Threads per core.
    pub threads: u32,
    /// Sockets enabled at boot.
    pub enabled_sockets: u32,
}

impl Topology {
    /// vCPUs enabled at boot.
    #[must_use]
    pub fn vcpus(&self) -> u32 {
        self.enabled_sockets
            .saturating_mul(self.cores)
            .saturating_mul(self.threads)
    }

    /// vCPUs including the hotpluggable ones.
    #[must_use]
    pub fn max_vcpus(&self) -> u32 {
        self.sockets.saturating_mul(self.cores).saturating_mul(self.threads)
    }
}

/// Topology from `spec.domain.cpu`, or else from the CPU limit or request rounded up into sockets
/// ([`kubevirt_api::guest::cpu_topology`]), with CPU hotplug's `maxSockets`.
pub fn topology(spec: &VirtualMachineInstanceSpec) -> Result<Topology, ConvertError> {
    let cpu = spec.domain.cpu.as_ref();
    let base = kubevirt_api::guest::cpu_topology(spec).map_err(|e| ConvertError::invalid(e.field, e.message))?;
    let mut topology = Topology {
        sockets: base.sockets,
        cores: base.cores,
        threads: base.threads,
        enabled_sockets: base.sockets,
    };
    if let Some(max) = cpu.and_then(|c| c.max_sockets).filter(|n| *n > 0) {
        if max < topology.sockets {
            return Err(ConvertError::invalid(
                "spec.domain.cpu.maxSockets",
                format!(
                    "maxSockets ({max}) must not be less than sockets ({})",
                    topology.sockets
                ),
            ));
        }
        topology.sockets = max;
    }
    if u64::from(topology.sockets) * u64::from(topology.cores) * u64::from(topology.threads) > u64::from(MAX_VCPUS) {
        return Err(ConvertError::invalid(
            "spec.domain.cpu",
            format!(
                "{} sockets x {} cores x {} threads is more than the {MAX_VCPUS} vCPUs a q35 machine supports",
                topology.sockets, topology.cores, topology.threads
            ),
        ));
    }
    Ok(topology)
}

/// Sets `<vcpu>`, `<vcpus>` (hotplug) and `<cpu>`.
pub fn apply(spec: &VirtualMachineInstanceSpec, topology: &Topology, domain: &mut Domain) -> Result<(), ConvertError> {
    domain.vcpu = Vcpu {
        placement: Some("static".to_owned()),
        count: topology.max_vcpus(),
    };
    if topology.sockets != topology.enabled_sockets {
        domain.vcpus = Some(hotplug_vcpus(topology));
    }
    let cpu_spec = spec.domain.cpu.as_ref();
    let mut cpu = Cpu {
        topology: Some(model::CpuTopology {
            sockets: topology.sockets,
            dies: None,
            cores: topology.cores,
            threads: topology.threads,
        }),
        ..Cpu::default()
    };
    match cpu_spec.and_then(|c| c.model.as_deref()).filter(|m| !m.is_empty()) {
        None | Some("host-model") => cpu.mode = Some("host-model".to_owned()),
        Some("host-passthrough") => cpu.mode = Some("host-passthrough".to_owned()),
        Some(named) => {
            cpu.mode = Some("custom".to_owned());
            cpu.model = Some(CpuModel {
                fallback: None,
                name: named.to_owned(),
            });
        }
    }
    let features = cpu_spec.map(|c| c.features.as_slice()).unwrap_or_default();
    for (i, feature) in features.iter().enumerate() {
        let policy = feature.policy.as_deref().filter(|p| !p.is_empty()).unwrap_or("require");
        if !FEATURE_POLICIES.contains(&policy) {
            return Err(ConvertError::invalid(
                format!("spec.domain.cpu.features[{i}].policy"),
                format!(
                    "CPU feature {} uses policy {policy}, which is not one of {}",
                    feature.name,
                    FEATURE_POLICIES.join(", ")
                ),
            ));
        }
        cpu.feature.push(CpuFeature {
            policy: policy.to_owned(),
            name: feature.name.clone(),
        });
    }
    // Named models on x86_64 disable MPX unless asked for: newer hosts lack it.
    if cpu.mode.as_deref() == Some("custom") && !features.iter().any(|f| f.name == "mpx") {
        cpu.feature.push(CpuFeature {
            policy: "disable".to_owned(),
            name: "mpx".to_owned(),
        });
    }
    domain.cpu = Some(cpu);
    Ok(())
}

fn hotplug_vcpus(topology: &Topology) -> Vcpus {
    let per_socket = topology.cores.saturating_mul(topology.threads);
    let yes_no = |b: bool| if b { "yes" } else { "no" }.to_owned();
    Vcpus {
        vcpu: (0..topology.max_vcpus())
            .map(|id| VcpuEntry {
                id,
                enabled: yes_no(id < topology.vcpus()),
                hotpluggable: yes_no(id >= per_socket),
            })
            .collect(),
    }
}
