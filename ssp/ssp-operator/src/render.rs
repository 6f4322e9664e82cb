//! What an `SSP` becomes, decided without the API server: upstream's template validator in the
//! SSP's namespace (its service account and the cluster role to read templates and VMs, its
//! webhook and metrics Services, its Deployment, a PodDisruptionBudget when it runs more than one
//! replica) and the `ValidatingWebhookConfiguration` that sends VirtualMachines to it, with
//! upstream's names, labels, ports and probes.
//!
//! The namespaced objects are controlled by the SSP, so the garbage collector removes them with
//! it. A namespaced owner cannot own a cluster-scoped object, so those ([`CLUSTER_SCOPED`]) carry
//! upstream's `operator-sdk/primary-resource` annotations instead and are deleted by the operator
//! before it lets the SSP go.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{
    PodAffinityTerm, PodAntiAffinity, PodSpec, Service, ServiceAccount, WeightedPodAffinityTerm,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement, ObjectMeta};
use kube::Resource;
use kube::api::ApiResource;
use operator_kit::certificates::{Chain, Leaf, service_names};
use operator_kit::objects::{Desired, ObjectsError, owned_by};
use serde_json::{Value, json};

use crate::api::SSP;

/// The validator's name: its Deployment, Service and webhook configuration.
pub const VALIDATOR: &str = "virt-template-validator";
/// Its service account and cluster role binding.
pub const SERVICE_ACCOUNT: &str = "template-validator";
/// The cluster role that reads templates and VMs.
pub const CLUSTER_ROLE: &str = "template:view";
/// Its metrics Service.
pub const METRICS_SERVICE: &str = "template-validator-metrics";
/// The Secret with its serving certificate (upstream's name, filled by OpenShift's service CA there).
pub const CERT_SECRET: &str = "virt-template-validator-certs";
/// The Secret with the CA that signs it.
pub const CA_SECRET: &str = "virt-template-validator-ca";
/// The ConfigMap with the CA bundle the API server trusts.
pub const CA_BUNDLE: &str = "virt-template-validator-ca-bundle";
/// The webhook for VirtualMachines.
pub const VM_WEBHOOK: &str = "virtualmachine-admission.ssp.kubevirt.io";
/// The path it is served on.
pub const VM_WEBHOOK_PATH: &str = "/virtualmachine-validate";
/// The validator's webhook port.
pub const WEBHOOK_PORT: i32 = 9443;
/// The validator's metrics port.
pub const METRICS_PORT: i32 = 8443;
/// The label that selects the validator's pods (upstream's common label).
pub const POD_LABEL: (&str, &str) = ("kubevirt.io", VALIDATOR);
/// The label every object the operator makes carries.
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "ssp-operator");
/// The annotation naming a cluster-scoped object's SSP (`namespace/name`).
pub const PRIMARY_RESOURCE: &str = "operator-sdk/primary-resource";
/// The annotation naming its kind.
pub const PRIMARY_RESOURCE_TYPE: &str = "operator-sdk/primary-resource-type";
/// Its value for an SSP.
pub const SSP_TYPE: &str = "SSP.ssp.kubevirt.io";

/// How the operator was started.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    /// The validator's image (upstream's `VALIDATOR_IMAGE`).
    pub validator_image: String,
    /// The version installed (upstream's `OPERATOR_VERSION`).
    pub version: String,
}

/// Why an SSP cannot be rendered.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    /// The SSP has no uid yet, so nothing can name it as owner.
    #[error("the SSP {0} has no uid")]
    NoUid(String),
    /// An object did not take its type's shape.
    #[error(transparent)]
    Object(#[from] ObjectsError),
}

/// The cluster-scoped objects an SSP makes, which the operator deletes itself.
#[must_use]
pub fn cluster_scoped() -> [(ApiResource, &'static str); 3] {
    [
        (ApiResource::erase::<ValidatingWebhookConfiguration>(&()), VALIDATOR),
        (ApiResource::erase::<ClusterRoleBinding>(&()), SERVICE_ACCOUNT),
        (ApiResource::erase::<ClusterRole>(&()), CLUSTER_ROLE),
    ]
}

/// The CA and serving certificate of the validator in `namespace`.
#[must_use]
pub fn chain(namespace: &str) -> Chain {
    Chain {
        ca_secret: CA_SECRET.to_owned(),
        bundle: CA_BUNDLE.to_owned(),
        leaf: Some(Leaf {
            secret: CERT_SECRET.to_owned(),
            common_name: format!("{VALIDATOR}.{namespace}.svc"),
            usage: operator_kit::certificates::issue::Usage::Server(service_names(VALIDATOR, namespace)),
        }),
    }
}

/// The labels of every object for the validator (upstream's `AddAppLabels`): its name,
/// component and manager, and `part-of` and `version` copied from the SSP's own labels when it
/// has any.
#[must_use]
pub fn labels(cr: &SSP) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::from([
        ("app.kubernetes.io/name".to_owned(), SERVICE_ACCOUNT.to_owned()),
        ("app.kubernetes.io/component".to_owned(), "templating".to_owned()),
        (MANAGED_BY.0.to_owned(), MANAGED_BY.1.to_owned()),
    ]);
    if let Some(own) = cr.metadata.labels.as_ref().filter(|l| !l.is_empty()) {
        for key in ["app.kubernetes.io/part-of", "app.kubernetes.io/version"] {
            labels.insert(key.to_owned(), own.get(key).cloned().unwrap_or_default());
        }
    }
    labels
}

/// Whether a cluster-scoped object's annotations name this SSP.
#[must_use]
pub fn made_for(annotations: Option<&BTreeMap<String, String>>, cr: &SSP) -> bool {
    let wanted = primary_resource(cr);
    annotations.is_some_and(|a| {
        a.get(PRIMARY_RESOURCE) == Some(&wanted) && a.get(PRIMARY_RESOURCE_TYPE).map(String::as_str) == Some(SSP_TYPE)
    })
}

fn primary_resource(cr: &SSP) -> String {
    format!(
        "{}/{}",
        cr.metadata.namespace.as_deref().unwrap_or_default(),
        cr.metadata.name.as_deref().unwrap_or_default()
    )
}

/// Every object the SSP wants, in upstream's order: RBAC, Services, the Deployment, the webhook
/// configuration (with `ca_bundle`, the PEM the API server trusts), then the disruption budget.
///
/// # Errors
/// [`RenderError`].
pub fn render(cr: &SSP, settings: &Settings, ca_bundle: &str) -> Result<Vec<Desired>, RenderError> {
    let owner = owned_by(cr).ok_or_else(|| RenderError::NoUid(cr.metadata.name.clone().unwrap_or_default()))?;
    let owner = serde_json::to_value(owner).map_err(|source| ObjectsError::Convert {
        what: "the owner reference".to_owned(),
        source,
    })?;
    let namespace = cr.metadata.namespace.clone().unwrap_or_default();
    let mut common = labels(cr);
    common.insert(POD_LABEL.0.to_owned(), POD_LABEL.1.to_owned());
    let namespaced =
        |name: &str| json!({ "name": name, "namespace": namespace, "labels": common, "ownerReferences": [owner] });
    let cluster = |name: &str, extra: &[(&str, &str)]| {
        let mut labels = labels(cr);
        labels.extend(extra.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
        json!({
            "name": name,
            "labels": labels,
            "annotations": { PRIMARY_RESOURCE: primary_resource(cr), PRIMARY_RESOURCE_TYPE: SSP_TYPE },
        })
    };
    let replicas = cr.validator_replicas();
    let mut wanted = vec![
        Desired::from_json::<ClusterRole>(json!({
            "metadata": cluster(CLUSTER_ROLE, &[("kubevirt.io", "")]),
            "rules": [
                { "apiGroups": ["template.openshift.io"], "resources": ["templates"], "verbs": ["get", "list", "watch"] },
                { "apiGroups": ["kubevirt.io"], "resources": ["virtualmachines"], "verbs": ["list", "watch"] },
            ],
        }))?,
        Desired::from_json::<ServiceAccount>(json!({ "metadata": namespaced(SERVICE_ACCOUNT) }))?,
        Desired::from_json::<ClusterRoleBinding>(json!({
            "metadata": cluster(SERVICE_ACCOUNT, &[]),
            "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": CLUSTER_ROLE },
            "subjects": [{ "kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": namespace }],
        }))?,
        Desired::from_json::<Service>(json!({
            "metadata": namespaced(VALIDATOR),
            "spec": {
                "selector": { POD_LABEL.0: POD_LABEL.1 },
                "ports": [{ "name": "http-webhook", "port": 443, "targetPort": WEBHOOK_PORT }],
            },
        }))?,
        Desired::from_json::<Service>(json!({
            "metadata": {
                "name": METRICS_SERVICE,
                "namespace": namespace,
                "labels": with(&common, &[("prometheus.ssp.kubevirt.io", "true"), ("metrics.ssp.kubevirt.io", METRICS_SERVICE)]),
                "ownerReferences": [owner],
            },
            "spec": {
                "type": "ClusterIP",
                "selector": { POD_LABEL.0: POD_LABEL.1 },
                "ports": [{ "name": "http-metrics", "port": 443, "targetPort": "http-metrics", "protocol": "TCP" }],
            },
        }))?,
        deployment(cr, settings, &namespaced(VALIDATOR), &common, replicas)?,
        Desired::from_json::<ValidatingWebhookConfiguration>(json!({
            "metadata": cluster(VALIDATOR, &[]),
            "webhooks": [{
                "name": VM_WEBHOOK,
                "clientConfig": {
                    "service": { "namespace": namespace, "name": VALIDATOR, "path": VM_WEBHOOK_PATH, "port": 443 },
                    "caBundle": ByteString(ca_bundle.as_bytes().to_vec()),
                },
                "rules": [{
                    "operations": ["CREATE", "UPDATE"],
                    "apiGroups": ["kubevirt.io"],
                    "apiVersions": ["v1alpha3", "v1"],
                    "resources": ["virtualmachines"],
                }],
                "failurePolicy": "Fail",
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
            }],
        }))?,
    ];
    // Upstream keeps one validator up through drains on a highly available cluster; with one
    // replica that budget would block every drain of its node, so it comes with two or more.
    if replicas > 1 {
        wanted.push(Desired::from_json::<PodDisruptionBudget>(json!({
            "metadata": namespaced(VALIDATOR),
            "spec": { "minAvailable": 1, "selector": { "matchLabels": { POD_LABEL.0: POD_LABEL.1 } } },
        }))?);
    }
    Ok(wanted)
}

fn with(labels: &BTreeMap<String, String>, extra: &[(&str, &str)]) -> BTreeMap<String, String> {
    let mut labels = labels.clone();
    labels.extend(extra.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
    labels
}

fn deployment(
    cr: &SSP,
    settings: &Settings,
    metadata: &Value,
    common: &BTreeMap<String, String>,
    replicas: i32,
) -> Result<Desired, ObjectsError> {
    let mut metadata = metadata.clone();
    metadata["labels"]["name"] = json!(VALIDATOR);
    let probe = |initial: i32, failures: i32| {
        json!({
            "httpGet": { "path": "/readyz", "port": WEBHOOK_PORT, "scheme": "HTTPS" },
            "initialDelaySeconds": initial,
            "periodSeconds": 10,
            "failureThreshold": failures,
        })
    };
    let value = json!({
        "metadata": metadata,
        "spec": {
            "replicas": replicas,
            "selector": { "matchLabels": { POD_LABEL.0: POD_LABEL.1 } },
            "template": {
                "metadata": { "labels": with(common, &[("prometheus.ssp.kubevirt.io", "true"), ("name", VALIDATOR)]) },
                "spec": {
                    "serviceAccountName": SERVICE_ACCOUNT,
                    "priorityClassName": "system-cluster-critical",
                    "securityContext": { "runAsNonRoot": true, "seccompProfile": { "type": "RuntimeDefault" } },
                    "containers": [{
                        "name": "webhook",
                        "image": settings.validator_image,
                        "imagePullPolicy": "IfNotPresent",
                        "terminationMessagePolicy": "FallbackToLogsOnError",
                        "args": [
                            format!("--webhook-port={WEBHOOK_PORT}"),
                            format!("--metrics-port={METRICS_PORT}"),
                            "--cert-dir=/etc/webhook/certs",
                        ],
                        "resources": { "requests": { "cpu": "50m", "memory": "100Mi" } },
                        "securityContext": {
                            "readOnlyRootFilesystem": true,
                            "allowPrivilegeEscalation": false,
                            "capabilities": { "drop": ["ALL"] },
                        },
                        "ports": [
                            { "name": "http-webhook", "containerPort": WEBHOOK_PORT, "protocol": "TCP" },
                            { "name": "http-metrics", "containerPort": METRICS_PORT, "protocol": "TCP" },
                        ],
                        "livenessProbe": probe(10, 5),
                        "readinessProbe": probe(5, 2),
                        "volumeMounts": [{ "name": "tls", "mountPath": "/etc/webhook/certs", "readOnly": true }],
                    }],
                    "volumes": [{ "name": "tls", "secret": { "secretName": CERT_SECRET } }],
                },
            },
        },
    });
    let mut deployment: Deployment = serde_json::from_value(value).map_err(|source| ObjectsError::Convert {
        what: format!("Deployment {VALIDATOR}"),
        source,
    })?;
    if let Some(pod) = deployment.spec.as_mut().and_then(|s| s.template.spec.as_mut()) {
        place(cr, pod);
    }
    Desired::from_typed(&deployment)
}

/// Upstream's placement for the validator: one pod per node where it can (a preferred
/// anti-affinity), with `spec.templateValidator.placement` added to it: its node selector, its
/// affinity terms and its tolerations.
fn place(cr: &SSP, pod: &mut PodSpec) {
    let spread = WeightedPodAffinityTerm {
        weight: 1,
        pod_affinity_term: PodAffinityTerm {
            label_selector: Some(LabelSelector {
                match_expressions: Some(vec![LabelSelectorRequirement {
                    key: POD_LABEL.0.to_owned(),
                    operator: "In".to_owned(),
                    values: Some(vec![POD_LABEL.1.to_owned()]),
                }]),
                match_labels: None,
            }),
            topology_key: "kubernetes.io/hostname".to_owned(),
            ..PodAffinityTerm::default()
        },
    };
    let placement = cr
        .spec
        .template_validator
        .as_ref()
        .and_then(|v| v.placement.clone())
        .unwrap_or_default();
    placement.place(pod);
    let mut affinity = pod.affinity.take().unwrap_or_default();
    let anti = affinity.pod_anti_affinity.get_or_insert_with(PodAntiAffinity::default);
    anti.preferred_during_scheduling_ignored_during_execution
        .get_or_insert_with(Vec::new)
        .insert(0, spread);
    pod.affinity = Some(affinity);
}

/// The SSP an object it made belongs to: its controlling owner of kind `SSP`, or, for a
/// cluster-scoped object, its primary-resource annotation (`namespace`, `name`).
#[must_use]
pub fn owner_of(meta: &ObjectMeta) -> Option<(String, String)> {
    if let Some(owner) = meta.owner_references.as_ref().and_then(|refs| {
        refs.iter()
            .find(|o| o.controller == Some(true) && o.kind == SSP::kind(&()))
    }) {
        return Some((meta.namespace.clone().unwrap_or_default(), owner.name.clone()));
    }
    let annotations = meta.annotations.as_ref()?;
    if annotations.get(PRIMARY_RESOURCE_TYPE).map(String::as_str) != Some(SSP_TYPE) {
        return None;
    }
    let (namespace, name) = annotations.get(PRIMARY_RESOURCE)?.split_once('/')?;
    Some((namespace.to_owned(), name.to_owned()))
}

#[cfg(test)]
#[path = "render_tests.rs"]
pub(crate) mod tests;
