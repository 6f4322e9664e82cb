//! The migration target pod: the VMI's launcher pod rendered again, labelled with the migration,
//! kept off every node where a launcher pod of the VMI runs (upstream's required pod
//! anti-affinity on `kubevirt.io/created-by` per hostname), and with the migration's added node
//! selector under the VMI's own.

use k8s_openapi::api::core::v1::{Affinity, Pod, PodAffinityTerm, PodAntiAffinity};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kubevirt_api::v1::{VirtualMachineInstance, VirtualMachineInstanceMigration};
use kubevirt_api::well_known::{annotations, labels};

use super::{PodConfig, RenderError, render_launcher_pod};

/// The topology key that keeps the target off the source's node.
pub const HOSTNAME_TOPOLOGY: &str = "kubernetes.io/hostname";

/// Renders the target pod for `migration` of `vmi`.
///
/// # Errors
/// When the VMI cannot be rendered, or the migration has no UID or name.
pub fn render_target_pod(
    vmi: &VirtualMachineInstance,
    migration: &VirtualMachineInstanceMigration,
    config: &PodConfig,
    claims: &crate::claims::ClaimModes,
) -> Result<Pod, RenderError> {
    let migration_uid = migration
        .metadata
        .uid
        .clone()
        .ok_or(RenderError::Identity("migration uid"))?;
    let migration_name = migration
        .metadata
        .name
        .clone()
        .ok_or(RenderError::Identity("migration name"))?;
    let vmi_uid = vmi.metadata.uid.clone().ok_or(RenderError::Identity("uid"))?;
    let mut pod = render_launcher_pod(vmi, config, claims)?;
    pod.metadata
        .labels
        .get_or_insert_default()
        .insert(labels::MIGRATION_JOB_UID.to_owned(), migration_uid);
    pod.metadata
        .annotations
        .get_or_insert_default()
        .insert(annotations::MIGRATION_JOB_NAME.to_owned(), migration_name);
    let spec = pod.spec.get_or_insert_default();
    if let Some(added) = &migration.spec.added_node_selector {
        let selector = spec.node_selector.get_or_insert_default();
        for (key, value) in added {
            // The VMI's own selector wins a collision: the migration can only narrow the choice.
            selector.entry(key.clone()).or_insert_with(|| value.clone());
        }
    }
    let away_from_source = PodAffinityTerm {
        label_selector: Some(LabelSelector {
            match_labels: Some([(labels::CREATED_BY.to_owned(), vmi_uid)].into()),
            ..LabelSelector::default()
        }),
        topology_key: HOSTNAME_TOPOLOGY.to_owned(),
        ..PodAffinityTerm::default()
    };
    spec.affinity
        .get_or_insert_with(Affinity::default)
        .pod_anti_affinity
        .get_or_insert_with(PodAntiAffinity::default)
        .required_during_scheduling_ignored_during_execution
        .get_or_insert_default()
        .push(away_from_source);
    Ok(pod)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vmi() -> VirtualMachineInstance {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
            "metadata": {"name": "vm1", "namespace": "prod", "uid": "vmi-uid"},
            "spec": {
                "nodeSelector": {"zone": "a"},
                "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "kubernetes.io/hostname"}
                ]}},
                "domain": {"devices": {}, "resources": {"requests": {"memory": "128Mi"}}}
            },
            "status": {"phase": "Running", "nodeName": "node-a", "runtimeUser": 107}
        }))
        .expect("vmi")
    }

    fn migration() -> VirtualMachineInstanceMigration {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstanceMigration",
            "metadata": {"name": "mig", "namespace": "prod", "uid": "mig-uid"},
            "spec": {"vmiName": "vm1", "addedNodeSelector": {"zone": "b", "disk": "ssd"}}
        }))
        .expect("migration")
    }

    #[test]
    fn the_target_is_the_launcher_pod_labelled_and_kept_off_the_source_node() {
        let pod = render_target_pod(
            &vmi(),
            &migration(),
            &PodConfig::new("image"),
            &crate::claims::ClaimModes::default(),
        )
        .expect("pod");
        let labels = pod.metadata.labels.clone().unwrap_or_default();
        assert_eq!(
            labels.get("kubevirt.io/migrationJobUID").map(String::as_str),
            Some("mig-uid")
        );
        assert_eq!(
            labels.get("kubevirt.io/created-by").map(String::as_str),
            Some("vmi-uid")
        );
        assert_eq!(labels.get("kubevirt.io").map(String::as_str), Some("virt-launcher"));
        let annotations = pod.metadata.annotations.clone().unwrap_or_default();
        assert_eq!(
            annotations.get("kubevirt.io/migrationJobName").map(String::as_str),
            Some("mig")
        );
        let spec = pod.spec.expect("spec");
        let selector = spec.node_selector.expect("selector");
        assert_eq!(
            selector.get("zone").map(String::as_str),
            Some("a"),
            "the VMI's own wins"
        );
        assert_eq!(selector.get("disk").map(String::as_str), Some("ssd"));
        let terms = spec
            .affinity
            .and_then(|a| a.pod_anti_affinity)
            .and_then(|p| p.required_during_scheduling_ignored_during_execution)
            .expect("anti-affinity");
        assert_eq!(terms.len(), 2, "the VMI's own term stays");
        let ours = &terms[1];
        assert_eq!(ours.topology_key, "kubernetes.io/hostname");
        assert_eq!(
            ours.label_selector.as_ref().and_then(|s| s.match_labels.clone()),
            Some([("kubevirt.io/created-by".to_owned(), "vmi-uid".to_owned())].into())
        );
    }

    #[test]
    fn a_migration_without_identity_is_refused() {
        let mut nameless = migration();
        nameless.metadata.uid = None;
        assert!(
            render_target_pod(
                &vmi(),
                &nameless,
                &PodConfig::new("image"),
                &crate::claims::ClaimModes::default()
            )
            .is_err()
        );
    }
}
