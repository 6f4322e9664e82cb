//! Applying a preference to a VMI spec, as upstream's `pkg/instancetype/preference/apply` does:
//! each preferred value fills a field the VM leaves unset, except the few upstream always applies
//! (`preferredAcpi`, `preferredDisableHotplug`).

use std::collections::BTreeMap;

use super::{DevicePreferences, FeaturePreferences, FirmwarePreferences, VirtualMachinePreferenceSpec};
use crate::v1::{
    Bios, Bootloader, Clock, Cpu, DiskTarget, Efi, FeatureHyperv, Features, Firmware, Machine,
    VirtualMachineInstanceSpec,
};

fn fill<T: Clone>(current: &mut Option<T>, preferred: Option<&T>) {
    if current.is_none() {
        current.clone_from(&preferred.cloned());
    }
}

fn fill_text(current: &mut Option<String>, preferred: Option<&String>) {
    if current.as_deref().is_none_or(str::is_empty) && preferred.is_some_and(|p| !p.is_empty()) {
        current.clone_from(&preferred.cloned());
    }
}

/// Applies `preference` to `spec` and its annotations to `annotations` (existing keys win).
pub fn apply_preference(
    preference: &VirtualMachinePreferenceSpec,
    spec: &mut VirtualMachineInstanceSpec,
    annotations: &mut BTreeMap<String, String>,
) {
    if let Some(cpu) = &preference.cpu
        && !cpu.preferred_cpu_features.is_empty()
    {
        let current = spec.domain.cpu.get_or_insert_with(Cpu::default);
        for feature in &cpu.preferred_cpu_features {
            if !current.features.iter().any(|f| f.name == feature.name) {
                current.features.push(feature.clone());
            }
        }
    }
    if let Some(devices) = &preference.devices {
        apply_devices(devices, spec);
    }
    if let Some(features) = &preference.features {
        apply_features(features, spec.domain.features.get_or_insert_with(Features::default));
    }
    if let Some(firmware) = &preference.firmware {
        apply_firmware(firmware, spec.domain.firmware.get_or_insert_with(Firmware::default));
    }
    if let Some(machine) = &preference.machine {
        let current = spec.domain.machine.get_or_insert_with(Machine::default);
        fill_text(&mut current.machine_type, machine.preferred_machine_type.as_ref());
    }
    if let Some(clock) = &preference.clock {
        let current = spec.domain.clock.get_or_insert_with(Clock::default);
        if let Some(offset) = clock.preferred_clock_offset.as_ref()
            && current.utc.is_none()
            && current.timezone.is_none()
        {
            current.utc.clone_from(&offset.utc);
            current.timezone.clone_from(&offset.timezone);
        }
        fill(&mut current.timer, clock.preferred_timer.as_ref());
    }
    fill_text(&mut spec.subdomain, preference.preferred_subdomain.as_ref());
    fill(
        &mut spec.termination_grace_period_seconds,
        preference.preferred_termination_grace_period_seconds.as_ref(),
    );
    for (key, value) in preference.annotations.iter().flatten() {
        annotations.entry(key.clone()).or_insert_with(|| value.clone());
    }
}

/// `spec.architecture` from the preference where the VM names none.
pub fn apply_architecture(preference: &VirtualMachinePreferenceSpec, spec: &mut VirtualMachineInstanceSpec) {
    fill_text(&mut spec.architecture, preference.preferred_architecture.as_ref());
}

/// The device preferences alone: applied before the default disks and pod interface are added,
/// so the preference's autoattach choices decide whether they are (upstream's order), and again
/// with the whole preference afterwards, when they fill the defaults' buses and models.
pub fn apply_device_preferences(preference: &VirtualMachinePreferenceSpec, spec: &mut VirtualMachineInstanceSpec) {
    if let Some(devices) = &preference.devices {
        apply_devices(devices, spec);
    }
}

fn apply_devices(preferred: &DevicePreferences, spec: &mut VirtualMachineInstanceSpec) {
    let devices = &mut spec.domain.devices;
    for (current, wanted) in [
        (
            &mut devices.autoattach_graphics_device,
            preferred.preferred_autoattach_graphics_device,
        ),
        (
            &mut devices.autoattach_mem_balloon,
            preferred.preferred_autoattach_mem_balloon,
        ),
        (
            &mut devices.autoattach_pod_interface,
            preferred.preferred_autoattach_pod_interface,
        ),
        (
            &mut devices.autoattach_serial_console,
            preferred.preferred_autoattach_serial_console,
        ),
        (
            &mut devices.autoattach_input_device,
            preferred.preferred_autoattach_input_device,
        ),
        (
            &mut devices.use_virtio_transitional,
            preferred.preferred_use_virtio_transitional,
        ),
        (&mut devices.block_multi_queue, preferred.preferred_block_multi_queue),
        (
            &mut devices.network_interface_multiqueue,
            preferred.preferred_network_interface_multi_queue,
        ),
    ] {
        fill(current, wanted.as_ref());
    }
    if let Some(disable) = preferred.preferred_disable_hotplug {
        devices.disable_hotplug = Some(disable);
    }
    if let Some(sound) = devices.sound.as_mut() {
        fill_text(&mut sound.model, preferred.preferred_sound_model.as_ref());
    }
    fill(&mut devices.rng, preferred.preferred_rng.as_ref());
    fill(&mut devices.tpm, preferred.preferred_tpm.as_ref());
    if let Some(video_type) = &preferred.preferred_video_type {
        fill_text(&mut devices.video.get_or_insert_default().video_type, Some(video_type));
    }
    for disk in &mut devices.disks {
        if disk.disk.is_none() && disk.cdrom.is_none() && disk.lun.is_none() {
            disk.disk = Some(DiskTarget::default());
        }
        if let Some(target) = disk.disk.as_mut() {
            fill_text(&mut target.bus, preferred.preferred_disk_bus.as_ref());
            fill(&mut disk.block_size, preferred.preferred_disk_block_size.as_ref());
            fill_text(&mut disk.cache, preferred.preferred_disk_cache.as_ref());
            fill_text(&mut disk.io, preferred.preferred_disk_io.as_ref());
            if target.bus.as_deref() == Some("virtio") {
                fill(
                    &mut disk.dedicated_io_thread,
                    preferred.preferred_disk_dedicated_io_thread.as_ref(),
                );
            }
        }
        if let Some(cdrom) = disk.cdrom.as_mut() {
            fill_text(&mut cdrom.bus, preferred.preferred_cdrom_bus.as_ref());
        }
        if let Some(lun) = disk.lun.as_mut() {
            fill_text(&mut lun.bus, preferred.preferred_lun_bus.as_ref());
        }
    }
    for iface in &mut devices.interfaces {
        fill_text(&mut iface.model, preferred.preferred_interface_model.as_ref());
        let has_binding = iface.bridge.is_some()
            || iface.masquerade.is_some()
            || iface.sriov.is_some()
            || iface.slirp.is_some()
            || iface.passt.is_some()
            || iface.passt_binding.is_some()
            || iface.macvtap.is_some()
            || iface.binding.is_some();
        let on_pod_network = spec.networks.iter().any(|n| n.name == iface.name && n.pod.is_some());
        if !has_binding && on_pod_network {
            iface.masquerade = preferred.preferred_interface_masquerade;
        }
    }
    for input in &mut devices.inputs {
        fill_text(&mut input.bus, preferred.preferred_input_bus.as_ref());
        if input.input_type.is_empty()
            && let Some(kind) = preferred.preferred_input_type.as_ref()
        {
            input.input_type.clone_from(kind);
        }
    }
    for panic in &mut devices.panic_devices {
        fill(&mut panic.model, preferred.preferred_panic_device_model.as_ref());
    }
}

fn apply_features(preferred: &FeaturePreferences, features: &mut Features) {
    if let Some(acpi) = &preferred.preferred_acpi {
        features.acpi = Some(acpi.clone());
    }
    fill(&mut features.apic, preferred.preferred_apic.as_ref());
    fill(&mut features.kvm, preferred.preferred_kvm.as_ref());
    fill(&mut features.pvspinlock, preferred.preferred_pvspinlock.as_ref());
    fill(&mut features.smm, preferred.preferred_smm.as_ref());
    if let Some(wanted) = &preferred.preferred_hyperv {
        let current = features.hyperv.get_or_insert_with(FeatureHyperv::default);
        fill(&mut current.evmcs, wanted.evmcs.as_ref());
        fill(&mut current.frequencies, wanted.frequencies.as_ref());
        fill(&mut current.ipi, wanted.ipi.as_ref());
        fill(&mut current.reenlightenment, wanted.reenlightenment.as_ref());
        fill(&mut current.relaxed, wanted.relaxed.as_ref());
        fill(&mut current.reset, wanted.reset.as_ref());
        fill(&mut current.runtime, wanted.runtime.as_ref());
        fill(&mut current.spinlocks, wanted.spinlocks.as_ref());
        fill(&mut current.synic, wanted.synic.as_ref());
        fill(&mut current.synictimer, wanted.synictimer.as_ref());
        fill(&mut current.tlbflush, wanted.tlbflush.as_ref());
        fill(&mut current.vapic, wanted.vapic.as_ref());
        fill(&mut current.vpindex, wanted.vpindex.as_ref());
        fill(&mut current.vendorid, wanted.vendorid.as_ref());
    }
}

fn apply_firmware(preferred: &FirmwarePreferences, firmware: &mut Firmware) {
    let bootloader = firmware.bootloader.get_or_insert_with(Bootloader::default);
    let chosen = |b: &Bootloader| b.bios.is_some() || b.efi.is_some();
    if preferred.preferred_use_bios == Some(true) && !chosen(bootloader) {
        bootloader.bios = Some(Bios::default());
    }
    if let Some(bios) = bootloader.bios.as_mut() {
        fill(&mut bios.use_serial, preferred.preferred_use_bios_serial.as_ref());
    }
    if let Some(efi) = preferred.preferred_efi.as_ref() {
        if !chosen(bootloader) {
            bootloader.efi = Some(efi.clone());
        }
        return;
    }
    if preferred.preferred_use_efi == Some(true) && !chosen(bootloader) {
        bootloader.efi = Some(Efi::default());
    }
    if let Some(efi) = bootloader.efi.as_mut() {
        fill(&mut efi.secure_boot, preferred.preferred_use_secure_boot.as_ref());
    }
}
