//! Reading the upload path's CAs, their bundles and the token key that cdi-operator keeps in CDI's
//! namespace.

use std::time::Duration;

use cdi_api::upload;
use control_loop::tls::issue::Pair;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::Api;

use super::{SharedPki, UploadPki};

/// How often a missing piece is looked for again while the operator makes it.
const POLL: Duration = Duration::from_secs(2);
/// How often the CAs are read again once there.
const REREAD: Duration = Duration::from_secs(60);

/// Why the certificates could not be read.
#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    /// The API server refused.
    #[error("reading {what}: {source}")]
    Api {
        /// What was read.
        what: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
}

fn text(data: Option<&std::collections::BTreeMap<String, k8s_openapi::ByteString>>, key: &str) -> Option<String> {
    String::from_utf8(data?.get(key)?.0.clone()).ok()
}

async fn secret(api: &Api<Secret>, name: &str) -> Result<Option<Secret>, PkiError> {
    api.get_opt(name).await.map_err(|source| PkiError::Api {
        what: format!("Secret {name}"),
        source,
    })
}

async fn pair(api: &Api<Secret>, name: &str) -> Result<Option<Pair>, PkiError> {
    let found = secret(api, name).await?;
    let data = found.as_ref().and_then(|s| s.data.as_ref());
    Ok(text(data, "tls.crt")
        .zip(text(data, "tls.key"))
        .map(|(cert, key)| Pair { cert, key }))
}

async fn bundle(api: &Api<ConfigMap>, name: &str) -> Result<Option<String>, PkiError> {
    let found = api.get_opt(name).await.map_err(|source| PkiError::Api {
        what: format!("ConfigMap {name}"),
        source,
    })?;
    Ok(found
        .and_then(|c| c.data)
        .and_then(|mut d| d.remove(upload::BUNDLE_KEY)))
}

/// Everything, or the name of the first piece missing.
async fn read(
    secrets: &Api<Secret>,
    config_maps: &Api<ConfigMap>,
) -> Result<Result<UploadPki, &'static str>, PkiError> {
    use cdi_api::components as c;
    let Some(server_ca) = pair(secrets, upload::SERVER_SIGNER_SECRET).await? else {
        return Ok(Err(upload::SERVER_SIGNER_SECRET));
    };
    let Some(client_ca) = pair(secrets, upload::CLIENT_SIGNER_SECRET).await? else {
        return Ok(Err(upload::CLIENT_SIGNER_SECRET));
    };
    let Some(server_bundle) = bundle(config_maps, upload::SERVER_SIGNER_BUNDLE).await? else {
        return Ok(Err(upload::SERVER_SIGNER_BUNDLE));
    };
    let Some(client_bundle) = bundle(config_maps, upload::CLIENT_SIGNER_BUNDLE).await? else {
        return Ok(Err(upload::CLIENT_SIGNER_BUNDLE));
    };
    let key = secret(secrets, c::SIGNING_KEY_SECRET).await?;
    let Some(token_public_key) = key
        .as_ref()
        .and_then(|s| s.data.as_ref())
        .and_then(|d| d.get(c::SIGNING_KEY_PUBLIC))
        .map(|k| k.0.clone())
    else {
        return Ok(Err(c::SIGNING_KEY_SECRET));
    };
    Ok(Ok(UploadPki {
        server_ca,
        server_bundle,
        client_ca,
        client_bundle,
        token_public_key,
    }))
}

/// Reads the upload path's CAs, bundles and token key in `namespace`, waiting (and saying what
/// for) until cdi-operator has made them all.
///
/// # Errors
/// [`PkiError`]: a read the API server refused.
pub async fn load(client: &kube::Client, namespace: &str) -> Result<UploadPki, PkiError> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let mut said = None;
    loop {
        match read(&secrets, &config_maps).await? {
            Ok(pki) => return Ok(pki),
            Err(missing) => {
                if said != Some(missing) {
                    tracing::info!(
                        namespace,
                        missing,
                        "waiting for cdi-operator to make CDI's certificates"
                    );
                    said = Some(missing);
                }
                tokio::time::sleep(POLL).await;
            }
        }
    }
}

/// Reads the CAs again every [`REREAD`] into `shared` until `stop`, saying when they changed; a
/// read that fails or finds a piece missing keeps what `shared` holds.
pub async fn keep(
    client: kube::Client,
    namespace: String,
    shared: std::sync::Arc<SharedPki>,
    stop: tokio_util::sync::CancellationToken,
) {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &namespace);
    let config_maps: Api<ConfigMap> = Api::namespaced(client, &namespace);
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(REREAD) => {}
        }
        match read(&secrets, &config_maps).await {
            Ok(Ok(pki)) => {
                if shared.replace(pki) {
                    tracing::info!(namespace, "the upload CAs changed: signing with the new ones");
                }
            }
            Ok(Err(missing)) => {
                tracing::warn!(
                    namespace,
                    missing,
                    "an upload CA is missing; signing with the last ones"
                );
            }
            Err(error) => {
                let error = kubevirt_api::error_report::one_line(&error);
                tracing::warn!(namespace, %error, "reading the upload CAs failed; signing with the last ones");
            }
        }
    }
}
