//! Claim rendering, restating upstream's cases: the profile's first set when nothing is given, a
//! matching set for a given mode, the overhead on Filesystem only, the size rules, and the
//! default-class choice.

use cdi_api::ClaimPropertySet;
use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;

fn spec(storage: &serde_json::Value) -> DataVolumeSpec {
    serde_json::from_value(json!({"source": {"blank": {}}, "storage": storage})).expect("spec")
}

fn class(sets: &[(&str, &str)]) -> ChosenClass {
    ChosenClass {
        name: "local".to_owned(),
        profile: Some(StorageProfileStatus {
            claim_property_sets: sets
                .iter()
                .map(|(access, mode)| ClaimPropertySet {
                    access_modes: vec![(*access).to_owned()],
                    volume_mode: Some((*mode).to_owned()),
                })
                .collect(),
            ..StorageProfileStatus::default()
        }),
        filesystem_overhead: "0.06".to_owned(),
    }
}

fn rendered(storage: &serde_json::Value, chosen: Option<&ChosenClass>) -> serde_json::Value {
    serde_json::to_value(render(&spec(storage), chosen, false).expect("rendered")).expect("JSON")
}

#[test]
fn nothing_given_takes_the_profiles_first_set_and_grows_a_filesystem() {
    let local = class(&[("ReadWriteOnce", "Filesystem"), ("ReadWriteOnce", "Block")]);
    assert_eq!(
        rendered(&json!({"resources": {"requests": {"storage": "1Gi"}}}), Some(&local)),
        json!({
            "accessModes": ["ReadWriteOnce"], "volumeMode": "Filesystem", "storageClassName": "local",
            // 1 GiB × 1.06, rounded up to a byte.
            "resources": {"requests": {"storage": "1138166334"}}
        })
    );
}

#[test]
fn a_given_mode_finds_its_set_and_block_is_not_grown() {
    let local = class(&[("ReadWriteOnce", "Filesystem"), ("ReadWriteMany", "Block")]);
    assert_eq!(
        rendered(
            &json!({"volumeMode": "Block", "resources": {"requests": {"storage": "1Gi"}}}),
            Some(&local)
        ),
        json!({"accessModes": ["ReadWriteMany"], "volumeMode": "Block", "storageClassName": "local",
               "resources": {"requests": {"storage": "1Gi"}}})
    );
    assert_eq!(
        rendered(
            &json!({"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1Gi"}}}),
            Some(&local)
        )["volumeMode"],
        "Block",
        "the mode of the first set with a requested access mode"
    );
    assert_eq!(
        rendered(
            &json!({"accessModes": ["ReadOnlyMany"], "resources": {"requests": {"storage": "1Gi"}}}),
            Some(&local)
        )
        .get("volumeMode"),
        None,
        "no set matches: Kubernetes' default"
    );
    assert_eq!(
        rendered(
            &json!({"volumeMode": "FromStorageProfile", "resources": {"requests": {"storage": "1Gi"}}}),
            Some(&local)
        )["volumeMode"],
        "Filesystem",
        "FromStorageProfile asks the profile"
    );
}

#[test]
fn what_cannot_be_rendered_says_why() {
    let local = class(&[("ReadWriteOnce", "Filesystem")]);
    let sized = json!({"resources": {"requests": {"storage": "1Gi"}}});
    let err = |storage: &serde_json::Value, chosen: Option<&ChosenClass>| {
        render(&spec(storage), chosen, false).expect_err("refused").to_string()
    };
    assert_eq!(
        err(&sized, None),
        "PVC spec is missing accessMode and no storageClass to choose profile"
    );
    assert_eq!(
        err(&sized, Some(&class(&[]))),
        "no accessMode specified in StorageProfile local"
    );
    let mut no_profile = local.clone();
    no_profile.profile = None;
    assert_eq!(
        err(&sized, Some(&no_profile)),
        "cannot get StorageProfile: StorageProfile local not found"
    );
    assert_eq!(
        err(
            &json!({"volumeMode": "Block", "resources": {"requests": {"storage": "1Gi"}}}),
            Some(&local)
        ),
        "no matching accessMode specified in StorageProfile local"
    );
    assert_eq!(
        err(&json!({}), Some(&local)),
        "PVC Spec is not valid - missing storage size"
    );
    assert_eq!(
        err(&json!({"resources": {"requests": {"storage": "1Ki"}}}), Some(&local)),
        "PVC Spec is not valid - storage size should be at least 1MiB"
    );
    let archive = render(
        &spec(&json!({"volumeMode": "Block", "resources": {"requests": {"storage": "1Gi"}}})),
        Some(&local),
        true,
    );
    assert_eq!(archive, Err(RenderError::ArchiveOnBlock));
    let neither: DataVolumeSpec = serde_json::from_value(json!({"source": {"blank": {}}})).expect("spec");
    assert_eq!(render(&neither, Some(&local), false), Err(RenderError::NoClaimSpec));
}

#[test]
fn a_pvc_spec_is_taken_as_given_and_a_clone_may_leave_its_size_to_the_source() {
    let given: DataVolumeSpec = serde_json::from_value(json!({
        "source": {"blank": {}},
        "pvc": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    }))
    .expect("spec");
    let claim = render(&given, None, false).expect("as given");
    assert_eq!(Some(claim), given.pvc);
    let clone: DataVolumeSpec = serde_json::from_value(json!({
        "source": {"pvc": {"namespace": "images", "name": "debian"}}, "storage": {}
    }))
    .expect("spec");
    let claim = render(&clone, Some(&class(&[("ReadWriteOnce", "Filesystem")])), false).expect("clone");
    assert_eq!(claim.resources, None);
}

#[test]
fn required_space_rounds_to_a_mib_then_grows() {
    assert_eq!(required_space(1, "0").expect("space"), MIB);
    assert_eq!(required_space(MIB, "0.055").expect("space"), 1_106_248);
    assert_eq!(required_space(MIB, "1").expect("space"), 2 * MIB);
    assert!(required_space(MIB, "1.5").is_err());
    assert!(required_space(MIB, "0.0555").is_err());
    assert!(required_space(MIB, "x").is_err());
}

#[test]
fn the_default_class_is_the_virt_default_then_the_default_newest_first() {
    let at = |s: &str| Some(Time(s.parse().expect("time")));
    let candidate = |name: &str, annotation: Option<&str>, created: &str| ClassCandidate {
        name: name.to_owned(),
        annotations: annotation
            .map(|a| BTreeMap::from([(a.to_owned(), "true".to_owned())]))
            .unwrap_or_default(),
        created: at(created),
    };
    let classes = vec![
        candidate("old-default", Some(DEFAULT_CLASS), "2026-01-01T00:00:00Z"),
        candidate("b-default", Some(DEFAULT_CLASS), "2026-06-01T00:00:00Z"),
        candidate("a-default", Some(DEFAULT_CLASS), "2026-06-01T00:00:00Z"),
        candidate("plain", None, "2026-09-01T00:00:00Z"),
    ];
    assert_eq!(
        default_class(&classes, true).map(|c| c.name.as_str()),
        Some("a-default")
    );
    let mut with_virt = classes.clone();
    with_virt.push(candidate("vms", Some(DEFAULT_VIRT_CLASS), "2025-01-01T00:00:00Z"));
    assert_eq!(default_class(&with_virt, true).map(|c| c.name.as_str()), Some("vms"));
    assert_eq!(
        default_class(&with_virt, false).map(|c| c.name.as_str()),
        Some("a-default"),
        "an archive does not look for the VM default"
    );
    assert_eq!(default_class(&classes[3..], true), None);
}
