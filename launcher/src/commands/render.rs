//! `virt-launcher render --vmi FILE`: print the domain XML a VMI becomes.

use std::path::Path;

use kubevirt_api::Manifest;
use kubevirt_api::v1::VirtualMachineInstance;

use crate::domain::{ConvertContext, ConvertError, DomainType, render};
use crate::image_store::{ImageStore, image_format};

/// The emulation flags shared by `render` and `run`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EmulationFlags {
    /// Upstream's `--allow-emulation`: TCG where `/dev/kvm` is absent.
    pub allow_emulation: bool,
    /// TCG even where `/dev/kvm` exists.
    pub force_emulation: bool,
}

/// Why `render` failed.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    /// The manifest could not be loaded.
    #[error(transparent)]
    Manifest(#[from] kubevirt_api::ManifestError),
    /// The VMI cannot become a domain.
    #[error("{path}: {source}")]
    Convert {
        /// The manifest.
        path: String,
        /// What is wrong.
        source: ConvertError,
    },
    /// The domain could not be written as XML.
    #[error(transparent)]
    Xml(#[from] crate::domain::model::XmlError),
}

/// Loads the VMI (or the VM's template) from `path`.
pub fn load_vmi(path: &Path) -> Result<VirtualMachineInstance, kubevirt_api::ManifestError> {
    Manifest::from_path(path)?.into_vmi(path)
}

/// The context for rendering on this machine: KVM presence, and containerDisk formats read from
/// the local image store (an image that is not there is assumed raw, with a warning).
pub fn local_context(
    vmi: &VirtualMachineInstance,
    flags: EmulationFlags,
    store: &ImageStore,
) -> Result<ConvertContext, ConvertError> {
    let is_kvm_present = Path::new("/dev/kvm").exists();
    let mut ctx = ConvertContext {
        domain_type: DomainType::decide(is_kvm_present, flags.allow_emulation, flags.force_emulation)?,
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
    Ok(ctx)
}

/// Gives a VMI read from a file the UID the API server would have given it.
pub fn ensure_uid(vmi: &mut VirtualMachineInstance) {
    if vmi.metadata.uid.as_deref().is_none_or(str::is_empty) {
        let uid = std::fs::read_to_string("/proc/sys/kernel/random/uuid").map(|u| u.trim().to_owned());
        vmi.metadata.uid = Some(uid.unwrap_or_else(|_| "00000000-0000-4000-8000-000000000000".to_owned()));
    }
}

/// Renders the manifest at `path` into domain XML.
pub fn render_file(path: &Path, flags: EmulationFlags) -> Result<String, RenderError> {
    let mut vmi = load_vmi(path)?;
    ensure_uid(&mut vmi);
    let convert = |source| RenderError::Convert {
        path: path.display().to_string(),
        source,
    };
    let ctx = local_context(&vmi, flags, &ImageStore::from_env()).map_err(convert)?;
    let domain = render(&vmi, &ctx).map_err(convert)?;
    Ok(domain.to_xml()?)
}
