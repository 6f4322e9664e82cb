//! Reading and writing CDI's certificates in its namespace: the Secrets with the CAs and the
//! certificates they sign, the ConfigMaps with each CA's bundle, and the token signing key.

use std::collections::BTreeMap;

use cdi_api::upload;
use control_loop::tls::issue::Pair;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, PostParams};

use super::{Chain, Stored, UploadPki, chains, decide, new_ca, sign_leaf};

/// Why the certificates could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    /// Making a certificate failed.
    #[error("making a certificate: {0}")]
    Make(#[from] rcgen::Error),
    /// The token signing key.
    #[error("making the upload token signing key: {0}")]
    Key(String),
    /// The list of chains and what was made of it disagree (a bug).
    #[error("{made} CAs were made where {wanted} were expected")]
    Chains {
        /// How many were made.
        made: usize,
        /// How many chains there are.
        wanted: usize,
    },
    /// The API server refused.
    #[error("{what}: {source}")]
    Api {
        /// What was attempted.
        what: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
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

fn labelled(name: &str, namespace: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        namespace: Some(namespace.to_owned()),
        labels: Some(BTreeMap::from([(
            crate::importer_pod::CDI_LABEL.0.to_owned(),
            crate::importer_pod::CDI_LABEL.1.to_owned(),
        )])),
        ..ObjectMeta::default()
    }
}

async fn get<K>(api: &Api<K>, name: &str) -> Result<Option<K>, PkiError>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.get_opt(name).await.map_err(|source| PkiError::Api {
        what: format!("reading {name}"),
        source,
    })
}

/// Creates `object`, or replaces the one read (`existing`).
async fn put<K>(api: &Api<K>, existing: Option<&K>, mut object: K) -> Result<(), PkiError>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let name = object.meta().name.clone().unwrap_or_default();
    let written = match existing {
        Some(existing) => {
            object
                .meta_mut()
                .resource_version
                .clone_from(&existing.meta().resource_version);
            api.replace(&name, &PostParams::default(), &object).await
        }
        None => api.create(&PostParams::default(), &object).await,
    };
    written.map(|_| ()).map_err(|source| PkiError::Api {
        what: format!("writing {name}"),
        source,
    })
}

fn secret(name: &str, namespace: &str, pair: &Pair) -> Secret {
    let data = [("tls.crt", &pair.cert), ("tls.key", &pair.key)]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), ByteString(v.as_bytes().to_vec())))
        .collect();
    Secret {
        metadata: labelled(name, namespace),
        data: Some(data),
        type_: Some("kubernetes.io/tls".to_owned()),
        ..Secret::default()
    }
}

/// Writes the bundle `pem` to the ConfigMap `name` unless it holds it already.
async fn ensure_bundle(api: &Api<ConfigMap>, name: &str, namespace: &str, pem: &str) -> Result<(), PkiError> {
    let existing = get(api, name).await?;
    let current = existing
        .as_ref()
        .and_then(|c| c.data.as_ref())
        .and_then(|d| d.get(upload::BUNDLE_KEY));
    if current.map(String::as_str) == Some(pem) {
        return Ok(());
    }
    let config_map = ConfigMap {
        metadata: labelled(name, namespace),
        data: Some(BTreeMap::from([(upload::BUNDLE_KEY.to_owned(), pem.to_owned())])),
        ..ConfigMap::default()
    };
    put(api, existing.as_ref(), config_map).await
}

/// Reads the chain's CA and certificate, makes what [`decide`] asks for, writes it, and writes
/// the CA's bundle; gives the CA.
async fn ensure_chain(
    secrets: &Api<Secret>,
    config_maps: &Api<ConfigMap>,
    chain: &Chain,
    namespace: &str,
    now: i64,
) -> Result<Pair, PkiError> {
    let ca_secret = get(secrets, chain.ca_secret).await?;
    let leaf_secret = match &chain.leaf {
        Some(leaf) => get(secrets, leaf.secret).await?,
        None => None,
    };
    let stored = Stored {
        ca: pair(ca_secret.as_ref()),
        leaf: pair(leaf_secret.as_ref()),
    };
    let needs = decide(&stored, chain.leaf.is_some(), now);
    let ca = if let Some(ca) = stored.ca.filter(|_| !needs.ca) {
        ca
    } else {
        let ca = new_ca(chain.ca_secret, now)?;
        put(secrets, ca_secret.as_ref(), secret(chain.ca_secret, namespace, &ca)).await?;
        tracing::info!(secret = chain.ca_secret, "made a CA");
        ca
    };
    if let Some(leaf) = chain.leaf.as_ref().filter(|_| needs.leaf) {
        let signed = sign_leaf(&ca, leaf, now)?;
        put(secrets, leaf_secret.as_ref(), secret(leaf.secret, namespace, &signed)).await?;
        tracing::info!(secret = leaf.secret, "made a certificate");
    }
    ensure_bundle(config_maps, chain.bundle, namespace, &ca.cert).await?;
    Ok(ca)
}

/// Makes the token signing key when there is none.
/// Makes the token signing key when there is none usable, and returns its public key.
async fn ensure_signing_key(secrets: &Api<Secret>, namespace: &str) -> Result<Vec<u8>, PkiError> {
    use cdi_api::components as c;
    let existing = get(secrets, c::SIGNING_KEY_SECRET).await?;
    let usable = existing
        .as_ref()
        .and_then(|s| s.data.as_ref())
        .and_then(|d| d.get(c::SIGNING_KEY_PRIVATE))
        .and_then(|key| cdi_token::Issuer::new(&key.0, cdi_token::UPLOAD_ISSUER, 0).ok());
    if let Some(issuer) = usable {
        return Ok(issuer.public_key());
    }
    let private = cdi_token::generate_key().map_err(|e| PkiError::Key(e.to_string()))?;
    let public = cdi_token::Issuer::new(&private, cdi_token::UPLOAD_ISSUER, 0)
        .map_err(|e| PkiError::Key(e.to_string()))?
        .public_key();
    let object = Secret {
        metadata: labelled(c::SIGNING_KEY_SECRET, namespace),
        data: Some(BTreeMap::from([
            (c::SIGNING_KEY_PRIVATE.to_owned(), ByteString(private)),
            (c::SIGNING_KEY_PUBLIC.to_owned(), ByteString(public.clone())),
        ])),
        ..Secret::default()
    };
    put(secrets, existing.as_ref(), object).await?;
    tracing::info!(secret = c::SIGNING_KEY_SECRET, "made the upload token signing key");
    Ok(public)
}

/// Puts cdi-apiserver's CA into the upload APIService and the DataVolume webhook, each when it is
/// installed.
async fn publish_api_ca(client: &kube::Client, ca: &str) -> Result<(), PkiError> {
    use control_loop::aggregation::publish::{Webhooks, publish_ca_bundle};
    let targets: [(&[Webhooks], &[&str]); 2] = [
        (&[], &[cdi_api::components::UPLOAD_API_SERVICE]),
        (&[Webhooks::Mutating(cdi_api::components::DATA_VOLUME_MUTATOR)], &[]),
    ];
    for (webhooks, api_services) in targets {
        match publish_ca_bundle(client, ca, webhooks, api_services).await {
            Ok(()) => {}
            Err(error) if error.not_found() => {
                tracing::warn!(%error, "not installed: cdi-apiserver cannot be reached through it");
            }
            Err(error) => {
                return Err(PkiError::Api {
                    what: format!("publishing cdi-apiserver's CA: {}", error.what),
                    source: error.source,
                });
            }
        }
    }
    Ok(())
}

/// Reads CDI's certificates and key in `namespace`, makes what is missing or due, writes it,
/// and publishes cdi-apiserver's CA to its APIService.
///
/// # Errors
/// [`PkiError`]: a read or write the API server refused, or a certificate or key not made.
pub async fn ensure(client: &kube::Client, namespace: &str) -> Result<UploadPki, PkiError> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    let mut cas = Vec::new();
    for chain in chains(namespace) {
        cas.push(ensure_chain(&secrets, &config_maps, &chain, namespace, now).await?);
    }
    let token_public_key = ensure_signing_key(&secrets, namespace).await?;
    let [server_ca, client_ca, api_ca, _proxy_ca] = <[Pair; 4]>::try_from(cas).map_err(|cas| PkiError::Chains {
        made: cas.len(),
        wanted: 4,
    })?;
    publish_api_ca(client, &api_ca.cert).await?;
    Ok(UploadPki {
        server_ca,
        client_ca,
        token_public_key,
    })
}
