//! A pass's reads and writes for a clone: the source claim, the source pod and the source's other
//! users, the DataVolume's token checked; the source pod made, then its certificate.

use cdi_api::DataVolume;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::cdi_pki::{ClientIssued, ServingCertificates};
use crate::clone_source::{self, CloneSourceArgs};
use crate::cluster_api::{ApiError, CdiApi};
use crate::import_plan::ImporterSettings;
use crate::import_plan::clone::{self as plan, CloneFacts};

/// What a pass read of a clone's source.
pub(super) struct SourceView {
    claim: Option<PersistentVolumeClaim>,
    pod: Option<Pod>,
    pod_without_secret: bool,
    users: Vec<String>,
    authorized: Result<(), String>,
}

impl SourceView {
    pub(super) fn facts(&self) -> CloneFacts<'_> {
        CloneFacts {
            source_claim: self.claim.as_ref(),
            source_pod: self.pod.as_ref(),
            source_pod_without_secret: self.pod_without_secret,
            source_users: &self.users,
            authorized: self.authorized.as_ref().copied().map_err(String::as_str),
        }
    }
}

/// Reads a clone's source claim, its source pod and the source's other users, and checks the
/// DataVolume's token (only until the target claim is made: the claim is the clone's record).
pub(super) async fn observe<A: CdiApi>(
    api: &A,
    data_volume: &DataVolume,
    target: Option<&PersistentVolumeClaim>,
    (source_namespace, source): (&str, &str),
    settings: &ImporterSettings,
    now: &Time,
) -> Result<SourceView, ApiError> {
    let source_claim = api.claim(source_namespace, source).await?;
    let pod_name = target
        .and_then(|t| t.metadata.uid.as_deref())
        .map(cdi_api::clone::source_pod_name);
    let pod = match &pod_name {
        Some(pod_name) => api.pod(source_namespace, pod_name).await?,
        None => None,
    };
    // The Secret is the pod's name; a live pod without it waits for it forever. Looked for only
    // while this clone's own pod may still read it: not once the copy is over or its target goes.
    let pod_without_secret = match (&pod, target) {
        (Some(live), Some(target)) if waits_for_its_secret(live, target) => {
            let name = live.metadata.name.as_deref().unwrap_or_default();
            !api.secret_exists(source_namespace, name).await?
        }
        _ => false,
    };
    let waits_for_source = target.is_some_and(|t| {
        t.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(crate::claim_annotations::ann::POD_READY))
            .is_some_and(|r| r == "true")
    }) && pod.is_none();
    let users = if waits_for_source {
        plan::users_of(
            &api.pods(source_namespace).await?,
            source,
            pod_name.as_deref().unwrap_or_default(),
        )
    } else {
        Vec::new()
    };
    let authorized = if target.is_some() {
        Ok(())
    } else {
        plan::authorize(
            data_volume,
            settings.clone_tokens.as_ref(),
            source_namespace,
            source,
            now.0.as_second(),
        )
    };
    Ok(SourceView {
        claim: source_claim,
        pod,
        pod_without_secret,
        users,
        authorized,
    })
}

/// Whether `pod` is the source pod of `target`, not being deleted nor finished, while the copy
/// goes on: the one that may be waiting for its certificate Secret.
fn waits_for_its_secret(pod: &Pod, target: &PersistentVolumeClaim) -> bool {
    let phase = crate::claim_annotations::settled_phase(pod);
    let finished = phase == "Succeeded" || phase == "Failed";
    let copy_over = target
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(crate::claim_annotations::ann::POD_PHASE))
        .is_some_and(|phase| phase == "Succeeded");
    pod.metadata.deletion_timestamp.is_none()
        && !finished
        && target.metadata.deletion_timestamp.is_none()
        && !copy_over
        && plan::source_pod_of(
            pod,
            target.metadata.namespace.as_deref().unwrap_or_default(),
            target.metadata.name.as_deref().unwrap_or_default(),
        )
}

/// Creates a clone's source pod, then its client certificate in a Secret owned by the pod (the
/// pod waits for the Secret its environment names). Should the Secret not be written, a later
/// pass sees the pod without it and gives it ([`give_secret`]).
pub(super) async fn create_source<A: CdiApi, C: ServingCertificates>(
    api: &A,
    certificates: &C,
    args: &CloneSourceArgs,
) -> Result<(), ApiError> {
    let name = cdi_api::clone::source_pod_name(&args.target_uid);
    let client_name = cdi_api::clone::client_name(
        &args.source_namespace,
        &args.source,
        &args.target_namespace,
        &args.target,
    );
    let issued = issue(certificates, &args.source_namespace, &name, &client_name)?;
    let source = clone_source::render(args, &issued.server_ca);
    api.create_pod(&source.pod).await?;
    write_secret(api, &args.source_namespace, &name, &issued).await
}

/// Writes a client certificate for `client_name` into the Secret of the source pod
/// `namespace/pod`'s name, owned by the pod.
pub(super) async fn give_secret<A: CdiApi, C: ServingCertificates>(
    api: &A,
    certificates: &C,
    namespace: &str,
    pod: &str,
    client_name: &str,
) -> Result<(), ApiError> {
    let issued = issue(certificates, namespace, pod, client_name)?;
    write_secret(api, namespace, pod, &issued).await
}

fn issue<C: ServingCertificates>(
    certificates: &C,
    namespace: &str,
    pod: &str,
    client_name: &str,
) -> Result<ClientIssued, ApiError> {
    certificates
        .issue_client(client_name)
        .map_err(|e| ApiError::Certificate {
            service: format!("{namespace}/{pod}"),
            message: e.to_string(),
        })
}

/// The Secret is owned by the pod, as read back: nothing to write when the pod is gone.
async fn write_secret<A: CdiApi>(api: &A, namespace: &str, pod: &str, issued: &ClientIssued) -> Result<(), ApiError> {
    let Some(live) = api.pod(namespace, pod).await? else {
        return Ok(());
    };
    api.put_secret(&clone_source::certificate_secret(&live, &issued.cert, &issued.key))
        .await
}

/// Deletes the source pod `source_namespace/name` if it is the source pod of the claim
/// `target` (`namespace`, `name`): a pod that is not stays, whatever the claim's annotations say.
pub(super) async fn delete_source<A: CdiApi>(
    api: &A,
    source_namespace: &str,
    name: &str,
    (target_namespace, target): (&str, &str),
) -> Result<(), ApiError> {
    match api.pod(source_namespace, name).await? {
        Some(pod) if plan::source_pod_of(&pod, target_namespace, target) => {
            api.delete_pod(source_namespace, name).await
        }
        Some(_) => {
            tracing::warn!(namespace = source_namespace, pod = name, target = %format!("{target_namespace}/{target}"), "not deleting a pod that is not this claim's clone source");
            Ok(())
        }
        None => Ok(()),
    }
}
