//! `status.volumeStatus` as upstream's VMI controller keeps it (`updateVolumeStatus`): one entry
//! per volume of the spec, sorted by name, what virt-handler wrote into an entry kept, and each
//! `persistentVolumeClaim` and `dataVolume` volume's claim described (`persistentVolumeClaimInfo`)
//! while its claim is there. Pure.

use std::collections::BTreeMap;

use kubevirt_api::v1::{PersistentVolumeClaimInfo, VirtualMachineInstance, VolumeStatus};

/// The volume statuses of `vmi`, from the current ones and its claims' descriptions
/// (`infos`, by claim name).
#[must_use]
pub fn volume_statuses(
    vmi: &VirtualMachineInstance,
    current: &[VolumeStatus],
    infos: &BTreeMap<String, PersistentVolumeClaimInfo>,
    state_claim: Option<&PersistentVolumeClaimInfo>,
) -> Vec<VolumeStatus> {
    let mut statuses: Vec<VolumeStatus> = vmi
        .spec
        .volumes
        .iter()
        .map(|volume| {
            let mut status = current
                .iter()
                .find(|s| s.name == volume.name)
                .cloned()
                .unwrap_or_else(|| VolumeStatus {
                    name: volume.name.clone(),
                    ..VolumeStatus::default()
                });
            // Upstream describes the claims of these two kinds only (not an ephemeral volume's).
            let claim = volume
                .persistent_volume_claim
                .as_ref()
                .map(|p| p.claim_name.as_str())
                .or_else(|| volume.data_volume.as_ref().map(|d| d.name.as_str()));
            if let Some(info) = claim.and_then(|c| infos.get(c)) {
                status.persistent_volume_claim_info = Some(info.clone());
            }
            status
        })
        .collect();
    // The VM state claim, by its name and access modes only, as upstream's `UpdateVolumeStatus`.
    if let Some(info) = state_claim {
        statuses.push(VolumeStatus {
            name: kubevirt_api::persistent_state::STATUS_VOLUME_NAME.to_owned(),
            persistent_volume_claim_info: Some(PersistentVolumeClaimInfo {
                claim_name: info.claim_name.clone(),
                access_modes: info.access_modes.clone(),
                ..PersistentVolumeClaimInfo::default()
            }),
            ..VolumeStatus::default()
        });
    }
    statuses.sort_by(|a, b| a.name.cmp(&b.name));
    statuses
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn info(claim: &str, mode: &str) -> PersistentVolumeClaimInfo {
        PersistentVolumeClaimInfo {
            claim_name: Some(claim.to_owned()),
            volume_mode: Some(mode.to_owned()),
            ..PersistentVolumeClaimInfo::default()
        }
    }

    #[test]
    fn every_volume_gets_an_entry_by_name_and_claims_are_described() {
        let vmi: VirtualMachineInstance = serde_json::from_value(json!({
            "metadata": {"name": "db", "namespace": "ns"},
            "spec": {"domain": {"devices": {}}, "volumes": [
                {"name": "root", "containerDisk": {"image": "img"}},
                {"name": "data", "persistentVolumeClaim": {"claimName": "data-pvc"}},
                {"name": "imported", "dataVolume": {"name": "imported-dv"}},
                {"name": "scratch", "ephemeral": {"persistentVolumeClaim": {"claimName": "scratch-pvc"}}}
            ]}
        }))
        .expect("VMI");
        let handlers = VolumeStatus {
            name: "root".to_owned(),
            target: "vda".to_owned(),
            ..VolumeStatus::default()
        };
        let removed = VolumeStatus {
            name: "gone".to_owned(),
            ..VolumeStatus::default()
        };
        let infos = BTreeMap::from([
            ("data-pvc".to_owned(), info("data-pvc", "Block")),
            ("scratch-pvc".to_owned(), info("scratch-pvc", "Filesystem")),
        ]);
        let statuses = volume_statuses(&vmi, &[handlers.clone(), removed], &infos, None);
        let names: Vec<&str> = statuses.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            ["data", "imported", "root", "scratch"],
            "sorted; the removed volume's entry goes"
        );
        assert_eq!(statuses[2], handlers, "what virt-handler wrote stays");
        assert_eq!(
            statuses[0].persistent_volume_claim_info,
            Some(info("data-pvc", "Block"))
        );
        assert_eq!(
            statuses[1].persistent_volume_claim_info, None,
            "its claim is not there yet"
        );
        assert_eq!(
            statuses[3].persistent_volume_claim_info, None,
            "an ephemeral volume's claim is not described"
        );
    }

    #[test]
    fn the_vm_state_claim_gets_its_own_entry_with_its_name_and_access_modes() {
        let vmi: VirtualMachineInstance = serde_json::from_value(json!({
            "metadata": {"name": "db", "namespace": "ns"},
            "spec": {"domain": {"devices": {"tpm": {"persistent": true}}}, "volumes": [
                {"name": "root", "containerDisk": {"image": "img"}}
            ]}
        }))
        .expect("VMI");
        let state = PersistentVolumeClaimInfo {
            access_modes: vec!["ReadWriteOnce".to_owned()],
            capacity: Some(BTreeMap::new()),
            ..info("persistent-state-for-db-00001", "Filesystem")
        };
        let statuses = volume_statuses(&vmi, &[], &BTreeMap::new(), Some(&state));
        let names: Vec<&str> = statuses.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["persistent-state-for-this-vm", "root"]);
        assert_eq!(
            statuses[0].persistent_volume_claim_info,
            Some(PersistentVolumeClaimInfo {
                claim_name: Some("persistent-state-for-db-00001".to_owned()),
                access_modes: vec!["ReadWriteOnce".to_owned()],
                ..PersistentVolumeClaimInfo::default()
            })
        );
    }
}
