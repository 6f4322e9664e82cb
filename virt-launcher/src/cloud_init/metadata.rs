//! The metadata files of the cloud-init seeds, in upstream's key order.

use serde::Serialize;

/// NoCloud `meta-data`, in upstream's key order.
#[derive(Debug, Serialize)]
pub(super) struct NoCloudMetadata {
    #[serde(rename = "instance-type", skip_serializing_if = "Option::is_none")]
    pub(super) instance_type: Option<String>,
    #[serde(rename = "instance-id")]
    pub(super) instance_id: String,
    #[serde(rename = "local-hostname", skip_serializing_if = "Option::is_none")]
    pub(super) local_hostname: Option<String>,
    #[serde(rename = "public-keys", skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub(super) public_keys: std::collections::BTreeMap<String, String>,
}

/// ConfigDrive `meta_data.json`, in upstream's key order; `devices` are added after define.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ConfigDriveMetadata {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) instance_type: Option<String>,
    pub(super) instance_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) hostname: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) uuid: Option<String>,
    /// The tagged devices.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<DeviceMetadata>,
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub(super) public_keys: std::collections::BTreeMap<String, String>,
}

/// One tagged device in ConfigDrive metadata.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct DeviceMetadata {
    /// `nic`.
    #[serde(rename = "type")]
    pub kind: String,
    /// `pci`.
    pub bus: String,
    /// `dddd:bb:ss:f`, as upstream formats it.
    pub address: String,
    /// The NIC's MAC address.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub mac: String,
    /// The user's tags.
    pub tags: Vec<String>,
}

impl ConfigDriveMetadata {
    /// The `meta_data.json` text.
    #[must_use]
    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }
}

/// An interface with a `tag`, whose PCI address the defined domain tells.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaggedInterface {
    /// The interface name (`ua-<name>` alias in the domain).
    pub name: String,
    /// Its tag.
    pub tag: String,
}

/// The `devices` of ConfigDrive metadata: each tagged interface's PCI address and MAC in the
/// defined domain.
#[must_use]
pub fn tagged_devices(domain: &crate::domain::Domain, tagged: &[TaggedInterface]) -> Vec<DeviceMetadata> {
    tagged
        .iter()
        .filter_map(|t| {
            let alias = crate::domain::model::Alias::user(&t.name);
            let iface = domain
                .devices
                .interface
                .iter()
                .find(|i| i.alias.as_ref() == Some(&alias))?;
            let address = iface.address.as_ref().filter(|a| a.address_type == "pci")?;
            let hex = |v: &Option<String>| {
                v.as_deref()
                    .and_then(|v| u32::from_str_radix(v.trim_start_matches("0x"), 16).ok())
                    .unwrap_or(0)
            };
            Some(DeviceMetadata {
                kind: "nic".to_owned(),
                bus: "pci".to_owned(),
                address: format!(
                    "{:04x}:{:02x}:{:02x}:{:x}",
                    hex(&address.domain),
                    hex(&address.bus),
                    hex(&address.slot),
                    hex(&address.function)
                ),
                mac: iface.mac.as_ref().map(|m| m.address.clone()).unwrap_or_default(),
                tags: vec![t.tag.clone()],
            })
        })
        .collect()
}
