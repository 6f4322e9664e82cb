//! Resource defaults: requests from limits, the memory request from guest memory (with the
//! cluster's memory overcommit), guest memory from the request, and the CPU topology from the CPU
//! request.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kubevirt_api::quantity;
use kubevirt_api::v1::{ClusterConfig, Cpu, Memory, ResourceRequirements, VirtualMachineInstanceSpec};

/// Upstream's `DefaultCPURequest`: a cluster `cpuRequest` equal to it changes nothing.
const DEFAULT_CPU_REQUEST_MILLIS: i128 = 100;

fn is_nonzero(q: Option<&Quantity>) -> bool {
    q.and_then(|q| quantity::parse(q).ok())
        .is_some_and(|p| p.milli_ceil() != 0)
}

/// Requests copied from limits; the memory request from guest memory or the hugepage size,
/// scaled by `100 / memoryOvercommit`; the cluster's CPU request when it is not upstream's default.
pub fn set_default_resource_requests(spec: &mut VirtualMachineInstanceSpec, config: &ClusterConfig) {
    let memory = spec.domain.memory.clone();
    let dedicated = spec.domain.cpu.as_ref().and_then(|c| c.dedicated_cpu_placement) == Some(true);
    let resources = spec.domain.resources.get_or_insert_with(ResourceRequirements::default);
    let limits = resources.limits.clone().unwrap_or_default();
    let requests = resources.requests.get_or_insert_with(Default::default);
    for name in ["cpu", "memory"] {
        if is_nonzero(limits.get(name))
            && !is_nonzero(requests.get(name))
            && let Some(limit) = limits.get(name)
        {
            requests.insert(name.to_owned(), limit.clone());
        }
    }
    if !requests.contains_key("memory") {
        let from_guest = memory.as_ref().and_then(|m| m.guest.clone());
        let from_hugepages = || {
            memory
                .as_ref()
                .and_then(|m| m.hugepages.as_ref())
                .and_then(|h| h.page_size.clone())
                .map(Quantity)
                .filter(|q| quantity::parse(q).is_ok())
        };
        if let Some(guest) = from_guest.or_else(from_hugepages)
            && let Ok(bytes) = quantity::parse(&guest).map(quantity::ParsedQuantity::ceil)
            && bytes > 0
        {
            let request = if config.memory_overcommit == 100 || config.memory_overcommit == 0 {
                guest
            } else {
                let scaled = bytes * 100 / i128::from(config.memory_overcommit);
                Quantity(kubevirt_api::quantity::format(
                    scaled,
                    kubevirt_api::quantity::is_binary(&guest),
                ))
            };
            requests.insert("memory".to_owned(), request);
        }
    }
    if let Some(cpu_request) = &config.cpu_request
        && quantity::parse(cpu_request)
            .map(quantity::ParsedQuantity::milli_ceil)
            .ok()
            != Some(DEFAULT_CPU_REQUEST_MILLIS)
        && !requests.contains_key("cpu")
        && !dedicated
    {
        requests.insert("cpu".to_owned(), cpu_request.clone());
    }
    if requests.is_empty() {
        resources.requests = None;
    }
    if resources == &ResourceRequirements::default() {
        spec.domain.resources = None;
    }
}

/// `memory.guest` from the memory request, else the limit, else the hugepage size
/// ([`kubevirt_api::guest::memory_source`]).
pub fn set_guest_memory(spec: &mut VirtualMachineInstanceSpec) {
    let source = kubevirt_api::guest::memory_source(spec);
    let memory = spec.domain.memory.get_or_insert_with(Memory::default);
    if memory.guest.is_none() {
        memory.guest = source.map(|s| s.quantity);
    }
}

/// With no topology given: one core and one thread per socket, and as many sockets as the CPU
/// limit (else the CPU request) rounded up, or one.
pub fn set_default_cpu_topology(spec: &mut VirtualMachineInstanceSpec) {
    if spec
        .domain
        .cpu
        .as_ref()
        .is_some_and(|c| kubevirt_api::guest::given_vcpus(c) > 0)
    {
        return;
    }
    let sockets = kubevirt_api::guest::cpu_topology(spec).map_or(1, |t| t.sockets);
    let cpu = spec.domain.cpu.get_or_insert_with(Cpu::default);
    cpu.sockets = Some(sockets);
    cpu.cores = Some(1);
    cpu.threads = Some(1);
}
