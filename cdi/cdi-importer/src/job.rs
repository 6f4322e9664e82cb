//! What the importer pod is asked to do, read from its environment with upstream's variable
//! names, and refused by name when a value is bad or not supported yet. Pure: the environment
//! comes in as a map.

use std::collections::BTreeMap;
use std::path::PathBuf;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::checksum::{Checksum, ChecksumError};
use crate::http_source::HttpSource;
use crate::registry::RegistrySource;

use cdi_api::importer_env as env;

/// Where the data comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// A GET of a URL.
    Http(HttpSource),
    /// A containerDisk image's disk, pulled from a registry.
    Registry(RegistrySource),
    /// Nothing: a blank disk of the size asked for.
    Blank,
}

/// An import to run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Job {
    /// The source.
    pub source: Source,
    /// The directory of `certConfigMap`'s certificates, read when the job starts.
    pub cert_dir: Option<PathBuf>,
    /// The size asked for.
    pub image_size: Option<u64>,
    /// The filesystem's share.
    pub filesystem_overhead: String,
    /// Whether the disk's space is allocated up front.
    pub preallocation: bool,
    /// The expected checksum.
    pub checksum: Option<Checksum>,
    /// The DataVolume's uid, which labels the progress metric.
    pub owner_uid: Option<String>,
}

/// Why the environment is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum JobError {
    /// A variable's value is bad.
    #[error("{variable}={value:?}: {reason}")]
    Bad {
        /// The variable.
        variable: String,
        /// Its value.
        value: String,
        /// Why.
        reason: String,
    },
    /// An extra header's variable is bad (its value, maybe a secret, is not repeated).
    #[error("{variable}: {reason}")]
    BadHeader {
        /// The variable.
        variable: String,
        /// Why.
        reason: &'static str,
    },
    /// A variable that must be set is not.
    #[error("{0} is not set")]
    Missing(&'static str),
    /// Upstream's source or option we do not run yet.
    #[error("{variable}={value:?} is not supported by this importer yet")]
    Unsupported {
        /// The variable.
        variable: String,
        /// Its value.
        value: String,
    },
    /// The checksum.
    #[error("IMPORTER_CHECKSUM: {0}")]
    Checksum(#[from] ChecksumError),
}

fn bad(variable: &str, value: &str, reason: impl Into<String>) -> JobError {
    JobError::Bad {
        variable: variable.to_owned(),
        value: value.to_owned(),
        reason: reason.into(),
    }
}

fn unsupported(variable: &str, value: &str) -> JobError {
    JobError::Unsupported {
        variable: variable.to_owned(),
        value: value.to_owned(),
    }
}

/// Reads the job from `vars` (the process's environment).
///
/// # Errors
/// [`JobError`] naming the variable.
pub fn from_env(vars: &BTreeMap<String, String>) -> Result<Job, JobError> {
    let get = |name: &str| vars.get(name).map(String::as_str).filter(|v| !v.is_empty());
    for name in env::UNSUPPORTED.iter().chain(&env::PROXY) {
        if let Some(value) = get(name).filter(|v| !(*name == "IMPORTER_FINAL_CHECKPOINT" && *v == "false")) {
            return Err(unsupported(name, value));
        }
    }
    match get(env::CONTENT_TYPE) {
        None | Some("kubevirt") => {}
        Some(other) => return Err(unsupported(env::CONTENT_TYPE, other)),
    }
    let insecure = match get(env::INSECURE_TLS) {
        None => false,
        Some(value) => value
            .parse::<bool>()
            .map_err(|_| bad(env::INSECURE_TLS, value, "should be \"true\" or \"false\""))?,
    };
    let source_kind = get(env::SOURCE);
    // Only a registry in CDIConfig's insecureRegistries is reached unverified here.
    if insecure && source_kind != Some("registry") {
        return Err(unsupported(env::INSECURE_TLS, "true"));
    }
    let architecture = get(env::REGISTRY_IMAGE_ARCHITECTURE);
    if let Some(value) = architecture
        && source_kind != Some("registry")
    {
        return Err(bad(
            env::REGISTRY_IMAGE_ARCHITECTURE,
            value,
            "only the registry source has a platform",
        ));
    }
    let preallocation = match get(env::PREALLOCATION) {
        None => false,
        Some(value) => value
            .parse::<bool>()
            .map_err(|_| bad(env::PREALLOCATION, value, "should be \"true\" or \"false\""))?,
    };
    let image_size = get(env::IMAGE_SIZE)
        .map(|value| {
            kubevirt_api::quantity::to_bytes(&Quantity(value.to_owned()))
                .map_err(|e| bad(env::IMAGE_SIZE, value, e.to_string()))
        })
        .transpose()?;
    let filesystem_overhead = get(env::FILESYSTEM_OVERHEAD).unwrap_or("0").to_owned();
    cdi_api::cdi_config::overhead_thousandths(&filesystem_overhead)
        .map_err(|e| bad(env::FILESYSTEM_OVERHEAD, &filesystem_overhead, e.to_string()))?;
    let checksum = get(env::CHECKSUM).map(Checksum::parse).transpose()?;
    let source = match source_kind {
        Some("http") => Source::Http(http_source(
            vars,
            get(env::ENDPOINT).ok_or(JobError::Missing(env::ENDPOINT))?,
        )?),
        Some("registry") => {
            let url = get(env::ENDPOINT).ok_or(JobError::Missing(env::ENDPOINT))?;
            crate::registry::reference::parse(url).map_err(|e| bad(env::ENDPOINT, url, e.to_string()))?;
            Source::Registry(RegistrySource {
                url: url.to_owned(),
                credentials: credentials(vars)?,
                extra_roots_pem: Vec::new(),
                insecure,
                architecture: architecture.map(str::to_owned),
            })
        }
        Some("none") => {
            if image_size.is_none() {
                return Err(JobError::Missing(env::IMAGE_SIZE));
            }
            Source::Blank
        }
        Some(other) => return Err(unsupported(env::SOURCE, other)),
        None => return Err(JobError::Missing(env::SOURCE)),
    };
    if checksum.is_some() && !matches!(source, Source::Http(_)) {
        return Err(bad(
            env::CHECKSUM,
            get(env::CHECKSUM).unwrap_or_default(),
            "only an http source's download is checked",
        ));
    }
    Ok(Job {
        source,
        cert_dir: get(env::CERT_DIR).map(PathBuf::from),
        image_size,
        filesystem_overhead,
        preallocation,
        checksum,
        owner_uid: get(env::OWNER_UID).map(str::to_owned),
    })
}

/// The secret's credentials: both keys, or neither.
fn credentials(vars: &BTreeMap<String, String>) -> Result<Option<(String, String)>, JobError> {
    let get = |name: &str| vars.get(name).filter(|v| !v.is_empty()).cloned();
    match (get(env::ACCESS_KEY_ID), get(env::SECRET_KEY)) {
        (Some(user), Some(password)) => Ok(Some((user, password))),
        (None, None) => Ok(None),
        (Some(_), None) => Err(JobError::Missing(env::SECRET_KEY)),
        (None, Some(_)) => Err(JobError::Missing(env::ACCESS_KEY_ID)),
    }
}

fn http_source(vars: &BTreeMap<String, String>, endpoint: &str) -> Result<HttpSource, JobError> {
    let basic_auth = credentials(vars)?;
    let mut extra_headers = Vec::new();
    for (name, value) in vars.range(env::EXTRA_HEADER_PREFIX.to_owned()..) {
        let Some(index) = name.strip_prefix(env::EXTRA_HEADER_PREFIX) else {
            break;
        };
        let header_error = |reason| JobError::BadHeader {
            variable: name.clone(),
            reason,
        };
        if index.parse::<u32>().is_err() {
            return Err(header_error("extra headers are numbered"));
        }
        if !value.contains(':') {
            return Err(header_error("a header is `Name: value`"));
        }
        extra_headers.push(value.clone());
    }
    Ok(HttpSource {
        url: endpoint.to_owned(),
        basic_auth,
        extra_headers,
        extra_roots_pem: Vec::new(),
        skip_tls_verify: false,
        no_redirects: false,
    })
}

#[cfg(test)]
mod tests;
