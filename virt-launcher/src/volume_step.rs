//! The vocabulary of volume preparation, shared by the local plan ([`crate::volumes`]), the pod's
//! ([`crate::cluster::pod_volumes`]) and the makers of its images ([`crate::cloud_init`],
//! [`crate::iso`]): the steps, their error, and running a tool for one.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::supervisor::reaper::{ReaperError, ToolRunner};

/// Why a volume could not be prepared.
#[derive(Debug, thiserror::Error)]
pub enum PrepareError {
    /// The spec asks for something local mode cannot provide.
    #[error("{field}: {message}")]
    Volume {
        /// The field path.
        field: String,
        /// What is wrong.
        message: String,
    },
    /// A tool (`qemu-img`, `xorrisofs`) failed.
    #[error("{tool} failed for {field}: {message}")]
    Tool {
        /// The tool.
        tool: &'static str,
        /// The field path of the volume.
        field: String,
        /// Its standard error.
        message: String,
    },
    /// A tool could not be run.
    #[error(transparent)]
    Spawn(#[from] ReaperError),
    /// A file could not be written.
    #[error("cannot write {path}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

impl PrepareError {
    /// Whether the VMI itself is at fault (bad input), rather than the machine.
    #[must_use]
    pub fn is_bad_input(&self) -> bool {
        matches!(self, Self::Volume { .. })
    }
}

pub(crate) fn io(path: &Path) -> impl FnOnce(std::io::Error) -> PrepareError + '_ {
    move |source| PrepareError::Io {
        path: path.to_owned(),
        source,
    }
}

pub(crate) fn volume_error(field: &str, message: impl std::fmt::Display) -> PrepareError {
    PrepareError::Volume {
        field: field.to_owned(),
        message: message.to_string(),
    }
}

/// One step that prepares a volume. Steps are planned without side effects (so a bad volume is
/// refused before anything starts) and applied later.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Link an image-store file to where the domain expects it.
    Link {
        /// The file in the store.
        target: PathBuf,
        /// The link.
        link: PathBuf,
    },
    /// A qcow2 overlay over a containerDisk image.
    Overlay {
        /// Field path of the volume.
        field: String,
        /// The (linked) image.
        image: PathBuf,
        /// Its format.
        format: &'static str,
        /// The overlay to create.
        overlay: PathBuf,
    },
    /// A new sparse qcow2 disk.
    EmptyDisk {
        /// Field path of the volume.
        field: String,
        /// The file.
        file: PathBuf,
        /// Virtual size.
        bytes: u64,
    },
    /// A sparse raw hostDisk that `DiskOrCreate` asked for.
    CreateHostDisk {
        /// The file.
        path: PathBuf,
        /// Size.
        bytes: u64,
    },
    /// An ISO image of generated files (a NoCloud seed).
    Iso {
        /// Field path of the volume.
        field: String,
        /// The ISO.
        iso: PathBuf,
        /// Volume label.
        label: &'static str,
        /// File paths (relative to the image root) and contents.
        files: Vec<(String, Vec<u8>)>,
    },
    /// An ISO image of a mounted directory (ConfigMap, Secret, downward API, service account,
    /// sysprep).
    IsoOfDir {
        /// Field path of the volume.
        field: String,
        /// The ISO.
        iso: PathBuf,
        /// Volume label.
        label: String,
        /// The directory.
        dir: PathBuf,
    },
    /// A ConfigDrive ISO, made once the domain is defined (its metadata lists the tagged NICs'
    /// PCI addresses).
    ConfigDrive {
        /// Field path of the volume.
        field: String,
        /// The ISO.
        iso: PathBuf,
        /// `meta_data.json`, without devices yet.
        meta: crate::cloud_init::metadata::ConfigDriveMetadata,
        /// The other files.
        files: Vec<(String, Vec<u8>)>,
        /// Interfaces whose addresses go into the metadata.
        tagged: Vec<crate::cloud_init::metadata::TaggedInterface>,
    },
}

pub(crate) async fn run_tool(
    reaper: &impl ToolRunner,
    tool: &'static str,
    field: &str,
    command: &mut Command,
) -> Result<(), PrepareError> {
    let output = reaper.run(command).await?;
    let (exit, stderr) = (output.exit, output.stderr);
    if exit.is_success() {
        Ok(())
    } else {
        Err(PrepareError::Tool {
            tool,
            field: field.to_owned(),
            message: format!("{exit}: {}", stderr.trim()),
        })
    }
}

/// Standard base64 with optional padding and whitespace.
pub(crate) fn decode_base64(text: &str) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let (mut buffer, mut bits) = (0u32, 0u32);
    for byte in text.bytes().filter(|b| !b.is_ascii_whitespace() && *b != b'=') {
        let value = match byte {
            b'A'..=b'Z' => byte - b'A',
            b'a'..=b'z' => byte - b'a' + 26,
            b'0'..=b'9' => byte - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            _ => return None,
        };
        buffer = (buffer << 6) | u32::from(value);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push(u8::try_from((buffer >> bits) & 0xff).ok()?);
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::decode_base64;

    #[test]
    fn base64_decodes_with_and_without_padding() {
        assert_eq!(decode_base64("I2Nsb3VkLWNvbmZpZwo="), Some(b"#cloud-config\n".to_vec()));
        assert_eq!(decode_base64("aGk"), Some(b"hi".to_vec()));
        assert_eq!(decode_base64("not base64!"), None);
    }
}
