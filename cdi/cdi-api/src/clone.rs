//! Host-assisted clone, as upstream's legacy flow names its parts: the target claim asks for a
//! clone with [`CLONE_REQUEST`] (`<namespace>/<name>` of the source claim), an upload server in
//! the target's namespace takes the data, and a source pod in the source's namespace streams the
//! source claim's disk to it with a client certificate for [`client_name`]. The DataVolume's
//! [`TOKEN`] is cdi-apiserver's proof that its creator may read the source.

/// The target claim's annotation naming the source claim, `<namespace>/<name>`.
pub const CLONE_REQUEST: &str = "k8s.io/CloneRequest";
/// The DataVolume's (and claim's) annotation with cdi-apiserver's clone token.
pub const TOKEN: &str = "cdi.kubevirt.io/storage.clone.token";
/// The target claim's annotation naming the source pod.
pub const SOURCE_POD: &str = "cdi.kubevirt.io/storage.sourceClonePodName";
/// The target claim's annotation with the name the source pod's client certificate has.
pub const CLIENT_NAME: &str = "cdi.kubevirt.io/uploadClientName";
/// The target claim's annotation with the clone's strategy (`copy`: host-assisted).
pub const CLONE_TYPE: &str = "cdi.kubevirt.io/cloneType";
/// The source pod's label that finds it (its own name).
pub const UNIQUE_ID_LABEL: &str = "cdi.kubevirt.io/storage.clone.cloneUniqeId";
/// Where a filesystem source is mounted in the source pod (upstream's).
pub const MOUNT_PATH: &str = "/var/run/cdi/clone/source";
/// The content type a source pod sends: the disk's bytes, as they are.
pub const BLOCK_CONTENT: &str = "blockdevice-clone";
/// Upstream's content type of a filesystem source: a tar of its files (not sent here).
pub const FILESYSTEM_CONTENT: &str = "filesystem-clone";
/// The source pod's container (upstream's).
pub const SOURCE_CONTAINER: &str = "cdi-clone-source";

/// The source pod's environment (upstream's names).
pub mod env {
    /// The client certificate's key, PEM.
    pub const CLIENT_KEY: &str = "CLIENT_KEY";
    /// The client certificate, PEM.
    pub const CLIENT_CERT: &str = "CLIENT_CERT";
    /// The CA that signs the upload server's certificate, PEM.
    pub const SERVER_CA_CERT: &str = "SERVER_CA_CERT";
    /// The upload server's sync upload URL.
    pub const UPLOAD_URL: &str = "UPLOAD_URL";
    /// The DataVolume's UID.
    pub const OWNER_UID: &str = "OWNER_UID";
    /// `block` or `filesystem`.
    pub const VOLUME_MODE: &str = "VOLUME_MODE";
    /// The source's mount point or device.
    pub const MOUNT_POINT: &str = "MOUNT_POINT";
}

/// The name of the source pod (and its certificate Secret) for the target claim `target_uid`
/// (upstream's `<uid>-source-pod`).
#[must_use]
pub fn source_pod_name(target_uid: &str) -> String {
    format!("{target_uid}-source-pod")
}

/// The common name of the source pod's client certificate, which the upload server checks.
#[must_use]
pub fn client_name(source_namespace: &str, source: &str, target_namespace: &str, target: &str) -> String {
    format!("{source_namespace}/{source}-{target_namespace}/{target}")
}

/// The upload server's URL the source pod posts to.
#[must_use]
pub fn upload_url(target_namespace: &str, target: &str) -> String {
    format!(
        "https://{}.{target_namespace}.svc:{}{}",
        crate::upload::service_name(target),
        crate::upload::PORT,
        crate::upload::SYNC_PATHS[0]
    )
}

/// The source claim of a [`CLONE_REQUEST`] value, `(namespace, name)`.
#[must_use]
pub fn parse_request(value: &str) -> Option<(&str, &str)> {
    let (namespace, name) = value.split_once('/')?;
    (!namespace.is_empty() && !name.is_empty() && !name.contains('/')).then_some((namespace, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_upstreams() {
        assert_eq!(source_pod_name("1234"), "1234-source-pod");
        assert_eq!(client_name("a", "src", "b", "dst"), "a/src-b/dst");
        assert_eq!(
            upload_url("b", "dst"),
            "https://cdi-upload-dst.b.svc:8443/v1beta1/upload"
        );
        assert_eq!(parse_request("a/src"), Some(("a", "src")));
        assert_eq!(parse_request("src"), None);
        assert_eq!(parse_request("/src"), None);
        assert_eq!(parse_request("a/b/c"), None);
    }
}
