//! virt-operator on the real cluster: the install made through it (manifests/operator, then the
//! KubeVirt CR `kubevirt/kubevirt`) is Deployed with upstream's conditions, versions and
//! finalizer, and the operator owns the components; what it owns changed or deleted by hand is
//! put back; the fields it does not act on are refused by the CRD's rules. (The upgrade through
//! `spec.imageTag` is in faults.rs, with a running VMI.)

use std::time::Duration;

use super::support::{condition, controlled_by, field, get, kubectl, kubectl_ok, wait_for};

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
fn fields_the_operator_does_not_act_on_are_refused_by_the_api_server() {
    deployed();
    for (patch, field_name) in [
        (
            r#"{"spec":{"uninstallStrategy":"BlockUninstallIfWorkloadsExist"}}"#,
            "spec.uninstallStrategy",
        ),
        (
            r#"{"spec":{"workloadUpdateStrategy":{"workloadUpdateMethods":["LiveMigrate"]}}}"#,
            "spec.workloadUpdateStrategy.workloadUpdateMethods",
        ),
        (
            r#"{"spec":{"certificateRotateStrategy":{"selfSigned":{"ca":{"duration":"1h"}}}}}"#,
            "spec.certificateRotateStrategy.selfSigned",
        ),
        (
            r#"{"spec":{"customizeComponents":{"flags":{"api":{"v":"4"}}}}}"#,
            "spec.customizeComponents",
        ),
    ] {
        let output = kubectl(&[
            "-n",
            NAMESPACE,
            "patch",
            "kubevirt",
            "kubevirt",
            "--type=merge",
            "--dry-run=server",
            "-p",
            patch,
        ]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{patch} was accepted");
        assert!(stderr.contains(field_name), "{patch}: {stderr}");
    }
    // What upstream's own sample CR sets is accepted.
    kubectl_ok(&[
        "-n",
        NAMESPACE,
        "patch",
        "kubevirt",
        "kubevirt",
        "--type=merge",
        "--dry-run=server",
        "-p",
        r#"{"spec":{"certificateRotateStrategy":{},"customizeComponents":{},"workloadUpdateStrategy":{},"uninstallStrategy":"RemoveWorkloads"}}"#,
    ]);
}
