//! The importer pod's environment, as upstream names it: the contract between the controller,
//! which writes it, and the importer, which reads it.

/// The source kind: `http`, `registry`, `none` (a blank disk), and upstream's others.
pub const SOURCE: &str = "IMPORTER_SOURCE";
/// The source's URL.
pub const ENDPOINT: &str = "IMPORTER_ENDPOINT";
/// `kubevirt` or `archive`.
pub const CONTENT_TYPE: &str = "IMPORTER_CONTENTTYPE";
/// The claim's requested size, a quantity.
pub const IMAGE_SIZE: &str = "IMPORTER_IMAGE_SIZE";
/// The filesystem's share, a fraction.
pub const FILESYSTEM_OVERHEAD: &str = "FILESYSTEM_OVERHEAD";
/// `true` or `false`.
pub const PREALLOCATION: &str = "PREALLOCATION";
/// Basic auth's user (the secret's `accessKeyId`).
pub const ACCESS_KEY_ID: &str = "IMPORTER_ACCESS_KEY_ID";
/// Basic auth's password (the secret's `secretKey`).
pub const SECRET_KEY: &str = "IMPORTER_SECRET_KEY";
/// The directory of `certConfigMap`'s certificates.
pub const CERT_DIR: &str = "IMPORTER_CERT_DIR";
/// `true`: the registry is in CDIConfig's `insecureRegistries` (reached unverified, or over
/// plain http).
pub const INSECURE_TLS: &str = "INSECURE_TLS";
/// The platform's architecture to take from a multi-platform registry image.
pub const REGISTRY_IMAGE_ARCHITECTURE: &str = "IMPORTER_REGISTRY_IMAGE_ARCHITECTURE";
/// The expected checksum, `algorithm:hash`.
pub const CHECKSUM: &str = "IMPORTER_CHECKSUM";
/// The prefix of each extra header's variable (`IMPORTER_EXTRA_HEADER_0`, ...).
pub const EXTRA_HEADER_PREFIX: &str = "IMPORTER_EXTRA_HEADER_";
/// Variables of upstream's other sources and options, refused (with their value) while those
/// are not supported; `IMPORTER_FINAL_CHECKPOINT` is refused unless `false`.
pub const UNSUPPORTED: [&str; 13] = [
    "IMPORTER_PROXY_CERT_DIR",
    "IMPORTER_BACKING_FILE",
    "IMPORTER_THUMBPRINT",
    "IMPORTER_CURRENT_CHECKPOINT",
    "IMPORTER_PREVIOUS_CHECKPOINT",
    "IMPORTER_FINAL_CHECKPOINT",
    "IMPORTER_DISK_ID",
    "IMPORTER_UUID",
    "IMPORTER_PULL_METHOD",
    "IMPORTER_READY_FILE",
    "IMPORTER_DONE_FILE",
    "CACHE_MODE",
    "IMPORTER_GOOGLE_CREDENTIAL_FILE",
];
/// The import proxy's variables (upstream's `http_proxy`, `https_proxy`, `no_proxy`), refused
/// while the importer does not go through a proxy.
pub const PROXY: [&str; 3] = ["http_proxy", "https_proxy", "no_proxy"];
/// The port of the importer's metrics endpoint (upstream's).
pub const METRICS_PORT: u16 = 8443;
/// The importer's progress metric (upstream's).
pub const PROGRESS_METRIC: &str = "kubevirt_cdi_import_progress_total";
/// The owner's uid, which labels the progress metric.
pub const OWNER_UID: &str = "OWNER_UID";
/// The mount of a filesystem claim.
pub const DATA_DIR: &str = "/data";
/// The device of a block claim.
pub const BLOCK_DEVICE: &str = "/dev/cdi-block-volume";
/// The mount of the scratch claim.
pub const SCRATCH_DIR: &str = "/scratch";
/// The mount of `certConfigMap`.
pub const CERT_DIR_PATH: &str = "/certs";
