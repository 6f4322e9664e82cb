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
        if let Some(order) = disk.boot_order {
            let order_field = format!("{field}.bootOrder");
            if boot_orders.insert(order, order_field.clone()).is_some() {
                causes.push(cause(
                    CauseType::Invalid,
                    order_field.clone(),
                    format!("Boot order for {order_field} already set for a different device."),
                ));
            }
        }
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

pub(super) fn check_memory(spec: &VirtualMachineInstanceSpec, base: &str, causes: &mut Vec<Cause>) {
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
            && quantity::to_bytes(limit).is_ok_and(|l| r > l)
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
    if let (Some(guest), Some(limit)) = (guest, limit)
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
    if let Some(serial) = spec.domain.firmware.as_ref().and_then(|f| f.serial.as_ref())
        && (serial.len() > 256 || !serial.chars().all(|c| c.is_ascii_alphanumeric() || "_.+-".contains(c)))
    {
        causes.push(cause(
            CauseType::Invalid,
            format!("{base}.domain.firmware.serial"),
            format!(
                "{base}.domain.firmware.serial must be at most 256 characters of letters, digits, '_', '.', '+' and '-'"
            ),
        ));
    }
    match spec.start_strategy.as_deref() {
        Some("Paused") if spec.liveness_probe.is_some() => causes.push(cause(
            CauseType::Invalid,
            format!("{base}.startStrategy"),
            "either spec.livenessProbe or spec.startStrategy must be set, but not both".to_owned(),
        )),
        Some(other) if other != "Paused" => causes.push(cause(
            CauseType::NotSupported,
            format!("{base}.startStrategy"),
            format!("{base}.startStrategy is set with an invalid value of {other}"),
        )),
        _ => {}
    }
    if let Some(strategy) = &spec.eviction_strategy
        && !["LiveMigrate", "LiveMigrateIfPossible", "None", "External"].contains(&strategy.as_str())
    {
        causes.push(cause(
            CauseType::NotSupported,
            format!("{base}.evictionStrategy"),
            format!("{base}.evictionStrategy is set with an invalid value of {strategy}"),
        ));
    }
}

pub(super) fn check_networks(spec: &VirtualMachineInstanceSpec, base: &str, causes: &mut Vec<Cause>) {
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
                CauseType::NotFound,
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
                CauseType::NotFound,
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
