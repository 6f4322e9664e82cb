//! Paths: the prefix, `$`, the steps relative to `spec.template`, what a lookup reaches, and the
//! reference VM's zero values where the VM sets nothing.

use pretty_assertions::assert_eq;
use serde_json::json;

use crate::path::{NotFound, Path, PathError};
use crate::reference::reference_vm;

fn vm() -> serde_json::Value {
    json!({"spec": {"template": {
    "metadata": {"labels": {"kubevirt.io/domain": "vm", "app.kubernetes.io/name": "x"}},
    "spec": {"domain": {
        "machine": {"type": "q35"},
        "resources": {"requests": {"memory": "128M"}},
        "memory": {"guest": "2Gi"},
        "devices": {"disks": [
            {"name": "root", "disk": {"bus": "virtio"}},
            {"name": "iso", "cdrom": {"bus": "sata"}},
            {"name": "data", "disk": {"bus": "virtio"}}
        ], "interfaces": []}
    }}}}})
}

fn found(path: &str) -> Result<Vec<serde_json::Value>, NotFound> {
    let vm = vm();
    Path::parse(path)
        .expect("a path")
        .lookup(&vm)
        .map(|values| values.into_iter().cloned().collect())
}

#[test]
fn a_path_needs_its_prefix_and_is_relative_to_the_template() {
    for text in ["string-literal", "$.spec.domain.machine.type", "jsonpath:.spec", ""] {
        assert_eq!(Path::parse(text), Err(PathError::Invalid), "{text}");
    }
    let with_dollar = Path::parse("jsonpath::$.spec.domain.resources.requests.memory").expect("path");
    let without = Path::parse("jsonpath::.spec.domain.resources.requests.memory").expect("path");
    assert_eq!(with_dollar, without);
    assert_eq!(without.expr(), ".spec.domain.resources.requests.memory");
    assert_eq!(without.to_string(), "jsonpath::.spec.domain.resources.requests.memory");
    assert_eq!(found("jsonpath::.spec.domain.machine.type"), Ok(vec![json!("q35")]));
    assert_eq!(found("jsonpath::.spec.domain.memory.guest"), Ok(vec![json!("2Gi")]));
    // Without its leading dot the path runs into `templatespec`, which no VM has.
    assert_eq!(found("jsonpath::spec.domain.machine.type"), Err(NotFound));
}

#[test]
fn indexes_every_element_and_names_with_dots_are_read() {
    assert_eq!(
        found("jsonpath::.spec.domain.devices.disks[*].name"),
        Ok(vec![json!("root"), json!("iso"), json!("data")])
    );
    assert_eq!(
        found("jsonpath::.spec.domain.devices.disks[1].cdrom.bus"),
        Ok(vec![json!("sata")])
    );
    assert_eq!(
        found("jsonpath::.spec.domain.devices.disks[-1].name"),
        Ok(vec![json!("data")])
    );
    assert_eq!(found("jsonpath::.spec.domain.devices.disks[3].name"), Err(NotFound));
    // Elements without the field are passed over; none having it is not found.
    assert_eq!(
        found("jsonpath::.spec.domain.devices.disks[*].disk.bus"),
        Ok(vec![json!("virtio"), json!("virtio")])
    );
    assert_eq!(found("jsonpath::.spec.domain.devices.disks[*].lun.bus"), Err(NotFound));
    // Every element of an empty array is nothing, and so is what follows: no error.
    assert_eq!(found("jsonpath::.spec.domain.devices.interfaces[*].name"), Ok(vec![]));
    assert_eq!(
        found("jsonpath::.metadata.labels.app\\.kubernetes\\.io/name"),
        Ok(vec![json!("x")])
    );
    assert_eq!(
        found("jsonpath::.metadata.labels['kubevirt.io/domain']"),
        Ok(vec![json!("vm")])
    );
    assert_eq!(found("jsonpath::.spec.domain.machine.*"), Ok(vec![json!("q35")]));
    assert_eq!(found("jsonpath::.spec.domain.cpu.cores"), Err(NotFound));
}

#[test]
fn what_this_validator_does_not_evaluate_is_refused_by_name() {
    for (text, what) in [
        ("jsonpath::.spec..bus", "recursive descent"),
        ("jsonpath::.spec.domain.devices.disks[?(@.name==\"root\")]", "a filter"),
        ("jsonpath::.spec.domain.devices.disks[0,1]", "a union"),
        ("jsonpath::.spec.domain.devices.disks[0:2]", "a slice"),
    ] {
        match Path::parse(text) {
            Err(PathError::Unsupported(said)) => assert!(said.starts_with(what), "{text}: {said}"),
            other => panic!("{text}: {other:?}"),
        }
    }
    for junk in [
        "jsonpath::random56junk%(*$%&*()",
        "jsonpath::.spec[",
        "jsonpath::.spec.[0]",
        "jsonpath::.a[x]",
    ] {
        assert!(Path::parse(junk).is_err(), "{junk}");
    }
}

#[test]
fn the_reference_vm_has_every_domain_field_at_its_zero_value() {
    let reference = reference_vm();
    let at = |path: &str| {
        Path::parse(path)
            .expect("path")
            .lookup(reference)
            .map(|v| v.into_iter().cloned().collect::<Vec<_>>())
    };
    assert_eq!(at("jsonpath::.spec.domain.cpu.cores"), Ok(vec![json!(0)]));
    assert_eq!(at("jsonpath::.spec.domain.memory.guest"), Ok(vec![json!(0)]));
    assert_eq!(at("jsonpath::.spec.domain.machine.type"), Ok(vec![json!("")]));
    assert_eq!(
        at("jsonpath::.spec.domain.devices.disks[*].disk.bus").map(|v| v.len()),
        Ok(64)
    );
    assert_eq!(
        at("jsonpath::.spec.domain.devices.interfaces[0].ports[*].port").map(|v| v.len()),
        Ok(16)
    );
    // A map has no keys there, and a field no VM has is not found either.
    assert_eq!(at("jsonpath::.spec.domain.resources.requests.memory"), Err(NotFound));
    assert_eq!(at("jsonpath::.spec.domain.nothing"), Err(NotFound));
    assert_eq!(at("jsonpath::.metadata.labels"), Err(NotFound));
}
