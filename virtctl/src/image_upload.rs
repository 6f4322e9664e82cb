//! `virtctl image-upload`, as upstream's: creates the DataVolume (or claim) for an upload unless it
//! exists, waits for its upload server, asks cdi-apiserver for a token, and sends the image to
//! cdi-uploadproxy with a progress bar, then waits for CDI to finish writing it.
//!
//! - [`ImageUploadArgs`] and [`validate`]: the flags and upstream's checks of them (pure).
//! - [`objects`]: the objects made and what an existing claim must be (pure).
//! - [`flow`]: the steps against the cluster; [`transfer`]: the upload itself; [`progress`]: the bar.

use std::path::PathBuf;

use clap::Args;

mod changes;
pub mod flow;
pub mod objects;
pub mod progress;
pub mod transfer;

/// `virtctl image-upload`'s flags (upstream's names and defaults).
#[derive(Clone, Debug, Default, Args)]
#[expect(clippy::struct_excessive_bools, reason = "upstream's boolean flags, one field each")]
pub struct ImageUploadArgs {
    /// `dv NAME` or `pvc NAME`.
    #[arg(num_args = 0..=2)]
    pub target: Vec<String>,
    /// Allow insecure server connections when using HTTPS.
    #[arg(long)]
    pub insecure: bool,
    /// The URL of the cdi-upload proxy service.
    #[arg(long = "uploadproxy-url")]
    pub uploadproxy_url: Option<String>,
    /// The destination DataVolume/PVC name (deprecated: specify the name as the second argument
    /// instead).
    #[arg(long = "pvc-name")]
    pub pvc_name: Option<String>,
    /// The size of the PVC to create (ex. 10Gi, 500Mi) (deprecated: use --size instead).
    #[arg(long = "pvc-size")]
    pub pvc_size: Option<String>,
    /// The size of the DataVolume to create (ex. 10Gi, 500Mi).
    #[arg(long)]
    pub size: Option<String>,
    /// The storage class for the PVC.
    #[arg(long = "storage-class")]
    pub storage_class: Option<String>,
    /// The access mode for the PVC.
    #[arg(long = "access-mode")]
    pub access_mode: Option<String>,
    /// Create a PVC with VolumeMode=Block (deprecated: specify volume mode (filesystem/block) with
    /// --volume-mode instead).
    #[arg(long = "block-volume")]
    pub block_volume: bool,
    /// Specify the VolumeMode (block/filesystem) used to create the PVC. Default is the
    /// storageProfile default. For archive upload default is filesystem.
    #[arg(long = "volume-mode")]
    pub volume_mode: Option<String>,
    /// Path to the local VM image.
    #[arg(long = "image-path")]
    pub image_path: Option<PathBuf>,
    /// Path to the local archive.
    #[arg(long = "archive-path")]
    pub archive_path: Option<PathBuf>,
    /// Don't attempt to create a new DataVolume/PVC.
    #[arg(long = "no-create")]
    pub no_create: bool,
    /// Seconds to wait for upload pod to start.
    #[arg(long = "wait-secs", default_value_t = 300)]
    pub wait_secs: u64,
    /// When upload server returns a transient error, we retry this number of times before giving
    /// up.
    #[arg(long, default_value_t = 5)]
    pub retry: u32,
    /// Force bind the PVC, ignoring the WaitForFirstConsumer logic.
    #[arg(long = "force-bind")]
    pub force_bind: bool,
    /// Create a DataSource pointing to the created DataVolume/PVC.
    #[arg(long)]
    pub datasource: bool,
    /// The default instance type to associate with the image.
    #[arg(long = "default-instancetype")]
    pub default_instancetype: Option<String>,
    /// The default instance type kind to associate with the image.
    #[arg(long = "default-instancetype-kind")]
    pub default_instancetype_kind: Option<String>,
    /// The default preference to associate with the image.
    #[arg(long = "default-preference")]
    pub default_preference: Option<String>,
    /// The default preference kind to associate with the image.
    #[arg(long = "default-preference-kind")]
    pub default_preference_kind: Option<String>,
}

/// What the upload goes into.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TargetKind {
    /// A DataVolume (and its claim).
    DataVolume,
    /// A claim only.
    Claim,
}

/// The checked command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Upload {
    /// What it goes into.
    pub kind: TargetKind,
    /// Its name.
    pub name: String,
    /// The file sent.
    pub path: PathBuf,
    /// An archive (`contentType: archive`).
    pub archive: bool,
    /// `block`, `filesystem`, or the StorageProfile's.
    pub volume_mode: Option<String>,
    /// The size asked for, as given (checked when something is created).
    pub size: Option<String>,
    /// The default instance type and preference labels.
    pub labels: std::collections::BTreeMap<String, String>,
}

/// Why `pvc NAME` and `--pvc-name` are refused: this CDI fills claims for DataVolumes only.
pub const CLAIM_UPLOADS: &str =
    "uploading into a claim without a DataVolume is not supported by this CDI yet: use image-upload dv NAME";
/// Why `--archive-path` is refused: this CDI does not write archive content.
pub const ARCHIVE_UPLOADS: &str = "archive uploads (contentType archive) are not supported by this CDI yet";

fn given(value: Option<&String>) -> Option<&str> {
    value.map(String::as_str).filter(|v| !v.is_empty())
}

/// The labels of `--default-instancetype`, `--default-preference` and their kinds.
///
/// # Errors
/// Upstream's messages for a kind without its name, or either with `--no-create`.
fn instancetype_labels(args: &ImageUploadArgs) -> Result<std::collections::BTreeMap<String, String>, String> {
    let instancetype = given(args.default_instancetype.as_ref());
    let preference = given(args.default_preference.as_ref());
    if given(args.default_instancetype_kind.as_ref()).is_some() && instancetype.is_none() {
        return Err("--default-instancetype must be provided with --default-instancetype-kind".to_owned());
    }
    if given(args.default_preference_kind.as_ref()).is_some() && preference.is_none() {
        return Err("--default-preference must be provided with --default-preference-kind".to_owned());
    }
    if (instancetype.is_some() || preference.is_some()) && args.no_create {
        return Err("--default-instancetype and --default-preference cannot be used with --no-create".to_owned());
    }
    Ok([
        ("instancetype.kubevirt.io/default-instancetype", instancetype),
        (
            "instancetype.kubevirt.io/default-instancetype-kind",
            given(args.default_instancetype_kind.as_ref()),
        ),
        ("instancetype.kubevirt.io/default-preference", preference),
        (
            "instancetype.kubevirt.io/default-preference-kind",
            given(args.default_preference_kind.as_ref()),
        ),
    ]
    .into_iter()
    .filter_map(|(key, value)| value.map(|v| (key.to_owned(), v.to_owned())))
    .collect())
}

/// Checks the flags in upstream's order (`parseArgs`, then the instance type flags).
///
/// # Errors
/// Upstream's message for the first rule broken.
pub fn validate(args: &ImageUploadArgs) -> Result<Upload, String> {
    let pvc_size = given(args.pvc_size.as_ref());
    let size = given(args.size.as_ref());
    if let (Some(a), Some(b)) = (pvc_size, size)
        && a != b
    {
        return Err("--pvc-size and --size can not be specified at the same time".to_owned());
    }
    let size = pvc_size.or(size).map(str::to_owned);
    let labels_of = || instancetype_labels(args);
    if given(args.pvc_name.as_ref()).is_some() {
        if !args.target.is_empty() {
            return Err("cannot use --pvc-name and args".to_owned());
        }
        // Upstream's legacy form uploads into a claim without a DataVolume.
        return Err(CLAIM_UPLOADS.to_owned());
    }
    let mut volume_mode = given(args.volume_mode.as_ref()).map(str::to_owned);
    if args.block_volume {
        match volume_mode.as_deref() {
            None | Some("block") => volume_mode = Some("block".to_owned()),
            Some(other) => return Err(format!("incompatible --volume-mode '{other}' and --block-volume")),
        }
    }
    if let Some(mode) = volume_mode.as_deref()
        && mode != "block"
        && mode != "filesystem"
    {
        return Err(format!(
            "Invalid volume mode '{mode}'. Valid values are 'block' and 'filesystem'."
        ));
    }
    let image = args.image_path.clone().filter(|p| !p.as_os_str().is_empty());
    let archive_path = args.archive_path.clone().filter(|p| !p.as_os_str().is_empty());
    let (path, archive) = match (image, archive_path) {
        (None, None) => return Err("either image-path or archive-path must be provided".to_owned()),
        (Some(_), Some(_)) => {
            return Err("cannot handle both image-path and archive-path, provide only one".to_owned());
        }
        (Some(image), None) => (image, false),
        (None, Some(archive)) => {
            if volume_mode.as_deref() == Some("block") {
                return Err("In archive upload the volume mode should always be filesystem".to_owned());
            }
            (archive, true)
        }
    };
    let [kind, name] = args.target.as_slice() else {
        return Err("expecting two args".to_owned());
    };
    let kind = match kind.to_lowercase().as_str() {
        "dv" => TargetKind::DataVolume,
        "pvc" => TargetKind::Claim,
        _ => return Err(format!("invalid resource type {kind}")),
    };
    if kind == TargetKind::Claim {
        return Err(CLAIM_UPLOADS.to_owned());
    }
    if archive {
        return Err(ARCHIVE_UPLOADS.to_owned());
    }
    Ok(Upload {
        kind,
        name: name.clone(),
        path,
        archive,
        volume_mode,
        size,
        labels: labels_of()?,
    })
}

/// The deprecation warnings of the flags given (upstream's pflag wording).
#[must_use]
pub fn deprecation_warnings(args: &ImageUploadArgs) -> Vec<String> {
    let mut warnings = Vec::new();
    if args.pvc_name.is_some() {
        warnings
            .push("Flag --pvc-name has been deprecated, specify the name as the second argument instead.".to_owned());
    }
    if args.pvc_size.is_some() {
        warnings.push("Flag --pvc-size has been deprecated, use --size instead.".to_owned());
    }
    if args.block_volume {
        warnings.push(
            "Flag --block-volume has been deprecated, specify volume mode (filesystem/block) with --volume-mode instead."
                .to_owned(),
        );
    }
    warnings
}

#[cfg(test)]
mod tests;
