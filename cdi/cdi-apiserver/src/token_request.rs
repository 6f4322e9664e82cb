//! An `UploadTokenRequest`, read and answered: the token names the claim `spec.pvcName` in the
//! request's namespace, for an upload. Pure (the time and the issuer come in).

use cdi_token::{Issuer, Payload};
use serde_json::Value;

use crate::{GROUP, KIND, VERSION};

/// Why a request gets no token.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// The body is not an `UploadTokenRequest`.
    #[error("the body is not an UploadTokenRequest: {0}")]
    Body(String),
    /// It names no claim.
    #[error("spec.pvcName is required")]
    NoClaim,
}

/// The answer to the request `body` in `namespace`: the request with `status.token`.
///
/// # Errors
/// [`RequestError`].
pub fn answer(body: &[u8], namespace: &str, issuer: &Issuer, now: i64) -> Result<Value, RequestError> {
    let mut request: Value = serde_json::from_slice(body).map_err(|e| RequestError::Body(e.to_string()))?;
    if !request.is_object() {
        return Err(RequestError::Body("not a JSON object".to_owned()));
    }
    let claim = match &request["spec"]["pvcName"] {
        Value::String(name) if !name.is_empty() => name.clone(),
        Value::Null | Value::String(_) => return Err(RequestError::NoClaim),
        other => return Err(RequestError::Body(format!("spec.pvcName is {other}, not a string"))),
    };
    let token = issuer.issue(&Payload::upload(namespace, &claim), now);
    request["apiVersion"] = Value::String(format!("{GROUP}/{VERSION}"));
    request["kind"] = Value::String(KIND.to_owned());
    request["status"] = serde_json::json!({"token": token});
    Ok(request)
}

#[cfg(test)]
mod tests {
    use cdi_token::{UPLOAD_ISSUER, Validator, generate_key};
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    #[test]
    fn the_token_names_the_claim_in_the_requests_namespace() {
        let issuer = Issuer::new(&generate_key().expect("key"), UPLOAD_ISSUER, 300).expect("issuer");
        let body = json!({"apiVersion": "upload.cdi.kubevirt.io/v1beta1", "kind": "UploadTokenRequest",
            "metadata": {"name": "disk", "namespace": "vms"}, "spec": {"pvcName": "disk"}});
        let answer = answer(body.to_string().as_bytes(), "vms", &issuer, 1_000).expect("answer");
        assert_eq!(answer["spec"], json!({"pvcName": "disk"}));
        assert_eq!(answer["metadata"]["name"], "disk");
        let token = answer["status"]["token"].as_str().expect("token");
        let payload = Validator::new(&issuer.public_key(), UPLOAD_ISSUER, 0)
            .validate(token, 1_000)
            .expect("valid");
        assert_eq!(payload, Payload::upload("vms", "disk"));
        assert!(
            Validator::new(&issuer.public_key(), UPLOAD_ISSUER, 0)
                .validate(token, 1_400)
                .is_err(),
            "good for five minutes"
        );
    }

    #[test]
    fn a_body_without_a_claim_gets_no_token() {
        let issuer = Issuer::new(&generate_key().expect("key"), UPLOAD_ISSUER, 300).expect("issuer");
        let answer = |body: &str| super::answer(body.as_bytes(), "vms", &issuer, 1_000).map(|_| ());
        assert_eq!(answer(r#"{"spec": {}}"#), Err(RequestError::NoClaim));
        assert_eq!(answer(r#"{"spec": {"pvcName": ""}}"#), Err(RequestError::NoClaim));
        assert!(matches!(
            answer(r#"{"spec": {"pvcName": 3}}"#),
            Err(RequestError::Body(_))
        ));
        assert!(matches!(answer("not json"), Err(RequestError::Body(_))));
        assert!(matches!(answer("[1]"), Err(RequestError::Body(_))));
    }
}
