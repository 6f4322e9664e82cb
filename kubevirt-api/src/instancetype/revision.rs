//! ControllerRevisions holding the instance type or preference a VM was given, as upstream's
//! `pkg/instancetype/revision` writes them: named `<vm>-<object>-<version>-<uid>-<generation>`,
//! owned by the VM, labelled with the object's identity, holding the whole object.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::labels;
use crate::v1::VirtualMachine;

/// The revision upstream's VM controller stores for `object` (an instance type or preference as
/// JSON, with its apiVersion and kind) under `vm`.
#[must_use]
pub fn revision_for(vm: &VirtualMachine, object: &Value) -> ControllerRevision {
    let text = |pointer: &str| {
        object
            .pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let (name, uid, kind) = (text("/metadata/name"), text("/metadata/uid"), text("/kind"));
    let version = text("/apiVersion").rsplit('/').next().unwrap_or_default().to_owned();
    let generation = object
        .pointer("/metadata/generation")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let vm_name = vm.metadata.name.clone().unwrap_or_default();
    let mut data = object.clone();
    if let Some(meta) = data.get_mut("metadata").and_then(Value::as_object_mut) {
        for field in [
            "labels",
            "annotations",
            "finalizers",
            "ownerReferences",
            "managedFields",
        ] {
            meta.remove(field);
        }
    }
    ControllerRevision {
        metadata: ObjectMeta {
            name: Some(format!("{vm_name}-{name}-{version}-{uid}-{generation}")),
            namespace: vm.metadata.namespace.clone(),
            labels: Some(BTreeMap::from([
                (labels::OBJECT_GENERATION.to_owned(), generation.to_string()),
                (labels::OBJECT_KIND.to_owned(), kind),
                (labels::OBJECT_NAME.to_owned(), name),
                (labels::OBJECT_UID.to_owned(), uid),
                (labels::OBJECT_VERSION.to_owned(), version),
            ])),
            owner_references: Some(vec![OwnerReference {
                api_version: crate::v1::API_VERSION.to_owned(),
                kind: "VirtualMachine".to_owned(),
                name: vm_name,
                uid: vm.metadata.uid.clone().unwrap_or_default(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            ..ObjectMeta::default()
        },
        data: Some(RawExtension(data)),
        revision: 0,
    }
}

/// Why a revision's data is not the object it should hold.
#[derive(Debug, thiserror::Error)]
#[error("ControllerRevision {name} does not hold a {kind}: {message}")]
pub struct RevisionError {
    /// The revision.
    pub name: String,
    /// The kind expected.
    pub kind: &'static str,
    /// Why.
    pub message: String,
}

/// The spec a revision holds.
pub fn spec_of<S: DeserializeOwned>(revision: &ControllerRevision, kind: &'static str) -> Result<S, RevisionError> {
    let error = |message: String| RevisionError {
        name: revision.metadata.name.clone().unwrap_or_default(),
        kind,
        message,
    };
    let data = revision
        .data
        .as_ref()
        .ok_or_else(|| error("it has no data".to_owned()))?;
    let spec = data
        .0
        .get("spec")
        .cloned()
        .ok_or_else(|| error("its data has no spec".to_owned()))?;
    serde_json::from_value(spec).map_err(|e| error(e.to_string()))
}

/// Whether two revisions hold the same spec (upstream reuses an existing revision only then).
#[must_use]
pub fn same_spec(a: &ControllerRevision, b: &ControllerRevision) -> bool {
    let spec = |r: &ControllerRevision| r.data.as_ref().and_then(|d| d.0.get("spec").cloned());
    spec(a).is_some() && spec(a) == spec(b)
}
