//! Where each volume kind's data is, as seen from inside the launcher: upstream's paths.

use std::path::Path;

use kubevirt_api::v1::{VirtualMachineInstance, Volume, VolumeSource, VolumeSourceError};

use super::{ConvertContext, ConvertError};
use crate::model::{BackingStore, DiskSource, TypeAttr};

/// How a volume appears as a libvirt disk: `<disk type>`, driver format, source and backing store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VolumeDisk {
    /// `file` or `block`.
    pub disk_type: &'static str,
    /// `raw` or `qcow2`.
    pub format: &'static str,
    /// The source element.
    pub source: DiskSource,
    /// The image under a qcow2 overlay.
    pub backing_store: Option<BackingStore>,
    /// Volumes that must be attached read-only whatever the disk says.
    pub is_read_only: bool,
}

fn file(path: String, format: &'static str) -> VolumeDisk {
    VolumeDisk {
        disk_type: "file",
        format,
        source: DiskSource {
            file: Some(path),
            ..DiskSource::default()
        },
        backing_store: None,
        is_read_only: false,
    }
}

fn block(volume: &str) -> VolumeDisk {
    VolumeDisk {
        disk_type: "block",
        format: "raw",
        // Upstream also writes name='<volume>' here; libvirt ignores it and its schema rejects it.
        source: DiskSource {
            dev: Some(format!("/dev/{volume}")),
            ..DiskSource::default()
        },
        backing_store: None,
        is_read_only: false,
    }
}

fn overlay(ctx: &ConvertContext, volume: &str, backing_type: &str, format: String, backing: DiskSource) -> VolumeDisk {
    VolumeDisk {
        backing_store: Some(BackingStore {
            store_type: Some(backing_type.to_owned()),
            format: Some(TypeAttr { kind: format }),
            source: Some(backing),
        }),
        ..file(ctx.layout.overlay(volume), "qcow2")
    }
}

/// The disk for `spec.volumes[index]`.
pub fn volume_disk(
    vmi: &VirtualMachineInstance,
    index: usize,
    volume: &Volume,
    ctx: &ConvertContext,
) -> Result<VolumeDisk, ConvertError> {
    let field = format!("spec.volumes[{index}]");
    let name = volume.name.as_str();
    let layout = &ctx.layout;
    let source = volume.source().map_err(|e| match e {
        VolumeSourceError::Missing => ConvertError::invalid(&field, format!("volume {name} has no known source")),
        VolumeSourceError::Several(kinds) => {
            ConvertError::invalid(&field, format!("must have exactly one source type set, found {kinds}"))
        }
    })?;
    let namespace = vmi.metadata.namespace.as_deref().unwrap_or("default");
    let vmi_name = vmi.metadata.name.as_deref().unwrap_or_default();
    let is_block = ctx.block_volumes.contains(name);
    Ok(match source {
        VolumeSource::ContainerDisk(_) => {
            let format = ctx.container_disk_formats.get(name).cloned().ok_or_else(|| {
                ConvertError::invalid(
                    format!("{field}.containerDisk"),
                    format!("no disk format known for container disk {name}"),
                )
            })?;
            let backing = ctx
                .container_disk_sources
                .get(name)
                .cloned()
                .unwrap_or_else(|| layout.container_disk_image(index));
            overlay(
                ctx,
                name,
                "file",
                format,
                DiskSource {
                    file: Some(backing),
                    ..DiskSource::default()
                },
            )
        }
        VolumeSource::Ephemeral(_) if is_block => overlay(
            ctx,
            name,
            "block",
            "raw".to_owned(),
            DiskSource {
                dev: Some(format!("/dev/{name}")),
                ..DiskSource::default()
            },
        ),
        VolumeSource::Ephemeral(_) => overlay(
            ctx,
            name,
            "file",
            "raw".to_owned(),
            DiskSource {
                file: Some(layout.pvc_image(name)),
                ..DiskSource::default()
            },
        ),
        VolumeSource::PersistentVolumeClaim(_) | VolumeSource::DataVolume(_) if is_block => block(name),
        VolumeSource::PersistentVolumeClaim(_) | VolumeSource::DataVolume(_) => file(layout.pvc_image(name), "raw"),
        VolumeSource::EmptyDisk(_) => file(layout.empty_disk(name), "qcow2"),
        VolumeSource::HostDisk(host) => {
            let path = if layout.host_disks_in_place {
                host.path.clone()
            } else {
                let base = Path::new(&host.path)
                    .file_name()
                    .map_or_else(|| "disk.img".into(), |b| b.to_string_lossy());
                format!("{}/{base}", layout.vmi_disk_dir(name))
            };
            file(path, "raw")
        }
        VolumeSource::CloudInitNoCloud(_) => file(layout.cloud_init_iso(namespace, vmi_name, "noCloud.iso"), "raw"),
        VolumeSource::CloudInitConfigDrive(_) => {
            file(layout.cloud_init_iso(namespace, vmi_name, "configdrive.iso"), "raw")
        }
        VolumeSource::ConfigMap(_) => file(layout.private_iso("config-map-disks", name), "raw"),
        VolumeSource::Secret(_) => file(layout.private_iso("secret-disks", name), "raw"),
        VolumeSource::DownwardApi(_) => file(layout.private_iso("downwardapi-disks", name), "raw"),
        VolumeSource::ServiceAccount(_) => file(layout.private_iso("service-account-disk", "service-account"), "raw"),
        VolumeSource::Sysprep(_) => file(layout.private_iso("sysprep-disks", name), "raw"),
        VolumeSource::DownwardMetrics => VolumeDisk {
            is_read_only: true,
            ..file(format!("{}/downward-metrics-disks/vhostmd0", layout.private_dir), "raw")
        },
        VolumeSource::MemoryDump(_) => {
            return Err(ConvertError::invalid(
                &field,
                format!("memoryDump volume {name} receives memory dumps and cannot be attached as a disk"),
            ));
        }
        VolumeSource::ContainerPath(_) => {
            return Err(ConvertError::invalid(
                &field,
                format!("containerPath volume {name} is shared as a file system and cannot be attached as a disk"),
            ));
        }
    })
}
