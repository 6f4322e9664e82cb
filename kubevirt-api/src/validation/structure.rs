//! The structural rules of upstream's VMI admitter: disks, volumes, boot order, memory, names,
//! networks, start and eviction strategy.

use std::collections::{BTreeMap, HashMap};

use super::{Cause, CauseType, cause};
use crate::quantity;
use crate::v1::VirtualMachineInstanceSpec;

/// A DNS-1123 label: lower-case alphanumerics and `-`, starting and ending alphanumeric, ≤ 63.
fn is_dns_label(value: &str) -> bool {
    let bytes = value.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes.first().is_some_and(u8::is_ascii_alphanumeric)
        && bytes.last().is_some_and(u8::is_ascii_alphanumeric)
}

/// Kubernetes' `IsDNS1123Label` messages for `value`.
fn dns_label_errors(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > 63 {
        errors.push("must be no more than 63 characters".to_owned());
    }
    let bytes = value.as_bytes();
    let shape = bytes
        .iter()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes.first().is_some_and(u8::is_ascii_alphanumeric)
        && bytes.last().is_some_and(u8::is_ascii_alphanumeric);
    if !shape {
        errors.push("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')".to_owned());
    }
    errors
}

/// A disk's name is a DNS-1123 label; its boot order is positive and unique.
fn check_disk_name_and_boot_order(
    disk: &crate::v1::Disk,
    field: &str,
    boot_orders: &mut BTreeMap<u32, String>,
    causes: &mut Vec<Cause>,
) {
    if !disk.name.is_empty() {
        for message in dns_label_errors(&disk.name) {
            causes.push(cause(CauseType::Invalid, format!("{field}.name"), message));
        }
    }
    if let Some(order) = disk.boot_order {
        let order_field = format!("{field}.bootOrder");
        if order == 0 {
            causes.push(cause(
                CauseType::Invalid,
                order_field,
                format!("{field} must have a boot order > 0, if supplied"),
            ));
        } else if boot_orders.insert(order, order_field.clone()).is_some() {
            causes.push(cause(
                CauseType::Invalid,
                order_field.clone(),
                format!("Boot order for {order_field} already set for a different device."),
            ));
        }
    }
}

pub(super) fn check_disks_and_volumes(
    spec: &VirtualMachineInstanceSpec,
    base: &str,
    is_vmi: bool,
    causes: &mut Vec<Cause>,
) {
    let volumes: HashMap<&str, usize> = spec
        .volumes
        .iter()
        .enumerate()
        .map(|(i, v)| (v.name.as_str(), i))
        .collect();
    let mut disk_names: HashMap<&str, usize> = HashMap::new();
    let mut boot_orders: BTreeMap<u32, String> = BTreeMap::new();
    for (i, disk) in spec.domain.devices.disks.iter().enumerate() {
        let field = format!("{base}.domain.devices.disks[{i}]");
        if !volumes.contains_key(disk.name.as_str()) {
            causes.push(cause(
                CauseType::NotFound,
                format!("{field}.name"),
                format!("{field}.name '{}' not found.", disk.name),
            ));
        }
        if let Some(first) = disk_names.insert(disk.name.as_str(), i) {
            causes.push(cause(
                CauseType::Duplicate,
                format!("{field}.name"),
                format!("{base}.domain.devices.disks[{first}] and {field} must not have the same Name."),
            ));
        }
        let targets = [disk.disk.is_some(), disk.lun.is_some(), disk.cdrom.is_some()];
        if targets.iter().filter(|t| **t).count() > 1 {
            causes.push(cause(
                CauseType::Invalid,
                field.clone(),
                format!("{field} can only have a single target type defined"),
            ));
        }
        check_disk_name_and_boot_order(disk, &field, &mut boot_orders, causes);
    }
    for (i, iface) in spec.domain.devices.interfaces.iter().enumerate() {
        let field = format!("{base}.domain.devices.interfaces[{i}].bootOrder");
        match iface.boot_order {
            Some(0) => causes.push(cause(
                CauseType::Invalid,
                field.clone(),
                format!("{field} must have a boot order > 0, if supplied"),
            )),
            Some(order) if boot_orders.insert(order, field.clone()).is_some() => causes.push(cause(
                CauseType::Invalid,
                field.clone(),
                format!("Boot order for {field} already set for a different device."),
            )),
            _ => {}
        }
    }
    let mut seen_volumes: HashMap<&str, usize> = HashMap::new();
    for (i, volume) in spec.volumes.iter().enumerate() {
        let field = format!("{base}.volumes[{i}]");
        if let Some(first) = seen_volumes.insert(volume.name.as_str(), i) {
            causes.push(cause(
                CauseType::Duplicate,
                format!("{field}.name"),
                format!("{base}.volumes[{first}] and {field} must not have the same Name."),
            ));
        }
        match volume.source() {
            Err(_) => causes.push(cause(
                CauseType::Invalid,
                field.clone(),
                format!("{field} must have exactly one source type set"),
            )),
            Ok(crate::v1::VolumeSource::DataVolume(dv)) if dv.name.is_empty() => causes.push(cause(
                CauseType::Required,
                format!("{field}.name"),
                "DataVolume 'name' must be set".to_owned(),
            )),
            Ok(_) => {}
        }
        let used = disk_names.contains_key(volume.name.as_str())
            || volume.memory_dump.is_some()
            || is_acpi_table_volume(spec, &volume.name);
        if is_vmi && !used {
            causes.push(cause(
                CauseType::NotFound,
                format!("{base}.domain.volumes[{i}].name"),
                format!("{base}.domain.volumes[{i}].name '{}' not found.", volume.name),
            ));
        }
    }
}

pub(super) fn check_memory(
    spec: &VirtualMachineInstanceSpec,
    base: &str,
    config: &crate::v1::ClusterConfig,
    causes: &mut Vec<Cause>,
) {
    let domain = &spec.domain;
    let resources = domain.resources.as_ref();
    let request = resources
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("memory"));
    let limit = resources.and_then(|r| r.limits.as_ref()).and_then(|r| r.get("memory"));
    let guest = domain.memory.as_ref().and_then(|m| m.guest.as_ref());
    let hugepages = domain.memory.as_ref().and_then(|m| m.hugepages.as_ref());
    if request.is_none() && guest.is_none() && hugepages.is_none() {
        causes.push(cause(
            CauseType::Required,
            format!("{base}.domain.resources.requests.memory"),
            "no memory requested, at least one of 'spec.domain.memory.guest', 'spec.domain.memory.hugepages.size' or 'spec.domain.resources.requests.memory' must be set".to_owned(),
        ));
    }
    if let Some(limit) = limit
        && quantity::parse(limit).is_ok_and(quantity::ParsedQuantity::is_negative)
    {
        let field = format!("{base}.domain.resources.limits.memory");
        causes.push(cause(
            CauseType::Invalid,
            field.clone(),
            format!("{field} '{}': must be greater than or equal to 0.", limit.0),
        ));
    }
    let field = format!("{base}.domain.resources.requests.memory");
    if let Some(request) = request {
        match quantity::parse(request) {
            Ok(q) if q.is_negative() => causes.push(cause(
                CauseType::Invalid,
                field.clone(),
                format!("{field} '{}': must be greater than or equal to 0.", request.0),
            )),
            Ok(q) if q.ceil() < 1_000_000 => causes.push(cause(
                CauseType::Invalid,
                field.clone(),
                format!("{field} '{}': must be greater than or equal to 1M.", request.0),
            )),
            Ok(_) => {}
            Err(_) => causes.push(cause(
                CauseType::Invalid,
                field.clone(),
                format!("{field} '{}' is not a valid quantity.", request.0),
            )),
        }
        if let (Some(limit), Ok(r)) = (limit, quantity::to_bytes(request))
            && quantity::parse(limit).is_ok_and(|l| !l.is_negative())
            && quantity::to_bytes(limit).is_ok_and(|l| l > 0 && r > l)
        {
            causes.push(cause(
                CauseType::Invalid,
                field.clone(),
                format!(
                    "{field} '{}' is greater than {base}.domain.resources.limits.memory '{}'",
                    request.0, limit.0
                ),
            ));
        }
    }
    // Under LiveUpdate (upstream's default) the guest may be given more memory than it starts with.
    if config.vm_rollout_strategy != "LiveUpdate"
        && let (Some(guest), Some(limit)) = (guest, limit)
        && let (Ok(g), Ok(l)) = (quantity::to_bytes(guest), quantity::to_bytes(limit))
        && g > l
    {
        let field = format!("{base}.domain.memory.guest");
        causes.push(cause(
            CauseType::Invalid,
            field.clone(),
            format!("{field} '{}' must be equal to or less than the memory limit {base}.domain.resources.limits.memory '{}'", guest.0, limit.0),
        ));
    }
}

pub(super) fn check_names_and_strategies(spec: &VirtualMachineInstanceSpec, base: &str, causes: &mut Vec<Cause>) {
    if let Some(hostname) = &spec.hostname
        && !is_dns_label(hostname)
    {
        causes.push(cause(
            CauseType::Invalid,
            format!("{base}.hostname"),
            format!("{base}.hostname does not conform to the kubernetes DNS_LABEL rules : {hostname}"),
        ));
    }
    if let Some(subdomain) = &spec.subdomain
        && !(subdomain.len() <= 253 && subdomain.split('.').all(is_dns_label))
    {
        causes.push(cause(
            CauseType::Invalid,
            format!("{base}.subdomain"),
            format!("{base}.subdomain does not conform to the kubernetes DNS_SUBDOMAIN rules : {subdomain}"),
        ));
    }
    if let Some(serial) = spec.domain.firmware.as_ref().and_then(|f| f.serial.as_ref()) {
        let field = format!("{base}.domain.firmware.serial");
        if serial.len() > 256 {
            causes.push(cause(
                CauseType::Invalid,
                field.clone(),
                format!("{field} must be less than or equal to 256 in length, if specified"),
            ));
        }
        if !serial.chars().all(|c| c.is_ascii_alphanumeric() || "_.+-".contains(c)) {
            causes.push(cause(
                CauseType::Invalid,
                field.clone(),
                format!("{field} must be made up of the following characters [A-Za-z0-9_.+-], if specified"),
            ));
        }
    }
    match spec.start_strategy.as_deref() {
        Some("Paused") if spec.liveness_probe.is_some() => causes.push(cause(
            CauseType::Invalid,
            format!("{base}.startStrategy"),
            format!(
                "either {base}.startStrategy or {base}.livenessProbe should be provided.Pausing VMI with LivenessProbe is not supported"
            ),
        )),
        Some(other) if other != "Paused" => causes.push(cause(
            CauseType::Invalid,
            format!("{base}.startStrategy"),
            format!("{base}.startStrategy is set with an unrecognized option: {other}"),
        )),
        _ => {}
    }
    if let Some(strategy) = &spec.eviction_strategy
        && !["LiveMigrate", "LiveMigrateIfPossible", "None", "External"].contains(&strategy.as_str())
    {
        causes.push(cause(
            CauseType::Invalid,
            format!("{base}.evictionStrategy"),
            format!("{base}.evictionStrategy is set with an unrecognized option: {strategy}"),
        ));
    }
}

/// Each network has exactly one source; one pod network at most, and none beside a default
/// Multus network, of which there is one at most.
fn check_network_sources(spec: &VirtualMachineInstanceSpec, base: &str, causes: &mut Vec<Cause>) {
    for (i, network) in spec.networks.iter().enumerate() {
        let here = format!("{base}.networks[{i}]");
        match usize::from(network.pod.is_some()) + usize::from(network.multus.is_some()) {
            0 => causes.push(cause(
                CauseType::Required,
                here.clone(),
                "should have a network type".to_owned(),
            )),
            1 => {}
            _ => causes.push(cause(
                CauseType::Invalid,
                here.clone(),
                "should have only one network type".to_owned(),
            )),
        }
        if network.multus.as_ref().is_some_and(|m| m.network_name.is_empty()) {
            causes.push(cause(
                CauseType::Required,
                format!("{here}.multus.networkName"),
                "CNI delegating plugin must have a networkName".to_owned(),
            ));
        }
    }
    let pods = spec.networks.iter().filter(|n| n.pod.is_some()).count();
    let multus_defaults = spec
        .networks
        .iter()
        .filter(|n| n.multus.as_ref().is_some_and(|m| m.default == Some(true)))
        .count();
    let networks = format!("{base}.networks");
    if pods > 1 {
        causes.push(cause(
            CauseType::Invalid,
            networks.clone(),
            format!("more than one interface is connected to a pod network in {base}.interfaces"),
        ));
    }
    if multus_defaults > 1 {
        causes.push(cause(
            CauseType::Invalid,
            networks.clone(),
            "Multus CNI should only have one default network".to_owned(),
        ));
    }
    if pods > 0 && multus_defaults > 0 {
        causes.push(cause(
            CauseType::Invalid,
            networks,
            "Pod network cannot be defined when Multus default network is defined".to_owned(),
        ));
    }
}

pub(super) fn check_networks(spec: &VirtualMachineInstanceSpec, base: &str, causes: &mut Vec<Cause>) {
    check_network_sources(spec, base, causes);
    let mut networks: HashMap<&str, usize> = HashMap::new();
    for (i, network) in spec.networks.iter().enumerate() {
        if networks.insert(network.name.as_str(), i).is_some() {
            causes.push(cause(
                CauseType::Duplicate,
                format!("{base}.networks[{i}].name"),
                format!(
                    "Network with name \"{}\" already exists, every network must have a unique name",
                    network.name
                ),
            ));
        }
    }
    let mut connected: HashMap<&str, usize> = HashMap::new();
    for (i, iface) in spec.domain.devices.interfaces.iter().enumerate() {
        let field = format!("{base}.domain.devices.interfaces[{i}].name");
        if !iface
            .name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            || iface.name.is_empty()
        {
            causes.push(cause(
                CauseType::Invalid,
                field.clone(),
                "Network interface name can only contain alphabetical characters, numbers, dashes (-) or underscores (_)"
                    .to_owned(),
            ));
        }
        if connected.insert(iface.name.as_str(), i).is_some() {
            causes.push(cause(
                CauseType::Duplicate,
                field.clone(),
                "Only one interface can be connected to one specific network".to_owned(),
            ));
        }
        match networks.get(iface.name.as_str()).map(|n| &spec.networks[*n]) {
            None => causes.push(cause(
                CauseType::Invalid,
                field.clone(),
                format!("{field} '{}' not found.", iface.name),
            )),
            Some(network) if iface.masquerade.is_some() && network.pod.is_none() => causes.push(cause(
                CauseType::Invalid,
                field.clone(),
                "Masquerade interface only implemented with pod network".to_owned(),
            )),
            Some(_) => {}
        }
    }
    for (i, network) in spec.networks.iter().enumerate() {
        if !connected.contains_key(network.name.as_str()) {
            let field = format!("{base}.networks[{i}].name");
            causes.push(cause(
                CauseType::Required,
                field.clone(),
                format!("{field} '{}' not found.", network.name),
            ));
        }
    }
}

/// A volume `spec.domain.firmware.acpi` takes a table from needs no disk.
fn is_acpi_table_volume(spec: &VirtualMachineInstanceSpec, name: &str) -> bool {
    spec.domain
        .firmware
        .as_ref()
        .and_then(|f| f.acpi.as_ref())
        .is_some_and(|a| a.slic_name_ref.as_deref() == Some(name) || a.msdm_name_ref.as_deref() == Some(name))
}
