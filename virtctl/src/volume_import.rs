//! `virtctl create vm --volume-import` (and its deprecated alias `--volume-datasource`): a
//! DataVolume template and the volume that uses it, as upstream's `pkg/virtctl/create/vm` writes
//! them. A value is `type:<type>,key:value,…`; the types CDI here imports from are `http`,
//! `registry`, `pvc` (a clone), `blank` and `ds` (a DataSource); upstream's `gcs`, `s3`,
//! `imageio`, `vddk` and `snapshot` are refused by name. Pure.

use std::collections::BTreeMap;

use cdi_api::data_volume::{
    DataVolumeSourceHttp, DataVolumeSourceRef, DataVolumeSourceRegistry, Empty, NamespacedName, SOURCE_REF_DATA_SOURCE,
};
use cdi_api::{DataVolumeSource, DataVolumeSpec, StorageSpec};
use k8s_openapi::api::core::v1::VolumeResourceRequirements;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kubevirt_api::v1::DataVolumeTemplateSpec;

/// The types upstream has and CDI here does not import from.
const REFUSED_TYPES: [&str; 5] = ["gcs", "s3", "imageio", "vddk", "snapshot"];

/// One imported volume: its name, its DataVolume template and where it boots.
#[derive(Clone, Debug, PartialEq)]
pub struct Import {
    /// The volume's (and the DataVolume's) name.
    pub name: String,
    /// The template.
    pub template: DataVolumeTemplateSpec,
    /// The disk's boot order, when given.
    pub boot_order: Option<u32>,
}

/// `key:value` pairs split at the first colon (so URLs keep theirs); a key given twice keeps
/// its last value, as upstream's.
///
/// # Errors
/// Upstream's message (without the flag's prefix).
pub fn split_params(text: &str) -> Result<BTreeMap<String, String>, String> {
    if text.is_empty() {
        return Err("params may not be empty".to_owned());
    }
    let mut params = BTreeMap::new();
    for part in text.split(',') {
        let (key, value) = part
            .split_once(':')
            .ok_or_else(|| format!("params need to have at least one colon: {part}"))?;
        params.insert(key.to_owned(), value.to_owned());
    }
    Ok(params)
}

/// The keys `kind` accepts besides `type`, `name`, `size` and `bootorder`.
fn source_keys(kind: &str) -> Option<&'static [&'static str]> {
    Some(match kind {
        "blank" => &[],
        "http" => &[
            "certconfigmap",
            "extraheaders",
            "secretextraheaders",
            "secretref",
            "url",
        ],
        "registry" => &["certconfigmap", "imagestream", "pullmethod", "secretref", "url"],
        "pvc" | "ds" => &["src"],
        _ => return None,
    })
}

/// `[namespace/]name` of `src`.
fn split_source(src: &str) -> Result<(Option<String>, String), String> {
    let parts: Vec<&str> = src.split('/').collect();
    let (namespace, name) = match parts.as_slice() {
        [name] => (None, *name),
        [namespace, name] => (Some((*namespace).to_owned()).filter(|n| !n.is_empty()), *name),
        _ => {
            return Err(format!(
                "src invalid: invalid count {} of slashes in prefix/name",
                parts.len() - 1
            ));
        }
    };
    if name.is_empty() {
        return Err("src invalid: name cannot be empty".to_owned());
    }
    Ok((namespace, name.to_owned()))
}

/// Checks a name as a DNS-1123 label, with upstream's messages.
///
/// # Errors
/// Why the name is not one.
pub fn check_name(name: &str) -> Result<(), String> {
    let problem = if name.contains('.') {
        Some("must not contain dots".to_owned())
    } else if name.len() > 63 {
        Some("must be no more than 63 characters".to_owned())
    } else {
        let bytes = name.as_bytes();
        let alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
        let valid = !bytes.is_empty()
            && bytes.first().is_some_and(alnum)
            && bytes.last().is_some_and(alnum)
            && bytes.iter().all(|b| alnum(b) || *b == b'-');
        (!valid).then(|| {
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start \
             and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is \
             '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
                .to_owned()
        })
    };
    problem.map_or(Ok(()), |p| Err(format!("invalid name \"{name}\": {p}")))
}

/// Parses `bootorder`: a positive number.
///
/// # Errors
/// Upstream's message.
pub fn boot_order(text: &str) -> Result<u32, String> {
    let order: u32 = text
        .parse()
        .map_err(|e| format!("failed to parse param \"bootorder\": strconv.ParseUint: parsing \"{text}\": {e}"))?;
    if order == 0 {
        return Err("bootorder must be greater than 0".to_owned());
    }
    Ok(order)
}

fn source_of(
    kind: &str,
    params: &BTreeMap<String, String>,
) -> Result<(Option<DataVolumeSource>, Option<DataVolumeSourceRef>), String> {
    let get = |key: &str| params.get(key).cloned().filter(|v| !v.is_empty());
    let list = |key: &str| {
        get(key)
            .map(|v| v.split(';').map(str::to_owned).collect())
            .unwrap_or_default()
    };
    let required = |key: &str| get(key).ok_or_else(|| format!("{key} is required with {kind} volume source"));
    let mut source = DataVolumeSource::default();
    match kind {
        "blank" => source.blank = Some(Empty {}),
        "http" => {
            source.http = Some(DataVolumeSourceHttp {
                url: required("url")?,
                secret_ref: get("secretref"),
                cert_config_map: get("certconfigmap"),
                extra_headers: list("extraheaders"),
                secret_extra_headers: list("secretextraheaders"),
                ..DataVolumeSourceHttp::default()
            });
        }
        "registry" => {
            let (url, image_stream) = (get("url"), get("imagestream"));
            if url.is_some() == image_stream.is_some() {
                return Err("exactly one of url or imagestream must be defined".to_owned());
            }
            let pull_method = get("pullmethod");
            if pull_method.as_deref().is_some_and(|m| m != "pod" && m != "node") {
                return Err("pullmethod must be set to pod or node".to_owned());
            }
            source.registry = Some(DataVolumeSourceRegistry {
                url,
                image_stream,
                pull_method,
                secret_ref: get("secretref"),
                cert_config_map: get("certconfigmap"),
                platform: None,
            });
        }
        "pvc" => {
            let (namespace, name) = split_source(&get("src").ok_or("src must be specified")?)?;
            let namespace = namespace.ok_or_else(|| format!("namespace of pvc \"{name}\" must be specified"))?;
            source.pvc = Some(NamespacedName { namespace, name });
        }
        // "ds"
        _ => {
            let (namespace, name) = split_source(&get("src").ok_or("src must be specified")?)?;
            return Ok((
                None,
                Some(DataVolumeSourceRef {
                    kind: SOURCE_REF_DATA_SOURCE.to_owned(),
                    namespace,
                    name,
                }),
            ));
        }
    }
    Ok((Some(source), None))
}

/// One `--volume-import` value; `random` gives the five characters of a generated name.
///
/// # Errors
/// Upstream's message (without the flag's prefix).
pub fn parse_import(text: &str, random: &mut dyn FnMut() -> String) -> Result<Import, String> {
    let params = split_params(text)?;
    let kind = params.get("type").cloned().unwrap_or_default();
    if kind.is_empty() {
        return Err("type must be specified".to_owned());
    }
    if REFUSED_TYPES.contains(&kind.as_str()) {
        return Err(format!(
            "volume import type \"{kind}\" is not supported by kubevirt-rs (its CDI imports from http, registry, pvc, blank and ds)"
        ));
    }
    let keys = source_keys(&kind)
        .ok_or_else(|| format!("invalid volume import type \"{kind}\", see help for supported values"))?;
    let unknown: Vec<String> = params
        .iter()
        .filter(|(k, _)| !["type", "name", "size", "bootorder"].contains(&k.as_str()) && !keys.contains(&k.as_str()))
        .map(|(k, v)| format!("{k}:{v}"))
        .collect();
    if !unknown.is_empty() {
        return Err(format!("unknown param(s): {}", unknown.join(",")));
    }
    let (source, source_ref) = source_of(&kind, &params)?;
    let size = match params.get("size").filter(|s| !s.is_empty()) {
        Some(size) => {
            let quantity = Quantity(size.clone());
            kubevirt_api::quantity::parse(&quantity).map_err(|e| format!("failed to parse param \"size\": {e}"))?;
            Some(quantity)
        }
        None if matches!(kind.as_str(), "pvc" | "ds") => None,
        None => return Err("size must be specified".to_owned()),
    };
    let name = match params.get("name") {
        Some(name) => name.clone(),
        None => format!("imported-volume-{}", random()),
    };
    check_name(&name)?;
    let boot_order = params.get("bootorder").map(|b| boot_order(b)).transpose()?;
    let storage = StorageSpec {
        resources: size.map(|size| VolumeResourceRequirements {
            requests: Some(BTreeMap::from([("storage".to_owned(), size)])),
            ..VolumeResourceRequirements::default()
        }),
        ..StorageSpec::default()
    };
    let spec = DataVolumeSpec {
        source,
        source_ref,
        storage: Some(storage),
        ..DataVolumeSpec::default()
    };
    let template = DataVolumeTemplateSpec {
        metadata: Some(ObjectMeta {
            name: Some(name.clone()),
            ..ObjectMeta::default()
        }),
        spec: serde_json::to_value(&spec).map_err(|e| e.to_string())?,
        ..DataVolumeTemplateSpec::default()
    };
    Ok(Import {
        name,
        template,
        boot_order,
    })
}

#[cfg(test)]
mod tests;
