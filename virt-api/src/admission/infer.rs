//! `inferFromVolume`: the instance type and preference a VM gets from the labels of the PVC,
//! DataVolume or DataSource behind one of its volumes, as upstream's `pkg/instancetype/infer`
//! finds them.

use std::collections::BTreeMap;

use kubevirt_api::instancetype::labels;
use kubevirt_api::v1::VirtualMachine;
use serde_json::Value;

use super::lookup::{VolumeLookup, VolumeObject};

/// Why nothing was inferred.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InferError {
    /// The policy `IgnoreInferFromVolumeFailure` drops the matcher instead of refusing the VM.
    Ignorable(String),
    /// The VM is refused with this message.
    Fatal(String),
}

/// Which matcher is being inferred.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Inferred {
    /// `spec.instancetype`.
    Instancetype,
    /// `spec.preference`.
    Preference,
}

impl Inferred {
    fn label_keys(self) -> (&'static str, &'static str) {
        match self {
            Self::Instancetype => (labels::DEFAULT_INSTANCETYPE, labels::DEFAULT_INSTANCETYPE_KIND),
            Self::Preference => (labels::DEFAULT_PREFERENCE, labels::DEFAULT_PREFERENCE_KIND),
        }
    }
}

/// Name and kind (empty when the labels name none) from labels.
fn from_labels(object: &Value, which: Inferred) -> Result<(String, Option<String>), InferError> {
    let (name_key, kind_key) = which.label_keys();
    let labels: BTreeMap<String, String> =
        serde_json::from_value(object.pointer("/metadata/labels").cloned().unwrap_or_default()).unwrap_or_default();
    let name = labels
        .get(name_key)
        .ok_or_else(|| InferError::Ignorable(format!("unable to find required {name_key} label on the volume")))?;
    Ok((name.clone(), labels.get(kind_key).cloned()))
}

fn has_name_label(object: &Value, which: Inferred) -> bool {
    object
        .pointer(&format!("/metadata/labels/{}", which.label_keys().0.replace('/', "~1")))
        .is_some()
}

async fn get(
    lookup: &impl VolumeLookup,
    object: VolumeObject,
    namespace: &str,
    name: &str,
) -> Result<Option<Value>, InferError> {
    lookup
        .volume_object(object, namespace, name)
        .await
        .map_err(|e| InferError::Fatal(e.to_string()))
}

async fn pvc_labels(
    lookup: &impl VolumeLookup,
    namespace: &str,
    name: &str,
    which: Inferred,
) -> Result<(String, Option<String>), InferError> {
    let pvc = get(lookup, VolumeObject::PersistentVolumeClaim, namespace, name)
        .await?
        .ok_or_else(|| InferError::Fatal(format!("persistentvolumeclaims \"{name}\" not found")))?;
    from_labels(&pvc, which)
}

/// Infers from a DataVolume's spec: its source PVC, or the DataSource it refers to.
async fn from_data_volume_spec(
    lookup: &impl VolumeLookup,
    namespace: &str,
    spec: &Value,
    which: Inferred,
) -> Result<(String, Option<String>), InferError> {
    let text = |v: &Value, p: &str| v.pointer(p).and_then(Value::as_str).map(str::to_owned);
    if let Some(pvc) = spec.pointer("/source/pvc") {
        let pvc_namespace = text(pvc, "/namespace").unwrap_or_else(|| namespace.to_owned());
        return pvc_labels(lookup, &pvc_namespace, &text(pvc, "/name").unwrap_or_default(), which).await;
    }
    let Some(source_ref) = spec.get("sourceRef") else {
        return Err(InferError::Ignorable(
            "unable to infer defaults from DataVolumeSpec as DataVolumeSource is not supported".to_owned(),
        ));
    };
    let kind = text(source_ref, "/kind").unwrap_or_default();
    if kind != "DataSource" {
        return Err(InferError::Ignorable(format!(
            "unable to infer defaults from DataVolumeSourceRef as Kind {kind} is not supported"
        )));
    }
    let ds_namespace = text(source_ref, "/namespace").unwrap_or_else(|| namespace.to_owned());
    let ds_name = text(source_ref, "/name").unwrap_or_default();
    let data_source = get(lookup, VolumeObject::DataSource, &ds_namespace, &ds_name)
        .await?
        .ok_or_else(|| InferError::Fatal(format!("datasources.cdi.kubevirt.io \"{ds_name}\" not found")))?;
    if has_name_label(&data_source, which) {
        return from_labels(&data_source, which);
    }
    let Some(pvc) = data_source.pointer("/spec/source/pvc") else {
        return Err(InferError::Ignorable(
            "unable to infer defaults from DataSource that doesn't provide DataVolumeSourcePVC".to_owned(),
        ));
    };
    let pvc_namespace = text(pvc, "/namespace").unwrap_or_else(|| ds_namespace.clone());
    pvc_labels(lookup, &pvc_namespace, &text(pvc, "/name").unwrap_or_default(), which).await
}

/// The name and kind the volume `volume_name` of `vm` names for `which`.
pub async fn infer(
    lookup: &impl VolumeLookup,
    vm: &VirtualMachine,
    volume_name: &str,
    which: Inferred,
) -> Result<(String, Option<String>), InferError> {
    let namespace = vm.metadata.namespace.as_deref().unwrap_or("default");
    let volume = vm
        .spec
        .template
        .spec
        .as_ref()
        .and_then(|s| s.volumes.iter().find(|v| v.name == volume_name))
        .ok_or_else(|| InferError::Fatal(format!("unable to find volume {volume_name} to infer defaults")))?;
    if let Some(pvc) = &volume.persistent_volume_claim {
        return pvc_labels(lookup, namespace, &pvc.claim_name, which).await;
    }
    let Some(data_volume) = &volume.data_volume else {
        return Err(InferError::Ignorable(format!(
            "unable to infer defaults from volume {volume_name} as type is not supported"
        )));
    };
    let template = vm
        .spec
        .data_volume_templates
        .iter()
        .find(|t| t.metadata.as_ref().and_then(|m| m.name.as_deref()) == Some(data_volume.name.as_str()));
    if let Some(template) = template {
        return from_data_volume_spec(lookup, namespace, &template.spec, which).await;
    }
    match get(lookup, VolumeObject::DataVolume, namespace, &data_volume.name).await? {
        Some(found) if has_name_label(&found, which) => from_labels(&found, which),
        Some(found) => {
            let spec = found.get("spec").cloned().unwrap_or_default();
            from_data_volume_spec(lookup, namespace, &spec, which).await
        }
        None => pvc_labels(lookup, namespace, &data_volume.name, which).await,
    }
}
