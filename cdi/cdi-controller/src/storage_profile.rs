//! A StorageProfile's status from its StorageClass, as upstream CDI's storage-profile controller
//! derives it: the claim property sets (the user's, else the provisioner's known capabilities,
//! else for a class without a provisioner the modes of its volumes), the clone strategy, the
//! DataImportCron source format, and whether the provisioner is recognized. Pure.

use std::collections::BTreeMap;

use cdi_api::data_volume::ConditionState;
use cdi_api::storage_profile::{RECOGNIZED, StorageProfileCondition};
use cdi_api::{StorageProfileSpec, StorageProfileStatus};

use crate::storage_capabilities::{NO_PROVISIONER, capabilities, capabilities_of_volumes, provisioner_key};

/// The StorageClass annotation that names a clone strategy.
pub const CLONE_STRATEGY_ANNOTATION: &str = "cdi.kubevirt.io/clone-strategy";

/// What a profile is derived from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClassFacts {
    /// The class's name.
    pub name: String,
    /// Its provisioner.
    pub provisioner: String,
    /// Its parameters.
    pub parameters: BTreeMap<String, String>,
    /// Its annotations.
    pub annotations: BTreeMap<String, String>,
    /// For a class without a provisioner: the access modes and volume mode of each of its
    /// volumes.
    pub volumes: Vec<(Vec<String>, Option<String>)>,
}

/// A user's claim property set that lacks a part.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("each ClaimPropertySet must provide both volume mode and access modes")]
pub struct IncompletePropertySet;

/// The status the profile of `class` gets, with the user's `spec`. There are no
/// VolumeSnapshotClasses here, so a snapshot strategy falls back to a copy, as upstream's does
/// without one.
///
/// # Errors
/// [`IncompletePropertySet`] when a set of the spec lacks its access modes or volume mode.
pub fn profile_status(
    class: &ClassFacts,
    spec: &StorageProfileSpec,
) -> Result<StorageProfileStatus, IncompletePropertySet> {
    let key = provisioner_key(&class.provisioner, &class.parameters);
    let known = capabilities(&key);
    let claim_property_sets = if spec.claim_property_sets.is_empty() {
        match &known {
            Some(sets) => sets.clone(),
            None if class.provisioner == NO_PROVISIONER => capabilities_of_volumes(&class.volumes),
            None => Vec::new(),
        }
    } else {
        if spec
            .claim_property_sets
            .iter()
            .any(|s| s.access_modes.is_empty() || s.volume_mode.is_none())
        {
            return Err(IncompletePropertySet);
        }
        spec.claim_property_sets.clone()
    };
    let clone_strategy = spec
        .clone_strategy
        .clone()
        .or_else(|| {
            class
                .annotations
                .get(CLONE_STRATEGY_ANNOTATION)
                .map(|v| match v.as_str() {
                    "copy" | "snapshot" | "csi-clone" => v.clone(),
                    _ => String::new(),
                })
        })
        .map_or_else(
            || "copy".to_owned(),
            |s| if s == "snapshot" { "copy".to_owned() } else { s },
        );
    let (status, reason, message) = if known.is_some() {
        ("True", "RecognizedProvisioner", "Provisioner is recognized")
    } else {
        ("False", "UnrecognizedProvisioner", "Provisioner is not recognized")
    };
    Ok(StorageProfileStatus {
        storage_class: Some(class.name.clone()),
        provisioner: Some(class.provisioner.clone()),
        clone_strategy: Some(clone_strategy),
        claim_property_sets,
        data_import_cron_source_format: Some("pvc".to_owned()),
        snapshot_class: None,
        conditions: vec![StorageProfileCondition {
            condition_type: RECOGNIZED.to_owned(),
            state: ConditionState {
                status: status.to_owned(),
                reason: Some(reason.to_owned()),
                message: Some(message.to_owned()),
                ..ConditionState::default()
            },
        }],
    })
}

#[cfg(test)]
mod tests {
    use cdi_api::ClaimPropertySet;

    use super::*;

    fn class(provisioner: &str) -> ClassFacts {
        ClassFacts {
            name: "local".to_owned(),
            provisioner: provisioner.to_owned(),
            ..ClassFacts::default()
        }
    }

    #[test]
    fn a_known_provisioner_is_recognized_with_its_capabilities() {
        let status = profile_status(
            &class("kubevirt.io.hostpath-provisioner"),
            &StorageProfileSpec::default(),
        )
        .expect("status");
        assert_eq!(
            status.claim_property_sets,
            [ClaimPropertySet {
                access_modes: vec!["ReadWriteOnce".to_owned()],
                volume_mode: Some("Filesystem".to_owned())
            }]
        );
        assert_eq!(status.clone_strategy.as_deref(), Some("copy"));
        assert_eq!(status.data_import_cron_source_format.as_deref(), Some("pvc"));
        let recognized = &status.conditions[0];
        assert_eq!(
            (
                recognized.condition_type.as_str(),
                recognized.state.status.as_str(),
                recognized.state.reason.as_deref()
            ),
            ("Recognized", "True", Some("RecognizedProvisioner"))
        );
    }

    #[test]
    fn an_unknown_provisioner_has_no_sets_and_is_not_recognized() {
        let status = profile_status(&class("example.com/x"), &StorageProfileSpec::default()).expect("status");
        assert!(status.claim_property_sets.is_empty());
        assert_eq!(
            status.conditions[0].state.message.as_deref(),
            Some("Provisioner is not recognized")
        );
    }

    #[test]
    fn the_users_sets_win_and_must_be_complete() {
        let mut spec = StorageProfileSpec {
            claim_property_sets: vec![ClaimPropertySet {
                access_modes: vec!["ReadWriteMany".to_owned()],
                volume_mode: Some("Block".to_owned()),
            }],
            ..StorageProfileSpec::default()
        };
        let status = profile_status(&class("kubevirt.io.hostpath-provisioner"), &spec).expect("status");
        assert_eq!(status.claim_property_sets, spec.claim_property_sets);
        spec.claim_property_sets[0].volume_mode = None;
        assert_eq!(
            profile_status(&class("kubevirt.io.hostpath-provisioner"), &spec),
            Err(IncompletePropertySet)
        );
    }

    #[test]
    fn a_class_without_a_provisioner_offers_its_volumes_modes() {
        let mut local = class(NO_PROVISIONER);
        local.volumes = vec![(vec!["ReadWriteOnce".to_owned()], Some("Block".to_owned()))];
        let status = profile_status(&local, &StorageProfileSpec::default()).expect("status");
        assert_eq!(status.claim_property_sets[0].volume_mode.as_deref(), Some("Block"));
        assert_eq!(
            status.conditions[0].state.status, "False",
            "upstream does not recognize it"
        );
    }

    #[test]
    fn the_clone_strategy_comes_from_the_spec_or_the_class_and_snapshots_copy() {
        let mut annotated = class("kubevirt.io.hostpath-provisioner");
        annotated
            .annotations
            .insert(CLONE_STRATEGY_ANNOTATION.to_owned(), "csi-clone".to_owned());
        let status = profile_status(&annotated, &StorageProfileSpec::default()).expect("status");
        assert_eq!(status.clone_strategy.as_deref(), Some("csi-clone"));
        let spec = StorageProfileSpec {
            clone_strategy: Some("snapshot".to_owned()),
            ..StorageProfileSpec::default()
        };
        let status = profile_status(&annotated, &spec).expect("status");
        assert_eq!(status.clone_strategy.as_deref(), Some("copy"), "no snapshot class here");
        annotated
            .annotations
            .insert(CLONE_STRATEGY_ANNOTATION.to_owned(), "fast".to_owned());
        let status = profile_status(&annotated, &StorageProfileSpec::default()).expect("status");
        assert_eq!(
            status.clone_strategy.as_deref(),
            Some(""),
            "upstream keeps an unknown value as empty"
        );
    }
}
