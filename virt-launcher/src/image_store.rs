//! The local image store: how a run with no cluster finds the files of `containerDisk` and
//! `kernelBoot.container` images.
//!
//! In a cluster, the kubelet pulls an image and virt-handler hands its files to the launcher. With
//! no cluster and no registry, an image is a directory that holds the image's file system:
//!
//! ```text
//! $KUBEVIRT_RS_IMAGE_STORE/<repository>/<tag>/...     e.g. localhost/kubevirt-rs/testguest/latest/
//! $KUBEVIRT_RS_IMAGE_STORE/<repository>/<algo>-<hex>/  for a reference by digest
//! ```
//!
//! The default store is `/var/lib/kubevirt-rs/images`. A containerDisk's disk is the file at its
//! `path`, or else the single file under `disk/`, as upstream's containerDisk images lay it out.
//! A containerDisk `image` may also be `file:///abs/path/disk.qcow2`, naming one image file directly.

use std::path::{Component, Path, PathBuf};

/// Where the store is when `KUBEVIRT_RS_IMAGE_STORE` is not set.
pub const DEFAULT_IMAGE_STORE: &str = "/var/lib/kubevirt-rs/images";
/// The environment variable that moves the store.
pub const IMAGE_STORE_ENV: &str = "KUBEVIRT_RS_IMAGE_STORE";
/// The scheme that names a local image file directly.
pub const FILE_SCHEME: &str = "file://";

/// Why an image reference does not name a place in the store.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ImageRefError {
    /// Empty reference.
    #[error("image reference is empty")]
    Empty,
    /// A component that would leave the store (`..`, an absolute path, an empty segment).
    #[error("image reference {0:?} is not a valid repository[:tag|@digest]")]
    Invalid(String),
}

/// Where an image reference points.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ImageLocation {
    /// The root directory of an image in the store.
    Root(PathBuf),
    /// One file named by `file://`.
    File(PathBuf),
}

/// The local image store rooted at a directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImageStore {
    root: PathBuf,
}

impl ImageStore {
    /// A store rooted at `root`.
    #[must_use]
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// The store named by `KUBEVIRT_RS_IMAGE_STORE`, or the default one.
    #[must_use]
    pub fn from_env() -> Self {
        Self::new(std::env::var_os(IMAGE_STORE_ENV).map_or_else(|| PathBuf::from(DEFAULT_IMAGE_STORE), PathBuf::from))
    }

    /// The store's root directory.
    #[must_use]
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Resolves an image reference to its place on disk.
    pub fn locate(&self, image: &str) -> Result<ImageLocation, ImageRefError> {
        if let Some(file) = image.strip_prefix(FILE_SCHEME) {
            let path = PathBuf::from(file);
            return if path.is_absolute() {
                Ok(ImageLocation::File(path))
            } else {
                Err(ImageRefError::Invalid(image.to_owned()))
            };
        }
        let (repository, version) = split_reference(image)?;
        let relative = Path::new(repository).join(version);
        let is_contained = relative.components().all(|c| matches!(c, Component::Normal(_)));
        if !is_contained || repository.split('/').any(str::is_empty) {
            return Err(ImageRefError::Invalid(image.to_owned()));
        }
        Ok(ImageLocation::Root(self.root.join(relative)))
    }
}

/// Splits `repo[:tag][@algo:hex]` into the repository and the directory name of its version.
fn split_reference(image: &str) -> Result<(&str, String), ImageRefError> {
    if image.is_empty() {
        return Err(ImageRefError::Empty);
    }
    if let Some((repository, digest)) = image.split_once('@') {
        let repository = repository
            .rsplit_once(':')
            .filter(|(_, tag)| !tag.contains('/'))
            .map_or(repository, |(r, _)| r);
        let (algorithm, hex) = digest
            .split_once(':')
            .ok_or_else(|| ImageRefError::Invalid(image.to_owned()))?;
        return Ok((repository, format!("{algorithm}-{hex}")));
    }
    // A colon after the last slash starts the tag; one before it belongs to a registry port.
    let last_slash = image.rfind('/').map_or(0, |i| i + 1);
    match image[last_slash..].find(':') {
        Some(colon) => {
            let at = last_slash + colon;
            let tag = &image[at + 1..];
            if tag.is_empty() {
                return Err(ImageRefError::Invalid(image.to_owned()));
            }
            Ok((&image[..at], tag.to_owned()))
        }
        None => Ok((image, "latest".to_owned())),
    }
}

/// The first bytes of a qcow2 image.
const QCOW2_MAGIC: &[u8; 4] = b"QFI\xfb";

/// The format of a disk image, from its magic bytes: `qcow2`, else `raw`.
pub fn image_format(path: &Path) -> std::io::Result<&'static str> {
    use std::io::Read as _;
    let mut magic = [0u8; 4];
    let mut file = std::fs::File::open(path)?;
    let read = file.read(&mut magic)?;
    Ok(if read == magic.len() && &magic == QCOW2_MAGIC {
        "qcow2"
    } else {
        "raw"
    })
}

/// Why a containerDisk's image file cannot be found.
#[derive(Debug, thiserror::Error)]
pub enum ContainerDiskError {
    /// The reference is malformed.
    #[error(transparent)]
    Reference(#[from] ImageRefError),
    /// The image is not in the store.
    #[error("image {image} is not in the local image store (looked in {})", dir.display())]
    NotInStore {
        /// The reference.
        image: String,
        /// Where it was looked for.
        dir: PathBuf,
    },
    /// `disk/` does not hold exactly one file, and no `path` says which.
    #[error("image {image} must hold exactly one file under disk/ (found {found}); set the volume's path")]
    Ambiguous {
        /// The reference.
        image: String,
        /// How many files were found.
        found: usize,
    },
    /// `path` names a file outside the image or one that does not exist.
    #[error("image {image} has no file {path}")]
    MissingPath {
        /// The reference.
        image: String,
        /// The path asked for.
        path: String,
    },
}

impl ImageStore {
    /// The disk file of a containerDisk: `path` inside the image, or the only file under `disk/`.
    pub fn container_disk(&self, image: &str, path: Option<&str>) -> Result<PathBuf, ContainerDiskError> {
        let root = match self.locate(image)? {
            ImageLocation::File(file) => return Ok(file),
            ImageLocation::Root(root) => root,
        };
        if !root.is_dir() {
            return Err(ContainerDiskError::NotInStore {
                image: image.to_owned(),
                dir: root,
            });
        }
        if let Some(path) = path {
            return Self::file_in_image(&root, path).ok_or_else(|| ContainerDiskError::MissingPath {
                image: image.to_owned(),
                path: path.to_owned(),
            });
        }
        let files: Vec<PathBuf> = std::fs::read_dir(root.join("disk"))
            .map(|entries| {
                entries
                    .filter_map(Result::ok)
                    .map(|e| e.path())
                    .filter(|p| p.is_file())
                    .collect()
            })
            .unwrap_or_default();
        match files.as_slice() {
            [only] => Ok(only.clone()),
            _ => Err(ContainerDiskError::Ambiguous {
                image: image.to_owned(),
                found: files.len(),
            }),
        }
    }

    /// A file inside an image root, for `kernelBoot` artifacts and containerDisk paths; `None`
    /// when the path leaves the image or names no file.
    #[must_use]
    pub fn file_in_image(root: &Path, path: &str) -> Option<PathBuf> {
        let relative = Path::new(path.trim_start_matches('/'));
        let is_contained = relative.components().all(|c| matches!(c, Component::Normal(_)));
        let file = root.join(relative);
        (is_contained && file.is_file()).then_some(file)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn locate(image: &str) -> Result<ImageLocation, ImageRefError> {
        ImageStore::new("/store").locate(image)
    }

    #[allow(clippy::unnecessary_wraps, reason = "compared with Result values")]
    fn root(path: &str) -> Result<ImageLocation, ImageRefError> {
        Ok(ImageLocation::Root(PathBuf::from(path)))
    }

    #[test]
    fn a_tagged_reference_maps_to_repository_and_tag() {
        assert_eq!(
            locate("localhost/kubevirt-rs/testguest:v1"),
            root("/store/localhost/kubevirt-rs/testguest/v1")
        );
    }

    #[test]
    fn an_untagged_reference_means_latest() {
        assert_eq!(
            locate("quay.io/containerdisks/fedora"),
            root("/store/quay.io/containerdisks/fedora/latest")
        );
    }

    #[test]
    fn a_registry_port_is_not_a_tag() {
        assert_eq!(locate("registry:5000/disk"), root("/store/registry:5000/disk/latest"));
        assert_eq!(locate("registry:5000/disk:1.0"), root("/store/registry:5000/disk/1.0"));
    }

    #[test]
    fn a_digest_reference_maps_to_algorithm_and_hex() {
        assert_eq!(
            locate("example.com/disk:1@sha256:abc"),
            root("/store/example.com/disk/sha256-abc")
        );
    }

    #[test]
    fn a_file_reference_names_one_file() {
        assert_eq!(
            locate("file:///images/disk.qcow2"),
            Ok(ImageLocation::File(PathBuf::from("/images/disk.qcow2")))
        );
        assert!(locate("file://relative.img").is_err());
    }

    #[test]
    fn references_that_would_leave_the_store_are_rejected() {
        for image in ["", "../etc", "a/../../b", "/abs/path", "a//b", "repo:"] {
            assert!(locate(image).is_err(), "{image:?} must be rejected");
        }
    }
}
