//! Instance types and preferences in the VM controller, as upstream's reference policy keeps them:
//! the objects a VM names are stored once as ControllerRevisions owned by the VM and recorded in
//! its status (`instancetypeRef`, `preferenceRef`), so a later change of the object does not change
//! the VM; the VMI is created from the template with both applied.

use kubevirt_api::instancetype::{
    self, FindError, Found, VirtualMachineInstancetypeSpec, VirtualMachinePreferenceSpec, find_matched, revision_for,
    same_spec,
};
use kubevirt_api::v1::{
    ControllerRevisionRef, InstancetypeStatusRef, MatcherFields, VirtualMachine, VirtualMachineInstance,
};

use crate::cluster_api::{ApiError, ControllerApi};
use crate::vm_status::vmi_from_vm;

/// A step that failed: the reason and message of the VM's `Failure` condition.
pub type Failure = (&'static str, String);

/// What the VM's matchers resolved to.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Resolved {
    /// The instance type's spec.
    pub instancetype: Option<Found<VirtualMachineInstancetypeSpec>>,
    /// The preference's spec.
    pub preference: Option<Found<VirtualMachinePreferenceSpec>>,
    /// `status.instancetypeRef` as it should be.
    pub instancetype_ref: Option<InstancetypeStatusRef>,
    /// `status.preferenceRef` as it should be.
    pub preference_ref: Option<InstancetypeStatusRef>,
}

/// The status reference a matcher should have, as upstream's store keeps it in step: a changed
/// name, kind or volume drops the recorded revision, a pinned revision is recorded.
#[must_use]
pub fn synced_ref(matcher: MatcherFields<'_>, old: Option<&InstancetypeStatusRef>) -> InstancetypeStatusRef {
    let mut synced = old.cloned().unwrap_or_default();
    let given = |v: Option<&str>| v.filter(|s| !s.is_empty()).map(str::to_owned);
    for (wanted, current) in [
        (given(matcher.name), &mut synced.name),
        (given(matcher.kind), &mut synced.kind),
        (given(matcher.infer_from_volume), &mut synced.infer_from_volume),
    ] {
        if wanted.is_some() && wanted != *current {
            *current = wanted;
            synced.controller_revision_ref = None;
        }
    }
    if let Some(policy) = given(matcher.failure_policy) {
        synced.infer_from_volume_failure_policy = Some(policy);
    }
    if let Some(pinned) = given(matcher.revision_name) {
        synced.controller_revision_ref = Some(ControllerRevisionRef { name: Some(pinned) });
    }
    synced
}

/// Stores `object` (read live) as a revision of `vm`, or reuses one of the same name that holds
/// the same spec; returns the revision's name.
async fn store(api: &impl ControllerApi, vm: &VirtualMachine, object: &serde_json::Value) -> Result<String, Failure> {
    let revision = revision_for(vm, object);
    let name = revision.metadata.name.clone().unwrap_or_default();
    let namespace = revision
        .metadata
        .namespace
        .clone()
        .unwrap_or_else(|| "default".to_owned());
    let storing = |e: &dyn std::fmt::Display| {
        (
            "FailedCreate",
            format!("error encountered while storing instancetype.kubevirt.io controllerRevisions: {e}"),
        )
    };
    match api.create_controller_revision(&revision).await {
        Ok(_) => Ok(name),
        Err(ApiError::AlreadyExists(_)) => match api.revision(&namespace, &name).await {
            Ok(Some(existing)) if same_spec(&existing, &revision) => Ok(name),
            Ok(_) => Err(storing(&format!(
                "found existing ControllerRevision with unexpected data: {name}"
            ))),
            Err(e) => Err(storing(&e)),
        },
        Err(e) => Err(storing(&e)),
    }
}

/// One matcher of `vm`: the object it names (stored as a revision when read live) and the status
/// reference it should have.
async fn resolve_one<S: serde::de::DeserializeOwned>(
    api: &impl ControllerApi,
    vm: &VirtualMachine,
    matcher: MatcherFields<'_>,
    recorded: Option<&InstancetypeStatusRef>,
    kind: fn(Option<&str>) -> Result<instancetype::KindNames, FindError>,
    reason: &'static str,
) -> Result<(Option<Found<S>>, InstancetypeStatusRef), Failure> {
    let namespace = vm.metadata.namespace.as_deref().unwrap_or("default");
    let mut reference = synced_ref(matcher, recorded);
    let found = find_matched(api, namespace, Some(matcher), kind, Some(&reference))
        .await
        .map_err(|e| (reason, e.to_string()))?;
    if let Some(object) = found.as_ref().and_then(|f: &Found<S>| f.object.as_ref()) {
        let name = store(api, vm, object).await?;
        reference.controller_revision_ref = Some(ControllerRevisionRef { name: Some(name) });
    }
    Ok((found, reference))
}

/// Resolves both matchers of `vm` and stores what was read live. A VM without matchers resolves
/// to nothing (and its status references are dropped).
pub async fn resolve(api: &impl ControllerApi, vm: &VirtualMachine) -> Result<Resolved, Failure> {
    let status = vm.status.as_ref();
    let mut resolved = Resolved::default();
    if let Some(matcher) = &vm.spec.instancetype {
        let recorded = status.and_then(|s| s.instancetype_ref.as_ref());
        let (found, reference) = resolve_one(
            api,
            vm,
            matcher.into(),
            recorded,
            instancetype::instancetype_kind,
            "FailedFindInstancetype",
        )
        .await?;
        resolved.instancetype = found;
        resolved.instancetype_ref = Some(reference);
    }
    if let Some(matcher) = &vm.spec.preference {
        let recorded = status.and_then(|s| s.preference_ref.as_ref());
        let (found, reference) = resolve_one(
            api,
            vm,
            matcher.into(),
            recorded,
            instancetype::preference_kind,
            "FailedFindPreference",
        )
        .await?;
        resolved.preference = found;
        resolved.preference_ref = Some(reference);
    }
    Ok(resolved)
}

/// The VMI to create for `vm`: its template with the instance type and preference applied, and
/// upstream's annotations naming them.
pub fn vmi_to_create(
    vm: &VirtualMachine,
    paused: bool,
    resolved: &Resolved,
    cluster: &kubevirt_api::v1::ClusterConfig,
) -> Result<VirtualMachineInstance, Failure> {
    let mut vmi = vmi_from_vm(vm, paused);
    if resolved.instancetype.is_none() && resolved.preference.is_none() {
        return Ok(vmi);
    }
    instancetype::add_defaults_for_preference(resolved.preference.as_ref().map(|f| &f.spec), &mut vmi.spec, cluster);
    let mut annotations = vmi.metadata.annotations.take().unwrap_or_default();
    instancetype::name_annotations(
        vm,
        resolved.instancetype.as_ref().map(|f| &f.kind),
        resolved.preference.as_ref().map(|f| &f.kind),
        &mut annotations,
    );
    let instancetype_spec = resolved.instancetype.as_ref().map(|f| &f.spec);
    let preference_spec = resolved.preference.as_ref().map(|f| &f.spec);
    instancetype::apply(
        instancetype_spec,
        preference_spec,
        &mut vmi.spec,
        &mut annotations,
        "spec",
    )
    .map_err(|conflicts| {
        (
            "FailedCreate",
            format!(
                "VMI conflicts with instancetype spec in fields: [{}]",
                conflicts.fields()
            ),
        )
    })?;
    if let Some(preference) = preference_spec {
        instancetype::apply_architecture(preference, &mut vmi.spec);
    }
    vmi.metadata.annotations = Some(annotations);
    Ok(vmi)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields<'a>(name: &'a str, kind: &'a str, revision: Option<&'a str>) -> MatcherFields<'a> {
        MatcherFields {
            name: Some(name),
            kind: Some(kind),
            infer_from_volume: None,
            failure_policy: None,
            revision_name: revision,
        }
    }

    fn recorded(name: &str, kind: &str, revision: &str) -> InstancetypeStatusRef {
        InstancetypeStatusRef {
            name: Some(name.to_owned()),
            kind: Some(kind.to_owned()),
            controller_revision_ref: Some(ControllerRevisionRef {
                name: Some(revision.to_owned()),
            }),
            ..InstancetypeStatusRef::default()
        }
    }

    #[test]
    fn an_unchanged_matcher_keeps_its_recorded_revision() {
        let old = recorded("u1.small", "VirtualMachineClusterInstancetype", "rev-1");
        let synced = synced_ref(
            fields("u1.small", "VirtualMachineClusterInstancetype", None),
            Some(&old),
        );
        assert_eq!(synced, old);
    }

    #[test]
    fn a_changed_name_or_kind_drops_the_revision() {
        let old = recorded("u1.small", "VirtualMachineClusterInstancetype", "rev-1");
        let renamed = synced_ref(
            fields("u1.large", "VirtualMachineClusterInstancetype", None),
            Some(&old),
        );
        assert_eq!(renamed.name.as_deref(), Some("u1.large"));
        assert_eq!(renamed.controller_revision_ref, None);
        let rekinded = synced_ref(fields("u1.small", "VirtualMachineInstancetype", None), Some(&old));
        assert_eq!(rekinded.controller_revision_ref, None);
    }

    #[test]
    fn a_pinned_revision_is_recorded() {
        let synced = synced_ref(
            fields("u1.small", "VirtualMachineClusterInstancetype", Some("pinned")),
            None,
        );
        assert_eq!(
            synced.controller_revision_ref.and_then(|r| r.name).as_deref(),
            Some("pinned")
        );
    }
}
