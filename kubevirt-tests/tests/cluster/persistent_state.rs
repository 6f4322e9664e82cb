//! A VM with a persistent TPM and persistent EFI variables on the real cluster: virt-controller
//! makes its VM state claim on the default class (hostpath-csi), the guest sees the same TPM
//! endorsement key and one more EFI variable after a restart; a live migration to the other node
//! moves the state to a claim there (hostpath-csi's claims are node-local), which a restart finds;
//! the claim is the VM's and goes with it.

use std::time::Duration;

use kubevirt_tests::serial_tap::serial_log;

use super::migration::{condition, delete_finished_migrations, launcher_on, migrations_of};
use super::support::{Cleanup, cluster_dir, field, get, kubectl_ok, virtctl_ok, wait_for, wait_for_phase};

const VM: &str = "e2e-state";

/// The test guest as a VM booting through OVMF with a persistent TPM and persistent EFI
/// variables; its kernel reads the TPM's endorsement key and adds an EFI variable per boot.
fn vm() -> String {
    super::support::example("vm-testguest.yaml", VM)
        .replace(
            "kernelArgs: console=ttyS0 quiet panic=-1",
            "kernelArgs: console=ttyS0 quiet panic=-1 kubevirt_rs.tpm_ek kubevirt_rs.efivars",
        )
        .replace(
            "        firmware:\n",
            "        firmware:\n          bootloader: {efi: {secureBoot: false, persistent: true}}\n",
        )
        .replace(
            "          autoattachPodInterface: false\n",
            "          autoattachPodInterface: false\n          tpm: {persistent: true}\n",
        )
}

/// What the running VMI's guest printed about its TPM key and EFI variables: the two lines.
fn guest_state_lines() -> (String, String, serde_json::Value) {
    let vmi = wait_for_phase(VM, "Running", Duration::from_secs(240));
    let (uid, node) = (field(&vmi, "metadata.uid"), field(&vmi, "status.nodeName"));
    let (_, pod_uid) = launcher_on(&uid, &node).expect("the launcher pod");
    let log = serial_log(&cluster_dir(), &node, &pod_uid, &uid);
    let (ek, efivars) = wait_for("the guest's TPM and EFI lines", Duration::from_secs(180), || {
        let text = std::fs::read_to_string(&log).ok()?;
        let line = |marker: &str| {
            text.lines()
                .find_map(|l| l.split_once(marker).map(|(_, rest)| rest.trim().to_owned()))
        };
        Some((line("KUBEVIRT-RS-GUEST-TPM-EK ")?, line("KUBEVIRT-RS-GUEST-EFIVARS ")?))
    });
    (ek, efivars, vmi)
}

/// The VM's state claims that are not being deleted (a claim a completed pod still names stays,
/// Terminating, until that pod goes).
fn state_claims() -> Vec<serde_json::Value> {
    let list: serde_json::Value = serde_json::from_str(&kubectl_ok(&[
        "get",
        "pvc",
        "-l",
        &format!("persistent-state-for={VM}"),
        "-o",
        "json",
    ]))
    .expect("claim list");
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["metadata"]["deletionTimestamp"].is_null())
        .cloned()
        .collect()
}

#[test]
#[ignore = "needs the test cluster: make cluster"]
fn a_vms_persistent_tpm_and_efi_variables_survive_a_restart_on_its_state_claim() {
    let mut cleanup = Cleanup::new();
    cleanup.apply("vm", VM, &vm());
    let (ek, efivars, vmi) = guest_state_lines();
    assert!(ek.starts_with("rc=00000000 "), "the TPM has its endorsement key: {ek}");
    assert_eq!(efivars, "1", "the first boot's variable");

    let claims = state_claims();
    assert_eq!(claims.len(), 1, "one state claim: {claims:?}");
    let claim = &claims[0];
    let claim_name = field(claim, "metadata.name");
    assert!(
        claim_name.starts_with(&format!("persistent-state-for-{VM}-")),
        "{claim_name}"
    );
    assert_eq!(
        field(claim, "spec.storageClassName"),
        "hostpath-csi",
        "the default class"
    );
    assert_eq!(
        field(claim, "spec.accessModes.0"),
        "ReadWriteOnce",
        "hostpath-csi's profile"
    );
    let vm = get("vm", VM, "default").expect("VM");
    assert_eq!(
        field(claim, "metadata.ownerReferences.0.uid"),
        field(&vm, "metadata.uid")
    );
    let entry = vmi["status"]["volumeStatus"]
        .as_array()
        .and_then(|v| v.iter().find(|s| s["name"] == "persistent-state-for-this-vm"))
        .cloned()
        .expect("the state claim's volume status");
    assert_eq!(field(&entry, "persistentVolumeClaimInfo.claimName"), claim_name);

    let first = field(&vmi, "metadata.uid");
    assert_eq!(
        virtctl_ok(&["restart", VM]).trim(),
        format!("VM {VM} was scheduled to restart")
    );
    wait_for("a new VMI", Duration::from_secs(180), || {
        get("vmi", VM, "default").filter(|v| field(v, "metadata.uid") != first)
    });
    let (ek_again, efivars_again, _) = guest_state_lines();
    assert_eq!(ek_again, ek, "the same TPM state after the restart");
    assert_eq!(
        efivars_again, "2",
        "the EFI variables of the first boot are still there"
    );
    let names: Vec<String> = state_claims().iter().map(|c| field(c, "metadata.name")).collect();
    assert_eq!(names, std::slice::from_ref(&claim_name), "the same claim");

    let target_claim = migrates_with_its_state(&claim_name);
    assert_eq!(
        virtctl_ok(&["restart", VM]).trim(),
        format!("VM {VM} was scheduled to restart")
    );
    let migrated = field(&get("vmi", VM, "default").expect("VMI"), "metadata.uid");
    wait_for("a new VMI after the migration", Duration::from_secs(180), || {
        get("vmi", VM, "default").filter(|v| field(v, "metadata.uid") != migrated)
    });
    let (ek_moved, efivars_moved, _) = guest_state_lines();
    assert_eq!(ek_moved, ek, "the TPM state moved with the guest");
    assert_eq!(efivars_moved, "3", "so did the EFI variables");
    let names: Vec<String> = state_claims().iter().map(|c| field(c, "metadata.name")).collect();
    assert_eq!(names, [target_claim], "the migration's claim is the VM's now");

    kubectl_ok(&["delete", "vm", VM, "--wait=true", "--timeout=180s"]);
    wait_for("the state claim to go with the VM", Duration::from_secs(120), || {
        state_claims().is_empty().then_some(())
    });
}

/// `virtctl migrate`s the running VM: the migration names the VM's claim as its source and one of
/// its own as the target, and once it succeeded the target's claim is the VM's only state claim.
/// Returns the target claim's name.
fn migrates_with_its_state(source_claim: &str) -> String {
    let vmi = get("vmi", VM, "default").expect("VMI");
    let migratable = wait_for("LiveMigratable=True", Duration::from_secs(60), || {
        condition(&get("vmi", VM, "default")?, "LiveMigratable").filter(|c| c["status"] == "True")
    });
    assert_eq!(migratable["status"], "True");
    let source_node = field(&vmi, "status.nodeName");
    delete_finished_migrations(VM);
    assert_eq!(
        virtctl_ok(&["migrate", VM]).trim(),
        format!("VM {VM} was scheduled to migrate")
    );
    let migration = wait_for("the migration to succeed", Duration::from_secs(240), || {
        migrations_of(VM).into_iter().find(|m| {
            let phase = field(m, "status.phase");
            assert_ne!(phase, "Failed", "the migration failed: {m}");
            phase == "Succeeded"
        })
    });
    assert_eq!(
        field(&migration, "status.migrationState.sourcePersistentStatePVCName"),
        source_claim
    );
    let target_claim = field(&migration, "status.migrationState.targetPersistentStatePVCName");
    assert!(
        target_claim.starts_with(&format!("persistent-state-for-{VM}-")) && target_claim != source_claim,
        "{target_claim}"
    );
    wait_for("the VMI on the other node", Duration::from_secs(60), || {
        get("vmi", VM, "default").filter(|v| {
            let node = field(v, "status.nodeName");
            !node.is_empty() && node != source_node
        })
    });
    wait_for("the state handed over", Duration::from_secs(120), || {
        let names: Vec<String> = state_claims().iter().map(|c| field(c, "metadata.name")).collect();
        (names == [target_claim.clone()]).then_some(())
    });
    target_claim
}
