//! The `registry` source with `pullMethod: pod`: the importer pulls a containerDisk image itself,
//! over the registry API, and takes its disk from the image, as upstream's importer does: the
//! first regular file under `disk/` in the first layer that has one (whiteouts aside). The layer is
//! streamed and its tar read in place ([`tar_stream`]), so no layer is held whole; the disk then
//! goes through the import like any other stream.
//!
//! The registry is reached over https (the system's roots and `certConfigMap`'s), or, for a
//! registry in CDIConfig's `insecureRegistries`, over https unverified and then plain http, as
//! upstream's image library tries them. A 401 answer's challenge is met: a Bearer token is fetched
//! from the realm it names (with the secret's credentials when given), or Basic auth is sent.
//! Indexes (multi-platform images) give the DataVolume's `platform.architecture`, else the
//! importer's own. Manifests fetched by digest and config blobs are checked against their digests.

mod auth;
mod disk;
pub mod manifest;
pub mod reference;
pub mod tar_stream;

pub use disk::{Disk, find_disk};

use std::sync::Arc;

use hyper::StatusCode;
use sha2::Digest as _;

use crate::http_source::{self, Answer, HttpError, HttpSource};
use crate::layers::Stream;
use manifest::{Descriptor, ImageConfig, Manifest, ManifestError};
use reference::{Reference, ReferenceError};

/// Where a containerDisk keeps its disk (upstream's `disk`).
pub const DISK_DIR: &str = "disk/";
/// The largest manifest, config or token answer read.
const DOCUMENT_LIMIT: usize = 4 << 20;

/// How to reach the image.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct RegistrySource {
    /// `docker://...`.
    pub url: String,
    /// The secret's `accessKeyId` and `secretKey`.
    pub credentials: Option<(String, String)>,
    /// PEM certificates trusted besides the system's.
    pub extra_roots_pem: Vec<u8>,
    /// The registry is in CDIConfig's `insecureRegistries`.
    pub insecure: bool,
    /// The platform's architecture to take from a multi-platform image.
    pub architecture: Option<String>,
}

/// The password is not printed.
impl std::fmt::Debug for RegistrySource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegistrySource")
            .field("url", &self.url)
            .field(
                "credentials",
                &self.credentials.as_ref().map(|(user, _)| (user, "<redacted>")),
            )
            .field("extra_roots_pem", &self.extra_roots_pem.len())
            .field("insecure", &self.insecure)
            .field("architecture", &self.architecture)
            .finish()
    }
}

/// Why the image could not be read (the words upstream's importer uses where it has them).
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// The URL.
    #[error(transparent)]
    Reference(#[from] ReferenceError),
    /// A request.
    #[error("Failed to read registry image: {0}")]
    Http(#[from] HttpError),
    /// The registry answered with an error.
    #[error("Failed to read registry image: {what}: HTTP {status}{detail}")]
    Status {
        /// What was asked for.
        what: String,
        /// The answer.
        status: StatusCode,
        /// The registry's own error messages, if any (`: ...`).
        detail: String,
    },
    /// Authentication failed.
    #[error("Failed to read registry image: authenticating to {registry}: {reason}")]
    Auth {
        /// The registry.
        registry: String,
        /// Why.
        reason: String,
    },
    /// A manifest.
    #[error("Failed to read registry image: {0}")]
    Manifest(#[from] ManifestError),
    /// A document's digest differs from the one it was fetched by.
    #[error("Failed to read registry image: {what} has digest {actual}, not {expected}")]
    Digest {
        /// Which document.
        what: String,
        /// Its digest.
        actual: String,
        /// The one expected.
        expected: String,
    },
    /// The image is for another architecture.
    #[error(
        "Error validating architecture: manifest image architecture: {actual:?} doesn't match requested architecture: {wanted:?}"
    )]
    Architecture {
        /// The image's.
        actual: String,
        /// The one asked for.
        wanted: String,
    },
    /// A bootable container, not a disk image.
    #[error(
        "bootc image detected: this image contains an ostree-based bootable OS (containers.bootc=1 or ostree.bootable=1) and cannot be imported as a regular container disk; bootc-to-disk conversion is not yet implemented"
    )]
    Bootc,
    /// No layer holds a disk (the last layer passed over, and why, when one was).
    #[error("Failed to find VM disk image file in the container image{}", passed_over.as_deref().map_or_else(String::new, |why| format!(" (a layer was passed over: {why})")))]
    NoDisk {
        /// Why the last layer passed over could not be read.
        passed_over: Option<String>,
    },
    /// The first file under `disk/` is in a directory of its own.
    #[error("Cannot locate image file: image directory contains another directory ({0})")]
    Nested(String),
}

/// An image, read: its layers, base first, and the labels its environment gives the claim.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Image {
    /// The layers.
    pub layers: Vec<Descriptor>,
    /// The claim's labels (upstream's `envsToLabels`).
    pub labels: std::collections::BTreeMap<String, String>,
}

/// A connection's settings to one registry, with the credentials its challenge asked for.
#[derive(Clone)]
pub struct Client {
    base: String,
    reference: Reference,
    /// The Authorization the registry's challenge asked for; renewed when a token runs out.
    authorization: Arc<std::sync::Mutex<Option<String>>>,
    /// The secret's credentials, for the challenges.
    credentials: Option<(String, String)>,
    template: HttpSource,
    tls: Arc<rustls::ClientConfig>,
}

/// Credentials and tokens are not printed.
impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("base", &self.base)
            .field("reference", &self.reference)
            .finish_non_exhaustive()
    }
}

/// The digest of `bytes` in the algorithm `expected` names (sha256 or sha512).
fn content_digest(expected: &str, bytes: &[u8]) -> Result<String, RegistryError> {
    match expected.split_once(':').map(|(algorithm, _)| algorithm) {
        Some("sha256") => Ok(format!("sha256:{:x}", sha2::Sha256::digest(bytes))),
        Some("sha512") => Ok(format!("sha512:{:x}", sha2::Sha512::digest(bytes))),
        _ => Err(ManifestError::Invalid(format!("the digest {expected:?} is not sha256 or sha512")).into()),
    }
}

/// The registry's own error messages in an answer's body (`: msg; msg`), if it has them.
fn registry_errors(body: &[u8]) -> String {
    #[derive(serde::Deserialize)]
    struct Errors {
        errors: Vec<ErrorEntry>,
    }
    #[derive(serde::Deserialize)]
    struct ErrorEntry {
        #[serde(default)]
        message: String,
        #[serde(default)]
        code: String,
    }
    serde_json::from_slice::<Errors>(body)
        .ok()
        .map(|e| {
            e.errors
                .iter()
                .map(|e| {
                    if e.message.is_empty() {
                        e.code.clone()
                    } else {
                        e.message.clone()
                    }
                })
                .collect::<Vec<_>>()
                .join("; ")
        })
        .filter(|m| !m.is_empty())
        .map_or_else(String::new, |m| format!(": {m}"))
}

impl Client {
    fn source(&self, url: String, accept: Option<&str>) -> HttpSource {
        let mut source = HttpSource {
            url,
            ..self.template.clone()
        };
        if let Some(accept) = accept {
            source.extra_headers.push(format!("Accept: {accept}"));
        }
        if let Some(authorization) = self.authorization.lock().ok().and_then(|a| a.clone()) {
            source.extra_headers.push(format!("Authorization: {authorization}"));
        }
        source
    }

    /// A GET that meets a 401 once more (a token that ran out is fetched again).
    async fn get_authorized(&self, path: &str, accept: Option<&str>) -> Result<Answer, RegistryError> {
        let answer = self.get(path, accept).await?;
        if answer.status != StatusCode::UNAUTHORIZED {
            return Ok(answer);
        }
        self.authenticate(&answer).await?;
        Ok(self.get(path, accept).await?)
    }

    async fn get(&self, path: &str, accept: Option<&str>) -> Result<Answer, HttpError> {
        http_source::get(&self.source(format!("{}{path}", self.base), accept), &self.tls).await
    }

    /// Connects to the registry of `source`: the scheme that answers, and the credentials its
    /// challenge asks for.
    ///
    /// # Errors
    /// [`RegistryError`].
    pub async fn connect(source: &RegistrySource) -> Result<Self, RegistryError> {
        let reference = reference::parse(&source.url)?;
        let template = HttpSource {
            url: String::new(),
            basic_auth: None,
            extra_headers: Vec::new(),
            extra_roots_pem: source.extra_roots_pem.clone(),
            skip_tls_verify: source.insecure,
            no_redirects: false,
        };
        let tls = http_source::tls_config(&template)?;
        let client = |scheme: &str| Self {
            base: format!("{scheme}://{}", reference.registry),
            reference: reference.clone(),
            authorization: Arc::default(),
            credentials: source.credentials.clone(),
            template: template.clone(),
            tls: Arc::clone(&tls),
        };
        let mut https = client("https");
        match https.ping().await {
            Ok(()) => Ok(https),
            // An insecure registry is tried over https unverified, then over plain http.
            Err(RegistryError::Http(HttpError::Connect { .. })) if source.insecure => {
                let mut http = client("http");
                http.ping().await?;
                Ok(http)
            }
            Err(e) => Err(e),
        }
    }

    /// The API's base (`GET /v2/`), whose 401 says which credentials the registry wants.
    async fn ping(&mut self) -> Result<(), RegistryError> {
        let answer = self.get("/v2/", None).await?;
        match answer.status {
            StatusCode::UNAUTHORIZED => self.authenticate(&answer).await,
            status if status.is_success() => Ok(()),
            status => Err(RegistryError::Status {
                what: format!("GET {}/v2/", self.base),
                status,
                detail: registry_errors(&answer.bytes(DOCUMENT_LIMIT).await.unwrap_or_default()),
            }),
        }
    }

    /// A document (manifest or config), read whole, its digest checked when `digest` is given.
    async fn document(
        &self,
        path: &str,
        accept: Option<&str>,
        what: &str,
        digest: Option<&str>,
    ) -> Result<(String, Vec<u8>), RegistryError> {
        let answer = self.get_authorized(path, accept).await?;
        let status = answer.status;
        let content_type = answer
            .headers
            .get(hyper::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let body = answer.bytes(DOCUMENT_LIMIT).await?;
        if !status.is_success() {
            return Err(RegistryError::Status {
                what: what.to_owned(),
                status,
                detail: registry_errors(&body),
            });
        }
        if let Some(expected) = digest {
            let actual = content_digest(expected, &body)?;
            if actual != expected {
                return Err(RegistryError::Digest {
                    what: what.to_owned(),
                    actual,
                    expected: expected.to_owned(),
                });
            }
        }
        Ok((content_type, body))
    }

    /// The image's layers, base first, once its manifest (through an index if need be) and its
    /// config are read and checked.
    ///
    /// # Errors
    /// [`RegistryError`].
    pub async fn layers(&self, architecture: Option<&str>) -> Result<Image, RegistryError> {
        let Reference {
            registry,
            repository,
            reference,
        } = &self.reference;
        let by_digest = reference.contains(':').then_some(reference.as_str());
        let what = format!("reading manifest {reference} in {registry}/{repository}");
        let (content_type, body) = self
            .document(
                &format!("/v2/{repository}/manifests/{reference}"),
                Some(manifest::ACCEPT),
                &what,
                by_digest,
            )
            .await?;
        let image = match manifest::parse(&content_type, &body)? {
            Manifest::Image(image) => image,
            Manifest::Index(entries) => {
                let entry = manifest::choose(&entries, architecture.unwrap_or(manifest::own_architecture()))?;
                let what = format!("reading manifest {} in {registry}/{repository}", entry.digest);
                let path = format!("/v2/{repository}/manifests/{}", entry.digest);
                let (content_type, body) = self
                    .document(&path, Some(manifest::ACCEPT), &what, Some(&entry.digest))
                    .await?;
                match manifest::parse(&content_type, &body)? {
                    Manifest::Image(image) => image,
                    Manifest::Index(_) => {
                        return Err(ManifestError::Invalid("an index inside an index".to_owned()).into());
                    }
                }
            }
        };
        let digest = &image.config.digest;
        let what = format!("reading config {digest} in {registry}/{repository}");
        let (_, body) = self
            .document(&format!("/v2/{repository}/blobs/{digest}"), None, &what, Some(digest))
            .await?;
        let config: ImageConfig =
            serde_json::from_slice(&body).map_err(|e| ManifestError::Invalid(format!("the image's config: {e}")))?;
        if let Some(wanted) = architecture
            && config.architecture != wanted
        {
            return Err(RegistryError::Architecture {
                actual: config.architecture,
                wanted: wanted.to_owned(),
            });
        }
        if config.is_bootc() {
            return Err(RegistryError::Bootc);
        }
        Ok(Image {
            labels: config.env_labels(),
            layers: image.layers,
        })
    }

    /// A layer's blob, streamed.
    async fn blob(&self, layer: &Descriptor) -> Result<Stream, RegistryError> {
        let repository = &self.reference.repository;
        let answer = self
            .get_authorized(&format!("/v2/{repository}/blobs/{}", layer.digest), None)
            .await?;
        if !answer.status.is_success() {
            let status = answer.status;
            return Err(RegistryError::Status {
                what: format!(
                    "reading layer {} in {}/{repository}",
                    layer.digest, self.reference.registry
                ),
                status,
                detail: registry_errors(&answer.bytes(DOCUMENT_LIMIT).await.unwrap_or_default()),
            });
        }
        Ok(Box::new(answer.download()))
    }
}

#[cfg(test)]
mod tests;
