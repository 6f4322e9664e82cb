//! `MigrationPolicy` on the real cluster: a policy selecting the VMI by label gives its migrations
//! the policy's bandwidth (libvirt's limit) and completion timeout (the launcher's monitor), and
//! the VMI's migration state names it. A guest rewriting its memory at 1 MiB/s cannot finish:
//! `virtctl migrate-cancel` leaves it on its source, Running, and the next migration is aborted
//! when the policy's budget runs out, the guest untouched. The webhook refuses a negative value.

use std::time::Duration;

use super::migration::{delete_finished_migrations, migratable_vm, migrations_of, running_and_migratable, target_pods};
use super::support::{Cleanup, console_until, field, get, kubectl_stdin, virtctl_ok, wait_for};

const VM: &str = "e2e-policy";
const POLICY: &str = "e2e-slow-lane";

fn policy_yaml(name: &str, extra: &str) -> String {
    format!(
        "apiVersion: migrations.kubevirt.io/v1alpha1
kind: MigrationPolicy
metadata:
  name: {name}
spec:
  selectors:
    virtualMachineInstanceSelector:
      kubevirt-rs.io/e2e-lane: slow
    namespaceSelector:
      kubernetes.io/metadata.name: default
{extra}"
    )
}

/// Waits for the VMI's migration to be running (the source launcher migrates).
fn running_migration() -> serde_json::Value {
    wait_for("the migration Running", Duration::from_secs(180), || {
        migrations_of(VM)
            .into_iter()
            .find(|m| field(m, "status.phase") == "Running")
    })
}

#[test]
#[ignore = "needs the test cluster: make cluster"]
fn a_policys_bandwidth_and_timeout_reach_the_migration_and_cancel_leaves_the_guest() {
    let mut cleanup = Cleanup::new();
    cleanup.apply_in(
        "default",
        "migrationpolicy",
        POLICY,
        &policy_yaml(POLICY, "  bandwidthPerMigration: 1Mi\n  completionTimeoutPerGiB: 20\n"),
    );
    // A policy that matches fewer labels loses to it.
    cleanup.apply_in(
        "default",
        "migrationpolicy",
        "e2e-a-broad-lane",
        "apiVersion: migrations.kubevirt.io/v1alpha1\nkind: MigrationPolicy\nmetadata:\n  name: e2e-a-broad-lane\nspec:\n  selectors:\n    virtualMachineInstanceSelector:\n      kubevirt-rs.io/e2e-lane: slow\n  allowAutoConverge: true\n",
    );
    delete_finished_migrations(VM);
    cleanup.apply(
        "vm",
        VM,
        &migratable_vm(VM, "kubevirt_rs.dirty", "        kubevirt-rs.io/e2e-lane: slow\n", ""),
    );
    let vmi = running_and_migratable(VM);
    let (uid, node) = (field(&vmi, "metadata.uid"), field(&vmi, "status.nodeName"));

    virtctl_ok(&["migrate", VM]);
    let first = running_migration();
    let state = get("vmi", VM, "default").expect("the VMI")["status"]["migrationState"].clone();
    assert_eq!(state["migrationPolicyName"], POLICY, "{state}");
    let config = &state["migrationConfiguration"];
    assert_eq!(config["bandwidthPerMigration"], "1Mi", "{state}");
    assert_eq!(config["completionTimeoutPerGiB"], 20, "{state}");
    assert_eq!(
        config["allowAutoConverge"], false,
        "the broader policy's setting is not applied"
    );

    // Cancelled midway: the guest stays on its source.
    virtctl_ok(&["migrate-cancel", VM]);
    let first_uid = field(&first, "metadata.uid");
    wait_for("the cancelled migration gone", Duration::from_secs(90), || {
        get("vmim", &field(&first, "metadata.name"), "default")
            .is_none()
            .then_some(())
    });
    wait_for("the target pod gone", Duration::from_secs(90), || {
        target_pods(&first_uid).is_empty().then_some(())
    });
    let vmi = wait_for("the abort recorded", Duration::from_secs(60), || {
        get("vmi", VM, "default").filter(|v| v["status"]["migrationState"]["abortStatus"] == "Succeeded")
    });
    assert_eq!(field(&vmi, "metadata.uid"), uid, "the same VMI");
    assert_eq!(field(&vmi, "status.phase"), "Running");
    assert_eq!(field(&vmi, "status.nodeName"), node);

    // Uncancelled, it runs out of the policy's budget (20 s for the first GB) and is aborted.
    virtctl_ok(&["migrate", VM]);
    let second = running_migration();
    let failed = wait_for("the migration Failed", Duration::from_secs(180), || {
        get("vmim", &field(&second, "metadata.name"), "default").filter(|m| field(m, "status.phase") == "Failed")
    });
    let vmi = get("vmi", VM, "default").expect("the VMI");
    let reason = vmi["status"]["migrationState"]["failureReason"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        reason.contains("Live migration is not completed after 20 seconds and has been aborted"),
        "{reason}; {failed}"
    );
    assert_eq!(field(&vmi, "status.phase"), "Running");
    assert_eq!(field(&vmi, "status.nodeName"), node, "still on its source");
    console_until(VM, "\necho STAYED-$((40+2))", "STAYED-42", Duration::from_secs(60));
}

#[test]
#[ignore = "needs the test cluster: make cluster"]
fn the_webhook_refuses_a_negative_completion_timeout() {
    // Were it admitted, it would be deleted, not left to select the other test's VMI.
    let mut cleanup = Cleanup::new();
    cleanup.track("migrationpolicy", "e2e-negative");
    let refused = kubectl_stdin(
        &["create", "-f", "-"],
        &policy_yaml("e2e-negative", "  completionTimeoutPerGiB: -1\n"),
    );
    assert!(!refused.status.success(), "a negative timeout is refused");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    // The CRD's schema sets no minimum: the refusal is the webhook's (422, the field and message).
    assert!(
        stderr.contains("The request is invalid: spec.completionTimeoutPerGiB: must not be negative"),
        "{stderr}"
    );
}
