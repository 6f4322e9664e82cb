//! Affinity and topology spread constraints, restating upstream's admitter cases: each invalid
//! input gives exactly Kubernetes' field errors, at upstream's paths (from `spec`, without
//! `affinity`).

use kubevirt_api::v1::{ClusterConfig, VirtualMachineInstance};
use kubevirt_api::validation::{CauseType, validate_vmi_spec};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

const NAME_REGEX: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

fn causes(scheduling: &Value) -> Vec<(CauseType, String, String)> {
    let mut spec = json!({
        "domain": {"resources": {"requests": {"memory": "128Mi"}}, "devices": {}}
    });
    for (key, value) in scheduling.as_object().expect("object") {
        spec[key] = value.clone();
    }
    let vmi: VirtualMachineInstance = serde_json::from_value(json!({
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
        "metadata": {"name": "v"}, "spec": spec
    }))
    .expect("VMI");
    validate_vmi_spec(&vmi.spec, "spec", &ClusterConfig::default())
        .into_iter()
        .map(|c| (c.kind, c.field, c.message))
        .collect()
}

fn pod_term(expression: &Value, topology_key: &str) -> Value {
    json!({"labelSelector": {"matchExpressions": [expression]}, "topologyKey": topology_key})
}

fn owned(expected: &[(CauseType, &str, &str)]) -> Vec<(CauseType, String, String)> {
    expected
        .iter()
        .map(|(k, f, m)| (*k, (*f).to_owned(), (*m).to_owned()))
        .collect()
}

#[test]
fn pod_affinity_terms_need_a_valid_topology_key_and_values_for_in() {
    for kind in ["podAffinity", "podAntiAffinity"] {
        let key = format!("spec.{kind}.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey");
        let values = format!(
            "spec.{kind}.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector.matchExpressions[0].values"
        );
        let required = |term: Value| {
            causes(&json!({"affinity": {kind: {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}}))
        };
        let empty_key = [
            (
                CauseType::Required,
                key.as_str(),
                format!("{key}: Required value: can not be empty"),
            ),
            (
                CauseType::Invalid,
                key.as_str(),
                format!("{key}: Invalid value: \"\": name part must be non-empty"),
            ),
            (
                CauseType::Invalid,
                key.as_str(),
                format!("{key}: Invalid value: \"\": {NAME_REGEX}"),
            ),
        ];
        let expected: Vec<(CauseType, &str, &str)> = empty_key.iter().map(|(k, f, m)| (*k, *f, m.as_str())).collect();
        assert_eq!(
            required(pod_term(&json!({"key": "key1", "operator": "Exists"}), "")),
            owned(&expected),
            "{kind}: empty topology key"
        );
        assert_eq!(
            required(pod_term(&json!({"key": "key1", "operator": "In", "values": [""]}), "")),
            owned(&expected),
            "{kind}: an empty value is fine"
        );
        let values_message = format!("{values}: Required value: must be specified when `operator` is 'In' or 'NotIn'");
        let bad_key = format!("{key}: Invalid value: \"hostname=host1\": {NAME_REGEX}");
        assert_eq!(
            required(pod_term(&json!({"key": "key1", "operator": "In"}), "hostname=host1")),
            owned(&[
                (CauseType::Required, &values, &values_message),
                (CauseType::Invalid, &key, &bad_key),
            ]),
            "{kind}: no values and a bad key"
        );
        assert_eq!(
            required(pod_term(&json!({"key": "key1", "operator": "In"}), "")).len(),
            4
        );
        assert_eq!(
            required(pod_term(
                &json!({"key": "key1", "operator": "In", "values": ["a"]}),
                "zone"
            )),
            vec![]
        );
    }
    let weight = "spec.podAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight";
    assert_eq!(
        causes(
            &json!({"affinity": {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 255, "podAffinityTerm": pod_term(&json!({"key": "key1", "operator": "Exists"}), "test")}
            ]}}})
        ),
        owned(&[(
            CauseType::Invalid,
            weight,
            &format!("{weight}: Invalid value: 255: must be in the range 1-100")
        )])
    );
}

#[test]
fn node_affinity_match_fields_select_node_names_only() {
    let term = |requirement: Value| {
        causes(
            &json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchFields": [requirement]}]
            }}}}),
        )
    };
    let at = "spec.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchFields[0]";
    let key = format!("{at}.key");
    let found = term(json!({"key": "key", "operator": "In", "values": ["value1"]}));
    assert_eq!(
        found[0],
        (
            CauseType::Invalid,
            key.clone(),
            format!("{key}: Invalid value: \"key\": not a valid field selector key")
        )
    );
    let value = format!("{at}.values[0]");
    assert_eq!(
        term(json!({"key": "metadata.name", "operator": "In", "values": [""]})),
        vec![(
            CauseType::Invalid,
            value.clone(),
            format!(
                "{value}: Invalid value: \"\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
            )
        )]
    );
    assert_eq!(
        term(json!({"key": "metadata.name", "operator": "In", "values": ["node01"]})),
        vec![]
    );
}

#[test]
fn topology_spread_constraints_follow_upstreams_cases() {
    let spread = |constraint: Value| causes(&json!({"topologySpreadConstraints": [constraint]}));
    let valid = json!({"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"});
    assert_eq!(spread(valid.clone()), vec![]);
    let key = "spec.topologySpreadConstraints[0].topologyKey";
    let mut empty = valid.clone();
    empty["topologyKey"] = json!("");
    assert_eq!(
        spread(empty),
        owned(&[(
            CauseType::Required,
            key,
            &format!("{key}: Required value: can not be empty")
        )])
    );
    let mut bad = valid.clone();
    bad["topologyKey"] = json!("hostname=host1");
    assert_eq!(
        spread(bad),
        owned(&[(
            CauseType::Invalid,
            key,
            &format!("{key}: Invalid value: \"hostname=host1\": {NAME_REGEX}")
        )])
    );
    let skew = "spec.topologySpreadConstraints[0].maxSkew";
    let mut negative = valid.clone();
    negative["maxSkew"] = json!(-1);
    assert_eq!(
        spread(negative),
        owned(&[(
            CauseType::Invalid,
            skew,
            &format!("{skew}: Invalid value: -1: must be greater than zero")
        )])
    );
    let values = "spec.topologySpreadConstraints.labelSelector.matchExpressions[0].values";
    let mut no_values = valid;
    no_values["labelSelector"] = json!({"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In"}]});
    assert_eq!(
        spread(no_values),
        owned(&[(
            CauseType::Required,
            values,
            &format!("{values}: Required value: must be specified when `operator` is 'In' or 'NotIn'")
        )])
    );
}
