//! Admission validation of VMIs and VMs, as upstream's admitters do it
//! (`pkg/virt-api/webhooks/validating-webhook/admitters/vmi-create-admitter.go`, `vms-admitter.go`
//! and the network admitter): each rule returns causes with upstream's field path and message,
//! which virt-api's validating webhooks return as a 422.
//! Pure: the cluster configuration (feature gates, permitted bindings) comes in as an argument.

mod cpu;
mod data_volume_templates;
mod devices;
mod guest;
mod guest_devices;
mod hyperv;
mod interfaces;
mod memory_hotplug;
mod scheduling;
mod structure;
mod volumes;

pub use data_volume_templates::check_namespaces as check_data_volume_template_namespaces;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::v1::{ClusterConfig, VirtualMachine, VirtualMachineInstanceSpec};
/// The kind of a cause, as Kubernetes names it (`metav1.CauseType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CauseType {
    /// `FieldValueInvalid`.
    Invalid,
    /// `FieldValueRequired`.
    Required,
    /// `FieldValueNotFound`.
    NotFound,
    /// `FieldValueDuplicate`.
    Duplicate,
    /// `FieldValueNotSupported`.
    NotSupported,
    /// `FieldValueForbidden`.
    Forbidden,
}

impl CauseType {
    /// The string in `details.causes[].reason`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Invalid => "FieldValueInvalid",
            Self::Required => "FieldValueRequired",
            Self::NotFound => "FieldValueNotFound",
            Self::Duplicate => "FieldValueDuplicate",
            Self::NotSupported => "FieldValueNotSupported",
            Self::Forbidden => "FieldValueForbidden",
        }
    }
}

/// One reason a request is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cause {
    /// Its kind.
    pub kind: CauseType,
    /// The field path, e.g. `spec.domain.devices.disks[0].name`.
    pub field: String,
    /// Upstream's message.
    pub message: String,
}

pub(crate) fn cause(kind: CauseType, field: String, message: String) -> Cause {
    Cause { kind, field, message }
}

/// Validates a VMI spec found at `base` (`spec` for a VMI).
#[must_use]
pub fn validate_vmi_spec(spec: &VirtualMachineInstanceSpec, base: &str, config: &ClusterConfig) -> Vec<Cause> {
    validate_spec(spec, base, true, config)
}

fn validate_spec(spec: &VirtualMachineInstanceSpec, base: &str, is_vmi: bool, config: &ClusterConfig) -> Vec<Cause> {
    let mut causes = Vec::new();
    structure::check_disks_and_volumes(spec, base, is_vmi, &mut causes);
    structure::check_memory(spec, base, config, &mut causes);
    structure::check_names_and_strategies(spec, base, &mut causes);
    structure::check_networks(spec, base, &mut causes);
    cpu::check_cpu(spec, base, &mut causes);
    cpu::check_hugepages(spec, base, &mut causes);
    cpu::check_machine_and_arch(spec, base, config, &mut causes);
    volumes::check_volumes(spec, base, config, &mut causes);
    devices::check_devices(spec, base, config, &mut causes);
    guest::check_guest(spec, base, config, &mut causes);
    guest_devices::check_guest_devices(spec, base, config, &mut causes);
    interfaces::check_interfaces(spec, base, config, &mut causes);
    scheduling::check_scheduling(spec, &mut causes);
    hyperv::check_hyperv(spec, base, &mut causes);
    causes
}

/// The annotation that carries Ignition data.
const IGNITION: &str = "kubevirt.io/ignitiondata";
/// The annotation that asks for hook sidecars.
const HOOK_SIDECARS: &str = "hooks.kubevirt.io/hookSidecars";

/// Validates the annotations of a VMI's (or a VM template's) metadata found at `base`: the ones
/// that need a feature gate (rule 55).
#[must_use]
pub fn validate_metadata(meta: &ObjectMeta, base: &str, config: &ClusterConfig) -> Vec<Cause> {
    let mut causes = Vec::new();
    let annotations = meta.annotations.as_ref();
    let set = |key: &str| annotations.and_then(|a| a.get(key)).is_some_and(|v| !v.is_empty());
    if set(IGNITION) && !config.is_feature_gate_enabled("ExperimentalIgnitionSupport") {
        causes.push(cause(
            CauseType::Invalid,
            format!("{base}.annotations"),
            format!("ExperimentalIgnitionSupport feature gate is not enabled in kubevirt-config, invalid entry {base}.annotations.{IGNITION}"),
        ));
    }
    if set(HOOK_SIDECARS) && !config.is_feature_gate_enabled("Sidecar") {
        causes.push(cause(
            CauseType::Invalid,
            format!("{base}.annotations"),
            format!("sidecar feature gate is not enabled in kubevirt-config, invalid entry {base}.annotations.{HOOK_SIDECARS}"),
        ));
    }
    causes
}

/// Validates a VM: its run strategy and its template (as a VMI spec at `spec.template.spec`).
#[must_use]
pub fn validate_vm(vm: &VirtualMachine, config: &ClusterConfig) -> Vec<Cause> {
    let mut causes = Vec::new();
    match (&vm.spec.running, &vm.spec.run_strategy) {
        (Some(_), Some(_)) => causes.push(cause(
            CauseType::Invalid,
            "spec.running".to_owned(),
            "Running and RunStrategy are mutually exclusive".to_owned(),
        )),
        (None, None) => causes.push(cause(
            CauseType::Required,
            "spec.running".to_owned(),
            "One of Running or RunStrategy must be specified".to_owned(),
        )),
        (None, Some(strategy)) if strategy.parse::<crate::v1::RunStrategy>().is_err() => causes.push(cause(
            CauseType::Invalid,
            "spec.runStrategy".to_owned(),
            format!("Invalid RunStrategy ({strategy})"),
        )),
        _ => {}
    }
    match &vm.spec.template.spec {
        None => causes.push(cause(
            CauseType::Required,
            "spec.template".to_owned(),
            "missing virtual machine template.".to_owned(),
        )),
        Some(spec) => {
            causes.extend(validate_spec(spec, "spec.template.spec", false, config));
            memory_hotplug::check_memory_hotplug(spec, "spec.template.spec", &mut causes);
        }
    }
    data_volume_templates::check(vm, &mut causes);
    causes
}
