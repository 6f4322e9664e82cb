//! cdi-uploadproxy's decisions about an upload request, as upstream's proxy makes them: the
//! `Authorization: Bearer <token>` header (missing or not that shape: 400), the token (not valid:
//! 401), its payload (not an upload into a claim: 400), and then the claim the token names, never
//! one the request names (not there, not an upload target, finished or not ready: 503, with the
//! reason in the body). Pure.

use std::collections::BTreeMap;

use crate::{Payload, UPLOAD, Validator};

/// The claim annotation that makes a claim an upload target (upstream's).
pub const UPLOAD_TARGET: &str = "cdi.kubevirt.io/storage.upload.target";
/// The claim annotation saying the upload server is ready (upstream's).
pub const POD_READY: &str = "cdi.kubevirt.io/storage.pod.ready";
/// The claim annotation of the upload pod's phase (upstream's).
pub const POD_PHASE: &str = "cdi.kubevirt.io/storage.pod.phase";

/// How a request is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// The HTTP status.
    pub status: u16,
    /// The body (empty where upstream's is).
    pub body: String,
}

fn refuse(status: u16, body: impl Into<String>) -> Refusal {
    Refusal {
        status,
        body: body.into(),
    }
}

/// The claim (namespace and name) an upload request may write, from its `Authorization` header.
///
/// # Errors
/// [`Refusal`]: 400 for a missing or malformed header or a token for anything but an upload into
/// a claim; 401 for a token that is not valid.
pub fn target(authorization: Option<&str>, validator: &Validator, now: i64) -> Result<(String, String), Refusal> {
    let header = authorization.filter(|h| !h.is_empty()).ok_or_else(|| refuse(400, ""))?;
    let token = bearer_token(header).ok_or_else(|| refuse(400, ""))?;
    let payload: Payload = validator.validate(token, now).map_err(|_| refuse(401, ""))?;
    if payload.operation != UPLOAD
        || payload.name.is_empty()
        || payload.namespace.is_empty()
        || payload.resource.resource != "persistentvolumeclaims"
    {
        return Err(refuse(400, ""));
    }
    Ok((payload.namespace, payload.name))
}

/// The token of a `Bearer <token>` header, as upstream's pattern reads it: the scheme in any case,
/// whitespace after it, and a token of URL-safe and base64 characters only.
fn bearer_token(header: &str) -> Option<&str> {
    let (scheme, rest) = header.split_at_checked(6)?;
    if !scheme.eq_ignore_ascii_case("bearer") || !rest.starts_with(char::is_whitespace) {
        return None;
    }
    let token = rest.trim_start();
    let allowed = |b: u8| b.is_ascii_alphanumeric() || b"-._~+/".contains(&b);
    (!token.is_empty() && token.bytes().all(allowed)).then_some(token)
}

/// Go's `strconv.ParseBool` truths, as upstream reads the ready annotation.
fn go_true(value: &str) -> bool {
    matches!(value, "1" | "t" | "T" | "TRUE" | "true" | "True")
}

/// What the proxy sees of the claim a token names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClaimState {
    /// It is not there.
    Missing,
    /// Its annotations.
    Present(BTreeMap<String, String>),
}

/// Whether the claim `name` takes an upload now (upstream's `uploadReady`, without its wait).
///
/// # Errors
/// A 503 [`Refusal`] with upstream's reason.
pub fn ready(name: &str, claim: &ClaimState) -> Result<(), Refusal> {
    let annotations = match claim {
        ClaimState::Missing => {
            return Err(refuse(
                503,
                format!("rejecting Upload Request for PVC {name} that doesn't exist"),
            ));
        }
        ClaimState::Present(annotations) => annotations,
    };
    if !annotations.contains_key(UPLOAD_TARGET) {
        return Err(refuse(
            503,
            format!("rejecting Upload Request for PVC {name} that is not an upload target"),
        ));
    }
    if annotations.get(POD_PHASE).is_some_and(|p| p == "Succeeded") {
        return Err(refuse(
            503,
            format!("rejecting Upload Request for PVC {name} that already finished uploading"),
        ));
    }
    if !annotations.get(POD_READY).is_some_and(|r| go_true(r)) {
        return Err(refuse(
            503,
            format!("rejecting Upload Request for PVC {name} that is not ready yet"),
        ));
    }
    Ok(())
}

/// Whether the claim takes uploads and only waits for its upload server to be ready: a refusal
/// of [`ready`] that a moment may change (upstream's proxy polls it for 10 s).
#[must_use]
pub fn waiting_for_server(claim: &ClaimState) -> bool {
    let ClaimState::Present(annotations) = claim else {
        return false;
    };
    annotations.contains_key(UPLOAD_TARGET)
        && annotations.get(POD_PHASE).is_none_or(|p| p != "Succeeded")
        && !annotations.get(POD_READY).is_some_and(|r| go_true(r))
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;
    use crate::{Issuer, UPLOAD_ISSUER, generate_key};

    fn issuer() -> Issuer {
        Issuer::new(&generate_key().expect("key"), UPLOAD_ISSUER, 300).expect("issuer")
    }

    #[test]
    fn the_target_comes_from_a_valid_upload_token_only() {
        let issuer = issuer();
        let validator = Validator::new(&issuer.public_key(), UPLOAD_ISSUER, 0);
        let token = issuer.issue(&Payload::upload("vms", "disk"), 1_000);
        assert_eq!(
            target(Some(&format!("Bearer {token}")), &validator, 1_000),
            Ok(("vms".to_owned(), "disk".to_owned()))
        );
        let status = |header: Option<&str>, now| target(header, &validator, now).map_err(|r| r.status);
        assert_eq!(status(None, 1_000), Err(400), "no header");
        assert_eq!(status(Some(""), 1_000), Err(400), "an empty header");
        assert_eq!(status(Some(&token), 1_000), Err(400), "no Bearer");
        assert_eq!(status(Some(&format!("Basic {token}")), 1_000), Err(400));
        assert_eq!(status(Some("Bearer "), 1_000), Err(400));
        assert_eq!(status(Some(&format!("Bearer {token} extra")), 1_000), Err(400));
        assert_eq!(
            target(Some(&format!("bearer \t{token}")), &validator, 1_000),
            Ok(("vms".to_owned(), "disk".to_owned())),
            "the scheme in any case, any whitespace"
        );
        assert_eq!(status(Some(&format!("Bearer {token}")), 1_400), Err(401), "expired");
        assert_eq!(status(Some("Bearer a.b.c"), 1_000), Err(401), "not a token of ours");
        let forged = self::issuer().issue(&Payload::upload("vms", "disk"), 1_000);
        assert_eq!(
            status(Some(&format!("Bearer {forged}")), 1_000),
            Err(401),
            "another key"
        );
        let mut clone = Payload::upload("vms", "disk");
        clone.operation = "Clone".to_owned();
        let clone = issuer.issue(&clone, 1_000);
        assert_eq!(
            status(Some(&format!("Bearer {clone}")), 1_000),
            Err(400),
            "another operation"
        );
        let mut pods = Payload::upload("vms", "disk");
        pods.resource.resource = "pods".to_owned();
        let pods = issuer.issue(&pods, 1_000);
        assert_eq!(
            status(Some(&format!("Bearer {pods}")), 1_000),
            Err(400),
            "another resource"
        );
        let nameless = issuer.issue(&Payload::upload("vms", ""), 1_000);
        assert_eq!(status(Some(&format!("Bearer {nameless}")), 1_000), Err(400));
    }

    #[test]
    fn only_a_ready_upload_target_takes_the_upload() {
        let claim = |pairs: &[(&str, &str)]| {
            ClaimState::Present(pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect())
        };
        assert_eq!(
            ready("disk", &claim(&[(UPLOAD_TARGET, ""), (POD_READY, "true")])),
            Ok(())
        );
        let refused = |state: &ClaimState| ready("disk", state).expect_err("refused");
        assert_eq!(
            refused(&ClaimState::Missing),
            Refusal {
                status: 503,
                body: "rejecting Upload Request for PVC disk that doesn't exist".to_owned()
            }
        );
        assert!(
            refused(&claim(&[(POD_READY, "true")]))
                .body
                .contains("not an upload target")
        );
        assert!(
            refused(&claim(&[(UPLOAD_TARGET, ""), (POD_PHASE, "Succeeded")]))
                .body
                .contains("already finished uploading")
        );
        assert!(refused(&claim(&[(UPLOAD_TARGET, "")])).body.contains("not ready yet"));
        assert!(refused(&claim(&[(UPLOAD_TARGET, ""), (POD_READY, "false")])).status == 503);
        assert_eq!(
            ready("disk", &claim(&[(UPLOAD_TARGET, ""), (POD_READY, "True")])),
            Ok(()),
            "Go's truths"
        );
        // Only a target whose server is not ready yet is worth waiting for.
        assert!(waiting_for_server(&claim(&[(UPLOAD_TARGET, "")])));
        assert!(waiting_for_server(&claim(&[(UPLOAD_TARGET, ""), (POD_READY, "false")])));
        assert!(!waiting_for_server(&claim(&[(UPLOAD_TARGET, ""), (POD_READY, "true")])));
        assert!(!waiting_for_server(&claim(&[
            (UPLOAD_TARGET, ""),
            (POD_PHASE, "Succeeded")
        ])));
        assert!(!waiting_for_server(&claim(&[(POD_READY, "false")])));
        assert!(!waiting_for_server(&ClaimState::Missing));
    }
}
