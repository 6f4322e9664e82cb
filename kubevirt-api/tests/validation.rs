//! The admission rules on a corpus: every example manifest is valid, and each invalid case is
//! refused with upstream's field path and message.

use kubevirt_api::Manifest;
use kubevirt_api::v1::ClusterConfig;
use kubevirt_api::v1::{VirtualMachine, VirtualMachineInstance};
use kubevirt_api::validation::{Cause, CauseType, validate_vm, validate_vmi_spec};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

fn validate_vm_default(vm: &VirtualMachine) -> Vec<Cause> {
    validate_vm(vm, &ClusterConfig::default())
}

fn base_vmi() -> Value {
    json!({
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
        "metadata": {"name": "vm", "namespace": "default"},
        "spec": {
            "domain": {
                "resources": {"requests": {"memory": "128Mi"}},
                "devices": {
                    "disks": [{"name": "root", "disk": {"bus": "virtio"}}],
                    "interfaces": [{"name": "default", "masquerade": {}}]
                }
            },
            "networks": [{"name": "default", "pod": {}}],
            "volumes": [{"name": "root", "containerDisk": {"image": "quay.io/containerdisks/fedora:40"}}]
        }
    })
}

fn vmi_with(change: impl FnOnce(&mut Value)) -> Vec<Cause> {
    let mut value = base_vmi();
    change(&mut value["spec"]);
    let vmi: VirtualMachineInstance = serde_json::from_value(value).expect("VMI");
    validate_vmi_spec(&vmi.spec, "spec", &ClusterConfig::default())
}

fn one(causes: &[Cause]) -> (CauseType, &str, &str) {
    assert_eq!(causes.len(), 1, "{causes:#?}");
    (causes[0].kind, causes[0].field.as_str(), causes[0].message.as_str())
}

#[test]
fn the_example_manifests_are_valid() {
    for path in std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../manifests/examples")).expect("examples") {
        let path = path.expect("entry").path();
        if path.is_dir() {
            continue; // instancetypes/: a VM that is valid only with its instance type applied
        }
        let manifest = Manifest::from_path(&path).expect("manifest");
        let causes = match manifest {
            Manifest::Vm(vm) => validate_vm(&vm, &ClusterConfig::default()),
            Manifest::Vmi(vmi) => validate_vmi_spec(&vmi.spec, "spec", &ClusterConfig::default()),
        };
        assert_eq!(causes, vec![], "{}", path.display());
    }
    assert_eq!(vmi_with(|_| {}), vec![]);
}

#[test]
fn disks_volumes_and_boot_order() {
    let renamed = vmi_with(|s| s["domain"]["devices"]["disks"][0]["name"] = json!("nope"));
    assert_eq!(
        renamed
            .iter()
            .map(|c| (c.kind, c.field.as_str(), c.message.as_str()))
            .collect::<Vec<_>>(),
        [
            (
                CauseType::NotFound,
                "spec.domain.devices.disks[0].name",
                "spec.domain.devices.disks[0].name 'nope' not found."
            ),
            (
                CauseType::NotFound,
                "spec.domain.volumes[0].name",
                "spec.domain.volumes[0].name 'root' not found."
            ),
        ],
        "the disk names no volume, and the volume is used by no disk"
    );
    let duplicated = vmi_with(|s| {
        s["domain"]["devices"]["disks"] = json!([{"name": "root"}, {"name": "root"}]);
    });
    assert_eq!(
        one(&duplicated),
        (
            CauseType::Duplicate,
            "spec.domain.devices.disks[1].name",
            "spec.domain.devices.disks[0] and spec.domain.devices.disks[1] must not have the same Name."
        )
    );
    assert_eq!(
        one(&vmi_with(|s| s["domain"]["devices"]["disks"][0]["cdrom"] = json!({}))),
        (
            CauseType::Invalid,
            "spec.domain.devices.disks[0]",
            "spec.domain.devices.disks[0] can only have a single target type defined"
        )
    );
    let twice = vmi_with(|s| {
        s["domain"]["devices"]["disks"][0]["bootOrder"] = json!(1);
        s["domain"]["devices"]["interfaces"][0]["bootOrder"] = json!(1);
    });
    assert_eq!(
        one(&twice),
        (
            CauseType::Invalid,
            "spec.domain.devices.interfaces[0].bootOrder",
            "Boot order for spec.domain.devices.interfaces[0].bootOrder already set for a different device."
        )
    );
    assert_eq!(
        one(&vmi_with(
            |s| s["domain"]["devices"]["interfaces"][0]["bootOrder"] = json!(0)
        )),
        (
            CauseType::Invalid,
            "spec.domain.devices.interfaces[0].bootOrder",
            "spec.domain.devices.interfaces[0].bootOrder must have a boot order > 0, if supplied"
        )
    );
    let unused = vmi_with(|s| {
        s["volumes"] = json!([
            {"name": "root", "containerDisk": {"image": "x"}},
            {"name": "spare", "emptyDisk": {"capacity": "1Gi"}}
        ]);
    });
    assert_eq!(
        one(&unused),
        (
            CauseType::NotFound,
            "spec.domain.volumes[1].name",
            "spec.domain.volumes[1].name 'spare' not found."
        )
    );
    let two_sources = vmi_with(|s| s["volumes"][0]["emptyDisk"] = json!({"capacity": "1Gi"}));
    assert_eq!(
        one(&two_sources),
        (
            CauseType::Invalid,
            "spec.volumes[0]",
            "spec.volumes[0] must have exactly one source type set"
        )
    );
}

#[test]
fn memory() {
    assert_eq!(
        one(&vmi_with(|s| s["domain"]["resources"] = json!({}))),
        (
            CauseType::Required,
            "spec.domain.resources.requests.memory",
            "no memory requested, at least one of 'spec.domain.memory.guest', 'spec.domain.memory.hugepages.size' or 'spec.domain.resources.requests.memory' must be set"
        )
    );
    assert_eq!(
        one(&vmi_with(
            |s| s["domain"]["resources"]["requests"]["memory"] = json!("512Ki")
        ))
        .2,
        "spec.domain.resources.requests.memory '512Ki': must be greater than or equal to 1M."
    );
    let over = vmi_with(|s| s["domain"]["resources"]["limits"] = json!({"memory": "64Mi"}));
    assert_eq!(
        one(&over).2,
        "spec.domain.resources.requests.memory '128Mi' is greater than spec.domain.resources.limits.memory '64Mi'"
    );
}

#[test]
fn names_strategies_and_networks() {
    assert_eq!(
        one(&vmi_with(|s| s["hostname"] = json!("Not_A_Label"))),
        (
            CauseType::Invalid,
            "spec.hostname",
            "spec.hostname does not conform to the kubernetes DNS_LABEL rules : Not_A_Label"
        )
    );
    assert_eq!(
        one(&vmi_with(|s| s["startStrategy"] = json!("Later"))),
        (
            CauseType::Invalid,
            "spec.startStrategy",
            "spec.startStrategy is set with an unrecognized option: Later"
        )
    );
    assert_eq!(
        one(&vmi_with(|s| s["evictionStrategy"] = json!("fantasy"))).2,
        "spec.evictionStrategy is set with an unrecognized option: fantasy"
    );
    assert_eq!(
        one(&vmi_with(|s| s["evictionStrategy"] = json!("Sometimes"))).1,
        "spec.evictionStrategy"
    );
    assert_eq!(
        one(&vmi_with(
            |s| s["networks"][0] = json!({"name": "default", "multus": {"networkName": "br"}})
        )),
        (
            CauseType::Invalid,
            "spec.domain.devices.interfaces[0].name",
            "Masquerade interface only implemented with pod network"
        )
    );
    let orphan = vmi_with(|s| {
        s["networks"] = json!([{"name": "default", "pod": {}}, {"name": "extra", "multus": {"networkName": "x"}}]);
    });
    assert_eq!(
        one(&orphan),
        (
            CauseType::Required,
            "spec.networks[1].name",
            "spec.networks[1].name 'extra' not found."
        )
    );
    let bad_name = vmi_with(|s| s["domain"]["devices"]["interfaces"][0]["name"] = json!("bad name"));
    assert_eq!(
        bad_name[0].message,
        "Network interface name can only contain alphabetical characters, numbers, dashes (-) or underscores (_)"
    );
    assert_eq!(
        bad_name.len(),
        3,
        "it also names no network, and the network has no interface: {bad_name:#?}"
    );
}

#[test]
fn vm_run_strategy_and_template() {
    let vm = |spec: Value| -> VirtualMachine {
        serde_json::from_value(json!({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
            "metadata": {"name": "vm"}, "spec": spec}))
        .expect("VM")
    };
    let template = base_vmi()["spec"].clone();
    assert_eq!(
        one(&validate_vm_default(&vm(
            json!({"running": true, "runStrategy": "Always", "template": {"spec": template}})
        )))
        .2,
        "Running and RunStrategy are mutually exclusive"
    );
    assert_eq!(
        one(&validate_vm_default(&vm(json!({"template": {"spec": template}})))).2,
        "One of Running or RunStrategy must be specified"
    );
    assert_eq!(
        one(&validate_vm_default(&vm(
            json!({"runStrategy": "Sometimes", "template": {"spec": template}})
        )))
        .2,
        "Invalid RunStrategy (Sometimes)"
    );
    let mut bad_template = template.clone();
    bad_template["domain"]["devices"]["disks"][0]["name"] = json!("nope");
    assert_eq!(
        one(&validate_vm_default(&vm(
            json!({"runStrategy": "Always", "template": {"spec": bad_template}})
        )))
        .1,
        "spec.template.spec.domain.devices.disks[0].name"
    );
}
