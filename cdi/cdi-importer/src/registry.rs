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

pub mod manifest;
pub mod reference;
pub mod tar_stream;

use std::sync::Arc;

use base64::Engine as _;
use hyper::StatusCode;
use sha2::Digest as _;
use tracing::{info, warn};

use crate::http_source::{self, Answer, HttpError, HttpSource};
use crate::layers::{self, Stream};
use manifest::{Descriptor, ImageConfig, Manifest, ManifestError};
use reference::{Reference, ReferenceError};
use tar_stream::{EntryKind, TarStream};

/// Where a containerDisk keeps its disk (upstream's `disk`).
pub const DISK_DIR: &str = "disk/";
/// The largest manifest, config or token answer read.
const DOCUMENT_LIMIT: usize = 4 << 20;

/// How to reach the image.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
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
    /// No layer holds a disk.
    #[error("Failed to find VM disk image file in the container image")]
    NoDisk,
}

/// A connection's settings to one registry, with the credentials its challenge asked for.
#[derive(Clone, Debug)]
pub struct Client {
    base: String,
    reference: Reference,
    authorization: Option<String>,
    template: HttpSource,
    tls: Arc<rustls::ClientConfig>,
}

/// A token service's answer (either field, as registries differ).
#[derive(serde::Deserialize)]
struct Token {
    #[serde(default)]
    token: Option<String>,
    #[serde(default)]
    access_token: Option<String>,
}

/// The parameters of a `WWW-Authenticate` challenge: its scheme and `key="value"` pairs.
fn challenge(header: &str) -> (String, Vec<(String, String)>) {
    let (scheme, rest) = header.trim().split_once(' ').unwrap_or((header.trim(), ""));
    let mut params = Vec::new();
    let mut rest = rest.trim();
    while let Some((key, after)) = rest.split_once('=') {
        let key = key.trim().trim_start_matches(',').trim().to_ascii_lowercase();
        let (value, remaining) = if let Some(quoted) = after.strip_prefix('"') {
            let end = quoted.find('"').unwrap_or(quoted.len());
            (quoted[..end].to_owned(), quoted.get(end + 1..).unwrap_or(""))
        } else {
            let end = after.find(',').unwrap_or(after.len());
            (after[..end].trim().to_owned(), &after[end..])
        };
        params.push((key, value));
        rest = remaining.trim_start_matches([',', ' ']);
    }
    (scheme.to_ascii_lowercase(), params)
}

fn percent_encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

fn sha256_digest(bytes: &[u8]) -> String {
    format!("sha256:{:x}", sha2::Sha256::digest(bytes))
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
        if let Some(authorization) = &self.authorization {
            source.extra_headers.push(format!("Authorization: {authorization}"));
        }
        source
    }

    async fn get(&self, path: &str, accept: Option<&str>) -> Result<Answer, HttpError> {
        http_source::get(&self.source(format!("{}{path}", self.base), accept), &self.tls).await
    }

    /// Meets a 401's challenge: sets the Authorization the registry asked for.
    async fn authenticate(
        &mut self,
        answer: &Answer,
        credentials: Option<&(String, String)>,
    ) -> Result<(), RegistryError> {
        let registry = self.reference.registry.clone();
        let auth_error = |reason: String| RegistryError::Auth {
            registry: registry.clone(),
            reason,
        };
        let header = answer
            .headers
            .get(hyper::header::WWW_AUTHENTICATE)
            .and_then(|h| h.to_str().ok())
            .ok_or_else(|| auth_error("HTTP 401 without a challenge".to_owned()))?;
        let (scheme, params) = challenge(header);
        let param = |name: &str| params.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
        match scheme.as_str() {
            "basic" => {
                let (user, password) = credentials.ok_or_else(|| {
                    auth_error("the registry wants credentials: set the source's secretRef".to_owned())
                })?;
                let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
                self.authorization = Some(format!("Basic {token}"));
                Ok(())
            }
            "bearer" => {
                let realm =
                    param("realm").ok_or_else(|| auth_error("a Bearer challenge without a realm".to_owned()))?;
                let scope = format!("repository:{}:pull", self.reference.repository);
                let mut query = vec![format!("scope={}", percent_encode(&scope))];
                if let Some(service) = param("service") {
                    query.insert(0, format!("service={}", percent_encode(&service)));
                }
                let separator = if realm.contains('?') { '&' } else { '?' };
                let source = HttpSource {
                    url: format!("{realm}{separator}{}", query.join("&")),
                    basic_auth: credentials.cloned(),
                    ..self.template.clone()
                };
                let answer = http_source::get(&source, &self.tls).await?;
                let status = answer.status;
                let body = answer.bytes(DOCUMENT_LIMIT).await?;
                if !status.is_success() {
                    return Err(auth_error(format!(
                        "the token service {realm} answered HTTP {status}{}",
                        registry_errors(&body)
                    )));
                }
                let token: Token = serde_json::from_slice(&body)
                    .map_err(|e| auth_error(format!("the token service's answer: {e}")))?;
                let token = token
                    .token
                    .or(token.access_token)
                    .filter(|t| !t.is_empty())
                    .ok_or_else(|| auth_error("the token service gave no token".to_owned()))?;
                self.authorization = Some(format!("Bearer {token}"));
                Ok(())
            }
            other => Err(auth_error(format!("unknown challenge scheme {other:?}"))),
        }
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
        };
        let tls = http_source::tls_config(&template)?;
        let client = |scheme: &str| Self {
            base: format!("{scheme}://{}", reference.registry),
            reference: reference.clone(),
            authorization: None,
            template: template.clone(),
            tls: Arc::clone(&tls),
        };
        let mut https = client("https");
        match https.ping(source.credentials.as_ref()).await {
            Ok(()) => Ok(https),
            // An insecure registry is tried over https unverified, then over plain http.
            Err(RegistryError::Http(HttpError::Connect { .. })) if source.insecure => {
                let mut http = client("http");
                http.ping(source.credentials.as_ref()).await?;
                Ok(http)
            }
            Err(e) => Err(e),
        }
    }

    /// The API's base (`GET /v2/`), whose 401 says which credentials the registry wants.
    async fn ping(&mut self, credentials: Option<&(String, String)>) -> Result<(), RegistryError> {
        let answer = self.get("/v2/", None).await?;
        match answer.status {
            StatusCode::UNAUTHORIZED => self.authenticate(&answer, credentials).await,
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
        let answer = self.get(path, accept).await?;
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
        if let Some(expected) = digest.filter(|d| d.starts_with("sha256:")) {
            let actual = sha256_digest(&body);
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
    pub async fn layers(&self, architecture: Option<&str>) -> Result<Vec<Descriptor>, RegistryError> {
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
        Ok(image.layers)
    }

    /// A layer's blob, streamed.
    async fn blob(&self, layer: &Descriptor) -> Result<Stream, RegistryError> {
        let repository = &self.reference.repository;
        let answer = self
            .get(&format!("/v2/{repository}/blobs/{}", layer.digest), None)
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

/// Whether `path` is a file a containerDisk's disk may be (upstream's test).
fn is_disk_path(path: &str) -> bool {
    let in_disk_dir = path.starts_with(DISK_DIR) || path.strip_prefix("./").is_some_and(|p| p.starts_with(DISK_DIR));
    let whiteout = path.rsplit('/').next().is_some_and(|name| name.starts_with(".wh."));
    in_disk_dir && !whiteout
}

/// The disk found in a layer: its path in the image and its bytes.
pub struct Disk {
    /// Its path in the image.
    pub path: String,
    /// Its size.
    pub size: u64,
    /// Its bytes.
    pub stream: Stream,
}

impl std::fmt::Debug for Disk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Disk")
            .field("path", &self.path)
            .field("size", &self.size)
            .finish_non_exhaustive()
    }
}

/// Finds the disk in `layers`, base first: a layer that cannot be read as an archive is passed
/// over, as upstream's importer does. Blocking: call it from a blocking thread, with `runtime`
/// the runtime the client's requests run on.
///
/// # Errors
/// [`RegistryError::NoDisk`] when no layer has one.
pub fn find_disk(
    runtime: &tokio::runtime::Handle,
    client: &Client,
    layers: &[Descriptor],
) -> Result<Disk, RegistryError> {
    for layer in layers {
        info!(digest = %layer.digest, size = layer.size, media_type = %layer.media_type, "reading layer");
        let blob = match runtime.block_on(client.blob(layer)) {
            Ok(blob) => blob,
            Err(error) => {
                warn!(digest = %layer.digest, %error, "passing over a layer that could not be fetched");
                continue;
            }
        };
        let stream = match layers::open(blob) {
            Ok(opened) => opened.stream,
            Err(error) => {
                warn!(digest = %layer.digest, %error, "passing over a layer that could not be opened");
                continue;
            }
        };
        let mut archive = TarStream::new(stream);
        loop {
            match archive.next_entry() {
                Ok(Some(entry)) if entry.kind == EntryKind::File && is_disk_path(&entry.path) => {
                    info!(path = %entry.path, size = entry.size, "found the disk");
                    return Ok(Disk {
                        path: entry.path,
                        size: entry.size,
                        stream: archive.into_entry(entry.size),
                    });
                }
                Ok(Some(_)) => {}
                Ok(None) => break,
                Err(error) => {
                    warn!(digest = %layer.digest, %error, "passing over a layer that could not be read");
                    break;
                }
            }
        }
    }
    Err(RegistryError::NoDisk)
}

#[cfg(test)]
mod tests;
