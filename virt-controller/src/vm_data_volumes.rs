//! The VM controller's DataVolumes, as upstream's `handleDataVolumes`: each template's
//! DataVolume is created (owned by the VM, labelled with its uid, a `sourceRef` to a DataSource
//! resolved to what the DataSource points to, a clone from another namespace allowed only when
//! the VM's service account may), orphans of its templates are adopted, and the VM's VMI waits
//! until every one is far enough along. Nothing else is done to a DataVolume: it goes with the
//! VM through the garbage collector (its owner reference), as upstream's.

use std::collections::BTreeMap;

use cdi_api::data_source::{SourceRefError, resolved_source, source_ref_target};
use cdi_api::{DataVolume, DataVolumeSpec};
use kubevirt_api::v1::{DataVolumeTemplateSpec, VirtualMachine};
use kubevirt_api::well_known::labels;
use serde_json::json;

use crate::cluster_api::{ApiError, ControllerApi, ResourceAccess};
use crate::data_volumes::{TemplatesPlan, template_name};

/// CDI's annotation letting a DataVolume take over a claim of its name that exists already.
pub const ALLOW_CLAIM_ADOPTION: &str = "cdi.kubevirt.io/allowClaimAdoption";
/// The VM annotation that, set to `false`, creates DataVolumes only when the VM starts.
pub const IMMEDIATE_CREATION: &str = "kubevirt.io/immediate-data-volume-creation";

/// Why a template's DataVolume was not created.
#[derive(Debug, thiserror::Error)]
pub enum TemplateError {
    /// The template cannot be made into a DataVolume.
    #[error("unable to create DataVolume manifest: {0}")]
    Manifest(String),
    /// The VM's service account may not clone from the source's namespace.
    #[error("not authorized to create DataVolume: {0}")]
    Unauthorized(String),
    /// The API server refused.
    #[error(transparent)]
    Api(#[from] ApiError),
}

/// What handling the templates found: whether the VMI may be created, and the failure to report.
#[derive(Debug, Default)]
pub struct Handled {
    /// Every DataVolume is far enough along.
    pub ready: bool,
    /// Upstream's `FailedCreate` message, when a DataVolume could not be made.
    pub error: Option<String>,
}

/// The service account the VM's pods run as: the template's, or the one a `serviceAccount`
/// volume names, or `default`.
fn service_account(vm: &VirtualMachine) -> String {
    let spec = vm.spec.template.spec.as_ref();
    spec.and_then(|s| s.service_account_name.clone())
        .or_else(|| {
            spec?
                .volumes
                .iter()
                .find_map(|v| v.service_account.as_ref()?.service_account_name.clone())
        })
        .unwrap_or_else(|| "default".to_owned())
}

/// The DataVolume of `template` (before its `sourceRef` is resolved): the template's metadata in
/// the VM's namespace, owned by the VM, with its uid label and CDI's adoption annotation; the VM's
/// priority class when the template names none.
///
/// # Errors
/// A spec that is no DataVolume spec.
pub fn data_volume_of(vm: &VirtualMachine, template: &DataVolumeTemplateSpec) -> Result<DataVolume, TemplateError> {
    let mut spec: DataVolumeSpec =
        serde_json::from_value(template.spec.clone()).map_err(|e| TemplateError::Manifest(e.to_string()))?;
    if spec.priority_class_name.as_deref().is_none_or(str::is_empty) {
        spec.priority_class_name = vm
            .spec
            .template
            .spec
            .as_ref()
            .and_then(|s| s.priority_class_name.clone());
    }
    let mut meta = template.metadata.clone().unwrap_or_default();
    meta.namespace.clone_from(&vm.metadata.namespace);
    meta.labels.get_or_insert_with(BTreeMap::new).insert(
        labels::CREATED_BY.to_owned(),
        vm.metadata.uid.clone().unwrap_or_default(),
    );
    meta.annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(ALLOW_CLAIM_ADOPTION.to_owned(), "true".to_owned());
    meta.owner_references = Some(vec![crate::vm_status::owned_by(vm)]);
    meta.resource_version = None;
    meta.uid = None;
    let mut data_volume = DataVolume::new(template_name(template), spec);
    data_volume.metadata = meta;
    Ok(data_volume)
}

/// Resolves a `sourceRef` to a DataSource into the claim or snapshot it points to now (its
/// status's when it points to another DataSource), as upstream's `GetResolvedCloneSource`.
async fn resolve_source_ref(
    api: &impl ControllerApi,
    namespace: &str,
    spec: &mut DataVolumeSpec,
) -> Result<(), TemplateError> {
    let Some(reference) = spec.source_ref.clone() else {
        return Ok(());
    };
    let refused = |e: SourceRefError| TemplateError::Manifest(e.to_string());
    let (source_namespace, name) = source_ref_target(&reference, namespace).map_err(refused)?;
    let found = api.get_data_source(&source_namespace, &name).await?;
    spec.source = Some(resolved_source(&source_namespace, &name, found.as_ref()).map_err(refused)?);
    spec.source_ref = None;
    Ok(())
}

/// Checks that the VM's service account may clone from another namespace, as upstream's
/// `authorizeDataVolume`: `create datavolumes/source` there, or else `create pods`.
async fn authorize_clone(
    api: &impl ControllerApi,
    vm: &VirtualMachine,
    spec: &DataVolumeSpec,
) -> Result<(), TemplateError> {
    let namespace = vm.metadata.namespace.as_deref().unwrap_or("default");
    let source = spec.source.as_ref();
    let Some(source_namespace) = source
        .and_then(|s| s.pvc.as_ref().or(s.snapshot.as_ref()))
        .map(|n| n.namespace.as_str())
        .filter(|n| !n.is_empty() && *n != namespace)
    else {
        return Ok(());
    };
    let user = format!("system:serviceaccount:{namespace}:{}", service_account(vm));
    let access = |group: &str, resource: &str, subresource: &str| ResourceAccess {
        namespace: source_namespace.to_owned(),
        verb: "create".to_owned(),
        group: group.to_owned(),
        resource: resource.to_owned(),
        subresource: subresource.to_owned(),
    };
    if api
        .user_may(&user, &access("cdi.kubevirt.io", "datavolumes", "source"))
        .await?
        || api.user_may(&user, &access("", "pods", "")).await?
    {
        return Ok(());
    }
    Err(TemplateError::Unauthorized(format!(
        "User {user} has insufficient permissions in clone source namespace {source_namespace}"
    )))
}

/// Makes the DataVolume of one template, as the API server will get it.
async fn manifest(
    api: &impl ControllerApi,
    vm: &VirtualMachine,
    template: &DataVolumeTemplateSpec,
) -> Result<DataVolume, TemplateError> {
    let mut data_volume = data_volume_of(vm, template)?;
    let namespace = vm.metadata.namespace.clone().unwrap_or_else(|| "default".to_owned());
    resolve_source_ref(api, &namespace, &mut data_volume.spec).await?;
    // A clone source without a namespace is in the VM's.
    if let Some(source) = data_volume.spec.source.as_mut() {
        for named in [source.pvc.as_mut(), source.snapshot.as_mut()].into_iter().flatten() {
            if named.namespace.is_empty() {
                named.namespace.clone_from(&namespace);
            }
        }
    }
    authorize_clone(api, vm, &data_volume.spec).await?;
    Ok(data_volume)
}

/// Records an event about the VM; one that cannot be sent is logged.
async fn tell(api: &impl ControllerApi, vm: &VirtualMachine, event_type: &'static str, reason: &str, message: &str) {
    if let Err(error) = api.record_vm_event(vm, event_type, reason, message).await {
        tracing::warn!(error = %error, "cannot record an event about the VM");
    }
}

/// Creates one template's DataVolume; the error names it.
async fn create(
    api: &impl ControllerApi,
    vm: &VirtualMachine,
    template: &DataVolumeTemplateSpec,
) -> Result<(), String> {
    let name = template_name(template);
    let created = match manifest(api, vm, template).await {
        Ok(data_volume) => api.create_data_volume(&data_volume).await.map_err(TemplateError::from),
        Err(error) => Err(error),
    };
    let error = match created {
        Ok(_) => {
            tell(
                api,
                vm,
                "Normal",
                "SuccessfulDataVolumeCreate",
                &format!("Created DataVolume {name}"),
            )
            .await;
            return Ok(());
        }
        // Made meanwhile (by a user, or a pass whose write the watch has not shown yet).
        Err(TemplateError::Api(ApiError::AlreadyExists(_))) => return Ok(()),
        Err(error) => error,
    };
    let (reason, message) = match &error {
        TemplateError::Unauthorized(_) => (
            "UnauthorizedDataVolumeCreate",
            format!("Not authorized to create DataVolume {name}: {error}"),
        ),
        _ => (
            "FailedDataVolumeCreate",
            format!("Error creating DataVolume {name}: {error}"),
        ),
    };
    tell(api, vm, "Warning", reason, &message).await;
    Err(format!("DataVolume {name}: {error}"))
}

/// Carries out a templates plan: adopts the orphans, and with `creating` creates the missing
/// DataVolumes and reports failed ones, with upstream's events on the VM.
pub async fn apply_templates(
    api: &impl ControllerApi,
    vm: &VirtualMachine,
    plan: &TemplatesPlan,
    creating: bool,
) -> Handled {
    let namespace = vm.metadata.namespace.clone().unwrap_or_else(|| "default".to_owned());
    let mut errors: Vec<String> = Vec::new();
    if vm.metadata.deletion_timestamp.is_none() {
        for orphan in &plan.adopt {
            let mut owners = orphan.owners.clone();
            owners.push(crate::vm_status::owned_by(vm));
            // The uid makes the API server refuse the patch if the DataVolume was made again.
            let patch = json!({"metadata": {"uid": orphan.uid, "ownerReferences": owners}});
            if let Err(error) = api.patch_data_volume_metadata(&namespace, &orphan.name, patch).await {
                errors.push(format!("cannot adopt DataVolume {}: {error}", orphan.name));
            }
        }
    }
    if creating {
        for &index in &plan.create {
            let Some(template) = vm.spec.data_volume_templates.get(index) else {
                continue;
            };
            if let Err(error) = create(api, vm, template).await {
                errors.push(error);
            }
        }
        for name in &plan.failed {
            let message = format!("DataVolume {name} failed to import disk image");
            tell(api, vm, "Warning", "FailedDataVolumeImport", &message).await;
        }
        for name in &plan.over_quota {
            let message = format!("DataVolume {name} exceeds quota limits");
            tell(api, vm, "Warning", "FailedDataVolumeImport", &message).await;
            errors.push(message);
        }
    }
    Handled {
        ready: plan.ready,
        error: (!errors.is_empty())
            .then(|| format!("Error encountered while creating DataVolumes: {}", errors.join("; "))),
    }
}
