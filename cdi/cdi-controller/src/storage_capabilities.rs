//! What each known provisioner's volumes support, as upstream CDI's capabilities table: the
//! access and volume modes a StorageProfile offers, best first (the first is what a DataVolume
//! that names neither gets).

use std::collections::BTreeMap;

use cdi_api::ClaimPropertySet;

/// An access mode and a volume mode.
type Capability = (&'static str, &'static str);

const RWO_F: Capability = ("ReadWriteOnce", "Filesystem");
const RWO_B: Capability = ("ReadWriteOnce", "Block");
const RWX_F: Capability = ("ReadWriteMany", "Filesystem");
const RWX_B: Capability = ("ReadWriteMany", "Block");
const ROX_F: Capability = ("ReadOnlyMany", "Filesystem");
const ROX_B: Capability = ("ReadOnlyMany", "Block");

const RBD: &[Capability] = &[RWX_B, RWO_B, RWO_F];
const ALL_BUT_RWX_FILE: &[Capability] = &[RWX_B, RWO_B, RWO_F, ROX_B, ROX_F];
const ALL_FILE: &[Capability] = &[RWX_F, RWO_F, ROX_F];
const DELL_POWERMAX: &[Capability] = &[RWX_B, RWO_B, RWO_F, ROX_B];
const RWO_BLOCK_AND_FILE: &[Capability] = &[RWO_B, RWO_F];
const RWX_BLOCK_RWO_BOTH: &[Capability] = &[RWX_B, RWO_B, RWO_F];
const RWX_RWO_FILE: &[Capability] = &[RWX_F, RWO_F];

/// The table: provisioner key → capabilities, best first.
const TABLE: &[(&str, &[Capability])] = &[
    ("kubevirt.io.hostpath-provisioner", &[RWO_F]),
    ("kubevirt.io/hostpath-provisioner", &[RWO_F]),
    ("k8s.io/minikube-hostpath", &[RWO_F]),
    ("kubevirt.io.hostpath-provisioner/overlay", &[RWX_F]),
    ("nfs.csi.k8s.io", &[RWX_F]),
    ("k8s-sigs.io/nfs-subdir-external-provisioner", &[RWX_F]),
    ("kubernetes.io/rbd", RBD),
    ("rbd.csi.ceph.com", RBD),
    ("rook-ceph.rbd.csi.ceph.com", RBD),
    ("openshift-storage.rbd.csi.ceph.com", RBD),
    ("cephfs.csi.ceph.com", RWX_RWO_FILE),
    ("rook-ceph.cephfs.csi.ceph.com", RWX_RWO_FILE),
    ("openshift-storage.cephfs.csi.ceph.com", RWX_RWO_FILE),
    ("linstor.csi.linbit.com", ALL_BUT_RWX_FILE),
    ("csi-unity.dellemc.com", ALL_BUT_RWX_FILE),
    ("csi.huawei.com", ALL_BUT_RWX_FILE),
    ("csi-vxflexos.dellemc.com", ALL_BUT_RWX_FILE),
    ("csi-unity.dellemc.com/nfs", ALL_FILE),
    ("csi-vxflexos.dellemc.com/nfs", ALL_FILE),
    ("csi-isilon.dellemc.com", ALL_FILE),
    ("csi-powermax.dellemc.com/nfs", ALL_FILE),
    ("csi-powerstore.dellemc.com/nfs", ALL_FILE),
    ("csi.huawei.com/nfs", ALL_FILE),
    ("csi-powermax.dellemc.com", DELL_POWERMAX),
    ("csi-powerstore.dellemc.com", DELL_POWERMAX),
    ("kubernetes.io/storageos", &[RWO_F]),
    ("storageos", &[RWO_F]),
    ("kubernetes.io/aws-ebs", &[RWO_B]),
    ("ebs.csi.aws.com", &[RWO_B]),
    ("ebs.csi.aws.com/io1", &[RWO_B]),
    ("ebs.csi.aws.com/gp", &[RWO_B]),
    ("ebs.csi.aws.com/io2", RWX_BLOCK_RWO_BOTH),
    ("efs.csi.aws.com", RWX_RWO_FILE),
    ("kubernetes.io/azure-disk", &[RWO_B]),
    ("disk.csi.azure.com", &[RWO_B]),
    ("kubernetes.io/azure-file", &[RWX_F]),
    ("file.csi.azure.com", &[RWX_F]),
    ("kubernetes.io/gce-pd", RWO_BLOCK_AND_FILE),
    ("pd.csi.storage.gke.io", RWO_BLOCK_AND_FILE),
    ("pd.csi.storage.gke.io/hyperdisk", RWX_BLOCK_RWO_BOTH),
    ("hspc.csi.hitachi.com", RWX_BLOCK_RWO_BOTH),
    ("csi.hpe.com", RWX_BLOCK_RWO_BOTH),
    ("block.csi.ibm.com", RWX_BLOCK_RWO_BOTH),
    ("spectrumscale.csi.ibm.com", RWX_RWO_FILE),
    ("vpc.block.csi.ibm.io", RWO_BLOCK_AND_FILE),
    ("vpc.file.csi.ibm.io", RWX_RWO_FILE),
    ("vpc.file.csi.ibm.io/dp2", RWX_RWO_FILE),
    ("vpc.file.csi.ibm.io/rfs", RWX_RWO_FILE),
    ("vpc.file.csi.ibm.io/dp2-rwo", &[RWO_F]),
    ("vpc.file.csi.ibm.io/rfs-rwo", &[RWO_F]),
    ("kubernetes.io/portworx-volume/nfs", RWX_RWO_FILE),
    ("pxd.portworx.com/nfs", RWX_RWO_FILE),
    ("kubernetes.io/portworx-volume", &[RWX_B, RWX_F, RWO_B, RWO_F]),
    ("pxd.portworx.com", &[RWX_B, RWX_F, RWO_B, RWO_F]),
    ("pxd.portworx.com/pure_block", RWX_BLOCK_RWO_BOTH),
    ("pxd.portworx.com/pure_fa_file", RWX_RWO_FILE),
    ("csi.trident.netapp.io/ontap-nas", RWX_RWO_FILE),
    ("csi.trident.netapp.io/gcnv-flex", RWX_RWO_FILE),
    ("csi.trident.netapp.io/ontap-san", &[RWX_B]),
    ("topolvm.cybozu.com", RWO_BLOCK_AND_FILE),
    ("topolvm.io", RWO_BLOCK_AND_FILE),
    ("cinder.csi.openstack.org", RWO_BLOCK_AND_FILE),
    ("csi.ovirt.org", RWO_BLOCK_AND_FILE),
    ("manila.csi.openstack.org", &[RWX_F]),
    ("infinibox-csi-driver/iscsiorfibrechannel", RWX_BLOCK_RWO_BOTH),
    ("infinibox-csi-driver/nvme", RWX_BLOCK_RWO_BOTH),
    ("infinibox-csi-driver/nfs", RWX_RWO_FILE),
    ("csi.vsphere.vmware.com", RWO_BLOCK_AND_FILE),
    ("csi.vsphere.vmware.com/nfs", &[RWX_F, RWO_B, RWO_F]),
    ("kubesan.gitlab.io", &[RWX_B, ROX_B, RWO_B, RWO_F]),
    ("driver.longhorn.io", &[RWO_B]),
    ("driver.longhorn.io/migratable", &[RWX_B, RWO_B]),
    ("driver.longhorn.io/nfs", RWX_RWO_FILE),
    ("driver.longhorn.io/fs", &[RWO_F]),
    ("blockvolume.csi.oraclecloud.com", RWX_BLOCK_RWO_BOTH),
    ("csi.san.synology.com/iscsi", RWX_BLOCK_RWO_BOTH),
    ("csi.san.synology.com/nfs", RWX_RWO_FILE),
    ("csi.san.synology.com/smb", RWX_RWO_FILE),
    ("directpv-min-io", &[RWO_F]),
];

/// The provisioner that, without a provisioner, binds to pre-made volumes only.
pub const NO_PROVISIONER: &str = "kubernetes.io/no-provisioner";

/// The table key of a class: its provisioner, or for the hostpath provisioner's CSI driver with
/// the `overlayCSI` parameter, its overlay variant. (Upstream also keys other provisioners'
/// variants by their parameters; those get their provisioner's own entry here.)
#[must_use]
pub fn provisioner_key(provisioner: &str, parameters: &BTreeMap<String, String>) -> String {
    if provisioner == "kubevirt.io.hostpath-provisioner" && parameters.contains_key("overlayCSI") {
        return format!("{provisioner}/overlay");
    }
    provisioner.to_owned()
}

/// The claim property sets of a known provisioner key, one access mode each, best first; `None`
/// for an unknown one.
#[must_use]
pub fn capabilities(key: &str) -> Option<Vec<ClaimPropertySet>> {
    let (_, found) = TABLE.iter().find(|(name, _)| *name == key)?;
    Some(
        found
            .iter()
            .map(|(access, mode)| ClaimPropertySet {
                access_modes: vec![(*access).to_owned()],
                volume_mode: Some((*mode).to_owned()),
            })
            .collect(),
    )
}

/// The claim property sets of a class without a provisioner: the distinct access and volume
/// modes of its volumes (`(access modes, volume mode)` of each), in the order first seen.
#[must_use]
pub fn capabilities_of_volumes(volumes: &[(Vec<String>, Option<String>)]) -> Vec<ClaimPropertySet> {
    let mut sets: Vec<ClaimPropertySet> = Vec::new();
    for (access_modes, mode) in volumes {
        let mode = Some(mode.clone().unwrap_or_else(|| "Filesystem".to_owned()));
        for access in access_modes {
            let set = ClaimPropertySet {
                access_modes: vec![access.clone()],
                volume_mode: mode.clone(),
            };
            if !sets.contains(&set) {
                sets.push(set);
            }
        }
    }
    sets
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(sets: &[ClaimPropertySet]) -> Vec<(String, String)> {
        sets.iter()
            .map(|s| (s.access_modes.join(","), s.volume_mode.clone().unwrap_or_default()))
            .collect()
    }

    #[test]
    fn the_hostpath_provisioner_offers_read_write_once_filesystems_and_its_overlay_shares() {
        let plain = provisioner_key("kubevirt.io.hostpath-provisioner", &BTreeMap::new());
        assert_eq!(
            pairs(&capabilities(&plain).expect("known")),
            [("ReadWriteOnce".to_owned(), "Filesystem".to_owned())]
        );
        let overlay = provisioner_key(
            "kubevirt.io.hostpath-provisioner",
            &BTreeMap::from([("overlayCSI".to_owned(), "true".to_owned())]),
        );
        assert_eq!(overlay, "kubevirt.io.hostpath-provisioner/overlay");
        assert_eq!(
            pairs(&capabilities(&overlay).expect("known")),
            [("ReadWriteMany".to_owned(), "Filesystem".to_owned())]
        );
    }

    #[test]
    fn ceph_rbd_prefers_shared_block_and_unknown_provisioners_have_nothing() {
        assert_eq!(
            pairs(&capabilities("rook-ceph.rbd.csi.ceph.com").expect("known")),
            [
                ("ReadWriteMany".to_owned(), "Block".to_owned()),
                ("ReadWriteOnce".to_owned(), "Block".to_owned()),
                ("ReadWriteOnce".to_owned(), "Filesystem".to_owned())
            ]
        );
        assert_eq!(capabilities("example.com/unknown"), None);
        assert_eq!(capabilities(NO_PROVISIONER), None, "derived from its volumes instead");
    }

    #[test]
    fn every_key_is_listed_once_with_modes_kubernetes_knows() {
        let mut keys: Vec<&str> = TABLE.iter().map(|(k, _)| *k).collect();
        keys.sort_unstable();
        let count = keys.len();
        keys.dedup();
        assert_eq!(keys.len(), count, "a key twice");
        for (key, found) in TABLE {
            assert!(!found.is_empty(), "{key}");
            for (access, mode) in *found {
                assert!(
                    ["ReadWriteOnce", "ReadWriteMany", "ReadOnlyMany"].contains(access),
                    "{key}"
                );
                assert!(["Filesystem", "Block"].contains(mode), "{key}");
            }
        }
    }

    #[test]
    fn a_class_without_a_provisioner_offers_what_its_volumes_have() {
        let volumes = vec![
            (vec!["ReadWriteOnce".to_owned()], Some("Block".to_owned())),
            (vec!["ReadWriteOnce".to_owned(), "ReadOnlyMany".to_owned()], None),
            (vec!["ReadWriteOnce".to_owned()], Some("Block".to_owned())),
        ];
        assert_eq!(
            pairs(&capabilities_of_volumes(&volumes)),
            [
                ("ReadWriteOnce".to_owned(), "Block".to_owned()),
                ("ReadWriteOnce".to_owned(), "Filesystem".to_owned()),
                ("ReadOnlyMany".to_owned(), "Filesystem".to_owned())
            ]
        );
    }
}
