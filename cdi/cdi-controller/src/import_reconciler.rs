//! The import controller's pass over one DataVolume: observe through [`CdiApi`], plan with
//! [`import_plan::plan`], apply the steps in order. The first failing write ends the pass (the
//! next pass observes again and goes on from there).

use cdi_api::cdi_config::DEFAULT_FILESYSTEM_OVERHEAD;
use cdi_api::data_source;
use cdi_api::{CDIConfig, DataVolume, DataVolumePhase};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::cdi_pki::ServingCertificates;
use crate::claim_spec::{self, ChosenClass, ClassCandidate};
use crate::cluster_api::{ApiError, CdiApi, EventSubject};
use crate::import_plan::{
    self, ImportFacts, ImporterSettings, PopulatorFacts, SourceRefProblem, Step, Transfer, populator,
};
use crate::import_progress::{self, ImporterMetrics};
use crate::importer_pod;
use crate::storage_profile::{self, ClassFacts};
use crate::upload_server::{self, UploadServer};

/// The class a DataVolume's claim names: `Some("")` is no class at all (a claim for a static
/// volume), `None` leaves the choice to the default class.
fn named_class(data_volume: &DataVolume, claim: Option<&PersistentVolumeClaim>) -> Option<String> {
    match claim {
        Some(claim) => claim.spec.as_ref().and_then(|s| s.storage_class_name.clone()),
        None => data_volume
            .spec
            .pvc
            .as_ref()
            .and_then(|p| p.storage_class_name.clone())
            .or_else(|| data_volume.spec.storage.as_ref()?.storage_class_name.clone()),
    }
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
/// overhead, whether it binds on first consumer, and its provisioner (when the class is there).
async fn chosen_class<A: CdiApi>(
    api: &A,
    data_volume: &DataVolume,
    claim: Option<&PersistentVolumeClaim>,
    config: Option<&CDIConfig>,
) -> Result<Option<(ChosenClass, bool, Option<String>)>, ApiError> {
    let classes = api.storage_classes().await?;
    let candidates: Vec<ClassCandidate> = classes.iter().map(candidate).collect();
    let Some(name) = named_class(data_volume, claim)
        .or_else(|| claim_spec::default_class(&candidates, true).map(|c| c.name.clone()))
        .filter(|name| !name.is_empty())
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
            None,
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
        Some(class.provisioner.clone()),
    )))
}

/// The settings, completed from CDIConfig's status.
fn settings_with(settings: &ImporterSettings, config: Option<&CDIConfig>) -> ImporterSettings {
    let mut settings = settings.clone();
    if let Some(config) = config {
        settings
            .insecure_registries
            .clone_from(&config.spec.insecure_registries);
    }
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
        settings.image_pull_secrets.clone_from(&status.image_pull_secrets);
        settings.import_proxy = status.import_proxy.as_ref().is_some_and(|proxy| {
            [
                &proxy.http_proxy,
                &proxy.https_proxy,
                &proxy.no_proxy,
                &proxy.trusted_ca_proxy,
            ]
            .iter()
            .any(|v| v.as_deref().is_some_and(|v| !v.is_empty()))
        });
    }
    settings
}

/// Whether a DataVolume needs another look without an event (it waits on something not
/// watched: a class, a profile, a scratch claim going away), or rests until it changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// Look again in a while.
    LookAgain,
    /// The importer runs: look again soon for its progress.
    Soon,
    /// Done or failed for good: wait for a change.
    Rest,
}

/// One pass over the DataVolume `namespace/name`, read afresh (the controller's cache may not
/// have this controller's last status write yet).
///
/// # Errors
/// The first failing read or write; events that cannot be recorded are logged, not errors.
pub async fn reconcile<A: CdiApi, M: ImporterMetrics, C: ServingCertificates>(
    api: &A,
    metrics: &M,
    certificates: &C,
    namespace: &str,
    name: &str,
    settings: &ImporterSettings,
    now: &Time,
) -> Result<Next, ApiError> {
    let Some(stored) = api.data_volume(namespace, name).await? else {
        return Ok(Next::Rest);
    };
    let claim = api.claim(namespace, name).await?;
    let (data_volume, source_ref) = resolve_source_ref(api, stored, claim.as_ref()).await?;
    let data_volume = &data_volume;
    let transfer = import_plan::transfer(data_volume);
    let config = api.cdi_config().await?;
    let class = chosen_class(api, data_volume, claim.as_ref(), config.as_ref()).await?;
    let populator = Box::pin(observe_populator(
        api,
        data_volume,
        claim.as_ref(),
        transfer.as_ref(),
        class.as_ref(),
    ))
    .await?;
    // The claim the pod fills: the prime claim when a populator fills the DataVolume's.
    let filled = populator.prime_name.as_deref().unwrap_or(name);
    let pod_name = transfer.as_ref().map_or_else(
        || importer_pod::pod_name(filled),
        |transfer| import_plan::pod_name(transfer, filled),
    );
    let pod = api.pod(namespace, &pod_name).await?;
    let scratch = api.claim(namespace, &import_plan::scratch_name(filled)).await?;
    let settings = settings_with(settings, config.as_ref());
    let importing = data_volume
        .status
        .as_ref()
        .is_some_and(|s| s.phase == DataVolumePhase::ImportInProgress);
    let address = pod
        .as_ref()
        .and_then(import_progress::pod_address)
        .filter(|_| importing);
    let progress = progress(metrics, address, data_volume.metadata.uid.as_deref()).await;
    let clone_source = match &transfer {
        Some(Transfer::Clone {
            namespace: source_namespace,
            name: source,
        }) => Some(
            // Boxed, as the steps below: a pass's future stays small.
            Box::pin(clone::observe(
                api,
                data_volume,
                claim.as_ref(),
                (source_namespace, source),
                &settings,
                now,
            ))
            .await?,
        ),
        _ => None,
    };
    let facts = ImportFacts {
        data_volume,
        claim: claim.as_ref(),
        pod: pod.as_ref(),
        scratch_claim: scratch.as_ref(),
        class: class.as_ref().map(|(c, ..)| c),
        wait_for_first_consumer: class.as_ref().is_some_and(|(_, wffc, _)| *wffc),
        settings: &settings,
        progress,
        clone: clone_source.as_ref().map(clone::SourceView::facts),
        source_ref: source_ref.as_ref(),
        populator: PopulatorFacts {
            csi_class: populator.csi_class,
            in_tree_class: populator.in_tree_class,
            prime: populator.prime.as_deref(),
            prime_volume: populator.prime_volume.as_deref(),
            source_object: populator.source_object,
        },
    };
    let steps = import_plan::plan(&facts, now);
    let phase = Box::pin(apply(api, certificates, data_volume, claim.as_ref(), steps)).await?;
    Ok(match phase {
        DataVolumePhase::Succeeded | DataVolumePhase::Failed => Next::Rest,
        // The progress is read again soon (upstream's 2 s) while the importer runs.
        _ if address.is_some() => Next::Soon,
        _ => Next::LookAgain,
    })
}

/// The running importer's progress, in percent, read from its metrics at `address` under
/// `owner_uid` (the DataVolume's, or a populated claim's).
async fn progress<M: ImporterMetrics>(metrics: &M, address: Option<&str>, owner_uid: Option<&str>) -> Option<f64> {
    match (address, owner_uid) {
        (Some(address), Some(uid)) => metrics
            .scrape(address)
            .await
            .and_then(|page| import_progress::parse(&page, uid)),
        _ => None,
    }
}

/// What a pass reads for the import populator's flow.
#[derive(Debug, Default)]
struct PopulatorView {
    csi_class: bool,
    in_tree_class: bool,
    prime_name: Option<String>,
    prime: Option<Box<PersistentVolumeClaim>>,
    prime_volume: Option<Box<PersistentVolume>>,
    source_object: bool,
}

/// Reads what the populator's flow needs: before an import's claim is made, whether its class's
/// provisioner has a CSIDriver object; for a claim the populator fills, its prime claim, the
/// prime's volume and the DataVolume's VolumeImportSource or VolumeUploadSource.
async fn observe_populator<A: CdiApi>(
    api: &A,
    data_volume: &DataVolume,
    claim: Option<&PersistentVolumeClaim>,
    transfer: Option<&Transfer>,
    class: Option<&(ChosenClass, bool, Option<String>)>,
) -> Result<PopulatorView, ApiError> {
    let namespace = data_volume.metadata.namespace.as_deref().unwrap_or_default();
    let Some(claim) = claim else {
        let provisioner = class.and_then(|(.., provisioner)| provisioner.as_deref());
        let csi_class = match (transfer, provisioner) {
            (Some(Transfer::Import(_) | Transfer::Upload), Some(provisioner)) => {
                api.csi_driver_exists(provisioner).await?
            }
            _ => false,
        };
        return Ok(PopulatorView {
            csi_class,
            in_tree_class: provisioner.is_some_and(|p| p.starts_with("kubernetes.io/")),
            ..PopulatorView::default()
        });
    };
    let Some(kind) = populator::populated_by(claim) else {
        return Ok(PopulatorView::default());
    };
    let prime_name = populator::prime_name(claim.metadata.uid.as_deref().unwrap_or_default());
    let prime = api.claim(namespace, &prime_name).await?.map(Box::new);
    let volume_name = prime
        .as_ref()
        .and_then(|p| p.spec.as_ref())
        .and_then(|s| s.volume_name.clone())
        .filter(|v| !v.is_empty());
    let prime_volume = match volume_name {
        Some(volume) => api.persistent_volume(&volume).await?.map(Box::new),
        None => None,
    };
    let source_object = api
        .population_source_exists(kind, namespace, &kind.source_name(data_volume))
        .await?;
    Ok(PopulatorView {
        csi_class: false,
        in_tree_class: false,
        prime_name: Some(prime_name),
        prime,
        prime_volume,
        source_object,
    })
}

/// A DataVolume with a `sourceRef` as it resolves (its DataSource's claim as its `source`, as
/// upstream's clone controller reads it), or why it does not. Once the DataVolume's claim is made
/// for a clone, its source is the one the claim names: a DataSource changed or deleted later does
/// not touch a clone under way or done.
async fn resolve_source_ref<A: CdiApi>(
    api: &A,
    data_volume: DataVolume,
    claim: Option<&PersistentVolumeClaim>,
) -> Result<(DataVolume, Option<SourceRefProblem>), ApiError> {
    let Some(reference) = &data_volume.spec.source_ref else {
        return Ok((data_volume, None));
    };
    if data_volume.spec.source.is_some() {
        let both = "Data volume should have either Source or SourceRef, or be externally populated".to_owned();
        return Ok((data_volume, Some(SourceRefProblem::Unsupported(both))));
    }
    let cloned_from = claim
        .and_then(|c| c.metadata.annotations.as_ref())
        .and_then(|a| a.get(cdi_api::clone::CLONE_REQUEST))
        .and_then(|source| source.split_once('/'));
    if let Some((source_namespace, source)) = cloned_from {
        let resolved = cdi_api::DataVolumeSource {
            pvc: Some(cdi_api::data_volume::NamespacedName {
                namespace: source_namespace.to_owned(),
                name: source.to_owned(),
            }),
            ..cdi_api::DataVolumeSource::default()
        };
        return Ok((import_plan::with_source(&data_volume, resolved), None));
    }
    let namespace = data_volume.metadata.namespace.as_deref().unwrap_or_default();
    let (source_namespace, source) = match data_source::source_ref_target(reference, namespace) {
        Ok(target) => target,
        Err(e) => return Ok((data_volume, Some(SourceRefProblem::Unsupported(e.to_string())))),
    };
    let found = api.data_source(&source_namespace, &source).await?;
    Ok(
        match data_source::resolved_source(&source_namespace, &source, found.as_ref()) {
            Ok(resolved) => (import_plan::with_source(&data_volume, resolved), None),
            Err(e) => (data_volume, Some(SourceRefProblem::Waiting(e.to_string()))),
        },
    )
}

/// Applies a pass's steps in order; gives the phase the DataVolume is left in.
async fn apply<A: CdiApi, C: ServingCertificates>(
    api: &A,
    certificates: &C,
    data_volume: &DataVolume,
    claim: Option<&PersistentVolumeClaim>,
    steps: Vec<Step>,
) -> Result<DataVolumePhase, ApiError> {
    let namespace = data_volume.metadata.namespace.as_deref().unwrap_or_default();
    let name = data_volume.metadata.name.as_deref().unwrap_or_default();
    let mut phase = data_volume.status.as_ref().map(|s| s.phase).unwrap_or_default();
    let claim_meta = claim.map(|c| c.metadata.clone()).unwrap_or_default();
    for step in steps {
        match step {
            Step::CreateClaim(claim) | Step::CreateScratchClaim(claim) => api.create_claim(&claim).await?,
            Step::AnnotateClaim(annotations) => api.annotate_claim(namespace, name, &annotations).await?,
            Step::LabelClaim(labels) => api.label_claim(namespace, name, &labels).await?,
            Step::AnnotateNamedClaim(claim, annotations) => api.annotate_claim(namespace, &claim, &annotations).await?,
            Step::LabelNamedClaim(claim, labels) => api.label_claim(namespace, &claim, &labels).await?,
            Step::DeleteNamedClaim(claim) => api.delete_claim(namespace, &claim).await?,
            Step::CreatePopulationSource(source) => api.create_population_source(&source).await?,
            Step::DeletePopulationSource(kind, source) => {
                api.delete_population_source(kind, namespace, &source).await?;
            }
            Step::RebindVolume(volume) => api.replace_persistent_volume(&volume).await?,
            Step::DeletePod(pod) => api.delete_pod(namespace, &pod).await?,
            Step::CreatePod(pod) => api.create_pod(&pod).await?,
            Step::UngatePod(pod) => api.ungate_pod(namespace, &pod, importer_pod::SCRATCH_GATE).await?,
            Step::CreateUploadServer(server) => create_upload_server(api, certificates, &server).await?,
            Step::DeleteService(service) => api.delete_service(namespace, &service).await?,
            Step::DeleteSecret(secret) => api.delete_secret(namespace, &secret).await?,
            Step::CreateCloneSource(args) => clone::create_source(api, certificates, &args).await?,
            Step::GiveCloneSourceSecret {
                namespace: source_namespace,
                pod,
                client_name,
            } => clone::give_secret(api, certificates, &source_namespace, &pod, &client_name).await?,
            Step::DeleteCloneSource {
                namespace: source_namespace,
                name: pod,
            } => clone::delete_source(api, &source_namespace, &pod, (namespace, name)).await?,
            Step::ClaimEvent(event) => {
                let subject = EventSubject {
                    api_version: "v1",
                    kind: "PersistentVolumeClaim",
                    meta: &claim_meta,
                };
                record(api, subject, event.event_type, event.reason, &event.message).await;
            }
            Step::WriteStatus(status) => {
                api.write_status(namespace, name, &status).await?;
                phase = status.phase;
            }
            Step::Event(event) => {
                let subject = EventSubject {
                    api_version: "cdi.kubevirt.io/v1beta1",
                    kind: "DataVolume",
                    meta: &data_volume.metadata,
                };
                record(api, subject, event.event_type, event.reason, &event.message).await;
            }
        }
    }
    Ok(phase)
}

/// Creates an upload server: its Service, a certificate for the Service's names in its Secret
/// (replacing an earlier pod's), then its pod.
async fn create_upload_server<A: CdiApi, C: ServingCertificates>(
    api: &A,
    certificates: &C,
    server: &UploadServer,
) -> Result<(), ApiError> {
    api.create_service(&server.service).await?;
    let issued = certificates
        .issue(&server.dns_names)
        .map_err(|e| ApiError::Certificate {
            service: server.service.metadata.name.clone().unwrap_or_default(),
            message: e.to_string(),
        })?;
    let secret = upload_server::certificate_secret(&server.pod, &issued.cert, &issued.key, &issued.client_ca);
    api.put_secret(&secret).await?;
    api.create_pod(&server.pod).await
}

/// One pass over the claim `namespace/name` of CDI's (the controller's second loop, keyed by
/// claims, as upstream's import controller is): a claim on its way out, whose DataVolume may be
/// gone already, gets its importer pod removed, since the claim waits for every pod using it.
///
/// # Errors
/// The first failing read or write.
pub async fn release_claim<A: CdiApi>(api: &A, namespace: &str, name: &str) -> Result<(), ApiError> {
    let claim = api.claim(namespace, name).await?;
    if claim.as_ref().is_none_or(|c| c.metadata.deletion_timestamp.is_none()) {
        return Ok(());
    }
    let uploading = claim
        .as_ref()
        .and_then(|c| c.metadata.annotations.as_ref())
        .is_some_and(|a| {
            a.contains_key(crate::claim_annotations::ann::UPLOAD_REQUEST)
                || a.contains_key(cdi_api::clone::CLONE_REQUEST)
        });
    let pod_name = if uploading {
        cdi_api::upload::pod_name(name)
    } else {
        importer_pod::pod_name(name)
    };
    let pod = api.pod(namespace, &pod_name).await?;
    for step in import_plan::orphan_steps(claim.as_ref(), pod.as_ref()) {
        match step {
            Step::DeletePod(pod) => api.delete_pod(namespace, &pod).await?,
            Step::DeleteCloneSource {
                namespace: source_namespace,
                name: pod,
            } => clone::delete_source(api, &source_namespace, &pod, (namespace, name)).await?,
            _ => {}
        }
    }
    Ok(())
}

/// Records an event; one that cannot be recorded is logged and the pass goes on.
async fn record<A: CdiApi>(api: &A, subject: EventSubject<'_>, event_type: &'static str, reason: &str, message: &str) {
    if let Err(error) = api.record_event(subject, event_type, reason, message).await {
        tracing::warn!(%error, reason, "an event could not be recorded");
    }
}

pub mod bare_claim;
mod clone;

#[cfg(test)]
mod bare_claim_tests;
#[cfg(test)]
mod clone_tests;
#[cfg(test)]
mod populator_tests;
#[cfg(test)]
mod tests;
