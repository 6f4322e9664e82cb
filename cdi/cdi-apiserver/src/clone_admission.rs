//! The DataVolume mutating webhook's clone check, as upstream's `datavolume-mutate`: a new
//! DataVolume that clones a claim (`spec.source.pvc`) is admitted only when its creator may
//! `create` `datavolumes/source` (group `cdi.kubevirt.io`) in the source's namespace, or else
//! `create` `pods` there; it then gets a clone token (`cdi.kubevirt.io/storage.clone.token`)
//! that cdi-controller checks before it makes the target. Pure: the reviews are made by the
//! caller.

use base64::Engine as _;
use serde_json::{Value, json};

/// The webhook's path (upstream's).
pub const PATH: &str = "/datavolume-mutate";
/// The message of a clone without a name.
pub const UNNAMED: &str = "metadata.name: a DataVolume that clones needs its name (generateName is not supported), since its clone token names it";
/// The message of a caller who may not read the source (upstream's).
pub const DENIED: &str = "insufficient permissions in clone source namespace";

/// What an admission request asks for.
#[derive(Clone, Debug, PartialEq)]
pub enum Admission {
    /// Nothing to check: admitted as it is.
    Admit,
    /// A clone: admitted with a token if one of [`reviews`] allows it.
    Clone(CloneRequest),
    /// A DataVolume whose `sourceRef` names a DataSource: a clone once it is resolved.
    SourceRef(SourceRefRequest),
    /// Refused as it is, for this reason.
    Refuse(String),
}

/// A new DataVolume's `sourceRef`, to be resolved into a [`CloneRequest`].
#[derive(Clone, Debug, PartialEq)]
pub struct SourceRefRequest {
    /// The reference.
    pub reference: cdi_api::data_volume::DataVolumeSourceRef,
    /// The DataVolume's namespace.
    pub target_namespace: String,
    /// The DataVolume.
    pub target: String,
    /// The creator (the request's `userInfo`).
    pub user: Value,
    /// Whether the DataVolume has annotations.
    pub has_annotations: bool,
}

impl SourceRefRequest {
    /// The clone of the claim `namespace/name` the reference resolved to.
    #[must_use]
    pub fn clone_of(self, namespace: String, name: String) -> CloneRequest {
        CloneRequest {
            source_namespace: namespace,
            source: name,
            target_namespace: self.target_namespace,
            target: self.target,
            user: self.user,
            has_annotations: self.has_annotations,
        }
    }
}

/// A new DataVolume's clone.
#[derive(Clone, Debug, PartialEq)]
pub struct CloneRequest {
    /// The source's namespace.
    pub source_namespace: String,
    /// The source claim.
    pub source: String,
    /// The DataVolume's namespace.
    pub target_namespace: String,
    /// The DataVolume.
    pub target: String,
    /// The creator (the request's `userInfo`).
    pub user: Value,
    /// Whether the DataVolume has annotations (the patch adds the map when not).
    pub has_annotations: bool,
}

/// Reads an `AdmissionReview`'s request.
///
/// # Errors
/// What makes it unusable: not a review, no uid, or no object.
pub fn read(review: &Value) -> Result<(String, Admission), String> {
    let request = review.get("request").ok_or("the AdmissionReview has no request")?;
    let uid = request["uid"]
        .as_str()
        .ok_or("the AdmissionReview's request has no uid")?
        .to_owned();
    if request["operation"].as_str() != Some("CREATE") {
        return Ok((uid, Admission::Admit));
    }
    let object = request
        .get("object")
        .ok_or("the AdmissionReview's request has no object")?;
    let target_namespace = object["metadata"]["namespace"]
        .as_str()
        .or_else(|| request["namespace"].as_str())
        .unwrap_or_default()
        .to_owned();
    let Some(pvc) = object.pointer("/spec/source/pvc") else {
        return Ok((uid, source_ref(request, object, target_namespace)));
    };
    let source_namespace = pvc["namespace"]
        .as_str()
        .filter(|n| !n.is_empty())
        .map_or_else(|| target_namespace.clone(), str::to_owned);
    let source = pvc["name"].as_str().unwrap_or_default().to_owned();
    let target = object["metadata"]["name"].as_str().unwrap_or_default().to_owned();
    if source.is_empty() {
        return Ok((uid, Admission::Refuse("spec.source.pvc.name is required".to_owned())));
    }
    if target.is_empty() {
        return Ok((uid, Admission::Refuse(UNNAMED.to_owned())));
    }
    Ok((
        uid,
        Admission::Clone(CloneRequest {
            source_namespace,
            source,
            target_namespace,
            target,
            user: request.get("userInfo").cloned().unwrap_or(Value::Null),
            has_annotations: object.pointer("/metadata/annotations").is_some_and(Value::is_object),
        }),
    ))
}

/// A DataVolume without a claim source: a `sourceRef` to resolve, or nothing to check.
fn source_ref(request: &Value, object: &Value, target_namespace: String) -> Admission {
    let reference = match object.pointer("/spec/sourceRef") {
        Some(reference) if object.pointer("/spec/source").is_none() => reference,
        _ => return Admission::Admit,
    };
    let reference: cdi_api::data_volume::DataVolumeSourceRef = match serde_json::from_value(reference.clone()) {
        Ok(reference) => reference,
        Err(e) => return Admission::Refuse(format!("spec.sourceRef: {e}")),
    };
    let target = object["metadata"]["name"].as_str().unwrap_or_default().to_owned();
    if target.is_empty() {
        return Admission::Refuse(UNNAMED.to_owned());
    }
    Admission::SourceRef(SourceRefRequest {
        reference,
        target_namespace,
        target,
        user: request.get("userInfo").cloned().unwrap_or(Value::Null),
        has_annotations: object.pointer("/metadata/annotations").is_some_and(Value::is_object),
    })
}

/// The SubjectAccessReview specs, in order: any that allows admits the clone.
#[must_use]
pub fn reviews(clone: &CloneRequest) -> [Value; 2] {
    let spec = |group: &str, resource: &str, subresource: Option<&str>| {
        let mut attributes = json!({
            "namespace": clone.source_namespace,
            "verb": "create",
            "group": group,
            "resource": resource,
        });
        if let Some(subresource) = subresource {
            attributes["subresource"] = json!(subresource);
        }
        json!({
            "user": clone.user["username"],
            "uid": clone.user["uid"],
            "groups": clone.user["groups"],
            "extra": clone.user["extra"],
            "resourceAttributes": attributes,
        })
    };
    [
        spec("cdi.kubevirt.io", "datavolumes", Some("source")),
        spec("", "pods", None),
    ]
}

/// The JSON patch that puts `token` on the DataVolume.
#[must_use]
pub fn token_patch(clone: &CloneRequest, token: &str) -> Value {
    if clone.has_annotations {
        json!([{
            "op": "add",
            "path": format!("/metadata/annotations/{}", cdi_token_key()),
            "value": token,
        }])
    } else {
        json!([{
            "op": "add",
            "path": "/metadata/annotations",
            "value": {TOKEN_ANNOTATION: token},
        }])
    }
}

/// The token's annotation.
const TOKEN_ANNOTATION: &str = "cdi.kubevirt.io/storage.clone.token";

/// The annotation as a JSON pointer's segment (`/` as `~1`).
fn cdi_token_key() -> String {
    TOKEN_ANNOTATION.replace('~', "~0").replace('/', "~1")
}

/// The `AdmissionReview` answer.
#[must_use]
pub fn answer(uid: &str, outcome: Result<Option<Value>, String>) -> Value {
    let mut response = json!({"uid": uid, "allowed": outcome.is_ok()});
    match outcome {
        Ok(None) => {}
        Ok(Some(patch)) => {
            response["patchType"] = json!("JSONPatch");
            response["patch"] = json!(base64::engine::general_purpose::STANDARD.encode(patch.to_string()));
        }
        Err(message) => response["status"] = json!({"code": 403, "message": message, "reason": "Forbidden"}),
    }
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response})
}

#[cfg(test)]
mod tests;
