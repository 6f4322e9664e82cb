//! Names the upload path shares between cdi-controller (which makes the upload server's pod),
//! cdi-uploadserver (which reads them from its environment) and cdi-uploadproxy (which reaches
//! it), with upstream's values.

/// The port the upload server listens on, and its Service's port (upstream's `UploadServerPort`).
pub const PORT: u16 = 8443;
/// The name upload servers' pods and Services start with (`cdi-upload-<claim>`).
pub const POD_PREFIX: &str = "cdi-upload";
/// The common name of the client certificate cdi-uploadproxy presents (upstream's).
pub const PROXY_CLIENT_NAME: &str = "client.upload-server.cdi.kubevirt.io";
/// The header a client may set to name what it sends (upstream's `x-cdi-content-type`).
pub const CONTENT_TYPE_HEADER: &str = "x-cdi-content-type";

/// Where the pod's certificate Secret is mounted (upstream's `/etc/tls/`).
pub const CERT_DIR: &str = "/etc/tls";
/// The upload server's certificate in [`CERT_DIR`].
pub const SERVER_CERT_FILE: &str = "/etc/tls/tls.crt";
/// Its key.
pub const SERVER_KEY_FILE: &str = "/etc/tls/tls.key";
/// The CA that signs the proxy's client certificate.
pub const CLIENT_CA_FILE: &str = "/etc/tls/ca.crt";

/// The upload server's environment (upstream's names).
pub mod env {
    /// The address to listen on (`0.0.0.0` when unset).
    pub const LISTEN_ADDRESS: &str = "LISTEN_ADDRESS";
    /// The port to listen on ([`super::PORT`] when unset).
    pub const LISTEN_PORT: &str = "LISTEN_PORT";
    /// The serving certificate, PEM.
    pub const TLS_CERT_FILE: &str = "TLS_CERT_FILE";
    /// Its key, PEM.
    pub const TLS_KEY_FILE: &str = "TLS_KEY_FILE";
    /// The CA that signs the clients' certificates, PEM.
    pub const CLIENT_CERT_FILE: &str = "CLIENT_CERT_FILE";
    /// The common name the client's certificate must have.
    pub const CLIENT_NAME: &str = "CLIENT_NAME";
    /// Where the disk goes: a block device, or a file (`/data/disk.img` when unset).
    pub const DESTINATION: &str = "DESTINATION";
    /// The claim's requested size, as a quantity.
    pub const IMAGE_SIZE: &str = "UPLOAD_IMAGE_SIZE";
    /// When the server gives up waiting for an upload (RFC 3339).
    pub const DEADLINE: &str = "DEADLINE";
    /// The TLS cipher suites (upstream's crypto policy).
    pub const CIPHERS: &str = "TLS_CIPHERS";
    /// The lowest TLS version (upstream's crypto policy).
    pub const MIN_TLS_VERSION: &str = "TLS_MIN_VERSION";
}

/// The paths a client posts an upload to (upstream's `SyncUploadPaths`): answered once the disk
/// is written.
pub const SYNC_PATHS: [&str; 2] = ["/v1beta1/upload", "/v1alpha1/upload"];
/// The paths of an upload answered once the body is received, with the disk finished after
/// (upstream's `AsyncUploadPaths`).
pub const ASYNC_PATHS: [&str; 2] = ["/v1beta1/upload-async", "/v1alpha1/upload-async"];
/// Sync uploads as a multipart form's `file` part (upstream's `SyncUploadFormPaths`).
pub const SYNC_FORM_PATHS: [&str; 2] = ["/v1beta1/upload-form", "/v1alpha1/upload-form"];
/// Async uploads as a multipart form's `file` part (upstream's `AsyncUploadFormPaths`).
pub const ASYNC_FORM_PATHS: [&str; 2] = ["/v1beta1/upload-form-async", "/v1alpha1/upload-form-async"];
/// Uploads of `archive` content (upstream's `ArchiveUploadPaths`).
pub const ARCHIVE_PATHS: [&str; 2] = ["/v1beta1/upload-archive", "/v1alpha1/upload-archive"];
/// The health check.
pub const HEALTHZ_PATH: &str = "/healthz";

/// The termination message of a finished upload (upstream's).
pub const UPLOAD_COMPLETE: &str = "Upload Complete";
/// The termination message of a server whose deadline passed with no upload (upstream's).
pub const DEADLINE_PASSED: &str = "Deadline Passed";

/// The Secret in CDI's namespace with the CA that signs upload servers' certificates.
pub const SERVER_SIGNER_SECRET: &str = "cdi-uploadserver-signer";
/// The ConfigMap with that CA (`ca-bundle.crt`), which cdi-uploadproxy trusts.
pub const SERVER_SIGNER_BUNDLE: &str = "cdi-uploadserver-signer-bundle";
/// The Secret with the CA that signs cdi-uploadproxy's client certificate.
pub const CLIENT_SIGNER_SECRET: &str = "cdi-uploadserver-client-signer";
/// The ConfigMap with that CA (`ca-bundle.crt`), which upload servers trust.
pub const CLIENT_SIGNER_BUNDLE: &str = "cdi-uploadserver-client-signer-bundle";
/// The Secret with cdi-uploadproxy's client certificate (`tls.crt`, `tls.key`).
pub const CLIENT_CERT_SECRET: &str = "cdi-uploadserver-client-cert";
/// The key of a bundle ConfigMap (`ca-bundle.crt`), as every operator's bundles have it.
pub use operator_kit::certificates::store::BUNDLE_KEY;

/// The most a Service's name may have (a DNS-1035 label).
const SERVICE_NAME_MAX: usize = 63;

/// The most a pod's or Secret's name may have (a DNS subdomain).
const POD_NAME_MAX: usize = 253;

/// `name` cut to `max` characters when longer: its start and a hash of the whole, as upstream
/// shortens names. FNV-1a, 64 bits: stable, and names that share their start stay apart.
fn shortened(name: &str, max: usize) -> String {
    if name.len() <= max {
        return name.to_owned();
    }
    let hash = name.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    let keep = max - 17;
    format!("{}-{hash:016x}", name[..keep].trim_end_matches(['-', '.']))
}

/// The upload server pod's (and its Secret's) name for `claim` (upstream's `cdi-upload-<claim>`,
/// shortened past 253 characters).
#[must_use]
pub fn pod_name(claim: &str) -> String {
    shortened(&format!("{POD_PREFIX}-{claim}"), POD_NAME_MAX)
}

/// The upload server Service's name for `claim`: the pod's name with dots as dashes, shortened
/// past 63 characters (a DNS label).
#[must_use]
pub fn service_name(claim: &str) -> String {
    shortened(&format!("{POD_PREFIX}-{claim}").replace('.', "-"), SERVICE_NAME_MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_upstreams_and_a_long_service_name_is_shortened_stably() {
        assert_eq!(pod_name("disk"), "cdi-upload-disk");
        assert_eq!(service_name("disk.v1"), "cdi-upload-disk-v1");
        let long = "a".repeat(80);
        let short = service_name(&long);
        assert_eq!(short.len(), 63, "{short}");
        assert!(short.starts_with("cdi-upload-aaa"), "{short}");
        assert_eq!(short, service_name(&long), "stable");
        assert_ne!(short, service_name(&format!("{long}b")), "tells names apart");
        let longest = "b".repeat(253);
        assert_eq!(pod_name(&longest).len(), 253, "a pod name stays a DNS subdomain");
        assert_eq!(pod_name("disk"), "cdi-upload-disk");
    }
}
