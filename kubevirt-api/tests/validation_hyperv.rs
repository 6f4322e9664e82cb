//! Hyper-V enlightenment dependencies and Hyper-V passthrough, restating upstream's admitter
//! cases.

use kubevirt_api::v1::{ClusterConfig, VirtualMachineInstance};
use kubevirt_api::validation::{CauseType, validate_vmi_spec};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

fn causes(features: &Value, cpu: &Value) -> Vec<(CauseType, String, String)> {
    let vmi: VirtualMachineInstance = serde_json::from_value(json!({
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance", "metadata": {"name": "v"},
        "spec": {"domain": {
            "resources": {"requests": {"memory": "128Mi"}}, "devices": {},
            "features": features, "cpu": cpu
        }}
    }))
    .expect("VMI");
    validate_vmi_spec(&vmi.spec, "spec", &ClusterConfig::default())
        .into_iter()
        .map(|c| (c.kind, c.field, c.message))
        .collect()
}

fn one(kind: CauseType, field: &str, message: &str) -> (CauseType, String, String) {
    (kind, field.to_owned(), message.to_owned())
}

const EVMCS_NEEDS_VAPIC: &str =
    "'spec.domain.features.hyperv.evmcs' requires 'spec.domain.features.hyperv.vapic', which was disabled.";

#[test]
fn evmcs_needs_vapic_and_the_vmx_feature_required() {
    let evmcs = json!({"hyperv": {"evmcs": {"enabled": true}, "vapic": {"enabled": false}}});
    assert_eq!(
        causes(&evmcs, &json!({})),
        vec![
            one(
                CauseType::Invalid,
                "spec.domain.features.hyperv.evmcs",
                EVMCS_NEEDS_VAPIC
            ),
            one(
                CauseType::Required,
                "spec.domain.cpu.features",
                "vmx cpu feature is required when evmcs is set"
            ),
        ],
        "two issues at once"
    );
    assert_eq!(
        causes(&evmcs, &json!({"features": [{"name": "vmx", "policy": "require"}]})),
        vec![one(
            CauseType::Invalid,
            "spec.domain.features.hyperv.evmcs",
            EVMCS_NEEDS_VAPIC
        )]
    );
    let with_vapic = json!({"hyperv": {"evmcs": {"enabled": true}, "vapic": {"enabled": true}}});
    assert_eq!(
        causes(&with_vapic, &json!({})),
        vec![one(
            CauseType::Required,
            "spec.domain.cpu.features",
            "vmx cpu feature is required when evmcs is set"
        )]
    );
    assert_eq!(
        causes(&with_vapic, &json!({"features": [{"name": "vmx", "policy": "forbid"}]})),
        vec![one(
            CauseType::Invalid,
            "spec.domain.cpu.features[0].policy",
            "vmx cpu feature has to be set to require policy"
        )]
    );
    assert_eq!(
        causes(
            &with_vapic,
            &json!({"features": [{"name": "vmx", "policy": "require"}]})
        ),
        vec![]
    );
}

#[test]
fn a_broken_synic_chain_is_reported() {
    let found = causes(
        &json!({"hyperv": {"relaxed": {"enabled": true}, "synic": {"enabled": true}, "synictimer": {"enabled": true}}}),
        &json!({}),
    );
    assert_eq!(
        found,
        vec![one(
            CauseType::Invalid,
            "spec.domain.features.hyperv.synic",
            "'spec.domain.features.hyperv.synic' requires 'spec.domain.features.hyperv.vpindex', which was disabled."
        )]
    );
    let complete = json!({"hyperv": {
        "synic": {"enabled": true}, "synictimer": {"enabled": true}, "vpindex": {"enabled": true}
    }});
    assert_eq!(causes(&complete, &json!({})), vec![]);
}

#[test]
fn explicit_enlightenments_and_passthrough_exclude_each_other() {
    assert_eq!(
        causes(
            &json!({"hyperv": {}, "hypervPassthrough": {"enabled": true}}),
            &json!({})
        ),
        vec![one(
            CauseType::Invalid,
            "spec.domain.features.hyperv",
            "Cannot explicitly set hyperV features if HypervPassthrough is being used. Please use either HyperV or HypervPassthrough."
        )]
    );
    assert_eq!(
        causes(&json!({"hypervPassthrough": {"enabled": true}}), &json!({})),
        vec![]
    );
}
