//! A VMI from `kubectl apply` to `kubectl delete`: Running, the serial console through the
//! aggregation layer, the masquerade binding, and nothing left on the node at the end.

use std::time::Duration;

use super::support::{
    Cleanup, console_until, example, field, get, kubectl, kubectl_command, kubectl_ok, node_mounts, pod_processes,
    pod_reaches_guest_web_server, qemu_of, wait_for, wait_for_phase,
};

/// The launcher pod of VMI `name`: (pod name, pod uid).
pub fn launcher_pod(name: &str) -> (String, String) {
    let vmi = get("vmi", name, "default").expect("the VMI");
    let uid = field(&vmi, "metadata.uid");
    let pods = kubectl_ok(&[
        "get",
        "pods",
        "-l",
        &format!("kubevirt.io/created-by={uid}"),
        "-o",
        "jsonpath={range .items[*]}{.metadata.name} {.metadata.uid}{\"\\n\"}{end}",
    ]);
    let mut lines = pods.lines().filter(|l| !l.trim().is_empty());
    let line = lines.next().unwrap_or_else(|| panic!("VMI {name} has no launcher pod"));
    assert!(
        lines.next().is_none(),
        "VMI {name} has more than one launcher pod: {pods}"
    );
    let (pod, pod_uid) = line.split_once(' ').expect("name and uid");
    (pod.to_owned(), pod_uid.to_owned())
}

#[test]
#[ignore = "needs the test cluster: make cluster"]
fn a_vmi_runs_answers_on_its_console_and_leaves_nothing_behind_when_deleted() {
    let mut cleanup = Cleanup::new();
    cleanup.apply("vmi", "e2e-vmi", &example("vmi-testguest.yaml", "e2e-vmi"));
    let vmi = wait_for_phase("e2e-vmi", "Running", Duration::from_secs(120));
    let node = super::support::field(&vmi, "status.nodeName");
    let (pod, pod_uid) = launcher_pod("e2e-vmi");
    assert!(qemu_of("e2e-vmi").is_some(), "QEMU of e2e-vmi runs on the node");

    // virtctl console: kubectl's credentials, the API server's aggregation layer, virt-api,
    // virt-handler's console server, the guest's serial port.
    console_until(
        "e2e-vmi",
        "\necho CONSOLE-$((6*7))",
        "CONSOLE-42",
        Duration::from_secs(60),
    );

    // kubectl delete: the guest powers off (Succeeded), the pod goes, the node is clean.
    let watch = kubectl_command(&["get", "vmi", "e2e-vmi", "-w", "-o", "jsonpath={.status.phase}{\"\\n\"}"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("watch");
    std::thread::sleep(Duration::from_millis(500));
    kubectl_ok(&["delete", "vmi", "e2e-vmi", "--timeout=90s"]);
    // The watch prints the last phases a moment after the deletion completes.
    std::thread::sleep(Duration::from_secs(1));
    let mut watch = watch;
    let _ = watch.kill();
    let phases = String::from_utf8_lossy(&watch.wait_with_output().expect("watch output").stdout).into_owned();
    assert!(
        phases.lines().any(|p| p == "Succeeded"),
        "the deleted VMI ends Succeeded: phases seen {phases:?}"
    );
    assert!(!phases.lines().any(|p| p == "Failed"), "never Failed: {phases:?}");
    wait_for(
        &format!("launcher pod {pod} to be gone"),
        Duration::from_secs(60),
        || {
            (!String::from_utf8_lossy(&kubectl(&["get", "pod", &pod, "--ignore-not-found", "-o", "name"]).stdout)
                .contains(&pod))
            .then_some(())
        },
    );
    wait_for(
        "no process of the launcher pod on the node",
        Duration::from_secs(30),
        || pod_processes(&pod_uid).is_empty().then_some(()),
    );
    assert!(qemu_of("e2e-vmi").is_none(), "no QEMU left");
    wait_for(
        "no mount of the launcher pod on the node",
        Duration::from_secs(30),
        || (!node_mounts(&node).contains(&pod_uid)).then_some(()),
    );
}

#[test]
#[ignore = "needs the test cluster: make cluster"]
fn masquerade_gives_the_guest_a_lease_and_a_pod_reaches_its_web_server() {
    let mut cleanup = Cleanup::new();
    cleanup.apply(
        "vmi",
        "e2e-masquerade",
        &example("vmi-testguest-masquerade.yaml", "e2e-masquerade"),
    );
    let vmi = wait_for_phase("e2e-masquerade", "Running", Duration::from_secs(120));
    let address = field(&vmi, "status.interfaces.0.ipAddress");
    assert!(
        address.starts_with("10.244."),
        "the VMI reports its pod address: {address:?}"
    );
    // The guest took its lease from the launcher's DHCP server: masquerade's 10.0.2.2.
    console_until(
        "e2e-masquerade",
        "\nip -4 addr show eth0",
        "inet 10.0.2.2/24",
        Duration::from_secs(60),
    );
    // A pod on the cluster network reaches the guest's web server through the pod's address.
    pod_reaches_guest_web_server(&mut cleanup, "e2e-client", &address);
}
