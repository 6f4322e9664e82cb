//! What a `CDI` becomes, decided without the API server: CDI's CRDs (all but `CDI`'s own, which
//! the operator's install brings), the objects of `operands/` (cdi-controller, cdi-apiserver and
//! cdi-uploadproxy: their accounts, RBAC, Deployments, Services, the upload APIService and the
//! DataVolume webhook) in the operator's namespace, and the `CDIConfig` `config` when the CR has a
//! `config`. Each carries the CR as controlling owner, so deleting the CR removes them all (the
//! CRDs with every DataVolume: upstream's `RemoveWorkloads`).
//!
//! The CR's fields shape them: `imagePullPolicy` (the components' and CDI's worker pods'),
//! `infra` (node placement of the three Deployments; replicas of cdi-apiserver and
//! cdi-uploadproxy), `workload` (node placement of importer, upload server and clone source pods,
//! given to cdi-controller), `priorityClass` (the three Deployments). [`refusal`] names the
//! fields it does not act on.

use std::collections::BTreeMap;

use cdi_api::CDI;
use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::EnvVar;
use kube::api::DynamicObject;
use kube::{Resource, ResourceExt};
use operator_kit::manifests::{documents, resource_of};
use operator_kit::objects::{Desired, ObjectsError, owned_by, parse};
use serde_json::Value;

use crate::certificates::store::Issued;

/// The label every object the operator makes carries, upstream's.
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "cdi-operator");
/// cdi-controller's Deployment.
pub const CONTROLLER: &str = "cdi-deployment";
/// cdi-apiserver's Deployment.
pub const APISERVER: &str = "cdi-apiserver";
/// cdi-uploadproxy's Deployment.
pub const UPLOADPROXY: &str = "cdi-uploadproxy";
/// The Deployments, in the order they are reported.
pub const DEPLOYMENTS: [&str; 3] = [CONTROLLER, APISERVER, UPLOADPROXY];
/// cdi-controller's environment variable with the worker pods' node placement (JSON).
pub const WORKLOAD_ENV: &str = "WORKLOAD_PLACEMENT";

const OPERANDS: [(&str, &str); 4] = [
    ("operands/rbac.yaml", include_str!("../operands/rbac.yaml")),
    (
        "operands/cdi-controller.yaml",
        include_str!("../operands/cdi-controller.yaml"),
    ),
    (
        "operands/cdi-uploadproxy.yaml",
        include_str!("../operands/cdi-uploadproxy.yaml"),
    ),
    (
        "operands/cdi-apiserver.yaml",
        include_str!("../operands/cdi-apiserver.yaml"),
    ),
];

/// The namespace the templates are written for, replaced by the operator's.
const TEMPLATE_NAMESPACE: &str = "cdi";

/// Kinds without a namespace among the operands.
const CLUSTER_KINDS: [&str; 5] = [
    "ClusterRole",
    "ClusterRoleBinding",
    "APIService",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
];

/// CDI's images, as upstream's operator takes them from its environment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Images {
    /// `CONTROLLER_IMAGE`.
    pub controller: String,
    /// `APISERVER_IMAGE`.
    pub apiserver: String,
    /// `UPLOADPROXY_IMAGE`.
    pub uploadproxy: String,
    /// `IMPORTER_IMAGE`.
    pub importer: String,
    /// `UPLOADSERVER_IMAGE`.
    pub uploadserver: String,
    /// `CLONER_IMAGE`.
    pub cloner: String,
}

/// How the operator was started.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Settings {
    /// The namespace the operator and CDI run in.
    pub namespace: String,
    /// The version installed.
    pub version: String,
    /// The images.
    pub images: Images,
}

/// Why a CR cannot be rendered.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    /// The CR has no uid yet, so nothing can name it as owner.
    #[error("the CDI {0} has no uid")]
    NoUid(String),
    /// An operand file does not read (a bug caught by the tests).
    #[error("{file}: {message}")]
    Operand {
        /// The file.
        file: &'static str,
        /// Why.
        message: String,
    },
    /// An object did not convert.
    #[error(transparent)]
    Objects(#[from] ObjectsError),
}

/// The labels of every object the operator makes.
#[must_use]
pub fn labels() -> BTreeMap<String, String> {
    BTreeMap::from([
        ("cdi.kubevirt.io".to_owned(), String::new()),
        (MANAGED_BY.0.to_owned(), MANAGED_BY.1.to_owned()),
    ])
}

/// The CR's fields the operator does not act on, as the message of its refusal; `None` when it
/// acts on all it has.
#[must_use]
pub fn refusal(cr: &CDI) -> Option<String> {
    let spec = &cr.spec;
    if spec
        .customize_components
        .as_ref()
        .is_some_and(|c| c.as_object().is_none_or(|o| !o.is_empty()))
    {
        return Some("spec.customizeComponents is not supported: the components cannot be patched".to_owned());
    }
    if spec
        .infra
        .as_ref()
        .and_then(|i| i.deployment_replicas)
        .is_some_and(|r| r != 1)
    {
        return Some(
            "spec.infra.deploymentReplicas: cdi-controller runs as exactly one replica (it has no leader election)"
                .to_owned(),
        );
    }
    crate::certificates::lifetimes(spec.cert_config.as_ref())
        .err()
        .map(|e| e.to_string())
}

/// Everything `cr` wants, in the order it is applied.
///
/// # Errors
/// [`RenderError`]: a CR without uid, or an object that does not convert.
pub fn render(cr: &CDI, settings: &Settings, issued: &Issued) -> Result<Vec<Desired>, RenderError> {
    let owner = owned_by(cr).ok_or_else(|| RenderError::NoUid(cr.name_any()))?;
    let mut wanted = Vec::new();
    for mut crd in cdi_api::crd::all() {
        if crd.metadata.name.as_deref() == Some(&format!("{}.{}", CDI::plural(&()), CDI::group(&()))) {
            continue;
        }
        crd.metadata.labels = Some(labels());
        crd.metadata.owner_references = Some(vec![owner.clone()]);
        wanted.push(Desired::from_typed(&crd)?);
    }
    for (file, text) in OPERANDS {
        for document in documents(file, text).map_err(|e| RenderError::Operand {
            file: e.file,
            message: e.message,
        })? {
            wanted.push(shape(document, cr, settings, issued, &owner)?);
        }
    }
    if let Some(config) = &cr.spec.config {
        let mut cdi_config = cdi_api::CDIConfig::new(cdi_api::cdi_config::CONFIG_NAME, config.clone());
        cdi_config.metadata.labels = Some(labels());
        cdi_config.metadata.owner_references = Some(vec![owner]);
        wanted.push(Desired::from_typed(&cdi_config)?);
    }
    Ok(wanted)
}

/// One operand, in the operator's namespace, labelled and owned, with the CR's settings.
fn shape(
    mut object: DynamicObject,
    cr: &CDI,
    settings: &Settings,
    issued: &Issued,
    owner: &k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference,
) -> Result<Desired, RenderError> {
    let resource = resource_of(&object).ok_or_else(|| RenderError::Operand {
        file: "operands",
        message: format!("{} has no apiVersion or kind", object.name_any()),
    })?;
    let namespace = &settings.namespace;
    let namespaced = !CLUSTER_KINDS.contains(&resource.kind.as_str());
    // The templates name CDI's namespace `cdi`; an object elsewhere (a binding in `kube-system`
    // to read the aggregation layer's CA) keeps its namespace.
    let elsewhere = object.metadata.namespace.clone().filter(|n| n != TEMPLATE_NAMESPACE);
    object.metadata.namespace = namespaced.then(|| elsewhere.unwrap_or_else(|| namespace.clone()));
    object.metadata.labels.get_or_insert_default().extend(labels());
    object.metadata.owner_references = Some(vec![owner.clone()]);
    let ca_bundle = Value::String(encode(&issued.apiserver_bundle));
    let data = &mut object.data;
    match resource.kind.as_str() {
        "ClusterRoleBinding" | "RoleBinding" => {
            for subject in data["subjects"].as_array_mut().into_iter().flatten() {
                if subject.get("namespace").is_some() {
                    subject["namespace"] = Value::String(namespace.clone());
                }
            }
        }
        "APIService" => {
            data["spec"]["service"]["namespace"] = Value::String(namespace.clone());
            data["spec"]["caBundle"] = ca_bundle;
        }
        "MutatingWebhookConfiguration" | "ValidatingWebhookConfiguration" => {
            for webhook in data["webhooks"].as_array_mut().into_iter().flatten() {
                webhook["clientConfig"]["service"]["namespace"] = Value::String(namespace.clone());
                webhook["clientConfig"]["caBundle"] = ca_bundle.clone();
            }
        }
        "Deployment" => {
            let mut deployment: Deployment = parse(&object, &format!("Deployment {}", object.name_any()))?;
            shape_deployment(&mut deployment, cr, settings);
            return Ok(Desired::from_typed(&deployment)?);
        }
        _ => {}
    }
    Ok(Desired {
        resource,
        namespace: object.metadata.namespace.clone(),
        name: object.name_any(),
        object,
    })
}

fn encode(text: &str) -> String {
    // The API server's JSON form of `[]byte`.
    serde_json::to_value(ByteString(text.as_bytes().to_vec()))
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

fn shape_deployment(deployment: &mut Deployment, cr: &CDI, settings: &Settings) {
    let name = deployment.name_any();
    let spec = &cr.spec;
    let infra = spec.infra.as_ref();
    let pull_policy = spec
        .image_pull_policy
        .clone()
        .unwrap_or_else(|| "IfNotPresent".to_owned());
    let images = &settings.images;
    let Some(deployment_spec) = deployment.spec.as_mut() else {
        return;
    };
    let replicas = match name.as_str() {
        APISERVER => infra.and_then(|i| i.api_server_replicas),
        UPLOADPROXY => infra.and_then(|i| i.upload_proxy_replicas),
        _ => None,
    };
    if replicas.is_some() {
        deployment_spec.replicas = replicas;
    }
    let Some(pod) = deployment_spec.template.spec.as_mut() else {
        return;
    };
    if let Some(placement) = infra.map(|i| &i.placement) {
        placement.place(pod);
    }
    pod.priority_class_name.clone_from(&spec.priority_class);
    let workload = spec
        .workload
        .as_ref()
        .and_then(|w| serde_json::to_string(w).ok())
        .unwrap_or_else(|| "{}".to_owned());
    for container in &mut pod.containers {
        container.image_pull_policy = Some(pull_policy.clone());
        let image = match container.name.as_str() {
            "cdi-controller" => &images.controller,
            "cdi-apiserver" => &images.apiserver,
            "cdi-uploadproxy" => &images.uploadproxy,
            _ => continue,
        };
        container.image = Some(image.clone());
        if container.name != "cdi-controller" {
            continue;
        }
        let env = container.env.get_or_insert_default();
        for (key, value) in [
            ("IMPORTER_IMAGE", &images.importer),
            ("UPLOADSERVER_IMAGE", &images.uploadserver),
            ("CLONER_IMAGE", &images.cloner),
            ("PULL_POLICY", &pull_policy),
            (WORKLOAD_ENV, &workload),
        ] {
            set_env(env, key, value);
        }
    }
}

fn set_env(env: &mut Vec<EnvVar>, name: &str, value: &str) {
    let var = EnvVar {
        name: name.to_owned(),
        value: Some(value.to_owned()),
        value_from: None,
    };
    match env.iter_mut().find(|e| e.name == name) {
        Some(existing) => *existing = var,
        None => env.push(var),
    }
}

#[cfg(test)]
mod tests;
