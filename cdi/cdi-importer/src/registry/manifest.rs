//! What a registry's manifests say: an image's layers and config, or, for a multi-platform image
//! (an OCI index or a Docker manifest list), which platform's manifest to fetch. Docker's schema 2
//! and OCI's media types are read; schema 1 is refused. Pure.

use serde::Deserialize;

/// OCI's image index.
pub const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
/// OCI's image manifest.
pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
/// Docker's manifest list.
pub const DOCKER_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";
/// Docker's schema 2 manifest.
pub const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
/// The `Accept` header of a manifest request: every type read here.
pub const ACCEPT: &str = "application/vnd.oci.image.index.v1+json, application/vnd.oci.image.manifest.v1+json, \
     application/vnd.docker.distribution.manifest.list.v2+json, application/vnd.docker.distribution.manifest.v2+json";

/// A blob a manifest points to.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    /// Its media type.
    #[serde(default)]
    pub media_type: String,
    /// Its digest.
    pub digest: String,
    /// Its size.
    #[serde(default)]
    pub size: u64,
    /// The platform of an index's entry.
    #[serde(default)]
    pub platform: Option<Platform>,
}

/// An index entry's platform.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct Platform {
    /// The CPU architecture (`amd64`, `arm64`, ...).
    pub architecture: String,
    /// The OS.
    pub os: String,
}

/// An image's manifest: its config and its layers, base first.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct ImageManifest {
    /// The config blob.
    pub config: Descriptor,
    /// The layers.
    pub layers: Vec<Descriptor>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Any {
    #[serde(default)]
    media_type: Option<String>,
    #[serde(default)]
    manifests: Option<Vec<Descriptor>>,
    #[serde(default)]
    config: Option<Descriptor>,
    #[serde(default)]
    layers: Option<Vec<Descriptor>>,
    #[serde(default)]
    schema_version: Option<u32>,
}

/// A manifest, read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Manifest {
    /// A multi-platform image: one manifest per platform.
    Index(Vec<Descriptor>),
    /// One image.
    Image(ImageManifest),
}

/// Why a manifest could not be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ManifestError {
    /// Not JSON of a known shape.
    #[error("the manifest is not valid: {0}")]
    Invalid(String),
    /// A type not read here.
    #[error("unsupported manifest type {0:?}")]
    UnsupportedType(String),
    /// No entry of an index is for the platform.
    #[error("no image in the manifest list for linux/{0}")]
    NoPlatform(String),
}

/// Reads a manifest served with `content_type` (the body's own `mediaType` wins when the server
/// sent a generic one).
///
/// # Errors
/// [`ManifestError`].
pub fn parse(content_type: &str, body: &[u8]) -> Result<Manifest, ManifestError> {
    let any: Any = serde_json::from_slice(body).map_err(|e| ManifestError::Invalid(e.to_string()))?;
    let content_type = content_type.split(';').next().unwrap_or_default().trim();
    let media_type = match any.media_type.as_deref() {
        Some(own) => own.to_owned(),
        None if !content_type.is_empty() && content_type != "application/json" => content_type.to_owned(),
        // An OCI manifest may leave its type out: its shape says it.
        None if any.manifests.is_some() => OCI_INDEX.to_owned(),
        None if any.schema_version == Some(2) && any.layers.is_some() => OCI_MANIFEST.to_owned(),
        None => return Err(ManifestError::UnsupportedType(content_type.to_owned())),
    };
    match media_type.as_str() {
        OCI_INDEX | DOCKER_LIST => {
            Ok(Manifest::Index(any.manifests.ok_or_else(|| {
                ManifestError::Invalid("an index without manifests".to_owned())
            })?))
        }
        OCI_MANIFEST | DOCKER_MANIFEST => Ok(Manifest::Image(ImageManifest {
            config: any
                .config
                .ok_or_else(|| ManifestError::Invalid("a manifest without a config".to_owned()))?,
            layers: any
                .layers
                .ok_or_else(|| ManifestError::Invalid("a manifest without layers".to_owned()))?,
        })),
        other => Err(ManifestError::UnsupportedType(other.to_owned())),
    }
}

/// The Go name of the architecture this importer runs on, which an index is read for unless the
/// DataVolume names one (as upstream's importer, built in Go, uses its own `GOARCH`).
#[must_use]
pub fn own_architecture() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "powerpc64" => "ppc64le",
        "x86" => "386",
        other => other,
    }
}

/// The index entry for linux on `architecture`.
///
/// # Errors
/// [`ManifestError::NoPlatform`].
pub fn choose<'a>(entries: &'a [Descriptor], architecture: &str) -> Result<&'a Descriptor, ManifestError> {
    entries
        .iter()
        .find(|d| {
            d.platform
                .as_ref()
                .is_some_and(|p| p.os == "linux" && p.architecture == architecture)
        })
        .ok_or_else(|| ManifestError::NoPlatform(architecture.to_owned()))
}

/// What an image's config says that the import checks.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
pub struct ImageConfig {
    /// The image's architecture.
    #[serde(default)]
    pub architecture: String,
    /// Its runtime config.
    #[serde(default)]
    pub config: Option<RuntimeConfig>,
}

/// The config's `config`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct RuntimeConfig {
    /// Its labels.
    #[serde(default)]
    pub labels: Option<std::collections::BTreeMap<String, String>>,
    /// Its environment, `NAME=value` each.
    #[serde(default)]
    pub env: Option<Vec<String>>,
}

/// The part of an environment variable's name that marks a KubeVirt label (upstream's).
const KUBEVIRT_ENV: &str = "KUBEVIRT_IO_";

/// A variable's name as a label's key, as upstream's importer turns it: the words before
/// `KUBEVIRT_IO_` become a dotted prefix, the rest a dashed name under `kubevirt.io/`, all in
/// lower case (`INSTANCETYPE_KUBEVIRT_IO_DEFAULT_INSTANCETYPE` is
/// `instancetype.kubevirt.io/default-instancetype`).
fn env_to_label(name: &str) -> String {
    let (before, after) = name.split_once(KUBEVIRT_ENV).unwrap_or((name, ""));
    let mut label = String::new();
    let before = before.strip_suffix('_').unwrap_or(before);
    if !before.is_empty() {
        label.push_str(&before.split('_').collect::<Vec<_>>().join("."));
        label.push('.');
    }
    label.push_str("kubevirt.io/");
    label.push_str(&after.split('_').collect::<Vec<_>>().join("-"));
    label.to_lowercase()
}

impl ImageConfig {
    /// The labels the image's environment gives its claim (upstream's `envsToLabels`): every
    /// variable whose name holds `KUBEVIRT_IO_`.
    #[must_use]
    pub fn env_labels(&self) -> std::collections::BTreeMap<String, String> {
        let env = self.config.as_ref().and_then(|c| c.env.as_deref()).unwrap_or_default();
        env.iter()
            .filter_map(|variable| variable.split_once('='))
            .filter(|(name, _)| name.contains(KUBEVIRT_ENV))
            .map(|(name, value)| (env_to_label(name), value.to_owned()))
            .collect()
    }

    /// Whether the image is a bootable container (bootc or ostree), which is not a disk.
    #[must_use]
    pub fn is_bootc(&self) -> bool {
        let labels = self.config.as_ref().and_then(|c| c.labels.as_ref());
        labels.is_some_and(|l| {
            l.get("containers.bootc").is_some_and(|v| v == "1") || l.get("ostree.bootable").is_some_and(|v| v == "1")
        })
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    const DIGEST: &str = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";

    fn index(media_type: &str) -> String {
        format!(
            r#"{{"schemaVersion":2,"mediaType":"{media_type}","manifests":[
                {{"mediaType":"{OCI_MANIFEST}","digest":"sha256:a1","size":1,"platform":{{"architecture":"arm64","os":"linux"}}}},
                {{"mediaType":"{OCI_MANIFEST}","digest":"sha256:b2","size":1,"platform":{{"architecture":"amd64","os":"linux"}}}}]}}"#
        )
    }

    #[test]
    fn an_index_or_a_list_gives_the_platform_asked_for() {
        for media_type in [OCI_INDEX, DOCKER_LIST] {
            let Ok(Manifest::Index(entries)) = parse(media_type, index(media_type).as_bytes()) else {
                panic!("{media_type}: not an index");
            };
            assert_eq!(choose(&entries, "amd64").map(|d| d.digest.as_str()), Ok("sha256:b2"));
            assert_eq!(choose(&entries, "arm64").map(|d| d.digest.as_str()), Ok("sha256:a1"));
            assert_eq!(
                choose(&entries, "s390x"),
                Err(ManifestError::NoPlatform("s390x".to_owned()))
            );
        }
    }

    #[test]
    fn a_manifest_gives_its_config_and_layers_in_order() {
        for media_type in [OCI_MANIFEST, DOCKER_MANIFEST] {
            let body = format!(
                r#"{{"schemaVersion":2,"mediaType":"{media_type}","config":{{"mediaType":"c","digest":"{DIGEST}","size":2}},
                "layers":[{{"mediaType":"l","digest":"sha256:1","size":3}},{{"mediaType":"l","digest":"sha256:2","size":4}}]}}"#
            );
            let Ok(Manifest::Image(image)) = parse("application/json", body.as_bytes()) else {
                panic!("{media_type}: not an image");
            };
            assert_eq!(image.config.digest, DIGEST);
            assert_eq!(
                image.layers.iter().map(|l| l.digest.as_str()).collect::<Vec<_>>(),
                ["sha256:1", "sha256:2"]
            );
        }
    }

    #[test]
    fn a_manifest_without_its_type_is_known_by_the_header_or_its_shape() {
        let image = format!(r#"{{"schemaVersion":2,"config":{{"digest":"{DIGEST}"}},"layers":[]}}"#);
        assert!(matches!(
            parse(DOCKER_MANIFEST, image.as_bytes()),
            Ok(Manifest::Image(_))
        ));
        assert!(matches!(parse("", image.as_bytes()), Ok(Manifest::Image(_))));
        let list = r#"{"schemaVersion":2,"manifests":[]}"#;
        assert!(matches!(
            parse("application/json", list.as_bytes()),
            Ok(Manifest::Index(_))
        ));
    }

    #[test]
    fn schema_one_and_garbage_are_refused() {
        let schema1 = r#"{"schemaVersion":1,"name":"a","tag":"b","fsLayers":[]}"#;
        assert_eq!(
            parse(
                "application/vnd.docker.distribution.manifest.v1+prettyjws",
                schema1.as_bytes()
            ),
            Err(ManifestError::UnsupportedType(
                "application/vnd.docker.distribution.manifest.v1+prettyjws".to_owned()
            ))
        );
        assert!(matches!(parse(OCI_MANIFEST, b"<html>"), Err(ManifestError::Invalid(_))));
        assert!(matches!(
            parse(OCI_MANIFEST, br#"{"schemaVersion":2,"layers":[]}"#),
            Err(ManifestError::Invalid(_))
        ));
    }

    #[test]
    fn kubevirt_variables_become_upstream_s_labels() {
        let config: ImageConfig = serde_json::from_str(
            r#"{"config":{"Env":["PATH=/usr/bin","INSTANCETYPE_KUBEVIRT_IO_DEFAULT_INSTANCETYPE=u1.medium",
                "INSTANCETYPE_KUBEVIRT_IO_DEFAULT_PREFERENCE=fedora","KUBEVIRT_IO_PLAIN=yes","NOVALUE_KUBEVIRT_IO_X"]}}"#,
        )
        .expect("config");
        let labels = config.env_labels();
        assert_eq!(
            labels.into_iter().collect::<Vec<_>>(),
            [
                (
                    "instancetype.kubevirt.io/default-instancetype".to_owned(),
                    "u1.medium".to_owned()
                ),
                (
                    "instancetype.kubevirt.io/default-preference".to_owned(),
                    "fedora".to_owned()
                ),
                ("kubevirt.io/plain".to_owned(), "yes".to_owned()),
            ]
        );
        assert!(ImageConfig::default().env_labels().is_empty());
    }

    #[test]
    fn bootc_images_are_known_by_their_labels() {
        let config = |labels: &str| -> ImageConfig {
            serde_json::from_str(&format!(r#"{{"architecture":"amd64","config":{{"Labels":{labels}}}}}"#))
                .expect("config")
        };
        assert!(config(r#"{"containers.bootc":"1"}"#).is_bootc());
        assert!(config(r#"{"ostree.bootable":"1"}"#).is_bootc());
        assert!(!config(r#"{"containers.bootc":"0"}"#).is_bootc());
        assert!(!config("null").is_bootc());
    }
}
