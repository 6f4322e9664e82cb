//! Live migration's API on the real cluster: the LiveMigratable condition, `virtctl migrate` and
//! the migration it creates through virt-api and the migration webhooks, the target pod
//! virt-controller creates (kept off the VMI's node), a second migration refused, and
//! `virtctl migrate-cancel` deleting the migration and its target pod with the guest untouched;
//! `kubectl drain` of the node refused by the pod-eviction webhook, which marks the VMI for
//! evacuation, and the evacuation's migration.
//!
//! The test cluster has one node, and the target pod's anti-affinity keeps it off the node the
//! VMI runs on, so the migration waits in Scheduling until cancelled. Moving a guest between two
//! nodes is tested with two network namespaces as nodes (virt-launcher's `cluster_run` migration
//! tests, virt-handler's two-handler test).

use std::time::Duration;

use super::support::{
    Cleanup, example, field, get, kubectl, kubectl_ok, kubectl_stdin, virtctl, virtctl_ok, wait_for, wait_for_phase,
};

const VM: &str = "e2e-migrate";

fn migrations() -> Vec<serde_json::Value> {
    let text = kubectl_ok(&["get", "vmim", "-l", &format!("kubevirt.io/vmi-name={VM}"), "-o", "json"]);
    let list: serde_json::Value = serde_json::from_str(&text).expect("list JSON");
    list["items"].as_array().cloned().unwrap_or_default()
}

fn target_pods(migration_uid: &str) -> Vec<serde_json::Value> {
    let text = kubectl_ok(&[
        "get",
        "pods",
        "-l",
        &format!("kubevirt.io/migrationJobUID={migration_uid}"),
        "-o",
        "json",
    ]);
    let list: serde_json::Value = serde_json::from_str(&text).expect("list JSON");
    list["items"].as_array().cloned().unwrap_or_default()
}

fn condition(vmi: &serde_json::Value, kind: &str) -> Option<serde_json::Value> {
    vmi["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
        .cloned()
}

#[test]
#[ignore = "needs the test cluster: make cluster"]
fn migrate_creates_a_migration_that_waits_for_another_node_and_cancel_removes_it() {
    let mut cleanup = Cleanup::new();
    cleanup.apply("vm", VM, &example("vm-testguest.yaml", VM));
    let vmi = wait_for_phase(VM, "Running", Duration::from_secs(180));
    let (uid, node) = (field(&vmi, "metadata.uid"), field(&vmi, "status.nodeName"));
    let vmi = wait_for("the LiveMigratable condition", Duration::from_secs(30), || {
        get("vmi", VM, "default").filter(|v| condition(v, "LiveMigratable").is_some())
    });
    assert_eq!(
        condition(&vmi, "LiveMigratable").map(|c| c["status"].clone()),
        Some(serde_json::json!("True")),
        "no pod network, no shared disk to worry about"
    );
    assert_eq!(
        field(&vmi, "status.migrationMethod"),
        "BlockMigration",
        "the containerDisk is copied"
    );

    assert_eq!(
        virtctl_ok(&["migrate", VM]).trim(),
        format!("VM {VM} was scheduled to migrate")
    );
    let migration = wait_for("the migration", Duration::from_secs(30), || {
        migrations().into_iter().next()
    });
    let name = field(&migration, "metadata.name");
    assert!(name.starts_with("kubevirt-migrate-vm-"), "{name}");
    assert_eq!(field(&migration, "spec.vmiName"), VM);
    assert_eq!(
        migration["metadata"]["finalizers"],
        serde_json::json!(["kubevirt.io/migrationJobFinalize"])
    );
    let migration_uid = field(&migration, "metadata.uid");
    let target = wait_for("the target pod", Duration::from_secs(60), || {
        target_pods(&migration_uid).into_iter().next()
    });
    let anti = &target["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"];
    assert_eq!(
        anti[0]["labelSelector"]["matchLabels"]["kubevirt.io/created-by"],
        serde_json::json!(uid)
    );
    wait_for("the migration in Scheduling", Duration::from_secs(60), || {
        get("vmim", &name, "default").filter(|m| field(m, "status.phase") == "Scheduling")
    });
    wait_for(
        "the target pod unschedulable on a one-node cluster",
        Duration::from_secs(60),
        || {
            let pod = target_pods(&migration_uid).into_iter().next()?;
            let scheduled = pod["status"]["conditions"]
                .as_array()?
                .iter()
                .find(|c| c["type"] == "PodScheduled")?
                .clone();
            (scheduled["status"] == "False" && scheduled["reason"] == "Unschedulable").then_some(())
        },
    );
    let table = kubectl_ok(&["get", "vmim", &name]);
    let header: Vec<&str> = table.lines().next().unwrap_or_default().split_whitespace().collect();
    assert_eq!(header, ["NAME", "PHASE", "VMI"], "{table}");

    let second = virtctl(&["migrate", VM]);
    assert!(!second.status.success());
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(stderr.contains("in-flight migration detected"), "{stderr}");

    assert_eq!(
        virtctl_ok(&["migrate-cancel", VM]).trim(),
        format!("VM {VM} was scheduled to migrate-cancel")
    );
    wait_for("the migration gone", Duration::from_secs(60), || {
        get("vmim", &name, "default").is_none().then_some(())
    });
    wait_for("the target pod gone", Duration::from_secs(60), || {
        target_pods(&migration_uid).is_empty().then_some(())
    });
    let after = get("vmi", VM, "default").expect("the VMI");
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

/// On drop: the VMI's migrations deleted and the node uncordoned, whatever the test did. Declared
/// before the test's [`Cleanup`], so the VM is gone first and no new evacuation starts.
#[derive(Default)]
struct UndoDrain {
    node: Option<String>,
    vmi: &'static str,
}

impl Drop for UndoDrain {
    fn drop(&mut self) {
        let label = format!("kubevirt.io/vmi-name={}", self.vmi);
        let _ = kubectl(&["delete", "vmim", "-l", &label, "--ignore-not-found", "--timeout=60s"]);
        if let Some(node) = &self.node {
            let _ = kubectl(&["uncordon", node]);
        }
    }
}

#[test]
#[ignore = "needs the test cluster: make cluster"]
fn drain_is_refused_with_429_and_the_evacuation_creates_a_migration() {
    const NAME: &str = "e2e-evacuate";
    let mut undo = UndoDrain { node: None, vmi: NAME };
    let mut cleanup = Cleanup::new();
    let yaml = example("vm-testguest.yaml", NAME).replace(
        "      terminationGracePeriodSeconds: 30\n",
        "      evictionStrategy: LiveMigrate\n      terminationGracePeriodSeconds: 30\n",
    );
    assert!(yaml.contains("evictionStrategy: LiveMigrate"), "{yaml}");
    cleanup.apply("vm", NAME, &yaml);
    let vmi = wait_for_phase(NAME, "Running", Duration::from_secs(180));
    let (uid, node) = (field(&vmi, "metadata.uid"), field(&vmi, "status.nodeName"));
    wait_for("LiveMigratable=True", Duration::from_secs(30), || {
        get("vmi", NAME, "default").filter(|v| condition(v, "LiveMigratable").is_some_and(|c| c["status"] == "True"))
    });
    undo.node = Some(node.clone());

    let drain = kubectl(&[
        "drain",
        &node,
        "--pod-selector",
        &format!("kubevirt.io/created-by={uid}"),
        "--delete-emptydir-data",
        "--timeout=20s",
    ]);
    let output = format!(
        "{}{}",
        String::from_utf8_lossy(&drain.stdout),
        String::from_utf8_lossy(&drain.stderr)
    );
    assert!(
        !drain.status.success(),
        "the launcher pod must not be evicted: {output}"
    );
    assert!(
        output.contains(&format!(
            "admission webhook \"virt-launcher-eviction-interceptor.kubevirt.io\" denied the request: Eviction triggered evacuation of VMI \"default/{NAME}\""
        )),
        "{output}"
    );

    let marked = get("vmi", NAME, "default").expect("the VMI");
    assert_eq!(field(&marked, "status.evacuationNodeName"), node);
    let migration = wait_for("the evacuation's migration", Duration::from_secs(30), || {
        let text = kubectl_ok(&[
            "get",
            "vmim",
            "-l",
            &format!("kubevirt.io/vmi-name={NAME}"),
            "-o",
            "json",
        ]);
        let list: serde_json::Value = serde_json::from_str(&text).expect("list JSON");
        list["items"].as_array()?.first().cloned()
    });
    let name = field(&migration, "metadata.name");
    assert!(name.starts_with("kubevirt-evacuation-"), "{name}");
    assert_eq!(
        migration["metadata"]["annotations"]["kubevirt.io/evacuationMigration"],
        serde_json::json!(node)
    );
    // One node: the target pod cannot be scheduled anywhere else, so the migration waits.
    wait_for("the evacuation in Scheduling", Duration::from_secs(60), || {
        get("vmim", &name, "default").filter(|m| field(m, "status.phase") == "Scheduling")
    });
    let after = get("vmi", NAME, "default").expect("the VMI");
    assert_eq!(field(&after, "metadata.uid"), uid, "the same VMI");
    assert_eq!(field(&after, "status.phase"), "Running");
    assert_eq!(field(&after, "status.nodeName"), node);
    let launcher = kubectl_ok(&[
        "get",
        "pods",
        "-l",
        &format!("kubevirt.io/created-by={uid}"),
        "-o",
        "name",
    ]);
    assert!(!launcher.trim().is_empty(), "the launcher pod still runs");
}

#[test]
#[ignore = "needs the test cluster: make cluster"]
fn an_unschedulable_target_pod_times_out_and_fails_the_migration() {
    const NAME: &str = "e2e-migrate-timeout";
    let mut cleanup = Cleanup::new();
    cleanup.apply("vm", NAME, &example("vm-testguest.yaml", NAME));
    let vmi = wait_for_phase(NAME, "Running", Duration::from_secs(180));
    let (uid, node) = (field(&vmi, "metadata.uid"), field(&vmi, "status.nodeName"));
    wait_for("LiveMigratable=True", Duration::from_secs(30), || {
        get("vmi", NAME, "default").filter(|v| condition(v, "LiveMigratable").is_some_and(|c| c["status"] == "True"))
    });
    let migration = format!(
        "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstanceMigration\nmetadata:\n  name: {NAME}\n  namespace: default\n  annotations:\n    kubevirt.io/migrationUnschedulablePodTimeoutSeconds: \"5\"\nspec:\n  vmiName: {NAME}\n"
    );
    cleanup.apply("vmim", NAME, &migration);
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
}
