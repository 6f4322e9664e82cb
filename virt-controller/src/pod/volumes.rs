//! The launcher pod's volumes and the `compute` container's mounts and devices (upstream's
//! `renderLaunchManifest` and `rendervolumes.go`): the emptyDirs the launcher works in, and one pod
//! volume per VMI volume that needs the kubelet. A claim in block mode reaches the container as
//! the device `/dev/<volume>` (`volumeDevices`), any other as a mount of its directory.

use k8s_openapi::api::core::v1::{
    EmptyDirVolumeSource, HostPathVolumeSource, PersistentVolumeClaimVolumeSource, Volume, VolumeDevice, VolumeMount,
};
use kubevirt_api::v1::{VirtualMachineInstance, VolumeSource};

use super::RenderError;
use crate::claims::{ClaimModes, VolumeMode};

/// The pod's volumes and what the `compute` container gets of them.
#[derive(Debug, Default)]
pub struct PodStorage {
    /// `spec.volumes`.
    pub volumes: Vec<Volume>,
    /// The container's `volumeMounts`.
    pub mounts: Vec<VolumeMount>,
    /// The container's `volumeDevices` (block claims).
    pub devices: Vec<VolumeDevice>,
}

/// The launcher's private directory.
pub const PRIVATE_DIR: &str = "/var/run/kubevirt-private";
/// The share directory (`--kubevirt-share-dir`).
pub const SHARE_DIR: &str = "/var/run/kubevirt";
/// Ephemeral disks (`--ephemeral-disk-dir`).
pub const EPHEMERAL_DISK_DIR: &str = "/var/run/kubevirt-ephemeral-disks";
/// Container disks (`--container-disk-dir`).
pub const CONTAINER_DISK_DIR: &str = "/var/run/kubevirt/container-disks";
/// Where the containerDisk binary is shared with the disk containers.
pub const BIN_SHARE_DIR: &str = "/init/usr/bin";

fn empty_dir(name: &str) -> Volume {
    Volume {
        name: name.to_owned(),
        empty_dir: Some(EmptyDirVolumeSource::default()),
        ..Volume::default()
    }
}

fn mount(name: &str, path: &str) -> VolumeMount {
    VolumeMount {
        name: name.to_owned(),
        mount_path: path.to_owned(),
        ..VolumeMount::default()
    }
}

/// Whether the VMI has containerDisks (or a kernel-boot container), which need the disk sidecars.
#[must_use]
pub fn has_container_disks(vmi: &VirtualMachineInstance) -> bool {
    vmi.spec.volumes.iter().any(|v| v.container_disk.is_some()) || has_kernel_boot_container(vmi)
}

/// Whether the VMI boots a kernel from a container image.
#[must_use]
pub fn has_kernel_boot_container(vmi: &VirtualMachineInstance) -> bool {
    vmi.kernel_boot_container().is_some()
}

/// The pod's volumes and the `compute` container's mounts and devices; `claims` says each claim's
/// mode.
pub fn volumes(vmi: &VirtualMachineInstance, hugepages: bool, claims: &ClaimModes) -> Result<PodStorage, RenderError> {
    let mut volumes = vec![
        empty_dir("private"),
        empty_dir("public"),
        empty_dir("sockets"),
        empty_dir("libvirt-runtime"),
        empty_dir("ephemeral-disks"),
        empty_dir("container-disks"),
    ];
    let mut mounts = vec![
        mount("private", PRIVATE_DIR),
        mount("public", SHARE_DIR),
        mount("ephemeral-disks", EPHEMERAL_DISK_DIR),
        VolumeMount {
            mount_propagation: Some("HostToContainer".to_owned()),
            ..mount("container-disks", CONTAINER_DISK_DIR)
        },
        mount("libvirt-runtime", "/var/run/libvirt"),
        mount("sockets", &format!("{SHARE_DIR}/sockets")),
    ];
    if has_container_disks(vmi) {
        volumes.push(empty_dir("virt-bin-share-dir"));
    }
    add_hugepages(hugepages, &mut volumes, &mut mounts);
    let mut storage = PodStorage {
        volumes,
        mounts,
        devices: Vec::new(),
    };
    let namespace = vmi.metadata.namespace.as_deref().unwrap_or("default");
    for (index, volume) in vmi.spec.volumes.iter().enumerate() {
        add_volume(index, volume, namespace, claims, &mut storage)?;
    }
    add_state_claim(vmi, claims, &mut storage)?;
    Ok(storage)
}

/// The VM state claim (persistent TPM and EFI), its subdirectories mounted where libvirt keeps
/// that state, as upstream's `withBackendStorage`. A non-root launcher's libvirt keeps it under
/// `libvirt/qemu` of the private directory, whose two levels are emptyDirs of their own: the
/// directories the runtime would make for the mount points would be root's and not writable.
fn add_state_claim(
    vmi: &VirtualMachineInstance,
    claims: &ClaimModes,
    storage: &mut PodStorage,
) -> Result<(), RenderError> {
    use kubevirt_api::persistent_state::{self, POD_VOLUME_NAME};
    if !persistent_state::needed(&vmi.spec) {
        return Ok(());
    }
    let claim_name = claims.state_claim().ok_or_else(|| RenderError::Volume {
        field: if persistent_state::has_persistent_tpm(&vmi.spec) {
            "spec.domain.devices.tpm.persistent"
        } else {
            "spec.domain.firmware.bootloader.efi.persistent"
        }
        .to_owned(),
        message: "the VM state claim is not there yet".to_owned(),
    })?;
    storage.volumes.push(Volume {
        name: POD_VOLUME_NAME.to_owned(),
        persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
            claim_name: claim_name.to_owned(),
            read_only: Some(false),
        }),
        ..Volume::default()
    });
    let non_root = vmi.is_non_root();
    if non_root {
        storage.volumes.push(empty_dir("private-libvirt"));
        storage.volumes.push(empty_dir("private-libvirt-qemu"));
        storage
            .mounts
            .push(mount("private-libvirt", &format!("{PRIVATE_DIR}/libvirt")));
        storage
            .mounts
            .push(mount("private-libvirt-qemu", &format!("{PRIVATE_DIR}/libvirt/qemu")));
    }
    for state in persistent_state::mounts(&vmi.spec, non_root) {
        storage.mounts.push(VolumeMount {
            sub_path: Some(state.sub_path.to_owned()),
            ..mount(POD_VOLUME_NAME, &state.path)
        });
    }
    Ok(())
}

/// The hugepages mount the guest's memory comes from.
fn add_hugepages(hugepages: bool, volumes: &mut Vec<Volume>, mounts: &mut Vec<VolumeMount>) {
    if hugepages {
        volumes.push(Volume {
            name: "hugepages".to_owned(),
            empty_dir: Some(EmptyDirVolumeSource {
                medium: Some("HugePages".to_owned()),
                ..EmptyDirVolumeSource::default()
            }),
            ..Volume::default()
        });
        mounts.push(mount("hugepages", "/dev/hugepages"));
    }
}

/// The pod volume and mount (or device) of `spec.volumes[index]`, for the kinds the kubelet
/// provides.
fn add_volume(
    index: usize,
    volume: &kubevirt_api::v1::Volume,
    namespace: &str,
    claims: &ClaimModes,
    storage: &mut PodStorage,
) -> Result<(), RenderError> {
    let PodStorage {
        volumes,
        mounts,
        devices,
    } = storage;
    let field = format!("spec.volumes[{index}]");
    let source = volume.source().map_err(|e| RenderError::Volume {
        field: field.clone(),
        message: e.to_string(),
    })?;
    let disk_dir = format!("{PRIVATE_DIR}/vmi-disks/{}", volume.name);
    let claim = |claim_name: &str, read_only: Option<bool>| Volume {
        name: volume.name.clone(),
        persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
            claim_name: claim_name.to_owned(),
            read_only,
        }),
        ..Volume::default()
    };
    // A claim's volume: its device in block mode, else its directory.
    let mut attach = |claim_name: &str, read_only: Option<bool>| -> Result<(), RenderError> {
        let mode = claims.get(claim_name).ok_or_else(|| RenderError::Volume {
            field: field.clone(),
            message: crate::claims::MissingClaim {
                namespace: namespace.to_owned(),
                name: claim_name.to_owned(),
            }
            .to_string(),
        })?;
        volumes.push(claim(claim_name, read_only));
        match mode {
            VolumeMode::Block => devices.push(VolumeDevice {
                name: volume.name.clone(),
                device_path: format!("/dev/{}", volume.name),
            }),
            VolumeMode::Filesystem => mounts.push(mount(&volume.name, &disk_dir)),
        }
        Ok(())
    };
    match source {
        VolumeSource::PersistentVolumeClaim(pvc) => attach(&pvc.claim_name, pvc.read_only)?,
        VolumeSource::Ephemeral(ephemeral) => {
            if let Some(pvc) = &ephemeral.persistent_volume_claim {
                attach(&pvc.claim_name, Some(true))?;
            }
        }
        VolumeSource::DataVolume(dv) => attach(&dv.name, None)?,
        VolumeSource::HostDisk(host) => {
            let dir = std::path::Path::new(&host.path)
                .parent()
                .map(|p| p.display().to_string())
                .filter(|p| !p.is_empty())
                .ok_or_else(|| RenderError::Volume {
                    field: format!("{field}.hostDisk.path"),
                    message: format!("{} has no directory", host.path),
                })?;
            let kind = if host.disk_type == "DiskOrCreate" {
                "DirectoryOrCreate"
            } else {
                "Directory"
            };
            volumes.push(Volume {
                name: volume.name.clone(),
                host_path: Some(HostPathVolumeSource {
                    path: dir,
                    type_: Some(kind.to_owned()),
                }),
                ..Volume::default()
            });
            mounts.push(mount(&volume.name, &disk_dir));
        }
        // Served by sidecars or made by the launcher itself; config volumes in config_volumes.rs.
        VolumeSource::ContainerDisk(_)
        | VolumeSource::CloudInitNoCloud(_)
        | VolumeSource::CloudInitConfigDrive(_)
        | VolumeSource::EmptyDisk(_)
        | VolumeSource::ConfigMap(_)
        | VolumeSource::Secret(_)
        | VolumeSource::DownwardApi(_)
        | VolumeSource::Sysprep(_)
        | VolumeSource::ServiceAccount(_) => {}
        _ => {
            return Err(RenderError::Volume {
                field,
                message: format!("volume {} is of a kind the launcher does not support yet", volume.name),
            });
        }
    }
    Ok(())
}
