//! Guest NUMA passthrough (`spec.domain.cpu.numa.guestMappingPassthrough`): one guest cell per
//! host cell that received vCPUs, its memory split evenly in hugepages and bound strictly to that
//! host cell, as upstream maps it after pinning.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kubevirt_api::quantity;
use kubevirt_api::v1::VirtualMachineInstance;

use super::placement::HostCpus;
use super::{ConvertError, memory};
use crate::model::{
    Allocation, CpuNuma, Domain, Empty, HugePage, MemNode, NumaCell, NumaTune, NumaTuneMemory, VcpuPin,
};

const FIELD: &str = "spec.domain.cpu.numa.guestMappingPassthrough";

fn invalid(message: impl Into<String>) -> ConvertError {
    ConvertError::invalid(FIELD, message)
}

/// Replaces the guest's NUMA layout with the host cells behind `pins`.
pub fn pass_through(
    vmi: &VirtualMachineInstance,
    host: &HostCpus,
    pins: &[VcpuPin],
    realtime: bool,
    domain: &mut Domain,
) -> Result<(), ConvertError> {
    if host.cells.is_empty() {
        return Ok(());
    }
    let cell_of: BTreeMap<u32, u32> = host
        .cells
        .iter()
        .flat_map(|cell| cell.cpus.iter().map(move |cpu| (cpu.id, cell.id)))
        .collect();
    let mut vcpus_of_cell: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    for pin in pins {
        let cpu: u32 = pin.cpuset.parse().map_err(|_| {
            invalid(format!(
                "failed to generate numa pinning information: expected only full cpu to be mapped, but got {}: {}",
                pin.vcpu, pin.cpuset
            ))
        })?;
        let cell = cell_of.get(&cpu).ok_or_else(|| {
            invalid(format!(
                "failed to generate numa pinning information: vcpu {} is mapped to a not existing host cpu set {cpu}",
                pin.vcpu
            ))
        })?;
        vcpus_of_cell.entry(*cell).or_default().push(pin.vcpu);
    }
    // Host cells that got vCPUs, in the host's order.
    let involved: Vec<(u32, &Vec<u32>)> = host
        .cells
        .iter()
        .filter_map(|cell| vcpus_of_cell.get(&cell.id).map(|v| (cell.id, v)))
        .collect();
    let page_size = page_bytes(vmi, domain)?;
    let guest = memory::guest_bytes(vmi)?;
    let cells = u64::try_from(involved.len()).unwrap_or(u64::MAX).max(1);
    if guest < cells.saturating_mul(page_size) {
        return Err(invalid(format!(
            "not enough memory requested to allocate at least one hugepage per numa node: {guest} < {}",
            cells.saturating_mul(page_size)
        )));
    }
    if !guest.is_multiple_of(page_size) {
        return Err(invalid(format!(
            "requested memory can't be divided through the numa page size: {guest} mod {page_size} != 0"
        )));
    }
    // Whole pages per cell; the first cells take one more page each while pages are left.
    let pages = guest / page_size;
    let extra = pages % cells;
    let per_cell = pages / cells;
    let joined = |ids: &mut dyn Iterator<Item = String>| ids.collect::<Vec<_>>().join(",");
    let mut numa = CpuNuma::default();
    let mut tune = NumaTune {
        memory: Some(NumaTuneMemory {
            mode: "strict".to_owned(),
            nodeset: joined(&mut involved.iter().map(|(id, _)| id.to_string())),
        }),
        memnode: Vec::new(),
    };
    let backing = domain.memory_backing.get_or_insert_with(Default::default);
    let hugepages = backing.hugepages.get_or_insert_with(Default::default);
    for ((host_cell, vcpus), guest_cell) in involved.iter().zip(0u32..) {
        let cell_pages = per_cell + u64::from(u64::from(guest_cell) < extra);
        numa.cell.push(NumaCell {
            id: Some(guest_cell),
            cpus: Some(joined(&mut vcpus.iter().map(u32::to_string))),
            memory: cell_pages * page_size,
            unit: Some("b".to_owned()),
            mem_access: None,
        });
        tune.memnode.push(MemNode {
            cellid: guest_cell,
            mode: "strict".to_owned(),
            nodeset: host_cell.to_string(),
        });
        hugepages.page.push(HugePage {
            size: page_size,
            unit: Some("b".to_owned()),
            nodeset: Some(guest_cell.to_string()),
        });
    }
    backing.allocation = Some(Allocation {
        mode: "immediate".to_owned(),
    });
    if realtime {
        backing.nosharepages = Some(Empty {});
    }
    domain.cpu.get_or_insert_with(Default::default).numa = Some(numa);
    domain.numatune = Some(tune);
    Ok(())
}

/// The hugepage size in bytes; passthrough needs hugepages.
fn page_bytes(vmi: &VirtualMachineInstance, domain: &Domain) -> Result<u64, ConvertError> {
    let size = vmi
        .spec
        .domain
        .memory
        .as_ref()
        .and_then(|m| m.hugepages.as_ref())
        .filter(|_| domain.memory_backing.as_ref().is_some_and(|b| b.hugepages.is_some()))
        .ok_or_else(|| invalid("passing through a numa topology is restricted to VMIs with hugepages enabled"))?
        .page_size
        .clone()
        .unwrap_or_default();
    let bytes = quantity::to_bytes(&Quantity(size.clone())).map_err(|e| {
        invalid(format!(
            "failed to determine if hugepages are enabled: could not parse hugepage value {size}: {e}"
        ))
    })?;
    if bytes == 0 {
        return Err(invalid(format!(
            "failed to determine if hugepages are enabled: could not parse hugepage value {size}"
        )));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::convert::placement::{HostCell, HostCpu};

    fn vmi(memory: &str, hugepages: bool) -> VirtualMachineInstance {
        let mut memory_spec = serde_json::json!({"guest": memory});
        if hugepages {
            memory_spec["hugepages"] = serde_json::json!({"pageSize": "2Mi"});
        }
        serde_json::from_value(serde_json::json!({
            "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
            "metadata": {"name": "numa"},
            "spec": {"domain": {"devices": {}, "memory": memory_spec}}
        }))
        .expect("VMI")
    }

    fn host(cells: &[(u32, &[u32])]) -> HostCpus {
        HostCpus {
            cpuset: cells.iter().flat_map(|(_, cpus)| cpus.iter().copied()).collect(),
            cells: cells
                .iter()
                .map(|(id, cpus)| HostCell {
                    id: *id,
                    cpus: cpus
                        .iter()
                        .map(|&id| HostCpu {
                            id,
                            siblings: Vec::new(),
                        })
                        .collect(),
                })
                .collect(),
        }
    }

    fn pins(pairs: &[(u32, u32)]) -> Vec<VcpuPin> {
        pairs
            .iter()
            .map(|&(vcpu, cpu)| VcpuPin {
                vcpu,
                cpuset: cpu.to_string(),
            })
            .collect()
    }

    fn hugepage_domain() -> Domain {
        Domain {
            memory_backing: Some(crate::model::MemoryBacking {
                hugepages: Some(crate::model::Hugepages::default()),
                ..Default::default()
            }),
            ..Domain::default()
        }
    }

    #[test]
    fn each_host_cell_with_vcpus_becomes_a_guest_cell_with_its_share_of_pages() {
        let mut domain = hugepage_domain();
        let host = host(&[(0, &[10, 20]), (4, &[30, 50])]);
        pass_through(
            &vmi("64Mi", true),
            &host,
            &pins(&[(0, 10), (1, 20), (3, 30)]),
            false,
            &mut domain,
        )
        .expect("mapped");
        let cells: Vec<(Option<u32>, Option<String>, u64)> = domain
            .cpu
            .expect("cpu")
            .numa
            .expect("numa")
            .cell
            .into_iter()
            .map(|c| (c.id, c.cpus, c.memory))
            .collect();
        let half = 32 * 1024 * 1024;
        assert_eq!(
            cells,
            [
                (Some(0), Some("0,1".to_owned()), half),
                (Some(1), Some("3".to_owned()), half)
            ]
        );
        let tune = domain.numatune.expect("numatune");
        assert_eq!(tune.memory.expect("memory").nodeset, "0,4");
        let memnodes: Vec<(u32, String)> = tune.memnode.into_iter().map(|m| (m.cellid, m.nodeset)).collect();
        assert_eq!(memnodes, [(0, "0".to_owned()), (1, "4".to_owned())]);
        let backing = domain.memory_backing.expect("backing");
        let pages: Vec<(u64, Option<String>)> = backing
            .hugepages
            .expect("hugepages")
            .page
            .into_iter()
            .map(|p| (p.size, p.nodeset))
            .collect();
        assert_eq!(
            pages,
            [(2_097_152, Some("0".to_owned())), (2_097_152, Some("1".to_owned()))]
        );
        assert_eq!(backing.allocation.expect("allocation").mode, "immediate");
        assert!(backing.nosharepages.is_none(), "not realtime");
    }

    #[test]
    fn leftover_pages_go_to_the_first_cells_and_realtime_shares_no_pages() {
        let mut domain = hugepage_domain();
        let host = host(&[(0, &[10, 20]), (4, &[30, 50]), (5, &[40])]);
        pass_through(
            &vmi("64Mi", true),
            &host,
            &pins(&[(0, 10), (1, 20), (3, 30), (4, 40)]),
            true,
            &mut domain,
        )
        .expect("mapped");
        let mib: Vec<u64> = domain
            .cpu
            .expect("cpu")
            .numa
            .expect("numa")
            .cell
            .iter()
            .map(|c| c.memory >> 20)
            .collect();
        assert_eq!(mib, [22, 22, 20]);
        assert_eq!(
            domain.numatune.expect("numatune").memory.expect("memory").nodeset,
            "0,4,5"
        );
        assert!(domain.memory_backing.expect("backing").nosharepages.is_some());
    }

    #[test]
    fn passthrough_needs_hugepages_enough_memory_and_known_cpus() {
        let host = host(&[(0, &[10]), (1, &[20])]);
        let two_cells = pins(&[(0, 10), (1, 20)]);
        let message = |vmi: &VirtualMachineInstance, pins: &[VcpuPin], domain: &mut Domain| {
            pass_through(vmi, &host, pins, false, domain)
                .expect_err("refused")
                .to_string()
        };
        assert!(
            message(&vmi("64Mi", false), &two_cells, &mut Domain::default())
                .contains("passing through a numa topology is restricted to VMIs with hugepages enabled")
        );
        assert!(
            message(&vmi("2Mi", true), &two_cells, &mut hugepage_domain())
                .contains("not enough memory requested to allocate at least one hugepage per numa node")
        );
        assert!(
            message(&vmi("64Mi", true), &pins(&[(0, 99)]), &mut hugepage_domain())
                .contains("vcpu 0 is mapped to a not existing host cpu set 99")
        );
        let mut unchanged = hugepage_domain();
        pass_through(
            &vmi("64Mi", true),
            &HostCpus::default(),
            &two_cells,
            false,
            &mut unchanged,
        )
        .expect("no host layout: nothing to map");
        assert_eq!(unchanged, hugepage_domain());
    }
}
