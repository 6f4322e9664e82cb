//! The import controller's pass over one DataVolume: observe through [`CdiApi`], plan with
//! [`import_plan::plan`], apply the steps in order. The first failing write ends the pass (the
//! next pass observes again and goes on from there).

use std::collections::BTreeMap;

use cdi_api::cdi_config::DEFAULT_FILESYSTEM_OVERHEAD;
use cdi_api::{CDIConfig, DataVolume};
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::claim_spec::{self, ChosenClass, ClassCandidate};
use crate::cluster_api::{ApiError, CdiApi, EventSubject};
use crate::import_plan::{self, ImportFacts, ImporterSettings, Step};
use crate::importer_pod;
use crate::storage_profile::{self, ClassFacts};

/// The class a DataVolume's claim names, before any default.
fn named_class(data_volume: &DataVolume, claim: Option<&PersistentVolumeClaim>) -> Option<String> {
    claim
        .and_then(|c| c.spec.as_ref()?.storage_class_name.clone())
        .or_else(|| data_volume.spec.pvc.as_ref()?.storage_class_name.clone())
        .or_else(|| data_volume.spec.storage.as_ref()?.storage_class_name.clone())
        .filter(|name| !name.is_empty())
}

fn candidate(class: &StorageClass) -> ClassCandidate {
    ClassCandidate {
        name: class.metadata.name.clone().unwrap_or_default(),
        annotations: class.metadata.annotations.clone().unwrap_or_default(),
        created: class.metadata.creation_timestamp.clone(),
    }
}

/// The filesystem overhead CDIConfig's status gives `class`.
fn overhead(config: Option<&CDIConfig>, class: &str) -> String {
    let set = config
        .and_then(|c| c.status.as_ref())
        .and_then(|s| s.filesystem_overhead.as_ref());
    set.and_then(|o| o.storage_class.get(class).cloned())
        .or_else(|| set.and_then(|o| o.global.clone()))
        .unwrap_or_else(|| DEFAULT_FILESYSTEM_OVERHEAD.to_owned())
}

/// The chosen class with its profile (as the storage-profile controller derives it) and
/// overhead, and whether it binds on first consumer.
async fn chosen_class<A: CdiApi>(
    api: &A,
    data_volume: &DataVolume,
    claim: Option<&PersistentVolumeClaim>,
    config: Option<&CDIConfig>,
) -> Result<Option<(ChosenClass, bool)>, ApiError> {
    let classes = api.storage_classes().await?;
    let candidates: Vec<ClassCandidate> = classes.iter().map(candidate).collect();
    let Some(name) = named_class(data_volume, claim)
        .or_else(|| claim_spec::default_class(&candidates, true).map(|c| c.name.clone()))
    else {
        return Ok(None);
    };
    let Some(class) = classes
        .iter()
        .find(|c| c.metadata.name.as_deref() == Some(name.as_str()))
    else {
        return Ok(Some((
            ChosenClass {
                filesystem_overhead: overhead(config, &name),
                name,
                profile: None,
            },
            false,
        )));
    };
    let volumes = api
        .persistent_volumes()
        .await?
        .into_iter()
        .filter_map(|pv| pv.spec)
        .filter(|spec| spec.storage_class_name.as_deref() == Some(name.as_str()))
        .map(|spec| (spec.access_modes.unwrap_or_default(), spec.volume_mode))
        .collect();
    let facts = ClassFacts {
        name: name.clone(),
        provisioner: class.provisioner.clone(),
        parameters: class.parameters.clone().unwrap_or_default(),
        annotations: class.metadata.annotations.clone().unwrap_or_default(),
        volumes,
    };
    let spec = api.storage_profile(&name).await?.map(|p| p.spec).unwrap_or_default();
    let profile = storage_profile::profile_status(&facts, &spec).ok();
    let wait_for_first_consumer = class.volume_binding_mode.as_deref() == Some("WaitForFirstConsumer");
    Ok(Some((
        ChosenClass {
            filesystem_overhead: overhead(config, &name),
            name,
            profile,
        },
        wait_for_first_consumer,
    )))
}

/// The settings, completed from CDIConfig's status.
fn settings_with(settings: &ImporterSettings, config: Option<&CDIConfig>) -> ImporterSettings {
    let mut settings = settings.clone();
    if let Some(status) = config.and_then(|c| c.status.as_ref()) {
        if status.scratch_space_storage_class.is_some() {
            settings.scratch_class.clone_from(&status.scratch_space_storage_class);
        }
        if let Some(preallocation) = status.preallocation {
            settings.preallocation = preallocation;
        }
        if status.default_pod_resource_requirements.is_some() {
            settings.resources.clone_from(&status.default_pod_resource_requirements);
        }
    }
    settings
}

/// One pass over `data_volume`.
///
/// # Errors
/// The first failing read or write.
pub async fn reconcile<A: CdiApi>(
    api: &A,
    data_volume: &DataVolume,
    settings: &ImporterSettings,
    now: &Time,
) -> Result<(), ApiError> {
    let namespace = data_volume.metadata.namespace.clone().unwrap_or_default();
    let name = data_volume.metadata.name.clone().unwrap_or_default();
    let claim = api.claim(&namespace, &name).await?;
    let pod = api.pod(&namespace, &importer_pod::pod_name(&name)).await?;
    let scratch = api.claim(&namespace, &import_plan::scratch_name(&name)).await?;
    let config = api.cdi_config().await?;
    let class = chosen_class(api, data_volume, claim.as_ref(), config.as_ref()).await?;
    let settings = settings_with(settings, config.as_ref());
    let facts = ImportFacts {
        data_volume,
        claim: claim.as_ref(),
        pod: pod.as_ref(),
        scratch_claim: scratch.as_ref(),
        class: class.as_ref().map(|(c, _)| c),
        wait_for_first_consumer: class.as_ref().is_some_and(|(_, wffc)| *wffc),
        settings: &settings,
    };
    let steps = import_plan::plan(&facts, now);
    let claim_meta = claim.as_ref().map(|c| c.metadata.clone()).unwrap_or_default();
    for step in steps {
        match step {
            Step::CreateClaim(claim) | Step::CreateScratchClaim(claim) => api.create_claim(&claim).await?,
            Step::AnnotateClaim(annotations) => annotate(api, &namespace, &name, &annotations).await?,
            Step::DeletePod(pod) => api.delete_pod(&namespace, &pod).await?,
            Step::CreatePod(pod) => api.create_pod(&pod).await?,
            Step::ClaimEvent(event) => {
                let subject = EventSubject {
                    api_version: "v1",
                    kind: "PersistentVolumeClaim",
                    meta: &claim_meta,
                };
                api.record_event(subject, event.event_type, event.reason, &event.message)
                    .await?;
            }
            Step::WriteStatus(status) => api.write_status(&namespace, &name, &status).await?,
            Step::Event(event) => {
                let subject = EventSubject {
                    api_version: "cdi.kubevirt.io/v1beta1",
                    kind: "DataVolume",
                    meta: &data_volume.metadata,
                };
                api.record_event(subject, event.event_type, event.reason, &event.message)
                    .await?;
            }
        }
    }
    Ok(())
}

async fn annotate<A: CdiApi>(
    api: &A,
    namespace: &str,
    name: &str,
    annotations: &BTreeMap<String, String>,
) -> Result<(), ApiError> {
    api.annotate_claim(namespace, name, annotations).await
}

#[cfg(test)]
mod tests;
