//! Rule 62 and upstream's `ValidateDataVolumeTemplate`: each `spec.dataVolumeTemplates` entry is
//! named, says where its claim comes from (`pvc` or `storage`, not both), has exactly one way to
//! be filled (a `source` with one kind, a `sourceRef`, or external population through the claim's
//! `dataSource`/`dataSourceRef`), and is used by a template volume. Upstream stops at an entry's
//! first problem, and spells the path `dataVolumeTemplate` (singular); both are kept.

use cdi_api::DataVolumeSpec;

use super::{Cause, CauseType, cause};
use crate::v1::VirtualMachine;

/// Counts the source kinds set in a DataVolume's `spec.source`.
fn source_kinds(source: &cdi_api::DataVolumeSource) -> usize {
    [
        source.http.is_some(),
        source.s3.is_some(),
        source.gcs.is_some(),
        source.registry.is_some(),
        source.pvc.is_some(),
        source.upload.is_some(),
        source.blank.is_some(),
        source.imageio.is_some(),
        source.vddk.is_some(),
        source.snapshot.is_some(),
    ]
    .into_iter()
    .filter(|set| *set)
    .count()
}

/// The first problem of one template's spec, found at `here`.
fn check_spec(spec: &DataVolumeSpec, here: &str) -> Option<Cause> {
    let invalid = |field: String, message: &str| Some(cause(CauseType::Invalid, field, message.to_owned()));
    let claim_source = match (&spec.pvc, &spec.storage) {
        (None, None) => return invalid(format!("{here}.PVC.Storage"), "Missing Data volume PVC or Storage"),
        (Some(_), Some(_)) => {
            return invalid(
                format!("{here}.PVC.Storage"),
                "Duplicate storage definition, both target storage and target pvc defined",
            );
        }
        (Some(pvc), None) => pvc.data_source.is_some() || pvc.data_source_ref.is_some(),
        (None, Some(storage)) => storage.data_source.is_some() || storage.data_source_ref.is_some(),
    };
    let own_source = spec.source.is_some() || spec.source_ref.is_some();
    if claim_source && own_source {
        return invalid(
            format!("{here}.source"),
            "External population is incompatible with Source and SourceRef",
        );
    }
    if !claim_source && !own_source {
        return invalid(
            format!("{here}.source.sourceRef"),
            "Data volume should have either Source, SourceRef, or be externally populated",
        );
    }
    match spec.source.as_ref().map(source_kinds) {
        Some(0) => invalid(format!("{here}.source"), "Missing dataVolume valid source"),
        Some(2..) => invalid(format!("{here}.source"), "Multiple dataVolume sources"),
        _ => None,
    }
}

/// The causes of the VM's DataVolume templates.
pub(super) fn check(vm: &VirtualMachine, causes: &mut Vec<Cause>) {
    let volumes = vm.spec.template_volumes();
    for (i, template) in vm.spec.data_volume_templates.iter().enumerate() {
        let here = format!("spec.dataVolumeTemplate[{i}]");
        let name = template.metadata.as_ref().and_then(|m| m.name.as_deref()).unwrap_or("");
        if name.is_empty() {
            causes.push(cause(
                CauseType::Required,
                format!("{here}.name"),
                format!("'name' field must not be empty for DataVolumeTemplate entry {here}.name."),
            ));
            continue;
        }
        let problem = match serde_json::from_value::<DataVolumeSpec>(template.spec.clone()) {
            Ok(spec) => check_spec(&spec, &here),
            Err(error) => Some(cause(
                CauseType::Invalid,
                format!("{here}.spec"),
                format!("not a DataVolume spec: {error}"),
            )),
        };
        if let Some(problem) = problem {
            causes.push(problem);
            continue;
        }
        let used = volumes.iter().any(|v| {
            v.data_volume.as_ref().is_some_and(|d| d.name == name)
                || v.persistent_volume_claim.as_ref().is_some_and(|p| p.claim_name == name)
        });
        if !used {
            causes.push(cause(
                CauseType::Required,
                here.clone(),
                format!("DataVolumeTemplate entry {here} must be referenced in the VMI template's 'volumes' list"),
            ));
        }
    }
}

/// Upstream's namespace rule: a template that names a namespace names the VM's (`namespace`,
/// the VM's own or the request's).
#[must_use]
pub fn check_namespaces(vm: &VirtualMachine, namespace: &str) -> Vec<Cause> {
    vm.spec
        .data_volume_templates
        .iter()
        .enumerate()
        .filter_map(|(i, template)| {
            let theirs = template.metadata.as_ref()?.namespace.as_deref()?;
            (!theirs.is_empty() && theirs != namespace).then(|| {
                cause(
                    CauseType::Invalid,
                    format!("spec.dataVolumeTemplates[{i}]"),
                    format!("Embedded DataVolume namespace {theirs} differs from VM namespace {namespace}"),
                )
            })
        })
        .collect()
}
