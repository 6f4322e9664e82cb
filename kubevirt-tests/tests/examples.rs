//! Every example manifest parses strictly, and serializing it back loses nothing.

use kubevirt_api::Manifest;
use kubevirt_tests::example_manifests;
use pretty_assertions::assert_eq;

#[test]
fn there_are_examples_of_every_common_shape() {
    let names: Vec<String> = example_manifests()
        .iter()
        .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .collect();
    for expected in [
        "vmi-testguest.yaml",
        "vm-testguest.yaml",
        "vmi-containerdisk.yaml",
        "vmi-ephemeral-pvc.yaml",
        "vmi-cloudinit-nocloud.yaml",
        "vmi-multi-disk-nic.yaml",
        "vmi-efi.yaml",
    ] {
        assert!(names.iter().any(|n| n == expected), "missing example {expected}");
    }
}

#[test]
fn every_example_round_trips_without_loss() {
    for path in example_manifests() {
        let text = std::fs::read_to_string(&path).expect("read example");
        let original: serde_json::Value = serde_saphyr::from_str(&text).expect("valid YAML");
        let manifest = Manifest::parse(&text, &path).unwrap_or_else(|e| panic!("{e}"));
        let back = match manifest {
            Manifest::Vmi(vmi) => serde_json::to_value(&vmi),
            Manifest::Vm(vm) => serde_json::to_value(&vm),
        }
        .expect("serialize");
        assert_eq!(back, original, "{} does not round-trip", path.display());
    }
}

#[test]
fn every_example_yields_a_vmi() {
    for path in example_manifests() {
        let vmi = Manifest::from_path(&path)
            .and_then(|m| m.into_vmi(&path))
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(vmi.metadata.name.is_some(), "{}", path.display());
        for disk in &vmi.spec.domain.devices.disks {
            let volume = vmi.spec.volumes.iter().find(|v| v.name == disk.name);
            let source = volume.map(kubevirt_api::v1::Volume::source);
            assert!(
                matches!(source, Some(Ok(_))),
                "{}: disk {} has no volume",
                path.display(),
                disk.name
            );
        }
    }
}
