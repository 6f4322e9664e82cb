//! Making certificates as upstream KubeVirt does: ECDSA P-256 keys; a self-signed CA named
//! `kubevirt.io@<unix time>`, valid for 7 days; and certificates it signs, valid for 24 hours,
//! each for one holder (its common name) and one use (server or client). Each is valid from a few
//! minutes before it is made, for peers whose clock is a little behind.

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
    PKCS_ECDSA_P256_SHA256,
};
use time::OffsetDateTime;

use super::plan::{CA_LIFETIME_SECONDS, CLOCK_SKEW_SECONDS, LEAF_LIFETIME_SECONDS, Usage, Wanted};

/// A certificate and its key, PEM.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pair {
    /// The certificate.
    pub cert: String,
    /// Its private key.
    pub key: String,
}

fn at(unix: i64) -> Result<OffsetDateTime, rcgen::Error> {
    OffsetDateTime::from_unix_timestamp(unix).map_err(|_| rcgen::Error::Time)
}

fn ca_params(common_name: &str, made: i64) -> Result<CertificateParams, rcgen::Error> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.distinguished_name = rcgen::DistinguishedName::new();
    params.distinguished_name.push(DnType::CommonName, common_name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.not_before = at(made - CLOCK_SKEW_SECONDS)?;
    params.not_after = at(made + CA_LIFETIME_SECONDS)?;
    Ok(params)
}

/// A new CA at `now` (seconds since the epoch).
pub fn new_ca(now: i64) -> Result<Pair, rcgen::Error> {
    let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?;
    let cert = ca_params(&format!("kubevirt.io@{now}"), now)?.self_signed(&key)?;
    Ok(Pair {
        cert: cert.pem(),
        key: key.serialize_pem(),
    })
}

/// The certificate `wanted` names, signed at `now` by `ca`, whose common name is
/// `ca_common_name`, for the leaf lifetime.
pub fn sign(ca: &Pair, ca_common_name: &str, wanted: &Wanted, now: i64) -> Result<Pair, rcgen::Error> {
    sign_between(
        ca,
        ca_common_name,
        wanted,
        now - CLOCK_SKEW_SECONDS,
        now + LEAF_LIFETIME_SECONDS,
    )
}

/// Like [`sign`], valid from `not_before` to `not_after`.
pub fn sign_between(
    ca: &Pair,
    ca_common_name: &str,
    wanted: &Wanted,
    not_before: i64,
    not_after: i64,
) -> Result<Pair, rcgen::Error> {
    // Only the CA's name and key matter for signing; its dates are its own.
    let issuer = Issuer::new(ca_params(ca_common_name, not_before)?, KeyPair::from_pem(&ca.key)?);
    let (names, usage) = match &wanted.usage {
        Usage::Server(names) => (names.clone(), ExtendedKeyUsagePurpose::ServerAuth),
        Usage::Client => (Vec::new(), ExtendedKeyUsagePurpose::ClientAuth),
    };
    let mut params = CertificateParams::new(names)?;
    params.distinguished_name = rcgen::DistinguishedName::new();
    params
        .distinguished_name
        .push(DnType::CommonName, wanted.common_name.as_str());
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
    params.extended_key_usages = vec![usage];
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
