//! A registry import on the real cluster: Debian's docker-registry runs in a pod behind a Service,
//! over TLS with a certificate of the test's own; the test guest's containerDisk image is pushed
//! to it (podman, from the host); a VM's DataVolume template with a `registry` source and the CA
//! in `certConfigMap` has cdi-importer pull the image by the Service's name, take the qcow2 under
//! `disk/` through scratch space and convert it, into CDI's prime claim on `hostpath-csi` (its
//! scratch claim on the same node), rebound to the DataVolume's claim; the VM boots from it on
//! that node and its guest reads the disk's label.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use serde_json::json;

use super::data_volumes::{boots_and_reads_the_label, import_succeeds, vm_booting_from_template};
use super::support::{Cleanup, field, get, kubectl_ok, wait_for};

const REGISTRY: &str = "e2e-registry";
const HOST: &str = "e2e-registry.default.svc.cluster.local";

/// The registry's pod, Service, TLS secret and the ConfigMap of its CA; gives the pod's address.
fn start_registry(cleanup: &mut Cleanup) -> String {
    let key = rcgen::KeyPair::generate().expect("key");
    let cert = rcgen::CertificateParams::new(vec![HOST.to_owned(), "e2e-registry.default.svc".to_owned()])
        .expect("params")
        .self_signed(&key)
        .expect("certificate");
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
        "metadata": {"name": format!("{REGISTRY}-tls"), "namespace": "default"},
        "stringData": {"tls.crt": cert.pem(), "tls.key": key.serialize_pem()}});
    cleanup.apply("secret", &format!("{REGISTRY}-tls"), &secret.to_string());
    let ca = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": format!("{REGISTRY}-ca"), "namespace": "default"},
        "data": {"ca.crt": cert.pem()}});
    cleanup.apply("configmap", &format!("{REGISTRY}-ca"), &ca.to_string());
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": REGISTRY, "namespace": "default", "labels": {"app": REGISTRY}},
        "spec": {"terminationGracePeriodSeconds": 1, "containers": [{
            "name": "registry", "image": "localhost/kubevirt-rs/test-registry:latest", "imagePullPolicy": "IfNotPresent",
            "args": ["serve", "/etc/docker/registry/config.yml"],
            "env": [{"name": "REGISTRY_HTTP_TLS_CERTIFICATE", "value": "/certs/tls.crt"},
                    {"name": "REGISTRY_HTTP_TLS_KEY", "value": "/certs/tls.key"}],
            "volumeMounts": [{"name": "certs", "mountPath": "/certs", "readOnly": true},
                             {"name": "images", "mountPath": "/var/lib/registry"}]}],
          "volumes": [{"name": "certs", "secret": {"secretName": format!("{REGISTRY}-tls")}},
                      {"name": "images", "emptyDir": {}}]}});
    cleanup.apply("pod", REGISTRY, &pod.to_string());
    let service = json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": REGISTRY, "namespace": "default"},
        "spec": {"selector": {"app": REGISTRY}, "ports": [{"port": 5000, "targetPort": 5000}]}});
    cleanup.apply("service", REGISTRY, &service.to_string());
    let running = wait_for("the registry to run", Duration::from_secs(120), || {
        get("pod", REGISTRY, "default")
            .filter(|pod| field(pod, "status.phase") == "Running" && !field(pod, "status.podIP").is_empty())
    });
    let address = field(&running, "status.podIP");
    // The host routes the pods' addresses: the registry answers once it listens.
    wait_for("the registry to answer", Duration::from_secs(60), || {
        Command::new("curl")
            .args(["-sS", "-k", "-o", "/dev/null", &format!("https://{address}:5000/v2/")])
            .status()
            .ok()
            .filter(std::process::ExitStatus::success)
    });
    address
}

/// Pushes the test guest's containerDisk image from the host's image store to `address`.
fn push_test_guest(address: &str, reference: &str) {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let output = Command::new("podman")
        .env("CONTAINERS_CONF", repo.join("images/containers.conf"))
        .args(["--storage-driver", "vfs", "push", "--quiet", "--tls-verify=false"])
        .arg("localhost/kubevirt-rs/testguest:latest")
        .arg(format!("docker://{address}:5000/{reference}"))
        .output()
        .expect("podman is installed (make cluster)");
    assert!(
        output.status.success(),
        "podman push: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
#[ignore = "needs the test cluster: make cluster"]
fn a_vm_boots_from_a_containerdisk_imported_from_a_registry_by_service_name() {
    const NAME: &str = "e2e-dv-registry";
    let claim = format!("{NAME}-root");
    let mut cleanup = Cleanup::new();
    let address = start_registry(&mut cleanup);
    push_test_guest(&address, "disks/testguest:v1");

    // On `hostpath-csi` (WaitForFirstConsumer): CDI's populator fills a prime claim on the node
    // the VM's pod is placed on; a registry import goes through scratch space, whose claim must
    // be placed on that node too, since the importer pod is put there without the scheduler.
    let manifest = vm_booting_from_template(
        NAME,
        &format!(
            "registry:\n            url: docker://{HOST}:5000/disks/testguest:v1\n            certConfigMap: {REGISTRY}-ca"
        ),
    )
    .replacen("storageClassName: \"\"", "storageClassName: hostpath-csi", 1);
    assert!(manifest.contains("storageClassName: hostpath-csi"), "{manifest}");
    cleanup.apply("vm", NAME, &manifest);
    let done = import_succeeds(&claim);
    assert_eq!(field(&done, "status.progress"), "100.0%");
    let imported = wait_for("the claim to bind", Duration::from_secs(120), || {
        get("pvc", &claim, "default").filter(|pvc| field(pvc, "status.phase") == "Bound")
    });
    assert_eq!(field(&imported, "spec.dataSourceRef.kind"), "VolumeImportSource");
    let prime = field(
        &imported,
        "metadata.annotations.cdi\\.kubevirt\\.io/storage\\.populator\\.pvcPrime",
    );
    assert!(prime.starts_with("prime-"), "{imported}");
    let node = field(&imported, "metadata.annotations.volume\\.kubernetes\\.io/selected-node");
    let volume = field(&imported, "spec.volumeName");
    let dir = super::hostpath::volume_dir(&node, &volume);
    assert_eq!(
        std::fs::metadata(dir.join("disk.img")).map(|m| m.len()).ok(),
        Some(64 << 20),
        "grown to the claim's size, in {node}'s pool"
    );
    wait_for(
        "the prime and its scratch claim to go",
        Duration::from_secs(120),
        || {
            (get("pvc", &prime, "default").is_none() && get("pvc", &format!("{prime}-scratch"), "default").is_none())
                .then_some(())
        },
    );

    boots_and_reads_the_label(NAME);
    assert_eq!(
        field(&get("vmi", NAME, "default").expect("the VMI"), "status.nodeName"),
        node,
        "the VM runs where its volume is"
    );
    kubectl_ok(&["delete", "vm", NAME, "--timeout=120s"]);
    drop(cleanup);
}
