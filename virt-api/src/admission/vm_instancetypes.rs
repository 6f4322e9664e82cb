//! The instance type and preference parts of the VM webhooks.
//!
//! Mutating: the matchers are checked, a matcher that infers from a volume is replaced by what
//! the volume's labels name, and an empty kind becomes the cluster-wide one. Validating: the
//! objects must exist, the instance type's vCPUs must fit a spread topology, the template must
//! not set what the instance type sets, the preference's requirements must hold, and the rules
//! of the template are checked on the template with both applied, as upstream's VM admitter does.

use kubevirt_api::instancetype::{
    self, FindError, Found, VirtualMachineClusterInstancetype, VirtualMachineClusterPreference,
    VirtualMachinePreferenceSpec, check_requirements, find_instancetype, find_preference, spread_error,
};
use kubevirt_api::v1::{InstancetypeMatcher, PreferenceMatcher, VirtualMachine};
use kubevirt_api::validation::{Cause, CauseType};

use super::Rejection;
use super::infer::{InferError, Inferred, infer};
use super::lookup::AdmissionLookup;

const REJECT: &str = "Reject";
const IGNORE: &str = "Ignore";

/// A matcher's fields, whichever kind it is.
struct Matcher<'a> {
    kind: &'static str,
    name: Option<&'a str>,
    matcher_kind: Option<&'a str>,
    infer_from_volume: Option<&'a str>,
    policy: Option<&'a str>,
}

fn set(value: Option<&str>) -> Option<&str> {
    value.filter(|v| !v.is_empty())
}

fn check_matcher(m: &Matcher<'_>, causes: &mut Vec<Cause>) {
    let t = m.kind;
    let cause = |kind, field: String, message: String| Cause { kind, field, message };
    match (set(m.name), set(m.infer_from_volume)) {
        (None, None) => causes.push(cause(
            CauseType::NotFound,
            format!("spec.{t}"),
            format!("Either Name or InferFromVolume should be provided within the {t} matcher"),
        )),
        (Some(_), Some(_)) => causes.push(cause(
            CauseType::Invalid,
            format!("spec.{t}.name"),
            format!("Name should not be provided when InferFromVolume is used within the {t} matcher"),
        )),
        _ => {}
    }
    if set(m.infer_from_volume).is_some() && set(m.matcher_kind).is_some() {
        causes.push(cause(
            CauseType::Invalid,
            format!("spec.{t}.kind"),
            format!("Kind should not be provided when InferFromVolume is used within the {t} matcher"),
        ));
    }
    if let Some(policy) = m.policy.filter(|p| *p != REJECT && *p != IGNORE) {
        causes.push(cause(
            CauseType::Invalid,
            format!("spec.{t}.inferFromVolumeFailurePolicy"),
            format!("Invalid value '{policy}' for InferFromVolumeFailurePolicy"),
        ));
    }
}

fn instancetype_fields(m: &InstancetypeMatcher) -> Matcher<'_> {
    Matcher {
        kind: "instancetype",
        name: m.name.as_deref(),
        matcher_kind: m.kind.as_deref(),
        infer_from_volume: m.infer_from_volume.as_deref(),
        policy: m.infer_from_volume_failure_policy.as_deref(),
    }
}

fn preference_fields(m: &PreferenceMatcher) -> Matcher<'_> {
    Matcher {
        kind: "preference",
        name: m.name.as_deref(),
        matcher_kind: m.kind.as_deref(),
        infer_from_volume: m.infer_from_volume.as_deref(),
        policy: m.infer_from_volume_failure_policy.as_deref(),
    }
}

/// On UPDATE, a matcher whose name changed while its pinned revision did not.
fn check_revision_pins(vm: &VirtualMachine, old: &VirtualMachine, causes: &mut Vec<Cause>) {
    let pairs = [
        (
            "instancetype",
            vm.spec.instancetype.as_ref().map(|m| (&m.name, &m.revision_name)),
            old.spec.instancetype.as_ref().map(|m| (&m.name, &m.revision_name)),
        ),
        (
            "preference",
            vm.spec.preference.as_ref().map(|m| (&m.name, &m.revision_name)),
            old.spec.preference.as_ref().map(|m| (&m.name, &m.revision_name)),
        ),
    ];
    for (t, new, old) in pairs {
        if let (Some((new_name, new_revision)), Some((old_name, old_revision))) = (new, old)
            && new_revision.as_deref().is_some_and(|r| !r.is_empty())
            && new_name != old_name
            && new_revision == old_revision
        {
            causes.push(Cause {
                kind: CauseType::Invalid,
                field: format!("spec.{t}.revisionName"),
                message: "the Matcher Name has been updated without updating the RevisionName".to_owned(),
            });
        }
    }
}

/// The mutating webhook's part: checks the matchers, resolves `inferFromVolume` and fills in the
/// cluster-wide kinds.
pub(super) async fn mutate_matchers(
    vm: &mut VirtualMachine,
    old: Option<&VirtualMachine>,
    lookup: &impl AdmissionLookup,
) -> Result<(), Rejection> {
    let mut causes = Vec::new();
    if let Some(old) = old {
        check_revision_pins(vm, old, &mut causes);
    }
    if let Some(m) = &vm.spec.instancetype {
        check_matcher(&instancetype_fields(m), &mut causes);
    }
    if let Some(m) = &vm.spec.preference {
        check_matcher(&preference_fields(m), &mut causes);
    }
    if !causes.is_empty() {
        return Err(Rejection::Invalid(causes));
    }
    infer_instancetype(vm, lookup).await?;
    infer_preference(vm, lookup).await?;
    if let Some(m) = vm
        .spec
        .instancetype
        .as_mut()
        .filter(|m| set(m.name.as_deref()).is_some())
        && set(m.kind.as_deref()).is_none()
    {
        m.kind = Some(VirtualMachineClusterInstancetype::NAMES.kind.to_owned());
    }
    if let Some(m) = vm.spec.preference.as_mut().filter(|m| set(m.name.as_deref()).is_some())
        && set(m.kind.as_deref()).is_none()
    {
        m.kind = Some(VirtualMachineClusterPreference::NAMES.kind.to_owned());
    }
    Ok(())
}

/// What became of a matcher that infers from a volume.
enum Outcome {
    Inferred(String, Option<String>),
    Dropped,
}

async fn outcome(
    vm: &VirtualMachine,
    volume: &str,
    policy: Option<&str>,
    which: Inferred,
    lookup: &impl AdmissionLookup,
) -> Result<Outcome, Rejection> {
    match infer(lookup, vm, volume, which).await {
        Ok((name, kind)) => Ok(Outcome::Inferred(name, kind)),
        Err(InferError::Ignorable(_)) if policy == Some(IGNORE) => Ok(Outcome::Dropped),
        Err(InferError::Ignorable(message) | InferError::Fatal(message)) => Err(Rejection::Error(message)),
    }
}

pub(super) async fn infer_instancetype(
    vm: &mut VirtualMachine,
    lookup: &impl AdmissionLookup,
) -> Result<(), Rejection> {
    let Some(m) = vm.spec.instancetype.as_ref() else {
        return Ok(());
    };
    let Some(volume) = set(m.infer_from_volume.as_deref()).map(str::to_owned) else {
        return Ok(());
    };
    let policy = m.infer_from_volume_failure_policy.clone();
    match outcome(vm, &volume, policy.as_deref(), Inferred::Instancetype, lookup).await? {
        Outcome::Inferred(name, kind) => {
            vm.spec.instancetype = Some(InstancetypeMatcher {
                name: Some(name),
                kind,
                ..InstancetypeMatcher::default()
            });
            // The memory virtctl put in as a fallback would conflict with the instance type.
            if policy.as_deref() == Some(IGNORE)
                && let Some(template) = vm.spec.template.spec.as_mut()
            {
                template.domain.memory = None;
            }
        }
        Outcome::Dropped => vm.spec.instancetype = None,
    }
    Ok(())
}

pub(super) async fn infer_preference(vm: &mut VirtualMachine, lookup: &impl AdmissionLookup) -> Result<(), Rejection> {
    let Some(m) = vm.spec.preference.as_ref() else {
        return Ok(());
    };
    let Some(volume) = set(m.infer_from_volume.as_deref()).map(str::to_owned) else {
        return Ok(());
    };
    let policy = m.infer_from_volume_failure_policy.clone();
    match outcome(vm, &volume, policy.as_deref(), Inferred::Preference, lookup).await? {
        Outcome::Inferred(name, kind) => {
            vm.spec.preference = Some(PreferenceMatcher {
                name: Some(name),
                kind,
                ..PreferenceMatcher::default()
            });
        }
        Outcome::Dropped => vm.spec.preference = None,
    }
    Ok(())
}

fn not_found(t: &str, error: &FindError) -> Cause {
    Cause {
        kind: match error {
            FindError::NotFound(_) => CauseType::NotFound,
            _ => CauseType::Invalid,
        },
        field: format!("spec.{t}"),
        message: format!("Failure to find {t}: {error}"),
    }
}

/// The preference `vm` names, for the mutating webhook's defaults; `None` when it names none or
/// it cannot be read (the validating webhook reports that).
pub(super) async fn preference_of(
    vm: &VirtualMachine,
    lookup: &impl AdmissionLookup,
) -> Option<VirtualMachinePreferenceSpec> {
    let namespace = vm.metadata.namespace.as_deref().unwrap_or("default");
    let status = vm.status.as_ref().and_then(|s| s.preference_ref.as_ref());
    find_preference(lookup, namespace, vm.spec.preference.as_ref(), status)
        .await
        .ok()
        .flatten()
        .map(|f| f.spec)
}

/// The validating webhook's part: `Ok(Some(vm))` is the VM with its template expanded, to be
/// checked by the template rules; `Ok(None)` a VM without matchers; `Err` the causes that refuse it.
pub(super) async fn expand_for_validation(
    vm: &VirtualMachine,
    lookup: &impl AdmissionLookup,
) -> Result<Option<VirtualMachine>, Vec<Cause>> {
    if vm.spec.instancetype.is_none() && vm.spec.preference.is_none() {
        return Ok(None);
    }
    let namespace = vm.metadata.namespace.as_deref().unwrap_or("default");
    let status = vm.status.as_ref();
    let mut causes = Vec::new();
    let found_instancetype = find_instancetype(
        lookup,
        namespace,
        vm.spec.instancetype.as_ref(),
        status.and_then(|s| s.instancetype_ref.as_ref()),
    )
    .await
    .map_err(|e| causes.push(not_found("instancetype", &e)))
    .ok()
    .flatten();
    let found_preference = find_preference(
        lookup,
        namespace,
        vm.spec.preference.as_ref(),
        status.and_then(|s| s.preference_ref.as_ref()),
    )
    .await
    .map_err(|e| causes.push(not_found("preference", &e)))
    .ok()
    .flatten();
    if !causes.is_empty() {
        return Err(causes);
    }
    let instancetype_spec = found_instancetype.as_ref().map(|f: &Found<_>| &f.spec);
    let preference_spec = found_preference.as_ref().map(|f| &f.spec);
    if let Some(message) = instancetype_spec.and_then(|it| spread_error(it.cpu.guest, preference_spec)) {
        return Err(vec![Cause {
            kind: CauseType::Invalid,
            field: "instancetype.spec.cpu.guest".to_owned(),
            message,
        }]);
    }
    let Some(template) = vm.spec.template.spec.as_ref() else {
        return Ok(None);
    };
    let mut expanded = vm.clone();
    let expanded_template = expanded.spec.template.spec.get_or_insert_with(Default::default);
    let meta = expanded.spec.template.metadata.get_or_insert_with(Default::default);
    let mut annotations = meta.annotations.take().unwrap_or_default();
    instancetype::apply(
        instancetype_spec,
        preference_spec,
        expanded_template,
        &mut annotations,
        "spec.template.spec",
    )
    .map_err(|conflicts| conflicts.causes())?;
    meta.annotations = Some(annotations).filter(|a| !a.is_empty());
    if let Some(preference) = preference_spec
        && let Some(failure) = check_requirements(instancetype_spec, preference, template)
    {
        return Err(vec![failure]);
    }
    Ok(Some(expanded))
}
