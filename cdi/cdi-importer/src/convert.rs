//! Images that cannot be written as they come (qcow2, VMDK, VDI, VHD, VHDX) are converted to raw
//! by `qemu-img`, as upstream's importer does: `qemu-img info` reads the virtual size, and
//! `qemu-img convert -t writeback -O raw` writes the disk. The image is a stranger's: its format
//! is always given (`-f`, never guessed), and one that names a backing file or an external data
//! file is refused before it is converted, so that it cannot pull a file of the importer's (its
//! environment, its service account token) or a URL into the disk.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Why `qemu-img` failed.
#[derive(Debug, thiserror::Error)]
pub enum ConvertError {
    /// It could not be started.
    #[error("running {program}: {source}")]
    Spawn {
        /// The program.
        program: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// It exited with an error.
    #[error("{what} failed: {stderr}")]
    Failed {
        /// The command, in short.
        what: String,
        /// What it printed.
        stderr: String,
    },
    /// Its output could not be read.
    #[error("reading qemu-img info's output: {0}")]
    Info(String),
    /// The image refers to another file.
    #[error("the image names {0}, which an import never follows")]
    External(String),
}

/// Reads and converts disk images.
pub trait Converter {
    /// The size of the disk `image` (in `format`, qemu-img's name) holds, as the guest sees it;
    /// an image that names a backing or data file is refused.
    ///
    /// # Errors
    /// [`ConvertError`].
    fn virtual_size(&self, image: &Path, format: &str) -> Result<u64, ConvertError>;

    /// Writes `image` (in `format`) as a raw disk to `target`, which exists (a file or a block
    /// device).
    ///
    /// # Errors
    /// [`ConvertError`].
    fn convert_to_raw(&self, image: &Path, format: &str, target: &Path) -> Result<(), ConvertError>;
}

/// The real `qemu-img`.
#[derive(Clone, Debug)]
pub struct QemuImg {
    program: PathBuf,
}

impl Default for QemuImg {
    fn default() -> Self {
        Self {
            program: PathBuf::from("qemu-img"),
        }
    }
}

impl QemuImg {
    /// `qemu-img` at `program`.
    #[must_use]
    pub fn at(program: PathBuf) -> Self {
        Self { program }
    }

    fn run(&self, args: &[&std::ffi::OsStr], what: &str) -> Result<Vec<u8>, ConvertError> {
        let output = Command::new(&self.program)
            .args(args)
            .output()
            .map_err(|source| ConvertError::Spawn {
                program: self.program.clone(),
                source,
            })?;
        if !output.status.success() {
            return Err(ConvertError::Failed {
                what: what.to_owned(),
                stderr: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
            });
        }
        Ok(output.stdout)
    }
}

/// The `virtual-size` of `qemu-img info --output=json`, for an image that names no other file.
///
/// # Errors
/// [`ConvertError::Info`] when the output has no size; [`ConvertError::External`] for a backing
/// file or an external data file.
pub fn parse_virtual_size(info: &[u8]) -> Result<u64, ConvertError> {
    let value: serde_json::Value = serde_json::from_slice(info).map_err(|e| ConvertError::Info(e.to_string()))?;
    let named = |v: &serde_json::Value| v.as_str().map(str::to_owned);
    if let Some(backing) = value.get("backing-filename").and_then(named) {
        return Err(ConvertError::External(format!("the backing file {backing:?}")));
    }
    if let Some(data) = value.pointer("/format-specific/data/data-file").and_then(named) {
        return Err(ConvertError::External(format!("the data file {data:?}")));
    }
    value
        .get("virtual-size")
        .and_then(serde_json::Value::as_u64)
        .ok_or_else(|| ConvertError::Info("no virtual-size".to_owned()))
}

impl Converter for QemuImg {
    fn virtual_size(&self, image: &Path, format: &str) -> Result<u64, ConvertError> {
        let out = self.run(
            &[
                "info".as_ref(),
                "-f".as_ref(),
                format.as_ref(),
                "--output=json".as_ref(),
                image.as_os_str(),
            ],
            "qemu-img info",
        )?;
        parse_virtual_size(&out)
    }

    fn convert_to_raw(&self, image: &Path, format: &str, target: &Path) -> Result<(), ConvertError> {
        self.run(
            &[
                "convert".as_ref(),
                "-f".as_ref(),
                format.as_ref(),
                "-t".as_ref(),
                "writeback".as_ref(),
                "-O".as_ref(),
                "raw".as_ref(),
                image.as_os_str(),
                target.as_os_str(),
            ],
            "qemu-img convert",
        )
        .map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_virtual_size_is_read_from_info_and_its_absence_is_an_error() {
        let info = br#"{"virtual-size": 1073741824, "filename": "disk.qcow2", "format": "qcow2"}"#;
        assert_eq!(parse_virtual_size(info).expect("size"), 1 << 30);
        for bad in [&b"{}"[..], b"not json", br#"{"virtual-size": "big"}"#] {
            assert!(matches!(parse_virtual_size(bad), Err(ConvertError::Info(_))));
        }
    }

    #[test]
    fn an_image_naming_another_file_is_refused() {
        let backing = br#"{"virtual-size": 1048576, "backing-filename": "/proc/self/environ"}"#;
        let error = parse_virtual_size(backing).expect_err("a backing file");
        assert_eq!(
            error.to_string(),
            "the image names the backing file \"/proc/self/environ\", which an import never follows"
        );
        let data =
            br#"{"virtual-size": 1048576, "format-specific": {"type": "qcow2", "data": {"data-file": "/etc/shadow"}}}"#;
        assert!(matches!(parse_virtual_size(data), Err(ConvertError::External(_))));
    }

    #[test]
    fn a_missing_program_is_named() {
        let error = QemuImg::at(PathBuf::from("/nonexistent/qemu-img"))
            .virtual_size(Path::new("/x"), "qcow2")
            .expect_err("missing");
        assert!(error.to_string().contains("/nonexistent/qemu-img"), "{error}");
    }
}
