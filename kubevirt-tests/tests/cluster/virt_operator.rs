//! virt-operator on the real cluster: the install made through it (manifests/operator, then the
//! KubeVirt CR `kubevirt/kubevirt`) is Deployed with upstream's conditions, versions and
//! finalizer, and the operator owns the components; what it owns changed or deleted by hand is
//! put back; the fields it does not act on are refused by the CRD's rules, certificate lifetimes
//! it cannot keep and a second CR by its webhooks; with
//! `uninstallStrategy: BlockUninstallIfWorkloadsExist` its webhook refuses the CR's deletion
//! while a VMI exists. (The upgrade through `spec.imageTag` is in faults.rs, with a running VMI;
//! the common instance types in common_instancetypes.rs.)

use std::time::Duration;

use super::support::{
    Cleanup, condition, controlled_by, example, field, get, kubectl, kubectl_ok, kubectl_stdin, patch_kubevirt,
    wait_for,
};

const NAMESPACE: &str = "kubevirt";

/// The KubeVirt CR, once Deployed at the target install.
pub fn deployed() -> serde_json::Value {
    wait_for("KubeVirt to be Deployed", Duration::from_secs(400), || {
        get("kubevirt", "kubevirt", NAMESPACE).filter(|cr| {
            field(cr, "status.phase") == "Deployed"
                && condition(cr, "Available").0 == "True"
                && field(cr, "status.observedDeploymentID") == field(cr, "status.targetDeploymentID")
        })
    })
}

#[test]
#[ignore = "needs the test cluster: make cluster"]
fn the_kubevirt_cr_is_deployed_with_upstreams_status_and_owns_the_components() {
    let cr = deployed();
    assert_eq!(
        condition(&cr, "Available"),
        ("True".to_owned(), "AllComponentsReady".to_owned())
    );
    assert_eq!(
        condition(&cr, "Progressing"),
        ("False".to_owned(), "AllComponentsReady".to_owned())
    );
    assert_eq!(
        condition(&cr, "Degraded"),
        ("False".to_owned(), "AllComponentsReady".to_owned())
    );
    assert_eq!(
        condition(&cr, "Created"),
        ("True".to_owned(), "AllResourcesCreated".to_owned())
    );
    assert_eq!(field(&cr, "status.observedKubeVirtVersion"), "latest");
    assert_eq!(field(&cr, "status.observedKubeVirtRegistry"), "localhost/kubevirt-rs");
    assert!(!field(&cr, "status.operatorVersion").is_empty(), "{cr}");
    assert_eq!(
        cr["status"]["generations"].as_array().map(Vec::len),
        Some(3),
        "virt-api, virt-controller and virt-handler: {cr}"
    );
    assert_eq!(
        field(&cr, "metadata.finalizers.0"),
        "kubevirt.io/foregroundDeleteKubeVirt"
    );
    let uid = field(&cr, "metadata.uid");
    for (kind, name) in [
        ("deployment", "virt-api"),
        ("deployment", "virt-controller"),
        ("daemonset", "virt-handler"),
    ] {
        let object = get(kind, name, NAMESPACE).unwrap_or_else(|| panic!("{kind} {name}"));
        assert!(controlled_by(&object, "KubeVirt", &uid), "{kind} {name}: {object}");
        assert_eq!(
            field(&object, "metadata.labels.app\\.kubernetes\\.io/managed-by"),
            "virt-operator"
        );
        assert_eq!(
            field(
                &object,
                "metadata.annotations.kubevirt\\.io/install-strategy-identifier"
            ),
            field(&cr, "status.observedDeploymentID")
        );
    }
    // The CRDs it installs (all but KubeVirt's own, which manifests/operator brings).
    let crd = get("crd", "virtualmachineinstances.kubevirt.io", "default").expect("the VMI CRD");
    assert_eq!(
        field(&crd, "metadata.annotations.kubevirt-rs\\.io/kubevirt"),
        "kubevirt/kubevirt"
    );
}

#[test]
#[ignore = "needs the test cluster: make cluster"]
fn what_the_operator_owns_is_put_back_when_changed_or_deleted_by_hand() {
    let cr = deployed();
    let id = field(&cr, "status.observedDeploymentID");
    let identifier =
        |object: &serde_json::Value| field(object, "metadata.annotations.kubevirt\\.io/install-strategy-identifier");
    // An edit of virt-api's Deployment (its metadata: its pods are not rolled).
    kubectl_ok(&[
        "-n",
        NAMESPACE,
        "annotate",
        "--overwrite",
        "deployment",
        "virt-api",
        "kubevirt.io/install-strategy-identifier=edited-by-hand",
    ]);
    wait_for("virt-api's Deployment put back", Duration::from_secs(60), || {
        get("deployment", "virt-api", NAMESPACE).filter(|d| identifier(d) == id)
    });
    // A cluster role deleted.
    kubectl_ok(&["delete", "clusterrole", "kubevirt.io:view", "--wait=true"]);
    let role = wait_for(
        "the kubevirt.io:view ClusterRole made again",
        Duration::from_secs(60),
        || get("clusterrole", "kubevirt.io:view", "default"),
    );
    assert_eq!(
        field(&role, "metadata.labels.app\\.kubernetes\\.io/managed-by"),
        "virt-operator"
    );
    let after = deployed();
    assert_eq!(field(&after, "status.observedDeploymentID"), id);
}

#[test]
#[ignore = "needs the test cluster: make cluster"]
fn fields_the_components_cannot_act_on_or_keep_are_refused_by_the_api_server() {
    deployed();
    wait_for(
        "kubevirt-update-validator.kubevirt.io with the operator's CA",
        Duration::from_secs(60),
        || {
            get("validatingwebhookconfiguration", "virt-operator-validator", "default").filter(|w| {
                field(w, "webhooks.1.name") == "kubevirt-update-validator.kubevirt.io"
                    && !field(w, "webhooks.1.clientConfig.caBundle").is_empty()
            })
        },
    );
    // A second CR is refused by kubevirt-create-validator.kubevirt.io.
    let second = kubectl_stdin(
        &["create", "--dry-run=server", "-f", "-"],
        r#"{"apiVersion":"kubevirt.io/v1","kind":"KubeVirt","metadata":{"name":"second","namespace":"default"},"spec":{}}"#,
    );
    assert!(!second.status.success(), "a second KubeVirt CR was accepted");
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(stderr.contains("Kubevirt is already created"), "{stderr}");
    for (patch, field_name) in [
        // Refused by the CRD: a method the workload updater does not know, an empty batch.
        (
            r#"{"spec":{"workloadUpdateStrategy":{"workloadUpdateMethods":["Restart"]}}}"#,
            "spec.workloadUpdateStrategy.workloadUpdateMethods[0]",
        ),
        (
            r#"{"spec":{"workloadUpdateStrategy":{"batchEvictionSize":0}}}"#,
            "spec.workloadUpdateStrategy.batchEvictionSize",
        ),
        // Refused by kubevirt-update-validator.kubevirt.io: an interval that is not a duration.
        (
            r#"{"spec":{"workloadUpdateStrategy":{"batchEvictionInterval":"soon"}}}"#,
            "spec.workloadUpdateStrategy.batchEvictionInterval: \"soon\" is not a duration",
        ),
        (
            // Refused by kubevirt-update-validator.kubevirt.io, with upstream's message.
            r#"{"spec":{"certificateRotateStrategy":{"selfSigned":{"server":{"duration":"1h","renewBefore":"2h"}}}}}"#,
            "Cert RenewBefore cannot exceed Duration (spec.certificateRotationStrategy.selfSigned.server.duration",
        ),
        (
            r#"{"spec":{"certificateRotateStrategy":{"selfSigned":{"ca":{"duration":"1h"}}}}}"#,
            "Certificate duration cannot exceed CA",
        ),
        (
            r#"{"spec":{"customizeComponents":{"patches":[{"resourceName":"virt-api","patch":"{}","type":"merge"}]}}}"#,
            "spec.customizeComponents.patches[0].resourceType",
        ),
    ] {
        let output = dry_run_patch(patch);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{patch} was accepted");
        assert!(stderr.contains(field_name), "{patch}: {stderr}");
    }
    // What upstream's own sample CR sets is accepted.
    let accepted = dry_run_patch(
        r#"{"spec":{"certificateRotateStrategy":{},"customizeComponents":{},"workloadUpdateStrategy":{},"uninstallStrategy":"RemoveWorkloads"}}"#,
    );
    assert!(
        accepted.status.success(),
        "{}",
        String::from_utf8_lossy(&accepted.stderr)
    );
    let updates = dry_run_patch(
        r#"{"spec":{"workloadUpdateStrategy":{"workloadUpdateMethods":["LiveMigrate","Evict"],"batchEvictionSize":5,"batchEvictionInterval":"30s"}}}"#,
    );
    assert!(updates.status.success(), "{}", String::from_utf8_lossy(&updates.stderr));
    let lifetimes = dry_run_patch(
        r#"{"spec":{"certificateRotateStrategy":{"selfSigned":{"ca":{"duration":"48h","renewBefore":"24h"},"server":{"duration":"24h","renewBefore":"12h"}}}}}"#,
    );
    assert!(
        lifetimes.status.success(),
        "{}",
        String::from_utf8_lossy(&lifetimes.stderr)
    );
}

/// A server-side dry run of a merge patch of the KubeVirt CR (admission and the CRD's rules run,
/// nothing is written).
fn dry_run_patch(patch: &str) -> std::process::Output {
    kubectl(&[
        "-n",
        NAMESPACE,
        "patch",
        "kubevirt",
        "kubevirt",
        "--type=merge",
        "--dry-run=server",
        "-p",
        patch,
    ])
}

/// Puts `spec.uninstallStrategy` back to unset however the test ends.
struct StrategyUnset;

impl Drop for StrategyUnset {
    fn drop(&mut self) {
        let _ = patch_kubevirt(&serde_json::json!({"spec": {"uninstallStrategy": null}}));
    }
}

/// A server-side dry run of deleting the KubeVirt CR (admission runs, nothing is deleted):
/// whether it was admitted, and what kubectl printed.
fn dry_run_delete() -> (bool, String) {
    let output = kubectl(&["-n", NAMESPACE, "delete", "kubevirt", "kubevirt", "--dry-run=server"]);
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), printed)
}

#[test]
#[ignore = "needs the test cluster: make cluster"]
fn blocking_the_uninstall_refuses_deleting_the_cr_while_a_vmi_exists() {
    deployed();
    let _unset = StrategyUnset;
    let webhook = wait_for(
        "virt-operator-validator with the operator's CA",
        Duration::from_secs(60),
        || {
            get("validatingwebhookconfiguration", "virt-operator-validator", "default")
                .filter(|w| !field(w, "webhooks.0.clientConfig.caBundle").is_empty())
        },
    );
    assert_eq!(field(&webhook, "webhooks.0.name"), "kubevirt-validator.kubevirt.io");
    assert_eq!(
        field(&webhook, "webhooks.0.clientConfig.service.name"),
        "kubevirt-operator-webhook"
    );
    let secret = get("secret", "kubevirt-operator-certs", NAMESPACE).expect("the webhook's certificate");
    assert_eq!(field(&secret, "type"), "kubernetes.io/tls");

    let blocking =
        patch_kubevirt(&serde_json::json!({"spec": {"uninstallStrategy": "BlockUninstallIfWorkloadsExist"}}));
    assert!(
        blocking.status.success(),
        "{}",
        String::from_utf8_lossy(&blocking.stderr)
    );
    let mut cleanup = Cleanup::new();
    cleanup.apply(
        "vmi",
        "e2e-blocks-uninstall",
        &example("vmi-testguest.yaml", "e2e-blocks-uninstall"),
    );
    let expected = "Rejecting the uninstall request, since there are still Virtual Machine Instances present. \
                    Either delete all KubeVirt related workloads or change the uninstall strategy before uninstalling KubeVirt.";
    // Polled: the operator's certificate reaches its server moments after the Secret is made.
    let refused = wait_for("the deletion to be refused", Duration::from_secs(60), || {
        let (admitted, printed) = dry_run_delete();
        assert!(!admitted, "the deletion was admitted with a VMI left: {printed}");
        printed.contains(expected).then_some(printed)
    });
    assert!(refused.contains("kubevirt-validator.kubevirt.io"), "{refused}");
    assert!(
        get("kubevirt", "kubevirt", NAMESPACE).is_some_and(|cr| cr["metadata"]["deletionTimestamp"].is_null()),
        "a dry run deletes nothing"
    );

    kubectl_ok(&["delete", "vmi", "e2e-blocks-uninstall", "--wait=true", "--timeout=120s"]);
    let (admitted, printed) = dry_run_delete();
    assert!(admitted, "with no workload left the deletion is admitted: {printed}");
}

/// Puts `spec.customizeComponents` back to unset however the test ends.
struct CustomizeUnset;

impl Drop for CustomizeUnset {
    fn drop(&mut self) {
        let _ = patch_kubevirt(&serde_json::json!({"spec": {"customizeComponents": null}}));
    }
}

/// virt-controller's Deployment: its pod template's e2e annotation, its container's command, and
/// the customizer identifier.
fn controller_customization() -> (String, String, String) {
    let deployment = get("deployment", "virt-controller", NAMESPACE).expect("virt-controller's Deployment");
    (
        field(
            &deployment,
            "spec.template.metadata.annotations.e2e\\.kubevirt-rs\\.io/customized",
        ),
        deployment
            .pointer("/spec/template/spec/containers/0/command")
            .map(ToString::to_string)
            .unwrap_or_default(),
        field(&deployment, "metadata.annotations.kubevirt\\.io/customizer-identifier"),
    )
}

#[test]
#[ignore = "needs the test cluster: make cluster"]
fn customized_components_get_their_patches_and_flags_and_lose_them_when_removed() {
    deployed();
    let plain = controller_customization();
    assert_eq!(plain.0, "", "no e2e annotation before");
    assert_eq!(plain.1, r#"["virt-controller"]"#);
    assert!(!plain.2.is_empty(), "every patchable object carries the identifier");
    let _unset = CustomizeUnset;
    let patched = patch_kubevirt(&serde_json::json!({"spec": {"customizeComponents": {
        "patches": [{
            "resourceName": "virt-controller",
            "resourceType": "Deployment",
            "type": "strategic",
            "patch": r#"{"spec":{"template":{"metadata":{"annotations":{"e2e.kubevirt-rs.io/customized":"yes"}}}}}"#
        }],
        "flags": {"controller": {"v": "3"}}
    }}}));
    assert!(patched.status.success(), "{}", String::from_utf8_lossy(&patched.stderr));
    let customized = wait_for("virt-controller customized", Duration::from_secs(120), || {
        let now = controller_customization();
        (now.0 == "yes" && now.1 == r#"["virt-controller","--v","3"]"#).then_some(now)
    });
    assert_ne!(customized.2, plain.2, "the identifier follows the customizations");
    // The customized controller runs (the flag parses) and the install is whole again.
    let cr = deployed();
    assert_eq!(condition(&cr, "Degraded").0, "False");

    let removed = patch_kubevirt(&serde_json::json!({"spec": {"customizeComponents": null}}));
    assert!(removed.status.success(), "{}", String::from_utf8_lossy(&removed.stderr));
    wait_for("virt-controller plain again", Duration::from_secs(120), || {
        (controller_customization() == plain).then_some(())
    });
    deployed();
}
