//! The objects of virt-operator's own webhook ([`crate::webhook`]), as upstream names them: the
//! Service `kubevirt-operator-webhook` (port 443 to the operator's `webhooks` port), the
//! ValidatingWebhookConfiguration `virt-operator-validator` with `kubevirt-validator.kubevirt.io`
//! for the deletion of KubeVirt CRs and `kubevirt-update-validator.kubevirt.io` and
//! `kubevirt-create-validator.kubevirt.io` for their changes and creation, and the serving certificate in the Secret
//! `kubevirt-operator-certs`, signed by a CA of the operator's own (the Secret
//! `kubevirt-operator-ca`, its bundle in the ConfigMap `kubevirt-operator-ca-bundle`, which goes
//! into the webhook's `caBundle`), with upstream's KubeVirt lifetimes: the CA 7 days, the
//! certificate 24 hours, each made again when a fifth of its life is left.

use base64::Engine as _;
use kube::api::DynamicObject;
use operator_kit::certificates::issue::Usage;
use operator_kit::certificates::{Chain, HOUR, Leaf, Lifetime, Lifetimes, service_names};
use operator_kit::objects::{Desired, ObjectsError};
use serde_json::json;

use crate::{spec_admission, uninstall};

/// The Service in front of the operator's webhook.
pub const SERVICE: &str = "kubevirt-operator-webhook";
/// The webhook configuration.
pub const CONFIGURATION: &str = "virt-operator-validator";
/// The webhook in it.
pub const WEBHOOK: &str = "kubevirt-validator.kubevirt.io";
/// The Secret with the serving certificate (upstream's name).
pub const CERT_SECRET: &str = "kubevirt-operator-certs";
/// The Secret with the CA that signs it.
pub const CA_SECRET: &str = "kubevirt-operator-ca";
/// The ConfigMap with the CA bundle.
pub const CA_BUNDLE: &str = "kubevirt-operator-ca-bundle";
/// The operator's `webhooks` port.
pub const PORT: u16 = 8444;

/// The chain the operator keeps for its webhook, in `namespace`.
#[must_use]
pub fn chain(namespace: &str) -> Chain {
    Chain {
        ca_secret: CA_SECRET.to_owned(),
        bundle: CA_BUNDLE.to_owned(),
        leaf: Some(Leaf {
            secret: CERT_SECRET.to_owned(),
            common_name: format!("{SERVICE}.{namespace}.pod.cluster.local"),
            usage: Usage::Server(service_names(SERVICE, namespace)),
        }),
    }
}

/// Upstream's KubeVirt defaults: a CA lives 168 hours, a certificate 24, each made again when a
/// fifth of its life is left.
#[must_use]
pub fn lifetimes() -> Lifetimes {
    let renewed_at_four_fifths = |hours: i64| Lifetime {
        duration: hours * HOUR,
        refresh: hours * HOUR * 4 / 5,
    };
    Lifetimes {
        ca: renewed_at_four_fifths(168),
        server: renewed_at_four_fifths(24),
        client: renewed_at_four_fifths(24),
    }
}

/// The Service and the webhook configuration, written for the namespace `kubevirt` as the
/// templates are (the render moves them into the operator's).
///
/// # Errors
/// [`ObjectsError::Convert`] (a bug the tests catch).
pub fn objects() -> Result<Vec<DynamicObject>, ObjectsError> {
    let service = json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": SERVICE, "namespace": "kubevirt", "labels": {"kubevirt.io": ""}},
        "spec": {
            "type": "ClusterIP",
            "selector": {"kubevirt.io": "virt-operator"},
            "ports": [{"name": "webhooks", "port": 443, "targetPort": "webhooks", "protocol": "TCP"}],
        },
    });
    let webhook = |name: &str, operation: &str, path: &str| {
        json!({
            "name": name,
            "admissionReviewVersions": ["v1"],
            "sideEffects": "None",
            "failurePolicy": "Fail",
            "timeoutSeconds": 10,
            "rules": [{
                "operations": [operation],
                "apiGroups": ["kubevirt.io"],
                "apiVersions": ["v1alpha3", "v1"],
                "resources": ["kubevirts"],
            }],
            "clientConfig": {"service": {"namespace": "kubevirt", "name": SERVICE, "path": path}},
        })
    };
    let configuration = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": CONFIGURATION, "labels": {"kubevirt.io": CONFIGURATION}},
        "webhooks": [
            webhook(WEBHOOK, "DELETE", uninstall::PATH),
            webhook(spec_admission::UPDATE_WEBHOOK, "UPDATE", spec_admission::UPDATE_PATH),
            webhook(spec_admission::CREATE_WEBHOOK, "CREATE", spec_admission::CREATE_PATH),
        ],
    });
    [service, configuration]
        .into_iter()
        .map(|value| {
            serde_json::from_value(value).map_err(|source| ObjectsError::Convert {
                what: "virt-operator's webhook objects".to_owned(),
                source,
            })
        })
        .collect()
}

/// Puts the CA `bundle` (PEM) into the webhook of the configuration among `always`.
pub fn set_ca_bundle(always: &mut [Desired], bundle: &str) {
    let encoded = base64::engine::general_purpose::STANDARD.encode(bundle);
    let configuration = always
        .iter_mut()
        .find(|d| d.resource.kind == "ValidatingWebhookConfiguration" && d.name == CONFIGURATION);
    if let Some(configuration) = configuration {
        for webhook in configuration.object.data["webhooks"]
            .as_array_mut()
            .into_iter()
            .flatten()
        {
            webhook["clientConfig"]["caBundle"] = json!(encoded);
        }
    }
}
