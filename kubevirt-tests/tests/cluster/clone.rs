//! A clone across namespaces on the real cluster, as a user makes one: a DataVolume whose source
//! is a claim in another namespace. cdi-apiserver's webhook admits it only for a creator who may
//! clone from the source's namespace (upstream's `datavolumes/source`, from the aggregated `edit`
//! role), and gives it the token cdi-controller checks; cdi-controller starts the target's upload
//! server and then the source pod in the source's namespace, which streams the disk; the
//! DataVolume ends Succeeded, the source pod goes, and a VM in the target namespace boots from
//! the copy.

use std::time::Duration;

use super::support::{
    Cleanup, console_until_in, field, get, kubectl, kubectl_ok, kubectl_stdin, wait_for, wait_for_phase_in,
};
use super::upload::{GUEST_QCOW2, upload_with_virtctl_in, vm_on_data_volume};

const NAME: &str = "e2e-clone";
const SOURCE_NS: &str = "e2e-clone-src";
const TARGET_NS: &str = "e2e-clone-dst";
/// The user that creates the clone: the target namespace's default service account.
const CLONER: &str = "system:serviceaccount:e2e-clone-dst:default";

fn clone_manifest() -> String {
    format!(
        "apiVersion: cdi.kubevirt.io/v1beta1\nkind: DataVolume\nmetadata:\n  name: {NAME}-root\n  namespace: {TARGET_NS}\n  \
         annotations:\n    cdi.kubevirt.io/storage.bind.immediate.requested: \"true\"\nspec:\n  \
         source:\n    pvc:\n      namespace: {SOURCE_NS}\n      name: {NAME}-golden\n  storage:\n    \
         accessModes: [ReadWriteOnce]\n    volumeMode: Filesystem\n    \
         resources:\n      requests:\n        storage: 64Mi\n"
    )
}

/// `kubectl create` of the clone as [`CLONER`]; its output.
fn create_as_cloner() -> std::process::Output {
    kubectl_stdin(
        &["--as", CLONER, "-n", TARGET_NS, "create", "-f", "-"],
        &clone_manifest(),
    )
}

/// Lets [`CLONER`] edit `namespace` (the aggregated `edit` role, with CDI's rules).
fn grant_edit(cleanup: &mut Cleanup, namespace: &str) {
    cleanup.apply_in(
        namespace,
        "rolebinding",
        "e2e-cloner",
        &format!(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: e2e-cloner\n  namespace: {namespace}\n\
             roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: edit}}\n\
             subjects: [{{kind: ServiceAccount, name: default, namespace: {TARGET_NS}}}]\n"
        ),
    );
}

/// The golden claim through DataSources: both become Ready with the claim as their source, a
/// DataVolume's sourceRef to the one that points to the other is checked and cloned as the
/// claim, and one to a DataSource that is not there is refused.
fn clones_by_source_ref(cleanup: &mut Cleanup, golden: &str) {
    cleanup.apply_in(
        SOURCE_NS,
        "datasource",
        "golden",
        &format!(
            "apiVersion: cdi.kubevirt.io/v1beta1\nkind: DataSource\nmetadata:\n  name: golden\n  namespace: {SOURCE_NS}\n\
             spec:\n  source:\n    pvc:\n      namespace: {SOURCE_NS}\n      name: {golden}\n"
        ),
    );
    // `latest` points to `golden`: cdi-controller resolves it in its status, which the webhook
    // and the clone then read.
    cleanup.apply_in(
        SOURCE_NS,
        "datasource",
        "latest",
        &format!(
            "apiVersion: cdi.kubevirt.io/v1beta1\nkind: DataSource\nmetadata:\n  name: latest\n  namespace: {SOURCE_NS}\n\
             spec:\n  source:\n    dataSource:\n      namespace: {SOURCE_NS}\n      name: golden\n"
        ),
    );
    for data_source in ["golden", "latest"] {
        wait_for(
            &format!("DataSource {data_source} to be Ready"),
            Duration::from_secs(60),
            || {
                let found = get("datasource", data_source, SOURCE_NS)?;
                let ready = found["status"]["conditions"]
                    .as_array()?
                    .iter()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True" && c["reason"] == "Ready");
                (ready && field(&found, "status.source.pvc.name") == golden).then_some(())
            },
        );
    }
    let by_ref = |data_source: &str| {
        clone_manifest()
            .replace(&format!("name: {NAME}-root\n"), &format!("name: {NAME}-byref\n"))
            .replace(
                &format!("source:\n    pvc:\n      namespace: {SOURCE_NS}\n      name: {NAME}-golden\n"),
                &format!("sourceRef:\n    kind: DataSource\n    namespace: {SOURCE_NS}\n    name: {data_source}\n"),
            )
    };
    assert!(by_ref("golden").contains("sourceRef:"), "{}", by_ref("golden"));
    let missing = kubectl_stdin(&["--as", CLONER, "-n", TARGET_NS, "create", "-f", "-"], &by_ref("gone"));
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert!(
        !missing.status.success() && stderr.contains("datasources.cdi.kubevirt.io \"gone\" not found"),
        "{stderr}"
    );
    let created = kubectl_stdin(
        &["--as", CLONER, "-n", TARGET_NS, "create", "-f", "-"],
        &by_ref("latest"),
    );
    assert!(created.status.success(), "{}", String::from_utf8_lossy(&created.stderr));
    wait_for("the clone by sourceRef to succeed", Duration::from_secs(300), || {
        let dv = get("dv", &format!("{NAME}-byref"), TARGET_NS)?;
        assert_ne!(field(&dv, "status.phase"), "Failed", "{dv}");
        (field(&dv, "status.phase") == "Succeeded").then_some(())
    });
    let claim = get("pvc", &format!("{NAME}-byref"), TARGET_NS).expect("the claim of the clone by sourceRef");
    assert_eq!(
        claim["metadata"]["annotations"]["k8s.io/CloneRequest"],
        format!("{SOURCE_NS}/{golden}")
    );
}

#[test]
#[ignore = "needs the test cluster: make cluster"]
fn a_clone_into_another_namespace_is_checked_copied_and_boots() {
    assert!(
        std::path::Path::new(GUEST_QCOW2).is_file(),
        "the test guest's disk is missing: run make guest"
    );
    let golden = format!("{NAME}-golden");
    let copy = format!("{NAME}-root");
    // The golden image and its copy are both in the default class, hostpath-csi (the copy asks to
    // be bound at once, so that its upload server is its first consumer).
    let mut cleanup = Cleanup::new();
    for namespace in [SOURCE_NS, TARGET_NS] {
        cleanup.apply_in(
            namespace,
            "namespace",
            namespace,
            &format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {namespace}\n"),
        );
    }
    upload_with_virtctl_in(SOURCE_NS, &golden);

    // Allowed to create DataVolumes in the target namespace, but not to read the source's.
    grant_edit(&mut cleanup, TARGET_NS);
    let denied = create_as_cloner();
    let stderr = String::from_utf8_lossy(&denied.stderr);
    assert!(
        !denied.status.success(),
        "a clone without the right to its source is refused"
    );
    assert!(
        stderr.contains("insufficient permissions in clone source namespace"),
        "{stderr}"
    );
    assert!(get("dv", &copy, TARGET_NS).is_none());

    // With `edit` in the source namespace too, the clone is admitted with its token.
    grant_edit(&mut cleanup, SOURCE_NS);
    let created = create_as_cloner();
    assert!(created.status.success(), "{}", String::from_utf8_lossy(&created.stderr));
    let dv = get("dv", &copy, TARGET_NS).expect("the clone");
    assert!(
        dv["metadata"]["annotations"]["cdi.kubevirt.io/storage.clone.token"].is_string(),
        "the webhook's token: {dv}"
    );
    let dv = wait_for("the clone to succeed", Duration::from_secs(300), || {
        let dv = get("dv", &copy, TARGET_NS)?;
        assert_ne!(field(&dv, "status.phase"), "Failed", "{dv}");
        (field(&dv, "status.phase") == "Succeeded").then_some(dv)
    });
    assert_eq!(field(&dv, "status.progress"), "100.0%", "{dv}");
    let claim = get("pvc", &copy, TARGET_NS).expect("the target claim");
    let annotations = &claim["metadata"]["annotations"];
    assert_eq!(annotations["k8s.io/CloneRequest"], format!("{SOURCE_NS}/{golden}"));
    assert_eq!(annotations["cdi.kubevirt.io/storage.pod.phase"], "Succeeded");
    let source_pod = annotations["cdi.kubevirt.io/storage.sourceClonePodName"]
        .as_str()
        .expect("the source pod's name")
        .to_owned();
    let events = kubectl_ok(&[
        "-n",
        TARGET_NS,
        "get",
        "events",
        "--field-selector",
        &format!("involvedObject.name={copy}"),
    ]);
    assert!(
        events.contains(&format!(
            "Successfully cloned from {SOURCE_NS}/{golden} into {TARGET_NS}/{copy}"
        )),
        "{events}"
    );
    wait_for(
        "the source pod, the upload server and its Service to go",
        Duration::from_secs(60),
        || {
            (get("pod", &source_pod, SOURCE_NS).is_none()
                && get("pod", &format!("cdi-upload-{copy}"), TARGET_NS).is_none()
                && get("service", &format!("cdi-upload-{copy}"), TARGET_NS).is_none())
            .then_some(())
        },
    );

    clones_by_source_ref(&mut cleanup, &golden);

    // A VM in the target namespace boots from the copy.
    let vm = vm_on_data_volume(NAME).replace("namespace: default\n", &format!("namespace: {TARGET_NS}\n"));
    cleanup.apply_in(TARGET_NS, "vm", NAME, &vm);
    wait_for_phase_in(TARGET_NS, NAME, "Running", Duration::from_secs(240));
    console_until_in(
        TARGET_NS,
        NAME,
        "\necho label $(head -c 26 /dev/vda) end",
        "label KUBEVIRT-RS-TESTGUEST-DISK end",
        Duration::from_secs(120),
    );
    let _ = kubectl(&["-n", TARGET_NS, "delete", "vm", NAME, "--timeout=120s"]);
    drop(cleanup);
}
