//! Putting a server's CA where the API server reads it: every webhook of its webhook
//! configurations (`clientConfig.caBundle`) and its APIServices (`spec.caBundle`).

use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

/// A webhook configuration's kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Webhooks {
    /// A `MutatingWebhookConfiguration`.
    Mutating(&'static str),
    /// A `ValidatingWebhookConfiguration`.
    Validating(&'static str),
}

/// Why the CA could not be published.
#[derive(Debug, thiserror::Error)]
#[error("{what}: {source}")]
pub struct PublishError {
    /// What was attempted.
    pub what: String,
    /// Why it failed.
    #[source]
    pub source: kube::Error,
}

impl PublishError {
    /// Whether the object was not there.
    #[must_use]
    pub fn not_found(&self) -> bool {
        matches!(&self.source, kube::Error::Api(status) if status.code == 404)
    }
}

fn dynamic(client: &kube::Client, group: &str, kind: &str, plural: &str) -> Api<kube::api::DynamicObject> {
    let resource = kube::api::ApiResource {
        group: group.to_owned(),
        version: "v1".to_owned(),
        api_version: format!("{group}/v1"),
        kind: kind.to_owned(),
        plural: plural.to_owned(),
    };
    Api::all_with(client.clone(), &resource)
}

/// Puts `ca` (PEM) into every webhook of `webhooks` and into `api_services`, in order; the first
/// failure ends it.
///
/// # Errors
/// [`PublishError`], naming the object.
pub async fn publish_ca_bundle(
    client: &kube::Client,
    ca: &str,
    webhooks: &[Webhooks],
    api_services: &[&str],
) -> Result<(), PublishError> {
    use base64::Engine as _;
    let bundle = base64::engine::general_purpose::STANDARD.encode(ca);
    for configuration in webhooks {
        let (kind, plural, name) = match *configuration {
            Webhooks::Mutating(name) => ("MutatingWebhookConfiguration", "mutatingwebhookconfigurations", name),
            Webhooks::Validating(name) => (
                "ValidatingWebhookConfiguration",
                "validatingwebhookconfigurations",
                name,
            ),
        };
        let api = dynamic(client, "admissionregistration.k8s.io", kind, plural);
        let failed = |what: &str| {
            let what = format!("{what} {plural} {name}");
            move |source| PublishError { what, source }
        };
        let current = api.get(name).await.map_err(failed("get"))?;
        let count = current.data["webhooks"].as_array().map_or(0, Vec::len);
        let ops: Vec<json_patch::PatchOperation> = (0..count)
            .filter_map(|i| {
                serde_json::from_value(
                    json!({"op": "add", "path": format!("/webhooks/{i}/clientConfig/caBundle"), "value": bundle}),
                )
                .ok()
            })
            .collect();
        api.patch(
            name,
            &PatchParams::default(),
            &Patch::Json::<()>(json_patch::Patch(ops)),
        )
        .await
        .map_err(failed("patch"))?;
    }
    let services = dynamic(client, "apiregistration.k8s.io", "APIService", "apiservices");
    for name in api_services {
        services
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"caBundle": bundle}})),
            )
            .await
            .map_err(|source| PublishError {
                what: format!("patch apiservices {name}"),
                source,
            })?;
    }
    Ok(())
}
