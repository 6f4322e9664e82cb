//! The per-type defaults upstream generates for its API structs (`SetObjectDefaults_*`): features
//! and timers that are present but say nothing are enabled, CD-ROMs are read-only with a closed
//! tray, a disk with no target is a plain disk, inputs are USB tablets, probes get their periods,
//! and the firmware gets a UUID.

use kubevirt_api::v1::{CdRomTarget, DiskTarget, FeatureState, Features, Firmware, Probe, VirtualMachineInstanceSpec};

fn enable(state: Option<&mut FeatureState>) {
    if let Some(state) = state
        && state.enabled.is_none()
    {
        state.enabled = Some(true);
    }
}

fn enable_flag(enabled: &mut Option<bool>) {
    if enabled.is_none() {
        *enabled = Some(true);
    }
}

fn set_feature_defaults(features: &mut Features) {
    enable(features.acpi.as_mut());
    enable(features.smm.as_mut());
    enable(features.pvspinlock.as_mut());
    if let Some(apic) = features.apic.as_mut() {
        enable_flag(&mut apic.enabled);
    }
    if let Some(h) = features.hyperv.as_mut() {
        for state in [
            &mut h.relaxed,
            &mut h.vapic,
            &mut h.vpindex,
            &mut h.runtime,
            &mut h.synic,
            &mut h.reset,
            &mut h.frequencies,
            &mut h.reenlightenment,
            &mut h.ipi,
            &mut h.evmcs,
        ] {
            enable(state.as_mut());
        }
        if let Some(spinlocks) = h.spinlocks.as_mut() {
            enable_flag(&mut spinlocks.enabled);
            if spinlocks.enabled == Some(true) && spinlocks.retries.is_none() {
                spinlocks.retries = Some(4096);
            }
        }
        if let Some(timer) = h.synictimer.as_mut() {
            enable_flag(&mut timer.enabled);
            enable(timer.direct.as_mut());
        }
        if let Some(tlbflush) = h.tlbflush.as_mut() {
            enable_flag(&mut tlbflush.enabled);
            enable(tlbflush.direct.as_mut());
            enable(tlbflush.extended.as_mut());
        }
        if let Some(vendor) = h.vendorid.as_mut() {
            enable_flag(&mut vendor.enabled);
        }
    }
}

fn set_probe_defaults(probe: Option<&mut Probe>) {
    let Some(probe) = probe else { return };
    for (field, default) in [
        (&mut probe.timeout_seconds, 1),
        (&mut probe.period_seconds, 10),
        (&mut probe.success_threshold, 1),
        (&mut probe.failure_threshold, 3),
    ] {
        if field.is_none_or(|v| v < 1) {
            *field = Some(default);
        }
    }
}

/// Applies the generated per-type defaults to a VMI spec.
pub fn set_object_defaults(spec: &mut VirtualMachineInstanceSpec, new_uuid: &dyn Fn() -> String) {
    let domain = &mut spec.domain;
    let firmware = domain.firmware.get_or_insert_with(Firmware::default);
    if firmware.uuid.as_deref().is_none_or(str::is_empty) {
        firmware.uuid = Some(new_uuid());
    }
    set_feature_defaults(domain.features.get_or_insert_with(Features::default));
    if let Some(timer) = domain.clock.as_mut().and_then(|c| c.timer.as_mut()) {
        for present in [
            timer.hpet.as_mut().map(|t| &mut t.present),
            timer.pit.as_mut().map(|t| &mut t.present),
            timer.kvm.as_mut().map(|t| &mut t.present),
            timer.hyperv.as_mut().map(|t| &mut t.present),
            timer.rtc.as_mut().map(|t| &mut t.present),
        ]
        .into_iter()
        .flatten()
        {
            enable_flag(present);
        }
    }
    for disk in &mut domain.devices.disks {
        if disk.disk.is_none() && disk.cdrom.is_none() && disk.lun.is_none() {
            disk.disk = Some(DiskTarget::default());
        }
        if let Some(CdRomTarget { readonly, tray, .. }) = disk.cdrom.as_mut() {
            enable_flag(readonly);
            if tray.as_deref().is_none_or(str::is_empty) {
                *tray = Some("closed".to_owned());
            }
        }
    }
    for input in &mut domain.devices.inputs {
        if input.bus.as_deref().is_none_or(str::is_empty) {
            input.bus = Some("usb".to_owned());
        }
        if input.input_type.is_empty() {
            "tablet".clone_into(&mut input.input_type);
        }
    }
    set_probe_defaults(spec.readiness_probe.as_mut());
    set_probe_defaults(spec.liveness_probe.as_mut());
}
