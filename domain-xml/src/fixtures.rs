//! VMIs shared by the benchmarks and the fuzz corpus test: a minimal one, and a large one with
//! 16 disks, the pod network's interface and every device kind the converter renders.

use kubevirt_api::v1::VirtualMachineInstance;
use serde_json::{Value, json};

/// One containerDisk and guest memory.
#[must_use]
pub fn minimal_vmi() -> Value {
    json!({
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstance",
        "metadata": {"name": "minimal", "namespace": "default", "uid": "11111111-2222-3333-4444-555555555555"},
        "spec": {
            "domain": {"memory": {"guest": "128Mi"}, "devices": {"disks": [{"name": "root", "disk": {"bus": "virtio"}}]}},
            "volumes": [{"name": "root", "containerDisk": {"image": "quay.io/containerdisks/fedora"}}]
        }
    })
}

/// 16 disks over every bus and volume kind, one interface, and all optional devices.
#[must_use]
pub fn large_vmi() -> Value {
    let kinds = [
        json!({"containerDisk": {"image": "quay.io/containerdisks/fedora"}}),
        json!({"persistentVolumeClaim": {"claimName": "data"}}),
        json!({"dataVolume": {"name": "dv"}}),
        json!({"emptyDisk": {"capacity": "10Gi"}}),
        json!({"ephemeral": {"persistentVolumeClaim": {"claimName": "golden"}}}),
        json!({"hostDisk": {"path": "/data/host.img", "type": "Disk"}}),
        json!({"configMap": {"name": "cm"}}),
        json!({"secret": {"secretName": "s"}}),
    ];
    let buses = ["virtio", "virtio", "sata", "scsi"];
    let mut disks = Vec::new();
    let mut volumes = Vec::new();
    for i in 0..14 {
        disks.push(
            json!({"name": format!("disk{i}"), "disk": {"bus": buses[i % 4]}, "serial": format!("SN{i:04}"),
            "dedicatedIOThread": i == 1, "bootOrder": if i == 0 { json!(1) } else { Value::Null }}),
        );
        let mut volume = kinds[i % kinds.len()].clone();
        volume["name"] = json!(format!("disk{i}"));
        volumes.push(volume);
    }
    disks.push(json!({"name": "cloudinit", "disk": {"bus": "virtio"}}));
    volumes.push(json!({"name": "cloudinit", "cloudInitNoCloud": {"userData": "#cloud-config"}}));
    disks.push(json!({"name": "installer", "cdrom": {"bus": "sata"}}));
    // One pod network: kubevirt-rs refuses Multus secondary networks.
    let interfaces = vec![json!({"name": "default", "masquerade": {}, "ports": [{"port": 22}]})];
    let networks = vec![json!({"name": "default", "pod": {}})];
    json!({
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstance",
        "metadata": {"name": "large", "namespace": "prod", "uid": "66666666-7777-8888-9999-000000000000"},
        "spec": {
            "domain": {
                "cpu": {"sockets": 2, "cores": 4, "threads": 2, "model": "Skylake-Client", "features": [{"name": "pcid"}]},
                "memory": {"guest": "8Gi", "hugepages": {"pageSize": "2Mi"}},
                "resources": {"requests": {"memory": "8Gi", "cpu": "4"}},
                "ioThreadsPolicy": "auto",
                "firmware": {"uuid": "5d307ca9-b3ef-428c-8861-06e72d69f223", "serial": "large-1", "bootloader": {"efi": {}}},
                "clock": {"utc": {}, "timer": {"rtc": {"tickPolicy": "catchup"}, "pit": {"tickPolicy": "delay"}, "hpet": {"present": false}, "hyperv": {}}},
                "features": {"acpi": {}, "apic": {}, "smm": {}, "hyperv": {"relaxed": {}, "vapic": {}, "spinlocks": {}, "vpindex": {}, "synic": {}, "synictimer": {"direct": {}}, "frequencies": {}, "ipi": {}, "tlbflush": {}}},
                "chassis": {"manufacturer": "ACME", "asset": "A1"},
                "devices": {
                    "disks": disks, "interfaces": interfaces, "rng": {},
                    "watchdog": {"name": "wd", "i6300esb": {"action": "reset"}},
                    "inputs": [{"name": "tablet", "type": "tablet", "bus": "usb"}],
                    "tpm": {}, "sound": {"name": "audio"}, "clientPassthrough": {}, "autoattachVSOCK": true,
                    "blockMultiQueue": true, "networkInterfaceMultiqueue": true
                }
            },
            "volumes": volumes,
            "networks": networks
        },
        "status": {"VSOCKCID": 42}
    })
}

/// Parses a fixture into a VMI.
///
/// # Panics
/// Never for the fixtures above; they are fixed, valid documents.
#[must_use]
pub fn vmi(value: Value) -> VirtualMachineInstance {
    serde_json::from_value(value).expect("fixtures are valid VMIs")
}
