//! The `VirtualMachineInstanceMigration` webhooks, upstream's rules and messages. On create the
//! mutating webhook labels the migration with its VMI and adds the finalizer virt-controller
//! releases; the validating webhook admits a migration only of a VMI that exists, runs, is live
//! migratable and has no other migration in flight, and refuses what kubevirt-rs does not do
//! (priorities, decentralized migration, unsupported cluster settings). On update the spec is
//! fixed, and an unfinished migration keeps its VMI label.

use kubevirt_api::v1::{VirtualMachineInstanceMigration, VirtualMachineInstancePhase};
use kubevirt_api::validation::{Cause, CauseType};
use kubevirt_api::well_known::{conditions, finalizers, labels};
use serde_json::{Value, json};

use super::lookup::MigrationLookup;
use super::review::{AdmissionRequest, AdmissionResponse};
use super::{AdmissionContext, Rejection, decode_object};

/// `/migration-mutate-create`.
pub(super) fn mutate(request: &AdmissionRequest) -> Result<AdmissionResponse, Rejection> {
    let mut migration: VirtualMachineInstanceMigration = decode_object(request.object.as_deref(), "object")?;
    if request.operation != "CREATE" {
        return Ok(AdmissionResponse::allow(&request.uid));
    }
    let vmi_name = migration.spec.vmi_name.clone().unwrap_or_default();
    migration
        .metadata
        .labels
        .get_or_insert_default()
        .insert(labels::MIGRATION_VMI_NAME.to_owned(), vmi_name);
    let finalizers = migration.metadata.finalizers.get_or_insert_default();
    if !finalizers.iter().any(|f| f == finalizers::MIGRATION) {
        finalizers.push(finalizers::MIGRATION.to_owned());
    }
    let metadata = serde_json::to_value(&migration.metadata)
        .map_err(|e| Rejection::Error(format!("cannot encode /metadata: {e}")))?;
    let patch = Value::Array(vec![json!({"op": "add", "path": "/metadata", "value": metadata})]);
    Ok(AdmissionResponse::allow_with_patch(&request.uid, &patch))
}

fn not_supported(field: &str, message: &str) -> Cause {
    Cause {
        kind: CauseType::NotSupported,
        field: field.to_owned(),
        message: message.to_owned(),
    }
}

/// What is wrong with a new migration's spec.
fn spec_causes(migration: &VirtualMachineInstanceMigration) -> Vec<Cause> {
    let mut causes = Vec::new();
    if migration.spec.vmi_name.as_deref().is_none_or(str::is_empty) {
        causes.push(Cause {
            kind: CauseType::Required,
            field: "spec.vmiName".to_owned(),
            message: "vmiName is missing".to_owned(),
        });
    }
    if migration.spec.priority.is_some() {
        causes.push(not_supported(
            "spec.priority",
            "migration priorities (upstream's MigrationPriorityQueue) are not supported by kubevirt-rs",
        ));
    }
    if migration.spec.send_to.is_some() || migration.spec.receive.is_some() {
        causes.push(not_supported(
            "spec.sendTo",
            "decentralized migration (sendTo, receive) is not supported by kubevirt-rs",
        ));
    }
    causes
}

/// `/migration-validate-create`.
pub(super) async fn validate_create(
    request: &AdmissionRequest,
    ctx: &AdmissionContext,
    lookup: &impl MigrationLookup,
) -> Result<AdmissionResponse, Rejection> {
    let migration: VirtualMachineInstanceMigration = decode_object(request.object.as_deref(), "object")?;
    let uid = request.uid.as_str();
    let vmi_name = migration.spec.vmi_name.clone().filter(|n| !n.is_empty());
    let causes = spec_causes(&migration);
    if !causes.is_empty() {
        return Ok(AdmissionResponse::deny(uid, &causes));
    }
    let unsupported = &ctx.config.migrations.unsupported;
    if !unsupported.is_empty() {
        return Ok(AdmissionResponse::error(
            uid,
            format!(
                "the cluster's migration settings are not supported by kubevirt-rs: {}",
                unsupported.join(", ")
            ),
        ));
    }
    let namespace = request
        .namespace
        .clone()
        .or_else(|| migration.metadata.namespace.clone())
        .unwrap_or_else(|| "default".to_owned());
    let name = vmi_name.unwrap_or_default();
    let vmi = lookup
        .migrating_vmi(&namespace, &name)
        .await
        .map_err(|e| Rejection::Error(e.0))?;
    let Some(vmi) = vmi else {
        return Ok(AdmissionResponse::error(
            uid,
            format!("the VMI \"{namespace}/{name}\" does not exist"),
        ));
    };
    if let Some(refusal) = vmi_refusal(&vmi, &namespace, &name) {
        return Ok(AdmissionResponse::error(uid, refusal));
    }
    let others = lookup
        .migrations_of(&namespace, &name)
        .await
        .map_err(|e| Rejection::Error(e.0))?;
    let in_flight = others
        .iter()
        .filter(|m| m.metadata.uid != migration.metadata.uid || m.metadata.uid.is_none())
        .find(|m| !m.status.as_ref().and_then(|s| s.phase).unwrap_or_default().is_final());
    if let Some(active) = in_flight {
        return Ok(AdmissionResponse::error(
            uid,
            format!(
                "in-flight migration detected. Active migration job ({}) is currently already in progress for VMI {name}.",
                active.metadata.uid.clone().unwrap_or_default()
            ),
        ));
    }
    Ok(AdmissionResponse::allow(uid))
}

/// Why the VMI `namespace/name` cannot migrate now.
fn vmi_refusal(vmi: &kubevirt_api::v1::VirtualMachineInstance, namespace: &str, name: &str) -> Option<String> {
    let phase = vmi.status.as_ref().and_then(|s| s.phase).unwrap_or_default();
    if phase.is_final() {
        return Some("Cannot migrate VMI in finalized state.".to_owned());
    }
    if phase != VirtualMachineInstancePhase::Running {
        return Some(format!(
            "Cannot migrate VMI \"{namespace}/{name}\": it is {phase}, not Running."
        ));
    }
    if let Err(why) = kubevirt_api::migratable::live_migratable(vmi) {
        return Some(format!(
            "Cannot migrate VMI, Reason: {}, Message: {}",
            why.reason, why.message
        ));
    }
    let condition = vmi.status.as_ref().and_then(|s| {
        s.conditions
            .iter()
            .find(|c| c.condition_type == conditions::LIVE_MIGRATABLE)
    });
    if let Some(condition) = condition.filter(|c| c.status == conditions::FALSE) {
        return Some(format!(
            "Cannot migrate VMI, Reason: {}, Message: {}",
            condition.reason.clone().unwrap_or_default(),
            condition.message.clone().unwrap_or_default()
        ));
    }
    None
}

/// `/migration-validate-update`.
pub(super) fn validate_update(request: &AdmissionRequest) -> Result<AdmissionResponse, Rejection> {
    let new: VirtualMachineInstanceMigration = decode_object(request.object.as_deref(), "object")?;
    let old: VirtualMachineInstanceMigration = decode_object(request.old_object.as_deref(), "oldObject")?;
    let uid = request.uid.as_str();
    if new.spec != old.spec {
        return Ok(AdmissionResponse::deny(
            uid,
            &[not_supported("spec", "update of Migration object's spec is restricted")],
        ));
    }
    let finished = new.status.as_ref().and_then(|s| s.phase).unwrap_or_default().is_final();
    let label = |m: &VirtualMachineInstanceMigration| {
        m.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(labels::MIGRATION_VMI_NAME))
            .cloned()
    };
    if !finished && let Some(before) = label(&old) {
        match label(&new) {
            None => {
                return Ok(AdmissionResponse::error(
                    uid,
                    "selector label can't be removed from an in-flight migration",
                ));
            }
            Some(after) if after != before => {
                return Ok(AdmissionResponse::error(
                    uid,
                    "selector label can't be modified on an in-flight migration",
                ));
            }
            Some(_) => {}
        }
    }
    Ok(AdmissionResponse::allow(uid))
}

#[cfg(test)]
mod tests;
