//! `CDIConfig` (cluster-scoped, one named `config`): the settings CDI's controllers read, and what
//! they resolved them to, as upstream CDI's.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{LocalObjectReference, ResourceRequirements};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The name of the one `CDIConfig`.
pub const CONFIG_NAME: &str = "config";

/// `spec` of a `CDIConfig`.
#[serde_with::skip_serializing_none]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "cdi.kubevirt.io",
    version = "v1beta1",
    kind = "CDIConfig",
    plural = "cdiconfigs",
    singular = "cdiconfig",
    status = "CDIConfigStatus",
    derive = "Default",
    derive = "PartialEq"
)]
#[serde(rename_all = "camelCase")]
pub struct CDIConfigSpec {
    /// The upload proxy's URL, overriding what CDI finds.
    #[serde(rename = "uploadProxyURLOverride")]
    pub upload_proxy_url_override: Option<String>,
    /// The proxy importer pods use.
    pub import_proxy: Option<ImportProxy>,
    /// The StorageClass of scratch space.
    pub scratch_space_storage_class: Option<String>,
    /// The resources of CDI's worker pods.
    pub pod_resource_requirements: Option<ResourceRequirements>,
    /// Feature gates.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub feature_gates: Vec<String>,
    /// `Enabled` or `Disabled`: whether the PVC webhook renders claims.
    #[schemars(extend("enum" = ["Enabled", "Disabled"]))]
    pub webhook_pvc_rendering: Option<String>,
    /// The share of a filesystem volume its filesystem takes.
    pub filesystem_overhead: Option<FilesystemOverhead>,
    /// Preallocate new disks.
    pub preallocation: Option<bool>,
    /// Registries reached without TLS verification.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub insecure_registries: Vec<String>,
    /// Deprecated: seconds before a finished DataVolume is removed.
    #[serde(rename = "dataVolumeTTLSeconds")]
    pub data_volume_ttl_seconds: Option<i32>,
    /// The TLS profile of CDI's servers (kept as given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::preserve_unknown_object")]
    pub tls_security_profile: Option<serde_json::Value>,
    /// Pull secrets of CDI's worker pods.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub image_pull_secrets: Vec<LocalObjectReference>,
    /// Log verbosity of CDI's worker pods.
    pub log_verbosity: Option<i32>,
}

/// `importProxy`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ImportProxy {
    /// The HTTP proxy.
    #[serde(rename = "HTTPProxy")]
    pub http_proxy: Option<String>,
    /// The HTTPS proxy.
    #[serde(rename = "HTTPSProxy")]
    pub https_proxy: Option<String>,
    /// Hosts reached without the proxy.
    #[serde(rename = "noProxy")]
    pub no_proxy: Option<String>,
    /// A ConfigMap with the proxy's CA.
    #[serde(rename = "trustedCAProxy")]
    pub trusted_ca_proxy: Option<String>,
}

/// `filesystemOverhead`: a share from 0 to 1 (at most three decimals), overall and per class.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FilesystemOverhead {
    /// For every class without its own.
    #[schemars(regex(pattern = r"^(0(?:\.\d{1,3})?|1)$"))]
    pub global: Option<String>,
    /// Per StorageClass.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub storage_class: BTreeMap<String, String>,
}

/// `status` of a `CDIConfig`: the settings as resolved.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CDIConfigStatus {
    /// Where `virtctl image-upload` sends uploads.
    #[serde(rename = "uploadProxyURL")]
    pub upload_proxy_url: Option<String>,
    /// The upload proxy's CA.
    #[serde(rename = "uploadProxyCA")]
    pub upload_proxy_ca: Option<String>,
    /// The proxy importer pods use.
    pub import_proxy: Option<ImportProxy>,
    /// The StorageClass of scratch space, when it exists.
    pub scratch_space_storage_class: Option<String>,
    /// The resources of CDI's worker pods.
    pub default_pod_resource_requirements: Option<ResourceRequirements>,
    /// The filesystem overhead of every class.
    pub filesystem_overhead: Option<FilesystemOverhead>,
    /// Whether new disks are preallocated.
    pub preallocation: Option<bool>,
    /// Pull secrets of CDI's worker pods.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub image_pull_secrets: Vec<LocalObjectReference>,
}

/// CDI's default overall filesystem overhead.
pub const DEFAULT_FILESYSTEM_OVERHEAD: &str = "0.06";

/// An overhead that is not a share from 0 to 1 with at most three decimals.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid filesystem overhead {0:?}: a share from 0 to 1 with at most three decimals")]
pub struct BadOverhead(pub String);

/// A filesystem overhead (`0.06`, the `Percent` of `filesystemOverhead`) in thousandths.
///
/// # Errors
/// [`BadOverhead`] for anything upstream's pattern `^(0(?:\.\d{1,3})?|1)$` refuses.
pub fn overhead_thousandths(overhead: &str) -> Result<u64, BadOverhead> {
    if overhead == "1" {
        return Ok(1000);
    }
    let fraction = match overhead.strip_prefix('0') {
        Some("") => return Ok(0),
        Some(rest) => rest.strip_prefix('.'),
        None => None,
    };
    match fraction {
        Some(digits) if (1..=3).contains(&digits.len()) && digits.bytes().all(|b| b.is_ascii_digit()) => {
            format!("{digits:0<3}")
                .parse()
                .map_err(|_| BadOverhead(overhead.to_owned()))
        }
        _ => Err(BadOverhead(overhead.to_owned())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overheads_read_as_upstreams_pattern_allows() {
        for (text, thousandths) in [("0", 0), ("1", 1000), ("0.06", 60), ("0.055", 55), ("0.5", 500)] {
            assert_eq!(overhead_thousandths(text), Ok(thousandths), "{text}");
        }
        for bad in ["", "1.5", "1.0", "0.0555", "-0.1", "x", ".5", "0.", "2"] {
            assert!(overhead_thousandths(bad).is_err(), "{bad:?}");
        }
    }
}
