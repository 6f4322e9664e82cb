//! A VM through virtctl: start from Halted, pause and unpause, restart with a new VMI, stop, and
//! `kubectl delete vm` through the real garbage collector.

use std::time::Duration;

use super::support::{Cleanup, example, field, get, kubectl_ok, virtctl_ok, wait_for, wait_for_phase};

fn printable_status(name: &str) -> String {
    get("vm", name, "default").map_or_else(String::new, |vm| field(&vm, "status.printableStatus"))
}

fn wait_for_status(name: &str, status: &str) {
    wait_for(&format!("VM {name} to be {status}"), Duration::from_secs(120), || {
        (printable_status(name) == status).then_some(())
    });
}

fn vmi_uid(name: &str) -> String {
    get("vmi", name, "default").map_or_else(String::new, |vmi| field(&vmi, "metadata.uid"))
}

fn condition(vmi_name: &str, kind: &str) -> String {
    get("vmi", vmi_name, "default")
        .and_then(|vmi| {
            vmi["status"]["conditions"]
                .as_array()?
                .iter()
                .find(|c| c["type"] == kind)
                .map(|c| c["status"].as_str().unwrap_or_default().to_owned())
        })
        .unwrap_or_default()
}

#[test]
#[ignore = "needs the test cluster: make cluster"]
fn a_halted_vm_starts_pauses_restarts_with_a_new_vmi_and_stops() {
    let mut cleanup = Cleanup::new();
    let manifest = example("vm-testguest.yaml", "e2e-vm").replace("runStrategy: Always", "runStrategy: Halted");
    cleanup.apply("vm", "e2e-vm", &manifest);
    wait_for_status("e2e-vm", "Stopped");
    assert!(get("vmi", "e2e-vm", "default").is_none(), "Halted: no VMI");

    assert_eq!(
        virtctl_ok(&["start", "e2e-vm"]).trim(),
        "VM e2e-vm was scheduled to start"
    );
    wait_for_status("e2e-vm", "Running");
    wait_for_phase("e2e-vm", "Running", Duration::from_secs(120));

    assert_eq!(
        virtctl_ok(&["pause", "vm", "e2e-vm"]).trim(),
        "VMI e2e-vm was scheduled to pause"
    );
    wait_for("the Paused condition", Duration::from_secs(30), || {
        (condition("e2e-vm", "Paused") == "True").then_some(())
    });
    wait_for_status("e2e-vm", "Paused");
    assert_eq!(
        virtctl_ok(&["unpause", "vm", "e2e-vm"]).trim(),
        "VMI e2e-vm was scheduled to unpause"
    );
    wait_for("the Paused condition to go", Duration::from_secs(30), || {
        condition("e2e-vm", "Paused").is_empty().then_some(())
    });
    wait_for_status("e2e-vm", "Running");

    let first = vmi_uid("e2e-vm");
    assert_eq!(
        virtctl_ok(&["restart", "e2e-vm"]).trim(),
        "VM e2e-vm was scheduled to restart"
    );
    wait_for("a new VMI after the restart", Duration::from_secs(120), || {
        let uid = vmi_uid("e2e-vm");
        (!uid.is_empty() && uid != first && super::support::vmi_phase("e2e-vm") == "Running").then_some(())
    });

    assert_eq!(
        virtctl_ok(&["stop", "e2e-vm"]).trim(),
        "VM e2e-vm was scheduled to stop"
    );
    wait_for_status("e2e-vm", "Stopped");
    wait_for("the VMI to be gone", Duration::from_secs(120), || {
        get("vmi", "e2e-vm", "default").is_none().then_some(())
    });
}

#[test]
#[ignore = "needs the test cluster: make cluster"]
fn deleting_a_vm_cascades_to_its_vmi_and_pod_through_the_garbage_collector() {
    let mut cleanup = Cleanup::new();
    cleanup.apply("vm", "e2e-cascade", &example("vm-testguest.yaml", "e2e-cascade"));
    wait_for_phase("e2e-cascade", "Running", Duration::from_secs(120));
    let vmi_uid = vmi_uid("e2e-cascade");
    let owner = get("vmi", "e2e-cascade", "default").expect("VMI");
    assert_eq!(field(&owner, "metadata.ownerReferences.0.kind"), "VirtualMachine");
    // Background deletion: the API server removes the VM, the garbage collector its dependents.
    kubectl_ok(&["delete", "vm", "e2e-cascade", "--cascade=background", "--wait=false"]);
    wait_for(
        "the VM, its VMI and its launcher pod to be gone",
        Duration::from_secs(120),
        || {
            let pods = kubectl_ok(&[
                "get",
                "pods",
                "-l",
                &format!("kubevirt.io/created-by={vmi_uid}"),
                "-o",
                "name",
            ]);
            (get("vm", "e2e-cascade", "default").is_none()
                && get("vmi", "e2e-cascade", "default").is_none()
                && pods.trim().is_empty())
            .then_some(())
        },
    );
}
