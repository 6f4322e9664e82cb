//! The cluster-wide settings of the machines themselves, from the `KubeVirt` resource: the SMBIOS
//! strings every guest sees (`spec.configuration.smbios`) and `spec.configuration.virtualMachineOptions`.
//! virt-handler hands them to each launcher with the VMI.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `spec.configuration.smbios`: the SMBIOS system strings of every guest. A string left out (or
/// empty) keeps upstream's default.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SmbiosConfiguration {
    /// The manufacturer; `KubeVirt` when unset.
    pub manufacturer: Option<String>,
    /// The product; `None` when unset.
    pub product: Option<String>,
    /// The version; none when unset.
    pub version: Option<String>,
    /// The SKU; none when unset.
    pub sku: Option<String>,
    /// The family; `KubeVirt` when unset.
    pub family: Option<String>,
}

/// `spec.configuration.virtualMachineOptions`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineOptions {
    /// Present (`{}`): the memory balloon of new VMIs does not report free pages.
    pub disable_free_page_reporting: Option<DisableFreePageReporting>,
    /// Present (`{}`): the serial console of new VMIs is not logged to a file, unless the VMI's
    /// `logSerialConsole` asks for it.
    pub disable_serial_console_log: Option<DisableSerialConsoleLog>,
}

/// A marker: its presence turns free page reporting off.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct DisableFreePageReporting {}

/// A marker: its presence turns the serial console log off.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct DisableSerialConsoleLog {}

/// Upstream's default SMBIOS manufacturer and family.
pub const DEFAULT_SMBIOS_MANUFACTURER: &str = "KubeVirt";
/// Upstream's default SMBIOS family.
pub const DEFAULT_SMBIOS_FAMILY: &str = "KubeVirt";
/// Upstream's default SMBIOS product.
pub const DEFAULT_SMBIOS_PRODUCT: &str = "None";

/// The SMBIOS strings in effect: the resource's, over upstream's defaults field by field (as
/// upstream lays the resource's configuration over its defaults).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Smbios {
    /// The manufacturer.
    pub manufacturer: String,
    /// The product.
    pub product: String,
    /// The version (empty: none).
    pub version: String,
    /// The SKU (empty: none).
    pub sku: String,
    /// The family.
    pub family: String,
}

impl Default for Smbios {
    fn default() -> Self {
        Self::from_configuration(None)
    }
}

impl Smbios {
    /// `configured` over upstream's defaults.
    #[must_use]
    pub fn from_configuration(configured: Option<&SmbiosConfiguration>) -> Self {
        let pick = |value: Option<&Option<String>>, default: &str| {
            value
                .and_then(Option::as_deref)
                .filter(|v| !v.is_empty())
                .unwrap_or(default)
                .to_owned()
        };
        Self {
            manufacturer: pick(configured.map(|c| &c.manufacturer), DEFAULT_SMBIOS_MANUFACTURER),
            product: pick(configured.map(|c| &c.product), DEFAULT_SMBIOS_PRODUCT),
            version: pick(configured.map(|c| &c.version), ""),
            sku: pick(configured.map(|c| &c.sku), ""),
            family: pick(configured.map(|c| &c.family), DEFAULT_SMBIOS_FAMILY),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn smbios_strings_fall_back_to_upstream_defaults_field_by_field() {
        let cases = [
            (serde_json::json!(null), ["KubeVirt", "None", "", "", "KubeVirt"]),
            (
                serde_json::json!({"manufacturer": "Acme"}),
                ["Acme", "None", "", "", "KubeVirt"],
            ),
            (
                serde_json::json!({"manufacturer": "", "product": "P", "version": "1", "sku": "S", "family": "F"}),
                ["KubeVirt", "P", "1", "S", "F"],
            ),
        ];
        for (configured, [manufacturer, product, version, sku, family]) in cases {
            let configured: Option<SmbiosConfiguration> = serde_json::from_value(configured.clone()).expect("smbios");
            assert_eq!(
                Smbios::from_configuration(configured.as_ref()),
                Smbios {
                    manufacturer: manufacturer.to_owned(),
                    product: product.to_owned(),
                    version: version.to_owned(),
                    sku: sku.to_owned(),
                    family: family.to_owned(),
                },
                "{configured:?}"
            );
        }
    }

    #[test]
    fn the_option_markers_are_empty_objects() {
        let options: VirtualMachineOptions =
            serde_json::from_value(serde_json::json!({"disableFreePageReporting": {}})).expect("options");
        assert!(options.disable_free_page_reporting.is_some());
        assert!(options.disable_serial_console_log.is_none());
        assert_eq!(
            serde_json::to_value(&options).expect("json"),
            serde_json::json!({"disableFreePageReporting": {}})
        );
    }
}
