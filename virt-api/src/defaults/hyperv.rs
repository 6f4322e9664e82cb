//! Hyper-V enlightenments that need others (`pkg/defaults/hyperv.go`): `synic` needs `vpindex`,
//! `synictimer` needs `synic`, `tlbflush` and `ipi` need `vpindex`, `evmcs` needs `vapic` and the
//! `vmx` CPU feature. A requirement the user left unset is turned on; one the user turned off is
//! left alone, and the validating webhook reports it.

use kubevirt_api::v1::{Cpu, CpuFeature, FeatureHyperv, FeatureState, VirtualMachineInstanceSpec};

fn is_enabled(state: Option<&FeatureState>) -> bool {
    state.and_then(|s| s.enabled) == Some(true)
}

/// Turns `requirement` on when `needed` and unset. False when the user disabled it.
fn require(needed: bool, requirement: &mut Option<FeatureState>) -> bool {
    if !needed {
        return true;
    }
    if let Some(FeatureState { enabled: Some(enabled) }) = requirement {
        return *enabled;
    }
    *requirement = Some(FeatureState { enabled: Some(true) });
    true
}

/// Leaves first, as upstream walks them; stops at the first requirement the user disabled.
fn set_requirements(h: &mut FeatureHyperv) {
    let evmcs = is_enabled(h.evmcs.as_ref());
    if !require(evmcs, &mut h.vapic) {
        return;
    }
    let ipi = is_enabled(h.ipi.as_ref());
    if !require(ipi, &mut h.vpindex) {
        return;
    }
    let tlbflush = h.tlbflush.as_ref().and_then(|t| t.enabled) == Some(true);
    if !require(tlbflush, &mut h.vpindex) {
        return;
    }
    let synictimer = h.synictimer.as_ref().and_then(|t| t.enabled) == Some(true);
    if !require(synictimer, &mut h.synic) {
        return;
    }
    let synic = is_enabled(h.synic.as_ref());
    require(synic, &mut h.vpindex);
}

/// Applies the Hyper-V dependencies, and the `vmx` CPU feature for `evmcs`.
pub fn set_hyperv_dependencies(spec: &mut VirtualMachineInstanceSpec) {
    let Some(h) = spec.domain.features.as_mut().and_then(|f| f.hyperv.as_mut()) else {
        return;
    };
    set_requirements(h);
    let evmcs_on = h.evmcs.as_ref().is_some_and(|e| e.enabled != Some(false));
    if evmcs_on {
        let cpu = spec.domain.cpu.get_or_insert_with(Cpu::default);
        match cpu.features.iter_mut().find(|f| f.name == "vmx") {
            Some(feature) => feature.policy = Some("require".to_owned()),
            None => cpu.features.push(CpuFeature {
                name: "vmx".to_owned(),
                policy: Some("require".to_owned()),
            }),
        }
    }
}
