//! Errors of the subresource API as Kubernetes writes them: a `metav1.Status` with upstream's
//! codes, reasons and message shapes (`Operation cannot be fulfilled on virtualmachine.kubevirt.io
//! "vm": VM is already running`).

use serde_json::{Value, json};

/// A failed subresource request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiStatus {
    /// HTTP status code.
    pub code: u16,
    /// `Conflict`, `NotFound`, `BadRequest`, `Forbidden`, `InternalError` or `ServiceUnavailable`.
    pub reason: &'static str,
    /// The message clients print.
    pub message: String,
    /// The object the error is about: resource (`virtualmachine`) and name.
    pub details: Option<(&'static str, String)>,
}

/// `virtualmachine`, as upstream names the resource in errors.
pub const VM: &str = "virtualmachine";
/// `virtualmachineinstance`.
pub const VMI: &str = "virtualmachineinstance";

impl ApiStatus {
    /// 409: the request does not fit the object's state.
    #[must_use]
    pub fn conflict(resource: &'static str, name: &str, why: impl std::fmt::Display) -> Self {
        Self {
            code: 409,
            reason: "Conflict",
            message: format!("Operation cannot be fulfilled on {resource}.kubevirt.io \"{name}\": {why}"),
            details: Some((resource, name.to_owned())),
        }
    }

    /// 404: the object does not exist.
    #[must_use]
    pub fn not_found(resource: &'static str, name: &str) -> Self {
        Self {
            code: 404,
            reason: "NotFound",
            message: format!("{resource}.kubevirt.io \"{name}\" not found"),
            details: Some((resource, name.to_owned())),
        }
    }

    /// 403: the operation is not allowed for this object.
    #[must_use]
    pub fn forbidden(resource: &'static str, name: &str, why: impl std::fmt::Display) -> Self {
        Self {
            code: 403,
            reason: "Forbidden",
            message: format!("{resource}.kubevirt.io \"{name}\" is forbidden: {why}"),
            details: Some((resource, name.to_owned())),
        }
    }

    /// 400: the request itself is wrong.
    #[must_use]
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self {
            code: 400,
            reason: "BadRequest",
            message: message.into(),
            details: None,
        }
    }

    /// 500: something failed on the way.
    #[must_use]
    pub fn internal(why: impl std::fmt::Display) -> Self {
        Self {
            code: 500,
            reason: "InternalError",
            message: format!("Internal error occurred: {why}"),
            details: None,
        }
    }

    /// 503: a dependency (the API server, a node) is not reachable.
    #[must_use]
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self {
            code: 503,
            reason: "ServiceUnavailable",
            message: message.into(),
            details: None,
        }
    }

    /// The `metav1.Status` body.
    #[must_use]
    pub fn to_json(&self) -> Value {
        let mut body = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some((kind, name)) = &self.details {
            body["details"] = json!({"name": name, "group": "kubevirt.io", "kind": kind});
        }
        body
    }
}
