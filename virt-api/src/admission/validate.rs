//! The validating webhooks: decode the object, run the rules of `kubevirt_api::validation`, add
//! the checks that depend on who is asking, and answer 422 with every cause.

use std::collections::BTreeMap;

use kubevirt_api::support;
use kubevirt_api::v1::{VirtualMachine, VirtualMachineInstance};
use kubevirt_api::validation::{self, Cause, CauseType};
use kubevirt_api::well_known::labels;

use super::lookup::AdmissionLookup;
use super::review::{AdmissionRequest, AdmissionResponse};
use super::{AdmissionContext, Rejection, decode_object};

/// Labels only KubeVirt's own components may set on a VMI.
const RESERVED_LABELS: [&str; 6] = [
    labels::CREATED_BY,
    labels::MIGRATION_JOB_UID,
    labels::NODE_NAME,
    "kubevirt.io/migrationTargetNodeName",
    labels::NODE_SCHEDULABLE,
    "kubevirt.io/install-strategy",
];

fn answer(uid: &str, causes: &[Cause]) -> AdmissionResponse {
    if causes.is_empty() {
        AdmissionResponse::allow(uid)
    } else {
        AdmissionResponse::deny(uid, causes)
    }
}

fn reserved_labels(labels: Option<&BTreeMap<String, String>>) -> Vec<&str> {
    RESERVED_LABELS
        .into_iter()
        .filter(|l| labels.is_some_and(|m| m.contains_key(*l)))
        .collect()
}

/// Whether new launchers run unprivileged: the `Root` feature gate is off.
fn unprivileged(ctx: &AdmissionContext) -> bool {
    !ctx.config
        .is_feature_gate_enabled(kubevirt_api::well_known::ROOT_FEATURE_GATE)
}

/// `/virtualmachineinstances-validate-create`.
pub(super) fn vmi_create(request: &AdmissionRequest, ctx: &AdmissionContext) -> Result<AdmissionResponse, Rejection> {
    let vmi: VirtualMachineInstance = decode_object(request.object.as_deref(), "object")?;
    let mut causes = validation::validate_vmi_spec(&vmi.spec, "spec", &ctx.config);
    causes.extend(support::vmi_spec(&vmi.spec, "spec").into_iter().map(Cause::from));
    // The API server drops a new VMI's status, so the gate says who its launcher will run as.
    causes.extend(
        support::unprivileged_vmi(&vmi.spec, "spec", unprivileged(ctx))
            .into_iter()
            .map(Cause::from),
    );
    let trusted = ctx.is_kubevirt_service_account(&request.user_info.username);
    if !trusted && !reserved_labels(vmi.metadata.labels.as_ref()).is_empty() {
        causes.push(Cause {
            kind: CauseType::NotSupported,
            field: "metadata.labels".to_owned(),
            message: "creation of the following reserved kubevirt.io/ labels on a VMI object is prohibited".to_owned(),
        });
    }
    causes.extend(validation::validate_metadata(&vmi.metadata, "metadata", &ctx.config));
    causes.extend(
        support::vmi_metadata(&vmi.metadata, "metadata")
            .into_iter()
            .map(Cause::from),
    );
    Ok(answer(&request.uid, &causes))
}

/// `/virtualmachineinstances-validate-update`: only KubeVirt changes a VMI's spec or its reserved
/// labels once it exists.
pub(super) fn vmi_update(request: &AdmissionRequest, ctx: &AdmissionContext) -> Result<AdmissionResponse, Rejection> {
    if request.operation != "UPDATE" {
        return Ok(AdmissionResponse::allow(&request.uid));
    }
    let new: VirtualMachineInstance = decode_object(request.object.as_deref(), "object")?;
    let old: VirtualMachineInstance = decode_object(request.old_object.as_deref(), "oldObject")?;
    if ctx.is_kubevirt_service_account(&request.user_info.username) {
        return Ok(AdmissionResponse::allow(&request.uid));
    }
    let mut causes = Vec::new();
    if new.spec != old.spec {
        causes.push(Cause {
            kind: CauseType::NotSupported,
            field: String::new(),
            message: "update of VMI object is restricted".to_owned(),
        });
    }
    let changed: Vec<&str> = RESERVED_LABELS
        .into_iter()
        .filter(|l| {
            let get = |vmi: &VirtualMachineInstance| vmi.metadata.labels.as_ref().and_then(|m| m.get(*l)).cloned();
            get(&new) != get(&old)
        })
        .collect();
    if !changed.is_empty() {
        causes.push(Cause {
            kind: CauseType::Invalid,
            field: "metadata.labels".to_owned(),
            message: "modification of the following reserved kubevirt.io/ labels on a VMI object is prohibited"
                .to_owned(),
        });
    }
    Ok(answer(&request.uid, &causes))
}

/// Whether the request may have changed the VM's DataVolume templates: a create, or an update
/// whose old object had others (upstream checks their namespaces only then).
fn templates_changed(request: &AdmissionRequest, vm: &VirtualMachine) -> bool {
    let old: Option<VirtualMachine> = request
        .old_object
        .as_deref()
        .and_then(|raw| serde_json::from_str(raw.get()).ok());
    old.is_none_or(|old| old.spec.data_volume_templates != vm.spec.data_volume_templates)
}

/// `/virtualmachines-validate`: with an instance type or preference, the rules are checked on the
/// template with both applied.
pub(super) async fn vm(
    request: &AdmissionRequest,
    ctx: &AdmissionContext,
    lookup: &impl AdmissionLookup,
) -> Result<AdmissionResponse, Rejection> {
    let vm: VirtualMachine = decode_object(request.object.as_deref(), "object")?;
    if vm.metadata.deletion_timestamp.is_some() {
        return Ok(AdmissionResponse::allow(&request.uid));
    }
    let expanded = match super::vm_instancetypes::expand_for_validation(&vm, lookup).await {
        Ok(expanded) => expanded,
        Err(causes) => return Ok(answer(&request.uid, &causes)),
    };
    let checked = expanded.as_ref().unwrap_or(&vm);
    let mut causes = validation::validate_vm(checked, &ctx.config);
    if templates_changed(request, &vm) {
        let namespace = vm
            .metadata
            .namespace
            .as_deref()
            .filter(|n| !n.is_empty())
            .or(request.namespace.as_deref())
            .unwrap_or("default");
        causes.extend(validation::check_data_volume_template_namespaces(&vm, namespace));
    }
    causes.extend(support::vm(checked).into_iter().map(Cause::from));
    if let Some(template) = &checked.spec.template.spec {
        causes.extend(
            support::unprivileged_vmi(template, "spec.template.spec", unprivileged(ctx))
                .into_iter()
                .map(Cause::from),
        );
    }
    if let Some(meta) = &vm.spec.template.metadata {
        causes.extend(validation::validate_metadata(
            meta,
            "spec.template.metadata",
            &ctx.config,
        ));
    }
    Ok(answer(&request.uid, &causes))
}
