//! Reading and writing the upload path's certificates in CDI's namespace: the Secrets with the
//! CAs and the proxy's client certificate, and the ConfigMaps with each CA's bundle.

use std::collections::BTreeMap;

use cdi_api::upload;
use control_loop::tls::issue::Pair;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, PostParams};

use super::{Stored, UploadPki, client_cert, decide, new_ca};

/// Why the certificates could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    /// Making a certificate failed.
    #[error("making a certificate: {0}")]
    Make(#[from] rcgen::Error),
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

/// The CA `kept`, or a new one written to the Secret `name` (replacing `existing`).
async fn ensure_ca(
    secrets: &Api<Secret>,
    existing: Option<&Secret>,
    kept: Option<Pair>,
    name: &str,
    namespace: &str,
    now: i64,
) -> Result<Pair, PkiError> {
    if let Some(ca) = kept {
        return Ok(ca);
    }
    let ca = new_ca(name, now)?;
    put(secrets, existing, secret(name, namespace, &ca)).await?;
    tracing::info!(secret = name, "made a CA of the upload path");
    Ok(ca)
}

/// Reads the certificates in `namespace`, makes what is missing or due, and writes it.
///
/// # Errors
/// [`PkiError`]: a read or write the API server refused, or a certificate not made.
pub async fn ensure(client: &kube::Client, namespace: &str) -> Result<UploadPki, PkiError> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let server_secret = get(&secrets, upload::SERVER_SIGNER_SECRET).await?;
    let client_ca_secret = get(&secrets, upload::CLIENT_SIGNER_SECRET).await?;
    let client_cert_secret = get(&secrets, upload::CLIENT_CERT_SECRET).await?;
    let stored = Stored {
        server_ca: pair(server_secret.as_ref()),
        client_ca: pair(client_ca_secret.as_ref()),
        client_cert: pair(client_cert_secret.as_ref()),
    };
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    let needs = decide(&stored, now);
    let server_ca = ensure_ca(
        &secrets,
        server_secret.as_ref(),
        stored.server_ca.filter(|_| !needs.server_ca),
        upload::SERVER_SIGNER_SECRET,
        namespace,
        now,
    )
    .await?;
    let client_ca = ensure_ca(
        &secrets,
        client_ca_secret.as_ref(),
        stored.client_ca.filter(|_| !needs.client_ca),
        upload::CLIENT_SIGNER_SECRET,
        namespace,
        now,
    )
    .await?;
    if needs.client_cert {
        let cert = client_cert(&client_ca, now)?;
        let object = secret(upload::CLIENT_CERT_SECRET, namespace, &cert);
        put(&secrets, client_cert_secret.as_ref(), object).await?;
        tracing::info!(
            secret = upload::CLIENT_CERT_SECRET,
            "made the upload proxy's client certificate"
        );
    }
    ensure_bundle(&config_maps, upload::SERVER_SIGNER_BUNDLE, namespace, &server_ca.cert).await?;
    ensure_bundle(&config_maps, upload::CLIENT_SIGNER_BUNDLE, namespace, &client_ca.cert).await?;
    Ok(UploadPki {
        server_ca,
        client_ca_cert: client_ca.cert,
    })
}
