//! Local mode's input: a VMI (or a VM's template) from a manifest file, given the UID the API
//! server would have given it, and the rendering context this machine offers (the domain type,
//! and containerDisk formats read from the local image store).

use std::path::Path;

use kubevirt_api::Manifest;
use kubevirt_api::v1::VirtualMachineInstance;

use crate::domain::{ConvertContext, DomainType};
use crate::image_store::{ImageStore, image_format};

/// Loads the VMI (or the VM's template) from `path`, with a UID.
///
/// # Errors
/// [`kubevirt_api::ManifestError`] naming the file and the field.
pub fn load_vmi(path: &Path) -> Result<VirtualMachineInstance, kubevirt_api::ManifestError> {
    let mut vmi = Manifest::from_path(path)?.into_vmi(path)?;
    ensure_uid(&mut vmi);
    Ok(vmi)
}

/// Gives a VMI read from a file the UID the API server would have given it.
fn ensure_uid(vmi: &mut VirtualMachineInstance) {
    if vmi.metadata.uid.as_deref().is_none_or(str::is_empty) {
        let uid = std::fs::read_to_string("/proc/sys/kernel/random/uuid").map(|u| u.trim().to_owned());
        vmi.metadata.uid = Some(uid.unwrap_or_else(|_| "00000000-0000-4000-8000-000000000000".to_owned()));
    }
}

/// The context for rendering on this machine: `domain_type`, and containerDisk formats read from
/// the local image store (an image that is not there is assumed raw, with a warning).
#[must_use]
pub fn local_context(vmi: &VirtualMachineInstance, domain_type: DomainType, store: &ImageStore) -> ConvertContext {
    let mut ctx = ConvertContext {
        domain_type,
        ..ConvertContext::default()
    };
    for volume in &vmi.spec.volumes {
        if let Some(disk) = &volume.container_disk {
            let format = match store.container_disk(&disk.image, disk.path.as_deref()) {
                Ok(file) => image_format(&file).unwrap_or("raw"),
                Err(e) => {
                    eprintln!(
                        "virt-launcher: warning: volume {}: {e}; assuming a raw image",
                        volume.name
                    );
                    "raw"
                }
            };
            ctx.container_disk_formats
                .insert(volume.name.clone(), format.to_owned());
        }
    }
    ctx
}
