//! Upstream's admission rules for panic devices, the reboot policy, ACPI tables, the video type and
//! SSD emulation, restated from upstream's create-admitter tests with their exact messages.

use kubevirt_api::v1::{ClusterConfig, VirtualMachineInstance};
use kubevirt_api::validation::{CauseType, validate_vmi_spec};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

fn base() -> Value {
    json!({
        "domain": {
            "resources": {"requests": {"memory": "128Mi"}},
            "devices": {"disks": [{"name": "root", "disk": {"bus": "virtio"}}]}
        },
        "volumes": [{"name": "root", "containerDisk": {"image": "quay.io/containerdisks/fedora:40"}}]
    })
}

fn causes(change: impl FnOnce(&mut Value), gates: &[&str]) -> Vec<(CauseType, String, String)> {
    let mut spec = base();
    change(&mut spec);
    let vmi: VirtualMachineInstance = serde_json::from_value(json!({
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance", "metadata": {"name": "v"}, "spec": spec
    }))
    .expect("VMI");
    let config = ClusterConfig {
        feature_gates: gates.iter().map(|g| (*g).to_owned()).collect(),
        ..ClusterConfig::default()
    };
    validate_vmi_spec(&vmi.spec, "spec", &config)
        .into_iter()
        .map(|c| (c.kind, c.field, c.message))
        .collect()
}

fn one(kind: CauseType, field: &str, message: &str) -> Vec<(CauseType, String, String)> {
    vec![(kind, field.to_owned(), message.to_owned())]
}

#[test]
fn panic_device_models_are_upstreams_three() {
    for model in ["hyperv", "isa", "pvpanic"] {
        let got = causes(
            |s| s["domain"]["devices"]["panicDevices"] = json!([{"model": model}]),
            &[],
        );
        assert_eq!(got, vec![], "{model}");
    }
    assert_eq!(
        causes(
            |s| s["domain"]["devices"]["panicDevices"] = json!([{}, {"model": "bad"}]),
            &[]
        ),
        one(
            CauseType::Invalid,
            "spec.domain.devices.panicDevices[1].model",
            "invalid PanicDeviceModel(bad)"
        )
    );
}

#[test]
fn a_reboot_policy_needs_its_feature_gate() {
    let terminate = |s: &mut Value| s["domain"]["rebootPolicy"] = json!("Terminate");
    assert_eq!(
        causes(terminate, &[]),
        one(
            CauseType::Invalid,
            "spec.domain.rebootPolicy",
            "RebootPolicy is specified but the RebootPolicy feature gate is not enabled"
        )
    );
    assert_eq!(causes(terminate, &["RebootPolicy"]), vec![]);
    assert_eq!(
        causes(|s| s["domain"]["rebootPolicy"] = json!("Shutdown"), &["RebootPolicy"]),
        one(
            CauseType::NotSupported,
            "spec.domain.rebootPolicy",
            "spec.domain.rebootPolicy: Unsupported value: \"Shutdown\": supported values: \"Reboot\", \"Terminate\""
        )
    );
}

#[test]
fn acpi_tables_must_name_secret_volumes() {
    let with_volume = |volume: Value, acpi: Value| {
        move |s: &mut Value| {
            s["domain"]["firmware"] = json!({"acpi": acpi});
            s["volumes"].as_array_mut().expect("volumes").push(volume);
        }
    };
    let secret = json!({"name": "slic", "secret": {"secretName": "licenses"}});
    let config_map = json!({"name": "slic", "configMap": {"name": "licenses"}});
    assert_eq!(
        causes(with_volume(secret.clone(), json!({"slicNameRef": "slic"})), &[]),
        vec![],
        "a table's Secret volume needs no disk"
    );
    assert_eq!(
        causes(with_volume(secret.clone(), json!({"msdmNameRef": "slic"})), &[]),
        vec![]
    );
    assert_eq!(
        causes(with_volume(secret, json!({"slicNameRef": "missing"})), &[]),
        vec![
            (
                CauseType::NotFound,
                "spec.domain.volumes[1].name".to_owned(),
                "spec.domain.volumes[1].name 'slic' not found.".to_owned()
            ),
            (
                CauseType::Invalid,
                "spec.acpi.slicNameRef".to_owned(),
                "spec.acpi does not have a matching Volume.".to_owned()
            ),
        ]
    );
    assert_eq!(
        causes(with_volume(config_map, json!({"msdmNameRef": "slic"})), &[]),
        one(
            CauseType::Invalid,
            "spec.acpi.msdmNameRef",
            "spec.acpi refers to Volume of unsupported type."
        )
    );
    assert_eq!(
        causes(|s| s["domain"]["firmware"] = json!({"acpi": {}}), &[]),
        one(
            CauseType::Invalid,
            "spec.acpi",
            "ACPI was set but no SLIC nor MSDM volume reference was set"
        )
    );
}

#[test]
fn video_types_are_upstreams_amd64_ones() {
    for video in ["vga", "cirrus", "virtio", "ramfb", "bochs"] {
        let got = causes(
            |s| s["domain"]["devices"]["video"] = json!({"type": video}),
            &["VideoConfig"],
        );
        assert_eq!(got, vec![], "{video}");
    }
    for video in ["qxl", "vmvga", "xenfb", "none", "invalidmodel"] {
        let got = causes(
            |s| s["domain"]["devices"]["video"] = json!({"type": video}),
            &["VideoConfig"],
        );
        assert_eq!(got.len(), 1, "{video}: {got:?}");
        assert_eq!(got[0].1, "spec.domain.devices.video.type", "{video}");
    }
}

#[test]
fn ssd_emulation_is_for_sata_and_scsi_disks() {
    for bus in ["sata", "scsi"] {
        let got = causes(
            |s| s["domain"]["devices"]["disks"][0]["disk"] = json!({"bus": bus, "solidState": true}),
            &[],
        );
        assert_eq!(got, vec![], "{bus}");
    }
    assert_eq!(
        causes(
            |s| s["domain"]["devices"]["disks"][0]["disk"] = json!({"bus": "virtio", "solidState": true}),
            &[]
        ),
        one(
            CauseType::Invalid,
            "spec.domain.devices.disks[0].disk.solidState",
            "solidState is only supported on sata and scsi buses, disk root uses virtio"
        )
    );
}
