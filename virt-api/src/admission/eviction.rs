//! The pod-eviction webhook (`virt-launcher-eviction-interceptor.kubevirt.io`, on
//! `pods/eviction`), upstream's rules and messages. An eviction of a running launcher pod whose
//! VMI's eviction strategy asks for a migration is refused with 429, so `kubectl drain` retries,
//! after the VMI is marked with `status.evacuationNodeName`; virt-controller's evacuation then
//! migrates it. Once the VMI has left the node its old pod ends and is evicted like any other.

use k8s_openapi::api::core::v1::Pod;
use kubevirt_api::migratable::{eviction_strategy, reported_live_migratable};
use kubevirt_api::v1::VirtualMachineInstance;
use kubevirt_api::well_known::{annotations, labels};
use serde::Deserialize;

use super::lookup::{EvictionLookup, MigrationLookup};
use super::review::{AdmissionRequest, AdmissionResponse};
use super::{AdmissionContext, Rejection};

/// The part of a `policy/v1` Eviction the webhook reads.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Eviction {
    #[serde(default)]
    delete_options: Option<DeleteOptions>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct DeleteOptions {
    #[serde(default)]
    dry_run: Vec<String>,
}

/// What the eviction of a launcher pod does to its VMI, decided from the VMI alone.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum EvictionDecision {
    /// The pod may go.
    Allow,
    /// The pod stays, with this message (429).
    Deny(String),
    /// Mark the VMI for evacuation from the pod's node, then refuse the eviction.
    Evacuate,
}

/// What evicting `pod` does to `vmi`, its VMI.
pub(crate) fn decide(pod: &Pod, vmi: &VirtualMachineInstance, ctx: &AdmissionContext) -> EvictionDecision {
    let strategy = eviction_strategy(vmi, ctx.config.eviction_strategy.as_deref());
    let wants_migration = match strategy {
        Some("LiveMigrate") => {
            if !reported_live_migratable(vmi) {
                return EvictionDecision::Deny(format!(
                    "VMI {} is configured with an eviction strategy but is not live-migratable",
                    vmi.metadata.name.as_deref().unwrap_or_default()
                ));
            }
            true
        }
        Some("LiveMigrateIfPossible") => reported_live_migratable(vmi),
        Some("External") => true,
        _ => false,
    };
    if !wants_migration {
        return EvictionDecision::Allow;
    }
    let status = vmi.status.as_ref();
    let qualified = format!(
        "{}/{}",
        vmi.metadata.namespace.as_deref().unwrap_or("default"),
        vmi.metadata.name.as_deref().unwrap_or_default()
    );
    if status
        .and_then(|s| s.evacuation_node_name.as_deref())
        .is_some_and(|n| !n.is_empty())
    {
        return EvictionDecision::Deny(format!("Evacuation in progress: {}", triggered_message(&qualified)));
    }
    let pod_node = pod.spec.as_ref().and_then(|s| s.node_name.as_deref());
    if status.and_then(|s| s.node_name.as_deref()) != pod_node {
        return EvictionDecision::Deny("Eviction request for target Pod".to_owned());
    }
    EvictionDecision::Evacuate
}

/// The message the descheduler and `kubectl drain` users match.
fn triggered_message(qualified: &str) -> String {
    format!("Eviction triggered evacuation of VMI \"{qualified}\"")
}

/// Whether the pod is a launcher that still runs a VMI; its VMI's name when it is.
fn running_launcher_vmi(pod: &Pod) -> Option<&str> {
    let is_launcher = pod
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(labels::APP))
        .is_some_and(|app| app == labels::APP_VIRT_LAUNCHER);
    let finished = pod
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .is_some_and(|phase| phase == "Succeeded" || phase == "Failed");
    if !is_launcher || finished {
        return None;
    }
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(annotations::DOMAIN))
        .map(String::as_str)
}

/// `/launcher-eviction-validate`.
pub(super) async fn validate(
    request: &AdmissionRequest,
    ctx: &AdmissionContext,
    lookup: &(impl EvictionLookup + MigrationLookup),
) -> Result<AdmissionResponse, Rejection> {
    let uid = request.uid.as_str();
    let allow = || Ok(AdmissionResponse::allow(uid));
    if request.sub_resource.as_deref() != Some("eviction") {
        return allow();
    }
    let namespace = request.namespace.clone().unwrap_or_else(|| "default".to_owned());
    let Some(pod_name) = request.name.as_deref() else {
        return allow();
    };
    // A pod that cannot be read is not kept: the eviction goes on as it would without KubeVirt.
    let pod = match lookup.pod(&namespace, pod_name).await {
        Ok(Some(pod)) => pod,
        Ok(None) => return allow(),
        Err(error) => {
            tracing::warn!(%namespace, pod = pod_name, error = %error.0, "eviction allowed: the pod cannot be read");
            return allow();
        }
    };
    let Some(vmi_name) = running_launcher_vmi(&pod) else {
        return allow();
    };
    let vmi = match lookup.migrating_vmi(&namespace, vmi_name).await {
        Ok(Some(vmi)) => vmi,
        Ok(None) => {
            return Ok(AdmissionResponse::too_many_requests(
                uid,
                format!(
                    "kubevirt failed getting the vmi: virtualmachineinstances.kubevirt.io \"{vmi_name}\" not found"
                ),
            ));
        }
        Err(error) => {
            tracing::warn!(%namespace, pod = pod_name, vmi = vmi_name, error = %error.0, "eviction refused: the VMI cannot be read");
            return Ok(AdmissionResponse::too_many_requests(
                uid,
                format!("kubevirt failed getting the vmi: {}", error.0),
            ));
        }
    };
    let decision = decide(&pod, &vmi, ctx);
    // Each eviction of a running launcher pod is logged: a drain that shut a guest down instead
    // of moving it is explained here.
    tracing::info!(%namespace, pod = pod_name, vmi = vmi_name, ?decision, dry_run = ?request.dry_run, "launcher pod eviction");
    match decision {
        EvictionDecision::Allow => allow(),
        EvictionDecision::Deny(message) => Ok(AdmissionResponse::too_many_requests(uid, message)),
        EvictionDecision::Evacuate => {
            let eviction: Eviction = request
                .object
                .as_deref()
                .and_then(|raw| serde_json::from_str(raw.get()).ok())
                .unwrap_or_default();
            let dry_run = request.dry_run == Some(true)
                || eviction
                    .delete_options
                    .is_some_and(|o| o.dry_run.iter().any(|d| d == "All"));
            let node = pod.spec.as_ref().and_then(|s| s.node_name.clone()).unwrap_or_default();
            let message = match lookup.mark_for_evacuation(&namespace, vmi_name, &node, dry_run).await {
                Ok(()) => triggered_message(&format!("{namespace}/{vmi_name}")),
                Err(error) => {
                    tracing::warn!(%namespace, vmi = vmi_name, error = %error.0, "cannot mark the VMI for evacuation");
                    format!("kubevirt failed marking the vmi for eviction: {}", error.0)
                }
            };
            Ok(AdmissionResponse::too_many_requests(uid, message))
        }
    }
}

#[cfg(test)]
mod tests;
