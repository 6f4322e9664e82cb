//! cdi-operator on the real cluster: the CDI CR `cdi` (cluster/cdi/cdi.yaml) installs CDI's CRDs,
//! components, API registrations and certificates, each controlled by the CR; it reports
//! upstream's phase and conditions; an object of its own deleted by hand is put back; a CA made
//! again is trusted next to the old one and cdi-controller signs with it; a second
//! CDI is refused; and deleting the CR removes all it made (the CRDs with them), after which the
//! same CR installs CDI again.

use std::time::Duration;

use super::support::{condition, controlled_by, field, get, kubectl, kubectl_ok, kubectl_stdin, wait_for};

const NAMESPACE: &str = "cdi";
const CR: &str = "cdi";

/// The CDI, once Available with every Deployment rolled out and the upload API served.
fn available() -> serde_json::Value {
    let cr = wait_for("the CDI to be Available", Duration::from_secs(300), || {
        // A CR just created has no conditions yet.
        get("cdi", CR, "default").filter(|cr| {
            cr["status"]["conditions"].is_array()
                && condition(cr, "Available") == ("True".to_owned(), "Complete".to_owned())
                && condition(cr, "Progressing").0 == "False"
        })
    });
    kubectl_ok(&[
        "-n",
        NAMESPACE,
        "rollout",
        "status",
        "--timeout=300s",
        "deployment/cdi-deployment",
        "deployment/cdi-apiserver",
        "deployment/cdi-uploadproxy",
    ]);
    kubectl_ok(&[
        "wait",
        "--for=condition=Available",
        "--timeout=120s",
        "apiservice/v1beta1.upload.cdi.kubevirt.io",
    ]);
    cr
}

/// What the CR makes, each controlled by it: kind, name, namespace (`default` for cluster-scoped).
const MADE: [(&str, &str, &str); 12] = [
    ("deployment", "cdi-deployment", NAMESPACE),
    ("deployment", "cdi-apiserver", NAMESPACE),
    ("deployment", "cdi-uploadproxy", NAMESPACE),
    ("service", "cdi-uploadproxy", NAMESPACE),
    ("secret", "cdi-apiserver-server-cert", NAMESPACE),
    ("configmap", "cdi-uploadserver-signer-bundle", NAMESPACE),
    ("clusterrole", "cdi.kubevirt.io:edit", "default"),
    ("crd", "datavolumes.cdi.kubevirt.io", "default"),
    ("apiservice", "v1beta1.upload.cdi.kubevirt.io", "default"),
    ("mutatingwebhookconfiguration", "cdi-api-datavolume-mutate", "default"),
    ("validatingwebhookconfiguration", "cdi-api-validate", "default"),
    ("cdiconfig", "config", "default"),
];

fn pem_count(config_map: &serde_json::Value) -> usize {
    field(config_map, "data.ca-bundle\\.crt")
        .matches("BEGIN CERTIFICATE")
        .count()
}

#[test]
#[ignore = "needs the test cluster: make cluster"]
fn the_operator_installs_cdi_from_its_cr_rotates_its_certificates_and_removes_it() {
    let cr = available();
    assert_eq!(field(&cr, "status.phase"), "Deployed");
    assert_eq!(condition(&cr, "Degraded").0, "False");
    assert!(!field(&cr, "status.observedVersion").is_empty(), "{cr}");

    // What it made, each controlled by the CR.
    let uid = field(&cr, "metadata.uid");
    for (kind, name, namespace) in MADE {
        let object = get(kind, name, namespace).unwrap_or_else(|| panic!("{kind} {name}"));
        assert!(controlled_by(&object, "CDI", &uid), "{kind} {name}: {object}");
    }
    let config = get("cdiconfig", "config", "default").expect("CDIConfig config");
    assert_eq!(
        field(&config, "spec.scratchSpaceStorageClass"),
        "hostpath-csi",
        "the CR's config"
    );
    let controller = get("deployment", "cdi-deployment", NAMESPACE).expect("cdi-deployment");
    let pod = &controller["spec"]["template"]["spec"];
    assert_eq!(
        pod["nodeSelector"]["kubernetes.io/os"], "linux",
        "the CR's infra placement"
    );
    let env = pod["containers"][0]["env"].to_string();
    assert!(
        env.contains(r#"{\"nodeSelector\":{\"kubernetes.io/os\":\"linux\"}}"#),
        "the CR's workload placement, for the importer pods: {env}"
    );

    // A role deleted by hand is put back.
    let role = get("clusterrole", "cdi.kubevirt.io:edit", "default").expect("the role");
    kubectl_ok(&["delete", "clusterrole", "cdi.kubevirt.io:edit"]);
    wait_for(
        "the operator to put the ClusterRole back",
        Duration::from_secs(60),
        || {
            get("clusterrole", "cdi.kubevirt.io:edit", "default")
                .filter(|r| field(r, "metadata.uid") != field(&role, "metadata.uid") && controlled_by(r, "CDI", &uid))
        },
    );

    rotates_the_upload_servers_ca();
    refuses_a_second_cdi();
    blocks_its_uninstall_while_data_volumes_exist();
    // Still BlockUninstallIfWorkloadsExist, with no DataVolume left: the deletion goes through.
    removes_all_it_made_and_installs_again(&cr, &MADE);
}

/// With `uninstallStrategy: BlockUninstallIfWorkloadsExist`, cdi-apiserver's webhook refuses the
/// CDI's deletion while a DataVolume exists, with upstream's message.
fn blocks_its_uninstall_while_data_volumes_exist() {
    kubectl_ok(&[
        "patch",
        "cdi",
        CR,
        "--type=merge",
        "-p",
        r#"{"spec":{"uninstallStrategy":"BlockUninstallIfWorkloadsExist"}}"#,
    ]);
    wait_for(
        "the CDI validating webhook to have cdi-apiserver's CA",
        Duration::from_secs(60),
        || {
            get("validatingwebhookconfiguration", "cdi-api-validate", "default")
                .filter(|w| !field(w, "webhooks.0.clientConfig.caBundle").is_empty())
        },
    );
    let data_volume = "apiVersion: cdi.kubevirt.io/v1beta1\nkind: DataVolume\nmetadata:\n  name: e2e-blocks-uninstall\n  namespace: default\nspec:\n  source: {blank: {}}\n  storage:\n    resources: {requests: {storage: 16Mi}}\n";
    let output = kubectl_stdin(&["create", "-f", "-"], data_volume);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let refused = kubectl(&["delete", "cdi", CR, "--wait=false"]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "the CDI was deleted with a DataVolume left");
    assert!(
        stderr.contains("rejecting the uninstall request, since there are still 1 DataVolumes present. Either delete all DataVolumes or change the uninstall strategy before uninstalling CDI"),
        "{stderr}"
    );
    assert!(get("cdi", CR, "default").is_some_and(|c| c["metadata"]["deletionTimestamp"].is_null()));
    kubectl_ok(&[
        "delete",
        "datavolume",
        "e2e-blocks-uninstall",
        "--wait=true",
        "--timeout=120s",
    ]);
}

/// The upload servers' CA made again (its Secret lost): the bundle trusts the new CA beside the
/// ones it had, and cdi-controller, which reads the CAs every minute, signs with the new one.
fn rotates_the_upload_servers_ca() {
    let bundle = get("configmap", "cdi-uploadserver-signer-bundle", NAMESPACE).expect("the bundle");
    let before = pem_count(&bundle);
    assert!(before >= 1, "{bundle}");
    let changes = || {
        kubectl_ok(&["-n", NAMESPACE, "logs", "deployment/cdi-deployment"])
            .matches("the upload CAs changed")
            .count()
    };
    let changes_before = changes();
    kubectl_ok(&["-n", NAMESPACE, "delete", "secret", "cdi-uploadserver-signer"]);
    wait_for(
        "the bundle to hold the new CA beside the old",
        Duration::from_secs(60),
        || get("configmap", "cdi-uploadserver-signer-bundle", NAMESPACE).filter(|b| pem_count(b) == before + 1),
    );
    wait_for(
        "cdi-controller to sign with the new CA",
        Duration::from_secs(150),
        || (changes() > changes_before).then_some(()),
    );
    available();
}

/// A second CDI is refused with upstream's message; nothing changes for the first.
fn refuses_a_second_cdi() {
    let output = kubectl_stdin(
        &["apply", "-f", "-"],
        "apiVersion: cdi.kubevirt.io/v1beta1\nkind: CDI\nmetadata:\n  name: e2e-second\nspec: {}\n",
    );
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let second = wait_for("the second CDI to be refused", Duration::from_secs(60), || {
        get("cdi", "e2e-second", "default").filter(|c| field(c, "status.phase") == "Error")
    });
    let degraded = second["status"]["conditions"]
        .as_array()
        .and_then(|all| all.iter().find(|c| c["type"] == "Degraded"))
        .cloned()
        .expect("Degraded");
    assert_eq!(
        field(&degraded, "message"),
        "Reconciling to error state, unwanted CDI object"
    );
    kubectl_ok(&["delete", "cdi", "e2e-second", "--wait=true"]);
    assert_eq!(
        field(&get("cdi", CR, "default").expect("the CDI"), "status.phase"),
        "Deployed"
    );
}

/// Deleting the CR removes what it made, the CRDs with it; the same CR installs CDI again.
fn removes_all_it_made_and_installs_again(cr: &serde_json::Value, made: &[(&str, &str, &str)]) {
    let uid = field(cr, "metadata.uid");
    let mut again = cr.clone();
    for key in [
        "uid",
        "resourceVersion",
        "creationTimestamp",
        "generation",
        "managedFields",
    ] {
        if let Some(meta) = again["metadata"].as_object_mut() {
            meta.remove(key);
        }
    }
    if let Some(object) = again.as_object_mut() {
        object.remove("status");
    }
    kubectl_ok(&["delete", "cdi", CR, "--wait=true"]);
    for &(kind, name, namespace) in made {
        wait_for(
            &format!("{kind} {name} to be removed with the CDI"),
            Duration::from_secs(120),
            || {
                let output = kubectl(&["-n", namespace, "get", kind, name, "--ignore-not-found", "-o", "name"]);
                // Once the CRD is gone, its kind is no longer known: removed as well.
                let unknown =
                    String::from_utf8_lossy(&output.stderr).contains("the server doesn't have a resource type");
                (unknown || (output.status.success() && output.stdout.is_empty())).then_some(())
            },
        );
    }
    let output = kubectl_stdin(&["create", "-f", "-"], &again.to_string());
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let reinstalled = available();
    assert_ne!(field(&reinstalled, "metadata.uid"), uid);
    wait_for(
        "the DataVolume webhook to have cdi-apiserver's CA",
        Duration::from_secs(60),
        || {
            get("mutatingwebhookconfiguration", "cdi-api-datavolume-mutate", "default")
                .filter(|w| !field(w, "webhooks.0.clientConfig.caBundle").is_empty())
        },
    );
    wait_for("CDIConfig config from the CR again", Duration::from_secs(60), || {
        get("cdiconfig", "config", "default").filter(|c| field(c, "spec.scratchSpaceStorageClass") == "hostpath-csi")
    });
}
