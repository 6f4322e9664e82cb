//! Post-copy between the real nodes. A `MigrationPolicy` with `allowPostCopy` makes libvirt turn
//! on QEMU's post-copy capability when the migration starts, and the target's QEMU (uid 107, no
//! capabilities) needs `userfaultfd` for it. The kernel gives it to an unprivileged process only
//! where `vm.unprivileged_userfaultfd` is 1 (0 is the default since 5.11), and the launcher pod's
//! seccomp profile (the runtime's default) denies the call either way. So the migration fails at
//! once with QEMU's reason and what would allow it, and the guest stays Running on its source, as
//! in upstream KubeVirt without its own seccomp profile. Tried with the sysctl at 0 and at 1; the
//! test puts back the value it found.

use std::time::Duration;

use super::migration::{delete_finished_migrations, migratable_vm, migrations_of, running_and_migratable};
use super::support::{Cleanup, console_until, field, get, virtctl_ok, wait_for};

const VM: &str = "e2e-post-copy";
const POLICY: &str = "e2e-post-copy-lane";
const USERFAULTFD_SYSCTL: &str = "/proc/sys/vm/unprivileged_userfaultfd";

/// A sysctl set for the test and restored when this ends.
struct Sysctl {
    path: &'static str,
    found: String,
}

impl Sysctl {
    fn set(path: &'static str, value: &str) -> Self {
        let found = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {path}: {e}"));
        std::fs::write(path, value).unwrap_or_else(|e| panic!("write {value} to {path}: {e}"));
        Self {
            path,
            found: found.trim().to_owned(),
        }
    }
}

impl Drop for Sysctl {
    fn drop(&mut self) {
        if let Err(e) = std::fs::write(self.path, &self.found) {
            eprintln!("cannot restore {} to {}: {e}", self.path, self.found);
        }
    }
}

#[test]
#[ignore = "needs the test cluster: make cluster"]
fn post_copy_without_userfaultfd_is_refused_by_name_and_the_guest_stays() {
    let mut cleanup = Cleanup::new();
    cleanup.apply_in(
        "default",
        "migrationpolicy",
        POLICY,
        &format!(
            "apiVersion: migrations.kubevirt.io/v1alpha1
kind: MigrationPolicy
metadata:
  name: {POLICY}
spec:
  selectors:
    virtualMachineInstanceSelector:
      kubevirt-rs.io/e2e-lane: post-copy
  allowPostCopy: true
  completionTimeoutPerGiB: 1
"
        ),
    );
    delete_finished_migrations(VM);
    cleanup.apply(
        "vm",
        VM,
        &migratable_vm(
            VM,
            "kubevirt_rs.dirty",
            "        kubevirt-rs.io/e2e-lane: post-copy\n",
            "",
        ),
    );
    let vmi = running_and_migratable(VM);
    let (uid, node) = (field(&vmi, "metadata.uid"), field(&vmi, "status.nodeName"));

    for userfaultfd in ["0", "1"] {
        let _sysctl = Sysctl::set(USERFAULTFD_SYSCTL, userfaultfd);
        let earlier: Vec<String> = migrations_of(VM).iter().map(|m| field(m, "metadata.uid")).collect();
        virtctl_ok(&["migrate", VM]);
        let failed = wait_for("the migration Failed", Duration::from_secs(180), || {
            migrations_of(VM)
                .into_iter()
                .find(|m| field(m, "status.phase") == "Failed" && !earlier.contains(&field(m, "metadata.uid")))
        });
        let vmi = get("vmi", VM, "default").expect("the VMI");
        let state = &vmi["status"]["migrationState"];
        assert_eq!(state["migrationUid"], failed["metadata"]["uid"], "{state}");
        assert_eq!(state["migrationPolicyName"], POLICY, "{state}");
        assert_eq!(state["migrationConfiguration"]["allowPostCopy"], true, "{state}");
        let reason = state["failureReason"].as_str().unwrap_or_default();
        assert!(
            reason.contains("Postcopy is not supported"),
            "vm.unprivileged_userfaultfd={userfaultfd}: QEMU's own reason: {reason}"
        );
        assert!(
            reason.contains("sysctl vm.unprivileged_userfaultfd is 1 and the pod's seccomp profile allows it")
                && reason.ends_with("turn allowPostCopy off)"),
            "{reason}"
        );
        assert_eq!(field(&vmi, "metadata.uid"), uid, "the same VMI");
        assert_eq!(field(&vmi, "status.phase"), "Running");
        assert_eq!(field(&vmi, "status.nodeName"), node, "still on its source");
    }
    console_until(VM, "\necho STAYED-$((40+3))", "STAYED-43", Duration::from_secs(60));
}
