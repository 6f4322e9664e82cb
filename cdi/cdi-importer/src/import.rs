//! One import, start to end: the stream's compression comes off ([`layers`]); a raw image is
//! written into the target as it streams ([`sparse_copy`]), and so is a qcow2 image into a disk
//! file when its layout allows ([`qcow2_stream`]; with scratch space, a copy is saved there as it
//! streams, for qemu-img to convert should the layout not allow); any other format is first saved
//! to the scratch space and converted ([`crate::convert`]); a disk in a file is then grown to the size
//! asked for, within what the volume may hold ([`space`]). A failed import leaves no image file.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek as _, SeekFrom};
use std::path::{Path, PathBuf};

use crate::convert::{ConvertError, Converter};
use crate::format::{Compression, ImageFormat};
use crate::layers::{self, LayerError, Stream};
use crate::qcow2_stream::{self, StreamError};
use crate::space::{self, TooLarge};
use crate::sparse_copy::{self, CopyError, Holes, Written};

/// The name of the image in the scratch space (upstream's `tmpimage`).
pub const SCRATCH_IMAGE: &str = "tmpimage";
/// The reads that finish saving an image to the scratch space.
const SAVE_BUFFER: usize = 1024 * 1024;

/// Where the disk goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// A file on a filesystem volume (upstream's `/data/disk.img`).
    File(PathBuf),
    /// A block volume (upstream's `/dev/cdi-block-volume`).
    Block(PathBuf),
}

impl Target {
    /// Its path.
    #[must_use]
    pub fn path(&self) -> &Path {
        match self {
            Self::File(path) | Self::Block(path) => path,
        }
    }
}

/// What the import was asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// The size the disk should have (the claim's requested storage), when given.
    pub requested_size: Option<u64>,
    /// The share of a filesystem volume kept for the filesystem (`"0.06"`).
    pub filesystem_overhead: String,
    /// The scratch space, for images that must be converted.
    pub scratch: Option<PathBuf>,
    /// The stream is a disk's bytes as they are (a clone's): written without looking for an
    /// image format or compression in it.
    pub verbatim: bool,
}

/// What an import did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// The image's format.
    pub format: ImageFormat,
    /// The compression taken off, outermost first.
    pub compression: Vec<Compression>,
    /// The disk's size as imported.
    pub virtual_size: u64,
    /// The size it was grown to, when it was.
    pub resized_to: Option<u64>,
}

/// Why an import failed.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// The target's space could not be read.
    #[error("reading the space of {path}: {source}")]
    Space {
        /// The target or its directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The filesystem overhead is not a fraction.
    #[error(transparent)]
    Overhead(#[from] cdi_api::cdi_config::BadOverhead),
    /// The stream could not be opened.
    #[error(transparent)]
    Layers(#[from] LayerError),
    /// A file could not be opened.
    #[error("opening {path}: {source}")]
    Open {
        /// Which.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Streaming the image failed.
    #[error("{path}: {source}")]
    Copy {
        /// Where it was being written.
        path: PathBuf,
        /// Why.
        #[source]
        source: CopyError,
    },
    /// The image does not fit.
    #[error(transparent)]
    TooLarge(#[from] TooLarge),
    /// An image that must be converted, and no scratch space to put it in.
    #[error("a {0:?} image must be converted, and the import has no scratch space")]
    NoScratch(ImageFormat),
    /// `qemu-img` failed.
    #[error(transparent)]
    Convert(#[from] ConvertError),
}

/// The bytes free on the filesystem holding `path`.
fn filesystem_space(path: &Path) -> Result<u64, ImportError> {
    let directory = path.parent().unwrap_or(path);
    let stats = nix::sys::statvfs::statvfs(directory).map_err(|errno| ImportError::Space {
        path: directory.to_owned(),
        source: errno.into(),
    })?;
    Ok(stats.blocks_available().saturating_mul(stats.fragment_size()))
}

/// The size of the block device at `path`.
fn device_size(path: &Path) -> Result<u64, ImportError> {
    let space_error = |source| ImportError::Space {
        path: path.to_owned(),
        source,
    };
    let mut device = File::open(path).map_err(space_error)?;
    device.seek(SeekFrom::End(0)).map_err(space_error)
}

/// What the disk may take of the target: on a filesystem, the smaller of the space and the size
/// asked for (which the claim was grown by the overhead to hold), less the overhead (upstream's
/// `calculateTargetSize` and `GetUsableSpace`); on a device, all of it.
fn usable_space(target: &Target, requested: Option<u64>, overhead: &str) -> Result<u64, ImportError> {
    match target {
        Target::File(path) => {
            // A disk left by an earlier attempt is replaced: its space counts as free.
            match std::fs::remove_file(path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(source) => {
                    return Err(ImportError::Open {
                        path: path.clone(),
                        source,
                    });
                }
            }
            let free = filesystem_space(path)?;
            Ok(space::usable_space(requested.map_or(free, |r| r.min(free)), overhead)?)
        }
        Target::Block(path) => device_size(path),
    }
}

fn open_target(target: &Target) -> Result<File, ImportError> {
    let mut options = OpenOptions::new();
    options.write(true);
    if matches!(target, Target::File(_)) {
        options.create(true).truncate(true);
    }
    options.open(target.path()).map_err(|source| ImportError::Open {
        path: target.path().to_owned(),
        source,
    })
}

/// Streams a raw image into the target.
fn write_raw(stream: &mut Stream, target: &Target, usable: u64) -> Result<u64, ImportError> {
    let file = open_target(target)?;
    let holes = match target {
        Target::File(_) => Holes::Punch,
        Target::Block(_) => Holes::WriteZeros,
    };
    let copy_error = |source| ImportError::Copy {
        path: target.path().to_owned(),
        source,
    };
    let written = sparse_copy::copy(stream, &file, holes, Written::Disk, usable).map_err(copy_error)?;
    file.sync_all().map_err(|e| copy_error(CopyError::Write(e)))?;
    Ok(written)
}

/// Writes a qcow2 image into the disk file as it streams ([`qcow2_stream`]); one it cannot take
/// in one pass is [`ImportError::NoScratch`].
fn stream_qcow2(stream: &mut dyn Read, format: ImageFormat, target: &Target, usable: u64) -> Result<u64, ImportError> {
    let file = open_target(target)?;
    let copy_error = |source| ImportError::Copy {
        path: target.path().to_owned(),
        source,
    };
    match qcow2_stream::write(stream, &file, usable) {
        Ok(virtual_size) => {
            file.sync_all().map_err(|e| copy_error(CopyError::Write(e)))?;
            Ok(virtual_size)
        }
        Err(StreamError::NotStreamable(reason)) => {
            tracing::info!(%reason, "the qcow2 image goes through scratch space");
            Err(ImportError::NoScratch(format))
        }
        Err(StreamError::Copy(source)) => Err(copy_error(source)),
        Err(StreamError::TooLarge(too_large)) => Err(ImportError::TooLarge(too_large)),
    }
}

/// A qcow2 header's virtual size, checked before anything is downloaded.
fn check_header_fits(format: ImageFormat, usable: u64) -> Result<(), ImportError> {
    if let ImageFormat::Qcow2 { virtual_size } = format
        && virtual_size > 0
    {
        space::check_fits(virtual_size, usable)?;
    }
    Ok(())
}

/// Converts the image saved at `saved` into the target, once it is known to fit.
fn convert_saved(
    saved: &Path,
    format: ImageFormat,
    target: &Target,
    usable: u64,
    converter: &dyn Converter,
) -> Result<u64, ImportError> {
    let virtual_size = converter.virtual_size(saved, format.qemu_name())?;
    space::check_fits(virtual_size, usable)?;
    drop(open_target(target)?);
    converter.convert_to_raw(saved, format.qemu_name(), target.path())?;
    Ok(virtual_size)
}

/// A stream whose bytes are also saved into a new file as they are read, zero runs left as
/// holes. A copy that cannot be written (a full scratch claim) stops being written while the
/// stream goes on; its error is kept for the moment the copy turns out to be needed.
struct Saving<'a> {
    stream: &'a mut dyn Read,
    copy: &'a File,
    at: u64,
    failed: Option<std::io::Error>,
}

impl Read for Saving<'_> {
    fn read(&mut self, buffer: &mut [u8]) -> std::io::Result<usize> {
        let n = self.stream.read(buffer)?;
        if self.failed.is_none()
            && let Err(error) = sparse_copy::write_runs(self.copy, &buffer[..n], self.at, Holes::Punch)
        {
            self.failed = Some(error);
        }
        self.at += n as u64;
        Ok(n)
    }
}

impl Saving<'_> {
    /// Reads the stream to its end, saving it, and finishes the copy.
    fn finish(mut self, target: &Target, saved: &Path) -> Result<(), ImportError> {
        let mut buffer = vec![0_u8; SAVE_BUFFER];
        loop {
            match self.read(&mut buffer) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    return Err(ImportError::Copy {
                        path: target.path().to_owned(),
                        source: CopyError::Read(e),
                    });
                }
            }
        }
        let finished = match self.failed {
            Some(error) => Err(error),
            None => self.copy.set_len(self.at),
        };
        finished.map_err(|e| ImportError::Copy {
            path: saved.to_owned(),
            source: CopyError::Write(e),
        })
    }
}

/// Converts an image through the scratch space: it is saved there and converted by qemu-img
/// into the target once it is known to fit. A qcow2 image into a disk file is still written
/// into it as it streams, what is read being saved at the same time; only an image whose layout
/// one pass cannot take is then saved to its end and converted, since a stream (an upload's
/// above all) cannot be read a second time. The saved image is removed at the end.
fn via_scratch(
    stream: &mut Stream,
    format: ImageFormat,
    target: &Target,
    scratch: &Path,
    usable: u64,
    converter: &dyn Converter,
) -> Result<u64, ImportError> {
    check_header_fits(format, usable)?;
    let saved = scratch.join(SCRATCH_IMAGE);
    let result = (|| {
        let copy = open_target(&Target::File(saved.clone()))?;
        if let (ImageFormat::Qcow2 { .. }, Target::File(_)) = (format, target) {
            let mut saving = Saving {
                stream,
                copy: &copy,
                at: 0,
                failed: None,
            };
            match stream_qcow2(&mut saving, format, target, usable) {
                Err(ImportError::NoScratch(_)) => {}
                streamed => return streamed,
            }
            saving.finish(target, &saved)?;
        } else {
            sparse_copy::copy(stream, &copy, Holes::Punch, Written::ScratchCopy, u64::MAX).map_err(|source| {
                ImportError::Copy {
                    path: saved.clone(),
                    source,
                }
            })?;
        }
        drop(copy);
        convert_saved(&saved, format, target, usable, converter)
    })();
    let _ = std::fs::remove_file(&saved);
    result
}

/// Imports `stream` into `target`.
///
/// # Errors
/// [`ImportError`]; a disk file left half-written is removed.
pub fn import(
    stream: Stream,
    target: &Target,
    request: &Request,
    converter: &dyn Converter,
) -> Result<Outcome, ImportError> {
    let result = import_inner(stream, target, request, converter);
    if result.is_err()
        && let Target::File(path) = target
    {
        let _ = std::fs::remove_file(path);
    }
    result
}

fn import_inner(
    stream: Stream,
    target: &Target,
    request: &Request,
    converter: &dyn Converter,
) -> Result<Outcome, ImportError> {
    let usable = usable_space(target, request.requested_size, &request.filesystem_overhead)?;
    let layers::Opened {
        format,
        compression,
        mut stream,
    } = if request.verbatim {
        layers::Opened {
            format: ImageFormat::Raw,
            compression: Vec::new(),
            stream,
        }
    } else {
        layers::open(stream)?
    };
    let virtual_size = match (&request.scratch, format.needs_conversion()) {
        (_, false) => write_raw(&mut stream, target, usable)?,
        (Some(scratch), true) => via_scratch(&mut stream, format, target, scratch, usable, converter)?,
        // Without scratch space a qcow2 image is written into a disk file as it streams, when its
        // layout allows; else the import asks for scratch space.
        (None, true) if matches!((format, target), (ImageFormat::Qcow2 { .. }, Target::File(_))) => {
            stream_qcow2(&mut stream, format, target, usable)?
        }
        (None, true) => return Err(ImportError::NoScratch(format)),
    };
    let resized_to = match (target, request.requested_size) {
        (Target::File(path), Some(requested)) => {
            let grown = space::resize_target(virtual_size, requested, usable);
            if let Some(size) = grown {
                let file = open_target_for_resize(path)?;
                file.set_len(size).map_err(|source| ImportError::Open {
                    path: path.clone(),
                    source,
                })?;
            }
            grown
        }
        _ => None,
    };
    Ok(Outcome {
        format,
        compression,
        virtual_size,
        resized_to,
    })
}

fn open_target_for_resize(path: &Path) -> Result<File, ImportError> {
    OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(|source| ImportError::Open {
            path: path.to_owned(),
            source,
        })
}

#[cfg(test)]
mod tests;
