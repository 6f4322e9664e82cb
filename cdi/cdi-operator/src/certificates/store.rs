//! Reading and writing CDI's certificates in its namespace through [`Objects`]: the Secrets with
//! the CAs and the certificates they sign, the ConfigMaps with each CA's bundle, and the token
//! signing key. Each is applied owned by the CDI CR, so that deleting it removes them.

use std::collections::BTreeMap;

use cdi_api::upload;
use control_loop::tls::issue::Pair;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use operator_kit::objects::{Desired, Objects, ObjectsError, get_typed};

use super::{Chain, Lifetimes, Stored, bundle, chains, decide, facts, new_ca, renewal_at, sign_leaf};

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

/// What the certificates give the rest of the install.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Issued {
    /// cdi-apiserver's CA bundle, for its APIService and webhooks.
    pub apiserver_bundle: String,
    /// When the next certificate is due, in seconds since the epoch.
    pub next_renewal: i64,
}

fn text(secret: Option<&Secret>, key: &str) -> Option<String> {
    let bytes = secret?.data.as_ref()?.get(key)?;
    String::from_utf8(bytes.0.clone()).ok()
}

fn pair(secret: Option<&Secret>) -> Option<Pair> {
    Some(Pair {
        cert: text(secret, "tls.crt")?,
        key: text(secret, "tls.key")?,
    })
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

    fn tls_secret(&self, name: &str, pair: &Pair) -> Secret {
        let data = [("tls.crt", &pair.cert), ("tls.key", &pair.key)]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), ByteString(v.as_bytes().to_vec())))
            .collect();
        Secret {
            metadata: self.meta(name),
            data: Some(data),
            type_: Some("kubernetes.io/tls".to_owned()),
            ..Secret::default()
        }
    }
}

async fn apply<K, O>(objects: &O, object: &K) -> Result<(), ObjectsError>
where
    K: kube::Resource<DynamicType = ()> + serde::Serialize,
    O: Objects,
{
    objects.apply(&Desired::from_typed(object)?).await
}

/// The state of one chain after a pass.
struct Kept {
    renewal: i64,
    bundle: String,
}

async fn ensure_chain<O: Objects>(
    objects: &O,
    place: Place<'_>,
    chain: &Chain,
    lifetimes: &Lifetimes,
    now: i64,
) -> Result<Kept, CertificatesError> {
    let ns = Some(place.namespace);
    let ca_secret = get_typed::<Secret, _>(objects, ns, chain.ca_secret).await?;
    let leaf_secret = match &chain.leaf {
        Some(leaf) => get_typed::<Secret, _>(objects, ns, leaf.secret).await?,
        None => None,
    };
    let old_bundle = get_typed::<ConfigMap, _>(objects, ns, chain.bundle)
        .await?
        .and_then(|c| c.data)
        .and_then(|mut d| d.remove(upload::BUNDLE_KEY));
    let stored = Stored {
        ca: pair(ca_secret.as_ref()),
        leaf: pair(leaf_secret.as_ref()),
        bundle: old_bundle.clone(),
    };
    let needs = decide(&stored, chain, lifetimes, now);
    let ca = if let Some(ca) = stored.ca.filter(|_| !needs.ca) {
        ca
    } else {
        let ca = new_ca(chain.ca_secret, lifetimes.ca, now)?;
        tracing::info!(secret = chain.ca_secret, "made a CA");
        ca
    };
    apply(objects, &place.tls_secret(chain.ca_secret, &ca)).await?;
    let mut renewal = facts(Some(&ca)).map_or(now, |f| renewal_at(&f, lifetimes.ca));
    if let Some(leaf) = &chain.leaf {
        let signed = if let Some(kept) = stored.leaf.filter(|_| !needs.leaf) {
            kept
        } else {
            let signed = sign_leaf(&ca, leaf, lifetimes, now)?;
            tracing::info!(secret = leaf.secret, "made a certificate");
            signed
        };
        apply(objects, &place.tls_secret(leaf.secret, &signed)).await?;
        if let Some(f) = facts(Some(&signed)) {
            renewal = renewal.min(renewal_at(&f, leaf.lifetime(lifetimes)));
        }
    }
    let bundle = bundle(&ca.cert, old_bundle.as_deref(), now);
    let config_map = ConfigMap {
        metadata: place.meta(chain.bundle),
        data: Some(BTreeMap::from([(upload::BUNDLE_KEY.to_owned(), bundle.clone())])),
        ..ConfigMap::default()
    };
    apply(objects, &config_map).await?;
    Ok(Kept { renewal, bundle })
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
    let mut kept = Vec::new();
    let mut apiserver_bundle = String::new();
    for chain in chains(place.namespace) {
        let chain_kept = ensure_chain(objects, place, &chain, lifetimes, now).await?;
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
