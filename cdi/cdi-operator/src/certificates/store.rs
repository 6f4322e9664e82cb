//! Reading and writing CDI's certificates in its namespace through [`Objects`]: the Secrets with
//! the CAs and the certificates they sign, the ConfigMaps with each CA's bundle, and the token
//! signing key. Each is applied owned by the CDI CR, so that deleting it removes them.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use operator_kit::certificates::store::{self as chain_store, ChainError, apply, ensure_chain};
use operator_kit::objects::{Objects, ObjectsError, get_typed};

use super::{Lifetimes, chains};

/// Why the certificates could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum CertificatesError {
    /// Making a certificate failed.
    #[error("making a certificate: {0}")]
    Make(#[from] rcgen::Error),
    /// The token signing key.
    #[error("making the token signing key: {0}")]
    Key(String),
    /// Reading or writing.
    #[error(transparent)]
    Objects(#[from] ObjectsError),
}

impl From<ChainError> for CertificatesError {
    fn from(error: ChainError) -> Self {
        match error {
            ChainError::Make(e) => Self::Make(e),
            ChainError::Objects(e) => Self::Objects(e),
        }
    }
}

/// What the certificates give the rest of the install.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Issued {
    /// cdi-apiserver's CA bundle, for its APIService and webhooks.
    pub apiserver_bundle: String,
    /// When the next certificate is due, in seconds since the epoch.
    pub next_renewal: i64,
}

/// Where the objects go and who owns them.
#[derive(Clone, Copy, Debug)]
pub struct Place<'a> {
    /// CDI's namespace.
    pub namespace: &'a str,
    /// The CDI CR, as owner.
    pub owner: Option<&'a OwnerReference>,
}

impl Place<'_> {
    fn meta(&self, name: &str) -> ObjectMeta {
        ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(self.namespace.to_owned()),
            labels: Some(crate::render::labels()),
            owner_references: self.owner.map(|o| vec![o.clone()]),
            ..ObjectMeta::default()
        }
    }
}

/// Reads CDI's certificates and key, makes what is missing or due, and writes them all.
///
/// # Errors
/// [`CertificatesError`]: a read or write refused, or a certificate or key not made.
pub async fn ensure<O: Objects>(
    objects: &O,
    place: Place<'_>,
    lifetimes: &Lifetimes,
    now: i64,
) -> Result<Issued, CertificatesError> {
    let labels = crate::render::labels();
    let chain_place = chain_store::Place {
        namespace: place.namespace,
        owner: place.owner,
        labels: &labels,
    };
    let mut kept = Vec::new();
    let mut apiserver_bundle = String::new();
    for chain in chains(place.namespace) {
        let chain_kept = ensure_chain(objects, chain_place, &chain, lifetimes, now).await?;
        if chain.bundle == cdi_api::components::APISERVER_SIGNER_BUNDLE {
            apiserver_bundle.clone_from(&chain_kept.bundle);
        }
        kept.push(chain_kept);
    }
    ensure_signing_key(objects, place).await?;
    let next_renewal = kept.iter().map(|k| k.renewal).min().unwrap_or(now);
    Ok(Issued {
        apiserver_bundle,
        next_renewal,
    })
}

/// Keeps the token signing key, or makes one when there is none usable.
async fn ensure_signing_key<O: Objects>(objects: &O, place: Place<'_>) -> Result<(), CertificatesError> {
    use cdi_api::components as c;
    let existing = get_typed::<Secret, _>(objects, Some(place.namespace), c::SIGNING_KEY_SECRET).await?;
    let usable = existing
        .as_ref()
        .and_then(|s| s.data.as_ref())
        .and_then(|d| d.get(c::SIGNING_KEY_PRIVATE))
        .filter(|key| cdi_token::Issuer::new(&key.0, cdi_token::UPLOAD_ISSUER, 0).is_ok())
        .map(|key| key.0.clone());
    let private = if let Some(private) = usable {
        private
    } else {
        tracing::info!(secret = c::SIGNING_KEY_SECRET, "made the token signing key");
        cdi_token::generate_key().map_err(|e| CertificatesError::Key(e.to_string()))?
    };
    let public = cdi_token::Issuer::new(&private, cdi_token::UPLOAD_ISSUER, 0)
        .map_err(|e| CertificatesError::Key(e.to_string()))?
        .public_key();
    let secret = Secret {
        metadata: place.meta(c::SIGNING_KEY_SECRET),
        data: Some(BTreeMap::from([
            (c::SIGNING_KEY_PRIVATE.to_owned(), ByteString(private)),
            (c::SIGNING_KEY_PUBLIC.to_owned(), ByteString(public)),
        ])),
        ..Secret::default()
    };
    Ok(apply(objects, &secret).await?)
}
