//! `<clock>` and `<features>`: the platform the guest sees besides its devices.

use kubevirt_api::v1::{FeatureState, VirtualMachineInstance};

use super::ConvertError;
use crate::model::{
    Apic, Clock, ClockTimer, Domain, Empty, Features, Hyperv, KvmFeatures, Spinlocks, State, Stimer, VendorId,
};

/// Hyper-V spinlock retries when the VMI gives none (upstream's API default).
pub const DEFAULT_SPINLOCK_RETRIES: u32 = 4096;
const TICK_POLICIES: [&str; 4] = ["delay", "catchup", "merge", "discard"];

fn yes_no(present: Option<bool>) -> String {
    if present.unwrap_or(true) { "yes" } else { "no" }.to_owned()
}

fn tick_policy(field: &str, policy: Option<&String>) -> Result<Option<String>, ConvertError> {
    match policy.map(String::as_str) {
        None | Some("") => Ok(None),
        Some(p) if TICK_POLICIES.contains(&p) => Ok(Some(p.to_owned())),
        Some(p) => Err(ConvertError::invalid(
            field,
            format!("tick policy {p} is not one of {}", TICK_POLICIES.join(", ")),
        )),
    }
}

/// Sets `<clock>` when `spec.domain.clock` is given.
pub fn apply_clock(vmi: &VirtualMachineInstance, domain: &mut Domain) -> Result<(), ConvertError> {
    let Some(clock) = vmi.spec.domain.clock.as_ref() else {
        // A guest that needs a stable TSC gets its frequency pinned even without a clock section.
        if let Some(frequency) = tsc_frequency(vmi) {
            domain.clock = Some(Clock {
                offset: "utc".to_owned(),
                timer: vec![ClockTimer {
                    name: "tsc".to_owned(),
                    frequency: Some(frequency),
                    ..ClockTimer::default()
                }],
                ..Clock::default()
            });
        }
        return Ok(());
    };
    let mut out = match (&clock.utc, &clock.timezone) {
        (Some(_), Some(_)) => {
            return Err(ConvertError::invalid(
                "spec.domain.clock",
                "utc and timezone are mutually exclusive",
            ));
        }
        (Some(utc), None) => Clock {
            offset: "utc".to_owned(),
            adjustment: Some(utc.offset_seconds.map_or_else(|| "reset".to_owned(), |s| s.to_string())),
            ..Clock::default()
        },
        (None, Some(zone)) => Clock {
            offset: "timezone".to_owned(),
            timezone: Some(zone.clone()),
            ..Clock::default()
        },
        (None, None) => Clock {
            offset: "utc".to_owned(),
            ..Clock::default()
        },
    };
    if let Some(timer) = clock.timer.as_ref() {
        let base = "spec.domain.clock.timer";
        if let Some(rtc) = &timer.rtc {
            out.timer.push(ClockTimer {
                name: "rtc".to_owned(),
                tickpolicy: tick_policy(&format!("{base}.rtc.tickPolicy"), rtc.tick_policy.as_ref())?,
                present: Some(yes_no(rtc.present)),
                track: rtc.track.clone(),
                frequency: None,
            });
        }
        if let Some(pit) = &timer.pit {
            out.timer.push(ClockTimer {
                name: "pit".to_owned(),
                tickpolicy: tick_policy(&format!("{base}.pit.tickPolicy"), pit.tick_policy.as_ref())?,
                present: Some(yes_no(pit.present)),
                ..ClockTimer::default()
            });
        }
        if let Some(kvm) = &timer.kvm {
            out.timer.push(ClockTimer {
                name: "kvmclock".to_owned(),
                present: Some(yes_no(kvm.present)),
                ..ClockTimer::default()
            });
        }
        if let Some(hpet) = &timer.hpet {
            out.timer.push(ClockTimer {
                name: "hpet".to_owned(),
                tickpolicy: tick_policy(&format!("{base}.hpet.tickPolicy"), hpet.tick_policy.as_ref())?,
                present: Some(yes_no(hpet.present)),
                ..ClockTimer::default()
            });
        }
        if let Some(hyperv) = &timer.hyperv {
            out.timer.push(ClockTimer {
                name: "hypervclock".to_owned(),
                present: Some(yes_no(hyperv.present)),
                ..ClockTimer::default()
            });
        }
    }
    if let Some(frequency) = tsc_frequency(vmi) {
        out.timer.push(ClockTimer {
            name: "tsc".to_owned(),
            frequency: Some(frequency),
            ..ClockTimer::default()
        });
    }
    domain.clock = Some(out);
    Ok(())
}

/// The TSC frequency to pin, when the guest needs a stable one (invtsc or Hyper-V
/// re-enlightenment) and virt-controller recorded it in `status.topologyHints`.
fn tsc_frequency(vmi: &VirtualMachineInstance) -> Option<i64> {
    let frequency = vmi.status.as_ref()?.topology_hints.as_ref()?.tsc_frequency?;
    let domain = &vmi.spec.domain;
    let invtsc = domain.cpu.as_ref().is_some_and(|c| {
        c.features
            .iter()
            .any(|f| f.name == "invtsc" && matches!(f.policy.as_deref(), None | Some("" | "require" | "force")))
    });
    let reenlightenment = domain
        .features
        .as_ref()
        .and_then(|f| f.hyperv.as_ref())
        .and_then(|h| h.reenlightenment.as_ref())
        .is_some_and(FeatureState::is_enabled);
    (invtsc || reenlightenment).then_some(frequency)
}

fn state(feature: Option<&FeatureState>) -> Option<State> {
    feature.map(|f| State::on_off(f.is_enabled()))
}

/// Sets `<features>` when `spec.domain.features` is given. ACPI is on unless disabled, even when
/// the key is absent, as upstream does.
pub fn apply_features(vmi: &VirtualMachineInstance, domain: &mut Domain) -> Result<(), ConvertError> {
    let Some(features) = vmi.spec.domain.features.as_ref() else {
        return Ok(());
    };
    let mut out = Features {
        acpi: features
            .acpi
            .as_ref()
            .is_none_or(FeatureState::is_enabled)
            .then_some(Empty {}),
        ..Features::default()
    };
    if let Some(apic) = features.apic.as_ref().filter(|a| a.enabled.unwrap_or(true)) {
        out.apic = Some(Apic {
            eoi: apic.end_of_interrupt.map(|e| if e { "on" } else { "off" }.to_owned()),
        });
    }
    if features.hyperv.is_some()
        && features
            .hyperv_passthrough
            .as_ref()
            .is_some_and(|p| p.enabled == Some(true))
    {
        return Err(ConvertError::invalid(
            "spec.domain.features.hypervPassthrough",
            "hyperv and hypervPassthrough are mutually exclusive",
        ));
    }
    if features
        .hyperv_passthrough
        .as_ref()
        .is_some_and(|p| p.enabled == Some(true))
    {
        out.hyperv = Some(Hyperv {
            mode: Some("passthrough".to_owned()),
            ..Hyperv::default()
        });
    }
    if let Some(h) = features.hyperv.as_ref() {
        if let Some(vendor) = h
            .vendorid
            .as_ref()
            .and_then(|v| v.vendorid.as_ref())
            .filter(|v| v.len() > 12)
        {
            return Err(ConvertError::invalid(
                "spec.domain.features.hyperv.vendorid.vendorid",
                format!("vendor id {vendor:?} is longer than 12 characters"),
            ));
        }
        out.hyperv = Some(Hyperv {
            mode: None,
            relaxed: state(h.relaxed.as_ref()),
            vapic: state(h.vapic.as_ref()),
            spinlocks: h.spinlocks.as_ref().map(|s| {
                let on = s.enabled.unwrap_or(true);
                Spinlocks {
                    state: State::on_off(on).state,
                    retries: on.then(|| s.retries.unwrap_or(DEFAULT_SPINLOCK_RETRIES)),
                }
            }),
            vpindex: state(h.vpindex.as_ref()),
            runtime: state(h.runtime.as_ref()),
            synic: state(h.synic.as_ref()),
            stimer: h.synictimer.as_ref().map(|t| Stimer {
                state: State::on_off(t.enabled.unwrap_or(true)).state,
                direct: state(t.direct.as_ref()),
            }),
            reset: state(h.reset.as_ref()),
            vendor_id: h.vendorid.as_ref().map(|v| VendorId {
                state: State::on_off(v.enabled.unwrap_or(true)).state,
                value: v.vendorid.clone().filter(|_| v.enabled.unwrap_or(true)),
            }),
            frequencies: state(h.frequencies.as_ref()),
            reenlightenment: state(h.reenlightenment.as_ref()),
            tlbflush: h.tlbflush.as_ref().map(|t| State::on_off(t.is_enabled())),
            ipi: state(h.ipi.as_ref()),
            evmcs: state(h.evmcs.as_ref()),
        });
    }
    if let Some(kvm) = features.kvm.as_ref() {
        out.kvm = Some(KvmFeatures {
            // Upstream always says whether the signature is hidden, off when `hidden` is unset.
            hidden: Some(State::on_off(kvm.hidden.unwrap_or(false))),
            hint_dedicated: None,
        });
    }
    out.pvspinlock = state(features.pvspinlock.as_ref());
    if features.smm.as_ref().is_some_and(FeatureState::is_enabled) {
        out.smm = Some(State::on_off(true));
    }
    out.vmport = Some(State::on_off(false));
    domain.features = Some(out);
    Ok(())
}
