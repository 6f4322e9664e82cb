//! `spec.domain.features`: hypervisor features (ACPI, APIC, SMM, Hyper-V enlightenments, KVM).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `spec.domain.features`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Features {
    /// ACPI; on unless `enabled: false`, even when the key is absent.
    pub acpi: Option<FeatureState>,
    /// APIC.
    pub apic: Option<FeatureApic>,
    /// Hyper-V enlightenments.
    pub hyperv: Option<FeatureHyperv>,
    /// Pass every Hyper-V enlightenment the host supports.
    pub hyperv_passthrough: Option<HypervPassthrough>,
    /// System Management Mode; required by Secure Boot.
    pub smm: Option<FeatureState>,
    /// KVM-specific features.
    pub kvm: Option<FeatureKvm>,
    /// Paravirtual spinlocks.
    pub pvspinlock: Option<FeatureState>,
}

/// A feature that is on unless `enabled: false`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FeatureState {
    /// Whether the feature is on; true when unset.
    pub enabled: Option<bool>,
}

impl FeatureState {
    /// Upstream's reading: a present feature is on unless it says `enabled: false`.
    #[must_use]
    pub fn is_enabled(&self) -> bool {
        self.enabled.unwrap_or(true)
    }
}

/// `spec.domain.features.apic`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FeatureApic {
    /// Whether the APIC is on; true when unset.
    pub enabled: Option<bool>,
    /// Guest-visible end-of-interrupt.
    pub end_of_interrupt: Option<bool>,
}

/// `spec.domain.features.hyperv`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FeatureHyperv {
    /// Relaxed timing.
    pub relaxed: Option<FeatureState>,
    /// Virtual APIC.
    pub vapic: Option<FeatureState>,
    /// Spinlock retries.
    pub spinlocks: Option<FeatureSpinlocks>,
    /// Virtual processor index.
    pub vpindex: Option<FeatureState>,
    /// Processor time accounting.
    pub runtime: Option<FeatureState>,
    /// Synthetic interrupt controller.
    pub synic: Option<FeatureState>,
    /// Synthetic timers.
    pub synictimer: Option<SyNicTimer>,
    /// Hyper-V reset.
    pub reset: Option<FeatureState>,
    /// Hypervisor vendor id.
    pub vendorid: Option<FeatureVendorId>,
    /// TSC and APIC frequency MSRs.
    pub frequencies: Option<FeatureState>,
    /// Re-enlightenment on migration.
    pub reenlightenment: Option<FeatureState>,
    /// Paravirtual TLB flush.
    pub tlbflush: Option<TlbFlush>,
    /// Paravirtual IPI.
    pub ipi: Option<FeatureState>,
    /// Enlightened VMCS.
    pub evmcs: Option<FeatureState>,
}

/// `spec.domain.features.hyperv.tlbflush`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TlbFlush {
    /// Whether the feature is on; true when unset.
    pub enabled: Option<bool>,
    /// Direct TLB flush (needs `evmcs` in the guest).
    pub direct: Option<FeatureState>,
    /// Extended TLB flush hypercalls.
    pub extended: Option<FeatureState>,
}

impl TlbFlush {
    /// Upstream's reading: present means on unless `enabled: false`.
    #[must_use]
    pub fn is_enabled(&self) -> bool {
        self.enabled.unwrap_or(true)
    }
}

/// `spec.domain.features.hyperv.spinlocks`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FeatureSpinlocks {
    /// Whether the feature is on; true when unset.
    pub enabled: Option<bool>,
    /// Retries before notifying the hypervisor; upstream defaults to 4096.
    #[serde(rename = "spinlocks")]
    pub retries: Option<u32>,
}

/// `spec.domain.features.hyperv.synictimer`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SyNicTimer {
    /// Whether the feature is on; true when unset.
    pub enabled: Option<bool>,
    /// Direct-mode synthetic timers.
    pub direct: Option<FeatureState>,
}

/// `spec.domain.features.hyperv.vendorid`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FeatureVendorId {
    /// Whether the feature is on; true when unset.
    pub enabled: Option<bool>,
    /// Vendor id, at most 12 characters.
    pub vendorid: Option<String>,
}

/// `spec.domain.features.hypervPassthrough`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HypervPassthrough {
    /// Whether passthrough is on.
    pub enabled: Option<bool>,
}

/// `spec.domain.features.kvm`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FeatureKvm {
    /// Hide the KVM signature from the guest.
    pub hidden: Option<bool>,
}
