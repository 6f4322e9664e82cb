//! One VMI, one guest (#31): over generated VMIs, including the edge cases that used to make
//! components disagree (zero topology counts, zero quantities, dotted and over-long names), every
//! component that derives the guest's vCPUs, memory or hostname derives the same:
//! - vCPUs: the domain (before and after virt-api's defaulting), the launcher pod's overhead, and
//!   the pod network's tap queues;
//! - memory: the domain (before and after defaulting) and virt-api's `memory.guest` and
//!   `status.memory`;
//! - hostname: the launcher pod's hostname and `vm.kubevirt.io/name` label, the DHCP lease and
//!   cloud-init's `local-hostname`.

use std::net::Ipv4Addr;

use domain_xml::{ConvertContext, DomainType, PathLayout, render};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kubevirt_api::v1::{ClusterConfig, VirtualMachineInstance, VolumeSource};
use pod_network::plan::{PodInterface, Resolv, plan};
use proptest::prelude::*;
use virt_controller::pod::{PodConfig, render_launcher_pod};
use virt_launcher::cloud_init::{Flavor, Secrets, iso_step};
use virt_launcher::volumes::Step;

fn count() -> impl Strategy<Value = Option<u32>> {
    prop_oneof![Just(None), (0..=3_u32).prop_map(Some)]
}

fn cpu_quantity() -> impl Strategy<Value = Option<&'static str>> {
    prop_oneof![
        Just(None),
        Just(Some("0")),
        Just(Some("1")),
        Just(Some("1500m")),
        Just(Some("3"))
    ]
}

fn memory_quantity() -> impl Strategy<Value = Option<&'static str>> {
    prop_oneof![Just(None), Just(Some("0")), Just(Some("64Mi")), Just(Some("96Mi"))]
}

/// A DNS subdomain as VMI names are: labels of letters, digits and dashes, joined by dots.
fn name() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z][a-z0-9]{0,10}",
        "[a-z][a-z0-9-]{0,8}[a-z0-9](\\.[a-z][a-z0-9]{0,6}){1,3}",
        "[a-z]{64,80}",
    ]
}

prop_compose! {
    fn vmi()(
        name in name(),
        hostname in prop_oneof![Just(None), Just(Some("given-host"))],
        topology in (count(), count(), count()),
        cpu_request in cpu_quantity(),
        cpu_limit in cpu_quantity(),
        guest in prop_oneof![Just(None), Just(Some("128Mi"))],
        memory_request in memory_quantity(),
        memory_limit in memory_quantity(),
    ) -> serde_json::Value {
        let mut cpu = serde_json::Map::new();
        for (key, value) in [("sockets", topology.0), ("cores", topology.1), ("threads", topology.2)] {
            if let Some(value) = value {
                cpu.insert(key.to_owned(), value.into());
            }
        }
        let list = |cpu: Option<&str>, memory: Option<&str>| {
            let mut list = serde_json::Map::new();
            for (key, value) in [("cpu", cpu), ("memory", memory)] {
                if let Some(value) = value {
                    list.insert(key.to_owned(), value.into());
                }
            }
            list
        };
        let (requests, limits) = (list(cpu_request, memory_request), list(cpu_limit, memory_limit));
        let mut spec = serde_json::json!({
            "domain": {
                "cpu": cpu,
                "resources": {"requests": requests, "limits": limits},
                "devices": {
                    "networkInterfaceMultiqueue": true,
                    "disks": [{"name": "root", "disk": {"bus": "virtio"}}, {"name": "init", "disk": {"bus": "virtio"}}],
                    "interfaces": [{"name": "default", "masquerade": {}}]
                }
            },
            "networks": [{"name": "default", "pod": {}}],
            "volumes": [
                {"name": "root", "containerDisk": {"image": "quay.io/containerdisks/fedora:40"}},
                {"name": "init", "cloudInitNoCloud": {"userData": "#cloud-config\n"}}
            ]
        });
        if let Some(guest) = guest {
            spec["domain"]["memory"] = serde_json::json!({"guest": guest});
        }
        if let Some(hostname) = hostname {
            spec["hostname"] = hostname.into();
        }
        serde_json::json!({
            "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
            "metadata": {"name": name, "namespace": "prod", "uid": "6a1b2c3d-4e5f-4071-8293-a4b5c6d7e8f9"},
            "spec": spec
        })
    }
}

fn context() -> ConvertContext {
    ConvertContext {
        domain_type: DomainType::Qemu,
        container_disk_formats: [("root".to_owned(), "qcow2".to_owned())].into(),
        ..ConvertContext::default()
    }
}

/// The domain's vCPUs and memory in bytes.
fn domain_shape(vmi: &VirtualMachineInstance) -> (u32, u64) {
    let domain = render(vmi, &context()).expect("an admitted VMI renders");
    (
        domain.vcpu.count,
        domain.memory.value * unit_bytes(domain.memory.unit.as_deref()),
    )
}

fn unit_bytes(unit: Option<&str>) -> u64 {
    match unit {
        Some("b" | "bytes") => 1,
        Some("MiB") => 1 << 20,
        Some("GiB") => 1 << 30,
        _ => 1 << 10,
    }
}

fn cloud_init_hostname(vmi: &VirtualMachineInstance) -> Option<String> {
    let index = vmi
        .spec
        .volumes
        .iter()
        .position(|v| v.name == "init")
        .expect("the cloud-init volume");
    let Ok(VolumeSource::CloudInitNoCloud(data)) = vmi.spec.volumes[index].source() else {
        panic!("a noCloud volume");
    };
    let step = iso_step(vmi, &PathLayout::default(), index, Flavor::NoCloud, data, Secrets::None).expect("the seed");
    let Step::Iso { files, .. } = step else {
        panic!("an ISO step");
    };
    let meta = files.iter().find(|(name, _)| name == "meta-data").expect("meta-data");
    let meta: serde_json::Value = serde_json::from_slice(&meta.1).expect("JSON meta-data");
    meta["local-hostname"].as_str().map(str::to_owned)
}

fn dhcp(vmi: &VirtualMachineInstance) -> (Option<String>, Option<u32>) {
    let pod = PodInterface {
        name: "eth0".to_owned(),
        mac: [0x02, 0, 0, 0, 0, 1],
        mtu: 1500,
        address: pod_network::plan::Ipv4Cidr::parse("10.244.0.7/24"),
        gateway: Some(Ipv4Addr::new(10, 244, 0, 1)),
    };
    let resolv = Resolv {
        nameservers: vec![Ipv4Addr::new(10, 96, 0, 10)],
        search: Vec::new(),
    };
    let plan = plan(vmi, &pod, &resolv).expect("the pod network's plan");
    let interface = plan.pod.expect("the pod interface");
    (interface.lease.hostname, interface.tap_queues)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn every_component_derives_the_same_guest(json in vmi()) {
        let raw: VirtualMachineInstance = serde_json::from_value(json).expect("VMI");
        let config = ClusterConfig::default();
        let refused = kubevirt_api::validation::validate_vmi_spec(&raw.spec, "spec", &config);
        // What admission refuses never reaches the other components.
        prop_assume!(refused.is_empty());
        let mut admitted = raw.clone();
        virt_api::defaults::set_vmi_create_defaults(
            &mut admitted,
            &config,
            Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
            &|| "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0".to_owned(),
        )
        .expect("defaults");

        let (vcpus, memory) = domain_shape(&admitted);
        prop_assert_eq!(domain_shape(&raw), (vcpus, memory), "defaulting changed the guest");
        prop_assert_eq!(virt_controller::overhead::vcpus(&admitted), u64::from(vcpus), "the pod's overhead");
        prop_assert_eq!(virt_controller::overhead::vcpus(&raw), u64::from(vcpus));
        let (lease_hostname, tap_queues) = dhcp(&admitted);
        prop_assert_eq!(tap_queues, Some(vcpus.clamp(1, 256)), "the pod network's queues");

        let guest = admitted.spec.domain.memory.as_ref().and_then(|m| m.guest.as_ref()).expect("memory.guest");
        prop_assert_eq!(kubevirt_api::quantity::to_bytes(guest).expect("bytes"), memory);
        let at_boot = admitted.status.as_ref().and_then(|s| s.memory.as_ref()).and_then(|m| m.guest_at_boot.as_ref());
        prop_assert_eq!(at_boot, Some(guest));

        let pod = render_launcher_pod(
            &admitted,
            &PodConfig::new("registry.example/virt-launcher:v1"),
            &virt_controller::claims::ClaimModes::default(),
        )
        .expect("the pod");
        let pod_hostname = pod.spec.as_ref().and_then(|s| s.hostname.clone()).expect("the pod's hostname");
        prop_assert!(!pod_hostname.is_empty() && pod_hostname.len() <= 63 && !pod_hostname.contains('.'));
        let label = pod.metadata.labels.as_ref().and_then(|l| l.get("vm.kubevirt.io/name")).cloned();
        prop_assert_eq!(label.as_deref(), Some(pod_hostname.as_str()));
        prop_assert_eq!(lease_hostname.as_deref(), Some(pod_hostname.as_str()), "DHCP");
        let seed_hostname = cloud_init_hostname(&admitted);
        prop_assert_eq!(seed_hostname.as_deref(), Some(pod_hostname.as_str()), "cloud-init");
    }
}
