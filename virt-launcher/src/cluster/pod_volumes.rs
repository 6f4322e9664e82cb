//! Volumes in a launcher pod: the kubelet, the containerDisk sidecars and virt-handler have put the
//! images, claims and host disks at upstream's paths; the launcher only adds what it owns
//! (overlays, empty disks, cloud-init ISOs). Anything missing is an error naming the volume.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use kubevirt_api::quantity;
use kubevirt_api::v1::{VirtualMachineInstance, VolumeSource};

use super::config_disks::config_disk_step;
use crate::cloud_init::{self, Flavor, Secrets};
use crate::domain::PathLayout;
use crate::image_store::image_format;
use crate::volumes::{Plan, PrepareError, Step, host_disk_step, io, volume_error};

/// Volumes planned for a pod, and which claims are block devices.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodPlan {
    /// Steps and containerDisk formats.
    pub plan: Plan,
    /// PVC, DataVolume and ephemeral volumes that are block devices (`/dev/<volume>`).
    pub block_volumes: BTreeSet<String>,
}

/// Where a claim's data is: the image file of a filesystem claim, or the block device.
fn claim(layout: &PathLayout, name: &str, field: &str) -> Result<(PathBuf, bool), PrepareError> {
    let file = PathBuf::from(layout.pvc_image(name));
    if file.is_file() {
        return Ok((file, false));
    }
    let device = Path::new("/dev").join(name);
    if device.exists() {
        return Ok((device, true));
    }
    Err(volume_error(
        field,
        format!(
            "claim of volume {name} is neither at {} nor at {}",
            file.display(),
            device.display()
        ),
    ))
}

/// Plans the volumes of `vmi` in a pod. `formats` are the containerDisk formats virt-handler
/// reported (`disksInfo`); a missing one is read from the image.
pub fn plan_in_pod(
    vmi: &VirtualMachineInstance,
    layout: &PathLayout,
    formats: &BTreeMap<String, String>,
) -> Result<PodPlan, PrepareError> {
    let mut pod = PodPlan::default();
    check_kernel_boot(vmi, layout)?;
    for (index, volume) in vmi.spec.volumes.iter().enumerate() {
        let field = format!("spec.volumes[{index}]");
        let name = volume.name.as_str();
        match volume.source().map_err(|e| volume_error(&field, e))? {
            VolumeSource::ContainerDisk(_) => {
                let (step, format) = container_disk_step(layout, index, name, &field, formats)?;
                pod.plan
                    .container_disk_formats
                    .insert(name.to_owned(), format.to_owned());
                pod.plan.steps.push(step);
            }
            VolumeSource::Ephemeral(_) => {
                let (backing, is_block) = claim(layout, name, &field)?;
                if is_block {
                    pod.block_volumes.insert(name.to_owned());
                }
                pod.plan.steps.push(Step::Overlay {
                    field,
                    image: backing,
                    format: "raw",
                    overlay: PathBuf::from(layout.overlay(name)),
                });
            }
            VolumeSource::PersistentVolumeClaim(_) | VolumeSource::DataVolume(_) => {
                if claim(layout, name, &field)?.1 {
                    pod.block_volumes.insert(name.to_owned());
                }
            }
            VolumeSource::EmptyDisk(empty) => {
                let bytes = quantity::to_bytes(&empty.capacity)
                    .map_err(|e| volume_error(&format!("{field}.emptyDisk.capacity"), e))?;
                pod.plan.steps.push(Step::EmptyDisk {
                    field,
                    file: PathBuf::from(layout.empty_disk(name)),
                    bytes,
                });
            }
            VolumeSource::HostDisk(host) => {
                // virt-handler mounts the host file under the volume's directory in the pod.
                let base = Path::new(&host.path)
                    .file_name()
                    .map(|b| b.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let mut in_pod = host.clone();
                in_pod.path = format!("{}/{base}", layout.vmi_disk_dir(name));
                pod.plan.steps.extend(host_disk_step(&field, &in_pod)?);
            }
            VolumeSource::CloudInitNoCloud(data) => pod.plan.steps.push(cloud_init::iso_step(
                vmi,
                layout,
                index,
                Flavor::NoCloud,
                data,
                Secrets::Pod(layout),
            )?),
            VolumeSource::CloudInitConfigDrive(data) => pod.plan.steps.push(cloud_init::iso_step(
                vmi,
                layout,
                index,
                Flavor::ConfigDrive,
                data,
                Secrets::Pod(layout),
            )?),
            source @ (VolumeSource::ConfigMap(_)
            | VolumeSource::Secret(_)
            | VolumeSource::ServiceAccount(_)
            | VolumeSource::DownwardApi(_)
            | VolumeSource::Sysprep(_)) => {
                pod.plan.steps.extend(config_disk_step(vmi, layout, index, &source)?);
            }
            VolumeSource::DownwardMetrics | VolumeSource::MemoryDump(_) | VolumeSource::ContainerPath(_) => {
                return Err(volume_error(
                    &field,
                    format!("volume {name}: this volume kind is not supported by the kubevirt-rs launcher yet"),
                ));
            }
        }
    }
    Ok(pod)
}

/// The overlay over a containerDisk image the sidecar mounted, and the image's format.
fn container_disk_step(
    layout: &PathLayout,
    index: usize,
    name: &str,
    field: &str,
    formats: &BTreeMap<String, String>,
) -> Result<(Step, &'static str), PrepareError> {
    let image = PathBuf::from(layout.container_disk_image(index));
    if !image.exists() {
        return Err(volume_error(
            &format!("{field}.containerDisk"),
            format!("image {} is not mounted", image.display()),
        ));
    }
    let format = match formats.get(name).map(String::as_str) {
        Some("qcow2") => "qcow2",
        Some("raw") => "raw",
        Some(other) => {
            return Err(volume_error(
                &format!("{field}.containerDisk"),
                format!("unknown image format {other}"),
            ));
        }
        None => image_format(&image).map_err(io(&image))?,
    };
    let overlay = PathBuf::from(layout.overlay(name));
    Ok((
        Step::Overlay {
            field: field.to_owned(),
            image,
            format,
            overlay,
        },
        format,
    ))
}

/// The kernel-boot sidecar puts the kernel and initrd under `<container disks>/kernel-boot/`.
fn check_kernel_boot(vmi: &VirtualMachineInstance, layout: &PathLayout) -> Result<(), PrepareError> {
    let container = vmi.kernel_boot_container();
    let Some(container) = container else { return Ok(()) };
    for (key, path) in [
        ("kernelPath", &container.kernel_path),
        ("initrdPath", &container.initrd_path),
    ] {
        if let Some(path) = path {
            let artifact = PathBuf::from(layout.kernel_boot_artifact(path));
            if !artifact.is_file() {
                return Err(volume_error(
                    &format!("spec.domain.firmware.kernelBoot.container.{key}"),
                    format!("{} is not mounted", artifact.display()),
                ));
            }
        }
    }
    Ok(())
}
