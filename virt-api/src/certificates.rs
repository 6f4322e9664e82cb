//! virt-api's certificates in a cluster, without an operator. virt-api keeps KubeVirt's CA in
//! the Secret `kubevirt-ca` and one certificate per holder in upstream's Secrets, each with
//! upstream's common name and lifetime:
//!
//! | Secret | common name | use | held by |
//! | --- | --- | --- | --- |
//! | `kubevirt-virt-api-certs` | `virt-api.<ns>.pod.cluster.local` | server | virt-api |
//! | `kubevirt-controller-certs` | `virt-controller.<ns>.pod.cluster.local` | server | virt-controller |
//! | `kubevirt-virt-handler-server-certs` | `kubevirt.io:system:node:virt-handler` | server | virt-handler |
//! | `kubevirt-virt-handler-certs` | `kubevirt.io:system:client:virt-handler` | client | virt-api, to call virt-handler |
//! | `kubevirt-virt-handler-migration-client-certs` | `kubevirt.io:system:client:migration` | client | virt-handler, to reach another's migration proxy |
//!
//! Each leaf Secret holds `tls.crt`, `tls.key` and `ca.crt`, the CA bundle (the CA, and the
//! previous CA until it expires). At start virt-api makes what is missing, wrong or due
//! ([`plan::decide`]), then keeps them: it looks again when the next certificate is due, or the
//! KubeVirt CR's `certificateRotateStrategy` changes ([`rotation_of`]), and renews it in place,
//! and the components read the renewed files without a restart. Replicas write with the
//! Secrets' resource versions, so one wins a race and the others read its work.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PostParams};

use control_loop::tls::{CertFacts, HANDLER_SERVER, MIGRATION_CLIENT, VIRT_API_CLIENT};
use kubevirt_api::v1::KubeVirt;

pub mod issue;
mod keeper;
pub mod plan;
mod publish;

pub use issue::Pair;
pub use keeper::{Holders, keep};
use plan::{Rotation, StoredLeaf, Usage, Wanted};
pub use publish::{API_SERVICES, MUTATOR, RequestHeader, VALIDATOR, publish_ca_bundle, requestheader};

/// The Secret with KubeVirt's CA: `tls.crt`, `tls.key` and `ca.crt`, the bundle.
pub const CA_SECRET: &str = "kubevirt-ca";
/// virt-api's serving certificate.
pub const API_SECRET: &str = "kubevirt-virt-api-certs";
/// virt-controller's serving certificate (its `/healthz`, `/leader` and `/metrics`).
pub const CONTROLLER_SECRET: &str = "kubevirt-controller-certs";
/// virt-handler's serving certificate (console server, migration proxies, `/healthz`).
pub const HANDLER_SERVER_SECRET: &str = "kubevirt-virt-handler-server-certs";
/// The client certificate virt-api presents to virt-handler.
pub const HANDLER_CLIENT_SECRET: &str = "kubevirt-virt-handler-certs";
/// The client certificate virt-handler presents to another handler's migration proxy.
pub const MIGRATION_CLIENT_SECRET: &str = "kubevirt-virt-handler-migration-client-certs";

/// The certificates virt-api itself uses, PEM.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Certificates {
    /// The CA bundle.
    pub ca_bundle: String,
    /// virt-api's serving certificate and key.
    pub serving: Pair,
    /// virt-api's client certificate and key for virt-handler.
    pub handler_client: Pair,
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
    /// Other replicas kept changing the Secrets.
    #[error("the certificate Secrets kept changing under virt-api after {0} rounds")]
    Unsettled(usize),
}

fn api_error(what: impl Into<String>) -> impl FnOnce(kube::Error) -> CertificateError {
    let what = what.into();
    move |source| CertificateError::Api { what, source }
}

fn dns_names(service: &str, namespace: &str) -> Vec<String> {
    vec![
        service.to_owned(),
        format!("{service}.{namespace}"),
        format!("{service}.{namespace}.svc"),
        format!("{service}.{namespace}.svc.cluster.local"),
    ]
}

/// The names virt-api's Service answers to in `namespace`.
#[must_use]
pub fn service_names(namespace: &str) -> Vec<String> {
    dns_names("virt-api", namespace)
}

/// Every certificate the CA signs for an install in `namespace`.
#[must_use]
pub fn wanted(namespace: &str) -> Vec<Wanted> {
    let server = |secret, service: &str| Wanted {
        secret,
        common_name: format!("{service}.{namespace}.pod.cluster.local"),
        usage: Usage::Server(dns_names(service, namespace)),
    };
    let client = |secret, common_name: &str| Wanted {
        secret,
        common_name: common_name.to_owned(),
        usage: Usage::Client,
    };
    vec![
        server(API_SECRET, "virt-api"),
        server(CONTROLLER_SECRET, "virt-controller"),
        Wanted {
            secret: HANDLER_SERVER_SECRET,
            common_name: HANDLER_SERVER.to_owned(),
            usage: Usage::Server(dns_names("virt-handler", namespace)),
        },
        client(HANDLER_CLIENT_SECRET, VIRT_API_CLIENT),
        client(MIGRATION_CLIENT_SECRET, MIGRATION_CLIENT),
    ]
}

/// The Secret `name` with `data`; a stored one keeps its resource version (the write replaces
/// exactly what was read) and its type (which the API server never lets change).
fn secret(name: &str, data: &[(&str, &str)], stored: Option<&Secret>) -> Secret {
    Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(name.to_owned()),
            resource_version: stored.and_then(|s| s.metadata.resource_version.clone()),
            ..Default::default()
        },
        type_: Some(
            stored
                .and_then(|s| s.type_.clone())
                .unwrap_or_else(|| "kubernetes.io/tls".to_owned()),
        ),
        data: Some(
            data.iter()
                .map(|(k, v)| ((*k).to_owned(), ByteString(v.as_bytes().to_vec())))
                .collect(),
        ),
        ..Secret::default()
    }
}

fn text(secret: Option<&Secret>, key: &str) -> Option<String> {
    let bytes = secret?.data.as_ref()?.get(key)?;
    String::from_utf8(bytes.0.clone()).ok()
}

/// The Secrets as read in one round.
struct Observed {
    stored: BTreeMap<&'static str, Option<Secret>>,
}

impl Observed {
    async fn read(api: &Api<Secret>, wanted: &[Wanted]) -> Result<Self, CertificateError> {
        let mut stored = BTreeMap::new();
        for name in std::iter::once(CA_SECRET).chain(wanted.iter().map(|w| w.secret)) {
            let secret = api
                .get_opt(name)
                .await
                .map_err(api_error(format!("get secret {name}")))?;
            stored.insert(name, secret);
        }
        Ok(Self { stored })
    }

    fn secret(&self, name: &str) -> Option<&Secret> {
        self.stored.get(name).and_then(Option::as_ref)
    }

    fn text(&self, name: &str, key: &str) -> Option<String> {
        text(self.secret(name), key)
    }

    fn first_facts(&self, name: &str) -> Option<CertFacts> {
        CertFacts::from_pem(&self.text(name, "tls.crt")?)?.into_iter().next()
    }

    fn leaf(&self, name: &str) -> Option<StoredLeaf> {
        self.text(name, "tls.key")?;
        Some(StoredLeaf {
            facts: self.first_facts(name)?,
            ca_bundle: self.text(name, "ca.crt")?,
        })
    }

    fn pair(&self, name: &str) -> Result<Pair, CertificateError> {
        let missing = |key: &str| CertificateError::Missing {
            secret: name.to_owned(),
            key: key.to_owned(),
        };
        Ok(Pair {
            cert: self.text(name, "tls.crt").ok_or_else(|| missing("tls.crt"))?,
            key: self.text(name, "tls.key").ok_or_else(|| missing("tls.key"))?,
        })
    }
}

/// Creates `secret`, or replaces it at the resource version read; false when another replica
/// wrote first.
async fn write(api: &Api<Secret>, secret: &Secret) -> Result<bool, CertificateError> {
    let name = secret.metadata.name.clone().unwrap_or_default();
    let result = if secret.metadata.resource_version.is_some() {
        api.replace(&name, &PostParams::default(), secret).await
    } else {
        api.create(&PostParams::default(), secret).await
    };
    match result {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
        Err(e) => Err(api_error(format!("write secret {name}"))(e)),
    }
}

/// The stored CA, when its certificate and key are whole.
fn usable_ca(observed: &Observed) -> Option<(CertFacts, Pair)> {
    let pair = observed.pair(CA_SECRET).ok()?;
    rcgen::KeyPair::from_pem(&pair.key).ok()?;
    Some((observed.first_facts(CA_SECRET)?, pair))
}

/// A new CA living `duration` seconds, its bundle keeping the previous bundle's CAs that have
/// not expired.
async fn write_new_ca(
    api: &Api<Secret>,
    observed: &Observed,
    now: i64,
    duration: i64,
) -> Result<bool, CertificateError> {
    let ca = issue::new_ca(now, duration)?;
    let previous = observed.text(CA_SECRET, "ca.crt").unwrap_or_default();
    let facts = CertFacts::from_pem(&previous).unwrap_or_default();
    let kept = plan::still_valid(now, facts.into_iter().zip(split_pem(&previous)).collect());
    let bundle = std::iter::once(ca.cert.clone()).chain(kept).collect::<String>();
    let data = [
        ("tls.crt", ca.cert.as_str()),
        ("tls.key", ca.key.as_str()),
        ("ca.crt", &bundle),
    ];
    let written = write(api, &secret(CA_SECRET, &data, observed.secret(CA_SECRET))).await?;
    if written {
        tracing::info!(secret = CA_SECRET, "made a new KubeVirt CA");
    }
    Ok(written)
}

/// One round: what is stored, when it is complete and current (with when to look again), or
/// `None` after writing (or losing a race), to be looked at again.
async fn round(
    api: &Api<Secret>,
    wanted: &[Wanted],
    rotation: &Rotation,
    now: i64,
) -> Result<Option<(Certificates, i64)>, CertificateError> {
    let observed = Observed::read(api, wanted).await?;
    let ca = usable_ca(&observed);
    let bundle = observed.text(CA_SECRET, "ca.crt").unwrap_or_default();
    let bundle_cas: Vec<String> = CertFacts::from_pem(&bundle)
        .unwrap_or_default()
        .into_iter()
        .map(|f| f.common_name)
        .collect();
    let leaves: Vec<(Wanted, Option<StoredLeaf>)> =
        wanted.iter().map(|w| (w.clone(), observed.leaf(w.secret))).collect();
    let trust = ca.as_ref().map(|(facts, _)| plan::Trust {
        ca: facts,
        bundle_cas: &bundle_cas,
        bundle: &bundle,
    });
    let decided = plan::decide(now, rotation, trust, &leaves);
    let Some((ca_facts, ca_pair)) = ca.as_ref().filter(|_| !decided.new_ca) else {
        write_new_ca(api, &observed, now, rotation.ca.duration).await?;
        return Ok(None);
    };
    if decided.is_empty() {
        let next = plan::next_look(now, rotation, Some(ca_facts), &leaves, 3600);
        let certificates = Certificates {
            ca_bundle: bundle,
            serving: observed.pair(API_SECRET)?,
            handler_client: observed.pair(HANDLER_CLIENT_SECRET)?,
        };
        return Ok(Some((certificates, next)));
    }
    for name in decided.rebundle {
        let pair = observed.pair(name)?;
        let data = [
            ("tls.crt", pair.cert.as_str()),
            ("tls.key", pair.key.as_str()),
            ("ca.crt", &bundle),
        ];
        if !write(api, &secret(name, &data, observed.secret(name))).await? {
            return Ok(None);
        }
        tracing::info!(secret = name, "gave a certificate the current CA bundle");
    }
    for name in decided.reissue {
        let Some(w) = wanted.iter().find(|w| w.secret == name) else {
            continue;
        };
        let pair = issue::sign(ca_pair, &ca_facts.common_name, w, now, rotation.server.duration)?;
        let data = [
            ("tls.crt", pair.cert.as_str()),
            ("tls.key", pair.key.as_str()),
            ("ca.crt", &bundle),
        ];
        if !write(api, &secret(name, &data, observed.secret(name))).await? {
            return Ok(None);
        }
        tracing::info!(secret = name, common_name = %w.common_name, "issued a certificate");
    }
    Ok(None)
}

/// The PEM blocks of `text`, each as its own text.
fn split_pem(text: &str) -> Vec<String> {
    const END: &str = "-----END CERTIFICATE-----";
    text.split_inclusive(END)
        .filter(|block| block.contains(END))
        .map(|block| format!("{}\n", block.trim_start()))
        .collect()
}

/// The lifetimes the KubeVirt CR `kv` asks for. Its webhook refuses bad ones on update; one made
/// bad at creation (upstream's webhook lets the first CR through unchecked) gives the reasons,
/// and the caller keeps upstream's defaults.
///
/// # Errors
/// Every reason the CR's `certificateRotateStrategy` is refused.
pub fn rotation_of(kv: &KubeVirt) -> Result<Rotation, kubevirt_api::v1::RotationError> {
    let self_signed = kv
        .spec
        .certificate_rotate_strategy
        .as_ref()
        .and_then(|s| s.self_signed.as_ref());
    kubevirt_api::v1::rotation(self_signed)
}

/// [`rotation_of`], or upstream's defaults with the refusal logged.
fn rotation_or_default(kv: &KubeVirt) -> Rotation {
    rotation_of(kv).unwrap_or_else(|error| {
        tracing::error!(%error, "the KubeVirt CR's certificateRotateStrategy is refused; keeping the default lifetimes");
        Rotation::default()
    })
}

/// The lifetimes the KubeVirt CR in `namespace` asks for (the first not being deleted), read
/// once; upstream's defaults when there is none.
///
/// # Errors
/// [`CertificateError::Api`] when the CRs cannot be listed.
pub async fn read_rotation(client: &kube::Client, namespace: &str) -> Result<Rotation, CertificateError> {
    let api: Api<KubeVirt> = Api::namespaced(client.clone(), namespace);
    let list = api
        .list(&kube::api::ListParams::default())
        .await
        .map_err(api_error(format!("list kubevirts in {namespace}")))?;
    Ok(list
        .items
        .iter()
        .find(|kv| kv.metadata.deletion_timestamp.is_none())
        .map(rotation_or_default)
        .unwrap_or_default())
}

/// Makes, reads or renews the certificates for the lifetimes in `rotation` until they are
/// complete and current; returns virt-api's own, and when to look again (seconds since the
/// epoch).
pub async fn ensure(
    client: &kube::Client,
    namespace: &str,
    rotation: &Rotation,
) -> Result<(Certificates, i64), CertificateError> {
    // A fresh install takes three (the CA, its certificates, a look that finds them whole); the
    // rest is room for replicas racing.
    const ROUNDS: usize = 10;
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let wanted = wanted(namespace);
    for _ in 0..ROUNDS {
        let now = time::OffsetDateTime::now_utc().unix_timestamp();
        if let Some(done) = round(&api, &wanted, rotation, now).await? {
            return Ok(done);
        }
    }
    Err(CertificateError::Unsettled(ROUNDS))
}

#[cfg(test)]
mod tests;
