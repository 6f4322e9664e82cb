//! TLS for clients of servers on the open network (an image's URL, a registry, CDI's upload proxy
//! as virtctl reaches it): the system's roots and any extra CA given, or, when the user says so,
//! no verification of the server's certificate at all (the handshake's signatures are still
//! checked).

use std::sync::Arc;

use rustls_pki_types::pem::PemObject as _;
use rustls_pki_types::{CertificateDer, ServerName};

use super::TlsError;

/// A verifier that takes any certificate, for servers the user said not to verify.
#[derive(Debug)]
struct AnyCertificate(rustls::crypto::WebPkiSupportedAlgorithms);

impl rustls::client::danger::ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls_pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.supported_schemes()
    }
}

/// A client configuration that trusts the system's roots and the CAs in `extra_roots_pem`, or,
/// with `insecure`, any server certificate.
///
/// # Errors
/// [`TlsError::Pem`] naming `origin` when the extra roots cannot be read.
pub fn public_client_tls(
    insecure: bool,
    extra_roots_pem: &[u8],
    origin: &str,
) -> Result<Arc<rustls::ClientConfig>, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let error = |message: String| TlsError::Pem {
        origin: origin.to_owned(),
        message,
    };
    let builder = rustls::ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| error(e.to_string()))?;
    if insecure {
        let verifier = Arc::new(AnyCertificate(provider.signature_verification_algorithms));
        return Ok(Arc::new(
            builder
                .dangerous()
                .with_custom_certificate_verifier(verifier)
                .with_no_client_auth(),
        ));
    }
    let mut roots = rustls::RootCertStore::empty();
    let native = rustls_native_certs::load_native_certs();
    for error in &native.errors {
        tracing::warn!(%error, "reading the system's certificates");
    }
    let (added, _) = roots.add_parsable_certificates(native.certs);
    if added == 0 && extra_roots_pem.is_empty() {
        tracing::warn!("no system certificates: only servers whose CA was given can be verified");
    }
    for cert in CertificateDer::pem_slice_iter(extra_roots_pem) {
        let cert = cert.map_err(|e| error(e.to_string()))?;
        roots.add(cert).map_err(|e| error(e.to_string()))?;
    }
    Ok(Arc::new(builder.with_root_certificates(roots).with_no_client_auth()))
}
