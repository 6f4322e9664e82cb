//! The committed CDI CRDs are exactly what the types generate, with upstream's names, short names
//! and printer columns; upstream's example manifests read into the types and back unchanged.
//!
//! Set `KUBEVIRT_RS_UPDATE_GOLDEN=1` to rewrite `manifests/cdi/crds/` from the types.

use std::path::{Path, PathBuf};

#[path = "../../../kubevirt-tests/support/generated.rs"]
mod generated;

use cdi_api::{DataSource, DataVolume, DataVolumePhase, crd};
use pretty_assertions::assert_eq;
use serde_json::json;

fn crd_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../manifests/cdi/crds")
}

#[test]
fn committed_crds_match_the_types() {
    let files = crd::render_all()
        .expect("CRDs render")
        .into_iter()
        .map(|c| (c.file_name, c.yaml));
    generated::assert_committed(
        &crd_dir(),
        files,
        "KUBEVIRT_RS_UPDATE_GOLDEN=1 cargo test -p cdi-api --test crds",
    );
}

#[test]
fn the_crds_have_upstreams_names_scope_and_columns() {
    let crds = crd::all();
    let datavolumes = crds
        .iter()
        .find(|c| c.spec.names.plural == "datavolumes")
        .expect("datavolumes");
    assert_eq!(
        datavolumes.metadata.name.as_deref(),
        Some("datavolumes.cdi.kubevirt.io")
    );
    assert_eq!(datavolumes.spec.scope, "Namespaced");
    assert_eq!(
        datavolumes.spec.names.short_names,
        Some(vec!["dv".to_owned(), "dvs".to_owned()])
    );
    assert_eq!(datavolumes.spec.names.categories, Some(vec!["all".to_owned()]));
    let version = &datavolumes.spec.versions[0];
    assert_eq!(
        (version.name.as_str(), version.served, version.storage),
        ("v1beta1", true, true)
    );
    assert!(version.subresources.as_ref().and_then(|s| s.status.as_ref()).is_some());
    let columns: Vec<(String, String, String)> = version
        .additional_printer_columns
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|c| (c.name, c.type_, c.json_path))
        .collect();
    let expected = [
        ("Phase", "string", ".status.phase"),
        ("Progress", "string", ".status.progress"),
        ("Restarts", "integer", ".status.restartCount"),
        ("Age", "date", ".metadata.creationTimestamp"),
    ]
    .map(|(a, b, c)| (a.to_owned(), b.to_owned(), c.to_owned()));
    assert_eq!(columns, expected);
    let datasources = crds
        .iter()
        .find(|c| c.spec.names.plural == "datasources")
        .expect("datasources");
    assert_eq!(datasources.spec.names.short_names, Some(vec!["das".to_owned()]));
    assert_eq!(datasources.spec.scope, "Namespaced");
}

/// Upstream's documented DataVolumes (an HTTP import with `storage`, a registry import, an upload
/// with `pvc`, a clone, a blank disk, a `sourceRef`) and a DataSource read and write back as given.
#[test]
fn upstreams_manifests_round_trip() {
    let manifests = [
        json!({"apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "DataVolume",
               "metadata": {"name": "fedora", "namespace": "default",
                            "annotations": {"cdi.kubevirt.io/storage.bind.immediate.requested": "true"}},
               "spec": {"source": {"http": {"url": "https://example.org/fedora.qcow2.xz",
                                            "secretRef": "creds", "certConfigMap": "ca",
                                            "extraHeaders": ["X-Token: 1"]}},
                        "storage": {"resources": {"requests": {"storage": "10Gi"}}}},
               "status": {"phase": "ImportInProgress", "progress": "12.50%", "restartCount": 1,
                          "claimName": "fedora",
                          "conditions": [{"type": "Running", "status": "True", "reason": "Pod is running"}]}}),
        json!({"apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "DataVolume", "metadata": {"name": "registry"},
               "spec": {"source": {"registry": {"url": "docker://registry.example/disk:latest", "pullMethod": "pod"}},
                        "storage": {"accessModes": ["ReadWriteOnce"], "volumeMode": "Block",
                                    "resources": {"requests": {"storage": "5Gi"}}},
                        "contentType": "kubevirt"}}),
        json!({"apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "DataVolume", "metadata": {"name": "upload"},
               "spec": {"source": {"upload": {}},
                        "pvc": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}}),
        json!({"apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "DataVolume", "metadata": {"name": "clone"},
               "spec": {"source": {"pvc": {"namespace": "golden", "name": "fedora"}},
                        "storage": {"storageClassName": "hostpath-csi"}}}),
        json!({"apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "DataVolume", "metadata": {"name": "blank"},
               "spec": {"source": {"blank": {}}, "storage": {"resources": {"requests": {"storage": "1Gi"}}},
                        "preallocation": true}}),
        json!({"apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "DataVolume", "metadata": {"name": "from-ref"},
               "spec": {"sourceRef": {"kind": "DataSource", "namespace": "golden", "name": "fedora"},
                        "storage": {}}}),
    ];
    for manifest in manifests {
        let typed: DataVolume = serde_json::from_value(manifest.clone()).expect("a DataVolume");
        assert_eq!(serde_json::to_value(&typed).expect("JSON"), manifest);
    }
    let source = json!({"apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "DataSource",
                        "metadata": {"name": "fedora", "namespace": "golden"},
                        "spec": {"source": {"pvc": {"namespace": "golden", "name": "fedora-41"}}},
                        "status": {"source": {"pvc": {"namespace": "golden", "name": "fedora-41"}},
                                   "conditions": [{"type": "Ready", "status": "True", "reason": "Ready"}]}});
    let typed: DataSource = serde_json::from_value(source.clone()).expect("a DataSource");
    assert_eq!(serde_json::to_value(&typed).expect("JSON"), source);
}

#[test]
fn every_upstream_phase_reads_and_writes_as_upstream_spells_it() {
    let phases = [
        "",
        "Pending",
        "PVCBound",
        "ImportScheduled",
        "ImportInProgress",
        "CloneScheduled",
        "CloneInProgress",
        "SnapshotForSmartCloneInProgress",
        "CloneFromSnapshotSourceInProgress",
        "SmartClonePVCInProgress",
        "CSICloneInProgress",
        "ExpansionInProgress",
        "NamespaceTransferInProgress",
        "UploadScheduled",
        "UploadReady",
        "WaitForFirstConsumer",
        "PendingPopulation",
        "Succeeded",
        "Failed",
        "Unknown",
        "Paused",
        "PrepClaimInProgress",
        "RebindInProgress",
    ];
    for spelled in phases {
        let phase: DataVolumePhase = serde_json::from_value(json!(spelled)).expect(spelled);
        assert_eq!(serde_json::to_value(phase).expect("JSON"), json!(spelled));
    }
    assert!(serde_json::from_value::<DataVolumePhase>(json!("Importing")).is_err());
}

/// StorageProfile, CDIConfig and CDI are cluster-scoped, as upstream's; CDI has its short names
/// and columns; upstream-shaped objects of each read into the types and back unchanged.
#[test]
fn the_cluster_scoped_kinds_have_upstreams_names_and_round_trip() {
    let crds = crd::all();
    let find = |plural: &str| {
        crds.iter()
            .find(|c| c.spec.names.plural == plural)
            .unwrap_or_else(|| panic!("{plural}"))
    };
    for plural in ["storageprofiles", "cdiconfigs", "cdis"] {
        assert_eq!(find(plural).spec.scope, "Cluster", "{plural}");
    }
    let cdi = find("cdis");
    assert_eq!(
        cdi.spec.names.short_names,
        Some(vec!["cdi".to_owned(), "cdis".to_owned()])
    );
    let columns: Vec<String> = cdi.spec.versions[0]
        .additional_printer_columns
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|c| format!("{} {} {}", c.name, c.type_, c.json_path))
        .collect();
    assert_eq!(
        columns,
        ["Age date .metadata.creationTimestamp", "Phase string .status.phase"]
    );

    let profile = json!({
        "apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "StorageProfile",
        "metadata": {"name": "hostpath-csi"},
        "spec": {"claimPropertySets": [{"accessModes": ["ReadWriteOnce"], "volumeMode": "Filesystem"}]},
        "status": {
            "storageClass": "hostpath-csi", "provisioner": "kubevirt.io.hostpath-provisioner",
            "cloneStrategy": "copy", "dataImportCronSourceFormat": "pvc",
            "claimPropertySets": [{"accessModes": ["ReadWriteOnce"], "volumeMode": "Filesystem"}],
            "conditions": [{"type": "Recognized", "status": "True", "reason": "RecognizedProvisioner",
                            "message": "Provisioner is recognized"}]
        }
    });
    let config = json!({
        "apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "CDIConfig", "metadata": {"name": "config"},
        "spec": {
            "uploadProxyURLOverride": "https://upload.example", "scratchSpaceStorageClass": "hostpath-csi",
            "filesystemOverhead": {"global": "0.06", "storageClass": {"local": "0.1"}},
            "importProxy": {"HTTPProxy": "http://proxy:3128", "noProxy": ".svc"},
            "podResourceRequirements": {"limits": {"cpu": "750m", "memory": "600M"}},
            "dataVolumeTTLSeconds": -1
        },
        "status": {"uploadProxyURL": "https://upload.example", "scratchSpaceStorageClass": "hostpath-csi",
                   "filesystemOverhead": {"global": "0.06", "storageClass": {"hostpath-csi": "0.06"}},
                   "preallocation": false}
    });
    let cdi = json!({
        "apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "CDI", "metadata": {"name": "cdi"},
        "spec": {
            "imagePullPolicy": "IfNotPresent", "uninstallStrategy": "BlockUninstallIfWorkloadsExist",
            "infra": {"nodeSelector": {"kubernetes.io/os": "linux"}, "apiServerReplicas": 1},
            "workload": {"nodeSelector": {"kubernetes.io/os": "linux"}},
            "config": {"featureGates": ["HonorWaitForFirstConsumer"]},
            "certConfig": {"ca": {"duration": "48h", "renewBefore": "24h"}}
        },
        "status": {"phase": "Deployed", "observedVersion": "v1.62.0",
                   "conditions": [{"type": "Available", "status": "True", "reason": "DeployCompleted"}]}
    });
    let round_trip = |value: &serde_json::Value, parsed: serde_json::Value| assert_eq!(&parsed, value);
    round_trip(
        &profile,
        serde_json::to_value(serde_json::from_value::<cdi_api::StorageProfile>(profile.clone()).expect("profile"))
            .expect("JSON"),
    );
    round_trip(
        &config,
        serde_json::to_value(serde_json::from_value::<cdi_api::CDIConfig>(config.clone()).expect("config"))
            .expect("JSON"),
    );
    round_trip(
        &cdi,
        serde_json::to_value(serde_json::from_value::<cdi_api::CDI>(cdi.clone()).expect("cdi")).expect("JSON"),
    );
}
