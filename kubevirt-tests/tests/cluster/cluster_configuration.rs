//! The KubeVirt CR's configuration reaches virt-handler while it runs, as upstream's: a VMI started
//! after a change gets it (here the SMBIOS strings its guest reads), and no component restarts.

use std::time::Duration;

use super::support::{Cleanup, console_until, example, kubectl_ok, patch_kubevirt, qemu_of, wait_for, wait_for_phase};

const MANUFACTURER: &str = "E2E-Configured-Corp";

/// The components' pods: name, uid and restart count, a line each, sorted.
fn component_pods() -> Vec<String> {
    let listed = kubectl_ok(&[
        "-n",
        "kubevirt",
        "get",
        "pods",
        "-l",
        "kubevirt.io in (virt-handler,virt-controller,virt-api)",
        "-o",
        "jsonpath={range .items[*]}{.metadata.name} {.metadata.uid} {.status.containerStatuses[*].restartCount}{\"\\n\"}{end}",
    ]);
    let mut pods: Vec<String> = listed.lines().filter(|l| !l.is_empty()).map(str::to_owned).collect();
    pods.sort();
    pods
}

/// Puts the cluster's SMBIOS strings back however the test ends.
struct SmbiosUnset;

impl Drop for SmbiosUnset {
    fn drop(&mut self) {
        // No panic here: this runs while a failed test unwinds too.
        let _ = patch_kubevirt(&serde_json::json!({"spec": {"configuration": {"smbios": null}}}));
    }
}

#[test]
#[ignore = "needs the test cluster: make cluster"]
fn a_configuration_change_reaches_new_vmis_through_virt_handler_without_a_restart() {
    let before = component_pods();
    assert!(
        before.iter().filter(|p| p.starts_with("virt-handler-")).count() >= 1,
        "virt-handler runs: {before:?}"
    );
    let _unset = SmbiosUnset;
    let patched =
        patch_kubevirt(&serde_json::json!({"spec": {"configuration": {"smbios": {"manufacturer": MANUFACTURER}}}}));
    assert!(
        patched.status.success(),
        "the SMBIOS patch: {}",
        String::from_utf8_lossy(&patched.stderr)
    );
    // Every handler has taken the change (it logs each configuration it takes up).
    wait_for(
        "every virt-handler to take the new configuration",
        Duration::from_secs(60),
        || {
            let logs = kubectl_ok(&[
                "-n",
                "kubevirt",
                "logs",
                "-l",
                "kubevirt.io=virt-handler",
                "--tail=-1",
                "--prefix",
            ]);
            let taken = logs
                .lines()
                .filter(|l| l.contains("the cluster configuration changed") && l.contains(MANUFACTURER))
                .filter_map(|l| l.split_once(' ').map(|(pod, _)| pod.to_owned()))
                .collect::<std::collections::BTreeSet<_>>();
            let handlers = before.iter().filter(|p| p.starts_with("virt-handler-")).count();
            (taken.len() == handlers).then_some(())
        },
    );

    let mut cleanup = Cleanup::new();
    cleanup.apply(
        "vmi",
        "e2e-configured",
        &example("vmi-testguest.yaml", "e2e-configured"),
    );
    wait_for_phase("e2e-configured", "Running", Duration::from_secs(120));
    let qemu = qemu_of("e2e-configured").expect("QEMU of e2e-configured runs on a node");
    assert!(
        qemu.cmdline.contains(&format!("manufacturer={MANUFACTURER}")),
        "QEMU gets the cluster's SMBIOS manufacturer: {}",
        qemu.cmdline
    );
    console_until(
        "e2e-configured",
        "\ncat /sys/class/dmi/id/sys_vendor",
        MANUFACTURER,
        Duration::from_secs(90),
    );
    assert_eq!(
        component_pods(),
        before,
        "no component was restarted or replaced for the change"
    );
}
