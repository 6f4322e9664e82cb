//! Whether a VMI can live-migrate, and how: the `LiveMigratable` condition's reason and message
//! (upstream's, first failing check wins) and `status.migrationMethod`.
//!
//! Disks that are not shared storage (containerDisk, emptyDisk, cloud-init and config volumes)
//! do not stop a migration: they are copied to the target, which makes the method
//! `BlockMigration`. A PersistentVolumeClaim must be `ReadWriteMany`, a hostDisk `shared`.

use crate::v1::{VirtualMachineInstance, Volume};

/// The annotation that lets a VMI with a bridge on the pod network migrate.
pub const ALLOW_POD_BRIDGE_MIGRATION: &str = "kubevirt.io/allow-pod-bridge-network-live-migration";

/// `LiveMigratable=False`: why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotMigratable {
    /// Upstream's reason, e.g. `DisksNotLiveMigratable`.
    pub reason: &'static str,
    /// Upstream's message.
    pub message: String,
}

/// `status.migrationMethod`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MigrationMethod {
    /// Every disk is shared storage.
    LiveMigration,
    /// Some disks are copied to the target.
    BlockMigration,
}

impl MigrationMethod {
    /// The string upstream writes.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::LiveMigration => "LiveMigration",
            Self::BlockMigration => "BlockMigration",
        }
    }
}

fn not(reason: &'static str, message: impl Into<String>) -> Result<(), NotMigratable> {
    Err(NotMigratable {
        reason,
        message: message.into(),
    })
}

/// Whether the VMI's status says it can live-migrate (the `LiveMigratable` condition is true, as
/// virt-handler writes it from [`live_migratable`]).
#[must_use]
pub fn reported_live_migratable(vmi: &VirtualMachineInstance) -> bool {
    use crate::well_known::conditions;
    vmi.status.as_ref().is_some_and(|s| {
        s.conditions
            .iter()
            .any(|c| c.condition_type == conditions::LIVE_MIGRATABLE && c.status == conditions::TRUE)
    })
}

/// The eviction strategy that applies to `vmi`: its own, else the cluster's `cluster_default`.
#[must_use]
pub fn eviction_strategy<'a>(vmi: &'a VirtualMachineInstance, cluster_default: Option<&'a str>) -> Option<&'a str> {
    vmi.spec.eviction_strategy.as_deref().or(cluster_default)
}

/// Whether `vmi` can live-migrate; the first reason it cannot.
pub fn live_migratable(vmi: &VirtualMachineInstance) -> Result<(), NotMigratable> {
    pod_interface(vmi)?;
    let spec = &vmi.spec.domain;
    if !spec.devices.host_devices.is_empty() || !spec.devices.gpus.is_empty() {
        return not("HostDeviceNotLiveMigratable", "VMI uses a PCI host devices");
    }
    if let Some(security) = &spec.launch_security {
        if security.sev.is_some() {
            return not("SEVNotLiveMigratable", "VMI uses SEV");
        }
        if security.tdx.is_some() {
            return not("TDXNotLiveMigratable", "VMI uses TDX");
        }
    }
    let reservation = spec
        .devices
        .disks
        .iter()
        .any(|d| d.lun.as_ref().and_then(|l| l.reservation) == Some(true));
    if reservation {
        return not(
            "PersistentReservationNotLiveMigratable",
            "VMI uses SCSI persistent reservation",
        );
    }
    let features = spec.features.as_ref();
    let reenlightenment = features
        .and_then(|f| f.hyperv.as_ref())
        .and_then(|h| h.reenlightenment.as_ref())
        .is_some_and(|r| r.enabled != Some(false));
    let tsc_known = vmi
        .status
        .as_ref()
        .and_then(|s| s.topology_hints.as_ref())
        .and_then(|h| h.tsc_frequency)
        .is_some();
    if reenlightenment && !tsc_known {
        return not(
            "NoTSCFrequencyNotLiveMigratable",
            "HyperV Reenlightenment VMIs cannot migrate when TSC Frequency is not exposed on the cluster: guest timers might be inconsistent",
        );
    }
    if features
        .and_then(|f| f.hyperv_passthrough.as_ref())
        .is_some_and(|p| p.enabled != Some(false))
    {
        return not("HypervPassthroughNotLiveMigratable", "VMI uses hyperv passthrough");
    }
    vmi.spec
        .volumes
        .iter()
        .try_for_each(|volume| shared_volume(vmi, volume))
}

/// The pod network's interface must be masquerade, or a bridge the VMI allows to migrate.
fn pod_interface(vmi: &VirtualMachineInstance) -> Result<(), NotMigratable> {
    let Some(pod_network) = vmi.spec.networks.iter().find(|n| n.pod.is_some()) else {
        return Ok(());
    };
    let Some(interface) = vmi
        .spec
        .domain
        .devices
        .interfaces
        .iter()
        .find(|i| i.name == pod_network.name)
    else {
        return Ok(());
    };
    let bridge_allowed = vmi
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(ALLOW_POD_BRIDGE_MIGRATION));
    if interface.masquerade.is_some() || (interface.bridge.is_some() && bridge_allowed) {
        return Ok(());
    }
    not(
        "InterfaceNotLiveMigratable",
        "cannot migrate VMI which does not use masquerade, bridge with kubevirt.io/allow-pod-bridge-network-live-migration VM annotation or a migratable plugin to connect to the pod network",
    )
}

/// A claim must be `ReadWriteMany`; a hostDisk must be shared.
fn shared_volume(vmi: &VirtualMachineInstance, volume: &Volume) -> Result<(), NotMigratable> {
    let claim = volume
        .persistent_volume_claim
        .as_ref()
        .map(|c| c.claim_name.as_str())
        .or_else(|| volume.data_volume.as_ref().map(|d| d.name.as_str()));
    if let Some(claim) = claim {
        let modes = vmi
            .status
            .as_ref()
            .and_then(|s| s.volume_status.iter().find(|v| v.name == volume.name))
            .and_then(|v| v.persistent_volume_claim_info.as_ref())
            .map(|info| info.access_modes.clone());
        return match modes {
            None => not(
                "DisksNotLiveMigratable",
                format!(
                    "cannot migrate VMI: Unable to determine if PVC {claim} is shared, live migration requires that all PVCs must be shared (using ReadWriteMany access mode)"
                ),
            ),
            Some(modes) if modes.iter().any(|m| m == "ReadWriteMany") => Ok(()),
            Some(_) => not(
                "DisksNotLiveMigratable",
                format!(
                    "cannot migrate VMI: PVC {claim} is not shared, live migration requires that all PVCs must be shared (using ReadWriteMany access mode)"
                ),
            ),
        };
    }
    if volume.host_disk.as_ref().is_some_and(|h| h.shared != Some(true)) {
        return not("DisksNotLiveMigratable", "cannot migrate VMI with non-shared HostDisk");
    }
    Ok(())
}

/// `BlockMigration` when some disk's image is copied (any volume but a claim, a DataVolume or a
/// hostDisk, and not a read-only CD-ROM or a virtiofs filesystem), `LiveMigration` otherwise.
#[must_use]
pub fn migration_method(vmi: &VirtualMachineInstance) -> MigrationMethod {
    let devices = &vmi.spec.domain.devices;
    let copied = vmi.spec.volumes.iter().any(|volume| {
        let shared_storage =
            volume.persistent_volume_claim.is_some() || volume.data_volume.is_some() || volume.host_disk.is_some();
        let filesystem = devices.filesystems.iter().any(|f| f.name == volume.name);
        let read_only_cdrom = devices
            .disks
            .iter()
            .find(|d| d.name == volume.name)
            .and_then(|d| d.cdrom.as_ref())
            .is_some_and(|c| c.readonly != Some(false));
        !shared_storage && !filesystem && !read_only_cdrom
    });
    let migrated_volumes = vmi.status.as_ref().is_some_and(|s| !s.migrated_volumes.is_empty());
    if copied || migrated_volumes {
        MigrationMethod::BlockMigration
    } else {
        MigrationMethod::LiveMigration
    }
}

#[cfg(test)]
mod tests;
