//! What the domain does when the guest reboots or crashes: `spec.domain.rebootPolicy` and the
//! panic devices of `spec.domain.devices.panicDevices`.

use kubevirt_api::v1::{PANIC_DEVICE_MODELS, UNSUPPORTED_PANIC_DEVICE_MODEL, VirtualMachineInstance};

use super::ConvertError;
use crate::model::{Domain, Panic};

/// Whether libvirt 9.0 renders the panic device `model` on x86_64: upstream's models but the
/// `pvpanic` PCI device, which is refused before conversion (`kubevirt_api::support`).
fn is_rendered_panic_model(model: &str) -> bool {
    PANIC_DEVICE_MODELS.contains(&model) && model != UNSUPPORTED_PANIC_DEVICE_MODEL
}

/// Sets `<on_reboot>` from the reboot policy and adds the panic devices; a Hyper-V panic device
/// keeps a crashed guest as it is (`<on_crash>preserve</on_crash>`), as upstream does.
pub fn apply(vmi: &VirtualMachineInstance, domain: &mut Domain) -> Result<(), ConvertError> {
    domain.on_reboot = match vmi.spec.domain.reboot_policy.as_deref() {
        None => None,
        Some("Terminate") => Some("destroy".to_owned()),
        Some("Reboot") => Some("restart".to_owned()),
        Some(other) => {
            return Err(ConvertError::invalid(
                "spec.domain.rebootPolicy",
                format!("reboot policy {other} is not Reboot or Terminate"),
            ));
        }
    };
    for (i, device) in vmi.spec.domain.devices.panic_devices.iter().enumerate() {
        let model = device.model.as_deref().filter(|m| !m.is_empty());
        if let Some(model) = model.filter(|m| !is_rendered_panic_model(m)) {
            return Err(ConvertError::invalid(
                format!("spec.domain.devices.panicDevices[{i}].model"),
                format!("invalid PanicDeviceModel({model})"),
            ));
        }
        if model == Some("hyperv") {
            domain.on_crash = Some("preserve".to_owned());
        }
        domain.devices.panic.push(Panic {
            model: model.map(str::to_owned),
        });
    }
    Ok(())
}
