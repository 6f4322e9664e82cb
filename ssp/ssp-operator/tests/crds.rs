//! The committed SSP CRD is what the types generate; upstream's sample SSPs read into the types;
//! both versions are served, v1beta3 stored, and the fields this operator does not do are refused
//! by rules.

use std::path::Path;

#[path = "../../../kubevirt-tests/support/generated.rs"]
mod generated;

use pretty_assertions::assert_eq;
use ssp_operator::api::SSP;
use ssp_operator::crd;

#[test]
fn the_committed_crd_matches_the_types() {
    let (name, yaml) = crd::render().expect("the CRD renders");
    generated::assert_committed(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../../manifests/ssp/crds"),
        [(name, yaml)],
        "KUBEVIRT_RS_UPDATE_GOLDEN=1 cargo test -p ssp-operator --test crds",
    );
}

#[test]
fn the_crd_has_upstreams_name_versions_and_scope() {
    let crd = crd::crd().expect("the CRD");
    assert_eq!(crd.metadata.name.as_deref(), Some("ssps.ssp.kubevirt.io"));
    assert_eq!(crd.spec.scope, "Namespaced");
    let versions: Vec<(&str, bool, bool, Option<bool>)> = crd
        .spec
        .versions
        .iter()
        .map(|v| (v.name.as_str(), v.served, v.storage, v.deprecated))
        .collect();
    assert_eq!(
        versions,
        [("v1beta2", true, false, Some(true)), ("v1beta3", true, true, None)]
    );
    assert_eq!(crd.spec.conversion.as_ref().map(|c| c.strategy.as_str()), Some("None"));
    let json = serde_json::to_value(&crd).expect("JSON");
    assert_eq!(
        json.pointer("/spec/versions/1/schema/openAPIV3Schema/properties/spec/required"),
        Some(&serde_json::json!(["commonTemplates"]))
    );
    assert_eq!(
        json.pointer("/spec/versions/1/schema/openAPIV3Schema/properties/spec/properties/templateValidator/properties/replicas/default"),
        Some(&serde_json::json!(2))
    );
    let v1beta2_spec = json
        .pointer("/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties")
        .expect("v1beta2's spec");
    assert!(v1beta2_spec.get("cluster").is_none() && v1beta2_spec.get("featureGates").is_some());
}

#[test]
fn upstreams_sample_reads() {
    let sample = r"
apiVersion: ssp.kubevirt.io/v1beta3
kind: SSP
metadata:
  name: ssp-sample
  namespace: kubevirt
spec:
  commonTemplates:
    namespace: kubevirt
  templateValidator:
    replicas: 2
";
    let ssp: SSP = serde_saphyr::from_str(sample).expect("the sample reads");
    assert_eq!(ssp.validator_replicas(), 2);
    assert_eq!(ssp.spec.common_templates.namespace, "kubevirt");
}
