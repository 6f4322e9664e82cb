use k8s_openapi::api::core::v1::PersistentVolumeClaimSpec;
use kubevirt_api::v1::{DataVolumeSource, PersistentVolumeClaimSource};

use super::*;

fn claim(name: &str, mode: Option<&str>) -> PersistentVolumeClaim {
    let mut claim = PersistentVolumeClaim::default();
    claim.metadata.name = Some(name.to_owned());
    claim.metadata.namespace = Some("ns".to_owned());
    claim.spec = Some(PersistentVolumeClaimSpec {
        volume_mode: mode.map(str::to_owned),
        ..PersistentVolumeClaimSpec::default()
    });
    claim
}

fn vmi(volumes: Vec<Volume>) -> VirtualMachineInstance {
    let mut vmi = VirtualMachineInstance::default();
    vmi.metadata.namespace = Some("ns".to_owned());
    vmi.spec.volumes = volumes;
    vmi
}

fn pvc_volume(name: &str, claim: &str) -> Volume {
    Volume {
        name: name.to_owned(),
        persistent_volume_claim: Some(PersistentVolumeClaimSource {
            claim_name: claim.to_owned(),
            ..PersistentVolumeClaimSource::default()
        }),
        ..Volume::default()
    }
}

fn dv_volume(name: &str, dv: &str) -> Volume {
    Volume {
        name: name.to_owned(),
        data_volume: Some(DataVolumeSource {
            name: dv.to_owned(),
            ..DataVolumeSource::default()
        }),
        ..Volume::default()
    }
}

#[test]
fn only_block_says_block() {
    assert_eq!(VolumeMode::of(&claim("a", Some("Block"))), VolumeMode::Block);
    assert_eq!(VolumeMode::of(&claim("a", Some("Filesystem"))), VolumeMode::Filesystem);
    assert_eq!(VolumeMode::of(&claim("a", None)), VolumeMode::Filesystem);
}

#[test]
fn a_vmi_gets_its_claims_modes_or_the_first_missing_claim() {
    let store = ClaimStore::default();
    store.on_event(&Event::Apply(claim("disk", Some("Block"))));
    let vmi = vmi(vec![pvc_volume("root", "disk"), dv_volume("data", "imported")]);
    let missing = store.modes_for(&vmi).expect_err("the DataVolume's claim is missing");
    assert_eq!(
        missing.to_string(),
        "PVC ns/imported does not exist, waiting for it to appear"
    );
    assert_eq!(
        store.on_event(&Event::Apply(claim("imported", None))),
        vec!["ns/imported"]
    );
    let modes = store.modes_for(&vmi).expect("both claims are there");
    assert_eq!(modes.get("disk"), Some(VolumeMode::Block));
    assert_eq!(modes.get("imported"), Some(VolumeMode::Filesystem));
}

#[test]
fn a_claim_in_another_namespace_does_not_count() {
    let store = ClaimStore::default();
    let mut elsewhere = claim("disk", None);
    elsewhere.metadata.namespace = Some("other".to_owned());
    store.on_event(&Event::Apply(elsewhere));
    assert!(store.modes_for(&vmi(vec![pvc_volume("root", "disk")])).is_err());
}

#[test]
fn deletions_and_relists_forget_claims_and_say_which() {
    let store = ClaimStore::default();
    store.on_event(&Event::Apply(claim("a", None)));
    store.on_event(&Event::Apply(claim("b", None)));
    assert!(
        store.on_event(&Event::Apply(claim("a", None))).is_empty(),
        "nothing changed"
    );
    assert_eq!(store.on_event(&Event::Apply(claim("a", Some("Block")))), vec!["ns/a"]);
    assert_eq!(store.on_event(&Event::Delete(claim("a", None))), vec!["ns/a"]);
    store.on_event(&Event::Init);
    store.on_event(&Event::InitApply(claim("c", None)));
    assert_eq!(
        store.on_event(&Event::InitDone),
        vec!["ns/b"],
        "b went while the watch was away"
    );
    let only_c = vmi(vec![pvc_volume("x", "c")]);
    assert!(store.modes_for(&only_c).is_ok());
    assert!(store.modes_for(&vmi(vec![pvc_volume("x", "b")])).is_err());
}

fn labelled(name: &str, label: &str, value: &str) -> PersistentVolumeClaim {
    let mut claim = claim(name, None);
    claim.metadata.labels = Some([(label.to_owned(), value.to_owned())].into());
    claim
}

fn found(store: &ClaimStore, vmi: &str) -> Option<(String, bool)> {
    store
        .state_claim("ns", vmi)
        .map(|(claim, _)| (claim.name, claim.labelled))
}

#[test]
fn the_state_claim_is_the_first_labelled_one_alive_else_the_unlabelled_legacy_one() {
    use kubevirt_api::persistent_state::{CLAIM_LABEL, legacy_claim_name};
    let store = ClaimStore::default();
    let legacy = legacy_claim_name("vm");
    store.on_event(&Event::Apply(claim(&legacy, None)));
    assert_eq!(
        found(&store, "vm"),
        Some((legacy.clone(), false)),
        "only the legacy one"
    );
    store.on_event(&Event::Apply(labelled("state-b", CLAIM_LABEL, "vm")));
    store.on_event(&Event::Apply(labelled("state-a", CLAIM_LABEL, "vm")));
    let mut elsewhere = labelled("state-0", CLAIM_LABEL, "vm");
    elsewhere.metadata.namespace = Some("other".to_owned());
    store.on_event(&Event::Apply(elsewhere));
    assert_eq!(found(&store, "vm"), Some(("state-a".to_owned(), true)), "first by name");
    let mut going = labelled("state-a", CLAIM_LABEL, "vm");
    going.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
    ));
    store.on_event(&Event::Apply(going));
    assert_eq!(
        found(&store, "vm"),
        Some(("state-b".to_owned(), true)),
        "not one being deleted"
    );
    store.on_event(&Event::Apply(labelled("state-b", CLAIM_LABEL, "another-vm")));
    store.on_event(&Event::Delete(claim("state-a", None)));
    assert_eq!(
        found(&store, "vm"),
        Some((legacy.clone(), false)),
        "relabelled and deleted"
    );
    assert_eq!(found(&store, "another-vm"), Some(("state-b".to_owned(), true)));
    // A legacy-named claim labelled for another VMI is that VMI's, not this one's.
    store.on_event(&Event::Apply(labelled(&legacy, CLAIM_LABEL, "another-vm")));
    assert_eq!(found(&store, "vm"), None);
    assert_eq!(
        found(&store, "another-vm"),
        Some((legacy.clone(), true)),
        "first by name"
    );
    // A relist that no longer sees a claim takes it out of the index too.
    store.on_event(&Event::Init);
    store.on_event(&Event::InitApply(labelled("state-b", CLAIM_LABEL, "another-vm")));
    store.on_event(&Event::InitDone);
    assert_eq!(found(&store, "another-vm"), Some(("state-b".to_owned(), true)));
    let labelled = store.labelled();
    let indexed: Vec<&str> = labelled.state_for.names("ns", "another-vm").collect();
    assert_eq!(indexed, ["state-b"], "{legacy} went with the relist");
    assert!(
        labelled.state_for.names("other", "vm").next().is_none(),
        "and other/state-0"
    );
}

#[test]
fn a_migration_target_claim_is_found_by_its_migration_label() {
    use kubevirt_api::persistent_state::MIGRATION_NAME_LABEL;
    let store = ClaimStore::default();
    assert!(store.migration_target_claim("ns", "mig").is_none());
    store.on_event(&Event::Apply(labelled("target", MIGRATION_NAME_LABEL, "mig")));
    let (target, _) = store.migration_target_claim("ns", "mig").expect("labelled");
    assert_eq!(target.name, "target");
    assert!(!target.labelled, "not yet labelled for a VMI");
    store.on_event(&Event::Apply(claim("target", None)));
    assert!(store.migration_target_claim("ns", "mig").is_none(), "the label went");
}

#[test]
fn a_claims_users_are_the_vmis_that_name_it_now() {
    let mut users = ClaimUsers::default();
    users.set(
        "ns/a",
        &vmi(vec![pvc_volume("root", "disk"), dv_volume("data", "imported")]),
    );
    users.set("ns/b", &vmi(vec![pvc_volume("root", "disk")]));
    let keys = |claims: &[&str]| claims.iter().map(|c| (*c).to_owned()).collect::<Vec<_>>();
    assert_eq!(users.users_of(&keys(&["ns/disk"])), ["ns/a", "ns/b"]);
    assert_eq!(users.users_of(&keys(&["ns/imported", "ns/disk"])), ["ns/a", "ns/b"]);
    users.set("ns/a", &vmi(vec![dv_volume("data", "imported")]));
    assert_eq!(users.users_of(&keys(&["ns/disk"])), ["ns/b"], "a no longer uses it");
    users.remove("ns/b");
    assert!(users.users_of(&keys(&["ns/disk"])).is_empty());
    assert_eq!(users.users_of(&keys(&["ns/imported"])), ["ns/a"]);
    users.set("ns/c", &vmi(vec![]));
    assert!(!users.by_vmi.contains_key("ns/c"), "a VMI without claims costs nothing");
}
