//! `virt-launcher render --vmi FILE [--with FILE]...`: print the domain XML a VMI (or a VM, with
//! the instance type and preference it names) becomes.

use std::path::{Path, PathBuf};

use crate::domain::{ConvertError, render};
use crate::emulation::EmulationFlags;
use crate::image_store::ImageStore;
use crate::local::manifest::{load_vmi, local_context};

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
    /// The host's CPUs, for dedicated CPUs.
    #[error(transparent)]
    HostCpus(#[from] crate::host_cpus::HostCpusError),
}

/// Renders the manifest at `path` into domain XML.
///
/// # Errors
/// [`RenderError`] naming the file and the field.
pub fn render_file(path: &Path, with: &[PathBuf], flags: EmulationFlags) -> Result<String, RenderError> {
    let vmi = load_vmi(path, with)?;
    let convert = |source| RenderError::Convert {
        path: path.display().to_string(),
        source,
    };
    let domain_type = flags.domain_type().map_err(convert)?;
    let ctx = local_context(&vmi, domain_type, &ImageStore::from_env())?;
    let domain = render(&vmi, &ctx).map_err(convert)?;
    Ok(domain.to_xml()?)
}
