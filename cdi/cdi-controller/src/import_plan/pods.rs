//! The pods a pass makes: the importer's and the upload server's arguments, and the scratch
//! claim.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, PersistentVolumeClaimSpec, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};

use super::sources::insecure_registry;
use super::{ImportFacts, Transfer, requested_size, scratch_name};
use crate::importer_pod::{self, ImportSource, ImporterPodArgs, PodSettings};
use crate::upload_server::UploadServerArgs;

/// How long an upload server waits for its upload before it ends and a new one, with a new
/// certificate, takes its place (upstream's: the certificate's lifetime less its renewal margin).
pub const UPLOAD_DEADLINE_SECONDS: i64 = 12 * 60 * 60;

/// The settings of a pod of `image` for the DataVolume.
pub(super) fn pod_settings(facts: &ImportFacts<'_>, image: &str) -> PodSettings {
    PodSettings {
        image: image.to_owned(),
        pull_policy: facts.settings.pull_policy.clone(),
        priority_class: facts.data_volume.spec.priority_class_name.clone(),
        resources: facts.settings.resources.clone(),
        image_pull_secrets: facts.settings.image_pull_secrets.clone(),
        placement: facts.settings.placement.clone(),
    }
}

pub(super) fn pod_args(
    facts: &ImportFacts<'_>,
    claim: &PersistentVolumeClaim,
    source: &ImportSource,
    scratch: Option<String>,
) -> ImporterPodArgs {
    let data_volume = facts.data_volume;
    let spec = claim.spec.clone().unwrap_or_default();
    ImporterPodArgs {
        claim: claim.metadata.name.clone().unwrap_or_default(),
        namespace: claim.metadata.namespace.clone().unwrap_or_default(),
        claim_uid: claim.metadata.uid.clone().unwrap_or_default(),
        block: spec.volume_mode.as_deref() == Some("Block"),
        source: source.clone(),
        insecure_registry: insecure_registry(source, &facts.settings.insecure_registries),
        image_size: requested_size(claim),
        filesystem_overhead: facts
            .class
            .map_or_else(|| "0".to_owned(), |c| c.filesystem_overhead.clone()),
        preallocation: data_volume.spec.preallocation.unwrap_or(facts.settings.preallocation),
        scratch_claim: scratch,
        owner_uid: data_volume.metadata.uid.clone().unwrap_or_default(),
        pod: pod_settings(facts, &facts.settings.image),
        service_account: data_volume.spec.service_account_name.clone(),
    }
}

/// The scratch claim: the target's size, in the scratch class (or the target's), owned by the pod
/// that mounts it so that it goes with the pod (as upstream's).
pub(super) fn scratch_claim(
    facts: &ImportFacts<'_>,
    claim: &PersistentVolumeClaim,
    pod: &Pod,
) -> PersistentVolumeClaim {
    let target = claim.spec.clone().unwrap_or_default();
    let class = facts.settings.scratch_class.clone().or(target.storage_class_name);
    PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some(scratch_name(&claim.metadata.name.clone().unwrap_or_default())),
            namespace: claim.metadata.namespace.clone(),
            labels: Some(BTreeMap::from([(
                importer_pod::CDI_LABEL.0.to_owned(),
                importer_pod::CDI_LABEL.1.to_owned(),
            )])),
            owner_references: Some(vec![OwnerReference {
                api_version: "v1".to_owned(),
                kind: "Pod".to_owned(),
                name: pod.metadata.name.clone().unwrap_or_default(),
                uid: pod.metadata.uid.clone().unwrap_or_default(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            ..ObjectMeta::default()
        },
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: Some(vec!["ReadWriteOnce".to_owned()]),
            resources: target.resources,
            storage_class_name: class,
            volume_mode: Some("Filesystem".to_owned()),
            ..PersistentVolumeClaimSpec::default()
        }),
        status: None,
    }
}

/// The upload server of `claim`, whose deadline is [`UPLOAD_DEADLINE_SECONDS`] after `now`.
pub(super) fn upload_server_args(
    facts: &ImportFacts<'_>,
    claim: &PersistentVolumeClaim,
    transfer: &Transfer,
    now: &Time,
) -> UploadServerArgs {
    let data_volume = facts.data_volume;
    let spec = claim.spec.clone().unwrap_or_default();
    let name = claim.metadata.name.clone().unwrap_or_default();
    let deadline = now
        .0
        .checked_add(k8s_openapi::jiff::SignedDuration::from_secs(UPLOAD_DEADLINE_SECONDS))
        .unwrap_or(now.0);
    UploadServerArgs {
        // A clone's data comes raw, straight into the claim, from the source pod.
        scratch_claim: match transfer {
            Transfer::Clone { .. } => None,
            Transfer::Import(_) | Transfer::Upload => Some(scratch_name(&name)),
        },
        client_name: match transfer {
            Transfer::Clone {
                namespace,
                name: source,
            } => cdi_api::clone::client_name(
                namespace,
                source,
                claim.metadata.namespace.as_deref().unwrap_or_default(),
                &name,
            ),
            Transfer::Import(_) | Transfer::Upload => cdi_api::upload::PROXY_CLIENT_NAME.to_owned(),
        },
        claim: name,
        namespace: claim.metadata.namespace.clone().unwrap_or_default(),
        claim_uid: claim.metadata.uid.clone().unwrap_or_default(),
        block: spec.volume_mode.as_deref() == Some("Block"),
        image_size: requested_size(claim),
        filesystem_overhead: facts
            .class
            .map_or_else(|| "0".to_owned(), |c| c.filesystem_overhead.clone()),
        preallocation: data_volume.spec.preallocation.unwrap_or(facts.settings.preallocation),
        deadline: deadline.to_string(),
        pod: pod_settings(facts, &facts.settings.upload_image),
        service_account: data_volume.spec.service_account_name.clone(),
    }
}
