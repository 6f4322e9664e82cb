//! CDI's upload tokens, as upstream's `pkg/token` makes them: a JWT whose claims name the
//! operation (`Upload`), the claim (`name`, `namespace`, resource `persistentvolumeclaims`), the
//! issuer (`cdi-apiserver`) and a lifetime of 5 minutes. cdi-apiserver signs them, and
//! cdi-uploadproxy takes the target claim from a token it has checked, never from the request
//! ([`upload_request`]).
//!
//! Upstream signs with RSA-PSS (PS256); these are signed with Ed25519 (`EdDSA`, through `ring`).
//! Nobody but the two servers reads a token: virtctl passes it on as it is.

pub mod upload_request;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::signature::{ED25519, Ed25519KeyPair, KeyPair as _, UnparsedPublicKey};
use serde::{Deserialize, Serialize};

/// The issuer of upload tokens (upstream's).
pub const UPLOAD_ISSUER: &str = "cdi-apiserver";
/// How long an upload token is good for (upstream's).
pub const UPLOAD_LIFETIME_SECONDS: i64 = 5 * 60;
/// The operation of an upload token (upstream's).
pub const UPLOAD: &str = "Upload";
/// The operation of a clone token.
pub const CLONE: &str = "Clone";
/// A clone token's parameter naming the target's namespace.
pub const CLONE_TARGET_NAMESPACE: &str = "targetNamespace";
/// A clone token's parameter naming the target.
pub const CLONE_TARGET_NAME: &str = "targetName";

/// A group, version and resource (upstream's `metav1.GroupVersionResource`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupVersionResource {
    /// The API group (`""` for the core group).
    #[serde(default)]
    pub group: String,
    /// Its version.
    #[serde(default)]
    pub version: String,
    /// The resource.
    #[serde(default)]
    pub resource: String,
}

/// What a token allows (upstream's `Payload`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Payload {
    /// `Upload` or `Clone`.
    #[serde(default)]
    pub operation: String,
    /// The object's name.
    #[serde(default)]
    pub name: String,
    /// Its namespace.
    #[serde(default)]
    pub namespace: String,
    /// Its resource.
    #[serde(default)]
    pub resource: GroupVersionResource,
    /// Extra parameters.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub params: std::collections::BTreeMap<String, String>,
}

impl Payload {
    /// An upload into the claim `namespace/name`.
    #[must_use]
    pub fn upload(namespace: &str, name: &str) -> Self {
        Self {
            operation: UPLOAD.to_owned(),
            name: name.to_owned(),
            namespace: namespace.to_owned(),
            resource: GroupVersionResource {
                group: String::new(),
                version: "v1".to_owned(),
                resource: "persistentvolumeclaims".to_owned(),
            },
            params: std::collections::BTreeMap::new(),
        }
    }

    /// A clone of the claim `source_namespace/source` into `target_namespace/target` (upstream's
    /// clone token: the source claim, with the target in its parameters).
    #[must_use]
    pub fn clone_of(source_namespace: &str, source: &str, target_namespace: &str, target: &str) -> Self {
        let mut payload = Self::upload(source_namespace, source);
        CLONE.clone_into(&mut payload.operation);
        payload.params = std::collections::BTreeMap::from([
            (CLONE_TARGET_NAMESPACE.to_owned(), target_namespace.to_owned()),
            (CLONE_TARGET_NAME.to_owned(), target.to_owned()),
        ]);
        payload
    }
}

#[derive(Serialize, Deserialize)]
struct Claims {
    #[serde(flatten)]
    payload: Payload,
    iss: String,
    iat: i64,
    nbf: i64,
    exp: i64,
}

#[derive(Serialize, Deserialize)]
struct Header {
    alg: String,
    typ: String,
}

/// Why a token is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// Not a JWT, or not one of ours.
    #[error("the token is malformed: {0}")]
    Malformed(&'static str),
    /// The signature does not match.
    #[error("the token's signature is not valid")]
    Forged,
    /// Another issuer's.
    #[error("the token was issued by {0:?}")]
    Issuer(String),
    /// Past its expiry.
    #[error("the token expired")]
    Expired,
    /// Not valid yet, or issued in the future.
    #[error("the token is not valid yet")]
    NotYet,
}

/// Why a key could not be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the signing key is not a PKCS#8 Ed25519 key: {0}")]
pub struct KeyError(String);

/// A new signing key, PKCS#8 (kept in a Secret).
///
/// # Errors
/// [`KeyError`] when the system's randomness fails.
pub fn generate_key() -> Result<Vec<u8>, KeyError> {
    Ed25519KeyPair::generate_pkcs8(&ring::rand::SystemRandom::new())
        .map(|doc| doc.as_ref().to_vec())
        .map_err(|e| KeyError(e.to_string()))
}

/// Signs tokens.
#[derive(Debug)]
pub struct Issuer {
    key: Ed25519KeyPair,
    issuer: String,
    lifetime: i64,
}

impl Issuer {
    /// An issuer `issuer` with the PKCS#8 key `pkcs8`, whose tokens live `lifetime` seconds.
    ///
    /// # Errors
    /// [`KeyError`].
    pub fn new(pkcs8: &[u8], issuer: &str, lifetime: i64) -> Result<Self, KeyError> {
        let key = Ed25519KeyPair::from_pkcs8(pkcs8).map_err(|e| KeyError(e.to_string()))?;
        Ok(Self {
            key,
            issuer: issuer.to_owned(),
            lifetime,
        })
    }

    /// The public key that checks this issuer's tokens.
    #[must_use]
    pub fn public_key(&self) -> Vec<u8> {
        self.key.public_key().as_ref().to_vec()
    }

    /// A token for `payload`, issued at `now` (seconds since the epoch).
    #[must_use]
    pub fn issue(&self, payload: &Payload, now: i64) -> String {
        let header = Header {
            alg: "EdDSA".to_owned(),
            typ: "JWT".to_owned(),
        };
        let claims = Claims {
            payload: payload.clone(),
            iss: self.issuer.clone(),
            iat: now,
            nbf: now,
            exp: now + self.lifetime,
        };
        let signed = format!("{}.{}", encode(&header), encode(&claims));
        let signature = self.key.sign(signed.as_bytes());
        format!("{signed}.{}", URL_SAFE_NO_PAD.encode(signature.as_ref()))
    }
}

/// A value as base64url JSON (these types serialize without fail).
fn encode<T: Serialize>(value: &T) -> String {
    URL_SAFE_NO_PAD.encode(serde_json::to_vec(value).unwrap_or_default())
}

/// Checks tokens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Validator {
    public_key: Vec<u8>,
    issuer: String,
    leeway: i64,
}

impl Validator {
    /// Checks tokens of `issuer` against the Ed25519 `public_key`, with `leeway` seconds of clock
    /// difference allowed.
    #[must_use]
    pub fn new(public_key: &[u8], issuer: &str, leeway: i64) -> Self {
        Self {
            public_key: public_key.to_vec(),
            issuer: issuer.to_owned(),
            leeway,
        }
    }

    /// The token's payload, once its signature, issuer and times are checked at `now`.
    ///
    /// # Errors
    /// [`TokenError`].
    pub fn validate(&self, token: &str, now: i64) -> Result<Payload, TokenError> {
        let mut parts = token.split('.');
        let (Some(header), Some(claims), Some(signature), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(TokenError::Malformed("a JWT has three parts"));
        };
        let decode = |part: &str| {
            URL_SAFE_NO_PAD
                .decode(part)
                .map_err(|_| TokenError::Malformed("a part is not base64url"))
        };
        let header: Header =
            serde_json::from_slice(&decode(header)?).map_err(|_| TokenError::Malformed("the header is not JSON"))?;
        if header.alg != "EdDSA" {
            return Err(TokenError::Malformed("the algorithm is not EdDSA"));
        }
        let signed = &token[..token.len() - signature.len() - 1];
        UnparsedPublicKey::new(&ED25519, &self.public_key)
            .verify(signed.as_bytes(), &decode(signature)?)
            .map_err(|_| TokenError::Forged)?;
        let claims: Claims =
            serde_json::from_slice(&decode(claims)?).map_err(|_| TokenError::Malformed("the claims are not JSON"))?;
        if claims.iss != self.issuer {
            return Err(TokenError::Issuer(claims.iss));
        }
        if now > claims.exp.saturating_add(self.leeway) {
            return Err(TokenError::Expired);
        }
        if now.saturating_add(self.leeway) < claims.nbf.max(claims.iat) {
            return Err(TokenError::NotYet);
        }
        Ok(claims.payload)
    }
}

#[cfg(test)]
mod tests;
