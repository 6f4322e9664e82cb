//! What a VMI's guest gets, each derived in one place with upstream's rules: its vCPUs, its
//! memory and its hostname. virt-api's defaulting, the launcher pod's resources and overhead, the
//! domain, the pod network's DHCP and cloud-init all read them here, so they cannot disagree about
//! one VMI (a test over generated VMIs checks that they do not).

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::quantity::{self, ParsedQuantity};
use crate::v1::{Cpu, VirtualMachineInstance, VirtualMachineInstanceSpec};

/// The longest DNS-1123 label, and so the longest hostname.
pub const HOSTNAME_MAX_LEN: usize = 63;

/// A quantity the guest's shape is read from cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct GuestFieldError {
    /// The field path, e.g. `spec.domain.resources.limits.cpu`.
    pub field: String,
    /// Why.
    pub message: String,
}

/// The guest CPU topology, before CPU hotplug's `maxSockets`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuTopology {
    /// Sockets.
    pub sockets: u32,
    /// Cores per socket.
    pub cores: u32,
    /// Threads per core.
    pub threads: u32,
}

impl CpuTopology {
    /// The vCPUs it has.
    #[must_use]
    pub fn vcpus(&self) -> u32 {
        self.sockets.saturating_mul(self.cores).saturating_mul(self.threads)
    }
}

/// The vCPUs `cpu`'s topology gives, a zero count standing for one not given; zero when it gives
/// none (upstream's `GetNumberOfVCPUs`, which the admission rules use).
#[must_use]
pub fn given_vcpus(cpu: &Cpu) -> u32 {
    [cpu.sockets, cpu.cores, cpu.threads]
        .into_iter()
        .filter_map(|n| n.filter(|n| *n > 0))
        .fold(
            0,
            |product: u32, n| if product == 0 { n } else { product.saturating_mul(n) },
        )
}

/// Upstream's `GetCPUTopology`: the topology `spec.domain.cpu` gives (a zero count is one not
/// given, and counts 1); with none given, as many one-core sockets as the CPU limit, else the CPU
/// request, rounded up, and at least one.
///
/// # Errors
/// The CPU limit or request it reads is not a quantity, or is negative.
pub fn cpu_topology(spec: &VirtualMachineInstanceSpec) -> Result<CpuTopology, GuestFieldError> {
    let cpu = spec.domain.cpu.as_ref();
    if let Some(cpu) = cpu.filter(|c| given_vcpus(c) > 0) {
        let count = |n: Option<u32>| n.filter(|n| *n > 0).unwrap_or(1);
        return Ok(CpuTopology {
            sockets: count(cpu.sockets),
            cores: count(cpu.cores),
            threads: count(cpu.threads),
        });
    }
    let resources = spec.domain.resources.as_ref();
    let mut sockets = 1;
    for (kind, list) in [
        ("limits", resources.and_then(|r| r.limits.as_ref())),
        ("requests", resources.and_then(|r| r.requests.as_ref())),
    ] {
        if let Some(cpus) = list.and_then(|l| l.get("cpu")) {
            let field = format!("spec.domain.resources.{kind}.cpu");
            let parsed = parse(&field, cpus)?;
            if parsed.is_negative() {
                return Err(GuestFieldError {
                    field,
                    message: "must be greater than or equal to 0".to_owned(),
                });
            }
            sockets = u32::try_from(parsed.ceil()).unwrap_or(u32::MAX).max(1);
            break;
        }
    }
    Ok(CpuTopology {
        sockets,
        cores: 1,
        threads: 1,
    })
}

/// The guest's vCPUs ([`cpu_topology`]); one when the resources it would read are unreadable,
/// which admission refuses and the domain's conversion reports.
#[must_use]
pub fn vcpus(spec: &VirtualMachineInstanceSpec) -> u32 {
    cpu_topology(spec).map_or(1, |t| t.vcpus())
}

/// Where the guest's memory comes from, and how much.
#[derive(Clone, Debug, PartialEq)]
pub struct GuestMemory {
    /// The field it was read from.
    pub field: &'static str,
    /// The quantity.
    pub quantity: Quantity,
}

/// Upstream's guest memory: `memory.guest` when given; else the memory request, else the memory
/// limit, each only when not zero; else the hugepage size when it is a quantity. `None` when
/// nothing gives it.
#[must_use]
pub fn memory_source(spec: &VirtualMachineInstanceSpec) -> Option<GuestMemory> {
    let memory = spec.domain.memory.as_ref();
    if let Some(guest) = memory.and_then(|m| m.guest.as_ref()) {
        return Some(GuestMemory {
            field: "spec.domain.memory.guest",
            quantity: guest.clone(),
        });
    }
    let resources = spec.domain.resources.as_ref();
    let nonzero = |field: &'static str, list: Option<&std::collections::BTreeMap<String, Quantity>>| {
        list.and_then(|l| l.get("memory"))
            .filter(|q| quantity::parse(q).is_ok_and(|p| p.ceil() != 0))
            .map(|q| GuestMemory {
                field,
                quantity: q.clone(),
            })
    };
    nonzero(
        "spec.domain.resources.requests.memory",
        resources.and_then(|r| r.requests.as_ref()),
    )
    .or_else(|| {
        nonzero(
            "spec.domain.resources.limits.memory",
            resources.and_then(|r| r.limits.as_ref()),
        )
    })
    .or_else(|| {
        memory
            .and_then(|m| m.hugepages.as_ref())
            .and_then(|h| h.page_size.clone())
            .map(Quantity)
            .filter(|q| quantity::parse(q).is_ok())
            .map(|quantity| GuestMemory {
                field: "spec.domain.memory.hugepages.pageSize",
                quantity,
            })
    })
}

/// The guest's memory in bytes ([`memory_source`]), `None` when nothing gives it.
///
/// # Errors
/// The quantity it comes from is not a number of bytes.
pub fn memory_bytes(spec: &VirtualMachineInstanceSpec) -> Result<Option<u64>, GuestFieldError> {
    memory_source(spec)
        .map(|memory| {
            quantity::to_bytes(&memory.quantity).map_err(|e| GuestFieldError {
                field: memory.field.to_owned(),
                message: e.to_string(),
            })
        })
        .transpose()
}

/// Upstream's `SanitizeHostname`: `spec.hostname` when given (admission checked it is a DNS
/// label); else the VMI's name up to its first dot, at most 63 characters. The pod's hostname, the
/// DHCP hostname and cloud-init's `local-hostname` are all this.
#[must_use]
pub fn hostname(vmi: &VirtualMachineInstance) -> String {
    if let Some(hostname) = vmi.spec.hostname.as_ref().filter(|h| !h.is_empty()) {
        return hostname.clone();
    }
    let name = vmi.metadata.name.as_deref().unwrap_or_default();
    name.split('.')
        .next()
        .unwrap_or_default()
        .chars()
        .take(HOSTNAME_MAX_LEN)
        .collect()
}

fn parse(field: &str, q: &Quantity) -> Result<ParsedQuantity, GuestFieldError> {
    quantity::parse(q).map_err(|e| GuestFieldError {
        field: field.to_owned(),
        message: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(json: serde_json::Value) -> VirtualMachineInstanceSpec {
        serde_json::from_value(json).expect("spec")
    }

    #[test]
    fn a_given_topology_wins_and_zero_counts_are_not_given() {
        let topology = |cpu: serde_json::Value| {
            cpu_topology(&spec(serde_json::json!({
                "domain": {"devices": {}, "cpu": cpu, "resources": {"limits": {"cpu": "3"}}}
            })))
            .expect("topology")
        };
        assert_eq!(topology(serde_json::json!({"cores": 2, "threads": 2})).vcpus(), 4);
        assert_eq!(
            topology(serde_json::json!({"sockets": 0, "cores": 2})),
            CpuTopology {
                sockets: 1,
                cores: 2,
                threads: 1
            }
        );
        // Every count zero: nothing is given, so the limit decides.
        assert_eq!(topology(serde_json::json!({"sockets": 0})).sockets, 3);
        assert_eq!(topology(serde_json::json!({})).vcpus(), 3);
    }

    #[test]
    fn without_a_topology_the_limit_then_the_request_gives_sockets() {
        let vcpus_of = |resources: serde_json::Value| {
            cpu_topology(&spec(
                serde_json::json!({"domain": {"devices": {}, "resources": resources}}),
            ))
        };
        assert_eq!(
            vcpus_of(serde_json::json!({"requests": {"cpu": "2"}, "limits": {"cpu": "3"}})).map(|t| t.vcpus()),
            Ok(3)
        );
        assert_eq!(
            vcpus_of(serde_json::json!({"requests": {"cpu": "1500m"}})).map(|t| t.vcpus()),
            Ok(2)
        );
        assert_eq!(
            vcpus_of(serde_json::json!({"limits": {"cpu": "0"}})).map(|t| t.vcpus()),
            Ok(1)
        );
        assert_eq!(vcpus_of(serde_json::json!({})).map(|t| t.vcpus()), Ok(1));
        assert_eq!(
            vcpus_of(serde_json::json!({"limits": {"cpu": "lots"}})).map_err(|e| e.field),
            Err("spec.domain.resources.limits.cpu".to_owned())
        );
    }

    #[test]
    fn given_vcpus_is_zero_without_a_topology() {
        let cpu = |json: serde_json::Value| -> Cpu { serde_json::from_value(json).expect("cpu") };
        assert_eq!(given_vcpus(&cpu(serde_json::json!({}))), 0);
        assert_eq!(given_vcpus(&cpu(serde_json::json!({"sockets": 0, "threads": 0}))), 0);
        assert_eq!(
            given_vcpus(&cpu(serde_json::json!({"sockets": 2, "cores": 0, "threads": 3}))),
            6
        );
    }

    #[test]
    fn guest_memory_skips_zero_requests_and_limits() {
        let source = |json: serde_json::Value| memory_source(&spec(json)).map(|m| (m.field, m.quantity.0));
        assert_eq!(
            source(serde_json::json!({"domain": {"devices": {}, "memory": {"guest": "1Gi"},
                                      "resources": {"requests": {"memory": "2Gi"}}}})),
            Some(("spec.domain.memory.guest", "1Gi".to_owned()))
        );
        assert_eq!(
            source(serde_json::json!({"domain": {"devices": {},
                "resources": {"requests": {"memory": "0"}, "limits": {"memory": "512Mi"}}}})),
            Some(("spec.domain.resources.limits.memory", "512Mi".to_owned()))
        );
        assert_eq!(
            source(
                serde_json::json!({"domain": {"devices": {}, "memory": {"hugepages": {"pageSize": "2Mi"}},
                "resources": {"requests": {"memory": "0"}}}})
            ),
            Some(("spec.domain.memory.hugepages.pageSize", "2Mi".to_owned()))
        );
        assert_eq!(source(serde_json::json!({"domain": {"devices": {}}})), None);
    }

    #[test]
    fn the_hostname_is_the_given_one_else_the_first_label_of_the_name() {
        let vmi = |name: &str, hostname: Option<&str>| -> VirtualMachineInstance {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": name},
                "spec": {"domain": {"devices": {}}, "hostname": hostname}
            }))
            .expect("vmi")
        };
        assert_eq!(hostname(&vmi("web.prod.example", None)), "web");
        assert_eq!(hostname(&vmi("web.prod", Some("db"))), "db");
        assert_eq!(hostname(&vmi(&"a".repeat(70), None)), "a".repeat(63));
    }
}
