//! What a `KubeVirt` CR becomes, decided without the API server: every kubevirt.io CRD but
//! `KubeVirt`'s own (the operator's install brings that), and the objects of `manifests/install`
//! (the priority class, each component's account and RBAC, virt-api with its Service, APIServices
//! and webhooks, virt-controller and virt-handler), moved into the operator's namespace.
//!
//! The CR shapes them: `imageRegistry` and `imageTag` (the components' images and the launcher
//! image virt-controller gives VM pods; the operator's own when unset), `imagePullPolicy`,
//! `infra` (node placement and replicas of virt-api and virt-controller) and `workloads` (node
//! placement of virt-handler, so where VMs run). Placement adds to the templates' own: node
//! selectors are merged, tolerations appended, an affinity replaces theirs.
//!
//! The objects in the CR's namespace are controlled by the CR, so the garbage collector removes
//! them with it. A namespaced owner cannot own a cluster-scoped object or one in another
//! namespace (the binding in `kube-system`): those carry [`OWNER_ANNOTATION`] and are deleted by
//! the operator before it lets the CR go ([`crate::reconciler`]).

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{Container, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{ApiResource, DynamicObject};
use kube::{Resource, ResourceExt};
use kubevirt_api::v1::{ComponentConfig, KubeVirt};
use operator_kit::manifests::{TemplateError, documents, resource_of};
use operator_kit::objects::{Desired, ObjectsError, owned_by, parse};
use serde_json::Value;

pub use crate::labels::{COMPONENT, MANAGED_BY, labels};
use crate::{common_instancetypes, validator};

/// Upstream's annotations with the version, registry and install identity an object belongs to.
pub const VERSION_ANNOTATION: &str = "kubevirt.io/install-strategy-version";
/// See [`VERSION_ANNOTATION`].
pub const REGISTRY_ANNOTATION: &str = "kubevirt.io/install-strategy-registry";
/// See [`VERSION_ANNOTATION`].
pub const IDENTIFIER_ANNOTATION: &str = "kubevirt.io/install-strategy-identifier";
/// On objects outside the CR's namespace: the `namespace/name` of the KubeVirt CR they were made
/// for.
pub const OWNER_ANNOTATION: &str = "kubevirt-rs.io/kubevirt";
/// The namespace the templates are written for, replaced by the operator's.
const TEMPLATE_NAMESPACE: &str = "kubevirt";
/// The registry and tag the templates name, replaced by the CR's.
const TEMPLATE_REGISTRY: &str = "localhost/kubevirt-rs";
/// virt-controller's flag with the image of VM pods.
const LAUNCHER_FLAG: &str = "--launcher-image=";

const TEMPLATES: [(&str, &str); 7] = [
    (
        "manifests/install/priorityclass.yaml",
        include_str!("../../manifests/install/priorityclass.yaml"),
    ),
    (
        "manifests/install/rbac-apiserver.yaml",
        include_str!("../../manifests/install/rbac-apiserver.yaml"),
    ),
    (
        "manifests/install/rbac-controller.yaml",
        include_str!("../../manifests/install/rbac-controller.yaml"),
    ),
    (
        "manifests/install/rbac-handler.yaml",
        include_str!("../../manifests/install/rbac-handler.yaml"),
    ),
    (
        "manifests/install/virt-api.yaml",
        include_str!("../../manifests/install/virt-api.yaml"),
    ),
    (
        "manifests/install/virt-controller.yaml",
        include_str!("../../manifests/install/virt-controller.yaml"),
    ),
    (
        "manifests/install/virt-handler.yaml",
        include_str!("../../manifests/install/virt-handler.yaml"),
    ),
];

/// Kinds without a namespace among the templates.
const CLUSTER_KINDS: [&str; 7] = [
    "ClusterRole",
    "ClusterRoleBinding",
    "APIService",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
    "PriorityClass",
    "CustomResourceDefinition",
];

/// A component whose workload the operator rolls.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Component {
    /// The `virt-api` Deployment.
    Api,
    /// The `virt-controller` Deployment.
    Controller,
    /// The `virt-handler` DaemonSet.
    Handler,
}

impl Component {
    /// Every component.
    pub const ALL: [Self; 3] = [Self::Api, Self::Controller, Self::Handler];

    /// Its workload's name.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Api => "virt-api",
            Self::Controller => "virt-controller",
            Self::Handler => "virt-handler",
        }
    }

    fn of(kind: &str, name: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|c| c.name() == name && kind == if *c == Self::Handler { "DaemonSet" } else { "Deployment" })
    }
}

/// How the operator was started.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Settings {
    /// The operator's namespace, where the components run.
    pub namespace: String,
    /// The operator's version (upstream's `KUBEVIRT_VERSION`).
    pub version: String,
    /// The registry of its own image: the components' when the CR names none.
    pub registry: String,
    /// The tag of its own image: the components' when the CR names none.
    pub tag: String,
}

impl Settings {
    /// The registry and tag of an operator started from `image` (`registry/name:tag`), at
    /// `version` in `namespace`; the tag is `latest` when the image has none.
    #[must_use]
    pub fn from_image(namespace: &str, version: &str, image: &str) -> Self {
        let (repository, tag) = split_tag(image);
        let registry = repository.rsplit_once('/').map_or("", |(registry, _)| registry);
        Self {
            namespace: namespace.to_owned(),
            version: version.to_owned(),
            registry: registry.to_owned(),
            tag: tag.unwrap_or("latest").to_owned(),
        }
    }
}

/// `repository` and `tag` of an image reference; a registry's port is not a tag.
fn split_tag(image: &str) -> (&str, Option<&str>) {
    match image.rsplit_once(':') {
        Some((repository, tag)) if !tag.contains('/') => (repository, Some(tag)),
        _ => (image, None),
    }
}

/// The registry and tag a CR wants.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// `spec.imageRegistry`, else the operator's.
    pub registry: String,
    /// `spec.imageTag`, else the operator's.
    pub tag: String,
}

impl Target {
    /// What `cr` asks for under an operator started with `settings`.
    #[must_use]
    pub fn of(cr: &KubeVirt, settings: &Settings) -> Self {
        let chosen = |field: &Option<String>, default: &str| {
            field.as_deref().filter(|v| !v.is_empty()).unwrap_or(default).to_owned()
        };
        Self {
            registry: chosen(&cr.spec.image_registry, &settings.registry),
            tag: chosen(&cr.spec.image_tag, &settings.tag),
        }
    }

    /// The image of a component (`virt-api`, `virt-launcher`, ...).
    #[must_use]
    pub fn image(&self, component: &str) -> String {
        if self.registry.is_empty() {
            format!("{component}:{}", self.tag)
        } else {
            format!("{}/{component}:{}", self.registry, self.tag)
        }
    }
}

/// Why a CR cannot be rendered.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    /// The CR has no uid yet, so nothing can name it as owner.
    #[error("the KubeVirt {0} has no uid")]
    NoUid(String),
    /// A template does not read (a bug caught by the tests).
    #[error(transparent)]
    Template(#[from] TemplateError),
    /// An object did not convert.
    #[error(transparent)]
    Objects(#[from] ObjectsError),
    /// `spec.customizeComponents` does not apply.
    #[error(transparent)]
    Customize(#[from] crate::customize::CustomizeError),
}

/// Everything a CR wants: the objects applied on every pass, then each component's workload,
/// which [`crate::order`] lets through in turn.
#[derive(Clone, Debug, PartialEq)]
pub struct Rendered {
    /// CRDs, RBAC, Services, APIServices, webhooks, the priority class.
    pub always: Vec<Desired>,
    /// The workloads, by component.
    pub workloads: BTreeMap<Component, Desired>,
    /// Upstream's common instance types and preferences ([`crate::common_instancetypes`]).
    pub instancetypes: Vec<Desired>,
    /// The install's identity: a digest of the target and the CR's placement (upstream's
    /// deployment ID).
    pub deployment_id: String,
    /// The settings the install is made with, as JSON (upstream's deployment config).
    pub deployment_config: String,
}

impl Rendered {
    /// The objects the CR cannot own (cluster-scoped, or in another namespace than its own),
    /// which the operator deletes itself: resource, namespace, name.
    #[must_use]
    pub fn unowned(&self) -> Vec<(ApiResource, Option<String>, String)> {
        self.always
            .iter()
            .filter(|d| d.object.metadata.owner_references.is_none())
            .map(|d| (d.resource.clone(), d.namespace.clone(), d.name.clone()))
            .collect()
    }
}

/// The `namespace/name` of a CR, as [`OWNER_ANNOTATION`] holds it.
#[must_use]
pub fn owner_key(cr: &KubeVirt) -> String {
    format!("{}/{}", cr.namespace().unwrap_or_default(), cr.name_any())
}

/// The KubeVirt CR an object the operator made belongs to (`namespace`, `name`): its controlling
/// owner for an object in the CR's namespace, [`OWNER_ANNOTATION`] for another.
#[must_use]
pub fn owner_of(meta: &ObjectMeta) -> Option<(String, String)> {
    if let Some(owner) = meta
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true) && o.kind == KubeVirt::kind(&()))
    {
        return Some((meta.namespace.clone().unwrap_or_default(), owner.name.clone()));
    }
    let key = meta.annotations.as_ref()?.get(OWNER_ANNOTATION)?;
    let (namespace, name) = key.split_once('/')?;
    Some((namespace.to_owned(), name.to_owned()))
}

/// Everything `cr` wants under `settings`.
///
/// # Errors
/// [`RenderError`]: a CR without uid, or a template that does not read or convert.
pub fn render(cr: &KubeVirt, settings: &Settings) -> Result<Rendered, RenderError> {
    let owner = owned_by(cr).ok_or_else(|| RenderError::NoUid(cr.name_any()))?;
    let target = Target::of(cr, settings);
    let config = serde_json::json!({
        "namespace": settings.namespace,
        "registry": target.registry,
        "tag": target.tag,
        "imagePullPolicy": pull_policy(cr),
        "infra": cr.spec.infra,
        "workloads": cr.spec.workloads,
    });
    let deployment_config = config.to_string();
    let deployment_id = crate::labels::digest(&deployment_config);
    let stamp = Stamp {
        owner: &owner,
        owner_key: owner_key(cr),
        target: &target,
        deployment_id: &deployment_id,
        namespace: &settings.namespace,
    };
    let mut always = Vec::new();
    for mut crd in kubevirt_api::crd::all() {
        if crd.spec.names.kind == KubeVirt::kind(&()) {
            continue;
        }
        crd.metadata.labels = Some(labels());
        let mut object: DynamicObject = parse_value(serde_json::to_value(&crd), &crd.name_any())?;
        stamp.meta(&mut object.metadata, false);
        always.push(dynamic(object)?);
    }
    let mut workloads = BTreeMap::new();
    for (file, text) in TEMPLATES {
        for object in documents(file, text)? {
            let desired = shape(object, cr, &stamp)?;
            match Component::of(&desired.resource.kind, &desired.name) {
                Some(component) => {
                    workloads.insert(component, desired);
                }
                None => always.push(desired),
            }
        }
    }
    for object in validator::objects()? {
        always.push(shape(object, cr, &stamp)?);
    }
    let customized = cr.spec.customize_components.clone().unwrap_or_default();
    let patches = crate::customize::patches(&customized);
    let identifier = crate::customize::identifier(cr.spec.customize_components.as_ref());
    for desired in always.iter_mut().chain(workloads.values_mut()) {
        crate::customize::apply(desired, &patches, &identifier)?;
    }
    let instancetypes = common_instancetypes::desired(|meta| stamp.meta(meta, false))?;
    Ok(Rendered {
        always,
        workloads,
        instancetypes,
        deployment_id,
        deployment_config,
    })
}

fn pull_policy(cr: &KubeVirt) -> String {
    cr.spec
        .image_pull_policy
        .clone()
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| "IfNotPresent".to_owned())
}

fn parse_value(value: Result<Value, serde_json::Error>, what: &str) -> Result<DynamicObject, ObjectsError> {
    value
        .and_then(serde_json::from_value)
        .map_err(|source| ObjectsError::Convert {
            what: what.to_owned(),
            source,
        })
}

fn dynamic(object: DynamicObject) -> Result<Desired, RenderError> {
    let resource = resource_of(&object).ok_or_else(|| TemplateError {
        file: "manifests/install",
        message: format!("{} has no apiVersion or kind", object.name_any()),
    })?;
    Ok(Desired {
        resource,
        namespace: object.metadata.namespace.clone(),
        name: object.name_any(),
        object,
    })
}

/// What every object gets: labels, annotations, owner.
struct Stamp<'a> {
    owner: &'a OwnerReference,
    owner_key: String,
    target: &'a Target,
    deployment_id: &'a str,
    namespace: &'a str,
}

impl Stamp<'_> {
    /// Labels, annotations, and the owner when the object is in the CR's namespace (`owned`).
    fn meta(&self, meta: &mut ObjectMeta, owned: bool) {
        meta.labels.get_or_insert_default().extend(labels());
        let annotations = meta.annotations.get_or_insert_default();
        annotations.insert(VERSION_ANNOTATION.to_owned(), self.target.tag.clone());
        annotations.insert(REGISTRY_ANNOTATION.to_owned(), self.target.registry.clone());
        annotations.insert(IDENTIFIER_ANNOTATION.to_owned(), self.deployment_id.to_owned());
        if owned {
            meta.owner_references = Some(vec![self.owner.clone()]);
        } else {
            annotations.insert(OWNER_ANNOTATION.to_owned(), self.owner_key.clone());
        }
    }
}

/// One template object, in the operator's namespace, stamped, with the CR's settings.
fn shape(mut object: DynamicObject, cr: &KubeVirt, stamp: &Stamp<'_>) -> Result<Desired, RenderError> {
    let kind = object.types.as_ref().map(|t| t.kind.clone()).unwrap_or_default();
    let namespaced = !CLUSTER_KINDS.contains(&kind.as_str());
    let namespace = stamp.namespace.to_owned();
    // The templates name `kubevirt`; an object elsewhere (a binding in `kube-system` to read the
    // aggregation layer's CA) keeps its namespace.
    let elsewhere = object.metadata.namespace.clone().filter(|n| n != TEMPLATE_NAMESPACE);
    object.metadata.namespace = namespaced.then(|| elsewhere.unwrap_or_else(|| namespace.clone()));
    let owned = object.metadata.namespace.as_deref() == Some(namespace.as_str());
    stamp.meta(&mut object.metadata, owned);
    let data = &mut object.data;
    match kind.as_str() {
        "ClusterRoleBinding" | "RoleBinding" => {
            for subject in data["subjects"].as_array_mut().into_iter().flatten() {
                if subject.get("namespace").is_some() {
                    subject["namespace"] = Value::String(namespace.clone());
                }
            }
        }
        "APIService" => data["spec"]["service"]["namespace"] = Value::String(namespace.clone()),
        "MutatingWebhookConfiguration" | "ValidatingWebhookConfiguration" => {
            for webhook in data["webhooks"].as_array_mut().into_iter().flatten() {
                webhook["clientConfig"]["service"]["namespace"] = Value::String(namespace.clone());
            }
        }
        "Deployment" => {
            let what = format!("Deployment {}", object.name_any());
            let mut deployment: Deployment = parse(&object, &what)?;
            let infra = cr.spec.infra.as_ref();
            if let Some(spec) = deployment.spec.as_mut() {
                if let Some(replicas) = infra.and_then(|i| i.replicas) {
                    spec.replicas = Some(i32::from(replicas));
                }
                if let Some(pod) = spec.template.spec.as_mut() {
                    shape_pod(pod, cr, stamp.target, infra);
                }
            }
            return Ok(Desired::from_typed(&deployment)?);
        }
        "DaemonSet" => {
            let what = format!("DaemonSet {}", object.name_any());
            let mut daemon_set: DaemonSet = parse(&object, &what)?;
            if let Some(pod) = daemon_set.spec.as_mut().and_then(|s| s.template.spec.as_mut()) {
                shape_pod(pod, cr, stamp.target, cr.spec.workloads.as_ref());
            }
            return Ok(Desired::from_typed(&daemon_set)?);
        }
        _ => {}
    }
    dynamic(object)
}

/// The CR's images, pull policy and placement in a component's pod.
fn shape_pod(pod: &mut PodSpec, cr: &KubeVirt, target: &Target, placement: Option<&ComponentConfig>) {
    let policy = pull_policy(cr);
    for container in pod
        .containers
        .iter_mut()
        .chain(pod.init_containers.iter_mut().flatten())
    {
        retarget(container, target);
        container.image_pull_policy = Some(policy.clone());
    }
    let Some(placement) = placement.and_then(|p| p.node_placement.as_ref()) else {
        return;
    };
    if !placement.node_selector.is_empty() {
        pod.node_selector
            .get_or_insert_default()
            .extend(placement.node_selector.clone());
    }
    if placement.affinity.is_some() {
        pod.affinity.clone_from(&placement.affinity);
    }
    if !placement.tolerations.is_empty() {
        pod.tolerations
            .get_or_insert_default()
            .extend(placement.tolerations.iter().cloned());
    }
}

/// A template's image `localhost/kubevirt-rs/NAME:latest` (and virt-controller's launcher
/// image flag) as the target's `registry/NAME:tag`.
fn retarget(container: &mut Container, target: &Target) {
    let component = |image: &str| {
        image
            .strip_prefix(TEMPLATE_REGISTRY)
            .and_then(|rest| rest.strip_prefix('/'))
            .map(|rest| split_tag(rest).0.to_owned())
    };
    if let Some(name) = container.image.as_deref().and_then(component) {
        container.image = Some(target.image(&name));
    }
    for arg in container.args.iter_mut().flatten() {
        if let Some(name) = arg.strip_prefix(LAUNCHER_FLAG).and_then(component) {
            *arg = format!("{LAUNCHER_FLAG}{}", target.image(&name));
        }
    }
}

#[cfg(test)]
#[path = "render_tests.rs"]
pub(crate) mod tests;
