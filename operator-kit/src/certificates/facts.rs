//! What a certificate says about itself, read from its DER or PEM form.

use rustls_pki_types::CertificateDer;

/// What a certificate says about itself, as far as issuing and renewing it goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertFacts {
    /// Its subject common name (empty without one).
    pub common_name: String,
    /// Its issuer's common name (empty without one).
    pub issuer_common_name: String,
    /// Valid from, seconds since the epoch.
    pub not_before: i64,
    /// Valid until, seconds since the epoch.
    pub not_after: i64,
    /// Its DNS subject alternative names.
    pub dns_names: Vec<String>,
}

fn first_common_name(name: &x509_parser::x509::X509Name<'_>) -> String {
    name.iter_common_name()
        .next()
        .and_then(|cn| cn.as_str().ok())
        .unwrap_or_default()
        .to_owned()
}

impl CertFacts {
    /// The facts of a DER certificate; `None` when it does not parse.
    #[must_use]
    pub fn from_der(der: &[u8]) -> Option<Self> {
        use x509_parser::extensions::GeneralName;
        let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
        let dns_names = cert
            .subject_alternative_name()
            .ok()
            .flatten()
            .map(|san| {
                san.value
                    .general_names
                    .iter()
                    .filter_map(|name| match name {
                        GeneralName::DNSName(dns) => Some((*dns).to_owned()),
                        _ => None,
                    })
                    .collect()
            })
            .unwrap_or_default();
        Some(Self {
            common_name: first_common_name(cert.subject()),
            issuer_common_name: first_common_name(cert.issuer()),
            not_before: cert.validity().not_before.timestamp(),
            not_after: cert.validity().not_after.timestamp(),
            dns_names,
        })
    }

    /// The facts of each certificate in PEM text; `None` when a block does not parse or there is
    /// none.
    #[must_use]
    pub fn from_pem(pem: &str) -> Option<Vec<Self>> {
        use rustls_pki_types::pem::PemObject as _;
        let facts = CertificateDer::pem_slice_iter(pem.as_bytes())
            .map(|der| der.ok().and_then(|der| Self::from_der(&der)))
            .collect::<Option<Vec<_>>>()?;
        (!facts.is_empty()).then_some(facts)
    }
}
