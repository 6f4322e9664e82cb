//! Where the cluster learns virt-api's CA, and where virt-api learns the aggregation layer's.

use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use super::{CertificateError, api_error};

/// The webhook configurations and APIServices that get the CA.
pub const MUTATOR: &str = "virt-api-mutator";
/// See [`MUTATOR`].
pub const VALIDATOR: &str = "virt-api-validator";
/// See [`MUTATOR`].
pub const API_SERVICES: [&str; 2] = ["v1.subresources.kubevirt.io", "v1alpha3.subresources.kubevirt.io"];

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
