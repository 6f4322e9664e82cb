use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;

fn args(block: bool) -> UploadServerArgs {
    UploadServerArgs {
        claim: "disk".to_owned(),
        namespace: "vms".to_owned(),
        claim_uid: "claim-uid".to_owned(),
        block,
        image_size: "1Gi".to_owned(),
        filesystem_overhead: "0.055".to_owned(),
        preallocation: false,
        scratch_claim: Some("disk-scratch".to_owned()),
        client_name: cdi_api::upload::PROXY_CLIENT_NAME.to_owned(),
        deadline: "2026-11-30T10:00:00Z".to_owned(),
        pod: crate::importer_pod::PodSettings {
            image: "localhost/kubevirt-rs/cdi-uploadserver:latest".to_owned(),
            pull_policy: "IfNotPresent".to_owned(),
            ..crate::importer_pod::PodSettings::default()
        },
        service_account: None,
    }
}

#[test]
fn the_pod_has_upstreams_name_environment_mounts_probe_and_owner() {
    let server = render(&args(false));
    let pod = serde_json::to_value(&server.pod).expect("json");
    assert_eq!(pod["metadata"]["name"], "cdi-upload-disk");
    assert_eq!(
        pod["metadata"]["labels"],
        json!({
            "app": "containerized-data-importer",
            "cdi.kubevirt.io": "cdi-upload-server",
            "service": "cdi-upload-disk",
            "cdi.kubevirt.io/uploadTarget": "claim-uid",
        })
    );
    assert_eq!(pod["metadata"]["ownerReferences"][0]["kind"], "PersistentVolumeClaim");
    assert_eq!(pod["metadata"]["ownerReferences"][0]["uid"], "claim-uid");
    let container = &pod["spec"]["containers"][0];
    assert_eq!(container["name"], "cdi-upload-server");
    assert_eq!(
        container["env"],
        json!([
            {"name": "TLS_KEY_FILE", "value": "/etc/tls/tls.key"},
            {"name": "TLS_CERT_FILE", "value": "/etc/tls/tls.crt"},
            {"name": "CLIENT_CERT_FILE", "value": "/etc/tls/ca.crt"},
            {"name": "FILESYSTEM_OVERHEAD", "value": "0.055"},
            {"name": "UPLOAD_IMAGE_SIZE", "value": "1Gi"},
            {"name": "CLIENT_NAME", "value": "client.upload-server.cdi.kubevirt.io"},
            {"name": "PREALLOCATION", "value": "false"},
            {"name": "DEADLINE", "value": "2026-11-30T10:00:00Z"},
        ])
    );
    assert_eq!(
        container["volumeMounts"],
        json!([
            {"name": "tls-config", "mountPath": "/etc/tls"},
            {"name": "cdi-data-vol", "mountPath": "/data"},
            {"name": "cdi-scratch-vol", "mountPath": "/scratch"},
        ])
    );
    assert_eq!(
        container["startupProbe"],
        json!({"httpGet": {"path": "/healthz", "port": 8443, "scheme": "HTTPS"}, "periodSeconds": 1, "failureThreshold": 300})
    );
    assert_eq!(container["readinessProbe"], json!(null), "ready once started");
    assert_eq!(pod["spec"]["restartPolicy"], "OnFailure");
    assert_eq!(pod["spec"]["volumes"][0]["secret"]["secretName"], "cdi-upload-disk");
    assert_eq!(
        pod["spec"]["volumes"][2]["persistentVolumeClaim"]["claimName"],
        "disk-scratch"
    );
}

#[test]
fn a_block_claim_is_the_destination_device() {
    let pod = serde_json::to_value(render(&args(true)).pod).expect("json");
    let container = &pod["spec"]["containers"][0];
    assert_eq!(
        container["volumeDevices"],
        json!([{"name": "cdi-data-vol", "devicePath": "/dev/cdi-block-volume"}])
    );
    assert_eq!(
        container["env"][8],
        json!({"name": "DESTINATION", "value": "/dev/cdi-block-volume"})
    );
}

#[test]
fn the_service_is_headless_selects_the_pod_and_names_the_certificate() {
    let server = render(&args(false));
    let service = serde_json::to_value(&server.service).expect("json");
    assert_eq!(service["metadata"]["name"], "cdi-upload-disk");
    assert_eq!(
        service["spec"],
        json!({
            "clusterIP": "None",
            "ports": [{"protocol": "TCP", "port": 8443, "targetPort": 8443}],
            "selector": {"service": "cdi-upload-disk"},
        })
    );
    assert_eq!(
        server.dns_names,
        ["cdi-upload-disk.vms.svc", "cdi-upload-disk.vms.svc.cluster.local"]
    );
    let secret = certificate_secret(&server.pod, "CERT", "KEY", "CA");
    let secret = serde_json::to_value(secret).expect("json");
    assert_eq!(secret["metadata"]["name"], "cdi-upload-disk");
    assert_eq!(secret["metadata"]["ownerReferences"][0]["uid"], "claim-uid");
    assert_eq!(
        secret["data"],
        json!({"ca.crt": "Q0E=", "tls.crt": "Q0VSVA==", "tls.key": "S0VZ"})
    );
}
