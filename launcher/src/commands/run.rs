//! `virt-launcher run --vmi FILE`: boot a manifest on this machine.
//!
//! Running needs the launcher's private libvirt supervisor, which is not built yet; until it is,
//! this command checks the manifest and says plainly what is missing instead of pretending.

use std::path::Path;

use super::render::{EmulationFlags, RenderError, render_file};

/// Why `run` did not run the VM.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The manifest is invalid.
    #[error(transparent)]
    Render(#[from] RenderError),
    /// Local mode is not available in this build.
    #[error(
        "the manifest is valid, but `virt-launcher run` cannot boot it yet: local mode needs the private libvirt supervisor (issue #4, not implemented)"
    )]
    NotImplemented,
}

/// Validates the manifest, then reports that local mode is missing.
pub fn run(path: &Path, flags: EmulationFlags) -> Result<(), RunError> {
    render_file(path, flags)?;
    Err(RunError::NotImplemented)
}
