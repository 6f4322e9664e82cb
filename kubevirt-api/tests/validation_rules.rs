//! One invalid case per rule of upstream's VMI and VM admitters beyond the structural ones (those
//! are in `validation.rs`): each asserts the cause's kind and exact field path, and that the same
//! spec without the fault is valid.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kubevirt_api::v1::{ClusterConfig, VirtualMachine, VirtualMachineInstance};
use kubevirt_api::validation::{CauseType, validate_metadata, validate_vm, validate_vmi_spec};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

fn base() -> Value {
    json!({
        "domain": {
            "resources": {"requests": {"memory": "128Mi"}},
            "devices": {
                "disks": [{"name": "root", "disk": {"bus": "virtio"}}, {"name": "init", "disk": {"bus": "virtio"}}],
                "interfaces": [{"name": "default", "masquerade": {}}]
            }
        },
        "networks": [{"name": "default", "pod": {}}],
        "volumes": [
            {"name": "root", "containerDisk": {"image": "quay.io/containerdisks/fedora:40"}},
            {"name": "init", "cloudInitNoCloud": {"userData": "#cloud-config\n"}}
        ]
    })
}

fn causes_of(spec: Value, config: &ClusterConfig) -> Vec<(CauseType, String)> {
    let mut object =
        json!({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance", "metadata": {"name": "v"}});
    object["spec"] = spec;
    let vmi: VirtualMachineInstance = serde_json::from_value(object).expect("VMI");
    validate_vmi_spec(&vmi.spec, "spec", config)
        .into_iter()
        .map(|c| (c.kind, c.field))
        .collect()
}

/// Applies `change` to the base spec and expects exactly `expected` (kind and field).
fn rule(number: u32, change: impl FnOnce(&mut Value), expected: &[(CauseType, &str)]) {
    rule_with(number, &ClusterConfig::default(), change, expected);
}

fn rule_with(number: u32, config: &ClusterConfig, change: impl FnOnce(&mut Value), expected: &[(CauseType, &str)]) {
    let mut spec = base();
    change(&mut spec);
    let got = causes_of(spec, config);
    let want: Vec<(CauseType, String)> = expected.iter().map(|(k, f)| (*k, (*f).to_owned())).collect();
    assert_eq!(got, want, "rule {number}");
}

use CauseType::{Duplicate, Invalid, NotFound, NotSupported, Required};

#[test]
fn the_base_spec_is_valid() {
    assert_eq!(causes_of(base(), &ClusterConfig::default()), vec![]);
}

#[test]
fn cloud_init_rules_10_to_14() {
    let nocloud = "spec.volumes[1].cloudInitNoCloud";
    rule(
        10,
        |s| s["volumes"][1]["cloudInitNoCloud"]["userData"] = json!("x".repeat(2049)),
        &[(Invalid, nocloud)],
    );
    rule(
        11,
        |s| s["volumes"][1]["cloudInitNoCloud"]["networkData"] = json!("x".repeat(2049)),
        &[(Invalid, nocloud)],
    );
    rule(
        12,
        |s| s["volumes"][1]["cloudInitNoCloud"]["userDataBase64"] = json!("I2Nsb3VkLWNvbmZpZwo="),
        &[(Invalid, nocloud)],
    );
    rule(
        13,
        |s| s["volumes"][1]["cloudInitNoCloud"] = json!({}),
        &[(Invalid, nocloud)],
    );
    rule(
        14,
        |s| s["volumes"][1]["cloudInitNoCloud"] = json!({"userDataBase64": "not base64!"}),
        &[(Invalid, "spec.volumes[1].cloudInitNoCloud.userDataBase64")],
    );
}

#[test]
fn volume_rules_15_to_19_and_57() {
    rule(
        15,
        |s| s["volumes"][0] = json!({"name": "root", "hostDisk": {"path": "", "type": "Disk", "capacity": "1Gi"}}),
        &[
            (Invalid, "spec.volumes[0]"),
            (NotFound, "spec.volumes[0].hostDisk.path"),
            (Invalid, "spec.volumes[0].hostDisk.capacity"),
        ],
    );
    rule(
        16,
        |s| s["volumes"][0] = json!({"name": "root", "configMap": {}}),
        &[(Invalid, "spec.volumes[0].configMap.name")],
    );
    rule(
        17,
        |s| {
            s["volumes"][0] = json!({"name": "root", "serviceAccount": {"serviceAccountName": "a"}});
            s["volumes"][1] = json!({"name": "init", "serviceAccount": {"serviceAccountName": "b"}});
        },
        &[(Invalid, "spec.volumes")],
    );
    rule(
        18,
        |s| s["domain"]["devices"]["disks"][0] = json!({"name": "root", "lun": {}}),
        &[(Invalid, "spec.domain.devices.disks[0].lun")],
    );
    let gates = ClusterConfig {
        feature_gates: vec!["DownwardMetrics".to_owned()],
        ..ClusterConfig::default()
    };
    rule_with(
        19,
        &gates,
        |s| {
            s["volumes"][1] = json!({"name": "init", "downwardMetrics": {}});
            s["domain"]["devices"]["disks"][1]["disk"]["bus"] = json!("sata");
        },
        &[(Invalid, "spec.domain.devices.disks[1].disk.bus")],
    );
    rule(
        57,
        |s| s["volumes"][0]["containerDisk"]["path"] = json!("/disk/../etc"),
        &[(Invalid, "spec.volumes[0].containerDisk")],
    );
}

#[test]
fn cpu_and_memory_rules_23_and_25_to_31() {
    rule(
        23,
        |s| s["domain"]["memory"] = json!({"hugepages": {"pageSize": "1Gi"}}),
        &[(Invalid, "spec.domain.resources.requests.memory")],
    );
    rule(
        25,
        |s| s["domain"]["resources"] = json!({"requests": {"memory": "128Mi", "cpu": "2"}, "limits": {"cpu": "1"}}),
        &[(Invalid, "spec.domain.resources.requests.cpu")],
    );
    rule(
        26,
        |s| {
            s["domain"]["cpu"] = json!({"dedicatedCpuPlacement": true});
            s["domain"]["resources"] = json!({"requests": {"memory": "128Mi", "cpu": "1500m"}});
        },
        &[(Invalid, "spec.domain.resources.requests.cpu")],
    );
    rule(
        27,
        |s| s["domain"]["cpu"] = json!({"isolateEmulatorThread": true}),
        &[(Invalid, "spec.domain.cpu.isolateEmulatorThread")],
    );
    rule(
        28,
        |s| s["domain"]["cpu"] = json!({"features": [{"name": "pcid", "policy": "maybe"}]}),
        &[(NotSupported, "spec.domain.cpu.features[0].policy")],
    );
    rule(
        29,
        // The NUMA gate is GA: no gate cause, only the missing dedicated CPUs and hugepages.
        |s| s["domain"]["cpu"] = json!({"numa": {"guestMappingPassthrough": {}}}),
        &[
            (Invalid, "spec.domain.cpu.numa.guestMappingPassthrough"),
            (Invalid, "spec.domain.cpu.numa.guestMappingPassthrough"),
        ],
    );
    rule(
        30,
        |s| s["domain"]["cpu"] = json!({"realtime": {}}),
        &[
            (Required, "spec.domain.cpu.dedicatedCpuPlacement"),
            (Required, "spec.domain.cpu.numa.guestMappingPassthrough"),
        ],
    );
    let multi = ClusterConfig {
        feature_gates: vec!["MultiArchitecture".to_owned()],
        ..ClusterConfig::default()
    };
    rule_with(
        31,
        &multi,
        |s| {
            s["architecture"] = json!("arm64");
            s["domain"]["cpu"] = json!({"dedicatedCpuPlacement": true, "threads": 2, "cores": 1});
        },
        &[(Invalid, "spec.architecture")],
    );
}

#[test]
fn machine_and_architecture_rules_35_and_56() {
    rule(
        35,
        |s| s["domain"]["machine"] = json!({"type": "pc-i440fx-7.2"}),
        &[(Invalid, "spec.domain.machine.type")],
    );
    rule(
        56,
        |s| s["architecture"] = json!("arm64"),
        &[(Required, "spec.architecture")],
    );
    rule(
        56,
        |s| s["architecture"] = json!("riscv64"),
        &[(Invalid, "spec.architecture")],
    );
}

#[test]
fn probe_rules_37_and_38() {
    rule(
        37,
        |s| s["readinessProbe"] = json!({"periodSeconds": 5}),
        &[(Required, "spec.readinessProbe")],
    );
    rule(
        37,
        |s| s["livenessProbe"] = json!({"guestAgentPing": {}, "exec": {"command": ["true"]}}),
        &[(Invalid, "spec.livenessProbe")],
    );
    rule(
        38,
        |s| {
            s["networks"] = json!([]);
            s["domain"]["devices"]["interfaces"] = json!([]);
            s["readinessProbe"] = json!({"tcpSocket": {"port": 22}});
        },
        &[(Invalid, "spec.readinessProbe.tcpSocket")],
    );
}

#[test]
fn device_rules_40_to_43_and_58() {
    rule(
        40,
        |s| s["domain"]["devices"]["inputs"] = json!([{"name": "t", "bus": "ps2", "type": "keyboard"}]),
        &[
            (Invalid, "spec.domain.devices.inputs[0].bus"),
            (Invalid, "spec.domain.devices.inputs[0].type"),
        ],
    );
    rule(
        41,
        |s| s["domain"]["ioThreadsPolicy"] = json!("supplementalPool"),
        &[(Invalid, "spec.domain.ioThreads.count")],
    );
    rule(
        42,
        |s| s["domain"]["devices"]["sound"] = json!({"name": "", "model": "sb16"}),
        &[(Invalid, "spec.Sound"), (Invalid, "spec.Sound")],
    );
    rule(
        43,
        |s| s["domain"]["firmware"] = json!({"bootloader": {"efi": {}, "bios": {}}}),
        &[(Invalid, "spec.domain.firmware.bootloader"), (Invalid, "spec.domain")],
    );
    rule(
        58,
        |s| s["domain"]["devices"]["hostDevices"] = json!([{"name": "gpu", "deviceName": "nvidia.com/A100"}]),
        &[(Invalid, "spec.HostDevices")],
    );
    rule(
        58,
        |s| s["domain"]["devices"]["autoattachVSOCK"] = json!(true),
        &[(Invalid, "spec.domain.devices.autoattachVSOCK")],
    );
    rule(
        0,
        |s| {
            s["domain"]["devices"]["disks"][0] =
                json!({"name": "root", "cdrom": {"bus": "virtio"}, "cache": "unsafe", "io": "fast"});
        },
        &[
            (Invalid, "spec.domain.devices.disks[0].cdrom.bus"),
            (Invalid, "spec.domain.devices.disks[0].cache"),
            (NotSupported, "spec.domain.devices.disks[0].io"),
        ],
    );
}

#[test]
fn guest_rules_44_to_46() {
    let sev = ClusterConfig {
        feature_gates: vec!["WorkloadEncryptionSEV".to_owned()],
        ..ClusterConfig::default()
    };
    rule_with(
        44,
        &sev,
        |s| s["domain"]["launchSecurity"] = json!({"sev": {}}),
        &[(Invalid, "spec.launchSecurity")],
    );
    rule(
        44,
        |s| s["domain"]["launchSecurity"] = json!({"sev": {}}),
        &[(Invalid, "spec.launchSecurity")],
    );
    rule(45, |s| s["dnsPolicy"] = json!("None"), &[(Required, "spec.dnsConfig")]);
    rule(
        45,
        |s| s["dnsPolicy"] = json!("Sometimes"),
        &[(NotSupported, "spec.dnsPolicy")],
    );
    rule(
        45,
        |s| s["dnsConfig"] = json!({"nameservers": ["1.1.1.1", "8.8.8.8", "9.9.9.9", "not-an-ip"]}),
        &[(Invalid, "nameservers"), (Invalid, "nameservers")],
    );
    rule(
        46,
        |s| s["accessCredentials"] = json!([{"sshPublicKey": {"source": {"secret": {"secretName": "k"}}, "propagationMethod": {"configDrive": {}}}}]),
        &[(Invalid, "spec.accessCredentials[0].sshPublicKey.propagationMethod")],
    );
    rule(
        46,
        |s| s["accessCredentials"] = json!([{"userPassword": {"propagationMethod": {"qemuGuestAgent": {}}}}]),
        &[(Invalid, "spec.accessCredentials[0].userPassword.source")],
    );
}

#[test]
fn interface_rules_48_52_53() {
    rule(
        48,
        |s| s["domain"]["devices"]["interfaces"][0]["macAddress"] = json!("02:00:00:00:00"),
        &[(Invalid, "spec.domain.devices.interfaces[0].macAddress")],
    );
    rule(
        52,
        |s| {
            s["domain"]["devices"]["interfaces"][0]["ports"] = json!([{"port": 70000}, {"name": "http", "port": 80, "protocol": "SCTP"}, {"name": "http", "port": 81}]);
        },
        &[
            (Invalid, "spec.domain.devices.interfaces[0].ports[0].port"),
            (Invalid, "spec.domain.devices.interfaces[0].ports[1].protocol"),
            (Duplicate, "spec.domain.devices.interfaces[0].ports[2].name"),
        ],
    );
    let no_bridge = ClusterConfig {
        permit_bridge_interface_on_pod_network: false,
        ..ClusterConfig::default()
    };
    rule_with(
        53,
        &no_bridge,
        |s| s["domain"]["devices"]["interfaces"][0] = json!({"name": "default", "bridge": {}}),
        &[(Invalid, "spec.domain.devices.interfaces[0].name")],
    );
    rule(
        53,
        |s| s["domain"]["devices"]["interfaces"][0]["model"] = json!("vmxnet3"),
        &[(NotSupported, "spec.domain.devices.interfaces[0].model")],
    );
}

#[test]
fn annotation_gates_rule_55() {
    let meta: ObjectMeta = serde_json::from_value(
        json!({"annotations": {"kubevirt.io/ignitiondata": "{}", "hooks.kubevirt.io/hookSidecars": "[]"}}),
    )
    .expect("meta");
    let causes = validate_metadata(&meta, "metadata", &ClusterConfig::default());
    let fields: Vec<&str> = causes.iter().map(|c| c.field.as_str()).collect();
    assert_eq!(fields, ["metadata.annotations", "metadata.annotations"]);
    assert_eq!(
        causes[0].message,
        "ExperimentalIgnitionSupport feature gate is not enabled in kubevirt-config, invalid entry metadata.annotations.kubevirt.io/ignitiondata"
    );
    let gates = ClusterConfig {
        feature_gates: vec!["ExperimentalIgnitionSupport".to_owned(), "Sidecar".to_owned()],
        ..ClusterConfig::default()
    };
    assert!(validate_metadata(&meta, "metadata", &gates).is_empty());
}

/// Rule 62 with upstream's `ValidateDataVolumeTemplate`: each template's first problem, in
/// upstream's order and at its paths.
#[test]
fn data_volume_templates_rule_62() {
    let storage = json!({"resources": {"requests": {"storage": "1Gi"}}});
    let templates = json!([
        {"metadata": {"name": "unused"}, "spec": {"source": {"blank": {}}, "storage": storage}},
        {"metadata": {}, "spec": {}},
        {"metadata": {"name": "root"}, "spec": {"source": {"blank": {}}}},
        {"metadata": {"name": "root"}, "spec": {"source": {"blank": {}}, "pvc": {}, "storage": storage}},
        {"metadata": {"name": "root"}, "spec": {"source": {"blank": {}}, "storage": {"dataSource": {"kind": "PersistentVolumeClaim", "name": "x"}}}},
        {"metadata": {"name": "root"}, "spec": {"storage": storage}},
        {"metadata": {"name": "root"}, "spec": {"source": {}, "storage": storage}},
        {"metadata": {"name": "root"}, "spec": {"source": {"blank": {}, "upload": {}}, "storage": storage}},
        {"metadata": {"name": "root"}, "spec": {"source": {"http": "not an object"}, "storage": storage}},
        {"metadata": {"name": "root"}, "spec": {"sourceRef": {"kind": "DataSource", "name": "fedora"}, "storage": storage}},
        {"metadata": {"name": "root"}, "spec": {"pvc": {"dataSourceRef": {"kind": "VolumeSnapshot", "name": "s"}}}}
    ]);
    let mut template = base();
    template["volumes"]
        .as_array_mut()
        .expect("volumes")
        .push(json!({"name": "root", "dataVolume": {"name": "root"}}));
    let vm: VirtualMachine = serde_json::from_value(json!({
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine", "metadata": {"name": "vm"},
        "spec": {"runStrategy": "Always", "dataVolumeTemplates": templates, "template": {"spec": template}}
    }))
    .expect("VM");
    let causes = validate_vm(&vm, &ClusterConfig::default());
    let got: Vec<(CauseType, &str, &str)> = causes
        .iter()
        .filter(|c| c.field.starts_with("spec.dataVolumeTemplate"))
        .map(|c| {
            (
                c.kind,
                c.field.as_str(),
                c.message.split(':').next().unwrap_or_default(),
            )
        })
        .collect();
    let entry = "spec.dataVolumeTemplate";
    assert_eq!(
        got,
        [
            (
                Required,
                "spec.dataVolumeTemplate[0]",
                "DataVolumeTemplate entry spec.dataVolumeTemplate[0] must be referenced in the VMI template's 'volumes' list"
            ),
            (
                Required,
                "spec.dataVolumeTemplate[1].name",
                "'name' field must not be empty for DataVolumeTemplate entry spec.dataVolumeTemplate[1].name."
            ),
            (
                Invalid,
                &*format!("{entry}[2].PVC.Storage"),
                "Missing Data volume PVC or Storage"
            ),
            (
                Invalid,
                &*format!("{entry}[3].PVC.Storage"),
                "Duplicate storage definition, both target storage and target pvc defined"
            ),
            (
                Invalid,
                &*format!("{entry}[4].source"),
                "External population is incompatible with Source and SourceRef"
            ),
            (
                Invalid,
                &*format!("{entry}[5].source.sourceRef"),
                "Data volume should have either Source, SourceRef, or be externally populated"
            ),
            (
                Invalid,
                &*format!("{entry}[6].source"),
                "Missing dataVolume valid source"
            ),
            (Invalid, &*format!("{entry}[7].source"), "Multiple dataVolume sources"),
            (Invalid, &*format!("{entry}[8].spec"), "not a DataVolume spec"),
        ],
        "entries 9 (a sourceRef) and 10 (external population) are valid"
    );
}

/// A VM's template is held to the same cloud-init rules as a VMI: two user-data sources are
/// refused at the template's path, as upstream's VM admitter refuses them (#31).
#[test]
fn a_vm_template_with_two_user_data_sources_is_refused() {
    let mut template = base();
    template["volumes"][1]["cloudInitNoCloud"]["userDataBase64"] = json!("I2Nsb3VkLWNvbmZpZwo=");
    let vm: VirtualMachine = serde_json::from_value(json!({
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine", "metadata": {"name": "vm"},
        "spec": {"runStrategy": "Always", "template": {"spec": template}}
    }))
    .expect("VM");
    let causes = validate_vm(&vm, &ClusterConfig::default());
    let got: Vec<(CauseType, &str)> = causes.iter().map(|c| (c.kind, c.field.as_str())).collect();
    assert_eq!(got, [(Invalid, "spec.template.spec.volumes[1].cloudInitNoCloud")]);
}
