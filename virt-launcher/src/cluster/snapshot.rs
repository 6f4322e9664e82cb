//! What the launcher tells virt-handler about its domain beyond state and reason: facts libvirt
//! fills in at definition and start time, read from the live XML (machine type, MAC addresses, the
//! guest agent channel). Pure, so it is tested without libvirt.

use cmd_protocol::domain::{DomainInterface, DomainSpecSummary};

use crate::domain::Domain;

/// The guest agent's virtio-serial port name.
pub const GUEST_AGENT_CHANNEL: &str = "org.qemu.guest_agent.0";

/// The name the VMI spec gives a device whose alias is `ua-<name>`.
fn spec_name(alias: Option<&crate::domain::model::Alias>) -> Option<String> {
    alias.and_then(|a| a.name.strip_prefix("ua-")).map(str::to_owned)
}

/// Summarizes a live domain XML; an XML that does not parse gives an empty summary (the state
/// and reason, which come from libvirt directly, still reach the handler).
#[must_use]
pub fn summarize(live_xml: &str) -> DomainSpecSummary {
    let Ok(domain) = Domain::from_xml(live_xml) else {
        return DomainSpecSummary::default();
    };
    let interfaces = domain
        .devices
        .interface
        .iter()
        .filter_map(|iface| {
            Some(DomainInterface {
                name: spec_name(iface.alias.as_ref())?,
                mac: iface.mac.as_ref().map(|m| m.address.clone()),
            })
        })
        .collect();
    let guest_agent_connected = domain
        .devices
        .channel
        .iter()
        .find(|c| c.target.name.as_deref() == Some(GUEST_AGENT_CHANNEL))
        .map(|c| c.target.state.as_deref() == Some("connected"));
    DomainSpecSummary {
        has_acpi: domain.features.as_ref().is_some_and(|f| f.acpi.is_some()),
        machine: domain.os.os_type.machine.clone(),
        interfaces,
        guest_agent_connected,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIVE: &str = r"<domain type='qemu' id='1'>
  <name>default_testguest</name>
  <memory unit='KiB'>262144</memory>
  <vcpu placement='static'>1</vcpu>
  <os><type arch='x86_64' machine='pc-q35-7.2'>hvm</type></os>
  <features><acpi/></features>
  <devices>
    <interface type='ethernet'>
      <mac address='52:54:00:12:34:56'/>
      <target dev='tap0' managed='no'/>
      <model type='virtio-non-transitional'/>
      <alias name='ua-default'/>
    </interface>
    <interface type='ethernet'>
      <mac address='52:54:00:ab:cd:ef'/>
      <alias name='net1'/>
    </interface>
    <channel type='unix'>
      <target type='virtio' name='org.qemu.guest_agent.0' state='disconnected'/>
    </channel>
  </devices>
</domain>";

    #[test]
    fn the_live_xml_gives_machine_acpi_named_interfaces_and_the_agent_state() {
        let summary = summarize(LIVE);
        assert!(summary.has_acpi);
        assert_eq!(summary.machine.as_deref(), Some("pc-q35-7.2"));
        assert_eq!(
            summary.interfaces,
            vec![DomainInterface {
                name: "default".to_owned(),
                mac: Some("52:54:00:12:34:56".to_owned()),
            }],
            "only interfaces the VMI names (alias ua-<name>) are reported"
        );
        assert_eq!(summary.guest_agent_connected, Some(false));
        let connected = LIVE.replace("state='disconnected'", "state='connected'");
        assert_eq!(summarize(&connected).guest_agent_connected, Some(true));
    }

    #[test]
    fn no_agent_channel_is_unknown_and_garbage_is_empty() {
        let without_channel = LIVE.replace(
            "<channel type='unix'>\n      <target type='virtio' name='org.qemu.guest_agent.0' state='disconnected'/>\n    </channel>",
            "",
        );
        assert_eq!(summarize(&without_channel).guest_agent_connected, None);
        assert_eq!(summarize("<not-a-domain"), DomainSpecSummary::default());
    }
}
