//! Reading and writing one [`Chain`] through [`Objects`]: the Secret with its CA, the Secret with
//! the certificate it signs, and the ConfigMap with its bundle (key [`BUNDLE_KEY`]). Each is
//! applied with the operator's labels and owned by its CR, so that deleting the CR removes them.

use std::collections::BTreeMap;

use super::issue::Pair;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use super::{Chain, Lifetimes, Stored, bundle, decide, facts, new_ca, renewal_at, sign_leaf};
use crate::objects::{Desired, Objects, ObjectsError, get_typed};

/// The key of a bundle ConfigMap that holds the CAs (PEM), as upstream's operators name it.
pub const BUNDLE_KEY: &str = "ca-bundle.crt";

/// Why a chain could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum ChainError {
    /// Making a certificate failed.
    #[error("making a certificate: {0}")]
    Make(#[from] rcgen::Error),
    /// Reading or writing.
    #[error(transparent)]
    Objects(#[from] ObjectsError),
}

/// Where the objects go, what they are labelled and who owns them.
#[derive(Clone, Copy, Debug)]
pub struct Place<'a> {
    /// The namespace.
    pub namespace: &'a str,
    /// The CR, as owner.
    pub owner: Option<&'a OwnerReference>,
    /// The operator's labels.
    pub labels: &'a BTreeMap<String, String>,
}

impl Place<'_> {
    /// The metadata of an object named `name` here.
    #[must_use]
    pub fn meta(&self, name: &str) -> ObjectMeta {
        ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(self.namespace.to_owned()),
            labels: Some(self.labels.clone()),
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

/// Applies a typed object.
///
/// # Errors
/// [`ObjectsError`].
pub async fn apply<K, O>(objects: &O, object: &K) -> Result<(), ObjectsError>
where
    K: kube::Resource<DynamicType = ()> + serde::Serialize,
    O: Objects,
{
    crate::objects::unchanged::apply_if_changed(objects, &Desired::from_typed(object)?)
        .await
        .map(|_| ())
}

/// The state of one chain after a pass.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Kept {
    /// When its next certificate is due, in seconds since the epoch.
    pub renewal: i64,
    /// Its CA bundle (PEM), for the `caBundle` of what calls the component.
    pub bundle: String,
}

/// Reads `chain`, makes what is missing or due, and writes it all.
///
/// # Errors
/// [`ChainError`]: a read or write refused, or a certificate not made.
pub async fn ensure_chain<O: Objects>(
    objects: &O,
    place: Place<'_>,
    chain: &Chain,
    lifetimes: &Lifetimes,
    now: i64,
) -> Result<Kept, ChainError> {
    let ns = Some(place.namespace);
    let ca_secret = get_typed::<Secret, _>(objects, ns, &chain.ca_secret).await?;
    let leaf_secret = match &chain.leaf {
        Some(leaf) => get_typed::<Secret, _>(objects, ns, &leaf.secret).await?,
        None => None,
    };
    let old_bundle = get_typed::<ConfigMap, _>(objects, ns, &chain.bundle)
        .await?
        .and_then(|c| c.data)
        .and_then(|mut d| d.remove(BUNDLE_KEY));
    let stored = Stored {
        ca: pair(ca_secret.as_ref()),
        leaf: pair(leaf_secret.as_ref()),
        bundle: old_bundle.clone(),
    };
    let needs = decide(&stored, chain, lifetimes, now);
    let ca = if let Some(ca) = stored.ca.filter(|_| !needs.ca) {
        ca
    } else {
        let ca = new_ca(&chain.ca_secret, lifetimes.ca, now)?;
        tracing::info!(secret = chain.ca_secret, "made a CA");
        ca
    };
    apply(objects, &place.tls_secret(&chain.ca_secret, &ca)).await?;
    let mut renewal = facts(Some(&ca)).map_or(now, |f| renewal_at(&f, lifetimes.ca));
    if let Some(leaf) = &chain.leaf {
        let signed = if let Some(kept) = stored.leaf.filter(|_| !needs.leaf) {
            kept
        } else {
            let signed = sign_leaf(&ca, leaf, lifetimes, now)?;
            tracing::info!(secret = leaf.secret, "made a certificate");
            signed
        };
        apply(objects, &place.tls_secret(&leaf.secret, &signed)).await?;
        if let Some(f) = facts(Some(&signed)) {
            renewal = renewal.min(renewal_at(&f, leaf.lifetime(lifetimes)));
        }
    }
    let bundle = bundle(&ca.cert, old_bundle.as_deref(), now);
    let config_map = ConfigMap {
        metadata: place.meta(&chain.bundle),
        data: Some(BTreeMap::from([(BUNDLE_KEY.to_owned(), bundle.clone())])),
        ..ConfigMap::default()
    };
    apply(objects, &config_map).await?;
    Ok(Kept { renewal, bundle })
}
