//! Upstream's rules for the newer guest-facing settings: panic devices, the reboot policy, ACPI
//! tables, the video type and SSD emulation.

use super::{Cause, CauseType, cause};
use crate::v1::{ClusterConfig, VirtualMachineInstanceSpec};

/// Video types upstream accepts on amd64.
const AMD64_VIDEO_TYPES: [&str; 5] = ["vga", "cirrus", "virtio", "ramfb", "bochs"];

fn check_panic_devices(spec: &VirtualMachineInstanceSpec, base: &str, causes: &mut Vec<Cause>) {
    for (i, device) in spec.domain.devices.panic_devices.iter().enumerate() {
        let Some(model) = device.model.as_deref() else { continue };
        if !crate::v1::PANIC_DEVICE_MODELS.contains(&model) {
            causes.push(cause(
                CauseType::Invalid,
                format!("{base}.domain.devices.panicDevices[{i}].model"),
                format!("invalid PanicDeviceModel({model})"),
            ));
        }
    }
}

fn check_reboot_policy(spec: &VirtualMachineInstanceSpec, base: &str, config: &ClusterConfig, causes: &mut Vec<Cause>) {
    let Some(policy) = spec.domain.reboot_policy.as_deref() else {
        return;
    };
    let field = format!("{base}.domain.rebootPolicy");
    if !config.is_feature_gate_enabled("RebootPolicy") {
        causes.push(cause(
            CauseType::Invalid,
            field,
            "RebootPolicy is specified but the RebootPolicy feature gate is not enabled".to_owned(),
        ));
    } else if policy != "Reboot" && policy != "Terminate" {
        causes.push(cause(
            CauseType::NotSupported,
            field.clone(),
            format!("{field}: Unsupported value: \"{policy}\": supported values: \"Reboot\", \"Terminate\""),
        ));
    }
}

/// Upstream names the ACPI fields `<base>.acpi` (without `domain.firmware`).
fn check_acpi(spec: &VirtualMachineInstanceSpec, base: &str, causes: &mut Vec<Cause>) {
    let Some(acpi) = spec.domain.firmware.as_ref().and_then(|f| f.acpi.as_ref()) else {
        return;
    };
    let here = format!("{base}.acpi");
    let refs = [
        ("slicNameRef", &acpi.slic_name_ref),
        ("msdmNameRef", &acpi.msdm_name_ref),
    ];
    if refs.iter().all(|(_, r)| r.as_deref().is_none_or(str::is_empty)) {
        causes.push(cause(
            CauseType::Invalid,
            here.clone(),
            "ACPI was set but no SLIC nor MSDM volume reference was set".to_owned(),
        ));
        return;
    }
    for (name, reference) in refs {
        let Some(volume_name) = reference.as_deref().filter(|r| !r.is_empty()) else {
            continue;
        };
        match spec.volumes.iter().find(|v| v.name == volume_name) {
            None => causes.push(cause(
                CauseType::Invalid,
                format!("{here}.{name}"),
                format!("{here} does not have a matching Volume."),
            )),
            Some(volume) if volume.secret.is_none() => causes.push(cause(
                CauseType::Invalid,
                format!("{here}.{name}"),
                format!("{here} refers to Volume of unsupported type."),
            )),
            Some(_) => {}
        }
    }
}

fn check_video_type(spec: &VirtualMachineInstanceSpec, base: &str, causes: &mut Vec<Cause>) {
    let Some(video_type) = spec.domain.devices.video.as_ref().and_then(|v| v.video_type.as_deref()) else {
        return;
    };
    if !AMD64_VIDEO_TYPES.contains(&video_type) {
        causes.push(cause(
            CauseType::NotSupported,
            format!("{base}.domain.devices.video.type"),
            format!(
                "video model '{video_type}' is not supported on amd64, use one of {}",
                AMD64_VIDEO_TYPES.join(", ")
            ),
        ));
    }
}

fn check_solid_state(spec: &VirtualMachineInstanceSpec, base: &str, causes: &mut Vec<Cause>) {
    for (i, disk) in spec.domain.devices.disks.iter().enumerate() {
        let Some(target) = disk.disk.as_ref().filter(|d| d.solid_state == Some(true)) else {
            continue;
        };
        let bus = target.bus.as_deref().unwrap_or("");
        if !bus.is_empty() && bus != "sata" && bus != "scsi" {
            causes.push(cause(
                CauseType::Invalid,
                format!("{base}.domain.devices.disks[{i}].disk.solidState"),
                format!(
                    "solidState is only supported on sata and scsi buses, disk {} uses {bus}",
                    disk.name
                ),
            ));
        }
    }
}

pub(super) fn check_guest_devices(
    spec: &VirtualMachineInstanceSpec,
    base: &str,
    config: &ClusterConfig,
    causes: &mut Vec<Cause>,
) {
    check_panic_devices(spec, base, causes);
    check_reboot_policy(spec, base, config, causes);
    check_acpi(spec, base, causes);
    check_video_type(spec, base, causes);
    check_solid_state(spec, base, causes);
    let amd64 = spec
        .architecture
        .as_deref()
        .is_none_or(|a| a.is_empty() || a == "amd64");
    if amd64
        && spec
            .domain
            .devices
            .watchdog
            .as_ref()
            .is_some_and(|w| w.diag288.is_some())
    {
        causes.push(cause(
            CauseType::Invalid,
            format!("{base}.domain.devices.watchdog"),
            "amd64 only supports I6300ESB watchdog device".to_owned(),
        ));
    }
}
