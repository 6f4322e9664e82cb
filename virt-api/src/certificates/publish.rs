//! Where the cluster learns virt-api's CA, and where virt-api learns the aggregation layer's.

use super::{CertificateError, api_error};

/// The webhook configurations and APIServices that get the CA.
pub const MUTATOR: &str = "virt-api-mutator";
/// See [`MUTATOR`].
pub const VALIDATOR: &str = "virt-api-validator";
/// See [`MUTATOR`].
pub const API_SERVICES: [&str; 2] = ["v1.subresources.kubevirt.io", "v1alpha3.subresources.kubevirt.io"];

/// Puts `ca` (PEM) into every webhook of the two configurations and into the APIServices.
pub async fn publish_ca_bundle(client: &kube::Client, ca: &str) -> Result<(), CertificateError> {
    use control_loop::aggregation::publish::{self, Webhooks};
    publish::publish_ca_bundle(
        client,
        ca,
        &[Webhooks::Mutating(MUTATOR), Webhooks::Validating(VALIDATOR)],
        &API_SERVICES,
    )
    .await
    .map_err(|e| api_error(e.what)(e.source))
}

pub use control_loop::aggregation::RequestHeader;

/// The aggregation layer's request-header settings, from
/// `kube-system/extension-apiserver-authentication`.
pub async fn requestheader(client: &kube::Client) -> Result<RequestHeader, CertificateError> {
    control_loop::aggregation::requestheader(client)
        .await
        .map_err(|e| CertificateError::Missing {
            secret: control_loop::aggregation::AUTHENTICATION_CONFIG_MAP.to_owned(),
            key: e.to_string(),
        })
}
