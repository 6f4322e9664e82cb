//! virt-api's certificates in a cluster, without an operator: at start virt-api reads the Secret
//! `kubevirt-virt-api-certs` in its namespace, or makes a CA and the certificates it signs and
//! stores them there (a replica that loses the race reads the winner's). The CA signs virt-api's
//! serving certificate (for its Service), virt-handler's console-server certificate (for the name
//! `virt-handler`, stored in `kubevirt-virt-handler-certs`, which the handler DaemonSet mounts; it
//! also serves the handler's `/healthz` and `/metrics`), virt-controller's certificate for its
//! `/healthz`, `/leader` and `/metrics` (stored in `kubevirt-controller-certs`, which the
//! controller Deployment mounts) and virt-api's client certificate for the handlers. virt-api then puts the CA into its webhook
//! configurations and APIServices, and reads the aggregation layer's request-header CA from
//! `kube-system/extension-apiserver-authentication`.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

/// The Secret virt-api keeps its CA and certificates in.
pub const API_SECRET: &str = "kubevirt-virt-api-certs";
/// The Secret virt-handler mounts: `tls.crt`, `tls.key` and the CA (`ca.crt`) of its callers.
pub const HANDLER_SECRET: &str = "kubevirt-virt-handler-certs";
/// The Secret virt-controller mounts: `tls.crt`, `tls.key` and the CA (`ca.crt`).
pub const CONTROLLER_SECRET: &str = "kubevirt-controller-certs";
/// The webhook configurations and APIServices that get the CA.
pub const MUTATOR: &str = "virt-api-mutator";
/// See [`MUTATOR`].
pub const VALIDATOR: &str = "virt-api-validator";
/// See [`MUTATOR`].
pub const API_SERVICES: [&str; 2] = ["v1.subresources.kubevirt.io", "v1alpha3.subresources.kubevirt.io"];
const CA_NAME: &str = "kubevirt-rs CA";

/// The PEM texts virt-api works with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Certificates {
    /// The CA certificate.
    pub ca_cert: String,
    /// The CA's private key.
    pub ca_key: String,
    /// virt-api's serving certificate and key.
    pub serving: (String, String),
    /// virt-api's client certificate and key for virt-handler.
    pub client: (String, String),
}

/// Why the certificates could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum CertificateError {
    /// Making a certificate failed.
    #[error("cannot make a certificate: {0}")]
    Make(#[from] rcgen::Error),
    /// The API server refused a call.
    #[error("{what}: {source}")]
    Api {
        /// What was attempted.
        what: String,
        /// Why.
        source: kube::Error,
    },
    /// The stored Secret lacks a key.
    #[error("secret {secret} has no {key}")]
    Missing {
        /// The Secret.
        secret: String,
        /// The key.
        key: String,
    },
}

fn ca_params() -> Result<rcgen::CertificateParams, rcgen::Error> {
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new())?;
    params.distinguished_name.push(rcgen::DnType::CommonName, CA_NAME);
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params.key_usages = vec![rcgen::KeyUsagePurpose::KeyCertSign, rcgen::KeyUsagePurpose::CrlSign];
    Ok(params)
}

fn sign(names: Vec<String>, issuer: &rcgen::Issuer<'_, rcgen::KeyPair>) -> Result<(String, String), rcgen::Error> {
    let key = rcgen::KeyPair::generate()?;
    let cert = rcgen::CertificateParams::new(names)?.signed_by(&key, issuer)?;
    Ok((cert.pem(), key.serialize_pem()))
}

fn issuer(ca_key: &str) -> Result<rcgen::Issuer<'static, rcgen::KeyPair>, rcgen::Error> {
    Ok(rcgen::Issuer::new(ca_params()?, rcgen::KeyPair::from_pem(ca_key)?))
}

/// The names virt-api's Service answers to in `namespace`.
#[must_use]
pub fn service_names(namespace: &str) -> Vec<String> {
    vec![
        "virt-api".to_owned(),
        format!("virt-api.{namespace}"),
        format!("virt-api.{namespace}.svc"),
        format!("virt-api.{namespace}.svc.cluster.local"),
    ]
}

/// A new CA and the certificates it signs for virt-api in `namespace`.
pub fn issue(namespace: &str) -> Result<Certificates, CertificateError> {
    let ca_key = rcgen::KeyPair::generate()?;
    let ca_cert = ca_params()?.self_signed(&ca_key)?.pem();
    let ca_key = ca_key.serialize_pem();
    let issuer = issuer(&ca_key)?;
    Ok(Certificates {
        serving: sign(service_names(namespace), &issuer)?,
        client: sign(vec!["virt-api".to_owned()], &issuer)?,
        ca_cert,
        ca_key,
    })
}

/// virt-handler's serving certificate, signed by the CA of `certificates`.
pub fn handler_certificate(certificates: &Certificates) -> Result<(String, String), CertificateError> {
    Ok(sign(
        vec![crate::backends::HANDLER_SERVER_NAME.to_owned()],
        &issuer(&certificates.ca_key)?,
    )?)
}

/// virt-controller's serving certificate (for its names in `namespace`), signed by the CA of
/// `certificates`.
pub fn controller_certificate(
    certificates: &Certificates,
    namespace: &str,
) -> Result<(String, String), CertificateError> {
    let names = vec![
        "virt-controller".to_owned(),
        format!("virt-controller.{namespace}"),
        format!("virt-controller.{namespace}.svc"),
    ];
    Ok(sign(names, &issuer(&certificates.ca_key)?)?)
}

fn secret(name: &str, data: &[(&str, &str)]) -> Secret {
    Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(name.to_owned()),
            ..Default::default()
        },
        type_: Some("Opaque".to_owned()),
        data: Some(
            data.iter()
                .map(|(k, v)| ((*k).to_owned(), ByteString(v.as_bytes().to_vec())))
                .collect(),
        ),
        ..Secret::default()
    }
}

fn read(secret: &Secret, key: &str) -> Result<String, CertificateError> {
    secret
        .data
        .as_ref()
        .and_then(|d| d.get(key))
        .map(|b| String::from_utf8_lossy(&b.0).into_owned())
        .ok_or_else(|| CertificateError::Missing {
            secret: API_SECRET.to_owned(),
            key: key.to_owned(),
        })
}

fn api_error(what: impl Into<String>) -> impl FnOnce(kube::Error) -> CertificateError {
    let what = what.into();
    move |source| CertificateError::Api { what, source }
}

fn is_conflict(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 409)
}

/// Creates `secret` unless it exists; false when another replica created it first.
async fn create(api: &Api<Secret>, secret: &Secret) -> Result<bool, CertificateError> {
    match api.create(&PostParams::default(), secret).await {
        Ok(_) => Ok(true),
        Err(e) if is_conflict(&e) => Ok(false),
        Err(e) => Err(api_error(format!(
            "create secret {}",
            secret.metadata.name.as_deref().unwrap_or_default()
        ))(e)),
    }
}

/// Reads or makes the certificates, the handler's Secret included.
pub async fn ensure(client: &kube::Client, namespace: &str) -> Result<Certificates, CertificateError> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let stored = secrets
        .get_opt(API_SECRET)
        .await
        .map_err(api_error(format!("get secret {API_SECRET}")))?;
    let certificates = if let Some(stored) = stored {
        from_secret(&stored)?
    } else {
        let made = issue(namespace)?;
        let data = [
            ("ca.crt", made.ca_cert.as_str()),
            ("ca.key", made.ca_key.as_str()),
            ("tls.crt", made.serving.0.as_str()),
            ("tls.key", made.serving.1.as_str()),
            ("client.crt", made.client.0.as_str()),
            ("client.key", made.client.1.as_str()),
        ];
        if create(&secrets, &secret(API_SECRET, &data)).await? {
            tracing::info!(secret = API_SECRET, "made virt-api's CA and certificates");
            made
        } else {
            let winner = secrets
                .get(API_SECRET)
                .await
                .map_err(api_error(format!("get secret {API_SECRET}")))?;
            from_secret(&winner)?
        }
    };
    for component in [HANDLER_SECRET, CONTROLLER_SECRET] {
        let stored = secrets
            .get_opt(component)
            .await
            .map_err(api_error(format!("get secret {component}")))?;
        if stored.is_some() {
            continue;
        }
        let (cert, key) = if component == HANDLER_SECRET {
            handler_certificate(&certificates)?
        } else {
            controller_certificate(&certificates, namespace)?
        };
        let data = [
            ("ca.crt", certificates.ca_cert.as_str()),
            ("tls.crt", cert.as_str()),
            ("tls.key", key.as_str()),
        ];
        create(&secrets, &secret(component, &data)).await?;
    }
    Ok(certificates)
}

fn from_secret(secret: &Secret) -> Result<Certificates, CertificateError> {
    Ok(Certificates {
        ca_cert: read(secret, "ca.crt")?,
        ca_key: read(secret, "ca.key")?,
        serving: (read(secret, "tls.crt")?, read(secret, "tls.key")?),
        client: (read(secret, "client.crt")?, read(secret, "client.key")?),
    })
}

/// Puts `ca` (PEM) into every webhook of the two configurations and into the APIServices.
pub async fn publish_ca_bundle(client: &kube::Client, ca: &str) -> Result<(), CertificateError> {
    use base64::Engine as _;
    let bundle = base64::engine::general_purpose::STANDARD.encode(ca);
    let dynamic = |group: &str, version: &str, kind: &str, plural: &str| {
        let resource = kube::api::ApiResource {
            group: group.to_owned(),
            version: version.to_owned(),
            api_version: format!("{group}/{version}"),
            kind: kind.to_owned(),
            plural: plural.to_owned(),
        };
        Api::<kube::api::DynamicObject>::all_with(client.clone(), &resource)
    };
    for (kind, plural, name) in [
        ("MutatingWebhookConfiguration", "mutatingwebhookconfigurations", MUTATOR),
        (
            "ValidatingWebhookConfiguration",
            "validatingwebhookconfigurations",
            VALIDATOR,
        ),
    ] {
        let api = dynamic("admissionregistration.k8s.io", "v1", kind, plural);
        let current = api.get(name).await.map_err(api_error(format!("get {plural} {name}")))?;
        let count = current.data["webhooks"].as_array().map_or(0, Vec::len);
        let ops: Vec<_> = (0..count)
            .map(|i| json!({"op": "add", "path": format!("/webhooks/{i}/clientConfig/caBundle"), "value": bundle}))
            .collect();
        let patch: json_patch::Patch =
            serde_json::from_value(serde_json::Value::Array(ops)).map_err(|e| CertificateError::Missing {
                secret: name.to_owned(),
                key: e.to_string(),
            })?;
        api.patch(name, &PatchParams::default(), &Patch::Json::<()>(patch))
            .await
            .map_err(api_error(format!("patch {plural} {name}")))?;
    }
    let services = dynamic("apiregistration.k8s.io", "v1", "APIService", "apiservices");
    for name in API_SERVICES {
        services
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"caBundle": bundle}})),
            )
            .await
            .map_err(api_error(format!("patch apiservices {name}")))?;
    }
    Ok(())
}

/// The aggregation layer's request-header CA (PEM), when the cluster has one.
pub async fn requestheader_ca(client: &kube::Client) -> Result<Option<String>, CertificateError> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "kube-system");
    let map = api
        .get_opt("extension-apiserver-authentication")
        .await
        .map_err(api_error(
            "get configmap kube-system/extension-apiserver-authentication",
        ))?;
    Ok(map
        .and_then(|m| m.data)
        .and_then(|d: BTreeMap<String, String>| d.get("requestheader-client-ca-file").cloned()))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use control_loop::tls::{CertSource, client_tls_pem, server_tls_verifying};
    use rustls_pki_types::ServerName;

    use super::*;

    /// One TLS handshake over an in-memory pipe.
    async fn handshake(server: Arc<rustls::ServerConfig>, client: Arc<rustls::ClientConfig>, name: &str) -> bool {
        let (a, b) = tokio::io::duplex(16 * 1024);
        let name = ServerName::try_from(name.to_owned()).expect("name");
        let (accepted, connected) = tokio::join!(
            tokio_rustls::TlsAcceptor::from(server).accept(a),
            tokio_rustls::TlsConnector::from(client).connect(name, b)
        );
        accepted.is_ok() && connected.is_ok()
    }

    #[tokio::test]
    async fn virt_api_reaches_a_handler_whose_certificate_was_made_later_from_the_stored_ca() {
        let made = issue("kubevirt").expect("issue");
        let (cert, key) = handler_certificate(&made).expect("handler certificate");
        // The handler's side, as its DaemonSet mounts the Secret.
        let dir = tempfile::tempdir().expect("tempdir");
        for (file, text) in [("tls.crt", &cert), ("tls.key", &key), ("ca.crt", &made.ca_cert)] {
            std::fs::write(dir.path().join(file), text).expect("write");
        }
        let source = CertSource::Files {
            cert: dir.path().join("tls.crt"),
            key: dir.path().join("tls.key"),
        };
        let handler = server_tls_verifying(&source, Some(&dir.path().join("ca.crt"))).expect("handler TLS");
        let api = client_tls_pem("test", &made.ca_cert, &made.client.0, &made.client.1).expect("client TLS");
        assert!(handshake(handler.config.clone(), api, "virt-handler").await);
        // A client certificate from another CA is refused.
        let other = issue("kubevirt").expect("issue");
        let stranger = client_tls_pem("test", &made.ca_cert, &other.client.0, &other.client.1).expect("client TLS");
        assert!(!handshake(handler.config, stranger, "virt-handler").await);
    }

    #[test]
    fn the_serving_certificate_names_the_service() {
        assert_eq!(service_names("kv")[2], "virt-api.kv.svc");
        let made = issue("kv").expect("issue");
        let source = CertSource::Pem {
            origin: "test".to_owned(),
            cert: made.serving.0,
            key: made.serving.1,
        };
        assert!(control_loop::tls::server_tls(&source).is_ok());
    }
}
