//! Defaults shared by virt-api's mutating webhook and by whoever builds a VMI from a VM before
//! an instance type's preference is applied (virt-controller, local mode, expand-spec): the default
//! pod network and interface, and a disk for every volume without one. Upstream adds these before
//! applying a preference, so the preference's NIC model and disk bus reach them.

use crate::v1::{ClusterConfig, Disk, EmptyObject, Interface, Network, PodNetwork, VirtualMachineInstanceSpec};

/// Name of the default pod network and its interface.
pub const DEFAULT_NETWORK_NAME: &str = "default";

/// A default that cannot be applied under the cluster's configuration.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DefaultsError {
    /// `defaultNetworkInterface: bridge` while the bridge binding on the pod network is forbidden.
    #[error("bridge interface is not enabled in kubevirt-config")]
    BridgeNotPermitted,
    /// `defaultNetworkInterface: slirp`.
    #[error("slirp interface is deprecated as of v1.3")]
    SlirpDeprecated,
}

/// The pod network with the cluster's default binding, when the VMI names no network at all.
pub fn set_default_network_interface(
    spec: &mut VirtualMachineInstanceSpec,
    config: &ClusterConfig,
) -> Result<(), DefaultsError> {
    let devices = &mut spec.domain.devices;
    if devices.autoattach_pod_interface == Some(false) || !spec.networks.is_empty() || !devices.interfaces.is_empty() {
        return Ok(());
    }
    let interface = |set: fn(&mut Interface)| {
        let mut iface = Interface {
            name: DEFAULT_NETWORK_NAME.to_owned(),
            ..Interface::default()
        };
        set(&mut iface);
        iface
    };
    match config.default_network_interface.as_str() {
        "bridge" => {
            if !config.permit_bridge_interface_on_pod_network {
                return Err(DefaultsError::BridgeNotPermitted);
            }
            devices.interfaces = vec![interface(|i| i.bridge = Some(EmptyObject {}))];
        }
        "masquerade" => devices.interfaces = vec![interface(|i| i.masquerade = Some(EmptyObject {}))],
        "slirp" => return Err(DefaultsError::SlirpDeprecated),
        _ => {}
    }
    spec.networks = vec![Network {
        name: DEFAULT_NETWORK_NAME.to_owned(),
        pod: Some(PodNetwork::default()),
        ..Network::default()
    }];
    Ok(())
}

/// A plain disk for every volume that no disk or filesystem uses.
pub fn set_default_volume_disks(spec: &mut VirtualMachineInstanceSpec) {
    let devices = &mut spec.domain.devices;
    let used: std::collections::HashSet<String> = devices
        .disks
        .iter()
        .map(|d| d.name.clone())
        .chain(devices.filesystems.iter().map(|f| f.name.clone()))
        .collect();
    for volume in &spec.volumes {
        if !used.contains(&volume.name) {
            devices.disks.push(Disk {
                name: volume.name.clone(),
                ..Disk::default()
            });
        }
    }
}
