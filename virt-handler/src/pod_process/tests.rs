use std::process::Command;

use super::pod_cgroup::PodCgroup;
use super::*;

const UID: &str = "2f1c6a3e-5b7d-4c8e-9f01-23456789abcd";
const OTHER: &str = "99999999-aaaa-bbbb-cccc-dddddddddddd";

#[test]
fn a_launcher_under_the_cgroupfs_driver_runs_in_its_pod_under_v1_and_v2() {
    let v1 = format!(
        "12:pids:/kubepods/besteffort/pod{UID}/0123abcd\n4:memory:/kubepods/besteffort/pod{UID}/0123abcd\n\
         1:name=systemd:/kubepods/besteffort/pod{UID}/0123abcd\n0::/\n"
    );
    assert!(runs_in_pod(&v1, UID));
    assert!(runs_in_pod(&format!("0::/kubepods/burstable/pod{UID}/0123abcd\n"), UID));
    assert!(
        runs_in_pod(&format!("0::/kubepods/pod{UID}/0123abcd\n"), UID),
        "a guaranteed pod"
    );
}

#[test]
fn a_launcher_under_the_systemd_driver_runs_in_its_pod() {
    let slice = UID.replace('-', "_");
    let text = format!(
        "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{slice}.slice/cri-containerd-0123.scope\n"
    );
    assert!(runs_in_pod(&text, UID));
    let guaranteed = format!("0::/kubepods.slice/kubepods-pod{slice}.slice/cri-containerd-0123.scope\n");
    assert!(runs_in_pod(&guaranteed, UID));
}

#[test]
fn a_path_seen_from_virt_handlers_own_cgroup_namespace_still_names_the_pod() {
    assert!(runs_in_pod(&format!("0::/../../pod{UID}/0123abcd\n"), UID));
}

#[test]
fn a_process_of_the_node_or_of_another_pod_does_not_run_in_the_pod() {
    assert!(!runs_in_pod("0::/\n", UID), "a process of the node");
    assert!(!runs_in_pod("0::/system.slice/containerd.service\n", UID));
    assert!(!runs_in_pod(&format!("0::/kubepods/besteffort/pod{OTHER}/0123\n"), UID));
    assert!(!runs_in_pod("", UID), "no cgroups at all");
    let slice = OTHER.replace('-', "_");
    assert!(!runs_in_pod(
        &format!("0::/kubepods.slice/kubepods-pod{slice}.slice/x.scope\n"),
        UID
    ));
}

#[test]
fn a_process_that_names_two_pods_is_refused() {
    let text = format!("8:pids:/kubepods/pod{UID}/c\n4:memory:/kubepods/pod{OTHER}/c\n");
    assert!(!runs_in_pod(&text, UID));
}

#[test]
fn components_that_only_look_like_pods_name_none() {
    assert!(!runs_in_pod("0::/podman/libpod-1234.scope\n", UID));
    assert!(!runs_in_pod("0::/pods/pod-not-a-uid\n", UID));
    assert!(
        runs_in_pod(&format!("0::/podman/pod{UID}/x\n"), UID),
        "a component that is no UID neither helps nor hurts"
    );
    // The same UID in the other driver's spelling does not count.
    assert!(!runs_in_pod(
        &format!("0::/kubepods/pod{}/x\n", UID.replace('-', "_")),
        UID
    ));
}

#[test]
fn this_test_process_runs_in_no_pod_and_is_refused_by_pid() {
    let pid = i32::try_from(std::process::id()).expect("pid");
    let error = PodProcess::open(Path::new("/proc"), pid, UID).expect_err("not in the pod");
    let message = error.to_string();
    assert!(matches!(error, PodProcessError::NotInPod { .. }), "{message}");
    assert!(message.contains(&pid.to_string()) && message.contains(UID), "{message}");
}

#[test]
fn a_pid_with_no_process_is_refused() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let error = PodProcess::open(tmp.path(), 4242, UID).expect_err("gone");
    assert!(matches!(error, PodProcessError::Read { .. }), "{error}");
    assert!(error.to_string().contains("4242"), "{error}");
}

/// A child process that is killed and reaped when the test ends, however it ends.
struct Reaped(std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
#[cfg_attr(
    not(feature = "host-tests"),
    ignore = "needs root: make test runs it (feature host-tests)"
)]
fn a_process_in_the_pods_cgroup_is_held_until_it_exits() {
    let cgroup = PodCgroup::create(UID).expect("a pod's cgroup (needs root)");
    // In network and mount namespaces of its own, as a container's process is.
    let mut child = Reaped(
        Command::new("unshare")
            .args(["--net", "--mount", "sleep", "100"])
            .spawn()
            .expect("unshare"),
    );
    cgroup.add(child.0.id()).expect("moving sleep into the pod's cgroup");
    wait_for_namespace_change(child.0.id());
    let pid = i32::try_from(child.0.id()).expect("pid");
    let process = PodProcess::open(Path::new("/proc"), pid, UID).expect("in the pod");
    assert_eq!(process.pid(), pid);
    let namespace = std::fs::read_link(format!("/proc/{pid}/ns/net")).expect("its namespace");
    assert_eq!(
        std::fs::read_link(process.net_namespace()).expect("held namespace"),
        namespace
    );
    assert!(
        process.root().join("proc").exists(),
        "its root is reached through the held directory"
    );
    assert!(
        std::fs::read_to_string(process.mountinfo())
            .expect("mountinfo")
            .contains(" / ")
    );
    // A command virt-handler starts reaches it through the same path.
    let status = Command::new("test")
        .arg("-e")
        .arg(process.net_namespace())
        .status()
        .expect("test");
    assert!(
        status.success(),
        "a child process reaches {}",
        process.net_namespace().display()
    );

    assert!(
        PodProcess::open(Path::new("/proc"), pid, OTHER).is_err(),
        "not another pod's"
    );

    child.0.kill().expect("kill");
    child.0.wait().expect("wait");
    assert!(
        std::fs::read_link(process.net_namespace()).is_err(),
        "once the process has exited nothing is reached through its held directory, whoever gets its pid"
    );
}

/// Waits until `pid` (an `unshare` about to exec) is in a mount namespace other than ours.
fn wait_for_namespace_change(pid: u32) {
    let ours = std::fs::read_link("/proc/self/ns/mnt").expect("our namespace");
    for _ in 0..500 {
        if std::fs::read_link(format!("/proc/{pid}/ns/mnt")).is_ok_and(|theirs| theirs != ours) {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    panic!("process {pid} never left our mount namespace");
}

#[test]
#[cfg_attr(
    not(feature = "host-tests"),
    ignore = "needs root: make test runs it (feature host-tests)"
)]
fn a_process_in_the_pods_cgroup_but_in_the_nodes_namespaces_is_refused() {
    // What CRI-O's conmon looks like when it runs in the pod's cgroup, or runc before it enters a
    // container's namespaces.
    let cgroup = PodCgroup::create(UID).expect("a pod's cgroup (needs root)");
    let child = Reaped(Command::new("sleep").arg("100").spawn().expect("sleep"));
    cgroup.add(child.0.id()).expect("moving sleep into the pod's cgroup");
    let pid = i32::try_from(child.0.id()).expect("pid");
    let error = PodProcess::open(Path::new("/proc"), pid, UID).expect_err("the node's namespaces");
    assert!(matches!(error, PodProcessError::NodeNamespace { .. }), "{error}");
    assert!(error.to_string().contains(&pid.to_string()), "{error}");
}
