//! The objects `virtctl image-upload` makes and the rules an existing one must meet, as
//! upstream's (`createUploadDataVolume`, `createUploadPVC`, `validateUploadDataVolume`,
//! `getAndValidateUploadPVC`), and the upload proxy's URLs. Pure.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde_json::{Value, json};

use super::{TargetKind, Upload};

/// The annotation asking a WaitForFirstConsumer claim to bind at once.
pub const BIND_IMMEDIATE: &str = "cdi.kubevirt.io/storage.bind.immediate.requested";
/// The annotation making a claim an upload target.
pub const UPLOAD_TARGET: &str = "cdi.kubevirt.io/storage.upload.target";
/// The claim's content type annotation.
pub const CONTENT_TYPE: &str = "cdi.kubevirt.io/storage.contentType";
/// The upload server's phase, on the claim.
pub const POD_PHASE: &str = "cdi.kubevirt.io/storage.pod.phase";
/// Whether the upload server is ready, on the claim.
pub const POD_READY: &str = "cdi.kubevirt.io/storage.pod.ready";
/// A claim whose DataVolume goes once done.
pub const DELETE_AFTER_COMPLETION: &str = "cdi.kubevirt.io/storage.deleteAfterCompletion";

/// The size of a new object, checked.
///
/// # Errors
/// Upstream's messages for no size or one that is not a quantity.
pub fn size(upload: &Upload) -> Result<String, String> {
    let size = upload
        .size
        .as_deref()
        .ok_or_else(|| "when creating a resource, the size must be specified".to_owned())?;
    kubevirt_api::quantity::to_bytes(&Quantity(size.to_owned())).map_err(|_| {
        format!(
            "validation failed for size={size}: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
        )
    })?;
    Ok(size.to_owned())
}

/// Refuses a read-only access mode (upstream checks nothing else of it).
///
/// # Errors
/// Upstream's message.
pub fn access_mode(mode: Option<&str>) -> Result<(), String> {
    if mode == Some("ReadOnlyMany") {
        return Err(
            "cannot upload to a readonly volume, use either ReadWriteOnce or ReadWriteMany if supported".to_owned(),
        );
    }
    Ok(())
}

fn volume_mode(upload: &Upload) -> Option<&'static str> {
    match upload.volume_mode.as_deref() {
        Some("block") => Some("Block"),
        Some("filesystem") => Some("Filesystem"),
        _ => None,
    }
}

fn content_type(upload: &Upload) -> &'static str {
    if upload.archive { "archive" } else { "kubevirt" }
}

/// What a new object is made with.
#[derive(Clone, Copy, Debug)]
pub struct Wanted<'a> {
    /// The checked size.
    pub size: &'a str,
    /// `--storage-class`.
    pub storage_class: Option<&'a str>,
    /// `--access-mode`.
    pub access_mode: Option<&'a str>,
    /// `--force-bind`.
    pub force_bind: bool,
}

/// The DataVolume for `upload`: an `upload` source and `spec.storage`.
#[must_use]
pub fn data_volume(upload: &Upload, namespace: &str, wanted: Wanted<'_>) -> Value {
    let mut annotations = serde_json::Map::new();
    if wanted.force_bind {
        annotations.insert(BIND_IMMEDIATE.to_owned(), json!(""));
    }
    let mut storage = json!({"resources": {"requests": {"storage": wanted.size}}});
    if let Some(class) = wanted.storage_class {
        storage["storageClassName"] = json!(class);
    }
    if let Some(mode) = wanted.access_mode {
        storage["accessModes"] = json!([mode]);
    }
    if let Some(mode) = volume_mode(upload) {
        storage["volumeMode"] = json!(mode);
    }
    json!({
        "apiVersion": "cdi.kubevirt.io/v1beta1",
        "kind": "DataVolume",
        "metadata": {"name": upload.name, "namespace": namespace, "annotations": annotations, "labels": upload.labels},
        "spec": {"source": {"upload": {}}, "contentType": content_type(upload), "storage": storage},
    })
}

/// The claim for `upload` (`pvc NAME`): an upload target with its content type.
#[must_use]
pub fn claim(upload: &Upload, namespace: &str, wanted: Wanted<'_>) -> Value {
    let mut annotations = serde_json::Map::from_iter([
        (UPLOAD_TARGET.to_owned(), json!("")),
        (CONTENT_TYPE.to_owned(), json!(content_type(upload))),
    ]);
    if wanted.force_bind {
        annotations.insert(BIND_IMMEDIATE.to_owned(), json!(""));
    }
    let mut labels: BTreeMap<String, String> = upload.labels.clone();
    labels.insert("cdi.kubevirt.io/applyStorageProfile".to_owned(), "true".to_owned());
    let mut spec = json!({
        "accessModes": [wanted.access_mode.unwrap_or("ReadWriteOnce")],
        "resources": {"requests": {"storage": wanted.size}},
    });
    if let Some(class) = wanted.storage_class {
        spec["storageClassName"] = json!(class);
    }
    if let Some(mode) = volume_mode(upload) {
        spec["volumeMode"] = json!(mode);
    }
    json!({
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": upload.name, "namespace": namespace, "annotations": annotations, "labels": labels},
        "spec": spec,
    })
}

/// Why an existing claim with `annotations` takes no upload, or whether it must first be marked
/// as an upload target (with `--no-create`).
///
/// # Errors
/// Upstream's messages.
pub fn existing_claim(
    upload: &Upload,
    name: &str,
    annotations: &BTreeMap<String, String>,
    no_create: bool,
) -> Result<bool, String> {
    if annotations.get(POD_PHASE).is_some_and(|p| p == "Succeeded") {
        return Err(format!("PVC {name} already successfully imported/cloned/updated"));
    }
    let target = annotations.contains_key(UPLOAD_TARGET);
    if !no_create && !target {
        return Err(format!("PVC {name} not available for upload"));
    }
    if upload.archive && annotations.get(CONTENT_TYPE).is_none_or(|c| c != "archive") {
        return Err(format!("PVC {name} doesn't have archive contentType annotation"));
    }
    Ok(!target)
}

/// Why a `dv NAME` upload cannot use the existing claim, whose DataVolume is gone.
#[must_use]
pub fn data_volume_missing(namespace: &str, name: &str, annotations: &BTreeMap<String, String>) -> String {
    let collected = annotations.get(DELETE_AFTER_COMPLETION).is_some_and(|v| v == "true")
        && annotations.get(POD_PHASE).is_some_and(|p| p == "Succeeded");
    if collected {
        format!("DataVolume already garbage-collected: Assuming PVC {namespace}/{name} is successfully populated")
    } else {
        format!("No DataVolume is associated with the existing PVC {namespace}/{name}")
    }
}

/// What a DataVolume's phase says of the wait: done (`UploadReady`), go on, or an error.
///
/// # Errors
/// Upstream's message for a DataVolume waiting for its consumer without `--force-bind`.
pub fn data_volume_ready(phase: &str, force_bind: bool) -> Result<bool, String> {
    if phase == "Failed" {
        return Err("the DataVolume failed: see its conditions and events".to_owned());
    }
    if matches!(phase, "WaitForFirstConsumer" | "PendingPopulation") && !force_bind {
        return Err(format!(
            "cannot upload to DataVolume in {phase} phase, make sure the PVC is Bound, or use force-bind flag"
        ));
    }
    Ok(phase == "UploadReady")
}

/// Go's `strconv.ParseBool` truths.
#[must_use]
pub fn go_true(value: &str) -> bool {
    matches!(value, "1" | "t" | "T" | "TRUE" | "true" | "True")
}

/// The upload proxy's base URL: `https://` when no scheme is given.
///
/// # Errors
/// A URL that cannot be read.
pub fn proxy_base(url: &str) -> Result<String, String> {
    let with_scheme = if url.contains("://") {
        url.to_owned()
    } else {
        format!("https://{url}")
    };
    let uri: hyper::Uri = with_scheme.parse().map_err(|e| format!("parse \"{url}\": {e}"))?;
    match uri.scheme_str() {
        Some("http" | "https") if uri.host().is_some() => Ok(with_scheme),
        _ => Err(format!("parse \"{url}\": not an http or https URL")),
    }
}

/// `base` with `path` at the end of its path, unless it ends so already (upstream's
/// `ConstructUploadProxyPath`).
#[must_use]
pub fn proxy_url(base: &str, path: &str) -> String {
    if base.contains(path) {
        return base.to_owned();
    }
    format!("{}{path}", base.trim_end_matches('/'))
}

/// The DataSource named as the upload's target, pointing at its claim.
#[must_use]
pub fn data_source(upload: &Upload, namespace: &str) -> Value {
    json!({
        "apiVersion": "cdi.kubevirt.io/v1beta1",
        "kind": "DataSource",
        "metadata": {"name": upload.name, "namespace": namespace, "labels": upload.labels},
        "spec": {"source": {"pvc": {"name": upload.name, "namespace": namespace}}},
    })
}

/// The JSON patch pointing an existing DataSource with `labels` at the upload's claim.
#[must_use]
pub fn data_source_patch(upload: &Upload, namespace: &str, labels: &BTreeMap<String, String>) -> Value {
    let mut merged = labels.clone();
    merged.extend(upload.labels.clone());
    json!([
        {"op": "replace", "path": "/metadata/labels", "value": merged},
        {"op": "replace", "path": "/spec/source/pvc", "value": {"name": upload.name, "namespace": namespace}},
    ])
}

/// The kind's name in messages (upstream prints the Go type).
#[must_use]
pub fn kind_name(kind: TargetKind) -> &'static str {
    match kind {
        TargetKind::DataVolume => "DataVolume",
        TargetKind::Claim => "PersistentVolumeClaim",
    }
}
