//! `/metrics`: upstream's `kubevirt_vmi_*` series. Phase counts come from the handler's VMIs;
//! per-VMI series from each launcher's `GetDomainStats`, asked at scrape time (a few at once).
//! Building the text from gathered data is pure.

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use cmd_protocol::stats::DomainStats;
use futures::StreamExt as _;
use kubevirt_api::v1::{VirtualMachineInstance, VirtualMachineInstancePhase as Phase};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::clock::Clock;
use crate::cluster_api::ClusterApi;
use crate::launchers::Launchers;
use crate::reconciler::Reconciler;

/// Labels of `kubevirt_vmi_phase_count`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PhaseLabels {
    node: String,
    phase: String,
    os: String,
    workload: String,
    flavor: String,
    instance_type: String,
    preference: String,
}

/// Labels of per-VMI series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VmiLabels {
    node: String,
    namespace: String,
    name: String,
}

/// Labels of per-vCPU series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VcpuLabels {
    node: String,
    namespace: String,
    name: String,
    id: String,
    state: String,
}

/// Labels of per-vCPU delay.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VcpuDelayLabels {
    node: String,
    namespace: String,
    name: String,
    id: String,
}

/// Labels of per-disk series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DriveLabels {
    node: String,
    namespace: String,
    name: String,
    drive: String,
}

/// Labels of per-interface series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct InterfaceLabels {
    node: String,
    namespace: String,
    name: String,
    interface: String,
}

type FloatCounter = Counter<f64, AtomicU64>;

/// The annotation values upstream's phase count is labelled with ("<none>" when absent).
fn annotation(vmi: &VirtualMachineInstance, key: &str) -> String {
    vmi.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .cloned()
        .unwrap_or_else(|| "<none>".to_owned())
}

fn u64_to_f64(value: u64) -> f64 {
    // Counters above 2^53 lose precision in Prometheus anyway.
    #[allow(clippy::cast_precision_loss, reason = "Prometheus samples are f64")]
    let value = value as f64;
    value
}

fn gauge(registry: &mut Registry, name: &str, help: &str) -> Family<VmiLabels, Gauge<f64, AtomicU64>> {
    let family = Family::<VmiLabels, Gauge<f64, AtomicU64>>::default();
    registry.register(name, help, family.clone());
    family
}

fn counter<L>(registry: &mut Registry, name: &str, help: &str) -> Family<L, FloatCounter>
where
    L: Clone + std::hash::Hash + Eq + EncodeLabelSet + std::fmt::Debug + Send + Sync + 'static,
{
    let family = Family::<L, FloatCounter>::default();
    registry.register(name, help, family.clone());
    family
}

/// The per-VMI families of one scrape.
struct VmiFamilies {
    cpu: Family<VmiLabels, FloatCounter>,
    vcpu_time: Family<VcpuLabels, FloatCounter>,
    vcpu_delay: Family<VcpuDelayLabels, FloatCounter>,
    memory: [Family<VmiLabels, Gauge<f64, AtomicU64>>; 8],
    faults: [Family<VmiLabels, FloatCounter>; 2],
    storage: [Family<DriveLabels, FloatCounter>; 4],
    network: [Family<InterfaceLabels, FloatCounter>; 8],
}

impl VmiFamilies {
    fn register(registry: &mut Registry) -> Self {
        Self {
            cpu: counter(
                registry,
                "kubevirt_vmi_cpu_usage_seconds",
                "Total CPU time spent in all modes by the guest.",
            ),
            vcpu_time: counter(registry, "kubevirt_vmi_vcpu_seconds", "Time each vCPU ran."),
            vcpu_delay: counter(
                registry,
                "kubevirt_vmi_vcpu_delay_seconds",
                "Time each vCPU was ready to run but waited for a host CPU.",
            ),
            memory: [
                ("kubevirt_vmi_memory_available_bytes", "Memory the guest can use."),
                (
                    "kubevirt_vmi_memory_usable_bytes",
                    "Memory the guest could use without swapping.",
                ),
                ("kubevirt_vmi_memory_unused_bytes", "Memory the guest leaves unused."),
                ("kubevirt_vmi_memory_cached_bytes", "Guest page cache."),
                (
                    "kubevirt_vmi_memory_resident_bytes",
                    "Resident memory of the VMI's QEMU process.",
                ),
                (
                    "kubevirt_vmi_memory_actual_balloon_bytes",
                    "Memory the balloon gives the guest.",
                ),
                (
                    "kubevirt_vmi_memory_swap_in_traffic_bytes",
                    "Memory the guest swapped in.",
                ),
                (
                    "kubevirt_vmi_memory_swap_out_traffic_bytes",
                    "Memory the guest swapped out.",
                ),
            ]
            .map(|(name, help)| gauge(registry, name, help)),
            faults: [
                ("kubevirt_vmi_memory_pgmajfault", "Major page faults in the guest."),
                ("kubevirt_vmi_memory_pgminfault", "Minor page faults in the guest."),
            ]
            .map(|(name, help)| counter(registry, name, help)),
            storage: [
                ("kubevirt_vmi_storage_read_traffic_bytes", "Bytes read from the disk."),
                ("kubevirt_vmi_storage_write_traffic_bytes", "Bytes written to the disk."),
                ("kubevirt_vmi_storage_iops_read", "Read requests to the disk."),
                ("kubevirt_vmi_storage_iops_write", "Write requests to the disk."),
            ]
            .map(|(name, help)| counter(registry, name, help)),
            network: [
                ("kubevirt_vmi_network_receive_bytes", "Bytes received by the interface."),
                (
                    "kubevirt_vmi_network_receive_packets",
                    "Packets received by the interface.",
                ),
                (
                    "kubevirt_vmi_network_receive_errors",
                    "Receive errors of the interface.",
                ),
                (
                    "kubevirt_vmi_network_receive_packets_dropped",
                    "Received packets dropped.",
                ),
                ("kubevirt_vmi_network_transmit_bytes", "Bytes sent by the interface."),
                (
                    "kubevirt_vmi_network_transmit_packets",
                    "Packets sent by the interface.",
                ),
                ("kubevirt_vmi_network_transmit_errors", "Send errors of the interface."),
                ("kubevirt_vmi_network_transmit_packets_dropped", "Sent packets dropped."),
            ]
            .map(|(name, help)| counter(registry, name, help)),
        }
    }

    /// Adds one VMI's samples.
    fn add(&self, labels: &VmiLabels, stat: &DomainStats) {
        self.cpu
            .get_or_create(labels)
            .inc_by(u64_to_f64(stat.cpu_time_ns) / 1e9);
        for vcpu in &stat.vcpu {
            let id = vcpu.id.to_string();
            let time = VcpuLabels {
                node: labels.node.clone(),
                namespace: labels.namespace.clone(),
                name: labels.name.clone(),
                id: id.clone(),
                // libvirt reports every online vCPU as running.
                state: "running".to_owned(),
            };
            self.vcpu_time
                .get_or_create(&time)
                .inc_by(u64_to_f64(vcpu.time_ns) / 1e9);
            let delay = VcpuDelayLabels {
                node: labels.node.clone(),
                namespace: labels.namespace.clone(),
                name: labels.name.clone(),
                id,
            };
            self.vcpu_delay
                .get_or_create(&delay)
                .inc_by(u64_to_f64(vcpu.delay_ns) / 1e9);
        }
        let m = &stat.memory;
        let kib = [
            m.available_kib,
            m.usable_kib,
            m.unused_kib,
            m.disk_caches_kib,
            m.rss_kib,
            m.actual_balloon_kib,
            m.swap_in_kib,
            m.swap_out_kib,
        ];
        for (family, value) in self.memory.iter().zip(kib) {
            if let Some(value) = value {
                family.get_or_create(labels).set(u64_to_f64(value) * 1024.0);
            }
        }
        for (family, value) in self.faults.iter().zip([m.major_faults, m.minor_faults]) {
            if let Some(value) = value {
                family.get_or_create(labels).inc_by(u64_to_f64(value));
            }
        }
        for disk in &stat.block {
            let drive = DriveLabels {
                node: labels.node.clone(),
                namespace: labels.namespace.clone(),
                name: labels.name.clone(),
                drive: disk.name.clone(),
            };
            let values = [
                disk.read_bytes,
                disk.write_bytes,
                disk.read_requests,
                disk.write_requests,
            ];
            for (family, value) in self.storage.iter().zip(values) {
                family.get_or_create(&drive).inc_by(u64_to_f64(value));
            }
        }
        for nic in &stat.net {
            let interface = InterfaceLabels {
                node: labels.node.clone(),
                namespace: labels.namespace.clone(),
                name: labels.name.clone(),
                interface: nic.name.clone(),
            };
            let values = [
                nic.rx_bytes,
                nic.rx_packets,
                nic.rx_errors,
                nic.rx_dropped,
                nic.tx_bytes,
                nic.tx_packets,
                nic.tx_errors,
                nic.tx_dropped,
            ];
            for (family, value) in self.network.iter().zip(values) {
                family.get_or_create(&interface).inc_by(u64_to_f64(value));
            }
        }
    }
}

/// Encodes the metrics of `node` from its VMIs' phases and their launchers' statistics.
#[must_use]
pub fn encode(node: &str, phases: &[(Arc<VirtualMachineInstance>, Phase)], stats: &[(String, DomainStats)]) -> String {
    let mut registry = Registry::default();
    let phase_count = Family::<PhaseLabels, Gauge>::default();
    registry.register(
        "kubevirt_vmi_phase_count",
        "VMI phase count on this node.",
        phase_count.clone(),
    );
    for (vmi, phase) in phases {
        phase_count
            .get_or_create(&PhaseLabels {
                node: node.to_owned(),
                phase: phase.as_str().to_lowercase(),
                os: annotation(vmi, "vm.kubevirt.io/os"),
                workload: annotation(vmi, "vm.kubevirt.io/workload"),
                flavor: annotation(vmi, "vm.kubevirt.io/flavor"),
                instance_type: annotation(vmi, "kubevirt.io/instancetype-name"),
                preference: annotation(vmi, "kubevirt.io/preference-name"),
            })
            .inc();
    }
    let families = VmiFamilies::register(&mut registry);
    for (key, stat) in stats {
        let (namespace, name) = key.split_once('/').unwrap_or(("default", key));
        let labels = VmiLabels {
            node: node.to_owned(),
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        };
        families.add(&labels, stat);
    }
    let mut text = String::new();
    if prometheus_client::encoding::text::encode(&mut text, &registry).is_err() {
        text.clear();
        let _ = writeln!(text, "# EOF");
    }
    text
}

/// How many launchers are asked for statistics at once by default (upstream's
/// `--max-metric-requests`).
pub const CONCURRENT_STATS_REQUESTS: usize = 3;

/// Gathers statistics from every launcher of the node, `concurrency` at a time, and encodes the
/// metrics.
pub async fn scrape<C: ClusterApi, L: Launchers, K: Clock>(
    reconciler: &Reconciler<C, L, K>,
    concurrency: usize,
) -> String {
    let view = reconciler.node_view();
    let stats: Vec<(String, DomainStats)> = futures::stream::iter(view.sockets)
        .map(|(key, socket)| async move {
            let stats = reconciler.launchers().stats(&socket).await.ok().flatten();
            stats.map(|s| (key, s))
        })
        .buffer_unordered(concurrency.max(1))
        .filter_map(std::future::ready)
        .collect()
        .await;
    let mut stats = stats;
    stats.sort_by(|a, b| a.0.cmp(&b.0));
    encode(reconciler.node(), &view.phases, &stats)
}

#[cfg(test)]
mod tests {
    use cmd_protocol::stats::{BlockStats, MemoryStats, NetStats, VcpuStats};

    use super::*;

    #[test]
    fn phases_and_domain_stats_become_upstreams_series() {
        let mut vmi = VirtualMachineInstance::default();
        vmi.metadata.name = Some("vm".to_owned());
        let stats = DomainStats {
            name: "default_vm".to_owned(),
            cpu_time_ns: 1_500_000_000,
            vcpus: 1,
            memory: MemoryStats {
                actual_balloon_kib: Some(262_144),
                major_faults: Some(3),
                ..MemoryStats::default()
            },
            block: vec![BlockStats {
                name: "rootdisk".to_owned(),
                target: "vda".to_owned(),
                read_bytes: 4096,
                read_requests: 2,
                ..BlockStats::default()
            }],
            net: vec![NetStats {
                name: "default".to_owned(),
                target: "tap0".to_owned(),
                rx_bytes: 100,
                tx_packets: 7,
                ..NetStats::default()
            }],
            vcpu: vec![VcpuStats {
                id: 0,
                time_ns: 2_000_000_000,
                delay_ns: 500_000_000,
            }],
        };
        let text = encode(
            "node01",
            &[(Arc::new(vmi.clone()), Phase::Running), (Arc::new(vmi), Phase::Running)],
            &[("default/vm".to_owned(), stats)],
        );
        let vmi_labels = r#"node="node01",namespace="default",name="vm""#;
        for line in [
            r#"kubevirt_vmi_phase_count{node="node01",phase="running",os="<none>",workload="<none>",flavor="<none>",instance_type="<none>",preference="<none>"} 2"#.to_owned(),
            format!("kubevirt_vmi_cpu_usage_seconds_total{{{vmi_labels}}} 1.5"),
            format!(r#"kubevirt_vmi_vcpu_seconds_total{{{vmi_labels},id="0",state="running"}} 2.0"#),
            format!(r#"kubevirt_vmi_vcpu_delay_seconds_total{{{vmi_labels},id="0"}} 0.5"#),
            format!("kubevirt_vmi_memory_actual_balloon_bytes{{{vmi_labels}}} 268435456.0"),
            format!("kubevirt_vmi_memory_pgmajfault_total{{{vmi_labels}}} 3.0"),
            format!(r#"kubevirt_vmi_storage_read_traffic_bytes_total{{{vmi_labels},drive="rootdisk"}} 4096.0"#),
            format!(r#"kubevirt_vmi_storage_iops_read_total{{{vmi_labels},drive="rootdisk"}} 2.0"#),
            format!(r#"kubevirt_vmi_network_receive_bytes_total{{{vmi_labels},interface="default"}} 100.0"#),
            format!(r#"kubevirt_vmi_network_transmit_packets_total{{{vmi_labels},interface="default"}} 7.0"#),
        ] {
            assert!(text.lines().any(|l| l == line), "missing {line} in:\n{text}");
        }
        assert!(
            !text.contains("kubevirt_vmi_memory_unused_bytes{"),
            "no sample for what the guest does not report"
        );
        assert!(text.ends_with("# EOF\n"));
    }
}
