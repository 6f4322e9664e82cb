//! The launcher pod's memory overhead: what virt-launcher, its libvirt daemons and QEMU need on
//! top of the guest's memory (upstream's `GetMemoryOverhead`, formerly in
//! `pkg/virt-controller/services/renderresources.go`). Pure.

use kubevirt_api::quantity;
use kubevirt_api::v1::VirtualMachineInstance;

const MI: u64 = 1024 * 1024;

/// Upstream's fixed overhead, kept so pods request what upstream's do: virt-launcher-monitor,
/// virt-launcher, virtlogd (which kubevirt-rs does not run), virtqemud and QEMU's own memory.
pub const FIXED: u64 = (25 + 100 + 25 + 40 + 30) * MI;
/// Per vCPU.
pub const PER_VCPU: u64 = 8 * MI;
/// The static IOThread.
pub const IOTHREAD: u64 = 8 * MI;
/// Video RAM, unless `autoattachGraphicsDevice: false`.
pub const VIDEO: u64 = 32 * MI;
/// Each exec probe, and once more if any exists.
pub const EXEC_PROBE: u64 = 10 * MI;
/// Once, with any exec probe.
pub const PROBE_HELPER: u64 = 100 * MI;
/// The downwardMetrics disk.
pub const DOWNWARD_METRICS: u64 = MI;
/// swtpm.
pub const TPM: u64 = 53 * MI;
/// SEV.
pub const SEV: u64 = 256 * MI;
/// Dedicated CPUs (Guaranteed QoS).
pub const DEDICATED_CPU: u64 = 100 * MI;

/// The guest's memory request: `resources.requests.memory`, else `memory.guest`.
#[must_use]
pub fn guest_memory_request(vmi: &VirtualMachineInstance) -> Option<u64> {
    let domain = &vmi.spec.domain;
    domain
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("memory"))
        .or_else(|| domain.memory.as_ref().and_then(|m| m.guest.as_ref()))
        .and_then(|q| quantity::to_bytes(q).ok())
}

/// vCPUs, as the domain has them ([`kubevirt_api::guest::vcpus`]).
#[must_use]
pub fn vcpus(vmi: &VirtualMachineInstance) -> u64 {
    u64::from(kubevirt_api::guest::vcpus(&vmi.spec))
}

/// Whether the VMI asks for dedicated CPUs.
#[must_use]
pub fn has_dedicated_cpus(vmi: &VirtualMachineInstance) -> bool {
    vmi.spec
        .domain
        .cpu
        .as_ref()
        .and_then(|c| c.dedicated_cpu_placement)
        .unwrap_or(false)
}

/// Whether the pod must be Guaranteed: dedicated CPUs, or CPU and memory requests equal to their
/// limits (upstream's `WantsToHaveQOSGuaranteed`).
#[must_use]
pub fn wants_guaranteed_qos(vmi: &VirtualMachineInstance) -> bool {
    if has_dedicated_cpus(vmi) {
        return true;
    }
    let resources = vmi.spec.domain.resources.as_ref();
    let get =
        |list: Option<&std::collections::BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
         key: &str| {
            list.and_then(|l| l.get(key))
                .and_then(|q| quantity::parse(q).ok())
                .map(quantity::ParsedQuantity::milli_ceil)
        };
    let (requests, limits) = (
        resources.and_then(|r| r.requests.as_ref()),
        resources.and_then(|r| r.limits.as_ref()),
    );
    ["memory", "cpu"].into_iter().all(|key| {
        let request = get(requests, key);
        request.is_some_and(|r| r != 0) && request == get(limits, key)
    })
}

/// The CPUs an isolated emulator thread adds (see
/// [`VirtualMachineInstance::emulator_thread_cpus`]).
#[must_use]
pub fn emulator_cpus(vmi: &VirtualMachineInstance) -> u64 {
    vmi.emulator_thread_cpus(vcpus(vmi))
}

/// The overhead in bytes, multiplied by the cluster's `additionalGuestMemoryOverheadRatio`.
#[must_use]
pub fn memory_overhead(vmi: &VirtualMachineInstance, ratio: Option<f64>) -> u64 {
    let domain = &vmi.spec.domain;
    let devices = &domain.devices;
    // Page tables: one byte per 512 of guest memory, on the kilo-rounded request as upstream.
    let page_tables = guest_memory_request(vmi).map_or(0, |bytes| bytes.div_ceil(1000) * 1000 / 512);
    let mut total = page_tables + FIXED + PER_VCPU * vcpus(vmi) + IOTHREAD;
    if devices.autoattach_graphics_device != Some(false) {
        total += VIDEO;
    }
    if vmi.spec.volumes.iter().any(|v| v.downward_metrics.is_some()) {
        total += DOWNWARD_METRICS;
    }
    let exec_probes = [&vmi.spec.liveness_probe, &vmi.spec.readiness_probe]
        .into_iter()
        .filter(|p| p.as_ref().is_some_and(|p| p.exec.is_some()))
        .count() as u64;
    if exec_probes > 0 {
        total += EXEC_PROBE * exec_probes + PROBE_HELPER;
    }
    if devices.tpm.is_some() {
        total += TPM;
    }
    if domain.launch_security.as_ref().is_some_and(|l| l.sev.is_some()) {
        total += SEV;
    }
    if wants_guaranteed_qos(vmi) {
        total += DEDICATED_CPU;
    }
    match ratio {
        Some(ratio) if ratio.is_finite() && ratio > 0.0 => {
            #[allow(
                clippy::cast_precision_loss,
                clippy::cast_possible_truncation,
                clippy::cast_sign_loss,
                reason = "overheads are far below 2^53 bytes"
            )]
            let scaled = (total as f64 * ratio) as u64;
            scaled
        }
        _ => total,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vmi(spec: &serde_json::Value) -> VirtualMachineInstance {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
            "metadata": {"name": "vm"}, "spec": spec
        }))
        .expect("vmi")
    }

    #[test]
    fn upstreams_worked_example_is_280_mi() {
        // amd64, 2 Gi guest, 2 cores, graphics on, nothing else: 4 Mi page tables
        // + 220 Mi fixed + 16 Mi vCPUs + 8 Mi IOThread + 32 Mi video.
        let example = vmi(&serde_json::json!({"domain": {
            "cpu": {"cores": 2},
            "resources": {"requests": {"memory": "2Gi"}},
            "devices": {}
        }}));
        let page_tables = 2_147_484_000 / 512;
        assert_eq!(memory_overhead(&example, None), page_tables + 276 * MI);
        assert_eq!((memory_overhead(&example, None) + MI / 2) / MI, 280);
    }

    #[test]
    fn each_term_counts_once_and_the_ratio_scales_the_total() {
        let bare = vmi(&serde_json::json!({"domain": {
            "memory": {"guest": "1Gi"},
            "devices": {"autoattachGraphicsDevice": false}
        }}));
        let plain = memory_overhead(&bare, None);
        assert_eq!(plain, 1_073_742_000 / 512 + FIXED + PER_VCPU + IOTHREAD);
        let with_extras = vmi(&serde_json::json!({
            "domain": {
                "memory": {"guest": "1Gi"},
                "cpu": {"dedicatedCpuPlacement": true},
                "devices": {"autoattachGraphicsDevice": false, "tpm": {}}
            },
            "livenessProbe": {"exec": {"command": ["true"]}},
            "readinessProbe": {"exec": {"command": ["true"]}}
        }));
        assert_eq!(
            memory_overhead(&with_extras, None),
            plain + TPM + DEDICATED_CPU + 2 * EXEC_PROBE + PROBE_HELPER
        );
        assert_eq!(memory_overhead(&bare, Some(2.0)), plain * 2);
    }

    #[test]
    fn vcpus_come_from_the_topology_then_the_cpu_limit_then_the_request() {
        let topology =
            vmi(&serde_json::json!({"domain": {"cpu": {"sockets": 2, "cores": 2, "threads": 2}, "devices": {}}}));
        assert_eq!(vcpus(&topology), 8);
        let limit = vmi(
            &serde_json::json!({"domain": {"resources": {"limits": {"cpu": "3"}, "requests": {"cpu": "1"}}, "devices": {}}}),
        );
        assert_eq!(vcpus(&limit), 3);
        let request = vmi(&serde_json::json!({"domain": {"resources": {"requests": {"cpu": "1500m"}}, "devices": {}}}));
        assert_eq!(vcpus(&request), 2);
        assert_eq!(vcpus(&vmi(&serde_json::json!({"domain": {"devices": {}}}))), 1);
    }

    #[test]
    fn an_isolated_emulator_adds_one_cpu_or_two_for_even_parity() {
        let with = |cores: u32, isolate: bool, parity: bool| {
            let mut value = serde_json::json!({
                "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
                "metadata": {"name": "vm"},
                "spec": {"domain": {"cpu": {"cores": cores, "dedicatedCpuPlacement": true, "isolateEmulatorThread": isolate}, "devices": {}}}
            });
            if parity {
                value["metadata"]["annotations"] =
                    serde_json::json!({"alpha.kubevirt.io/EmulatorThreadCompleteToEvenParity": ""});
            }
            let vmi: VirtualMachineInstance = serde_json::from_value(value).expect("vmi");
            vcpus(&vmi) + emulator_cpus(&vmi)
        };
        assert_eq!(with(2, true, false), 3, "upstream's template test: cores 2 + emulator");
        assert_eq!(with(2, false, true), 2, "no isolation, no emulator CPU");
        assert_eq!(with(5, true, true), 6, "odd vCPUs: one emulator CPU");
        assert_eq!(with(6, true, true), 8, "even vCPUs with parity: two");
    }

    #[test]
    fn equal_cpu_and_memory_requests_and_limits_want_a_guaranteed_pod() {
        let resources = |requests: serde_json::Value, limits: serde_json::Value| {
            wants_guaranteed_qos(&vmi(&serde_json::json!({"domain": {
                "resources": {"requests": requests, "limits": limits}, "devices": {}
            }})))
        };
        let both = serde_json::json!({"cpu": "1", "memory": "1Gi"});
        assert!(resources(
            both.clone(),
            serde_json::json!({"cpu": "1000m", "memory": "1024Mi"})
        ));
        assert!(!resources(
            both.clone(),
            serde_json::json!({"cpu": "2", "memory": "1Gi"})
        ));
        assert!(!resources(
            serde_json::json!({"memory": "1Gi"}),
            serde_json::json!({"memory": "1Gi"})
        ));
        assert!(wants_guaranteed_qos(&vmi(&serde_json::json!({"domain": {
            "cpu": {"dedicatedCpuPlacement": true}, "devices": {}
        }}))));
    }
}
