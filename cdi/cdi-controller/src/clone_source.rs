//! The source pod of a host-assisted clone, as upstream's clone controller makes it
//! (`MakeCloneSourcePodSpec`, `ensureCertSecret`): `<target uid>-source-pod` in the source's
//! namespace, restarted `OnFailure`, with the source claim read-only at
//! `/var/run/cdi/clone/source` (or its device at `/dev/cdi-block-volume`), the target's upload
//! server URL, its CA and a client certificate from a Secret of the pod's name. It cannot be owned
//! across namespaces: it names its target in an annotation, and the target's pass deletes it.
//! Pure: the certificate is issued when the step is applied.

use std::collections::BTreeMap;

use cdi_api::clone::{self, env as clone_env};
use cdi_api::importer_env as env;
use k8s_openapi::api::core::v1::{
    Affinity, Container, PersistentVolumeClaimVolumeSource, Pod, PodAffinity, PodAffinityTerm, PodSpec, Secret, Volume,
    VolumeDevice, WeightedPodAffinityTerm,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, LabelSelectorRequirement, ObjectMeta, OwnerReference,
};

use crate::importer_pod::{
    CDI_LABEL, CREATED_BY, DATA_VOLUME, PodSettings, from_secret, mount, pod_spec_frame, restricted_context, value,
};
use crate::upload_server::UPLOAD_TARGET_LABEL;

/// The component label's value (upstream's).
pub const COMPONENT: &str = "cdi-clone-source";
/// The annotation naming the target claim, `<namespace>/<name>` (upstream's).
pub const OWNER_REF: &str = "cdi.kubevirt.io/storage.ownerRef";
/// The label with the source claim's uid, which keeps a read-write-once source's pods on one
/// node (upstream's).
pub const SOURCE_LABEL: &str = "cdi.kubevirt.io/hostAssistedSourcePodCloneSource";

/// Everything the source pod is made from.
#[derive(Clone, Debug, PartialEq)]
pub struct CloneSourceArgs {
    /// The target claim's namespace.
    pub target_namespace: String,
    /// The target claim.
    pub target: String,
    /// Its uid.
    pub target_uid: String,
    /// The source claim's namespace.
    pub source_namespace: String,
    /// The source claim.
    pub source: String,
    /// Its uid.
    pub source_uid: String,
    /// Whether the source is a block volume.
    pub source_block: bool,
    /// Whether the source may be mounted on one node only.
    pub source_read_write_once: bool,
    /// The DataVolume's uid.
    pub owner_uid: String,
    /// The pod's image and the settings every CDI pod has.
    pub pod: PodSettings,
}

/// The source pod, and the name its client certificate is for.
#[derive(Clone, Debug, PartialEq)]
pub struct CloneSource {
    /// The pod.
    pub pod: Pod,
    /// The common name of its client certificate.
    pub client_name: String,
}

/// The CDI CR's `workload` affinity (`base`) with the source pod's own pod-affinity terms added,
/// as upstream's.
fn affinity(args: &CloneSourceArgs, base: Option<Affinity>) -> Affinity {
    let term = |key: &str, value: &str, namespace: &str| PodAffinityTerm {
        label_selector: Some(LabelSelector {
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: key.to_owned(),
                operator: "In".to_owned(),
                values: Some(vec![value.to_owned()]),
            }]),
            match_labels: None,
        }),
        namespaces: Some(vec![namespace.to_owned()]),
        topology_key: "kubernetes.io/hostname".to_owned(),
        ..PodAffinityTerm::default()
    };
    let mut affinity = base.unwrap_or_default();
    let pod_affinity: &mut PodAffinity = affinity.pod_affinity.get_or_insert_default();
    if args.source_read_write_once {
        pod_affinity
            .required_during_scheduling_ignored_during_execution
            .get_or_insert_default()
            .push(term(SOURCE_LABEL, &args.source_uid, &args.source_namespace));
    }
    pod_affinity
        .preferred_during_scheduling_ignored_during_execution
        .get_or_insert_default()
        .push(WeightedPodAffinityTerm {
            weight: 100,
            pod_affinity_term: term(UPLOAD_TARGET_LABEL, &args.target_uid, &args.target_namespace),
        });
    affinity
}

/// The source pod.
#[must_use]
pub fn render(args: &CloneSourceArgs, server_ca: &str) -> CloneSource {
    let name = clone::source_pod_name(&args.target_uid);
    let mut vars = vec![
        from_secret(clone_env::CLIENT_KEY, &name, "tls.key"),
        from_secret(clone_env::CLIENT_CERT, &name, "tls.crt"),
        value(clone_env::SERVER_CA_CERT, server_ca),
        value(
            clone_env::UPLOAD_URL,
            clone::upload_url(&args.target_namespace, &args.target),
        ),
        value(clone_env::OWNER_UID, &args.owner_uid),
    ];
    let mut container = Container {
        name: clone::SOURCE_CONTAINER.to_owned(),
        image: Some(args.pod.image.clone()),
        image_pull_policy: Some(args.pod.pull_policy.clone()),
        termination_message_policy: Some("FallbackToLogsOnError".to_owned()),
        resources: args.pod.resources.clone(),
        security_context: Some(restricted_context()),
        ..Container::default()
    };
    if args.source_block {
        container.volume_devices = Some(vec![VolumeDevice {
            name: DATA_VOLUME.to_owned(),
            device_path: env::BLOCK_DEVICE.to_owned(),
        }]);
        vars.push(value(clone_env::VOLUME_MODE, "block"));
        vars.push(value(clone_env::MOUNT_POINT, env::BLOCK_DEVICE));
    } else {
        let mut source = mount(DATA_VOLUME, clone::MOUNT_PATH);
        source.read_only = Some(true);
        container.volume_mounts = Some(vec![source]);
        vars.push(value(clone_env::VOLUME_MODE, "filesystem"));
        vars.push(value(clone_env::MOUNT_POINT, clone::MOUNT_PATH));
    }
    container.env = Some(vars);
    let labels = BTreeMap::from([
        (CDI_LABEL.0.to_owned(), CDI_LABEL.1.to_owned()),
        ("cdi.kubevirt.io".to_owned(), COMPONENT.to_owned()),
        (clone::UNIQUE_ID_LABEL.to_owned(), name.clone()),
        (SOURCE_LABEL.to_owned(), args.source_uid.clone()),
    ]);
    let pod = Pod {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: Some(args.source_namespace.clone()),
            annotations: Some(BTreeMap::from([
                (CREATED_BY.to_owned(), "yes".to_owned()),
                (
                    OWNER_REF.to_owned(),
                    format!("{}/{}", args.target_namespace, args.target),
                ),
            ])),
            labels: Some(labels),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            containers: vec![container],
            volumes: Some(vec![Volume {
                name: DATA_VOLUME.to_owned(),
                persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                    claim_name: args.source.clone(),
                    read_only: Some(true),
                }),
                ..Volume::default()
            }]),
            affinity: Some(affinity(args, args.pod.placement.affinity.clone())),
            ..pod_spec_frame(
                args.pod.priority_class.clone(),
                None,
                &args.pod.image_pull_secrets,
                &args.pod.placement,
            )
        }),
        status: None,
    };
    CloneSource {
        pod,
        client_name: clone::client_name(
            &args.source_namespace,
            &args.source,
            &args.target_namespace,
            &args.target,
        ),
    }
}

/// The source pod's certificate Secret (`tls.crt`, `tls.key`), owned by the pod.
#[must_use]
pub fn certificate_secret(pod: &Pod, cert: &str, key: &str) -> Secret {
    let data = [("tls.crt", cert), ("tls.key", key)]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), k8s_openapi::ByteString(v.as_bytes().to_vec())))
        .collect();
    Secret {
        metadata: ObjectMeta {
            name: pod.metadata.name.clone(),
            namespace: pod.metadata.namespace.clone(),
            annotations: Some(BTreeMap::from([(CREATED_BY.to_owned(), "yes".to_owned())])),
            labels: Some(BTreeMap::from([
                (CDI_LABEL.0.to_owned(), CDI_LABEL.1.to_owned()),
                ("cdi.kubevirt.io".to_owned(), COMPONENT.to_owned()),
            ])),
            owner_references: Some(vec![OwnerReference {
                api_version: "v1".to_owned(),
                kind: "Pod".to_owned(),
                name: pod.metadata.name.clone().unwrap_or_default(),
                uid: pod.metadata.uid.clone().unwrap_or_default(),
                controller: None,
                block_owner_deletion: None,
            }]),
            ..ObjectMeta::default()
        },
        data: Some(data),
        ..Secret::default()
    }
}

#[cfg(test)]
mod tests;
