//! A preference's `requirements`: the VM (or its instance type) must give at least this many vCPUs
//! and this much memory, and the architecture it names. Upstream's messages and field paths.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::topology::{PreferredTopology, SpreadAcross, spread};
use super::{VirtualMachineInstancetypeSpec, VirtualMachinePreferenceSpec};
use crate::v1::VirtualMachineInstanceSpec;
use crate::validation::{Cause, CauseType};

const CPU: &str = "spec.template.spec.domain.cpu";

fn cause(field: String, message: String) -> Cause {
    Cause {
        kind: CauseType::Invalid,
        field,
        message,
    }
}

fn bytes(q: &Quantity) -> u64 {
    crate::quantity::to_bytes(q).unwrap_or(0)
}

/// The first requirement the VM's template (with its instance type) does not meet, as upstream
/// checks them: CPU, then memory, then architecture.
#[must_use]
pub fn check_requirements(
    instancetype: Option<&VirtualMachineInstancetypeSpec>,
    preference: &VirtualMachinePreferenceSpec,
    template: &VirtualMachineInstanceSpec,
) -> Option<Cause> {
    let requirements = preference.requirements.as_ref()?;
    if let Some(cpu) = &requirements.cpu
        && let Some(failure) = check_cpu(instancetype, preference, template, cpu.guest)
    {
        return Some(failure);
    }
    if let Some(memory) = &requirements.memory {
        // As upstream, the cause names the instance type whenever there is one, even when the
        // VM's own guest memory is what fell short.
        let by_instancetype = instancetype.is_some();
        let provided = match (
            template.domain.memory.as_ref().and_then(|m| m.guest.as_ref()),
            instancetype,
        ) {
            (Some(guest), _) => guest.clone(),
            (None, Some(it)) => it.memory.guest.clone(),
            (None, None) => Quantity("0Mi".to_owned()),
        };
        if bytes(&provided) < bytes(&memory.guest) {
            return Some(if by_instancetype {
                cause(
                    "spec.instancetype".to_owned(),
                    format!(
                        "insufficient Memory resources of {} provided by instance type, preference requires {}",
                        provided.0, memory.guest.0
                    ),
                )
            } else {
                cause(
                    "spec.template.spec.domain.memory".to_owned(),
                    format!(
                        "insufficient Memory resources of {} provided by VirtualMachine, preference requires {}",
                        provided.0, memory.guest.0
                    ),
                )
            });
        }
    }
    if let Some(architecture) = requirements.architecture.as_deref() {
        let requested = template.architecture.as_deref().unwrap_or_default();
        if requested != architecture {
            return Some(cause(
                "spec.template.spec.architecture".to_owned(),
                format!("preference requires architecture {architecture} but {requested} is being requested"),
            ));
        }
    }
    None
}

fn check_cpu(
    instancetype: Option<&VirtualMachineInstancetypeSpec>,
    preference: &VirtualMachinePreferenceSpec,
    template: &VirtualMachineInstanceSpec,
    required: u32,
) -> Option<Cause> {
    if let Some(it) = instancetype {
        return (it.cpu.guest < required).then(|| {
            cause(
                "spec.instancetype".to_owned(),
                format!(
                    "insufficient CPU resources of {} vCPU provided by instance type, preference requires {required} vCPU",
                    it.cpu.guest
                ),
            )
        });
    }
    let Some(cpu) = template.domain.cpu.as_ref() else {
        return Some(cause(
            CPU.to_owned(),
            format!("no CPU resources provided by VirtualMachine, preference requires {required} vCPU"),
        ));
    };
    let value = |v: Option<u32>| v.unwrap_or(0);
    let (sockets, cores, threads) = (value(cpu.sockets), value(cpu.cores), value(cpu.threads));
    let (provided, fields, described): (u32, Vec<&str>, String) = match PreferredTopology::of(Some(preference)) {
        PreferredTopology::Threads => (threads, vec!["threads"], "threads".to_owned()),
        PreferredTopology::Cores => (cores, vec!["cores"], "cores".to_owned()),
        PreferredTopology::Sockets => (sockets, vec!["sockets"], "sockets".to_owned()),
        PreferredTopology::Any => (
            cores.saturating_mul(sockets).saturating_mul(threads),
            vec!["cores", "sockets", "threads"],
            "cores, sockets and threads".to_owned(),
        ),
        PreferredTopology::Spread => {
            let (across, _) = spread(Some(preference));
            let (product, fields) = match across {
                SpreadAcross::SocketsCores => (sockets.saturating_mul(cores), vec!["sockets", "cores"]),
                SpreadAcross::CoresThreads => (cores.saturating_mul(threads), vec!["cores", "threads"]),
                SpreadAcross::SocketsCoresThreads => (
                    sockets.saturating_mul(cores).saturating_mul(threads),
                    vec!["sockets", "cores", "threads"],
                ),
            };
            (product, fields, across.as_str().to_owned())
        }
    };
    (provided < required).then(|| {
        cause(
            fields.iter().map(|f| format!("{CPU}.{f}")).collect::<Vec<_>>().join(", "),
            format!(
                "insufficient CPU resources of {provided} vCPU provided by VirtualMachine, preference requires {required} vCPU provided as {described}"
            ),
        )
    })
}
