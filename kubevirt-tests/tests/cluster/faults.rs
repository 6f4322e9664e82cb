//! Faults a real node sees: QEMU killed inside the launcher pod, virt-handler's pod deleted (the
//! DaemonSet's next pod re-adopts the VMI), virt-controller's pod deleted in the middle of a start
//! (the VMI still starts exactly once). The upgrade through the KubeVirt CR's `imageTag` is in
//! `upgrade.rs`.

use std::collections::BTreeSet;
use std::time::Duration;

use super::support::{
    Cleanup, console_until, example, field, get, kubectl_command, kubectl_ok, qemu_of, vmi_uid, wait_for,
    wait_for_phase,
};
use super::vmi::launcher_pod;

/// The Ready virt-handler pod of `node` (each node has one).
pub(super) fn handler_pod(node: &str) -> String {
    let on_node = format!("spec.nodeName={node}");
    wait_for("a Ready virt-handler pod", Duration::from_secs(180), || {
        let pods = kubectl_ok(&[
            "-n",
            "kubevirt",
            "get",
            "pods",
            "-l",
            "kubevirt.io=virt-handler",
            "--field-selector",
            &on_node,
            "-o",
            "jsonpath={range .items[*]}{.metadata.name} {.metadata.deletionTimestamp} {.status.conditions[?(@.type=='Ready')].status}{\"\\n\"}{end}",
        ]);
        let ready: Vec<&str> = pods
            .lines()
            .filter_map(|l| {
                let fields: Vec<&str> = l.split_whitespace().collect();
                (fields.len() == 2 && fields[1] == "True").then_some(fields[0])
            })
            .collect();
        (ready.len() == 1).then(|| ready[0].to_owned())
    })
}

/// The guest answers on its console, so it was not disturbed.
pub(super) fn assert_guest_answers(name: &str) {
    console_until(name, "\necho STILL-$((40+2))", "STILL-42", Duration::from_secs(30));
}

/// The test guest `name` applied and Running, with the cleanup that deletes it, its QEMU's pid and
/// its node.
pub(super) fn running_test_guest(name: &str) -> (Cleanup, u32, String) {
    let mut cleanup = Cleanup::new();
    cleanup.apply("vmi", name, &example("vmi-testguest.yaml", name));
    let vmi = wait_for_phase(name, "Running", Duration::from_secs(120));
    let qemu = qemu_of(name).expect("QEMU runs").pid;
    (cleanup, qemu, super::support::field(&vmi, "status.nodeName"))
}

/// The guest `name` went through a handler change untouched: the same QEMU, still Running, and
/// its console answers through the handler now running.
pub(super) fn assert_undisturbed(name: &str, qemu: u32) {
    assert_eq!(qemu_of(name).map(|p| p.pid), Some(qemu), "the same QEMU runs");
    assert_eq!(super::support::vmi_phase(name), "Running");
    assert_guest_answers(name);
}

#[test]
#[ignore = "needs the test cluster: make cluster"]
fn killing_qemu_in_the_launcher_pod_fails_the_vmi_and_an_always_vm_gets_a_new_one() {
    let mut cleanup = Cleanup::new();
    cleanup.apply("vm", "e2e-crash", &example("vm-testguest.yaml", "e2e-crash"));
    wait_for_phase("e2e-crash", "Running", Duration::from_secs(120));
    let first = vmi_uid("e2e-crash");
    let (pod, _) = launcher_pod("e2e-crash");
    // Inside the pod's compute container, as a user with kubectl exec would.
    let kill = "for p in /proc/[0-9]*; do case \"$(readlink \"$p/exe\")\" in *qemu-system*) kill -9 \"${p#/proc/}\";; esac; done";
    let killed_at = std::time::Instant::now();
    kubectl_ok(&["exec", &pod, "-c", "compute", "--", "bash", "-c", kill]);
    wait_for("the VMI to fail", Duration::from_secs(20), || {
        let vmi = get("vmi", "e2e-crash", "default")?;
        (field(&vmi, "metadata.uid") == first && field(&vmi, "status.phase") == "Failed").then_some(())
    });
    assert!(killed_at.elapsed() < Duration::from_secs(20), "Failed within seconds");
    wait_for("a new VMI running", Duration::from_secs(180), || {
        let uid = vmi_uid("e2e-crash");
        (!uid.is_empty() && uid != first && super::support::vmi_phase("e2e-crash") == "Running").then_some(())
    });
}

#[test]
#[ignore = "needs the test cluster: make cluster"]
fn a_new_virt_handler_pod_re_adopts_a_running_vmi_without_disturbing_the_guest() {
    let (_cleanup, qemu, node) = running_test_guest("e2e-adopt");
    let old = handler_pod(&node);
    kubectl_ok(&["-n", "kubevirt", "delete", "pod", &old, "--wait=true", "--timeout=120s"]);
    kubectl_ok(&[
        "-n",
        "kubevirt",
        "rollout",
        "status",
        "daemonset/virt-handler",
        "--timeout=120s",
    ]);
    assert_ne!(handler_pod(&node), old, "the DaemonSet made a new pod");
    // The new handler serves the console and pause: it knows the launcher.
    assert_undisturbed("e2e-adopt", qemu);
    super::support::virtctl_ok(&["pause", "vmi", "e2e-adopt"]);
    wait_for("the new handler to report the pause", Duration::from_secs(30), || {
        let vmi = get("vmi", "e2e-adopt", "default")?;
        vmi["status"]["conditions"]
            .as_array()?
            .iter()
            .any(|c| c["type"] == "Paused" && c["status"] == "True")
            .then_some(())
    });
    super::support::virtctl_ok(&["unpause", "vmi", "e2e-adopt"]);
}

#[test]
#[ignore = "needs the test cluster: make cluster"]
fn a_vmi_starts_exactly_once_when_virt_controller_is_deleted_during_the_start() {
    let mut cleanup = Cleanup::new();
    // Every launcher pod created in the test, seen through a watch.
    let mut watch = kubectl_command(&[
        "get",
        "pods",
        "-l",
        "kubevirt.io=virt-launcher",
        "-w",
        "-o",
        "jsonpath={.metadata.uid} {.metadata.labels.kubevirt\\.io/domain}{.metadata.annotations.kubevirt\\.io/domain}{\"\\n\"}",
    ])
    .stdout(std::process::Stdio::piped())
    .spawn()
    .expect("watch pods");
    std::thread::sleep(Duration::from_millis(500));
    let leader = kubectl_ok(&[
        "-n",
        "kubevirt",
        "get",
        "lease",
        "virt-controller",
        "-o",
        "jsonpath={.spec.holderIdentity}",
    ]);
    cleanup.apply("vmi", "e2e-once", &example("vmi-testguest.yaml", "e2e-once"));
    // The leader goes while it starts the VMI (the pod create may or may not have been sent).
    assert!(!leader.trim().is_empty(), "the virt-controller Lease names its holder");
    kubectl_ok(&["-n", "kubevirt", "delete", "pod", leader.trim(), "--wait=false"]);
    wait_for_phase("e2e-once", "Running", Duration::from_secs(240));
    std::thread::sleep(Duration::from_secs(5));
    let _ = watch.kill();
    let seen = String::from_utf8_lossy(&watch.wait_with_output().expect("watch output").stdout).into_owned();
    let pods: BTreeSet<&str> = seen
        .lines()
        .filter(|l| l.ends_with(" e2e-once"))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(pods.len(), 1, "exactly one launcher pod for the VMI: {seen}");
    let (_, uid) = launcher_pod("e2e-once");
    assert!(pods.contains(uid.as_str()));
    kubectl_ok(&[
        "-n",
        "kubevirt",
        "wait",
        "--for=jsonpath={.status.readyReplicas}=1",
        "deployment/virt-controller",
        "--timeout=120s",
    ]);
}
