//! Guest memory, hugepages and memory hotplug.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kubevirt_api::quantity;
use kubevirt_api::v1::VirtualMachineInstance;
use kubevirt_api::well_known::annotations;

use super::ConvertError;
use crate::model::{
    CpuNuma, Domain, Hugepages, MaxMemory, MemoryBacking, MemoryDevice, MemoryTarget, NumaCell, ScaledInteger, TypeAttr,
};

/// virtio-mem block size: upstream aligns hotplug memory to 2 MiB.
pub const VIRTIO_MEM_BLOCK_BYTES: u64 = 2 << 20;

fn bytes(field: &str, q: &Quantity) -> Result<u64, ConvertError> {
    quantity::to_bytes(q).map_err(|e| ConvertError::invalid(field, e.to_string()))
}

/// Guest memory in bytes ([`kubevirt_api::guest::memory_source`]).
pub fn guest_bytes(vmi: &VirtualMachineInstance) -> Result<u64, ConvertError> {
    kubevirt_api::guest::memory_bytes(&vmi.spec)
        .map_err(|e| ConvertError::invalid(e.field, e.message))?
        .ok_or_else(|| {
            ConvertError::invalid(
                "spec.domain.resources.requests.memory",
                "no memory requested, at least one of 'spec.domain.memory.guest', 'spec.domain.memory.hugepages.size' or 'spec.domain.resources.requests.memory' must be set",
            )
        })
}

/// Sets `<memory>`, `<memoryBacking>`, `<maxMemory>`, the NUMA cell and the virtio-mem device.
pub fn apply(vmi: &VirtualMachineInstance, vcpus: u32, domain: &mut Domain) -> Result<(), ConvertError> {
    let guest = guest_bytes(vmi)?;
    if guest == 0 {
        return Err(ConvertError::invalid(
            "spec.domain.memory.guest",
            "must be greater than 0",
        ));
    }
    domain.memory = ScaledInteger::bytes(guest);
    let memory = vmi.spec.domain.memory.as_ref();
    let mut needs_numa_cell = false;
    if memory.and_then(|m| m.hugepages.as_ref()).is_some() {
        let memfd = vmi
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(annotations::MEMFD))
            .is_none_or(|v| v != "false");
        domain.memory_backing = Some(MemoryBacking {
            hugepages: Some(Hugepages::default()),
            source: memfd.then(|| TypeAttr {
                kind: "memfd".to_owned(),
            }),
            ..MemoryBacking::default()
        });
        // With NUMA passthrough the host's cells replace the single emulated one.
        let passthrough = vmi
            .spec
            .domain
            .cpu
            .as_ref()
            .and_then(|c| c.numa.as_ref())
            .is_some_and(|n| n.guest_mapping_passthrough.is_some());
        needs_numa_cell = memfd && !passthrough;
    }
    if let Some(max_guest) = memory.and_then(|m| m.max_guest.as_ref()) {
        let max = bytes("spec.domain.memory.maxGuest", max_guest)?;
        if max < guest {
            return Err(ConvertError::invalid(
                "spec.domain.memory.maxGuest",
                "must not be less than spec.domain.memory.guest",
            ));
        }
        if max > guest {
            let hotplug = (max - guest) / VIRTIO_MEM_BLOCK_BYTES * VIRTIO_MEM_BLOCK_BYTES;
            domain.max_memory = Some(MaxMemory {
                // libvirt 9.0's schema needs slots (newer upstream writes none).
                slots: Some(1),
                unit: Some("b".to_owned()),
                value: max,
            });
            domain.devices.memory.push(MemoryDevice {
                model: "virtio-mem".to_owned(),
                target: MemoryTarget {
                    size: ScaledInteger::bytes(hotplug),
                    node: Some(0),
                    block: Some(ScaledInteger::bytes(VIRTIO_MEM_BLOCK_BYTES)),
                    requested: Some(ScaledInteger::bytes(0)),
                },
            });
            needs_numa_cell = true;
        }
    }
    if needs_numa_cell {
        let cpu = domain.cpu.get_or_insert_with(Default::default);
        cpu.numa = Some(CpuNuma {
            cell: vec![NumaCell {
                id: Some(0),
                cpus: Some(if vcpus > 1 {
                    format!("0-{}", vcpus - 1)
                } else {
                    "0".to_owned()
                }),
                memory: guest / 1024,
                unit: Some("KiB".to_owned()),
                mem_access: None,
            }],
        });
    }
    Ok(())
}
