//! Preparing a VMI's volumes on the local machine before the domain is defined: containerDisk
//! overlays, empty disks, host disks, cloud-init and config ISOs and kernel-boot artifacts.
//!
//! Images come from the local image store (see [`crate::image_store`]); their files are linked into
//! the runtime directory at upstream's paths, so the rendered domain is the same as in a cluster.
//! Volume kinds that need a cluster (PVCs, ConfigMaps, Secrets, ...) are refused by field path.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use kubevirt_api::quantity;
use kubevirt_api::v1::{VirtualMachineInstance, VolumeSource};

use crate::cloud_init::{self, Flavor, Secrets};
use crate::domain::PathLayout;
use crate::image_store::{ContainerDiskError, ImageLocation, ImageStore, image_format};
use crate::supervisor::reaper::ToolRunner;
pub use crate::volume_step::{PrepareError, Step};
pub(crate) use crate::volume_step::{io, run_tool, volume_error};

/// Replaces `link` with a symlink to `target`.
fn link(target: &Path, link: &Path) -> Result<(), PrepareError> {
    if let Some(parent) = link.parent() {
        std::fs::create_dir_all(parent).map_err(io(parent))?;
    }
    let _ = std::fs::remove_file(link);
    std::os::unix::fs::symlink(target, link).map_err(io(link))
}

/// The planned steps and what the conversion needs to know about the volumes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// Steps in order.
    pub steps: Vec<Step>,
    /// Image format of each containerDisk volume.
    pub container_disk_formats: BTreeMap<String, String>,
}

/// Plans every volume and the kernel-boot artifacts. Reads the image store; writes nothing.
pub fn plan(vmi: &VirtualMachineInstance, layout: &PathLayout, store: &ImageStore) -> Result<Plan, PrepareError> {
    // Their Secrets live in a cluster; refused rather than left out of the guest.
    if !vmi.spec.access_credentials.is_empty() {
        return Err(volume_error(
            "spec.accessCredentials[0]",
            "access credentials need a Kubernetes cluster (their keys and passwords come from Secrets)",
        ));
    }
    let mut plan = Plan {
        steps: kernel_boot_links(vmi, layout, store)?,
        ..Plan::default()
    };
    for (index, volume) in vmi.spec.volumes.iter().enumerate() {
        let field = format!("spec.volumes[{index}]");
        let source = volume.source().map_err(|e| volume_error(&field, e))?;
        let name = volume.name.as_str();
        match source {
            VolumeSource::ContainerDisk(disk) => {
                let file = store
                    .container_disk(&disk.image, disk.path.as_deref())
                    .map_err(|e| match e {
                        ContainerDiskError::Reference(_) => volume_error(&format!("{field}.containerDisk.image"), e),
                        _ => volume_error(&format!("{field}.containerDisk"), e),
                    })?;
                let format = image_format(&file).map_err(io(&file))?;
                let image = PathBuf::from(layout.container_disk_image(index));
                plan.steps.push(Step::Link {
                    target: file,
                    link: image.clone(),
                });
                let overlay = PathBuf::from(layout.overlay(name));
                plan.steps.push(Step::Overlay {
                    field: field.clone(),
                    image,
                    format,
                    overlay,
                });
                plan.container_disk_formats.insert(name.to_owned(), format.to_owned());
            }
            VolumeSource::EmptyDisk(empty) => {
                let bytes = quantity::to_bytes(&empty.capacity)
                    .map_err(|e| volume_error(&format!("{field}.emptyDisk.capacity"), e))?;
                plan.steps.push(Step::EmptyDisk {
                    field: field.clone(),
                    file: PathBuf::from(layout.empty_disk(name)),
                    bytes,
                });
            }
            VolumeSource::HostDisk(host) => plan.steps.extend(host_disk_step(&field, host)?),
            VolumeSource::CloudInitNoCloud(data) => {
                plan.steps.push(cloud_init::iso_step(
                    vmi,
                    layout,
                    index,
                    Flavor::NoCloud,
                    data,
                    Secrets::None,
                )?);
            }
            VolumeSource::CloudInitConfigDrive(data) => {
                plan.steps.push(cloud_init::iso_step(
                    vmi,
                    layout,
                    index,
                    Flavor::ConfigDrive,
                    data,
                    Secrets::None,
                )?);
            }
            VolumeSource::Ephemeral(_)
            | VolumeSource::PersistentVolumeClaim(_)
            | VolumeSource::DataVolume(_)
            | VolumeSource::ConfigMap(_)
            | VolumeSource::Secret(_)
            | VolumeSource::ServiceAccount(_)
            | VolumeSource::DownwardApi(_)
            | VolumeSource::DownwardMetrics
            | VolumeSource::Sysprep(_)
            | VolumeSource::MemoryDump(_)
            | VolumeSource::ContainerPath(_) => {
                return Err(volume_error(
                    &field,
                    format!(
                        "volume {name} needs a Kubernetes cluster; local mode supports containerDisk, emptyDisk, hostDisk and cloud-init"
                    ),
                ));
            }
        }
    }
    Ok(plan)
}

/// Applies the planned steps in order, except those that wait for the defined domain.
pub async fn apply(steps: &[Step], reaper: &impl ToolRunner) -> Result<(), PrepareError> {
    for step in steps {
        match step {
            Step::Link { target, link: path } => link(target, path)?,
            Step::Overlay {
                field,
                image,
                format,
                overlay,
            } => {
                create_parent(overlay)?;
                let mut command = Command::new("qemu-img");
                command
                    .args(["create", "-q", "-f", "qcow2", "-F", format, "-b"])
                    .arg(image)
                    .arg(overlay);
                run_tool(reaper, "qemu-img", field, &mut command).await?;
            }
            Step::EmptyDisk { field, file, bytes } => {
                create_parent(file)?;
                let mut command = Command::new("qemu-img");
                command
                    .args(["create", "-q", "-f", "qcow2"])
                    .arg(file)
                    .arg(bytes.to_string());
                run_tool(reaper, "qemu-img", field, &mut command).await?;
            }
            Step::CreateHostDisk { path, bytes } => {
                create_parent(path)?;
                let file = std::fs::File::create(path).map_err(io(path))?;
                file.set_len(*bytes).map_err(io(path))?;
            }
            Step::Iso {
                field,
                iso,
                label,
                files,
            } => crate::iso::from_files(reaper, field, iso, label, files).await?,
            Step::IsoOfDir { field, iso, label, dir } => crate::iso::from_dir(reaper, field, iso, label, dir).await?,
            Step::ConfigDrive { .. } => {}
        }
    }
    Ok(())
}

/// Applies the steps that wait for the defined domain (`domain`, libvirt's XML of it).
pub async fn apply_after_define(
    steps: &[Step],
    domain: &crate::domain::Domain,
    reaper: &impl ToolRunner,
) -> Result<(), PrepareError> {
    for step in steps {
        if let Step::ConfigDrive {
            field,
            iso,
            meta,
            files,
            tagged,
        } = step
        {
            let mut meta = meta.clone();
            meta.devices = cloud_init::tagged_devices(domain, tagged);
            let mut all = vec![("openstack/latest/meta_data.json".to_owned(), meta.to_json())];
            all.extend(files.iter().cloned());
            crate::iso::from_files(reaper, field, iso, "config-2", &all).await?;
        }
    }
    Ok(())
}

/// Whether any step waits for the defined domain.
#[must_use]
pub fn has_steps_after_define(steps: &[Step]) -> bool {
    steps.iter().any(|s| matches!(s, Step::ConfigDrive { .. }))
}

fn create_parent(path: &Path) -> Result<(), PrepareError> {
    match path.parent() {
        Some(parent) => std::fs::create_dir_all(parent).map_err(io(parent)),
        None => Ok(()),
    }
}

/// Links for the kernel-boot kernel and initrd.
fn kernel_boot_links(
    vmi: &VirtualMachineInstance,
    layout: &PathLayout,
    store: &ImageStore,
) -> Result<Vec<Step>, PrepareError> {
    let Some(container) = vmi.kernel_boot_container() else {
        return Ok(Vec::new());
    };
    let field = "spec.domain.firmware.kernelBoot.container";
    let root = match store
        .locate(&container.image)
        .map_err(|e| volume_error(&format!("{field}.image"), e))?
    {
        ImageLocation::Root(root) if root.is_dir() => root,
        ImageLocation::Root(root) => {
            return Err(volume_error(
                &format!("{field}.image"),
                format!(
                    "image {} is not in the local image store (looked in {})",
                    container.image,
                    root.display()
                ),
            ));
        }
        ImageLocation::File(_) => {
            return Err(volume_error(
                &format!("{field}.image"),
                "a kernel-boot image must be an image, not a file:// reference",
            ));
        }
    };
    let mut steps = Vec::new();
    for (key, path) in [
        ("kernelPath", &container.kernel_path),
        ("initrdPath", &container.initrd_path),
    ] {
        let Some(path) = path else { continue };
        let file = ImageStore::file_in_image(&root, path).ok_or_else(|| {
            volume_error(
                &format!("{field}.{key}"),
                format!("image {} has no file {path}", container.image),
            )
        })?;
        steps.push(Step::Link {
            target: file,
            link: PathBuf::from(layout.kernel_boot_artifact(path)),
        });
    }
    Ok(steps)
}

/// Checks a hostDisk; `DiskOrCreate` of a missing file plans its creation.
pub(crate) fn host_disk_step(
    field: &str,
    host: &kubevirt_api::v1::HostDiskSource,
) -> Result<Option<Step>, PrepareError> {
    let path = Path::new(&host.path);
    if !path.is_absolute() {
        return Err(volume_error(
            &format!("{field}.hostDisk.path"),
            "must be an absolute path",
        ));
    }
    match host.disk_type.as_str() {
        "Disk" if path.is_file() => Ok(None),
        "Disk" => Err(volume_error(
            &format!("{field}.hostDisk.path"),
            format!("{} does not exist", host.path),
        )),
        "DiskOrCreate" if path.exists() => Ok(None),
        "DiskOrCreate" => {
            let capacity = host
                .capacity
                .as_ref()
                .ok_or_else(|| volume_error(&format!("{field}.hostDisk.capacity"), "DiskOrCreate needs a capacity"))?;
            let bytes =
                quantity::to_bytes(capacity).map_err(|e| volume_error(&format!("{field}.hostDisk.capacity"), e))?;
            Ok(Some(Step::CreateHostDisk {
                path: path.to_owned(),
                bytes,
            }))
        }
        other => Err(volume_error(
            &format!("{field}.hostDisk.type"),
            format!("type {other} is not Disk or DiskOrCreate"),
        )),
    }
}
