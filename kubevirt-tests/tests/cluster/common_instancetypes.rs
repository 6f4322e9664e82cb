//! Upstream's common instance types and preferences, deployed by virt-operator: a VM made from
//! `u1.small` and a common preference boots with both applied; an instance type changed by hand
//! is put back whole, without the others being rewritten; turning
//! `commonInstancetypesDeployment` off removes every one the operator labelled and no one
//! else's, and turning it on again brings them back.

use std::time::Duration;

use serde_json::Value;

use super::support::{
    Cleanup, console_until, example, field, get, kubectl_ok, patch_kubevirt, wait_for, wait_for_phase,
};
use super::virt_operator::deployed;

const OURS: &str = "app.kubernetes.io/managed-by=virt-operator,app.kubernetes.io/component=kubevirt";
const INSTANCETYPES: &str = "virtualmachineclusterinstancetypes";
const PREFERENCES: &str = "virtualmachineclusterpreferences";

/// The names of the objects of `resource` with the operator's labels.
fn ours(resource: &str) -> Vec<String> {
    let list: Value = serde_json::from_str(&kubectl_ok(&["get", resource, "-l", OURS, "-o", "json"]))
        .unwrap_or_else(|e| panic!("kubectl get {resource} is JSON: {e}"));
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|item| field(item, "metadata.name"))
        .collect()
}

fn wait_for_counts(instancetypes: usize, preferences: usize) {
    wait_for(
        &format!("{instancetypes} instance types and {preferences} preferences of the operator's"),
        Duration::from_secs(120),
        || (ours(INSTANCETYPES).len() == instancetypes && ours(PREFERENCES).len() == preferences).then_some(()),
    );
}

/// Sets `commonInstancetypesDeployment` (`None`: unset); whether kubectl succeeded.
fn set_deployment(enabled: Option<bool>) -> bool {
    let value = enabled.map_or(Value::Null, |e| serde_json::json!({ "enabled": e }));
    patch_kubevirt(&serde_json::json!({"spec": {"configuration": {"commonInstancetypesDeployment": value}}}))
        .status
        .success()
}

/// Puts the deployment back on however the test ends.
struct DeploymentOn;

impl Drop for DeploymentOn {
    fn drop(&mut self) {
        // No panic here: this runs while a failed test unwinds too.
        let _ = set_deployment(None);
    }
}

const USERS_INSTANCETYPE: &str = "\
apiVersion: instancetype.kubevirt.io/v1beta1
kind: VirtualMachineClusterInstancetype
metadata:
  name: e2e-users-own
spec:
  cpu:
    guest: 1
  memory:
    guest: 128Mi
";

#[test]
#[ignore = "needs the test cluster: make cluster"]
fn the_common_instancetypes_boot_a_vm_are_kept_as_shipped_and_go_when_turned_off() {
    deployed();
    let _restore = DeploymentOn;
    wait_for_counts(65, 54);
    let mut cleanup = Cleanup::new();

    // A VM from u1.small (1 vCPU, 2 GiB) and the `alpine` preference.
    let manifest = example("instancetypes/vm-testguest.yaml", "e2e-common-it")
        .replace("    name: testguest.small\n", "    name: u1.small\n")
        .replace("    name: testguest\n", "    name: alpine\n");
    assert!(
        manifest.contains("u1.small") && manifest.contains("alpine"),
        "the example changed; update this test"
    );
    cleanup.apply("vm", "e2e-common-it", &manifest);
    let vmi = wait_for_phase("e2e-common-it", "Running", Duration::from_secs(180));
    for (path, expected) in [
        ("spec.domain.cpu.sockets", "1"),
        ("spec.domain.memory.guest", "2Gi"),
        (
            "metadata.annotations.kubevirt\\.io/cluster-instancetype-name",
            "u1.small",
        ),
        ("metadata.annotations.kubevirt\\.io/cluster-preference-name", "alpine"),
        ("spec.domain.devices.disks.0.disk.bus", "virtio"),
    ] {
        assert_eq!(field(&vmi, path), expected, "{path} of the VMI: {vmi}");
    }
    console_until(
        "e2e-common-it",
        "\necho COMMON-$((40+2))",
        "COMMON-42",
        Duration::from_secs(120),
    );

    // An edit by hand is put back whole; the pass that does so rewrites no other.
    let untouched = field(
        &get(INSTANCETYPES, "u1.medium", "default").expect("u1.medium"),
        "metadata.resourceVersion",
    );
    kubectl_ok(&[
        "patch",
        INSTANCETYPES,
        "u1.small",
        "--type",
        "merge",
        "-p",
        r#"{"metadata": {"labels": {"e2e": "edited"}}, "spec": {"cpu": {"guest": 3}}}"#,
    ]);
    wait_for("u1.small put back", Duration::from_secs(60), || {
        get(INSTANCETYPES, "u1.small", "default")
            .filter(|it| field(it, "spec.cpu.guest") == "1" && field(it, "metadata.labels.e2e").is_empty())
    });
    assert_eq!(
        field(
            &get(INSTANCETYPES, "u1.medium", "default").expect("u1.medium"),
            "metadata.resourceVersion"
        ),
        untouched,
        "an instance type as shipped is not rewritten"
    );

    // Turned off: the operator's go, a user's own stays; turned on: they are back.
    cleanup.apply("virtualmachineclusterinstancetype", "e2e-users-own", USERS_INSTANCETYPE);
    assert!(set_deployment(Some(false)), "turning the deployment off");
    wait_for_counts(0, 0);
    assert!(
        get(INSTANCETYPES, "e2e-users-own", "default").is_some(),
        "only the operator's are removed"
    );
    assert_eq!(
        field(
            &wait_for_phase("e2e-common-it", "Running", Duration::from_secs(10)),
            "metadata.name"
        ),
        "e2e-common-it",
        "a running VM keeps its instance type's revision"
    );
    assert!(set_deployment(None), "turning the deployment on again");
    wait_for_counts(65, 54);
}
