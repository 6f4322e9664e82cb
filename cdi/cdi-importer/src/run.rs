//! Running a [`Job`] in the importer pod: the target is the block device when one is attached,
//! else `disk.img` in the data directory; the scratch space is used when it is mounted; the
//! outcome becomes the pod's termination message in upstream's form, which the controller reads.

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};

use cdi_api::importer_env;
use serde::Serialize;
use tracing::info;

use crate::checksum::ChecksumError;
use crate::convert::Converter;
use crate::http_source::{self, HttpError};
use crate::import::{self, ImportError, Outcome, Request, Target};
use crate::job::{Job, Source};
use crate::layers::Stream;
use crate::progress::{Counted, Progress};
use crate::registry::{self, RegistryError};
use crate::space;

/// Where kubelet reads a container's termination message.
pub const TERMINATION_LOG: &str = "/dev/termination-log";

/// Leaves `message` as the container's termination message, which cdi-controller reads; a
/// failure is logged (the pod's status then falls back to its log).
pub fn write_termination_message(message: &str) {
    if let Err(e) = std::fs::write(TERMINATION_LOG, message) {
        tracing::error!(error = %e, path = TERMINATION_LOG, "writing the termination message");
    }
}

/// The message of a finished import (upstream's).
pub const COMPLETE: &str = "Import Complete";
/// The file name of the disk in a filesystem volume (upstream's).
pub const DISK_IMAGE: &str = "disk.img";

/// Where the pod's volumes are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Paths {
    /// A filesystem volume's mount (upstream's `/data`).
    pub data_dir: PathBuf,
    /// A block volume's device (upstream's `/dev/cdi-block-volume`).
    pub block_device: PathBuf,
    /// The scratch volume's mount (upstream's `/scratch`).
    pub scratch_dir: PathBuf,
}

impl Default for Paths {
    fn default() -> Self {
        Self {
            data_dir: PathBuf::from(importer_env::DATA_DIR),
            block_device: PathBuf::from(importer_env::BLOCK_DEVICE),
            scratch_dir: PathBuf::from(importer_env::SCRATCH_DIR),
        }
    }
}

impl Paths {
    /// The target: the block device when it exists, else the disk file.
    #[must_use]
    pub fn target(&self) -> Target {
        if self.block_device.exists() {
            Target::Block(self.block_device.clone())
        } else {
            Target::File(self.data_dir.join(DISK_IMAGE))
        }
    }

    fn scratch(&self) -> Option<PathBuf> {
        self.scratch_dir.is_dir().then(|| self.scratch_dir.clone())
    }
}

/// The termination message of a finished run (upstream's JSON).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Finished {
    /// The image must be converted and no scratch space was mounted: the controller adds one
    /// and runs the pod again.
    pub scratch_space_required: bool,
    /// Whether the disk's space was allocated up front.
    pub preallocation_applied: bool,
    /// [`COMPLETE`], or why the import ended without a disk.
    pub message: String,
    /// Labels for the claim: a registry image's `*_KUBEVIRT_IO_*` environment (upstream's).
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub labels: std::collections::BTreeMap<String, String>,
}

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The certificates could not be read.
    #[error("reading certificates in {path}: {source}")]
    Certificates {
        /// The directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The download.
    #[error(transparent)]
    Http(#[from] HttpError),
    /// The registry.
    #[error(transparent)]
    Registry(#[from] RegistryError),
    /// The import.
    #[error(transparent)]
    Import(#[from] ImportError),
    /// Writing a blank disk or its preallocation.
    #[error("writing {path}: {source}")]
    Write {
        /// The target.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The import's thread ended without an answer.
    #[error("the import stopped: {0}")]
    Stopped(String),
}

impl RunError {
    /// The termination message of a failed run (upstream's wording).
    #[must_use]
    pub fn termination_message(&self) -> String {
        format!("Unable to process data: {self}")
    }
}

/// What a run ended with: finished (with or without a disk), or a checksum mismatch, which ends
/// the pod successfully so that it is not restarted, with the disk removed (as upstream does).
#[derive(Debug)]
pub enum Ended {
    /// Done: the termination message to write.
    Finished(Finished),
    /// The download's checksum differs.
    ChecksumMismatch(ChecksumError),
}

fn certificates(dir: &Path) -> Result<Vec<u8>, RunError> {
    let error = |source| RunError::Certificates {
        path: dir.to_owned(),
        source,
    };
    let mut pem = Vec::new();
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(error)?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        // A configmap's keys are files; its `..data` machinery are directories and dot files.
        .filter(|path| path.is_file() && !path.file_name().is_some_and(|n| n.to_string_lossy().starts_with('.')))
        .collect();
    entries.sort();
    for path in entries {
        pem.extend(std::fs::read(&path).map_err(error)?);
        pem.push(b'\n');
    }
    Ok(pem)
}

/// Allocates the disk's space up front: a file's blocks are reserved; a block device's bytes
/// after `from` are zeroed.
fn preallocate(target: &Target, from: u64) -> Result<(), RunError> {
    let write_error = |source| RunError::Write {
        path: target.path().to_owned(),
        source,
    };
    let file = OpenOptions::new()
        .write(true)
        .open(target.path())
        .map_err(write_error)?;
    match target {
        Target::File(_) => {
            let length = file.metadata().map_err(write_error)?.len();
            let length = i64::try_from(length).unwrap_or(i64::MAX);
            nix::fcntl::fallocate(&file, nix::fcntl::FallocateFlags::empty(), 0, length)
                .map_err(|errno| write_error(errno.into()))?;
        }
        Target::Block(path) => {
            let end = std::fs::File::open(path)
                .and_then(|mut f| std::io::Seek::seek(&mut f, std::io::SeekFrom::End(0)))
                .map_err(write_error)?;
            let zeros = vec![0_u8; 1 << 20];
            let mut at = from;
            while at < end {
                let n = usize::try_from(end - at).map_or(zeros.len(), |left| left.min(zeros.len()));
                file.write_all_at(&zeros[..n], at).map_err(write_error)?;
                at += n as u64;
            }
        }
    }
    file.sync_all().map_err(write_error)
}

/// A blank disk: a file of the size asked for less the filesystem's share (within what the
/// volume may hold), whole MiB; a block device as it is.
fn blank(job: &Job, target: &Target) -> Result<(), RunError> {
    let Target::File(path) = target else {
        return Ok(());
    };
    let write_error = |source| RunError::Write {
        path: path.clone(),
        source,
    };
    let available = nix::sys::statvfs::statvfs(path.parent().unwrap_or(path))
        .map(|s| s.blocks_available().saturating_mul(s.fragment_size()))
        .map_err(|errno| write_error(errno.into()))?;
    // Upstream's: the filesystem's share comes off the smaller of the request and the space (the
    // request was grown by that share when the claim was made).
    let wanted = job.image_size.unwrap_or(available).min(available);
    let size = space::usable_space(wanted, &job.filesystem_overhead).map_err(ImportError::from)?;
    let file = std::fs::File::create(path).map_err(write_error)?;
    let written = file.set_len(size).and_then(|()| file.sync_all());
    if written.is_err() {
        let _ = std::fs::remove_file(path);
    }
    written.map_err(write_error)
}

/// The user and group upstream's importer runs as, and the launcher's QEMU: an unprivileged
/// launcher opens the disk as them.
pub const QEMU_ID: u32 = 107;

/// A disk file written as root is handed to [`QEMU_ID`], as upstream's importer (which runs as
/// that user) leaves it; one written as any other user stays theirs.
fn hand_over(target: &Target) -> Result<(), RunError> {
    let Target::File(path) = target else {
        return Ok(());
    };
    if !nix::unistd::geteuid().is_root() {
        return Ok(());
    }
    let id = (
        Some(nix::unistd::Uid::from_raw(QEMU_ID)),
        Some(nix::unistd::Gid::from_raw(QEMU_ID)),
    );
    nix::unistd::chown(path.as_path(), id.0, id.1).map_err(|errno| RunError::Write {
        path: path.clone(),
        source: errno.into(),
    })
}

/// The run's end when the image must be converted and no scratch space is mounted: the
/// controller mounts one and runs the pod again.
fn scratch_required() -> Ended {
    Ended::Finished(Finished {
        scratch_space_required: true,
        message: COMPLETE.to_owned(),
        ..Finished::default()
    })
}

/// Runs `work` on a blocking thread.
async fn blocking<T, F>(work: F) -> Result<T, RunError>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, RunError> + Send + 'static,
{
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| RunError::Stopped(e.to_string()))?
}

/// What an import of a stream ended with.
enum Streamed {
    /// Imported, with the labels the source gives the claim.
    Imported(Outcome, std::collections::BTreeMap<String, String>),
    /// It must be converted, and there is no scratch space.
    NeedsScratch,
    /// The download's checksum differs (the disk is removed).
    Mismatch(ChecksumError),
}

/// Imports a download of `source`, checking its checksum when the job has one.
async fn import_http<C>(
    job: &Job,
    source: &http_source::HttpSource,
    target: &Target,
    request: Request,
    converter: C,
    progress: &Progress,
) -> Result<Streamed, RunError>
where
    C: Converter + Send + 'static,
{
    let mut source = source.clone();
    if let Some(dir) = &job.cert_dir {
        source.extra_roots_pem = certificates(dir)?;
    }
    let download = http_source::open(&source).await?;
    info!(url = %source.url, length = ?download.content_length, "downloading");
    progress.follow(std::sync::Arc::clone(&download.read), download.content_length);
    let checksum = job.checksum.clone();
    let blocking_target = target.clone();
    let outcome = blocking(move || {
        let (stream, verifier): (Stream, _) = match &checksum {
            Some(checksum) => {
                let (hashing, verifier) = checksum.watch(download);
                (Box::new(hashing), Some(verifier))
            }
            None => (Box::new(download), None),
        };
        Ok((import::import(stream, &blocking_target, &request, &converter), verifier))
    })
    .await?;
    let (outcome, verifier) = match outcome {
        (Err(ImportError::NoScratch(format)), _) => {
            info!(?format, "the image must be converted: asking for scratch space");
            return Ok(Streamed::NeedsScratch);
        }
        (outcome, verifier) => (outcome?, verifier),
    };
    if let Some(verifier) = verifier
        && let Err(mismatch) = verifier.verify()
    {
        if let Target::File(path) = target {
            let _ = std::fs::remove_file(path);
        }
        return Ok(Streamed::Mismatch(mismatch));
    }
    Ok(Streamed::Imported(outcome, std::collections::BTreeMap::new()))
}

/// Pulls the image of `source` and imports its disk. As upstream's, a registry import always
/// has scratch space: without it, none of the image is fetched and the pod asks for it.
async fn import_registry<C>(
    job: &Job,
    source: &registry::RegistrySource,
    paths: &Paths,
    target: &Target,
    request: Request,
    converter: C,
    progress: &Progress,
) -> Result<Streamed, RunError>
where
    C: Converter + Send + 'static,
{
    if paths.scratch().is_none() {
        info!("a registry import goes through scratch space: asking for it");
        return Ok(Streamed::NeedsScratch);
    }
    let mut source = source.clone();
    if let Some(dir) = &job.cert_dir {
        source.extra_roots_pem = certificates(dir)?;
    }
    let client = registry::Client::connect(&source).await?;
    let registry::Image { layers, labels } = client.layers(source.architecture.as_deref()).await?;
    info!(url = %source.url, layers = layers.len(), "pulling");
    let runtime = tokio::runtime::Handle::current();
    let blocking_target = target.clone();
    let progress = progress.clone();
    let outcome = blocking(move || {
        let disk = registry::find_disk(&runtime, &client, &layers)?;
        let counted = Counted::new(disk.stream);
        progress.follow(std::sync::Arc::clone(&counted.read), Some(disk.size));
        Ok(import::import(
            Box::new(counted),
            &blocking_target,
            &request,
            &converter,
        )?)
    })
    .await?;
    Ok(Streamed::Imported(outcome, labels))
}

/// Finishes a disk whose first `written_to` bytes were written: allocates the rest of its space
/// when `preallocation` asks for it, and hands a disk file to [`QEMU_ID`]. A disk file that
/// cannot be finished is removed.
///
/// # Errors
/// [`RunError::Write`].
pub fn complete(target: &Target, written_to: u64, preallocation: bool) -> Result<(), RunError> {
    let finished = if preallocation {
        preallocate(target, written_to)
    } else {
        Ok(())
    }
    .and_then(|()| hand_over(target));
    if finished.is_err()
        && let Target::File(path) = target
    {
        let _ = std::fs::remove_file(path);
    }
    finished
}

/// Runs `job` on the current tokio runtime (the import itself on a blocking thread).
///
/// # Errors
/// [`RunError`]; a disk file left half-written is removed.
pub async fn run<C>(job: Job, paths: &Paths, converter: C) -> Result<Ended, RunError>
where
    C: Converter + Send + 'static,
{
    run_with_progress(job, paths, converter, &Progress::default()).await
}

/// [`run`], reporting how much of the source is read in `progress`.
///
/// # Errors
/// [`RunError`]; a disk file left half-written is removed.
pub async fn run_with_progress<C>(job: Job, paths: &Paths, converter: C, progress: &Progress) -> Result<Ended, RunError>
where
    C: Converter + Send + 'static,
{
    let target = paths.target();
    let request = Request {
        requested_size: job.image_size,
        filesystem_overhead: job.filesystem_overhead.clone(),
        scratch: paths.scratch(),
        verbatim: false,
    };
    let streamed = match &job.source {
        Source::Blank => {
            blank(&job, &target)?;
            None
        }
        Source::Http(source) => Some(import_http(&job, source, &target, request, converter, progress).await?),
        Source::Registry(source) => {
            Some(import_registry(&job, source, paths, &target, request, converter, progress).await?)
        }
    };
    let (written_to, labels) = match streamed {
        None => (0, std::collections::BTreeMap::new()),
        Some(Streamed::NeedsScratch) => return Ok(scratch_required()),
        Some(Streamed::Mismatch(mismatch)) => return Ok(Ended::ChecksumMismatch(mismatch)),
        Some(Streamed::Imported(outcome, labels)) => {
            info!(format = ?outcome.format, compression = ?outcome.compression, virtual_size = outcome.virtual_size, resized_to = ?outcome.resized_to, "imported");
            (outcome.virtual_size, labels)
        }
    };
    complete(&target, written_to, job.preallocation)?;
    Ok(Ended::Finished(Finished {
        scratch_space_required: false,
        preallocation_applied: job.preallocation,
        message: COMPLETE.to_owned(),
        labels,
    }))
}
