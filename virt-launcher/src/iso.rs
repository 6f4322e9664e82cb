//! ISO 9660 images for the guest (cloud-init seeds and config volumes), made with `xorrisofs` as
//! upstream makes them: Joliet and Rock Ridge names, written to `<iso>.staging` and renamed, so a
//! half-written image is never attached.

use std::path::Path;
use std::process::Command;

use crate::supervisor::reaper::ToolRunner;
use crate::volume_step::{PrepareError, io, run_tool};

fn staging(iso: &Path) -> std::path::PathBuf {
    let mut name = iso.as_os_str().to_owned();
    name.push(".staging");
    name.into()
}

async fn finish(reaper: &impl ToolRunner, field: &str, iso: &Path, command: &mut Command) -> Result<(), PrepareError> {
    let staged = staging(iso);
    if let Some(parent) = iso.parent() {
        std::fs::create_dir_all(parent).map_err(io(parent))?;
    }
    run_tool(reaper, "xorrisofs", field, command).await?;
    std::fs::rename(&staged, iso).map_err(io(iso))
}

/// An ISO labelled `label` holding `files` (paths relative to the image root, e.g.
/// `openstack/latest/user_data`); the files are staged in `<iso>.d` and removed after.
pub async fn from_files(
    reaper: &impl ToolRunner,
    field: &str,
    iso: &Path,
    label: &str,
    files: &[(String, Vec<u8>)],
) -> Result<(), PrepareError> {
    let data = iso.with_extension("d");
    let _ = std::fs::remove_dir_all(&data);
    for (name, content) in files {
        let path = data.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(io(parent))?;
        }
        std::fs::write(&path, content).map_err(io(&path))?;
    }
    let mut command = Command::new("xorrisofs");
    command
        .arg("-output")
        .arg(staging(iso))
        .args(["-volid", label, "-joliet", "-rock", "-partition_cyl_align", "on"])
        .arg(&data);
    let result = finish(reaper, field, iso, &mut command).await;
    let _ = std::fs::remove_dir_all(&data);
    result
}

/// An ISO labelled `label` holding the entries of `dir` (a mounted ConfigMap, Secret, downward
/// API or service account token), links followed. The kubelet's own `..data` entries are left
/// out: the guest sees the keys only.
pub async fn from_dir(
    reaper: &impl ToolRunner,
    field: &str,
    iso: &Path,
    label: &str,
    dir: &Path,
) -> Result<(), PrepareError> {
    let entries: Vec<String> = crate::mounted::entries(dir)
        .map_err(io(dir))?
        .iter()
        .map(|p| p.file_name().unwrap_or_default().to_string_lossy().into_owned())
        .collect();
    let mut command = Command::new("xorrisofs");
    command
        .arg("-output")
        .arg(staging(iso))
        .args(["-follow-links", "-volid", label, "-joliet", "-rock", "-graft-points"])
        .args(["-partition_cyl_align", "on"]);
    for entry in &entries {
        command.arg(format!("{entry}={}", dir.join(entry).display()));
    }
    finish(reaper, field, iso, &mut command).await
}
