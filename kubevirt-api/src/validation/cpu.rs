//! CPU, hugepage, machine-type and architecture rules of upstream's VMI admitter.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::{Cause, CauseType, cause};
use crate::quantity::{self, ParsedQuantity};
use crate::v1::{ClusterConfig, Cpu, VirtualMachineInstanceSpec};

const CPU_FEATURE_POLICIES: [&str; 6] = ["", "force", "require", "optional", "disable", "forbid"];
const ARCHITECTURES: [&str; 3] = ["amd64", "arm64", "s390x"];

fn get<'a>(list: Option<&'a BTreeMap<String, Quantity>>, name: &str) -> Option<(&'a Quantity, ParsedQuantity)> {
    let q = list?.get(name)?;
    Some((q, quantity::parse(q).ok()?))
}

/// Upstream's `Value()` (rounded up) of a resource, 0 when unset.
fn value(list: Option<&BTreeMap<String, Quantity>>, name: &str) -> i128 {
    get(list, name).map_or(0, |(_, q)| q.ceil())
}

fn vcpus(cpu: &Cpu) -> i128 {
    i128::from(crate::guest::given_vcpus(cpu))
}

/// `*` and `?` glob matching, as Go's `filepath.Match` does for machine types.
fn glob(pattern: &[u8], text: &[u8]) -> bool {
    match (pattern.first(), text.first()) {
        (None, None) => true,
        (Some(b'*'), _) => glob(&pattern[1..], text) || (!text.is_empty() && glob(pattern, &text[1..])),
        (Some(b'?'), Some(_)) => glob(&pattern[1..], &text[1..]),
        (Some(p), Some(t)) if p == t => glob(&pattern[1..], &text[1..]),
        _ => false,
    }
}

pub(super) fn check_cpu(spec: &VirtualMachineInstanceSpec, base: &str, causes: &mut Vec<Cause>) {
    let resources = spec.domain.resources.as_ref();
    let requests = resources.and_then(|r| r.requests.as_ref());
    let limits = resources.and_then(|r| r.limits.as_ref());
    let res = |list: &str, name: &str| format!("{base}.domain.resources.{list}.{name}");
    for (list, map) in [("requests", requests), ("limits", limits)] {
        if let Some((q, parsed)) = get(map, "cpu")
            && parsed.is_negative()
        {
            let f = res(list, "cpu");
            causes.push(cause(
                CauseType::Invalid,
                f.clone(),
                format!("{f} '{}': must be greater than or equal to 0.", q.0),
            ));
        }
    }
    if let (Some((rq, r)), Some((lq, l))) = (get(requests, "cpu"), get(limits, "cpu"))
        && l.milli_ceil() > 0
        && r.milli_ceil() > l.milli_ceil()
    {
        causes.push(cause(
            CauseType::Invalid,
            res("requests", "cpu"),
            format!(
                "{} '{}' is greater than {} '{}'",
                res("requests", "cpu"),
                rq.0,
                res("limits", "cpu"),
                lq.0
            ),
        ));
    }
    let Some(cpu) = &spec.domain.cpu else { return };
    let cpu_field = |child: &str| format!("{base}.domain.cpu.{child}");
    let dedicated = cpu.dedicated_cpu_placement == Some(true);
    if dedicated {
        check_dedicated(spec, cpu, base, causes);
    }
    if cpu.isolate_emulator_thread == Some(true) && !dedicated {
        causes.push(cause(
            CauseType::Invalid,
            cpu_field("isolateEmulatorThread"),
            "IsolateEmulatorThread should be only set in combination with DedicatedCPUPlacement".to_owned(),
        ));
    }
    for (i, feature) in cpu.features.iter().enumerate() {
        let policy = feature.policy.as_deref().unwrap_or("");
        if !CPU_FEATURE_POLICIES.contains(&policy) {
            causes.push(cause(
                CauseType::NotSupported,
                cpu_field(&format!("features[{i}].policy")),
                format!(
                    "CPU feature {} uses policy {policy} that is not supported.",
                    feature.name
                ),
            ));
        }
    }
    check_numa_and_realtime(spec, cpu, base, causes);
    if let (Some(max), Some(sockets)) = (cpu.max_sockets.filter(|m| *m != 0), cpu.sockets)
        && sockets > max
    {
        causes.push(cause(
            CauseType::Invalid,
            cpu_field("sockets"),
            "Number of sockets in CPU topology is greater than the maximum sockets allowed".to_owned(),
        ));
    }
}

/// Rules 29 and 30: guest NUMA passthrough and realtime vCPUs (the NUMA gate is GA upstream, so
/// passthrough needs no gate).
fn check_numa_and_realtime(spec: &VirtualMachineInstanceSpec, cpu: &Cpu, base: &str, causes: &mut Vec<Cause>) {
    let cpu_field = |child: &str| format!("{base}.domain.cpu.{child}");
    let dedicated = cpu.dedicated_cpu_placement == Some(true);
    let passthrough = cpu.numa.as_ref().is_some_and(|n| n.guest_mapping_passthrough.is_some());
    let numa_field = cpu_field("numa.guestMappingPassthrough");
    if passthrough {
        if !dedicated {
            causes.push(cause(
                CauseType::Invalid,
                numa_field.clone(),
                format!(
                    "{} must be set to true when NUMA topology strategy is set in {numa_field}",
                    cpu_field("dedicatedCpuPlacement")
                ),
            ));
        }
        if spec.domain.memory.as_ref().and_then(|m| m.hugepages.as_ref()).is_none() {
            causes.push(cause(
                CauseType::Invalid,
                numa_field.clone(),
                format!("{base}.domain.memory.hugepages must be requested when NUMA topology strategy is set in {numa_field}"),
            ));
        }
    }
    if cpu.realtime.is_some() {
        if !dedicated {
            causes.push(cause(
                CauseType::Required,
                cpu_field("dedicatedCpuPlacement"),
                format!(
                    "{} must be set to true when {} is used",
                    cpu_field("dedicatedCpuPlacement"),
                    cpu_field("realtime")
                ),
            ));
        }
        if !passthrough {
            causes.push(cause(
                CauseType::Required,
                numa_field.clone(),
                format!("{numa_field} must be defined when {} is used", cpu_field("realtime")),
            ));
        }
    }
}

/// Rule 26: what dedicated CPU placement needs.
fn check_dedicated(spec: &VirtualMachineInstanceSpec, cpu: &Cpu, base: &str, causes: &mut Vec<Cause>) {
    let resources = spec.domain.resources.as_ref();
    let requests = resources.and_then(|r| r.requests.as_ref());
    let limits = resources.and_then(|r| r.limits.as_ref());
    let res = |list: &str, name: &str| format!("{base}.domain.resources.{list}.{name}");
    let placement = format!("{base}.domain.cpu.dedicatedCpuPlacement");
    let cores = format!("{base}.domain.cpu.cores");
    if value(limits, "memory") == 0 && value(requests, "memory") == 0 {
        causes.push(cause(
            CauseType::Invalid,
            res("limits", "memory"),
            format!(
                "{} or {} should be provided",
                res("requests", "memory"),
                res("limits", "memory")
            ),
        ));
    }
    for (list, map) in [("requests", requests), ("limits", limits)] {
        if let Some((_, q)) = get(map, "cpu")
            && q.ceil() > 0
            && q.ceil() * 1000 != q.milli_ceil()
        {
            causes.push(cause(
                CauseType::Invalid,
                res(list, "cpu"),
                format!("provided resources CPU {list} must be an interger"),
            ));
        }
    }
    let (rm, lm) = (value(requests, "memory"), value(limits, "memory"));
    if rm > 0 && lm > 0 && rm != lm {
        causes.push(cause(
            CauseType::Invalid,
            res("requests", "memory"),
            format!(
                "{} must be equal to {}",
                res("requests", "memory"),
                res("limits", "memory")
            ),
        ));
    }
    let (rc, lc, n) = (value(requests, "cpu"), value(limits, "cpu"), vcpus(cpu));
    if rc == 0 && lc == 0 && n == 0 {
        causes.push(cause(
            CauseType::Invalid,
            placement.clone(),
            format!(
                "either {} or {} or {cores} must be provided when DedicatedCPUPlacement is true ",
                res("requests", "cpu"),
                res("limits", "cpu")
            ),
        ));
    }
    if rc > 0 && lc > 0 && rc != lc {
        causes.push(cause(
            CauseType::Invalid,
            placement.clone(),
            format!(
                "{} or {} must be equal when DedicatedCPUPlacement is true ",
                res("requests", "cpu"),
                res("limits", "cpu")
            ),
        ));
    }
    if (rc > 0 || lc > 0) && n > 0 && rc != n && lc != n {
        causes.push(cause(
            CauseType::Invalid,
            placement.clone(),
            format!(
                "{} or {} must not be provided at the same time with {cores} when DedicatedCPUPlacement is true ",
                res("requests", "cpu"),
                res("limits", "cpu")
            ),
        ));
    }
    let threads = cpu.threads.unwrap_or(0);
    let arch = spec.architecture.as_deref().unwrap_or("amd64");
    if threads > 1 && arch == "arm64" {
        causes.push(cause(
            CauseType::Invalid,
            format!("{base}.architecture"),
            format!("threads must not be greater than 1 at {base}.domain.cpu.threads (got {threads}) when {base}.architecture is arm64"),
        ));
    }
    if threads > 2 {
        causes.push(cause(
            CauseType::Invalid,
            placement.clone(),
            format!("Not more than two threads must be provided at {base}.domain.cpu.threads (got {threads}) when DedicatedCPUPlacement is true"),
        ));
    }
}

/// Rule 23: the hugepage size parses, and the memory request is a multiple of it.
pub(super) fn check_hugepages(spec: &VirtualMachineInstanceSpec, base: &str, causes: &mut Vec<Cause>) {
    let Some(size) = spec.domain.memory.as_ref().and_then(|m| m.hugepages.as_ref()) else {
        return;
    };
    let size_text = size.page_size.clone().unwrap_or_default();
    let size_field = format!("{base}.domain.memory.hugepages.pageSize");
    let Ok(page) = quantity::ParsedQuantity::parse(&size_text) else {
        causes.push(cause(
            CauseType::Invalid,
            size_field.clone(),
            format!("{size_field} '{size_text}': quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"),
        ));
        return;
    };
    let requests = spec.domain.resources.as_ref().and_then(|r| r.requests.as_ref());
    let request_text = requests
        .and_then(|r| r.get("memory"))
        .map_or_else(|| "0".to_owned(), |q| q.0.clone());
    // Without a request, the guest memory is what the hugepages must hold.
    let guest = spec.domain.memory.as_ref().and_then(|m| m.guest.as_ref());
    let (memory, request_text) = match (requests.and_then(|r| r.get("memory")), guest) {
        (None, Some(guest)) => (quantity::to_bytes(guest).map_or(0, i128::from), guest.0.clone()),
        _ => (value(requests, "memory"), request_text),
    };
    let page = page.ceil();
    let field = format!("{base}.domain.resources.requests.memory");
    if memory < page {
        causes.push(cause(
            CauseType::Invalid,
            field.clone(),
            format!("{field} '{request_text}' must be equal to or larger than page size {size_field} '{size_text}'"),
        ));
    } else if page > 0 && memory % page != 0 {
        causes.push(cause(
            CauseType::Invalid,
            field.clone(),
            format!("{field} '{request_text}' is not a multiple of the page size {size_field} '{size_text}'"),
        ));
    }
}

/// Rules 35 and 56: the machine type is one the cluster emulates, the architecture one we know.
pub(super) fn check_machine_and_arch(
    spec: &VirtualMachineInstanceSpec,
    base: &str,
    config: &ClusterConfig,
    causes: &mut Vec<Cause>,
) {
    if let Some(machine) = spec
        .domain
        .machine
        .as_ref()
        .and_then(|m| m.machine_type.as_deref())
        .filter(|t| !t.is_empty())
        && !config
            .emulated_machines
            .iter()
            .any(|p| glob(p.as_bytes(), machine.as_bytes()))
    {
        let field = format!("{base}.domain.machine.type");
        causes.push(cause(
            CauseType::Invalid,
            field.clone(),
            format!(
                "{field} is not supported: {machine} (allowed values: [{}])",
                config.emulated_machines.join(" ")
            ),
        ));
    }
    let Some(arch) = spec.architecture.as_deref().filter(|a| !a.is_empty()) else {
        return;
    };
    let field = format!("{base}.architecture");
    if !ARCHITECTURES.contains(&arch) {
        causes.push(cause(
            CauseType::Invalid,
            field,
            format!("unsupported architecture: {arch}"),
        ));
    } else if arch != "amd64" && !config.is_feature_gate_enabled("MultiArchitecture") {
        causes.push(cause(
            CauseType::Required,
            field.clone(),
            format!("MultiArchitecture feature gate is not enabled in kubevirt-config, invalid entry {field}"),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::glob;

    #[test]
    fn machine_type_globs() {
        assert!(glob(b"q35*", b"q35"));
        assert!(glob(b"pc-q35*", b"pc-q35-rhel9.2.0"));
        assert!(!glob(b"q35*", b"pc-i440fx-7.2"));
        assert!(glob(b"pc-?35", b"pc-q35"));
    }
}
