//! Checks a containerDisk image before the guest may use it, as upstream's launcher does: `qemu-img
//! info` reads it under a memory limit (`--disk-memory-limit`, upstream's
//! `developerConfiguration.diskVerification.memoryLimit`) and 10 s of CPU, so a crafted image
//! cannot exhaust the pod; then only raw images and qcow2 images without a backing file are taken.
//! A backing file would let an image from a registry name any file in the pod as the guest's disk.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use kubevirt_api::v1::VirtualMachineInstance;
use serde::Deserialize;

use crate::domain::PathLayout;
use crate::supervisor::reaper::ToolRunner;
use crate::volumes::PrepareError;

/// Upstream's default memory limit (2000 MiB).
pub const DEFAULT_DISK_MEMORY_LIMIT: u64 = 2000 * 1024 * 1024;

/// Upstream's CPU limit for `qemu-img info`, in seconds.
const CPU_LIMIT_SECONDS: u64 = 10;

/// What `qemu-img info --output=json` says of an image (the fields that count).
#[derive(Debug, Default, Deserialize, PartialEq, Eq)]
pub struct ImageInfo {
    /// `raw`, `qcow2`, ...
    pub format: String,
    /// The image's backing file, if any.
    #[serde(rename = "backing-filename")]
    pub backing_file: Option<String>,
}

/// The image's format if the guest may use it: raw, or qcow2 without a backing file.
///
/// # Errors
/// Why it may not, in upstream's words.
pub fn verify(info: &ImageInfo) -> Result<&'static str, String> {
    match info.format.as_str() {
        "raw" => Ok("raw"),
        "qcow2" => match info.backing_file.as_deref().filter(|b| !b.is_empty()) {
            Some(backing) => Err(format!("expected no backing file, but found {backing}")),
            None => Ok("qcow2"),
        },
        other => Err(format!("unsupported image format: {other}")),
    }
}

/// Reads `image` with `qemu-img info` within `memory_limit` bytes of address space, and checks
/// it; returns its format. `field` names the volume in errors.
///
/// # Errors
/// [`PrepareError::Tool`] when `qemu-img` fails or its limits stop it, [`PrepareError::Volume`]
/// when the image may not be used.
pub async fn check(
    tools: &impl ToolRunner,
    field: &str,
    image: &Path,
    memory_limit: u64,
) -> Result<&'static str, PrepareError> {
    let mut command = Command::new("qemu-img");
    command.args(["info", "--output=json"]).arg(image);
    limit_resources(&mut command, memory_limit);
    let output = tools.run_capturing(&mut command).await?;
    if !output.exit.is_success() {
        return Err(PrepareError::Tool {
            tool: "qemu-img",
            field: field.to_owned(),
            message: format!(
                "failed to invoke qemu-img ({}, memory limit {memory_limit} bytes): {}",
                output.exit,
                output.stderr.trim()
            ),
        });
    }
    let info: ImageInfo = serde_json::from_str(&output.stdout).map_err(|e| PrepareError::Tool {
        tool: "qemu-img",
        field: field.to_owned(),
        message: format!("failed to parse disk info: {e}"),
    })?;
    verify(&info).map_err(|message| PrepareError::Volume {
        field: format!("{field}.containerDisk"),
        message: format!("invalid image in containerDisk: {message}"),
    })
}

/// Checks each mounted containerDisk image of `vmi` whose format virt-handler did not report,
/// and records its format in `formats`. A missing image is left to the volume plan, which names
/// it.
///
/// # Errors
/// As [`check`].
pub async fn check_unreported(
    tools: &impl ToolRunner,
    vmi: &VirtualMachineInstance,
    layout: &PathLayout,
    formats: &mut BTreeMap<String, String>,
    memory_limit: u64,
) -> Result<(), PrepareError> {
    for (index, volume) in vmi.spec.volumes.iter().enumerate() {
        if volume.container_disk.is_none() || formats.contains_key(&volume.name) {
            continue;
        }
        let image = PathBuf::from(layout.container_disk_image(index));
        if image.exists() {
            let format = check(tools, &format!("spec.volumes[{index}]"), &image, memory_limit).await?;
            formats.insert(volume.name.clone(), format.to_owned());
        }
    }
    Ok(())
}

/// Limits the child's address space to `memory_limit` bytes (in whole KiB, as `ulimit -v`) and
/// its CPU time to [`CPU_LIMIT_SECONDS`].
#[allow(unsafe_code)]
fn limit_resources(command: &mut Command, memory_limit: u64) {
    use nix::sys::resource::{Resource, setrlimit};
    use std::os::unix::process::CommandExt as _;
    let bytes = memory_limit / 1024 * 1024;
    // SAFETY: the closure runs in the child between fork and exec and makes only setrlimit
    // syscalls, which are async-signal-safe; it touches no memory shared with the parent.
    unsafe {
        command.pre_exec(move || {
            setrlimit(Resource::RLIMIT_AS, bytes, bytes)?;
            setrlimit(Resource::RLIMIT_CPU, CPU_LIMIT_SECONDS, CPU_LIMIT_SECONDS)?;
            Ok(())
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::supervisor::reaper::DirectRunner;

    fn info(format: &str, backing: Option<&str>) -> ImageInfo {
        ImageInfo {
            format: format.to_owned(),
            backing_file: backing.map(str::to_owned),
        }
    }

    #[test]
    fn raw_and_qcow2_without_a_backing_file_are_taken() {
        assert_eq!(verify(&info("raw", None)), Ok("raw"));
        assert_eq!(verify(&info("qcow2", None)), Ok("qcow2"));
        assert_eq!(verify(&info("qcow2", Some(""))), Ok("qcow2"));
        assert_eq!(
            verify(&info("qcow2", Some("/etc/shadow"))),
            Err("expected no backing file, but found /etc/shadow".to_owned())
        );
        assert_eq!(
            verify(&info("vmdk", None)),
            Err("unsupported image format: vmdk".to_owned())
        );
    }

    fn qemu_img(args: &[&str]) {
        let status = Command::new("qemu-img")
            .args(args)
            .status()
            .expect("qemu-img (make deps installs it)");
        assert!(status.success(), "qemu-img {args:?}");
    }

    #[tokio::test]
    #[cfg_attr(
        not(feature = "host-tests"),
        ignore = "needs qemu-img: make test runs it (feature host-tests)"
    )]
    async fn qemu_img_reads_images_within_the_memory_limit_and_fails_beyond_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let base = dir.path().join("base.qcow2");
        let layered = dir.path().join("layered.qcow2");
        let raw = dir.path().join("disk.img");
        qemu_img(&["create", "-q", "-f", "qcow2", &base.to_string_lossy(), "1M"]);
        qemu_img(&[
            "create",
            "-q",
            "-f",
            "qcow2",
            "-F",
            "qcow2",
            "-b",
            &base.to_string_lossy(),
            &layered.to_string_lossy(),
        ]);
        std::fs::write(&raw, vec![0u8; 4096]).expect("raw image");
        let field = "spec.volumes[0]";
        let limit = DEFAULT_DISK_MEMORY_LIMIT;
        assert_eq!(check(&DirectRunner, field, &base, limit).await.expect("qcow2"), "qcow2");
        assert_eq!(check(&DirectRunner, field, &raw, limit).await.expect("raw"), "raw");
        let refused = check(&DirectRunner, field, &layered, limit)
            .await
            .expect_err("a backing file");
        assert!(refused.is_bad_input(), "{refused}");
        assert!(refused.to_string().contains("expected no backing file"), "{refused}");
        // 1 MiB of address space cannot even load qemu-img: the limit is applied.
        let starved = check(&DirectRunner, field, &base, 1 << 20)
            .await
            .expect_err("over the limit");
        assert!(starved.to_string().contains("failed to invoke qemu-img"), "{starved}");
    }
}
