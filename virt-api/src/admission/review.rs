//! The `admission.k8s.io/v1` AdmissionReview envelope: decoding a request and writing the three
//! kinds of answer upstream's webhooks give (allowed with a JSON patch, denied with 422 and field
//! causes, or an error with 400).

use base64::Engine as _;
use kubevirt_api::validation::Cause;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// The API version of every review sent and answered.
pub const ADMISSION_API_VERSION: &str = "admission.k8s.io/v1";

/// A review as the API server sends it.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionReview {
    /// `admission.k8s.io/v1`.
    pub api_version: Option<String>,
    /// `AdmissionReview`.
    pub kind: Option<String>,
    /// The request; absent only in malformed reviews.
    pub request: Option<AdmissionRequest>,
}

/// `request` of a review: the parts the webhooks read.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionRequest {
    /// Copied into the response so the API server can match it.
    pub uid: String,
    /// The resource the request is for.
    pub resource: GroupVersionResource,
    /// `CREATE`, `UPDATE`, `DELETE` or `CONNECT`.
    pub operation: String,
    /// The object's namespace.
    #[serde(default)]
    pub namespace: Option<String>,
    /// The object's name (for a pod eviction: the pod's).
    #[serde(default)]
    pub name: Option<String>,
    /// The subresource, e.g. `eviction` for `pods/eviction`.
    #[serde(default)]
    pub sub_resource: Option<String>,
    /// Whether the request changes nothing.
    #[serde(default)]
    pub dry_run: Option<bool>,
    /// Who sent the request.
    #[serde(default)]
    pub user_info: UserInfo,
    /// The object as it would be stored, undecoded.
    pub object: Option<Box<RawValue>>,
    /// The stored object, for `UPDATE`.
    pub old_object: Option<Box<RawValue>>,
}

/// `request.resource`.
#[derive(Debug, Default, Deserialize)]
pub struct GroupVersionResource {
    /// API group, `kubevirt.io`.
    #[serde(default)]
    pub group: String,
    /// Version, `v1`.
    #[serde(default)]
    pub version: String,
    /// Plural resource name.
    #[serde(default)]
    pub resource: String,
}

/// `request.userInfo`.
#[derive(Debug, Default, Deserialize)]
pub struct UserInfo {
    /// The user name, e.g. `system:serviceaccount:kubevirt:kubevirt-controller`.
    #[serde(default)]
    pub username: String,
}

/// The answer to one request.
#[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionResponse {
    /// The request's uid.
    pub uid: String,
    /// Whether the request may go on.
    pub allowed: bool,
    /// Why not, when it may not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<ResponseStatus>,
    /// A base64 JSON patch that applies the defaults.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patch: Option<String>,
    /// `JSONPatch` when there is a patch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patch_type: Option<String>,
    /// Warnings shown to the client.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// `response.status`: a `metav1.Status`.
#[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ResponseStatus {
    /// HTTP code the client sees: 422 for invalid objects, 400 for undecodable requests, 429 for
    /// evictions turned into migrations.
    pub code: u16,
    /// All cause messages joined with `", "`.
    pub message: String,
    /// `Invalid` for 422.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// The causes, each with its field path.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub details: Option<StatusDetails>,
}

/// `status.details`.
#[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StatusDetails {
    /// One per rule that failed.
    pub causes: Vec<StatusCause>,
}

/// `status.details.causes[]`, a `metav1.StatusCause`.
#[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StatusCause {
    /// `FieldValueInvalid`, `FieldValueRequired` and so on.
    pub reason: String,
    /// The rule's message.
    pub message: String,
    /// The field path, e.g. `spec.domain.devices.disks[1].name`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub field: String,
}

/// A whole review sent back.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReviewAnswer {
    /// `admission.k8s.io/v1`.
    pub api_version: String,
    /// `AdmissionReview`.
    pub kind: String,
    /// The answer.
    pub response: AdmissionResponse,
}

impl AdmissionResponse {
    /// The request may go on unchanged.
    #[must_use]
    pub fn allow(uid: &str) -> Self {
        Self {
            uid: uid.to_owned(),
            allowed: true,
            ..Self::default()
        }
    }

    /// The request may go on with `patch` applied. An empty patch is no patch.
    #[must_use]
    pub fn allow_with_patch(uid: &str, patch: &serde_json::Value) -> Self {
        let empty = patch.as_array().is_some_and(Vec::is_empty);
        if empty {
            return Self::allow(uid);
        }
        let encoded = base64::engine::general_purpose::STANDARD.encode(patch.to_string());
        Self {
            uid: uid.to_owned(),
            allowed: true,
            patch: Some(encoded),
            patch_type: Some("JSONPatch".to_owned()),
            ..Self::default()
        }
    }

    /// The object is invalid: 422 `Invalid`, with every cause and its field path.
    #[must_use]
    pub fn deny(uid: &str, causes: &[Cause]) -> Self {
        let message = causes.iter().map(|c| c.message.as_str()).collect::<Vec<_>>().join(", ");
        let causes = causes
            .iter()
            .map(|c| StatusCause {
                reason: c.kind.as_str().to_owned(),
                message: c.message.clone(),
                field: c.field.clone(),
            })
            .collect();
        Self {
            uid: uid.to_owned(),
            allowed: false,
            status: Some(ResponseStatus {
                code: 422,
                message,
                reason: "Invalid".to_owned(),
                details: Some(StatusDetails { causes }),
            }),
            ..Self::default()
        }
    }

    /// The request could not be handled: 400 with `message`.
    #[must_use]
    pub fn error(uid: &str, message: impl Into<String>) -> Self {
        Self {
            uid: uid.to_owned(),
            allowed: false,
            status: Some(ResponseStatus {
                code: 400,
                message: message.into(),
                ..ResponseStatus::default()
            }),
            ..Self::default()
        }
    }

    /// The request is refused for now and may be retried: 429 with `message`, as the eviction
    /// webhook answers so that `kubectl drain` keeps trying.
    #[must_use]
    pub fn too_many_requests(uid: &str, message: impl Into<String>) -> Self {
        Self {
            uid: uid.to_owned(),
            allowed: false,
            status: Some(ResponseStatus {
                code: 429,
                message: message.into(),
                reason: "TooManyRequests".to_owned(),
                ..ResponseStatus::default()
            }),
            ..Self::default()
        }
    }

    /// Wraps the answer in its review.
    #[must_use]
    pub fn into_review(self) -> ReviewAnswer {
        ReviewAnswer {
            api_version: ADMISSION_API_VERSION.to_owned(),
            kind: "AdmissionReview".to_owned(),
            response: self,
        }
    }
}

/// Why a review body could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    /// Not JSON, or not shaped like a review.
    #[error("cannot decode the AdmissionReview: {0}")]
    Decode(#[from] serde_json::Error),
    /// A review without `request`.
    #[error("the AdmissionReview has no request")]
    NoRequest,
}

/// Decodes a review body.
pub fn decode_review(body: &[u8]) -> Result<AdmissionRequest, ReviewError> {
    let review: AdmissionReview = serde_json::from_slice(body)?;
    review.request.ok_or(ReviewError::NoRequest)
}
