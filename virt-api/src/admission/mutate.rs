//! The mutating webhooks. Like upstream's, they answer with a JSON patch that sets `/spec`,
//! `/metadata` and (for new VMIs) `/status` with the defaulted objects. The CRD schema is generated
//! from the same types, so the API server has already pruned any field they do not carry.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kubevirt_api::v1::{Machine, VirtualMachine, VirtualMachineInstance};
use serde_json::{Value, json};

use super::lookup::AdmissionLookup;
use super::review::{AdmissionRequest, AdmissionResponse};
use super::{AdmissionContext, Rejection, decode_object};
use crate::defaults::{self, DEFAULT_ARCHITECTURE};

fn replace(path: &str, value: &impl serde::Serialize) -> Result<Value, Rejection> {
    let value = serde_json::to_value(value).map_err(|e| Rejection::Error(format!("cannot encode {path}: {e}")))?;
    Ok(json!({"op": "add", "path": path, "value": value}))
}

/// `/virtualmachineinstances-mutate`.
pub(super) fn vmi(
    request: &AdmissionRequest,
    ctx: &AdmissionContext,
    now: Time,
    new_uuid: &(dyn Fn() -> String + Sync),
) -> Result<AdmissionResponse, Rejection> {
    let mut vmi: VirtualMachineInstance = decode_object(request.object.as_deref(), "object")?;
    let patch = match request.operation.as_str() {
        "CREATE" => {
            defaults::set_vmi_create_defaults(&mut vmi, &ctx.config, now, new_uuid)
                .map_err(|e| Rejection::Error(e.to_string()))?;
            vec![
                replace("/spec", &vmi.spec)?,
                replace("/metadata", &vmi.metadata)?,
                replace("/status", &vmi.status.clone().unwrap_or_default())?,
            ]
        }
        "UPDATE" => {
            let old: VirtualMachineInstance = decode_object(request.old_object.as_deref(), "oldObject")?;
            let status_changed = old.status.clone().unwrap_or_default() != vmi.status.clone().unwrap_or_default();
            if status_changed && !ctx.is_kubevirt_service_account(&request.user_info.username) {
                vec![replace("/status", &old.status.unwrap_or_default())?]
            } else {
                Vec::new()
            }
        }
        _ => Vec::new(),
    };
    Ok(AdmissionResponse::allow_with_patch(&request.uid, &Value::Array(patch)))
}

/// Upstream's namespace for the firmware UUIDs derived from VM names.
const FIRMWARE_UUID_NAMESPACE: uuid::Uuid = uuid::Uuid::from_u128(0x6a1a_24a1_4061_4607_8bf4_a396_3d0c_5895);

/// The firmware UUID upstream derives from a VM's name, so that a VM keeps its SMBIOS identity
/// across restarts (and across a move from upstream KubeVirt).
#[must_use]
pub fn vm_firmware_uuid(name: &str) -> String {
    uuid::Uuid::new_v5(&FIRMWARE_UUID_NAMESPACE, name.as_bytes()).to_string()
}

/// `/virtualmachines-mutate`: the instance type matchers, then architecture, machine type and
/// firmware identity, leaving to the preference what it prefers.
pub(super) async fn vm(
    request: &AdmissionRequest,
    ctx: &AdmissionContext,
    lookup: &impl AdmissionLookup,
) -> Result<AdmissionResponse, Rejection> {
    let mut vm: VirtualMachine = decode_object(request.object.as_deref(), "object")?;
    if vm.metadata.deletion_timestamp.is_some() {
        return Ok(AdmissionResponse::allow(&request.uid));
    }
    let old: Option<VirtualMachine> = match request.operation.as_str() {
        "UPDATE" => Some(decode_object(request.old_object.as_deref(), "oldObject")?),
        _ => None,
    };
    super::vm_instancetypes::mutate_matchers(&mut vm, old.as_ref(), lookup).await?;
    let preference = super::vm_instancetypes::preference_of(&vm, lookup).await;
    let Some(template) = vm.spec.template.spec.as_mut() else {
        // The validating webhook reports the missing template.
        return Ok(AdmissionResponse::allow_with_patch(
            &request.uid,
            &Value::Array(vec![replace("/spec", &vm.spec)?]),
        ));
    };
    if let Some(preference) = &preference {
        kubevirt_api::instancetype::apply_architecture(preference, template);
    }
    if template.architecture.as_deref().is_none_or(str::is_empty) {
        template.architecture = Some(DEFAULT_ARCHITECTURE.to_owned());
    }
    let preferred_machine = preference
        .as_ref()
        .and_then(|p| p.machine.as_ref())
        .and_then(|m| m.preferred_machine_type.as_deref())
        .is_some_and(|m| !m.is_empty());
    let machine = template.domain.machine.get_or_insert_with(Machine::default);
    if machine.machine_type.as_deref().is_none_or(str::is_empty) && !preferred_machine {
        machine.machine_type = Some(ctx.config.machine_type.clone());
    }
    // The firmware identity is given once, at creation; an update leaves the template alone.
    if old.is_none() {
        let name = vm.metadata.name.clone().unwrap_or_default();
        let firmware = template.domain.firmware.get_or_insert_with(Default::default);
        if firmware.uuid.as_deref().is_none_or(str::is_empty) && !name.is_empty() {
            firmware.uuid = Some(vm_firmware_uuid(&name));
        }
        if firmware.serial.as_deref().is_none_or(str::is_empty) {
            firmware.serial.clone_from(&firmware.uuid);
        }
    }
    let patch = vec![replace("/spec", &vm.spec)?, replace("/metadata", &vm.metadata)?];
    Ok(AdmissionResponse::allow_with_patch(&request.uid, &Value::Array(patch)))
}
