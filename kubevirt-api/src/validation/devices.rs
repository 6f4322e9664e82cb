//! Device rules of upstream's VMI admitter, including its per-disk checks: disk bus, cache, I/O
//! mode, error policy, serial, PCI address and block size; inputs, IOThreads, sound, bootloader and
//! kernel boot; and the devices that need a feature gate.

use super::{Cause, CauseType, cause};
use crate::v1::{ClusterConfig, Disk, VirtualMachineInstanceSpec};

const MAX_SERIAL_LEN: usize = 256;

/// `[A-Za-z0-9_.+-]+`, upstream's rule for serial numbers.
pub(super) fn is_valid_serial(value: &str) -> bool {
    !value.is_empty() && value.bytes().all(|b| b.is_ascii_alphanumeric() || b"_.+-".contains(&b))
}

fn bus_and_kind(disk: &Disk) -> (Option<&str>, &'static str) {
    if let Some(d) = &disk.disk {
        (d.bus.as_deref(), "disk")
    } else if let Some(l) = &disk.lun {
        (l.bus.as_deref(), "lun")
    } else if let Some(c) = &disk.cdrom {
        (c.bus.as_deref(), "cdrom")
    } else {
        (None, "")
    }
}

fn is_pci_address(text: &str) -> bool {
    let parts: Vec<&str> = text.split([':', '.']).collect();
    let hex = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit());
    parts.len() == 4 && hex(parts[0], 4) && hex(parts[1], 2) && hex(parts[2], 2) && hex(parts[3], 1)
}

/// The disk bus: known, not IDE, no virtio CD-ROMs, no read-only SATA disks.
fn check_bus(disk: &Disk, bus: Option<&str>, kind: &str, here: &str, causes: &mut Vec<Cause>) {
    if let Some(bus) = bus.filter(|b| !b.is_empty()) {
        match bus {
            "ide" => causes.push(cause(
                CauseType::Invalid,
                format!("{here}.{kind}.bus"),
                "IDE bus is not supported".to_owned(),
            )),
            "virtio" if kind == "cdrom" => causes.push(cause(
                CauseType::Invalid,
                format!("{here}.cdrom.bus"),
                "Bus type virtio is invalid for CD-ROM device".to_owned(),
            )),
            "sata" if disk.disk.as_ref().and_then(|d| d.readonly) == Some(true) => causes.push(cause(
                CauseType::Invalid,
                format!("{here}.disk.bus"),
                "sata hard-disks do not support read-only.".to_owned(),
            )),
            "virtio" | "sata" | "scsi" | "usb" => {}
            other => causes.push(cause(
                CauseType::Invalid,
                format!("{here}.{kind}.bus"),
                format!("{here} is set with an unrecognized bus {other}, must be one of: [virtio scsi sata usb]"),
            )),
        }
    }
}

fn check_disk(disk: &Disk, i: usize, field: &str, base: &str, causes: &mut Vec<Cause>) {
    let here = format!("{field}[{i}]");
    let (bus, kind) = bus_and_kind(disk);
    check_bus(disk, bus, kind, &here, causes);
    if disk.dedicated_io_thread == Some(true) && bus != Some("virtio") {
        causes.push(cause(
            CauseType::NotSupported,
            format!("{base}.domain.devices.disks[{i}]"),
            format!("IOThreads are not supported for disks on a {} bus", bus.unwrap_or("")),
        ));
    }
    if let Some(address) = disk
        .disk
        .as_ref()
        .and_then(|d| d.pci_address.as_deref())
        .filter(|a| !a.is_empty())
    {
        let name = format!("{base}.domain.devices.disks.disk[{i}].name");
        let f = format!("{base}.domain.devices.disks.disk[{i}].pciAddress");
        if bus != Some("virtio") {
            causes.push(cause(
                CauseType::Invalid,
                f.clone(),
                format!("disk {name} - setting a PCI address is only possible with bus type virtio."),
            ));
        }
        if !is_pci_address(address) {
            causes.push(cause(
                CauseType::Invalid,
                f,
                format!("disk {name} has malformed PCI address ({address})."),
            ));
        }
    }
    if let Some(serial) = disk.serial.as_deref().filter(|s| !s.is_empty()) {
        if !is_valid_serial(serial) {
            causes.push(cause(
                CauseType::Invalid,
                format!("{here}.serial"),
                format!("{here} must be made up of the following characters [A-Za-z0-9_.+-], if specified"),
            ));
        }
        if serial.chars().count() > MAX_SERIAL_LEN {
            causes.push(cause(
                CauseType::Invalid,
                format!("{here}.serial"),
                format!("{here} must be less than or equal to {MAX_SERIAL_LEN} in length, if specified"),
            ));
        }
    }
    if let Some(cache) = disk
        .cache
        .as_deref()
        .filter(|c| !["", "none", "writethrough", "writeback"].contains(c))
    {
        causes.push(cause(
            CauseType::Invalid,
            format!("{here}.cache"),
            format!("{here}.cache has invalid value {cache}"),
        ));
    }
    if disk
        .io
        .as_deref()
        .is_some_and(|io| !["", "native", "threads"].contains(&io))
    {
        causes.push(cause(
            CauseType::NotSupported,
            format!("{base}.domain.devices.disks[{i}].io"),
            format!("Disk IO mode for {field} is not supported. Supported modes are: native, threads."),
        ));
    }
    if let Some(policy) = disk
        .error_policy
        .as_deref()
        .filter(|p| !["stop", "ignore", "report", "enospace"].contains(p))
    {
        causes.push(cause(
            CauseType::Invalid,
            format!("{here}.errorPolicy"),
            format!("{here}.errorPolicy has invalid value \"{policy}\""),
        ));
    }
    check_block_size(disk, &here, causes);
}

/// Custom block sizes: powers of two between 512 B and 2 MiB, logical not above physical.
fn check_block_size(disk: &Disk, here: &str, causes: &mut Vec<Cause>) {
    if let Some(custom) = disk.block_size.as_ref().and_then(|b| b.custom.as_ref()) {
        let matching = disk
            .block_size
            .as_ref()
            .and_then(|b| b.match_volume.as_ref())
            .is_some_and(|m| m.enabled != Some(false));
        let f = format!("{here}.blockSize");
        if matching {
            causes.push(cause(
                CauseType::Invalid,
                f,
                "Block size matching can't be enabled together with a custom value".to_owned(),
            ));
        } else if custom.logical > custom.physical {
            causes.push(cause(
                CauseType::Invalid,
                format!("{f}.custom.logical"),
                format!(
                    "Logical size {} must be the same or less than the physical size of {}",
                    custom.logical, custom.physical
                ),
            ));
        } else {
            for (what, size) in [("logical", custom.logical), ("physical", custom.physical)] {
                let message = if size < 512 {
                    format!("Provided size of {size} is less than the supported minimum size of 512")
                } else if size > 2_097_152 {
                    format!("Provided size of {size} is greater than the supported maximum size of 2097152")
                } else if !size.is_power_of_two() {
                    format!("Provided size of {size} is not a power of 2")
                } else {
                    continue;
                };
                causes.push(cause(CauseType::Invalid, format!("{f}.custom.{what}"), message));
            }
        }
    }
}

pub(super) fn check_devices(
    spec: &VirtualMachineInstanceSpec,
    base: &str,
    config: &ClusterConfig,
    causes: &mut Vec<Cause>,
) {
    let devices = &spec.domain.devices;
    let field = format!("{base}.domain.devices.disks");
    for (i, disk) in devices.disks.iter().enumerate() {
        check_disk(disk, i, &field, base, causes);
    }
    for (i, input) in devices.inputs.iter().enumerate() {
        let here = format!("{base}.domain.devices.inputs[{i}]");
        if input
            .bus
            .as_deref()
            .is_some_and(|b| !["", "virtio", "usb"].contains(&b))
        {
            causes.push(cause(
                CauseType::Invalid,
                format!("{here}.bus"),
                "Input device can have only virtio or usb bus.".to_owned(),
            ));
        }
        if input.input_type != "tablet" {
            causes.push(cause(
                CauseType::Invalid,
                format!("{here}.type"),
                "Input device can have only tablet type.".to_owned(),
            ));
        }
    }
    if let Some(policy) = spec.domain.io_threads_policy.as_deref() {
        if !["shared", "auto", "supplementalPool"].contains(&policy) {
            causes.push(cause(
                CauseType::Invalid,
                format!("{base}.domain.ioThreadsPolicy"),
                format!("Invalid IOThreadsPolicy ({policy})"),
            ));
        }
        let count = spec
            .domain
            .io_threads
            .as_ref()
            .and_then(|t| t.supplemental_pool_thread_count);
        if policy == "supplementalPool" && count.is_none_or(|c| c < 1) {
            causes.push(cause(
                CauseType::Invalid,
                format!("{base}.domain.ioThreads.count"),
                "the number of iothreads needs to be set and positive for the dedicated policy".to_owned(),
            ));
        }
    }
    if let Some(sound) = &devices.sound {
        if sound
            .model
            .as_deref()
            .is_some_and(|m| !["", "ich9", "ac97"].contains(&m))
        {
            causes.push(cause(
                CauseType::Invalid,
                format!("{base}.Sound"),
                "Sound device type is not supported. Options: 'ich9' or 'ac97'".to_owned(),
            ));
        }
        if sound.name.is_empty() {
            causes.push(cause(
                CauseType::Invalid,
                format!("{base}.Sound"),
                "Sound device requires a name field.".to_owned(),
            ));
        }
    }
    check_firmware(spec, base, causes);
    check_gates(spec, base, config, causes);
}

fn check_firmware(spec: &VirtualMachineInstanceSpec, base: &str, causes: &mut Vec<Cause>) {
    let firmware = spec.domain.firmware.as_ref();
    let bootloader = firmware.and_then(|f| f.bootloader.as_ref());
    if let Some(b) = bootloader
        && b.efi.is_some()
        && b.bios.is_some()
    {
        let f = format!("{base}.domain.firmware.bootloader");
        causes.push(cause(
            CauseType::Invalid,
            f.clone(),
            format!("{f} has both EFI and BIOS configured, but they are mutually exclusive."),
        ));
    }
    let secure_boot = bootloader
        .and_then(|b| b.efi.as_ref())
        .is_some_and(|e| e.secure_boot != Some(false));
    let smm = spec
        .domain
        .features
        .as_ref()
        .and_then(|f| f.smm.as_ref())
        .is_some_and(|s| s.enabled != Some(false));
    if secure_boot && !smm {
        let f = format!("{base}.domain");
        causes.push(cause(
            CauseType::Invalid,
            f.clone(),
            format!("{f} has EFI SecureBoot enabled. SecureBoot requires SMM, which is currently disabled."),
        ));
    }
    let Some(kernel) = firmware.and_then(|f| f.kernel_boot.as_ref()) else {
        return;
    };
    let field = format!("{base}.domain.firmware.kernelBoot");
    let Some(container) = &kernel.container else {
        if kernel.kernel_args.as_deref().is_some_and(|a| !a.is_empty()) {
            causes.push(cause(
                CauseType::Invalid,
                format!("{field}.kernelArgs"),
                "kernel arguments cannot be provided without an external kernel".to_owned(),
            ));
        }
        return;
    };
    let here = format!("{field}.container");
    if container.image.is_empty() {
        causes.push(cause(
            CauseType::Required,
            format!("{here}.image"),
            format!("{here} must be defined with an image"),
        ));
    }
    let kernel_path = container.kernel_path.as_deref().unwrap_or("");
    let initrd_path = container.initrd_path.as_deref().unwrap_or("");
    if kernel_path.is_empty() && initrd_path.is_empty() {
        causes.push(cause(
            CauseType::Required,
            here.clone(),
            format!("{here} must be defined with at least one of the following: kernelPath, initrdPath"),
        ));
    }
    for (what, path) in [("kernelPath", kernel_path), ("initrdPath", initrd_path)] {
        if !path.is_empty() {
            super::volumes::check_path(&format!("{here}.{what}"), path, causes);
        }
    }
}

/// Rule 58: devices that need a feature gate.
fn check_gates(spec: &VirtualMachineInstanceSpec, base: &str, config: &ClusterConfig, causes: &mut Vec<Cause>) {
    let devices = &spec.domain.devices;
    let gate = |name: &str| config.is_feature_gate_enabled(name);
    if !devices.host_devices.is_empty() && !gate("HostDevices") {
        causes.push(cause(
            CauseType::Invalid,
            format!("{base}.HostDevices"),
            "Host Devices feature gate is not enabled in kubevirt-config".to_owned(),
        ));
    }
    if devices.downward_metrics.is_some() && !gate("DownwardMetrics") {
        causes.push(cause(
            CauseType::Invalid,
            format!("{base}.domain.devices.downwardMetrics"),
            "downwardMetrics virtio serial is not allowed: DownwardMetrics feature gate is not enabled".to_owned(),
        ));
    }
    if devices.autoattach_vsock == Some(true) && !gate("VSOCK") {
        causes.push(cause(
            CauseType::Invalid,
            format!("{base}.domain.devices.autoattachVSOCK"),
            "VSOCK feature gate is not enabled in kubevirt-config".to_owned(),
        ));
    }
    let virtiofs = gate("EnableVirtioFsConfigVolumes")
        || gate("EnableVirtioFsStorageVolumes")
        || gate("ExperimentalVirtiofsSupport");
    if !devices.filesystems.is_empty() && !virtiofs {
        causes.push(cause(
            CauseType::Invalid,
            format!("{base}.domain.devices.filesystems"),
            "virtiofs is not allowed: virtiofs feature gate is not enabled".to_owned(),
        ));
    }
    let reservation = devices
        .disks
        .iter()
        .any(|d| d.lun.as_ref().and_then(|l| l.reservation) == Some(true));
    if reservation && !gate("PersistentReservation") {
        causes.push(cause(
            CauseType::Invalid,
            format!("{base}.domain.devices.disks.luns.reservation"),
            "PersistentReservation feature gate is not enabled in kubevirt-config".to_owned(),
        ));
    }
    if devices.video.is_some() {
        if !gate("VideoConfig") {
            causes.push(cause(
                CauseType::Invalid,
                format!("{base}.video"),
                "Video configuration is specified but the VideoConfig feature gate is not enabled".to_owned(),
            ));
        } else if devices.autoattach_graphics_device == Some(false) {
            causes.push(cause(
                CauseType::Invalid,
                format!("{base}.video"),
                "Video configuration is not allowed when autoattachGraphicsDevice is set to false".to_owned(),
            ));
        }
    }
}
