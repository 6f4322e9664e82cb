//! CDI's certificates and token key, kept in its namespace as upstream's operator keeps them:
//!
//! | CA (Secret, bundle ConfigMap) | signs | trusted by |
//! | --- | --- | --- |
//! | `cdi-uploadserver-signer` | each upload server's serving certificate (cdi-controller) | cdi-uploadproxy, clone source pods |
//! | `cdi-uploadserver-client-signer` | `cdi-uploadserver-client-cert`, the proxy's client certificate | upload servers |
//! | `cdi-apiserver-signer` | `cdi-apiserver-server-cert` | the API server (the APIService's and webhook's `caBundle`) |
//! | `cdi-uploadproxy-signer` | `cdi-uploadproxy-server-cert` | clients of the proxy |
//!
//! and `cdi-api-signing-key`, the Ed25519 key cdi-apiserver signs upload and clone tokens with.
//! Lifetimes are the CDI CR's `certConfig`, else upstream's: a CA lives 48 hours and is made
//! again 24 hours after it was made, a server or client certificate lives 24 hours and is made
//! again after 12. As upstream's, `renewBefore` counts back from the end (the renewal comes
//! `duration - renewBefore` after the start), a `duration` alone keeps the default time to
//! renewal, and no certificate waits past 80 % of its life. When each is made again, and how the
//! bundles keep the CAs they replace, is operator-kit's ([`operator_kit::certificates`]), shared
//! by every operator.

use cdi_api::cdi::{CDICertConfig, CertConfig};
use control_loop::tls::issue::Usage;
pub use operator_kit::certificates::{
    CLOCK_SKEW_SECONDS, Chain, HOUR, Leaf, Lifetime, Lifetimes, Needs, Stored, bundle, decide, facts, new_ca,
    renewal_at, service_names, sign_leaf,
};

use operator_kit::duration::{self, DurationError};

pub mod store;

/// Why `certConfig` gives no lifetimes.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CertConfigError {
    /// A duration that does not read.
    #[error(transparent)]
    Duration(#[from] DurationError),
    /// A renewal at or before the start, or a certificate that lives no time.
    #[error(
        "{field}: renewBefore ({renew_before}s) must be shorter than duration ({duration}s), which must be positive"
    )]
    Order {
        /// `spec.certConfig.<kind>`.
        field: String,
        /// Its duration, in seconds.
        duration: i64,
        /// Its renewBefore, in seconds.
        renew_before: i64,
    },
}

fn lifetime(field: &str, config: Option<&CertConfig>, default: Lifetime) -> Result<Lifetime, CertConfigError> {
    let read = |name: &str, value: Option<&String>, default: i64| {
        value.map_or(Ok(default), |v| duration::seconds(&format!("{field}.{name}"), v))
    };
    let duration = read("duration", config.and_then(|c| c.duration.as_ref()), default.duration)?;
    let renew_before = config
        .and_then(|c| c.renew_before.as_ref())
        .map(|v| duration::seconds(&format!("{field}.renewBefore"), v))
        .transpose()?;
    let refresh = renew_before.map_or(default.refresh, |before| duration - before);
    if duration <= 0 || refresh <= 0 {
        return Err(CertConfigError::Order {
            field: field.to_owned(),
            duration,
            renew_before: renew_before.unwrap_or(duration - default.refresh),
        });
    }
    // No later than 80 % of the way, as upstream's rotation.
    Ok(Lifetime {
        duration,
        refresh: refresh.min(duration * 4 / 5),
    })
}

/// The lifetimes the CR's `certConfig` asks for, upstream's defaults for what it leaves out.
///
/// # Errors
/// [`CertConfigError`], naming the field.
pub fn lifetimes(config: Option<&CDICertConfig>) -> Result<Lifetimes, CertConfigError> {
    let defaults = Lifetimes::default();
    Ok(Lifetimes {
        ca: lifetime("spec.certConfig.ca", config.and_then(|c| c.ca.as_ref()), defaults.ca)?,
        server: lifetime(
            "spec.certConfig.server",
            config.and_then(|c| c.server.as_ref()),
            defaults.server,
        )?,
        client: lifetime(
            "spec.certConfig.client",
            config.and_then(|c| c.client.as_ref()),
            defaults.client,
        )?,
    })
}

/// CDI's chains, for its namespace, in the table's order.
#[must_use]
pub fn chains(namespace: &str) -> Vec<Chain> {
    use cdi_api::components as c;
    use cdi_api::upload as u;
    let names = |service: &str| service_names(service, namespace);
    vec![
        Chain {
            ca_secret: u::SERVER_SIGNER_SECRET.to_owned(),
            bundle: u::SERVER_SIGNER_BUNDLE.to_owned(),
            leaf: None,
        },
        Chain {
            ca_secret: u::CLIENT_SIGNER_SECRET.to_owned(),
            bundle: u::CLIENT_SIGNER_BUNDLE.to_owned(),
            leaf: Some(Leaf {
                secret: u::CLIENT_CERT_SECRET.to_owned(),
                common_name: u::PROXY_CLIENT_NAME.to_owned(),
                usage: Usage::Client,
            }),
        },
        Chain {
            ca_secret: c::APISERVER_SIGNER_SECRET.to_owned(),
            bundle: c::APISERVER_SIGNER_BUNDLE.to_owned(),
            leaf: Some(Leaf {
                secret: c::APISERVER_CERT_SECRET.to_owned(),
                common_name: format!("{}.{namespace}.svc", c::APISERVER_SERVICE),
                usage: Usage::Server(names(c::APISERVER_SERVICE)),
            }),
        },
        Chain {
            ca_secret: c::UPLOADPROXY_SIGNER_SECRET.to_owned(),
            bundle: c::UPLOADPROXY_SIGNER_BUNDLE.to_owned(),
            leaf: Some(Leaf {
                secret: c::UPLOADPROXY_CERT_SECRET.to_owned(),
                common_name: format!("{}.{namespace}.svc", c::UPLOADPROXY_SERVICE),
                usage: Usage::Server(names(c::UPLOADPROXY_SERVICE)),
            }),
        },
    ]
}

#[cfg(test)]
mod tests;
