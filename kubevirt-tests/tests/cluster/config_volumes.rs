//! Config volumes through the cluster: a ConfigMap, a Secret and the service account token as
//! disks, cloud-init user data from a Secret and an SSH key from an access credential, each read
//! back from inside the guest (the test guest mounts every ISO under /mnt/<disk>), and SLIC and MSDM
//! ACPI tables from a Secret (`firmware.acpi`) seen in the guest's ACPI tables.

use std::time::Duration;

use super::support::{Cleanup, console_until, example, field, kubectl_ok, wait_for_phase};

const OBJECTS: &str = "\
apiVersion: v1
kind: ConfigMap
metadata: {name: e2e-cfg, namespace: default}
data: {greeting: hello-from-configmap}
---
apiVersion: v1
kind: Secret
metadata: {name: e2e-sec, namespace: default}
stringData: {password: s3cret-from-secret}
---
apiVersion: v1
kind: Secret
metadata: {name: e2e-userdata, namespace: default}
stringData: {userdata: '#cloud-config from a secret'}
---
apiVersion: v1
kind: Secret
metadata: {name: e2e-keys, namespace: default}
stringData: {key1: ssh-ed25519 AAAAC3NzaE2E e2e@kubevirt-rs}
---
# Two minimal ACPI tables (a 36-byte header each, checksummed) for firmware.acpi.
apiVersion: v1
kind: Secret
metadata: {name: e2e-acpi, namespace: default}
data:
  slic.bin: U0xJQyQAAAABXEtWUlMgIEtWUlNURVNUAQAAAEtWUlMBAAAA
  msdm.bin: TVNETSQAAAABVktWUlMgIEtWUlNURVNUAQAAAEtWUlMBAAAA
";

#[test]
#[ignore = "needs the test cluster: make cluster"]
fn config_volumes_cloud_init_secrets_and_access_credentials_reach_the_guest() {
    let mut cleanup = Cleanup::new();
    for (kind, name) in [
        ("configmap", "e2e-cfg"),
        ("secret", "e2e-sec"),
        ("secret", "e2e-userdata"),
        ("secret", "e2e-keys"),
        ("secret", "e2e-acpi"),
    ] {
        cleanup.track(kind, name);
    }
    kubectl_ok(&[
        "delete",
        "configmap/e2e-cfg",
        "secret/e2e-sec",
        "secret/e2e-userdata",
        "secret/e2e-keys",
        "--ignore-not-found",
    ]);
    let created = super::support::kubectl_stdin(&["create", "-f", "-"], OBJECTS);
    assert!(created.status.success(), "{}", String::from_utf8_lossy(&created.stderr));

    let manifest = example("vmi-testguest.yaml", "e2e-config").replace(
        "  volumes:\n",
        "        - {name: cfg, disk: {bus: virtio}}\n        - {name: sec, disk: {bus: virtio}}\n        - {name: sa, disk: {bus: virtio}}\n        - {name: seed, disk: {bus: virtio}}\n  accessCredentials:\n    - sshPublicKey:\n        source: {secret: {secretName: e2e-keys}}\n        propagationMethod: {noCloud: {}}\n  volumes:\n    - {name: cfg, configMap: {name: e2e-cfg}}\n    - {name: sec, secret: {secretName: e2e-sec}}\n    - {name: sa, serviceAccount: {serviceAccountName: default}}\n    - {name: seed, cloudInitNoCloud: {secretRef: {name: e2e-userdata}}}\n    - {name: acpi, secret: {secretName: e2e-acpi}}\n",
    )
    .replace(
        "    firmware:\n",
        "    firmware:\n      acpi: {slicNameRef: acpi, msdmNameRef: acpi}\n",
    );
    cleanup.apply("vmi", "e2e-config", &manifest);
    let vmi = wait_for_phase("e2e-config", "Running", Duration::from_secs(120));

    let pods = kubectl_ok(&[
        "get",
        "pods",
        "-l",
        &format!("kubevirt.io/created-by={}", field(&vmi, "metadata.uid")),
        "-o",
        "json",
    ]);
    let pods: serde_json::Value = serde_json::from_str(&pods).expect("pods JSON");
    let pod = &pods["items"][0];
    assert_eq!(field(pod, "spec.serviceAccountName"), "default");
    assert_eq!(field(pod, "spec.automountServiceAccountToken"), "true");

    let output = console_until(
        "e2e-config",
        "\nfor f in /mnt/*/greeting /mnt/*/password /mnt/*/user-data /mnt/*/namespace /mnt/*/meta-data; do cat $f; echo; done; ls /sys/firmware/acpi/tables; echo READ-$((40+2))",
        "READ-42",
        Duration::from_secs(60),
    );
    for expected in [
        "hello-from-configmap",
        "s3cret-from-secret",
        "#cloud-config from a secret",
        "\"public-keys\":{\"0\":\"ssh-ed25519 AAAAC3NzaE2E e2e@kubevirt-rs\"}",
        "SLIC",
        "MSDM",
    ] {
        assert!(
            output.contains(expected),
            "expected {expected:?} in the guest: {output}"
        );
    }
    assert!(
        output.lines().any(|l| l.trim() == "default"),
        "the service account's namespace file: {output}"
    );
}
