//! The unprivileged launcher pod on the real cluster (docs/security.md): a VMI in a namespace that
//! enforces Kubernetes' `restricted` Pod Security Standard is admitted, runs as uid 107 with no
//! capability, answers on its console, and serves a pod on the cluster network.

use std::time::Duration;

use super::support::{
    Cleanup, console_until_in, example, field, get, kubectl, kubectl_ok, pod_processes, pod_reaches_guest_web_server,
    wait_for_phase_in,
};

const NAMESPACE: &str = "e2e-restricted";
const NAME: &str = "e2e-unprivileged";

/// A field of `/proc/<pid>/status`.
fn status_field(pid: u32, name: &str) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':').map(|v| v.trim().to_owned()))
        .unwrap_or_default()
}

/// Creates the namespace that enforces `restricted`, and checks that it does.
fn restricted_namespace(cleanup: &mut Cleanup) {
    cleanup.apply_in(
        "default",
        "namespace",
        NAMESPACE,
        &format!(
            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {NAMESPACE}\n  labels:\n    \
             pod-security.kubernetes.io/enforce: restricted\n    pod-security.kubernetes.io/enforce-version: latest\n"
        ),
    );
    // The namespace really refuses what the standard forbids: a pod asking to run as root.
    let refused = kubectl(&[
        "-n",
        NAMESPACE,
        "run",
        "e2e-root",
        "--image=localhost/kubevirt-rs/testclient:latest",
        "--dry-run=server",
        "--overrides={\"spec\":{\"securityContext\":{\"runAsUser\":0}}}",
    ]);
    let refusal = String::from_utf8_lossy(&refused.stderr).into_owned();
    assert!(
        !refused.status.success() && refusal.contains("violates PodSecurity"),
        "the namespace enforces restricted: {refusal}"
    );
}

/// The launcher pod's settings, and what runs in it: uid 107 with no capability, seen from inside
/// (`kubectl exec`) and from the node.
fn assert_unprivileged(pod: &serde_json::Value) {
    for (path, expected) in [
        ("spec.securityContext.runAsUser", "107"),
        ("spec.securityContext.runAsGroup", "107"),
        ("spec.securityContext.runAsNonRoot", "true"),
        ("spec.securityContext.seccompProfile.type", "RuntimeDefault"),
        ("spec.containers.0.name", "compute"),
        ("spec.containers.0.securityContext.allowPrivilegeEscalation", "false"),
        ("spec.containers.0.securityContext.capabilities.drop", "[\"ALL\"]"),
        (
            "spec.containers.0.securityContext.capabilities.add",
            "[\"NET_BIND_SERVICE\"]",
        ),
    ] {
        assert_eq!(field(pod, path), expected, "{path}");
    }
    let pod_name = field(pod, "metadata.name");
    let exec = |command: &[&str]| {
        let mut args = vec!["-n", NAMESPACE, "exec", pod_name.as_str(), "-c", "compute", "--"];
        args.extend_from_slice(command);
        kubectl_ok(&args).trim().to_owned()
    };
    assert_eq!(exec(&["id", "-u"]), "107");
    assert_eq!(exec(&["id", "-g"]), "107");
    assert_eq!(
        exec(&["grep", "CapEff", "/proc/self/status"]),
        "CapEff:\t0000000000000000"
    );
    // The image's capabilities cache made without KVM was used as it is: libvirt did not probe
    // QEMU anew, which would have rewritten a capability file after libvirtd wrote its pid file.
    let reprobed = exec(&[
        "find",
        "/var/cache/kubevirt-rs/libvirt/qemu/capabilities",
        "-name",
        "*.xml",
        "-newer",
        "/var/run/kubevirt-private/libvirt-rs/libvirtd.pid",
    ]);
    assert_eq!(
        reprobed, "",
        "libvirt probed QEMU again: the image's cache was not valid in the pod"
    );
    assert_ne!(
        exec(&[
            "find",
            "/var/cache/kubevirt-rs/libvirt/qemu/capabilities",
            "-name",
            "*.xml"
        ]),
        "",
        "the pod has a capabilities cache"
    );
    let processes = pod_processes(&field(pod, "metadata.uid"));
    for program in ["virt-launcher", "libvirtd"] {
        assert!(
            processes.iter().any(|p| p.program == program),
            "{program} runs in the pod: {:?}",
            processes.iter().map(|p| &p.program).collect::<Vec<_>>()
        );
    }
    assert!(
        processes.iter().any(|p| p.program.starts_with("qemu-system")),
        "QEMU runs in the pod"
    );
    assert!(
        !processes.iter().any(|p| p.program == "virtlogd"),
        "no virtlogd runs in the pod: QEMU writes its own logs"
    );
    for process in processes.iter().filter(|p| p.program != "pause") {
        assert_eq!(
            status_field(process.pid, "Uid"),
            "107\t107\t107\t107",
            "{}",
            process.cmdline
        );
        assert_eq!(
            status_field(process.pid, "CapEff"),
            "0000000000000000",
            "{}",
            process.cmdline
        );
    }
}

#[test]
#[ignore = "needs the test cluster: make cluster"]
fn a_vmi_runs_unprivileged_under_the_restricted_pod_security_standard() {
    let mut cleanup = Cleanup::new();
    restricted_namespace(&mut cleanup);
    let manifest = example("vmi-testguest-masquerade.yaml", NAME).replace("  namespace: default\n", "");
    cleanup.apply_in(NAMESPACE, "vmi", NAME, &manifest);
    let vmi = wait_for_phase_in(NAMESPACE, NAME, "Running", Duration::from_secs(180));
    assert_eq!(
        field(&vmi, "status.runtimeUser"),
        "107",
        "virt-controller recorded the launcher's user"
    );

    let uid = field(&vmi, "metadata.uid");
    let pods = kubectl_ok(&[
        "-n",
        NAMESPACE,
        "get",
        "pods",
        "-l",
        &format!("kubevirt.io/created-by={uid}"),
        "-o",
        "jsonpath={.items[0].metadata.name}",
    ]);
    let pod = get("pod", pods.trim(), NAMESPACE).expect("the launcher pod");
    assert_unprivileged(&pod);

    // The guest took its lease from the launcher's DHCP server (port 67 as uid 107), answers on
    // its console, and a pod reaches its web server.
    console_until_in(
        NAMESPACE,
        NAME,
        "\nip -4 addr show eth0",
        "inet 10.0.2.2/24",
        Duration::from_secs(60),
    );
    let address = field(&vmi, "status.interfaces.0.ipAddress");
    pod_reaches_guest_web_server(&mut cleanup, "e2e-unprivileged-client", &address);
}
