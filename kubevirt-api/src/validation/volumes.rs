//! Volume rules of upstream's VMI admitter: cloud-init data sizes and sources, hostDisk, config
//! volumes, single-instance volumes, LUN and downwardMetrics targets, and containerDisk paths.

use super::{Cause, CauseType, cause};
use crate::v1::{CloudInitSource, ClusterConfig, VirtualMachineInstanceSpec};

const CLOUD_INIT_MAX_LEN: usize = 2048;

fn decoded_len(text: &str) -> Option<usize> {
    let clean: Vec<u8> = text.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    if !clean.len().is_multiple_of(4) {
        return None;
    }
    let valid = clean
        .iter()
        .enumerate()
        .all(|(i, b)| b.is_ascii_alphanumeric() || *b == b'+' || *b == b'/' || (*b == b'=' && i + 2 >= clean.len()));
    valid.then(|| clean.len() / 4 * 3 - clean.iter().rev().take_while(|b| **b == b'=').count())
}

/// Counts one kind of cloud-init data (`userData` or `networkData`): how many sources are set and
/// how long the data is.
struct DataSources<'a> {
    secret: bool,
    base64: Option<&'a String>,
    plain: Option<&'a String>,
    what: &'a str,
}

fn count_data(data: &DataSources<'_>, kind: &str, here: &str, causes: &mut Vec<Cause>) -> (usize, usize) {
    let what = data.what;
    let mut count = usize::from(data.secret);
    let mut len = 0;
    if let Some(encoded) = data.base64.filter(|s| !s.is_empty()) {
        count += 1;
        match decoded_len(encoded) {
            Some(n) => len = n,
            None => causes.push(cause(
                CauseType::Invalid,
                format!("{here}.{what}Base64"),
                format!("{here}.{what}Base64.{kind}.{what}Base64 is not a valid base64 value."),
            )),
        }
    }
    if let Some(text) = data.plain.filter(|s| !s.is_empty()) {
        count += 1;
        len = text.len();
    }
    (count, len)
}

fn check_cloud_init(source: &CloudInitSource, kind: &str, field: &str, causes: &mut Vec<Cause>) {
    let here = format!("{field}.{kind}");
    let named = |r: Option<&k8s_openapi::api::core::v1::LocalObjectReference>| r.is_some_and(|r| !r.name.is_empty());
    let user = DataSources {
        secret: named(source.secret_ref.as_ref()),
        base64: source.user_data_base64.as_ref(),
        plain: source.user_data.as_ref(),
        what: "userData",
    };
    let (users, user_len) = count_data(&user, kind, &here, causes);
    if users > 1 {
        causes.push(cause(
            CauseType::Invalid,
            here.clone(),
            format!("{here} must have only one userdatasource set."),
        ));
    }
    if user_len > CLOUD_INIT_MAX_LEN {
        causes.push(cause(
            CauseType::Invalid,
            here.clone(),
            format!(
                "{here} userdata exceeds {CLOUD_INIT_MAX_LEN} byte limit. Should use UserDataSecretRef for larger data."
            ),
        ));
    }
    let network = DataSources {
        secret: named(source.network_data_secret_ref.as_ref()),
        base64: source.network_data_base64.as_ref(),
        plain: source.network_data.as_ref(),
        what: "networkData",
    };
    let (networks, network_len) = count_data(&network, kind, &here, causes);
    if networks > 1 {
        causes.push(cause(
            CauseType::Invalid,
            here.clone(),
            format!("{here} must have only one networkdata source set."),
        ));
    }
    if network_len > CLOUD_INIT_MAX_LEN {
        causes.push(cause(
            CauseType::Invalid,
            here.clone(),
            format!("{here} networkdata exceeds {CLOUD_INIT_MAX_LEN} byte limit. Should use NetworkDataSecretRef for larger data."),
        ));
    }
    if users == 0 && networks == 0 {
        causes.push(cause(
            CauseType::Invalid,
            here.clone(),
            format!("{here} must have at least one userdatasource or one networkdatasource set."),
        ));
    }
}

fn required(value: Option<&String>, field: &str, causes: &mut Vec<Cause>) {
    if value.is_none_or(String::is_empty) {
        causes.push(cause(
            CauseType::Invalid,
            field.to_owned(),
            format!("{field} is a required field"),
        ));
    }
}

/// An absolute path to a file, without `..` or `.` components (upstream's `validatePath`).
pub(super) fn check_path(field: &str, path: &str, causes: &mut Vec<Cause>) {
    if path == "/" {
        causes.push(cause(
            CauseType::Invalid,
            field.to_owned(),
            format!("{field} must not point to root"),
        ));
        return;
    }
    let trimmed = path.trim_end_matches('/');
    let clean = trimmed.starts_with('/')
        && !trimmed.contains("//")
        && trimmed.split('/').skip(1).all(|part| part != "." && part != "..");
    if !clean {
        causes.push(cause(
            CauseType::Invalid,
            field.to_owned(),
            format!("{field} must be an absolute path to a file without relative components"),
        ));
    }
}

/// Rule 15: the HostDisk gate, a path, a known type, and a capacity only with `DiskOrCreate`.
fn check_host_disk(disk: &crate::v1::HostDiskSource, here: &str, config: &ClusterConfig, causes: &mut Vec<Cause>) {
    if !config.is_feature_gate_enabled("HostDisk") {
        causes.push(cause(
            CauseType::Invalid,
            here.to_owned(),
            "HostDisk feature gate is not enabled".to_owned(),
        ));
    }
    if disk.path.is_empty() {
        let f = format!("{here}.hostDisk.path");
        causes.push(cause(
            CauseType::NotFound,
            f.clone(),
            format!("{f} is required for hostDisk volume"),
        ));
    }
    if disk.disk_type != "Disk" && disk.disk_type != "DiskOrCreate" {
        let f = format!("{here}.hostDisk.type");
        causes.push(cause(
            CauseType::Invalid,
            f.clone(),
            format!(
                "{f} has invalid value '{}', allowed are 'Disk' or 'DiskOrCreate'",
                disk.disk_type
            ),
        ));
    }
    let has_capacity = disk
        .capacity
        .as_ref()
        .is_some_and(|c| crate::quantity::parse(c).is_ok_and(|q| q.milli_ceil() != 0));
    if disk.disk_type == "Disk" && has_capacity {
        let f = format!("{here}.hostDisk.capacity");
        causes.push(cause(
            CauseType::Invalid,
            f.clone(),
            format!("{f} is allowed to pass only with {here}.hostDisk.type equal to 'DiskOrCreate'"),
        ));
    }
}

pub(super) fn check_volumes(
    spec: &VirtualMachineInstanceSpec,
    base: &str,
    config: &ClusterConfig,
    causes: &mut Vec<Cause>,
) {
    let field = format!("{base}.volumes");
    let (mut service_accounts, mut downward_metrics, mut memory_dumps) = (0, 0, 0);
    for (i, volume) in spec.volumes.iter().enumerate() {
        let here = format!("{field}[{i}]");
        if let Some(source) = &volume.cloud_init_no_cloud {
            check_cloud_init(source, "cloudInitNoCloud", &here, causes);
        } else if let Some(source) = &volume.cloud_init_config_drive {
            check_cloud_init(source, "cloudInitConfigDrive", &here, causes);
        }
        if volume.downward_metrics.is_some() {
            downward_metrics += 1;
            if !config.is_feature_gate_enabled("DownwardMetrics") {
                causes.push(cause(
                    CauseType::Invalid,
                    here.clone(),
                    "downwardMetrics disks are not allowed: DownwardMetrics feature gate is not enabled.".to_owned(),
                ));
            }
        }
        if let Some(disk) = &volume.host_disk {
            check_host_disk(disk, &here, config, causes);
        }
        if let Some(map) = &volume.config_map {
            required(map.name.as_ref(), &format!("{here}.configMap.name"), causes);
        }
        if let Some(secret) = &volume.secret {
            required(
                secret.secret_name.as_ref(),
                &format!("{here}.secret.secretName"),
                causes,
            );
        }
        if let Some(account) = &volume.service_account {
            service_accounts += 1;
            required(
                account.service_account_name.as_ref(),
                &format!("{here}.serviceAccount.serviceAccountName"),
                causes,
            );
        }
        if volume.memory_dump.is_some() {
            memory_dumps += 1;
        }
        if let Some(path) = volume
            .container_disk
            .as_ref()
            .and_then(|c| c.path.as_deref())
            .filter(|p| !p.is_empty())
        {
            check_path(&format!("{base}.volumes[{i}].containerDisk"), path, causes);
        }
    }
    for (count, what) in [
        (service_accounts, "serviceAccount volume"),
        (downward_metrics, "downwardMetric volume"),
        (memory_dumps, "memory dump volume"),
    ] {
        if count > 1 {
            causes.push(cause(
                CauseType::Invalid,
                field.clone(),
                format!("{field} must have max one {what} set"),
            ));
        }
    }
    check_disk_targets(spec, base, causes);
}

/// LUNs need a PVC or DataVolume; a downwardMetrics volume is a virtio disk.
fn check_disk_targets(spec: &VirtualMachineInstanceSpec, base: &str, causes: &mut Vec<Cause>) {
    for (i, disk) in spec.domain.devices.disks.iter().enumerate() {
        let Some(volume) = spec.volumes.iter().find(|v| v.name == disk.name) else {
            continue;
        };
        let here = format!("{base}.domain.devices.disks[{i}]");
        if disk.lun.is_some() && volume.persistent_volume_claim.is_none() && volume.data_volume.is_none() {
            let f = format!("{here}.lun");
            causes.push(cause(
                CauseType::Invalid,
                f.clone(),
                format!("{f} can only be mapped to a DataVolume or PersistentVolumeClaim volume."),
            ));
        }
        if volume.downward_metrics.is_some() {
            match &disk.disk {
                None => {
                    let f = format!("{here}.disk");
                    causes.push(cause(
                        CauseType::Required,
                        f.clone(),
                        format!("DownwardMetrics volume must be mapped to a disk, but disk is not set on {f}."),
                    ));
                }
                Some(target) => {
                    if let Some(bus) = target.bus.as_deref().filter(|b| !b.is_empty() && *b != "virtio") {
                        let f = format!("{here}.disk.bus");
                        causes.push(cause(
                            CauseType::Invalid,
                            f.clone(),
                            format!("DownwardMetrics volume must be mapped to virtio bus, but {f} is set to {bus}"),
                        ));
                    }
                }
            }
        }
    }
}
