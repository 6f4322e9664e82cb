//! Instance types and preferences through the cluster: the webhooks expand and check them, the
//! controller keeps their ControllerRevisions and starts the VMI with them applied, QEMU gets the
//! instance type's CPUs, and expand-spec (kubectl and virtctl) shows the VM as it will run.

use std::time::Duration;

use serde_json::Value;

use super::support::{
    Cleanup, example, field, get, kubectl, kubectl_ok, kubectl_stdin, qemu_of, virtctl_ok, wait_for, wait_for_phase,
};

const INSTANCETYPE: &str = "\
apiVersion: instancetype.kubevirt.io/v1beta1
kind: VirtualMachineInstancetype
metadata:
  name: e2e-it-dual
  namespace: default
spec:
  cpu:
    guest: 2
  memory:
    guest: 192Mi
";

const PREFERENCE: &str = "\
apiVersion: instancetype.kubevirt.io/v1beta1
kind: VirtualMachinePreference
metadata:
  name: e2e-it-cores
  namespace: default
spec:
  cpu:
    preferredCPUTopology: cores
  devices:
    preferredDiskBus: virtio
";

/// The example VM, named `name`, taking the namespaced kinds above.
fn vm_manifest(name: &str) -> String {
    example("instancetypes/vm-testguest.yaml", name)
        .replace(
            "  instancetype:\n    name: testguest.small\n",
            "  instancetype:\n    kind: VirtualMachineInstancetype\n    name: e2e-it-dual\n",
        )
        .replace(
            "  preference:\n    name: testguest\n",
            "  preference:\n    kind: VirtualMachinePreference\n    name: e2e-it-cores\n",
        )
}

fn json(text: &str, what: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{what} is not JSON ({e}): {text}"))
}

#[test]
#[ignore = "needs the test cluster: make cluster"]
fn a_vm_runs_with_its_instance_type_and_preference_applied() {
    let mut cleanup = Cleanup::new();
    cleanup.apply("virtualmachineinstancetype", "e2e-it-dual", INSTANCETYPE);
    cleanup.apply("virtualmachinepreference", "e2e-it-cores", PREFERENCE);
    let manifest = vm_manifest("e2e-it");
    assert!(
        manifest.contains("e2e-it-dual"),
        "the example changed; update this test"
    );
    cleanup.apply("vm", "e2e-it", &manifest);

    let vmi = wait_for_phase("e2e-it", "Running", Duration::from_secs(120));
    let applied = [
        ("spec.domain.cpu.sockets", "1"),
        ("spec.domain.cpu.cores", "2"),
        ("spec.domain.cpu.threads", "1"),
        ("spec.domain.memory.guest", "192Mi"),
        ("spec.domain.devices.disks.0.disk.bus", "virtio"),
        ("metadata.annotations.kubevirt\\.io/instancetype-name", "e2e-it-dual"),
        ("metadata.annotations.kubevirt\\.io/preference-name", "e2e-it-cores"),
    ];
    for (path, expected) in applied {
        assert_eq!(field(&vmi, path), expected, "{path} of the VMI");
    }
    let qemu = qemu_of("e2e-it").expect("the VM's QEMU runs");
    assert!(
        qemu.cmdline.contains("sockets=1") && qemu.cmdline.contains("cores=2"),
        "QEMU gets the instance type's CPUs as the preference lays them out: {}",
        qemu.cmdline
    );

    // The VM records the revisions it runs with, and they exist with the objects' data.
    let vm = wait_for("the VM's revision references", Duration::from_secs(60), || {
        get("vm", "e2e-it", "default").filter(|vm| {
            !field(vm, "status.instancetypeRef.controllerRevisionRef.name").is_empty()
                && !field(vm, "status.preferenceRef.controllerRevisionRef.name").is_empty()
        })
    });
    for (reference, kind) in [
        ("status.instancetypeRef", "VirtualMachineInstancetype"),
        ("status.preferenceRef", "VirtualMachinePreference"),
    ] {
        assert_eq!(field(&vm, &format!("{reference}.kind")), kind);
        let revision_name = field(&vm, &format!("{reference}.controllerRevisionRef.name"));
        let revision = get("controllerrevision", &revision_name, "default")
            .unwrap_or_else(|| panic!("ControllerRevision {revision_name} exists"));
        assert_eq!(field(&revision, "data.kind"), kind, "{revision_name}");
        assert_eq!(field(&revision, "metadata.ownerReferences.0.name"), "e2e-it");
    }

    // expand-spec as kubectl reaches it through the aggregation layer, and as virtctl does.
    let raw = kubectl_ok(&[
        "get",
        "--raw",
        "/apis/subresources.kubevirt.io/v1/namespaces/default/virtualmachines/e2e-it/expand-spec",
    ]);
    let expanded = json(&raw, "expand-spec");
    assert_eq!(field(&expanded, "spec.template.spec.domain.cpu.cores"), "2");
    assert!(expanded["spec"]["instancetype"].is_null(), "expanded: {raw}");
    let from_virtctl = json(
        &virtctl_ok(&["expand", "--vm", "e2e-it", "-o", "json"]),
        "virtctl expand",
    );
    assert_eq!(from_virtctl["spec"], expanded["spec"]);
}

#[test]
#[ignore = "needs the test cluster: make cluster"]
fn a_vm_naming_a_missing_instance_type_is_refused() {
    let manifest = vm_manifest("e2e-it-missing").replace("e2e-it-dual", "e2e-no-such-type");
    let output = kubectl_stdin(&["create", "-f", "-"], &manifest);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success(),
        "a VM naming a missing instance type was accepted"
    );
    assert!(
        stderr.contains("spec.instancetype: Failure to find instancetype:")
            && stderr.contains("\"e2e-no-such-type\" not found"),
        "upstream's field and message: {stderr}"
    );
    assert!(get("vm", "e2e-it-missing", "default").is_none(), "nothing stored");
}

#[test]
#[ignore = "needs the test cluster: make cluster"]
fn virtctl_create_vm_writes_a_vm_the_cluster_accepts() {
    let mut cleanup = Cleanup::new();
    cleanup.apply("virtualmachineinstancetype", "e2e-it-dual", INSTANCETYPE);
    let yaml = virtctl_ok(&[
        "create",
        "vm",
        "--name",
        "e2e-created",
        "--instancetype",
        "virtualmachineinstancetype/e2e-it-dual",
        "--volume-containerdisk",
        "src:localhost/kubevirt-rs/testguest:latest",
    ]);
    let output = kubectl_stdin(&["create", "--dry-run=server", "-o", "json", "-f", "-"], &yaml);
    assert!(
        output.status.success(),
        "the cluster refused virtctl's VM: {}{yaml}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stored = json(&String::from_utf8_lossy(&output.stdout), "the dry-run VM");
    assert_eq!(field(&stored, "spec.instancetype.kind"), "VirtualMachineInstancetype");
    assert_eq!(field(&stored, "spec.instancetype.name"), "e2e-it-dual");
    assert!(
        kubectl(&["get", "vm", "e2e-created", "--ignore-not-found", "-o", "name"])
            .stdout
            .is_empty(),
        "a dry run stores nothing"
    );
}
