//! The import and upload populators' pass over a claim a user made with a `dataSourceRef` to a
//! `VolumeImportSource` or a `VolumeUploadSource` (no DataVolume): observe the claim, its
//! source, its class, its prime claim and the prime's importer or upload server; plan with
//! [`bare_claim::population`] and [`bare_claim::plan`]; apply the steps in order.

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::{Next, apply, chosen_class, record, settings_with};
use crate::cdi_pki::ServingCertificates;
use crate::cluster_api::{ApiError, CdiApi, EventSubject};
use crate::import_plan::bare_claim::{self, ClassSeen, Population};
use crate::import_plan::{self, ImportFacts, ImporterSettings, PopulatorFacts, populator};
use crate::import_progress::{self, ImporterMetrics};
use crate::importer_pod;

/// Whether the claim could be one the populators fill, from what the watch gave
/// ([`bare_claim::candidate`]); a pass reads it afresh.
#[must_use]
pub fn names_population_source(claim: &PersistentVolumeClaim) -> bool {
    bare_claim::candidate(claim)
}

/// What the class the claim names is (`None`: it names none).
async fn class_seen<A: CdiApi>(api: &A, claim: &PersistentVolumeClaim) -> Result<Option<ClassSeen>, ApiError> {
    let class_name = claim.spec.as_ref().and_then(|s| s.storage_class_name.clone());
    let Some(class) = class_name.filter(|n| !n.is_empty()) else {
        return Ok(None);
    };
    Ok(Some(
        api.storage_classes()
            .await?
            .into_iter()
            .find(|c| c.metadata.name.as_deref() == Some(class.as_str()))
            .map_or(ClassSeen::Missing, |c| ClassSeen::Provisioner(c.provisioner)),
    ))
}

/// One pass over the claim `namespace/name`, read afresh.
///
/// # Errors
/// The first failing read or write; events that cannot be recorded are logged, not errors.
pub async fn reconcile<A: CdiApi, M: ImporterMetrics, C: ServingCertificates>(
    api: &A,
    metrics: &M,
    certificates: &C,
    (namespace, name): (&str, &str),
    settings: &ImporterSettings,
    now: &Time,
) -> Result<Next, ApiError> {
    let Some(claim) = api.claim(namespace, name).await? else {
        return Ok(Next::Rest);
    };
    let Some(kind) = populator::populated_by(&claim).filter(|_| bare_claim::candidate(&claim)) else {
        return Ok(Next::Rest);
    };
    let source_name = claim
        .spec
        .as_ref()
        .and_then(|s| s.data_source_ref.as_ref())
        .map(|r| r.name.clone())
        .unwrap_or_default();
    let source = api.population_source(kind, namespace, &source_name).await?;
    let prime_name = populator::prime_name(claim.metadata.uid.as_deref().unwrap_or_default());
    let prime = api.claim(namespace, &prime_name).await?;
    let config = api.cdi_config().await?;
    let settings = settings_with(settings, config.as_ref());
    let class_seen = class_seen(api, &claim).await?;
    let data_volume =
        match bare_claim::population(&claim, source.as_ref(), class_seen.as_ref(), prime.is_some(), &settings) {
            Population::NotOurs => return Ok(Next::Rest),
            Population::Wait(why) => {
                tracing::debug!(namespace, name, why, "the claim's population waits");
                return Ok(Next::LookAgain);
            }
            Population::Refuse(why) => {
                tracing::warn!(namespace, name, why, "the claim cannot be populated");
                let event = bare_claim::refusal(why);
                let subject = EventSubject {
                    api_version: "v1",
                    kind: "PersistentVolumeClaim",
                    meta: &claim.metadata,
                };
                record(api, subject, event.event_type, event.reason, &event.message).await;
                return Ok(Next::Rest);
            }
            Population::Fill(data_volume) => data_volume,
        };
    let class = chosen_class(api, &data_volume, Some(&claim), config.as_ref()).await?;
    let prime_volume = match prime
        .as_ref()
        .and_then(|p| p.spec.as_ref())
        .and_then(|s| s.volume_name.as_deref())
        .filter(|v| !v.is_empty())
    {
        Some(volume) => api.persistent_volume(volume).await?,
        None => None,
    };
    let pod_name = match import_plan::transfer(&data_volume) {
        Some(transfer) => import_plan::pod_name(&transfer, &prime_name),
        None => importer_pod::pod_name(&prime_name),
    };
    let pod = api.pod(namespace, &pod_name).await?;
    let scratch = api.claim(namespace, &import_plan::scratch_name(&prime_name)).await?;
    // An upload's progress is not followed (upstream's neither).
    let address = pod
        .as_ref()
        .and_then(import_progress::pod_address)
        .filter(|_| kind == populator::SourceKind::Import);
    let progress = super::progress(metrics, address, claim.metadata.uid.as_deref()).await;
    let facts = ImportFacts {
        data_volume: &data_volume,
        claim: Some(&claim),
        pod: pod.as_ref(),
        scratch_claim: scratch.as_ref(),
        class: class.as_ref().map(|(c, ..)| c),
        wait_for_first_consumer: class.as_ref().is_some_and(|(_, wffc, _)| *wffc),
        settings: &settings,
        progress,
        clone: None,
        source_ref: None,
        populator: PopulatorFacts {
            csi_class: true,
            in_tree_class: false,
            prime: prime.as_ref(),
            prime_volume: prime_volume.as_ref(),
            source_object: source.is_some(),
        },
    };
    let pass = bare_claim::plan(&facts, now);
    // Nothing to do, and either no prime (it waits for a node to be chosen, a change of the
    // claim) or a bound claim (its prime, kept Lost, is watched): or a pod in the way, said once.
    let idle = pass.steps.is_empty() && (prime.is_none() || bare_claim::filled(&claim));
    let refused = pass.refused;
    Box::pin(apply(api, certificates, &data_volume, Some(&claim), pass.steps)).await?;
    Ok(if idle || refused {
        Next::Rest
    } else if address.is_some() {
        // The progress is read again soon (upstream's 2 s) while the importer runs.
        Next::Soon
    } else {
        Next::LookAgain
    })
}
