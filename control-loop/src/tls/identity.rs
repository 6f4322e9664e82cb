//! Who a client is, not only who signed its certificate. Every component's certificate is
//! signed by the one KubeVirt CA, so a server that wants a client certificate also checks the
//! certificate's subject common name against the identities it serves: virt-handler's console
//! server admits virt-api, the migration proxies admit the handlers' migration client, and so
//! on. The names are upstream KubeVirt's (`kubevirt.io:system:<role>:<type>`).

use std::path::PathBuf;
use std::sync::Arc;

use rustls::client::danger::HandshakeSignatureValid;
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{CertificateError, DigitallySignedStruct, DistinguishedName, SignatureScheme};
use rustls_pki_types::{CertificateDer, UnixTime};

pub use operator_kit::certificates::CertFacts;

use super::reloading::Reloading;
use super::{TlsError, pem_error, roots, roots_from_pem};

/// The common name of the client certificate virt-api presents to virt-handler's console
/// server (upstream keeps it in the Secret `kubevirt-virt-handler-certs`).
pub const VIRT_API_CLIENT: &str = "kubevirt.io:system:client:virt-handler";
/// The common name of the client certificate one virt-handler presents to another's migration
/// proxy (`kubevirt-virt-handler-migration-client-certs`).
pub const MIGRATION_CLIENT: &str = "kubevirt.io:system:client:migration";
/// The common name of virt-handler's serving certificate (`kubevirt-virt-handler-server-certs`).
pub const HANDLER_SERVER: &str = "kubevirt.io:system:node:virt-handler";

/// The CA a server checks client certificates against.
#[derive(Clone, Debug)]
pub enum ClientCa {
    /// A PEM file (a mounted Secret's `ca.crt`), read again when it changes.
    File(PathBuf),
    /// PEM text; `origin` names it in errors.
    Pem {
        /// Where the text came from.
        origin: String,
        /// One or more CA certificates.
        pem: String,
    },
}

/// Which clients, once their certificate is verified, a server admits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Identities {
    /// Any certificate the CA signed (the aggregation layer's request-header CA with no allowed
    /// names, as Kubernetes reads an empty `requestheader-allowed-names`).
    AnySignedByTheCa,
    /// Only certificates whose subject common name is one of these.
    Only(Vec<String>),
}

/// A server's rule for client certificates.
#[derive(Clone, Debug)]
pub struct ClientPolicy {
    /// Who signs them.
    pub ca: ClientCa,
    /// Who is admitted.
    pub identities: Identities,
    /// Whether a client must present one (otherwise a client may come without, and the server
    /// learns from the connection whether it did).
    pub required: bool,
}

/// The subject common name of a DER certificate, when it has one.
#[must_use]
pub fn subject_common_name(der: &[u8]) -> Option<String> {
    CertFacts::from_der(der).map(|facts| facts.common_name)
}

/// Why a verified certificate was not admitted.
#[derive(Debug, thiserror::Error)]
#[error("the client certificate's common name {presented:?} is not one this server admits ({admitted})")]
struct NotAdmitted {
    presented: String,
    admitted: String,
}

/// rustls' verifier for the CA, with the identity check after it.
pub(super) struct IdentityVerifier {
    ca: Reloading<Arc<dyn ClientCertVerifier>>,
    identities: Identities,
    required: bool,
}

impl std::fmt::Debug for IdentityVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IdentityVerifier")
            .field("identities", &self.identities)
            .field("required", &self.required)
            .finish_non_exhaustive()
    }
}

fn webpki(roots: rustls::RootCertStore, required: bool, origin: &str) -> Result<Arc<dyn ClientCertVerifier>, TlsError> {
    let builder = WebPkiClientVerifier::builder(Arc::new(roots));
    let builder = if required {
        builder
    } else {
        builder.allow_unauthenticated()
    };
    builder.build().map_err(|e| pem_error(origin, e))
}

impl IdentityVerifier {
    pub(super) fn new(policy: &ClientPolicy) -> Result<Self, TlsError> {
        let required = policy.required;
        let ca = match &policy.ca {
            ClientCa::File(path) => {
                let file = path.clone();
                Reloading::new(vec![path.clone()], move |_| {
                    webpki(roots(&file)?, required, &file.display().to_string())
                })?
            }
            ClientCa::Pem { origin, pem } => {
                let verifier = webpki(roots_from_pem(origin, pem)?, required, origin)?;
                Reloading::new(Vec::new(), move |_| Ok(verifier.clone()))?
            }
        };
        Ok(Self {
            ca,
            identities: policy.identities.clone(),
            required,
        })
    }

    fn admit(&self, end_entity: &CertificateDer<'_>) -> Result<(), rustls::Error> {
        let Identities::Only(names) = &self.identities else {
            return Ok(());
        };
        let presented = subject_common_name(end_entity).unwrap_or_default();
        if names.contains(&presented) {
            return Ok(());
        }
        let refused = NotAdmitted {
            presented,
            admitted: names.join(", "),
        };
        tracing::warn!(error = %refused, "client certificate refused");
        Err(rustls::Error::InvalidCertificate(CertificateError::Other(
            rustls::OtherError(Arc::new(refused)),
        )))
    }
}

impl ClientCertVerifier for IdentityVerifier {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        self.required
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        // The hints would borrow from a CA that can be read again; every client here presents
        // its one certificate whatever the hints say.
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        let verified = self.ca.current().verify_client_cert(end_entity, intermediates, now)?;
        self.admit(end_entity)?;
        Ok(verified)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.ca.current().verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.ca.current().verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.ca.current().supported_verify_schemes()
    }
}
