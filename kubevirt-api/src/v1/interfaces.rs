//! `spec.domain.devices.interfaces`: the guest's NICs and how each is bound to its network.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::EmptyObject;

/// Parses a MAC address as `macAddress` takes it: six pairs of hex digits separated by `:` or `-`.
#[must_use]
pub fn parse_mac_address(text: &str) -> Option<[u8; 6]> {
    let mut mac = [0_u8; 6];
    let mut parts = text.split([':', '-']);
    for byte in &mut mac {
        let part = parts.next()?;
        if part.len() != 2 || !part.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        *byte = u8::from_str_radix(part, 16).ok()?;
    }
    parts.next().is_none().then_some(mac)
}

/// One entry of `spec.domain.devices.interfaces`. Exactly one binding method is set.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Interface {
    /// Name; matches a network in `spec.networks`.
    pub name: String,
    /// NIC model, e.g. `virtio` or `e1000`.
    pub model: Option<String>,
    /// A network binding plugin.
    pub binding: Option<PluginBinding>,
    /// Bridge binding: the guest takes the pod's address.
    pub bridge: Option<EmptyObject>,
    /// Slirp binding (removed upstream).
    pub slirp: Option<EmptyObject>,
    /// Masquerade binding: NAT from the pod address to the guest.
    pub masquerade: Option<EmptyObject>,
    /// SR-IOV binding.
    pub sriov: Option<EmptyObject>,
    /// passt binding (core binding in older releases).
    pub passt: Option<EmptyObject>,
    /// macvtap binding (core binding in older releases).
    pub macvtap: Option<EmptyObject>,
    /// passt binding, as a core binding again in newer releases.
    pub passt_binding: Option<EmptyObject>,
    /// Ports to forward (masquerade) or to allow.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<Port>,
    /// Port ranges to forward (masquerade).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub port_ranges: Vec<PortRange>,
    /// MAC address.
    pub mac_address: Option<String>,
    /// Boot order; lower boots first.
    pub boot_order: Option<u32>,
    /// PCI address, `dddd:bb:ss.f`.
    pub pci_address: Option<String>,
    /// Extra DHCP options served to the guest.
    pub dhcp_options: Option<DhcpOptions>,
    /// Tag for device-role metadata.
    pub tag: Option<String>,
    /// ACPI index, for stable interface names in the guest.
    pub acpi_index: Option<u32>,
    /// `up`, `down` or `absent`.
    pub state: Option<String>,
}

/// `interfaces[].binding`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PluginBinding {
    /// Name of a binding plugin registered in the KubeVirt CR.
    pub name: String,
}

/// `interfaces[].ports[]`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Port {
    /// Optional name.
    pub name: Option<String>,
    /// `TCP` or `UDP`; TCP when unset.
    pub protocol: Option<String>,
    /// Port number, 1–65535.
    pub port: i32,
}

/// `interfaces[].portRanges[]`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PortRange {
    /// `TCP` or `UDP`; TCP when unset.
    pub protocol: Option<String>,
    /// First port.
    pub start: i32,
    /// Last port.
    pub end: i32,
}

/// `interfaces[].dhcpOptions`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DhcpOptions {
    /// Boot file name (option 67).
    pub boot_file_name: Option<String>,
    /// TFTP server name (option 66).
    pub tftp_server_name: Option<String>,
    /// NTP servers (option 42).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ntp_servers: Vec<String>,
    /// Private options 224–254.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub private_options: Vec<DhcpPrivateOption>,
}

/// `dhcpOptions.privateOptions[]`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DhcpPrivateOption {
    /// Option code, 224–254.
    pub option: i32,
    /// Option value.
    pub value: String,
}

#[cfg(test)]
mod mac_tests {
    use super::parse_mac_address;

    #[test]
    fn a_mac_address_is_six_hex_pairs_with_colons_or_dashes() {
        assert_eq!(
            parse_mac_address("02:AB:cd:00:11:ff"),
            Some([2, 0xab, 0xcd, 0, 0x11, 0xff])
        );
        assert_eq!(
            parse_mac_address("02-ab-cd-00-11-ff"),
            Some([2, 0xab, 0xcd, 0, 0x11, 0xff])
        );
        for bad in [
            "02:ab:cd:00:11",
            "02:ab:cd:00:11:ff:00",
            "02:ab:cd:00:11:fff",
            "zz:ab:cd:00:11:ff",
            "+2:ab:cd:00:11:ff",
            "",
        ] {
            assert_eq!(parse_mac_address(bad), None, "{bad}");
        }
    }
}
