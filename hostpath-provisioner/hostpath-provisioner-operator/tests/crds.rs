//! The committed HostPathProvisioner CRD is what the types generate; upstream's sample CR reads
//! into the types and back unchanged; the fields this operator does not do are refused by rules.

use std::path::Path;

#[path = "../../../kubevirt-tests/support/generated.rs"]
mod generated;

use hostpath_provisioner_operator::api::HostPathProvisioner;
use hostpath_provisioner_operator::crd;
use pretty_assertions::assert_eq;

#[test]
fn the_committed_crd_matches_the_types() {
    let (name, yaml) = crd::render().expect("the CRD renders");
    generated::assert_committed(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../../manifests/hostpath-provisioner/crds"),
        [(name, yaml)],
        "KUBEVIRT_RS_UPDATE_GOLDEN=1 cargo test -p hostpath-provisioner-operator --test crds",
    );
}

#[test]
fn the_crd_has_upstreams_name_group_and_scope() {
    let crd = crd::crd().expect("the CRD");
    assert_eq!(
        crd.metadata.name.as_deref(),
        Some("hostpathprovisioners.hostpathprovisioner.kubevirt.io")
    );
    assert_eq!(crd.spec.scope, "Cluster");
    assert_eq!(crd.spec.versions[0].name, "v1beta1");
    assert!(
        crd.spec.versions[0]
            .subresources
            .as_ref()
            .and_then(|s| s.status.as_ref())
            .is_some()
    );
}

#[test]
fn every_unsupported_field_has_a_rule_that_names_it() {
    let crd = serde_json::to_value(crd::crd().expect("the CRD")).expect("JSON");
    let schema = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
    let messages = |node: &serde_json::Value| -> Vec<String> {
        node["x-kubernetes-validations"]
            .as_array()
            .map(|rules| {
                rules
                    .iter()
                    .map(|r| r["message"].as_str().unwrap_or_default().to_owned())
                    .collect()
            })
            .unwrap_or_default()
    };
    let spec_rules = messages(schema).join("\n");
    for field in [
        "spec.pathConfig",
        "spec.storagePools: at least one",
        "spec.featureGates: Snapshotting",
    ] {
        assert!(spec_rules.contains(field), "{field} in {spec_rules}");
    }
    let pools = &schema["properties"]["storagePools"];
    assert_eq!(pools["maxItems"], crd::MAX_POOLS);
    let pool_rules = messages(pools).join("\n");
    assert!(pool_rules.contains("name must be unique") && pool_rules.contains("path must be unique"));
    let item_rules = messages(&pools["items"]).join("\n");
    for field in ["name", "pvcTemplate", "snapshotProvider", "overlayClassName"] {
        assert!(
            item_rules.contains(&format!("spec.storagePools[].{field}")),
            "{field} in {item_rules}"
        );
    }
    assert_eq!(pools["items"]["properties"]["name"]["maxLength"], 50);
    let gates = &schema["properties"]["featureGates"];
    assert_eq!(
        (gates["maxItems"].clone(), gates["items"]["maxLength"].clone()),
        (serde_json::json!(crd::MAX_FEATURE_GATES), serde_json::json!(63))
    );
}

#[test]
fn upstreams_sample_cr_reads_and_writes_unchanged() {
    // Upstream's deploy/hostpathprovisioner_cr.yaml.
    let sample = serde_json::json!({
        "apiVersion": "hostpathprovisioner.kubevirt.io/v1beta1",
        "kind": "HostPathProvisioner",
        "metadata": { "name": "hostpath-provisioner" },
        "spec": {
            "imagePullPolicy": "Always",
            "storagePools": [{ "name": "local", "path": "/var/hpvolumes" }],
            "workload": { "nodeSelector": { "kubernetes.io/os": "linux" } },
        },
    });
    let cr: HostPathProvisioner = serde_json::from_value(sample.clone()).expect("reads");
    assert_eq!(cr.spec.storage_pools[0].path, "/var/hpvolumes");
    assert_eq!(serde_json::to_value(&cr).expect("writes"), sample);
}
