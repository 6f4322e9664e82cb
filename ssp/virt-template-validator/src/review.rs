//! The webhook's AdmissionReview: what it is asked (a VirtualMachine created or updated), and
//! what it answers, in upstream's shape: allowed; refused with 422 `Invalid`, the causes'
//! messages joined with ", " and each cause a `FieldValueInvalid` at the rule's path; or 400 with
//! the error's text when the request or the rules cannot be read. Pure.

use serde_json::{Value, json};

use crate::eval::{Cause, Decision, decide, evaluate};
use crate::rules;
use crate::sources::as_evaluated;

/// What the webhook is asked.
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    /// The request's UID, which the answer repeats.
    pub uid: String,
    /// The VirtualMachine as created or updated (the old object is not looked at, as upstream's).
    pub vm: Value,
}

/// Reads an AdmissionReview.
///
/// # Errors
/// The review has no request, or asks about another resource than `virtualmachines` (upstream's
/// words), or carries no object; with the request's UID when it has one.
pub fn request(review: &Value) -> Result<Request, (String, String)> {
    let request = &review["request"];
    let uid = request["uid"].as_str().unwrap_or_default().to_owned();
    if !request.is_object() {
        return Err((uid, "the AdmissionReview has no request".to_owned()));
    }
    let resource = &request["resource"];
    if resource["resource"].as_str() != Some("virtualmachines") {
        let shown = format!(
            "{}/{}, Resource={}",
            resource["group"].as_str().unwrap_or_default(),
            resource["version"].as_str().unwrap_or_default(),
            resource["resource"].as_str().unwrap_or_default()
        );
        return Err((uid, format!("expect resource {shown} to be 'virtualmachines'")));
    }
    let vm = request["object"].clone();
    if !vm.is_object() {
        return Err((uid, "the AdmissionReview's request has no object".to_owned()));
    }
    Ok(Request { uid, vm })
}

/// The verdict on `vm` under the rule set `rules_text` (the VM's own, or its template's).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Admitted; the broken `justWarning` rules, to be logged.
    Allowed(Vec<Cause>),
    /// Refused with these causes.
    Refused(Vec<Cause>),
    /// The rules cannot be read: refused with 400 and this text.
    Error(String),
}

/// Judges `vm`: a VM on its way out is admitted as it is; else the rules are read and evaluated.
#[must_use]
pub fn judge(vm: &Value, rules_text: &str) -> Verdict {
    if vm["metadata"].get("deletionTimestamp").is_some_and(|t| !t.is_null()) {
        return Verdict::Allowed(Vec::new());
    }
    let rules = match rules::parse(rules_text) {
        Ok(rules) => rules,
        Err(e) => return Verdict::Error(e.to_string()),
    };
    if rules.is_empty() {
        return Verdict::Allowed(Vec::new());
    }
    match decide(&evaluate(&rules, &as_evaluated(vm))) {
        Decision::Allowed { warnings } => Verdict::Allowed(warnings),
        Decision::Refused(causes) => Verdict::Refused(causes),
    }
}

/// The AdmissionReview answering the request `uid` with `verdict`.
#[must_use]
pub fn response(uid: &str, verdict: &Verdict) -> Value {
    let answer = match verdict {
        Verdict::Allowed(_) => json!({"uid": uid, "allowed": true}),
        Verdict::Refused(causes) => {
            let message = causes.iter().map(|c| c.message.as_str()).collect::<Vec<_>>().join(", ");
            let causes: Vec<Value> = causes
                .iter()
                .map(|c| json!({"type": "FieldValueInvalid", "field": c.field, "message": c.message}))
                .collect();
            json!({"uid": uid, "allowed": false, "status": {
                "code": 422, "reason": "Invalid", "message": message, "details": {"causes": causes}}})
        }
        Verdict::Error(text) => json!({"uid": uid, "allowed": false, "status": {"code": 400, "message": text}}),
    };
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": answer})
}
