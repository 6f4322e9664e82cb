//! CDI's clone source, as upstream's `cdi-cloner`: in a pod in the source claim's namespace, it
//! reads the source's disk (`disk.img` of a filesystem claim, or the block device) and posts it,
//! as it is, to the target's upload server with the client certificate cdi-controller gave it.
//! The upload server checks the certificate's name and writes the bytes unchanged.
//!
//! Upstream sends a filesystem claim's files as a tar; here the disk image is the content
//! (`contentType: kubevirt`), sent like a block device's (`blockdevice-clone`).

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Seek as _, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use cdi_api::clone::{self, env};
use control_loop::https_client;

/// The message of a finished clone.
pub const COMPLETE: &str = "Clone Complete";

/// Where the source's disk is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// A block device.
    Block(PathBuf),
    /// A filesystem claim mounted here, with its disk in `disk.img`.
    Filesystem(PathBuf),
}

impl Source {
    /// The disk's path.
    #[must_use]
    pub fn disk(&self) -> PathBuf {
        match self {
            Self::Block(device) => device.clone(),
            Self::Filesystem(mount) => mount.join(cdi_importer::run::DISK_IMAGE),
        }
    }
}

/// What the source pod is asked to do.
#[derive(Clone, PartialEq, Eq)]
pub struct Config {
    /// The client certificate's key, PEM.
    pub client_key: String,
    /// The client certificate, PEM.
    pub client_cert: String,
    /// The upload server's CA, PEM.
    pub server_ca: String,
    /// The upload server's URL.
    pub upload_url: String,
    /// The source.
    pub source: Source,
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("upload_url", &self.upload_url)
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

/// Why the clone failed.
#[derive(Debug, thiserror::Error)]
pub enum CloneError {
    /// A variable the pod needs is not set.
    #[error("{0} is not set")]
    Missing(&'static str),
    /// A variable's value cannot be used.
    #[error("{variable}={value:?}: {reason}")]
    Bad {
        /// The variable.
        variable: &'static str,
        /// Its value.
        value: String,
        /// Why.
        reason: &'static str,
    },
    /// The source's disk cannot be read.
    #[error("reading the source disk {path}: {source}")]
    Source {
        /// The disk.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The certificates cannot be used.
    #[error("the client certificate: {0}")]
    Tls(String),
    /// The request failed.
    #[error("sending to {url}: {message}")]
    Send {
        /// The upload server.
        url: String,
        /// Why.
        message: String,
    },
    /// The upload server refused it.
    #[error("the upload server answered {status}: {body}")]
    Refused {
        /// Its status.
        status: u16,
        /// Its answer.
        body: String,
    },
}

/// Reads the configuration from `vars` (upstream's variable names).
///
/// # Errors
/// [`CloneError::Missing`] or [`CloneError::Bad`], naming the variable.
pub fn from_env(vars: &BTreeMap<String, String>) -> Result<Config, CloneError> {
    let get = |name: &'static str| {
        vars.get(name)
            .filter(|v| !v.is_empty())
            .cloned()
            .ok_or(CloneError::Missing(name))
    };
    let mount = get(env::MOUNT_POINT)?;
    if !mount.starts_with('/') {
        return Err(CloneError::Bad {
            variable: env::MOUNT_POINT,
            value: mount,
            reason: "should be an absolute path",
        });
    }
    let source = match get(env::VOLUME_MODE)?.as_str() {
        "block" => Source::Block(PathBuf::from(mount)),
        "filesystem" => Source::Filesystem(PathBuf::from(mount)),
        other => {
            return Err(CloneError::Bad {
                variable: env::VOLUME_MODE,
                value: other.to_owned(),
                reason: "should be block or filesystem",
            });
        }
    };
    let upload_url = get(env::UPLOAD_URL)?;
    if !upload_url.starts_with("https://") {
        return Err(CloneError::Bad {
            variable: env::UPLOAD_URL,
            value: upload_url,
            reason: "should be an https URL",
        });
    }
    Ok(Config {
        client_key: get(env::CLIENT_KEY)?,
        client_cert: get(env::CLIENT_CERT)?,
        server_ca: get(env::SERVER_CA_CERT)?,
        upload_url,
        source,
    })
}

/// Opens the disk at `path` and gives its size.
fn open(path: &Path) -> Result<(File, u64), CloneError> {
    let failed = |source| CloneError::Source {
        path: path.to_owned(),
        source,
    };
    let mut file = File::open(path).map_err(failed)?;
    let size = file.seek(SeekFrom::End(0)).map_err(failed)?;
    file.seek(SeekFrom::Start(0)).map_err(failed)?;
    Ok((file, size))
}

/// Sends the source's disk to the upload server; gives the bytes sent.
///
/// # Errors
/// [`CloneError`]: a disk that cannot be read, a connection or TLS failure, or an answer other
/// than 200.
pub async fn run(config: &Config) -> Result<u64, CloneError> {
    let path = config.source.disk();
    let (file, size) = open(&path)?;
    let tls = control_loop::tls::client_tls_pem(
        "the clone source's certificates",
        &config.server_ca,
        &config.client_cert,
        &config.client_key,
    )
    .map_err(|e| CloneError::Tls(e.to_string()))?;
    tracing::info!(disk = %path.display(), size, url = %config.upload_url, "sending the source disk");
    let sent = Arc::new(AtomicU64::new(0));
    let body = https_client::reader_body(file, Arc::clone(&sent));
    let headers = [
        (cdi_api::upload::CONTENT_TYPE_HEADER, clone::BLOCK_CONTENT.to_owned()),
        ("content-type", "application/octet-stream".to_owned()),
        ("content-length", size.to_string()),
    ];
    let answer = https_client::send(&tls, "POST", &config.upload_url, &headers, body)
        .await
        .map_err(|message| CloneError::Send {
            url: config.upload_url.clone(),
            message,
        })?;
    if answer.status != 200 {
        return Err(CloneError::Refused {
            status: answer.status,
            body: answer.body,
        });
    }
    Ok(size)
}

#[cfg(test)]
mod tests;
