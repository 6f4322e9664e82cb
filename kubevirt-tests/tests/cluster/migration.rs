//! Live migration between the test cluster's two nodes: `virtctl migrate` moves a running guest
//! to the other node through virt-api, the migration webhooks, virt-controller's target pod (kept
//! off the VMI's node) and the two nodes' virt-handlers. The guest's ticker goes on across the
//! move (no reboot), its largest gap is the downtime, the pod network reaches it before and after,
//! the VMI reports the new node, pod and address, and the source node keeps nothing of it. A
//! second migration is refused while one runs, and a target pod that cannot be scheduled fails
//! its migration at the timeout with the guest untouched. `drain.rs` drains a node;
//! `migration_policy.rs` cancels and times out migrations slowed by a policy.

use std::time::Duration;

use super::support::{
    Cleanup, console_until, field, get, kubectl, kubectl_ok, kubectl_stdin, node_mounts, pod_processes,
    pod_reaches_guest_web_server, virtctl, virtctl_ok, wait_for, wait_for_phase,
};
use kubevirt_tests::serial_tap::{SerialTap, largest_gap, serial_socket};

/// The test guest as a VM on the pod network (masquerade) whose serial port ticks every 10 ms
/// (`kubevirt_rs.ticker`), plus `kernel_args`; `labels` (YAML lines at the template's label
/// indent) and `spec` (lines at the VMI spec's indent, e.g. an eviction strategy) are added.
pub(super) fn migratable_vm(name: &str, kernel_args: &str, labels: &str, spec: &str) -> String {
    format!(
        "apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: {name}
  namespace: default
spec:
  runStrategy: Always
  template:
    metadata:
      labels:
        kubevirt.io/vm: {name}
{labels}    spec:
      terminationGracePeriodSeconds: 30
{spec}      domain:
        cpu:
          cores: 1
        memory:
          guest: 256Mi
        features:
          acpi: {{}}
        resources:
          requests:
            memory: 256Mi
        firmware:
          kernelBoot:
            kernelArgs: console=ttyS0 quiet panic=-1 kubevirt_rs.ticker {kernel_args}
            container:
              image: localhost/kubevirt-rs/testguest:latest
              imagePullPolicy: IfNotPresent
              kernelPath: /boot/vmlinuz
              initrdPath: /boot/initrd.img
        devices:
          autoattachGraphicsDevice: false
          interfaces:
            - name: default
              masquerade: {{}}
          disks:
            - name: containerdisk
              disk:
                bus: virtio
      networks:
        - name: default
          pod: {{}}
      volumes:
        - name: containerdisk
          containerDisk:
            image: localhost/kubevirt-rs/testguest:latest
            imagePullPolicy: IfNotPresent
"
    )
}

/// Deletes the finished migrations of VMI `vmi`: they stay (the newest five per VMI), and an
/// earlier run's are not this one's.
pub(super) fn delete_finished_migrations(vmi: &str) {
    let _ = kubectl(&[
        "delete",
        "vmim",
        "-l",
        &format!("kubevirt.io/vmi-name={vmi}"),
        "--ignore-not-found",
    ]);
}

/// The migrations of VMI `vmi`.
pub(super) fn migrations_of(vmi: &str) -> Vec<serde_json::Value> {
    items(&kubectl_ok(&[
        "get",
        "vmim",
        "-l",
        &format!("kubevirt.io/vmi-name={vmi}"),
        "-o",
        "json",
    ]))
}

fn items(text: &str) -> Vec<serde_json::Value> {
    let list: serde_json::Value = serde_json::from_str(text).expect("list JSON");
    list["items"].as_array().cloned().unwrap_or_default()
}

/// The pods labelled as the target of the migration with `migration_uid`.
pub(super) fn target_pods(migration_uid: &str) -> Vec<serde_json::Value> {
    items(&kubectl_ok(&[
        "get",
        "pods",
        "-l",
        &format!("kubevirt.io/migrationJobUID={migration_uid}"),
        "-o",
        "json",
    ]))
}

/// The launcher pod of `vmi_uid` on `node`: its name and UID.
pub(super) fn launcher_on(vmi_uid: &str, node: &str) -> Option<(String, String)> {
    let pods = items(&kubectl_ok(&[
        "get",
        "pods",
        "-l",
        &format!("kubevirt.io/created-by={vmi_uid}"),
        "--field-selector",
        &format!("spec.nodeName={node}"),
        "-o",
        "json",
    ]));
    let pod = pods.first()?;
    Some((field(pod, "metadata.name"), field(pod, "metadata.uid")))
}

pub(super) fn condition(vmi: &serde_json::Value, kind: &str) -> Option<serde_json::Value> {
    vmi["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
        .cloned()
}

/// Waits for VMI `name` to be Running and LiveMigratable; returns it.
pub(super) fn running_and_migratable(name: &str) -> serde_json::Value {
    wait_for_phase(name, "Running", Duration::from_secs(180));
    wait_for("LiveMigratable=True", Duration::from_secs(60), || {
        get("vmi", name, "default").filter(|v| condition(v, "LiveMigratable").is_some_and(|c| c["status"] == "True"))
    })
}

/// The pod address the VMI reports for its interface.
fn reported_address(vmi: &serde_json::Value) -> String {
    vmi["status"]["interfaces"][0]["ipAddress"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[test]
#[ignore = "needs the test cluster: make cluster"]
#[allow(
    clippy::too_many_lines,
    reason = "one migration, checked step by step as the issue lists them"
)]
fn virtctl_migrate_moves_the_guest_to_the_other_node_undisturbed() {
    const VM: &str = "e2e-migrate";
    let mut cleanup = Cleanup::new();
    delete_finished_migrations(VM);
    cleanup.apply("vm", VM, &migratable_vm(VM, "", "", ""));
    let vmi = running_and_migratable(VM);
    assert_eq!(
        field(&vmi, "status.migrationMethod"),
        "BlockMigration",
        "the containerDisk is copied"
    );
    let (uid, source_node) = (field(&vmi, "metadata.uid"), field(&vmi, "status.nodeName"));
    let (source_pod, source_pod_uid) = launcher_on(&uid, &source_node).expect("the source pod");
    let address_before = wait_for("the guest's address", Duration::from_secs(60), || {
        let address = reported_address(&get("vmi", VM, "default")?);
        (!address.is_empty()).then_some(address)
    });
    pod_reaches_guest_web_server(&mut cleanup, "e2e-migrate-before", &address_before);

    let cluster = super::support::cluster_dir();
    let source_tap = SerialTap::open(
        &serial_socket(&cluster, &source_node, &source_pod_uid, &uid),
        Duration::from_secs(30),
    )
    .expect("the source pod's serial socket");
    wait_for("the guest's ticker", Duration::from_secs(60), || {
        (source_tap.ticks().len() > 50).then_some(())
    });
    assert_eq!(
        virtctl_ok(&["migrate", VM]).trim(),
        format!("VM {VM} was scheduled to migrate")
    );
    let migration = wait_for("the migration", Duration::from_secs(30), || {
        migrations_of(VM)
            .into_iter()
            .find(|m| field(m, "status.phase") != "Succeeded")
    });
    let name = field(&migration, "metadata.name");
    assert!(name.starts_with("kubevirt-migrate-vm-"), "{name}");
    let migration_uid = field(&migration, "metadata.uid");
    let second = virtctl(&["migrate", VM]);
    assert!(!second.status.success(), "a second migration while one runs");
    assert!(
        String::from_utf8_lossy(&second.stderr).contains("in-flight migration detected"),
        "{}",
        String::from_utf8_lossy(&second.stderr)
    );
    let (target_pod, target_pod_uid, target_node) =
        wait_for("the target pod on a node", Duration::from_secs(90), || {
            let pod = target_pods(&migration_uid).into_iter().next()?;
            let node = field(&pod, "spec.nodeName");
            (!node.is_empty()).then(|| (field(&pod, "metadata.name"), field(&pod, "metadata.uid"), node))
        });
    assert_ne!(
        target_node, source_node,
        "the anti-affinity keeps the target off the source node"
    );
    let target_tap = SerialTap::open(
        &serial_socket(&cluster, &target_node, &target_pod_uid, &uid),
        Duration::from_secs(120),
    )
    .expect("the target pod's serial socket");
    let done = wait_for("the migration Succeeded", Duration::from_secs(240), || {
        get("vmim", &name, "default").filter(|m| matches!(field(m, "status.phase").as_str(), "Succeeded" | "Failed"))
    });
    assert_eq!(field(&done, "status.phase"), "Succeeded", "{done}");
    wait_for("the guest ticking on the target", Duration::from_secs(30), || {
        (target_tap.ticks().len() > 50).then_some(())
    });

    // The guest did not reboot: its counter and uptime go straight on from the source's.
    let (before, after) = (source_tap.ticks(), target_tap.ticks());
    let (last, first) = (
        before.last().expect("source ticks"),
        after.first().expect("target ticks"),
    );
    assert!(
        target_tap.connected_at() < last.at,
        "the test's tap of the target pod connected after the guest moved: its ticks cannot show the gap"
    );
    assert!(
        first.n > last.n && first.n - last.n <= 2,
        "the ticker goes on: {last:?} then {first:?}\n{}",
        target_tap.text()
    );
    assert!(first.uptime >= last.uptime, "uptime grows: {last:?} then {first:?}");
    let downtime = largest_gap(&before, &after);
    println!("e2e migration between nodes: downtime {} ms", downtime.as_millis());
    assert!(downtime < Duration::from_secs(10), "downtime {downtime:?}");
    drop((source_tap, target_tap));

    let vmi = get("vmi", VM, "default").expect("the VMI");
    assert_eq!(field(&vmi, "metadata.uid"), uid, "the same VMI");
    assert_eq!(field(&vmi, "status.phase"), "Running");
    assert_eq!(field(&vmi, "status.nodeName"), target_node);
    let state = &vmi["status"]["migrationState"];
    assert_eq!(state["completed"], true, "{state}");
    assert_eq!(state["migrationUid"], migration_uid.as_str());
    assert_eq!(
        (state["sourceNode"].as_str(), state["targetNode"].as_str()),
        (Some(source_node.as_str()), Some(target_node.as_str()))
    );
    assert_eq!(
        (state["sourcePod"].as_str(), state["targetPod"].as_str()),
        (Some(source_pod.as_str()), Some(target_pod.as_str()))
    );
    assert!(
        state["startTimestamp"].is_string() && state["endTimestamp"].is_string(),
        "{state}"
    );

    // The pod network reaches the guest at the target pod's address, which the VMI reports.
    let target_address = field(
        &get("pod", &target_pod, "default").expect("the target pod"),
        "status.podIP",
    );
    let address_after = wait_for(
        "the VMI reporting the target pod's address",
        Duration::from_secs(60),
        || {
            let address = reported_address(&get("vmi", VM, "default")?);
            (address == target_address).then_some(address)
        },
    );
    pod_reaches_guest_web_server(&mut cleanup, "e2e-migrate-after", &address_after);

    // The source pod completes and leaves nothing on its node.
    wait_for("the source pod Succeeded", Duration::from_secs(90), || {
        let pod = get("pod", &source_pod, "default")?;
        (field(&pod, "status.phase") == "Succeeded").then_some(())
    });
    wait_for("no process of the source pod", Duration::from_secs(30), || {
        pod_processes(&source_pod_uid).is_empty().then_some(())
    });
    let qemus: Vec<_> = kubevirt_tests::node_processes::of_program("qemu-system-x86_64")
        .into_iter()
        .filter(|p| p.cmdline.contains(&format!("guest=default_{VM},")))
        .collect();
    assert_eq!(qemus.len(), 1, "one QEMU runs, the target's: {qemus:?}");
    wait_for(
        "no mount of the source pod on its node",
        Duration::from_secs(60),
        || (!node_mounts(&source_node).contains(&source_pod_uid)).then_some(()),
    );
    let leftovers = sockets_under(
        &super::support::cluster_dir()
            .join("nodes")
            .join(&source_node)
            .join("kubelet/pods")
            .join(&source_pod_uid),
    );
    assert!(leftovers.is_empty(), "sockets left in the source pod: {leftovers:?}");

    console_until(VM, "\necho MOVED-$((40+2))", "MOVED-42", Duration::from_secs(60));
}

/// Every unix socket under `dir`.
fn sockets_under(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    use std::os::unix::fs::FileTypeExt as _;
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            let Ok(kind) = entry.file_type() else { continue };
            if kind.is_dir() {
                stack.push(entry.path());
            } else if kind.is_socket() {
                found.push(entry.path());
            }
        }
    }
    found
}

#[test]
#[ignore = "needs the test cluster: make cluster"]
fn an_unschedulable_target_pod_times_out_and_fails_the_migration() {
    const NAME: &str = "e2e-migrate-timeout";
    let mut cleanup = Cleanup::new();
    cleanup.apply("vm", NAME, &super::support::example("vm-testguest.yaml", NAME));
    let vmi = wait_for_phase(NAME, "Running", Duration::from_secs(180));
    let (uid, node) = (field(&vmi, "metadata.uid"), field(&vmi, "status.nodeName"));
    wait_for("LiveMigratable=True", Duration::from_secs(30), || {
        get("vmi", NAME, "default").filter(|v| condition(v, "LiveMigratable").is_some_and(|c| c["status"] == "True"))
    });
    // No node has room for it: no node has the label the migration adds to the target's selector.
    let migration = format!(
        "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstanceMigration\nmetadata:\n  name: {NAME}\n  namespace: default\n  annotations:\n    kubevirt.io/migrationUnschedulablePodTimeoutSeconds: \"5\"\nspec:\n  vmiName: {NAME}\n  addedNodeSelector:\n    kubevirt-rs.io/e2e-no-such-node: \"true\"\n"
    );
    cleanup.apply("vmim", NAME, &migration);
    let table = kubectl_ok(&["get", "vmim", NAME]);
    let header: Vec<&str> = table.lines().next().unwrap_or_default().split_whitespace().collect();
    assert_eq!(header, ["NAME", "PHASE", "VMI"], "{table}");
    let failed = wait_for("the migration Failed", Duration::from_secs(90), || {
        get("vmim", NAME, "default").filter(|m| field(m, "status.phase") == "Failed")
    });
    let migration_uid = field(&failed, "metadata.uid");
    wait_for("the target pod gone", Duration::from_secs(60), || {
        target_pods(&migration_uid).is_empty().then_some(())
    });
    let events = kubectl_ok(&[
        "get",
        "events",
        "--field-selector",
        &format!("involvedObject.name={NAME},involvedObject.kind=VirtualMachineInstanceMigration"),
        "-o",
        "json",
    ]);
    assert!(
        events.contains("unschedulable pod timeout period exceeded"),
        "no deletion event in {events}"
    );
    // An unscheduled pod goes at once, so the migration may see it terminating or already gone.
    assert!(
        events.contains("Migration failed because target pod shutdown during migration")
            || events.contains("Migration target pod was removed during active migration."),
        "no failure event in {events}"
    );
    let after = get("vmi", NAME, "default").expect("the VMI");
    assert_eq!(field(&after, "metadata.uid"), uid, "the same VMI");
    assert_eq!(field(&after, "status.phase"), "Running");
    assert_eq!(field(&after, "status.nodeName"), node);

    let missing = kubectl_stdin(
        &["create", "-f", "-"],
        "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstanceMigration\nmetadata:\n  name: e2e-nothing\n  namespace: default\nspec:\n  vmiName: e2e-nothing\n",
    );
    assert!(!missing.status.success());
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert!(
        stderr.contains("the VMI \"default/e2e-nothing\" does not exist"),
        "{stderr}"
    );
    let _ = kubectl(&["delete", "vmim", "e2e-nothing", "--ignore-not-found"]);
}
