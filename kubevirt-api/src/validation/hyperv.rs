//! Hyper-V enlightenments (upstream's `webhooks/hyperv.go`): an enabled enlightenment whose
//! requirement is not enabled (`synic` and `synictimer` chains, `tlbflush` and `ipi` on `vpindex`,
//! `evmcs` on `vapic` and the `vmx` CPU feature), and explicit enlightenments beside Hyper-V
//! passthrough. A feature counts as enabled only when `enabled: true` is set: the mutating webhook
//! fills in requirements the user left unset, so what is left here was turned off on purpose.

use super::{Cause, CauseType, cause};
use crate::v1::VirtualMachineInstanceSpec;

fn on(enabled: Option<bool>) -> bool {
    enabled == Some(true)
}

/// Checks the Hyper-V enlightenments of the spec at `base`.
pub(super) fn check_hyperv(spec: &VirtualMachineInstanceSpec, base: &str, causes: &mut Vec<Cause>) {
    let Some(features) = spec.domain.features.as_ref() else {
        return;
    };
    let Some(h) = features.hyperv.as_ref() else { return };
    let at = |name: &str| format!("{base}.domain.features.hyperv.{name}");
    let state = |s: &Option<crate::v1::FeatureState>| on(s.as_ref().and_then(|f| f.enabled));
    // Leaves first, as upstream lists them.
    let dependencies = [
        ("evmcs", state(&h.evmcs), "vapic", state(&h.vapic)),
        ("ipi", state(&h.ipi), "vpindex", state(&h.vpindex)),
        (
            "tlbflush",
            on(h.tlbflush.as_ref().and_then(|t| t.enabled)),
            "vpindex",
            state(&h.vpindex),
        ),
        (
            "synictimer",
            on(h.synictimer.as_ref().and_then(|t| t.enabled)),
            "synic",
            state(&h.synic),
        ),
        ("synic", state(&h.synic), "vpindex", state(&h.vpindex)),
    ];
    for (feature, enabled, requirement, fulfilled) in dependencies {
        if enabled && !fulfilled {
            causes.push(cause(
                CauseType::Invalid,
                at(feature),
                format!("'{}' requires '{}', which was disabled.", at(feature), at(requirement)),
            ));
        }
    }
    if h.evmcs.as_ref().is_some_and(|e| e.enabled != Some(false)) {
        let cpu_features = spec
            .domain
            .cpu
            .as_ref()
            .map(|c| c.features.as_slice())
            .unwrap_or_default();
        if cpu_features.is_empty() {
            causes.push(cause(
                CauseType::Required,
                "spec.domain.cpu.features".to_owned(),
                "vmx cpu feature is required when evmcs is set".to_owned(),
            ));
        }
        for (i, feature) in cpu_features.iter().enumerate() {
            if feature.name == "vmx" && feature.policy.as_deref() != Some("require") {
                causes.push(cause(
                    CauseType::Invalid,
                    format!("spec.domain.cpu.features[{i}].policy"),
                    "vmx cpu feature has to be set to require policy".to_owned(),
                ));
            }
        }
    }
    if features.hyperv_passthrough.is_some() {
        causes.push(cause(
            CauseType::Invalid,
            format!("{base}.domain.features.hyperv"),
            "Cannot explicitly set hyperV features if HypervPassthrough is being used. Please use either HyperV or HypervPassthrough.".to_owned(),
        ));
    }
}
