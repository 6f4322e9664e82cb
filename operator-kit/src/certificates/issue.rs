//! Making certificates as upstream KubeVirt and CDI do: ECDSA P-256 keys, a self-signed CA, and
//! certificates it signs, each for one holder (its common name) and one use (server, for its DNS
//! names, or client). Shared by virt-api's certificates, cdi-controller's upload servers and the operators'
//! certificates (control-loop re-exports it as `control_loop::tls::issue`).

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
    PKCS_ECDSA_P256_SHA256,
};
use time::OffsetDateTime;

/// A certificate and its key, PEM.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pair {
    /// The certificate.
    pub cert: String,
    /// Its private key.
    pub key: String,
}

impl Pair {
    /// The facts of its (first) certificate, when both it and the key read.
    #[must_use]
    pub fn facts(&self) -> Option<super::facts::CertFacts> {
        KeyPair::from_pem(&self.key).ok()?;
        super::facts::CertFacts::from_pem(&self.cert)?.into_iter().next()
    }
}

/// How a certificate is used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Usage {
    /// A server's, for these DNS names.
    Server(Vec<String>),
    /// A client's.
    Client,
}

fn at(unix: i64) -> Result<OffsetDateTime, rcgen::Error> {
    OffsetDateTime::from_unix_timestamp(unix).map_err(|_| rcgen::Error::Time)
}

fn ca_params(common_name: &str, not_before: i64, not_after: i64) -> Result<CertificateParams, rcgen::Error> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.distinguished_name = rcgen::DistinguishedName::new();
    params.distinguished_name.push(DnType::CommonName, common_name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.not_before = at(not_before)?;
    params.not_after = at(not_after)?;
    Ok(params)
}

/// A new CA named `common_name`, valid from `not_before` to `not_after` (seconds since the
/// epoch).
///
/// # Errors
/// rcgen's.
pub fn new_ca(common_name: &str, not_before: i64, not_after: i64) -> Result<Pair, rcgen::Error> {
    let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?;
    let cert = ca_params(common_name, not_before, not_after)?.self_signed(&key)?;
    Ok(Pair {
        cert: cert.pem(),
        key: key.serialize_pem(),
    })
}

/// [`sign`] by `ca`, its common name read from its certificate.
///
/// # Errors
/// rcgen's, or a CA certificate or key that cannot be read.
pub fn sign_by(
    ca: &Pair,
    common_name: &str,
    usage: &Usage,
    not_before: i64,
    not_after: i64,
) -> Result<Pair, rcgen::Error> {
    let ca_name = ca
        .facts()
        .map(|f| f.common_name)
        .ok_or(rcgen::Error::CouldNotParseCertificate)?;
    sign(ca, &ca_name, common_name, usage, not_before, not_after)
}

/// A certificate for `common_name` and `usage`, signed by `ca` (whose common name is
/// `ca_common_name`), valid from `not_before` to `not_after`.
///
/// # Errors
/// rcgen's: the CA's key cannot be read, or the certificate not made.
pub fn sign(
    ca: &Pair,
    ca_common_name: &str,
    common_name: &str,
    usage: &Usage,
    not_before: i64,
    not_after: i64,
) -> Result<Pair, rcgen::Error> {
    // Only the CA's name and key matter for signing; its dates are its own.
    let issuer = Issuer::new(
        ca_params(ca_common_name, not_before, not_after)?,
        KeyPair::from_pem(&ca.key)?,
    );
    let (names, purpose) = match usage {
        Usage::Server(names) => (names.clone(), ExtendedKeyUsagePurpose::ServerAuth),
        Usage::Client => (Vec::new(), ExtendedKeyUsagePurpose::ClientAuth),
    };
    let mut params = CertificateParams::new(names)?;
    params.distinguished_name = rcgen::DistinguishedName::new();
    params.distinguished_name.push(DnType::CommonName, common_name);
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
    params.extended_key_usages = vec![purpose];
    params.use_authority_key_identifier_extension = true;
    params.not_before = at(not_before)?;
    params.not_after = at(not_after)?;
    let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?;
    let cert = params.signed_by(&key, &issuer)?;
    Ok(Pair {
        cert: cert.pem(),
        key: key.serialize_pem(),
    })
}
