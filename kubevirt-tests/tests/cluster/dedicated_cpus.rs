//! Dedicated CPUs through the cluster: the kubelet runs the static CPU manager (cluster/lib/node.sh),
//! virt-handler labels the node `cpumanager=true`, the launcher pod is Guaranteed with a whole CPU
//! and selects that label, and QEMU's vCPU thread is pinned to the CPU the kubelet gave the pod.

use std::time::Duration;

use serde_json::Value;

use super::support::{Cleanup, cluster_dir, example, field, get, kubectl_ok, qemu_of, wait_for, wait_for_phase};

/// The CPUs the kubelet's CPU manager gave container `container` of pod `uid`.
fn exclusive_cpus(uid: &str, container: &str) -> Option<String> {
    let state = std::fs::read_to_string(cluster_dir().join("nodes/node1/kubelet/cpu_manager_state")).ok()?;
    let state: Value = serde_json::from_str(&state).ok()?;
    state["entries"][uid][container].as_str().map(str::to_owned)
}

/// The host CPUs thread `tid` of process `pid` may run on.
fn thread_cpus(pid: u32, tid: &str) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap_or_default()
        .trim()
        .to_owned()
}

/// QEMU's vCPU threads (`CPU <n>/TCG` or `/KVM`) as thread ids.
fn vcpu_threads(pid: u32) -> Vec<String> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|tasks| {
            tasks
                .filter_map(Result::ok)
                .filter(|t| std::fs::read_to_string(t.path().join("comm")).is_ok_and(|comm| comm.starts_with("CPU ")))
                .map(|t| t.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
#[ignore = "needs the test cluster: make cluster"]
fn a_dedicated_vcpu_runs_on_the_cpu_the_kubelet_gave_the_pod() {
    let node = wait_for("virt-handler's cpumanager label", Duration::from_secs(90), || {
        get("node", "node1", "default").filter(|n| field(n, "metadata.labels.cpumanager") == "true")
    });
    assert_eq!(field(&node, "metadata.labels.cpumanager"), "true");

    let mut cleanup = Cleanup::new();
    let manifest = example("vmi-testguest.yaml", "e2e-dedicated").replace(
        "    cpu:\n      cores: 1\n",
        "    cpu:\n      cores: 1\n      dedicatedCpuPlacement: true\n",
    );
    assert!(
        manifest.contains("dedicatedCpuPlacement"),
        "the example changed; update this test"
    );
    cleanup.apply("vmi", "e2e-dedicated", &manifest);
    let vmi = wait_for_phase("e2e-dedicated", "Running", Duration::from_secs(120));

    let pods = kubectl_ok(&[
        "get",
        "pods",
        "-l",
        &format!("kubevirt.io/created-by={}", field(&vmi, "metadata.uid")),
        "-o",
        "json",
    ]);
    let pods: Value = serde_json::from_str(&pods).expect("pods JSON");
    let pod = &pods["items"][0];
    assert_eq!(field(pod, "status.qosClass"), "Guaranteed", "{pod}");
    assert_eq!(field(pod, "spec.nodeSelector.cpumanager"), "true");
    let compute = pod["spec"]["containers"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["name"] == "compute"))
        .expect("compute container");
    assert_eq!(field(compute, "resources.limits.cpu"), "1");
    assert_eq!(field(compute, "resources.requests.cpu"), "1");

    let uid = field(pod, "metadata.uid");
    let given = wait_for(
        "the kubelet's exclusive CPU for compute",
        Duration::from_secs(30),
        || exclusive_cpus(&uid, "compute"),
    );
    assert_ne!(given, "0", "CPU 0 is reserved for the system");
    let qemu = qemu_of("e2e-dedicated").expect("the VMI's QEMU runs");
    let vcpus = vcpu_threads(qemu.pid);
    assert_eq!(vcpus.len(), 1, "one vCPU thread");
    assert_eq!(
        thread_cpus(qemu.pid, &vcpus[0]),
        given,
        "the vCPU is pinned to the kubelet's exclusive CPU"
    );
}
