//! A registry import on the real cluster: Debian's docker-registry runs in a pod behind a Service,
//! over TLS with a certificate of the test's own; the test guest's containerDisk image is pushed
//! to it (podman, from the host); a VM's DataVolume template with a `registry` source and the CA
//! in `certConfigMap` has cdi-importer pull the image by the Service's name, take the qcow2 under
//! `disk/` through scratch space and convert it; the VM boots from it and its guest reads the
//! disk's label.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use serde_json::json;

use super::data_volumes::{boots_and_reads_the_label, import_succeeds, node_dir, vm_booting_from_template, volume_for};
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
    let dir = node_dir(&claim);
    let mut cleanup = Cleanup::new();
    volume_for(&mut cleanup, &claim, &dir);
    let address = start_registry(&mut cleanup);
    push_test_guest(&address, "disks/testguest:v1");

    let manifest = vm_booting_from_template(
        NAME,
        &format!(
            "registry:\n            url: docker://{HOST}:5000/disks/testguest:v1\n            certConfigMap: {REGISTRY}-ca"
        ),
    );
    cleanup.apply("vm", NAME, &manifest);
    let done = import_succeeds(&claim);
    assert_eq!(field(&done, "status.progress"), "100.0%");
    let imported = get("pvc", &claim, "default").expect("the claim");
    let annotations = &imported["metadata"]["annotations"];
    assert_eq!(annotations["cdi.kubevirt.io/storage.import.source"], "registry");
    assert_eq!(
        annotations["cdi.kubevirt.io/storage.import.endpoint"],
        format!("docker://{HOST}:5000/disks/testguest:v1")
    );
    assert_eq!(
        std::fs::metadata(dir.0.join("disk.img")).map(|m| m.len()).ok(),
        Some(64 << 20),
        "grown to the claim's size"
    );

    boots_and_reads_the_label(NAME);
    kubectl_ok(&["delete", "vm", NAME, "--timeout=120s"]);
    drop(cleanup);
    drop(dir);
}
