//! The fake's evictions and `KubeVirt` status patches (the workload updater's writes).

use kube::runtime::watcher::Event;
use kubevirt_api::v1::KubeVirt;

use super::{State, Write, mark_deleting};
use crate::cluster_api::ApiError;

/// Evicts a pod: it is deleted gracefully, as an eviction that no budget blocks is; one already
/// gone counts as evicted, as the real adapter treats it.
pub(super) fn evict_pod(state: &mut State, namespace: &str, name: &str) -> Result<(), ApiError> {
    let key = format!("{namespace}/{name}");
    state.log(Write::EvictPod(key.clone()));
    match mark_deleting(&mut state.pods, &mut state.version, &key) {
        Ok(pod) => {
            state.pod_changed(&Event::Apply(pod));
            Ok(())
        }
        Err(ApiError::NotFound(_)) => Ok(()),
        Err(error) => Err(error),
    }
}

/// Merges `status` into the stored `KubeVirt` resource of the same name and tells its watchers.
pub(super) fn patch_status(state: &mut State, kubevirt: &KubeVirt, status: &serde_json::Value) -> Result<(), ApiError> {
    state.log(Write::KubeVirtStatus(status.clone()));
    let stored = state
        .kubevirts
        .iter_mut()
        .find(|k| k.metadata.name == kubevirt.metadata.name && k.metadata.namespace == kubevirt.metadata.namespace)
        .ok_or_else(|| ApiError::NotFound(format!("KubeVirt {:?}", kubevirt.metadata.name)))?;
    let mut value = serde_json::to_value(&*stored).map_err(|e| ApiError::Precondition(e.to_string()))?;
    merge(&mut value["status"], status);
    *stored = serde_json::from_value(value).map_err(|e| ApiError::Precondition(e.to_string()))?;
    let changed = stored.clone();
    state
        .kubevirt_watchers
        .retain(|w| w.send(Event::Apply(changed.clone())).is_ok());
    Ok(())
}

/// A JSON merge patch (RFC 7386): objects merge key by key, `null` removes, anything else
/// replaces.
fn merge(target: &mut serde_json::Value, patch: &serde_json::Value) {
    let serde_json::Value::Object(patch) = patch else {
        patch.clone_into(target);
        return;
    };
    if !target.is_object() {
        *target = serde_json::Value::Object(serde_json::Map::new());
    }
    if let serde_json::Value::Object(target) = target {
        for (key, value) in patch {
            if value.is_null() {
                target.remove(key);
            } else {
                merge(target.entry(key.clone()).or_insert(serde_json::Value::Null), value);
            }
        }
    }
}
