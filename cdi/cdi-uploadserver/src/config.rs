//! The upload server's configuration, read from its environment with upstream's variable names
//! and refused by name when a value is bad. Pure: the environment comes in as a map.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;

use cdi_api::importer_env;
use cdi_api::upload::{self, env};
use cdi_importer::import::Target;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// What the server is asked to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// The address to listen on.
    pub address: IpAddr,
    /// The port to listen on.
    pub port: u16,
    /// The serving certificate and its key.
    pub cert_file: PathBuf,
    /// The key.
    pub key_file: PathBuf,
    /// The CA that signs the client's certificate.
    pub client_ca_file: PathBuf,
    /// The common name the client's certificate must have.
    pub client_name: String,
    /// Where the disk goes.
    pub target: Target,
    /// The claim's requested size.
    pub image_size: Option<u64>,
    /// The share of a filesystem volume kept for the filesystem.
    pub filesystem_overhead: String,
    /// Whether the disk's space is allocated up front.
    pub preallocation: bool,
    /// When the server gives up waiting, seconds since the epoch.
    pub deadline: Option<i64>,
    /// The scratch space, used when it is mounted (upstream's `/scratch`).
    pub scratch_dir: PathBuf,
}

/// Why the environment cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A value is not what the variable takes.
    #[error("{variable}={value:?}: {reason}")]
    Bad {
        /// The variable.
        variable: &'static str,
        /// Its value.
        value: String,
        /// What it should be.
        reason: String,
    },
    /// A variable the server needs is not set.
    #[error("{0} is not set")]
    Missing(&'static str),
    /// A variable this server does not honour is set.
    #[error("{variable}={value:?} is not supported by this upload server")]
    Unsupported {
        /// The variable.
        variable: &'static str,
        /// Its value.
        value: String,
    },
}

fn bad(variable: &'static str, value: &str, reason: impl Into<String>) -> ConfigError {
    ConfigError::Bad {
        variable,
        value: value.to_owned(),
        reason: reason.into(),
    }
}

/// Reads the configuration from `vars`.
///
/// # Errors
/// [`ConfigError`], naming the variable.
pub fn from_env(vars: &BTreeMap<String, String>) -> Result<Config, ConfigError> {
    let get = |name: &str| vars.get(name).map(String::as_str).filter(|v| !v.is_empty());
    let required = |name: &'static str| get(name).ok_or(ConfigError::Missing(name));
    // Upstream's crypto policy; rustls' defaults are used here, so a policy is refused.
    for name in [env::CIPHERS, env::MIN_TLS_VERSION] {
        if let Some(value) = get(name) {
            return Err(ConfigError::Unsupported {
                variable: name,
                value: value.to_owned(),
            });
        }
    }
    let address = match get(env::LISTEN_ADDRESS) {
        None => IpAddr::from([0, 0, 0, 0]),
        Some(value) => value
            .parse()
            .map_err(|_| bad(env::LISTEN_ADDRESS, value, "should be an IP address"))?,
    };
    let port = match get(env::LISTEN_PORT) {
        None => upload::PORT,
        Some(value) => value
            .parse()
            .map_err(|_| bad(env::LISTEN_PORT, value, "should be a port number"))?,
    };
    let target = match get(env::DESTINATION) {
        None => Target::File(PathBuf::from(importer_env::DATA_DIR).join(cdi_importer::run::DISK_IMAGE)),
        Some(path) if path == importer_env::BLOCK_DEVICE => Target::Block(PathBuf::from(path)),
        Some(path) if path.starts_with('/') => Target::File(PathBuf::from(path)),
        Some(path) => return Err(bad(env::DESTINATION, path, "should be an absolute path")),
    };
    let image_size = get(env::IMAGE_SIZE)
        .map(|value| {
            kubevirt_api::quantity::to_bytes(&Quantity(value.to_owned()))
                .map_err(|e| bad(env::IMAGE_SIZE, value, e.to_string()))
        })
        .transpose()?;
    let filesystem_overhead = get(importer_env::FILESYSTEM_OVERHEAD).unwrap_or("0").to_owned();
    cdi_api::cdi_config::overhead_thousandths(&filesystem_overhead)
        .map_err(|e| bad(importer_env::FILESYSTEM_OVERHEAD, &filesystem_overhead, e.to_string()))?;
    let preallocation = match get(importer_env::PREALLOCATION) {
        None => false,
        Some(value) => value
            .parse::<bool>()
            .map_err(|_| bad(importer_env::PREALLOCATION, value, "should be \"true\" or \"false\""))?,
    };
    let deadline = get(env::DEADLINE)
        .map(|value| {
            time::OffsetDateTime::parse(value, &time::format_description::well_known::Rfc3339)
                .map(time::OffsetDateTime::unix_timestamp)
                .map_err(|e| bad(env::DEADLINE, value, format!("should be an RFC 3339 time: {e}")))
        })
        .transpose()?;
    Ok(Config {
        address,
        port,
        cert_file: PathBuf::from(required(env::TLS_CERT_FILE)?),
        key_file: PathBuf::from(required(env::TLS_KEY_FILE)?),
        client_ca_file: PathBuf::from(required(env::CLIENT_CERT_FILE)?),
        client_name: required(env::CLIENT_NAME)?.to_owned(),
        target,
        image_size,
        filesystem_overhead,
        preallocation,
        deadline,
        scratch_dir: PathBuf::from(importer_env::SCRATCH_DIR),
    })
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        let mut vars: BTreeMap<String, String> = [
            (env::TLS_CERT_FILE, upload::SERVER_CERT_FILE),
            (env::TLS_KEY_FILE, upload::SERVER_KEY_FILE),
            (env::CLIENT_CERT_FILE, upload::CLIENT_CA_FILE),
            (env::CLIENT_NAME, upload::PROXY_CLIENT_NAME),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        for (k, v) in pairs {
            vars.insert((*k).to_owned(), (*v).to_owned());
        }
        vars
    }

    #[test]
    fn the_controllers_environment_reads_with_upstreams_defaults() {
        let config = from_env(&vars(&[
            (env::IMAGE_SIZE, "1Gi"),
            (importer_env::FILESYSTEM_OVERHEAD, "0.055"),
            (importer_env::PREALLOCATION, "false"),
            (env::DEADLINE, "2026-11-30T10:00:00Z"),
        ]))
        .expect("config");
        assert_eq!(
            config,
            Config {
                address: IpAddr::from([0, 0, 0, 0]),
                port: 8443,
                cert_file: PathBuf::from("/etc/tls/tls.crt"),
                key_file: PathBuf::from("/etc/tls/tls.key"),
                client_ca_file: PathBuf::from("/etc/tls/ca.crt"),
                client_name: "client.upload-server.cdi.kubevirt.io".to_owned(),
                target: Target::File(PathBuf::from("/data/disk.img")),
                image_size: Some(1 << 30),
                filesystem_overhead: "0.055".to_owned(),
                preallocation: false,
                deadline: Some(1_796_032_800),
                scratch_dir: PathBuf::from("/scratch"),
            }
        );
        let block = from_env(&vars(&[(env::DESTINATION, "/dev/cdi-block-volume")])).expect("block");
        assert_eq!(block.target, Target::Block(PathBuf::from("/dev/cdi-block-volume")));
    }

    #[test]
    fn a_bad_or_missing_variable_is_named() {
        let refused = |pairs: &[(&str, &str)]| from_env(&vars(pairs)).expect_err("refused").to_string();
        assert!(refused(&[(env::LISTEN_PORT, "http")]).starts_with("LISTEN_PORT=\"http\""));
        assert!(refused(&[(env::IMAGE_SIZE, "big")]).starts_with("UPLOAD_IMAGE_SIZE=\"big\""));
        assert!(refused(&[(importer_env::PREALLOCATION, "yes")]).starts_with("PREALLOCATION=\"yes\""));
        assert!(refused(&[(importer_env::FILESYSTEM_OVERHEAD, "2")]).starts_with("FILESYSTEM_OVERHEAD=\"2\""));
        assert!(refused(&[(env::DEADLINE, "tomorrow")]).starts_with("DEADLINE=\"tomorrow\""));
        assert!(refused(&[(env::DESTINATION, "disk.img")]).starts_with("DESTINATION=\"disk.img\""));
        assert_eq!(
            refused(&[(env::MIN_TLS_VERSION, "VersionTLS13")]),
            "TLS_MIN_VERSION=\"VersionTLS13\" is not supported by this upload server"
        );
        let mut missing = vars(&[]);
        missing.remove(env::CLIENT_NAME);
        assert_eq!(from_env(&missing), Err(ConfigError::Missing("CLIENT_NAME")));
    }
}
