//! The importer pod of a claim, as upstream's import controller makes it (`makeImporterPodSpec`):
//! named `importer-<claim>`, owned by the claim, restarted `OnFailure` (so the kubelet's backoff),
//! the claim mounted at `/data` (or attached as `/dev/cdi-block-volume`), the scratch claim at
//! `/scratch` when the image needs one, `certConfigMap` at `/certs`, the secret's keys as
//! credentials, and the job in upstream's environment variables. Pure.

use std::collections::BTreeMap;

use cdi_api::cdi::NodePlacement;
use cdi_api::data_volume::{DataVolumeSourceHttp, DataVolumeSourceRegistry};
use cdi_api::importer_env as env;
use k8s_openapi::api::core::v1::{
    Capabilities, ConfigMapVolumeSource, Container, ContainerPort, EnvVar, EnvVarSource, LocalObjectReference,
    PersistentVolumeClaimVolumeSource, Pod, PodSchedulingGate, PodSecurityContext, PodSpec, ResourceRequirements,
    SeccompProfile, SecretKeySelector, SecurityContext, Volume, VolumeDevice, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

/// The importer container's name (upstream's).
pub const CONTAINER: &str = "importer";
/// The claim's volume in the pod (upstream's `cdi-data-vol`).
pub const DATA_VOLUME: &str = "cdi-data-vol";
/// The scratch claim's volume (upstream's `cdi-scratch-vol`).
pub const SCRATCH_VOLUME: &str = "cdi-scratch-vol";
/// The certificates' volume (upstream's `cdi-cert-vol`).
pub const CERT_VOLUME: &str = "cdi-cert-vol";
/// The label every CDI object carries, and its value.
pub const CDI_LABEL: (&str, &str) = ("app", "containerized-data-importer");
/// The label naming the component.
pub const COMPONENT_LABEL: (&str, &str) = ("cdi.kubevirt.io", "importer");
/// The annotation saying CDI created an object.
pub const CREATED_BY: &str = "cdi.kubevirt.io/storage.createdByController";

/// The user and group the importer runs as (upstream's, QEMU's in the launcher).
pub const IMPORTER_USER: i64 = 107;

/// The pod name of `claim`'s importer.
#[must_use]
pub fn pod_name(claim: &str) -> String {
    format!("importer-{claim}")
}

/// What the import reads.
#[derive(Clone, Debug, PartialEq)]
pub enum ImportSource {
    /// A URL.
    Http(DataVolumeSourceHttp),
    /// A containerDisk image, pulled by the importer (`pullMethod: pod`).
    Registry(DataVolumeSourceRegistry),
    /// Nothing: a blank disk.
    Blank,
}

impl ImportSource {
    /// The source's kind, as the importer's `IMPORTER_SOURCE` and the claim's annotation say it.
    #[must_use]
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Http(_) => "http",
            Self::Registry(_) => "registry",
            Self::Blank => "none",
        }
    }

    /// The source's URL (empty for a blank disk).
    #[must_use]
    pub fn endpoint(&self) -> &str {
        match self {
            Self::Http(http) => &http.url,
            Self::Registry(registry) => registry.url.as_deref().unwrap_or_default(),
            Self::Blank => "",
        }
    }

    /// The credentials' Secret.
    fn secret(&self) -> Option<&str> {
        match self {
            Self::Http(http) => http.secret_ref.as_deref(),
            Self::Registry(registry) => registry.secret_ref.as_deref(),
            Self::Blank => None,
        }
    }

    /// The CA's ConfigMap.
    fn cert_config_map(&self) -> Option<&str> {
        match self {
            Self::Http(http) => http.cert_config_map.as_deref(),
            Self::Registry(registry) => registry.cert_config_map.as_deref(),
            Self::Blank => None,
        }
    }
}

/// Everything the pod is made from.
#[derive(Clone, Debug, PartialEq)]
pub struct ImporterPodArgs {
    /// The claim's name, namespace and uid.
    pub claim: String,
    /// Its namespace.
    pub namespace: String,
    /// Its uid (the pod's owner).
    pub claim_uid: String,
    /// Whether the claim is a block volume.
    pub block: bool,
    /// The source.
    pub source: ImportSource,
    /// The registry is in CDIConfig's `insecureRegistries`.
    pub insecure_registry: bool,
    /// The claim's requested size, as its quantity is written.
    pub image_size: String,
    /// The filesystem overhead for this claim's class.
    pub filesystem_overhead: String,
    /// `spec.preallocation`, or CDIConfig's default.
    pub preallocation: bool,
    /// The scratch claim, once the image asked for one.
    pub scratch_claim: Option<String>,
    /// The DataVolume's uid (the progress metric's label).
    pub owner_uid: String,
    /// The DataVolume's `serviceAccountName`.
    pub service_account: Option<String>,
    /// The pod's image and the settings every CDI pod has.
    pub pod: PodSettings,
}

pub(crate) fn value(name: &str, value: impl Into<String>) -> EnvVar {
    EnvVar {
        name: name.to_owned(),
        value: Some(value.into()),
        value_from: None,
    }
}

pub(crate) fn from_secret(name: &str, secret: &str, key: &str) -> EnvVar {
    EnvVar {
        name: name.to_owned(),
        value: None,
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: secret.to_owned(),
                key: key.to_owned(),
                optional: None,
            }),
            ..EnvVarSource::default()
        }),
    }
}

fn environment(args: &ImporterPodArgs) -> Vec<EnvVar> {
    let source = &args.source;
    let mut vars = vec![
        value(env::SOURCE, source.kind()),
        value(env::ENDPOINT, source.endpoint()),
        value(env::CONTENT_TYPE, "kubevirt"),
        value(env::IMAGE_SIZE, &args.image_size),
        value(env::OWNER_UID, &args.owner_uid),
        value(env::FILESYSTEM_OVERHEAD, &args.filesystem_overhead),
        value(env::INSECURE_TLS, args.insecure_registry.to_string()),
        value(env::PREALLOCATION, args.preallocation.to_string()),
    ];
    if let ImportSource::Http(http) = source
        && let Some(checksum) = &http.checksum
    {
        vars.push(value(env::CHECKSUM, checksum));
    }
    if let Some(secret) = source.secret() {
        vars.push(from_secret(env::ACCESS_KEY_ID, secret, "accessKeyId"));
        vars.push(from_secret(env::SECRET_KEY, secret, "secretKey"));
    }
    if source.cert_config_map().is_some() {
        vars.push(value(env::CERT_DIR, env::CERT_DIR_PATH));
    }
    match source {
        ImportSource::Http(http) => {
            for (index, header) in http.extra_headers.iter().enumerate() {
                vars.push(value(&format!("{}{index}", env::EXTRA_HEADER_PREFIX), header));
            }
        }
        ImportSource::Registry(registry) => {
            if let Some(architecture) = registry.platform.as_ref().and_then(|p| p.architecture.as_deref()) {
                vars.push(value(env::REGISTRY_IMAGE_ARCHITECTURE, architecture));
            }
        }
        ImportSource::Blank => {}
    }
    vars
}

pub(crate) fn claim_volume(name: &str, claim: &str) -> Volume {
    Volume {
        name: name.to_owned(),
        persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
            claim_name: claim.to_owned(),
            read_only: None,
        }),
        ..Volume::default()
    }
}

pub(crate) fn mount(name: &str, path: &str) -> VolumeMount {
    VolumeMount {
        name: name.to_owned(),
        mount_path: path.to_owned(),
        ..VolumeMount::default()
    }
}

/// The importer pod.
#[must_use]
pub fn render(args: &ImporterPodArgs) -> Pod {
    let mut volumes = vec![claim_volume(DATA_VOLUME, &args.claim)];
    let mut mounts = Vec::new();
    let mut devices = Vec::new();
    if args.block {
        devices.push(VolumeDevice {
            name: DATA_VOLUME.to_owned(),
            device_path: env::BLOCK_DEVICE.to_owned(),
        });
    } else {
        mounts.push(mount(DATA_VOLUME, env::DATA_DIR));
    }
    if let Some(scratch) = &args.scratch_claim {
        volumes.push(claim_volume(SCRATCH_VOLUME, scratch));
        mounts.push(mount(SCRATCH_VOLUME, env::SCRATCH_DIR));
    }
    if let Some(config_map) = args.source.cert_config_map() {
        volumes.push(Volume {
            name: CERT_VOLUME.to_owned(),
            config_map: Some(ConfigMapVolumeSource {
                name: config_map.to_owned(),
                ..ConfigMapVolumeSource::default()
            }),
            ..Volume::default()
        });
        mounts.push(mount(CERT_VOLUME, env::CERT_DIR_PATH));
    }
    let container = Container {
        name: CONTAINER.to_owned(),
        image: Some(args.pod.image.clone()),
        image_pull_policy: Some(args.pod.pull_policy.clone()),
        env: Some(environment(args)),
        ports: Some(vec![ContainerPort {
            name: Some("metrics".to_owned()),
            container_port: i32::from(env::METRICS_PORT),
            protocol: Some("TCP".to_owned()),
            ..ContainerPort::default()
        }]),
        termination_message_policy: Some("FallbackToLogsOnError".to_owned()),
        volume_mounts: (!mounts.is_empty()).then_some(mounts),
        volume_devices: (!devices.is_empty()).then_some(devices),
        resources: args.pod.resources.clone(),
        security_context: Some(restricted_context()),
        ..Container::default()
    };
    claim_pod(
        &PodFrame {
            name: pod_name(&args.claim),
            namespace: args.namespace.clone(),
            annotations: BTreeMap::from([(CREATED_BY.to_owned(), "yes".to_owned())]),
            labels: BTreeMap::from([
                (CDI_LABEL.0.to_owned(), CDI_LABEL.1.to_owned()),
                (COMPONENT_LABEL.0.to_owned(), COMPONENT_LABEL.1.to_owned()),
            ]),
            claim: args.claim.clone(),
            claim_uid: args.claim_uid.clone(),
            priority_class: args.pod.priority_class.clone(),
            service_account: args.service_account.clone(),
            image_pull_secrets: args.pod.image_pull_secrets.clone(),
            placement: args.pod.placement.clone(),
        },
        container,
        volumes,
    )
}

/// Upstream's restricted container context: CDI's pods take a stranger's data and run qemu-img
/// on it.
pub(crate) fn restricted_context() -> SecurityContext {
    SecurityContext {
        allow_privilege_escalation: Some(false),
        capabilities: Some(Capabilities {
            drop: Some(vec!["ALL".to_owned()]),
            add: None,
        }),
        run_as_non_root: Some(true),
        ..SecurityContext::default()
    }
}

/// A CDI pod's image, and what CDIConfig and the DataVolume give every CDI pod.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PodSettings {
    /// The image.
    pub image: String,
    /// Its pull policy.
    pub pull_policy: String,
    /// The DataVolume's `priorityClassName`.
    pub priority_class: Option<String>,
    /// CDIConfig's `podResourceRequirements`.
    pub resources: Option<ResourceRequirements>,
    /// CDIConfig's `imagePullSecrets`.
    pub image_pull_secrets: Vec<LocalObjectReference>,
    /// The CDI CR's `workload` node placement.
    pub placement: NodePlacement,
}

/// What a CDI pod working on a claim is framed with.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct PodFrame {
    /// The pod's name.
    pub name: String,
    /// Its namespace.
    pub namespace: String,
    /// Its annotations.
    pub annotations: BTreeMap<String, String>,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// The claim that owns it.
    pub claim: String,
    /// The claim's uid.
    pub claim_uid: String,
    /// The DataVolume's `priorityClassName`.
    pub priority_class: Option<String>,
    /// The DataVolume's `serviceAccountName`.
    pub service_account: Option<String>,
    /// CDIConfig's `imagePullSecrets`.
    pub image_pull_secrets: Vec<LocalObjectReference>,
    /// The CDI CR's `workload` node placement.
    pub placement: NodePlacement,
}

/// The scheduling gate that holds a pod with a scratch claim back until that claim exists: the
/// claim is owned by the pod, so it is made just after it, and a scheduler that saw the pod
/// first would set it aside as unschedulable and try again only after its backoff (about 2 s
/// on the test cluster). Lifted by cdi-controller once the scratch claim is there.
pub const SCRATCH_GATE: &str = "cdi.kubevirt.io/scratch-claim";

/// Whether `pod` is still held back by [`SCRATCH_GATE`].
#[must_use]
pub fn gated_for_scratch(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.scheduling_gates.as_ref())
        .is_some_and(|gates| gates.iter().any(|g| g.name == SCRATCH_GATE))
}

/// A pod owned by its claim, restarted `OnFailure`, running `container` as [`IMPORTER_USER`]
/// with upstream's restricted pod security; one that mounts a scratch claim starts gated
/// ([`SCRATCH_GATE`]).
pub(crate) fn claim_pod(frame: &PodFrame, container: Container, volumes: Vec<Volume>) -> Pod {
    let scratch = volumes.iter().any(|v| v.name == SCRATCH_VOLUME);
    Pod {
        metadata: ObjectMeta {
            name: Some(frame.name.clone()),
            namespace: Some(frame.namespace.clone()),
            annotations: Some(frame.annotations.clone()),
            labels: Some(frame.labels.clone()),
            owner_references: Some(vec![OwnerReference {
                api_version: "v1".to_owned(),
                kind: "PersistentVolumeClaim".to_owned(),
                name: frame.claim.clone(),
                uid: frame.claim_uid.clone(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            containers: vec![container],
            volumes: Some(volumes),
            scheduling_gates: scratch.then(|| {
                vec![PodSchedulingGate {
                    name: SCRATCH_GATE.to_owned(),
                }]
            }),
            ..pod_spec_frame(
                frame.priority_class.clone(),
                frame.service_account.clone(),
                &frame.image_pull_secrets,
                &frame.placement,
            )
        }),
        status: None,
    }
}

/// What every CDI pod's spec has: restarts `OnFailure`, no service links, CDI's user (107) and
/// the restricted profile's pod settings, placed where the CDI CR's `workload` says.
pub(crate) fn pod_spec_frame(
    priority_class: Option<String>,
    service_account: Option<String>,
    image_pull_secrets: &[k8s_openapi::api::core::v1::LocalObjectReference],
    placement: &NodePlacement,
) -> PodSpec {
    let mut spec = PodSpec {
        restart_policy: Some("OnFailure".to_owned()),
        priority_class_name: priority_class,
        service_account_name: service_account,
        enable_service_links: Some(false),
        image_pull_secrets: (!image_pull_secrets.is_empty()).then(|| image_pull_secrets.to_vec()),
        security_context: Some(PodSecurityContext {
            run_as_user: Some(IMPORTER_USER),
            run_as_group: Some(IMPORTER_USER),
            fs_group: Some(IMPORTER_USER),
            run_as_non_root: Some(true),
            seccomp_profile: Some(SeccompProfile {
                type_: "RuntimeDefault".to_owned(),
                localhost_profile: None,
            }),
            ..PodSecurityContext::default()
        }),
        ..PodSpec::default()
    };
    placement.place(&mut spec);
    spec
}

#[cfg(test)]
mod tests;
