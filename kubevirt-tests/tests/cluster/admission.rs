//! The webhooks as the real API server calls them: a bad VMI is refused with upstream's field
//! path, and the mutating webhook's defaults are stored.

use std::time::Duration;

use super::support::{Cleanup, example, field, get, kubectl_stdin, wait_for_phase};

#[test]
#[ignore = "needs the test cluster: make cluster"]
fn kubectl_apply_refuses_a_bad_vmi_with_upstreams_field_path() {
    // A disk that names no volume: upstream refuses it at spec.domain.devices.disks[0].name.
    let bad = example("vmi-testguest.yaml", "e2e-bad").replace(
        "        - name: containerdisk\n          disk:",
        "        - name: nosuchvolume\n          disk:",
    );
    assert!(bad.contains("nosuchvolume"), "the example changed; update this test");
    let output = kubectl_stdin(&["apply", "-f", "-"], &bad);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "the bad VMI was accepted");
    assert!(
        stderr
            .contains("spec.domain.devices.disks[0].name: spec.domain.devices.disks[0].name 'nosuchvolume' not found"),
        "upstream's field path and message: {stderr}"
    );
    assert!(get("vmi", "e2e-bad", "default").is_none(), "nothing stored");
}

#[test]
#[ignore = "needs the test cluster: make cluster"]
fn the_mutating_webhooks_defaults_are_stored() {
    let mut cleanup = Cleanup::new();
    cleanup.apply("vmi", "e2e-defaults", &example("vmi-testguest.yaml", "e2e-defaults"));
    let vmi = wait_for_phase("e2e-defaults", "Running", Duration::from_secs(120));
    let expected = [
        ("spec.architecture", "amd64"),
        ("spec.domain.machine.type", "q35"),
        ("spec.domain.cpu.model", "host-model"),
        ("spec.domain.cpu.cores", "1"),
        ("spec.domain.resources.requests.memory", "256Mi"),
        ("spec.domain.features.acpi.enabled", "true"),
    ];
    let stored: Vec<(&str, String)> = expected.iter().map(|(path, _)| (*path, field(&vmi, path))).collect();
    let wanted: Vec<(&str, String)> = expected
        .iter()
        .map(|(path, value)| (*path, (*value).to_owned()))
        .collect();
    assert_eq!(stored, wanted);
    assert_eq!(field(&vmi, "spec.domain.firmware.uuid").len(), 36, "a firmware UUID");
    assert!(
        vmi["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|f| f.iter().any(|x| x == "foregroundDeleteVirtualMachine")),
        "the finalizer: {}",
        vmi["metadata"]
    );
}
