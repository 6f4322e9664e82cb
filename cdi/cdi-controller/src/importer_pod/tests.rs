use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;

fn args(source: ImportSource) -> ImporterPodArgs {
    ImporterPodArgs {
        claim: "disk".to_owned(),
        namespace: "vms".to_owned(),
        claim_uid: "claim-uid".to_owned(),
        block: false,
        source,
        insecure_registry: false,
        image_size: "10Gi".to_owned(),
        filesystem_overhead: "0.055".to_owned(),
        preallocation: false,
        scratch_claim: None,
        owner_uid: "dv-uid".to_owned(),
        pod: crate::importer_pod::PodSettings {
            image: "localhost/kubevirt-rs/cdi-importer:latest".to_owned(),
            pull_policy: "IfNotPresent".to_owned(),
            ..crate::importer_pod::PodSettings::default()
        },
        service_account: None,
    }
}

fn http() -> DataVolumeSourceHttp {
    DataVolumeSourceHttp {
        url: "https://images.example/disk.qcow2".to_owned(),
        secret_ref: Some("creds".to_owned()),
        cert_config_map: Some("ca".to_owned()),
        extra_headers: vec!["X-Token: abc".to_owned()],
        checksum: Some("sha256:00".to_owned()),
        ..DataVolumeSourceHttp::default()
    }
}

#[test]
fn an_http_import_pod_is_upstreams_layout() {
    let pod = serde_json::to_value(render(&args(ImportSource::Http(http())))).expect("json");
    assert_eq!(pod["metadata"]["name"], "importer-disk");
    assert_eq!(
        pod["metadata"]["ownerReferences"],
        json!([{"apiVersion": "v1", "kind": "PersistentVolumeClaim", "name": "disk", "uid": "claim-uid",
                "controller": true, "blockOwnerDeletion": true}])
    );
    assert_eq!(pod["spec"]["restartPolicy"], "OnFailure");
    assert_eq!(
        pod["spec"]["securityContext"],
        json!({"runAsUser": 107, "runAsGroup": 107, "fsGroup": 107, "runAsNonRoot": true,
               "seccompProfile": {"type": "RuntimeDefault"}})
    );
    assert_eq!(
        pod["spec"]["containers"][0]["securityContext"],
        json!({"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}, "runAsNonRoot": true})
    );
    let container = &pod["spec"]["containers"][0];
    assert_eq!(container["name"], "importer");
    assert_eq!(
        container["volumeMounts"],
        json!([{"name": "cdi-data-vol", "mountPath": "/data"}, {"name": "cdi-cert-vol", "mountPath": "/certs"}])
    );
    assert_eq!(
        pod["spec"]["volumes"],
        json!([{"name": "cdi-data-vol", "persistentVolumeClaim": {"claimName": "disk"}},
               {"name": "cdi-cert-vol", "configMap": {"name": "ca"}}])
    );
    assert_eq!(
        container["env"],
        json!([
            {"name": "IMPORTER_SOURCE", "value": "http"},
            {"name": "IMPORTER_ENDPOINT", "value": "https://images.example/disk.qcow2"},
            {"name": "IMPORTER_CONTENTTYPE", "value": "kubevirt"},
            {"name": "IMPORTER_IMAGE_SIZE", "value": "10Gi"},
            {"name": "OWNER_UID", "value": "dv-uid"},
            {"name": "FILESYSTEM_OVERHEAD", "value": "0.055"},
            {"name": "INSECURE_TLS", "value": "false"},
            {"name": "PREALLOCATION", "value": "false"},
            {"name": "IMPORTER_CHECKSUM", "value": "sha256:00"},
            {"name": "IMPORTER_ACCESS_KEY_ID", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "accessKeyId"}}},
            {"name": "IMPORTER_SECRET_KEY", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "secretKey"}}},
            {"name": "IMPORTER_CERT_DIR", "value": "/certs"},
            {"name": "IMPORTER_EXTRA_HEADER_0", "value": "X-Token: abc"},
        ])
    );
}

#[test]
fn a_block_claim_is_a_device_and_scratch_is_mounted_when_asked_for() {
    let mut block = args(ImportSource::Blank);
    block.block = true;
    block.scratch_claim = Some("disk-scratch".to_owned());
    let pod = serde_json::to_value(render(&block)).expect("json");
    let container = &pod["spec"]["containers"][0];
    assert_eq!(
        container["volumeDevices"],
        json!([{"name": "cdi-data-vol", "devicePath": "/dev/cdi-block-volume"}])
    );
    assert_eq!(
        container["volumeMounts"],
        json!([{"name": "cdi-scratch-vol", "mountPath": "/scratch"}])
    );
    assert_eq!(
        pod["spec"]["volumes"][1],
        json!({"name": "cdi-scratch-vol", "persistentVolumeClaim": {"claimName": "disk-scratch"}})
    );
    assert_eq!(container["env"][0], json!({"name": "IMPORTER_SOURCE", "value": "none"}));
    // Held back from the scheduler until its scratch claim, made after it, is there.
    assert_eq!(pod["spec"]["schedulingGates"], json!([{"name": SCRATCH_GATE}]));
    let without = serde_json::to_value(render(&args(ImportSource::Blank))).expect("json");
    assert_eq!(
        without["spec"]["schedulingGates"],
        json!(null),
        "no scratch claim, no gate"
    );
}

/// The pod's environment resolved as the kubelet would, the secret holding `user` and `password`.
fn resolved_env(pod: Pod) -> BTreeMap<String, String> {
    let secret = BTreeMap::from([("accessKeyId", "user"), ("secretKey", "password")]);
    pod.spec.expect("spec").containers[0]
        .env
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|var| {
            let value = var.value.unwrap_or_else(|| {
                let key = var.value_from.and_then(|f| f.secret_key_ref).expect("a secret key").key;
                secret[key.as_str()].to_owned()
            });
            (var.name, value)
        })
        .collect()
}

/// The pod's environment is what the importer reads: rendered, resolved as the kubelet would,
/// and read back by the importer's own parser into the job the DataVolume asked for.
#[test]
fn the_importer_reads_back_the_job_the_pod_describes() {
    let mut source = http();
    source.checksum = Some(format!("sha256:{}", "a".repeat(64)));
    let vars = resolved_env(render(&args(ImportSource::Http(source))));
    let job = cdi_importer::job::from_env(&vars).expect("the importer reads the pod's environment");
    let cdi_importer::job::Source::Http(read) = job.source else {
        panic!("an http job")
    };
    assert_eq!(read.url, "https://images.example/disk.qcow2");
    assert_eq!(read.basic_auth, Some(("user".to_owned(), "password".to_owned())));
    assert_eq!(read.extra_headers, ["X-Token: abc"]);
    assert_eq!(job.cert_dir, Some(std::path::PathBuf::from("/certs")));
    assert_eq!(job.image_size, Some(10 << 30));
    assert_eq!(job.filesystem_overhead, "0.055");
    assert!(!job.preallocation);
    assert_eq!(job.checksum.map(|c| c.hash), Some("a".repeat(64)));

    let blank = render(&args(ImportSource::Blank));
    let vars: BTreeMap<String, String> = blank.spec.expect("spec").containers[0]
        .env
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|var| (var.name, var.value.unwrap_or_default()))
        .collect();
    let job = cdi_importer::job::from_env(&vars).expect("a blank job");
    assert_eq!(job.source, cdi_importer::job::Source::Blank);
}

#[test]
fn a_registry_import_pod_carries_its_credentials_ca_platform_and_insecure_flag() {
    let registry = DataVolumeSourceRegistry {
        url: Some("docker://registry.disks:5000/testguest:v1".to_owned()),
        secret_ref: Some("creds".to_owned()),
        cert_config_map: Some("registry-ca".to_owned()),
        platform: Some(cdi_api::data_volume::PlatformOptions {
            architecture: Some("arm64".to_owned()),
        }),
        ..DataVolumeSourceRegistry::default()
    };
    let mut registry_args = args(ImportSource::Registry(registry));
    registry_args.insecure_registry = true;
    let pod = render(&registry_args);
    let json = serde_json::to_value(&pod).expect("json");
    assert_eq!(
        json["spec"]["volumes"][1],
        json!({"name": "cdi-cert-vol", "configMap": {"name": "registry-ca"}})
    );
    let job = cdi_importer::job::from_env(&resolved_env(pod)).expect("the importer reads the pod's environment");
    assert_eq!(
        job.source,
        cdi_importer::job::Source::Registry(cdi_importer::registry::RegistrySource {
            url: "docker://registry.disks:5000/testguest:v1".to_owned(),
            credentials: Some(("user".to_owned(), "password".to_owned())),
            extra_roots_pem: Vec::new(),
            insecure: true,
            architecture: Some("arm64".to_owned()),
        })
    );
    assert_eq!(job.cert_dir, Some(std::path::PathBuf::from("/certs")));
}
