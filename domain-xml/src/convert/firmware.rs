//! `<os>` (machine, BIOS or EFI, direct kernel boot, boot menu), `<sysinfo>` and `<metadata>`.

use std::path::Path;

use kubevirt_api::v1::{FeatureState, VirtualMachineInstance};

use super::{ConvertContext, ConvertError};
use crate::model::{
    BootMenu, Domain, GracePeriodMetadata, KUBEVIRT_NAMESPACE, KubeVirtMetadata, Loader, Metadata, Nvram, Os, OsBios,
    OsType, Smbios, Sysinfo, SysinfoBlock, SysinfoEntry,
};

/// Upstream's default machine type on x86_64.
pub const DEFAULT_MACHINE: &str = "q35";

/// Sets `<os>`.
pub fn apply_os(vmi: &VirtualMachineInstance, ctx: &ConvertContext, domain: &mut Domain) -> Result<(), ConvertError> {
    let spec = &vmi.spec;
    let machine = spec
        .domain
        .machine
        .as_ref()
        .and_then(|m| m.machine_type.as_deref())
        .filter(|m| !m.is_empty());
    let mut os = Os {
        os_type: OsType {
            arch: Some("x86_64".to_owned()),
            machine: Some(machine.unwrap_or(DEFAULT_MACHINE).to_owned()),
            value: "hvm".to_owned(),
        },
        smbios: Some(Smbios {
            mode: "sysinfo".to_owned(),
        }),
        ..Os::default()
    };
    let firmware = spec.domain.firmware.as_ref();
    let bootloader = firmware.and_then(|f| f.bootloader.as_ref());
    if let Some(bootloader) = bootloader {
        match (&bootloader.bios, &bootloader.efi) {
            (Some(_), Some(_)) => {
                return Err(ConvertError::invalid(
                    "spec.domain.firmware.bootloader",
                    "EFI and BIOS bootloaders are mutually exclusive",
                ));
            }
            (Some(bios), None) => {
                if bios.use_serial == Some(true) {
                    os.bios = Some(OsBios {
                        useserial: Some("yes".to_owned()),
                    });
                }
            }
            (None, Some(efi)) => apply_efi(vmi, efi.secure_boot.unwrap_or(true), ctx, &mut os)?,
            (None, None) => {}
        }
    }
    if let Some(kernel_boot) = firmware.and_then(|f| f.kernel_boot.as_ref()) {
        if let Some(container) = kernel_boot.container.as_ref() {
            os.kernel = container
                .kernel_path
                .as_deref()
                .map(|p| ctx.layout.kernel_boot_artifact(p));
            os.initrd = container
                .initrd_path
                .as_deref()
                .map(|p| ctx.layout.kernel_boot_artifact(p));
        }
        os.cmdline = kernel_boot.kernel_args.clone().filter(|a| !a.is_empty());
        if os.cmdline.is_some() && os.kernel.is_none() {
            return Err(ConvertError::invalid(
                "spec.domain.firmware.kernelBoot.kernelArgs",
                "kernel arguments need a kernel: set kernelBoot.container.kernelPath",
            ));
        }
    }
    if spec.start_strategy.as_deref() == Some("Paused") {
        os.bootmenu = Some(BootMenu {
            enable: "yes".to_owned(),
            timeout: Some(10_000),
        });
    }
    domain.os = os;
    Ok(())
}

fn apply_efi(
    vmi: &VirtualMachineInstance,
    secure_boot: bool,
    ctx: &ConvertContext,
    os: &mut Os,
) -> Result<(), ConvertError> {
    let smm_on = vmi
        .spec
        .domain
        .features
        .as_ref()
        .and_then(|f| f.smm.as_ref())
        .is_some_and(FeatureState::is_enabled);
    if secure_boot && !smm_on {
        return Err(ConvertError::invalid(
            "spec.domain.firmware.bootloader.efi.secureBoot",
            "SMM feature must be enabled (spec.domain.features.smm) when EFI secure boot is enabled",
        ));
    }
    let (code, vars) = if secure_boot {
        ("OVMF_CODE.secboot.fd", "OVMF_VARS.secboot.fd")
    } else {
        ("OVMF_CODE.fd", "OVMF_VARS.fd")
    };
    let name = vmi.metadata.name.as_deref().unwrap_or_default();
    os.loader = Some(Loader {
        readonly: Some("yes".to_owned()),
        secure: Some(if secure_boot { "yes" } else { "no" }.to_owned()),
        loader_type: Some("pflash".to_owned()),
        path: Some(join(&ctx.layout.ovmf_dir, code)),
    });
    os.nvram = Some(Nvram {
        template: Some(join(&ctx.layout.ovmf_dir, vars)),
        path: Some(join(&ctx.nvram_dir(), &format!("{name}_VARS.fd"))),
    });
    Ok(())
}

/// Sets `<sysinfo>`: system uuid and serial from `firmware`, the rest from the cluster's SMBIOS
/// configuration, and the chassis strings. Empty strings are left out (libvirt rejects them).
pub fn apply_sysinfo(vmi: &VirtualMachineInstance, ctx: &ConvertContext, domain: &mut Domain) {
    let firmware = vmi.spec.domain.firmware.as_ref();
    let smbios = &ctx.smbios;
    let system = [
        ("uuid", firmware.and_then(|f| f.uuid.as_deref())),
        ("serial", firmware.and_then(|f| f.serial.as_deref())),
        ("manufacturer", Some(smbios.manufacturer.as_str())),
        ("family", Some(smbios.family.as_str())),
        ("product", Some(smbios.product.as_str())),
        ("sku", Some(smbios.sku.as_str())),
        ("version", Some(smbios.version.as_str())),
    ];
    let chassis = vmi.spec.domain.chassis.as_ref();
    let chassis = [
        ("manufacturer", chassis.and_then(|c| c.manufacturer.as_deref())),
        ("version", chassis.and_then(|c| c.version.as_deref())),
        ("serial", chassis.and_then(|c| c.serial.as_deref())),
        ("asset", chassis.and_then(|c| c.asset.as_deref())),
        ("sku", chassis.and_then(|c| c.sku.as_deref())),
    ];
    let block = |entries: &[(&str, Option<&str>)]| {
        let entry: Vec<SysinfoEntry> = entries
            .iter()
            .filter_map(|(name, value)| {
                value.filter(|v| !v.is_empty()).map(|v| SysinfoEntry {
                    name: (*name).to_owned(),
                    value: v.to_owned(),
                })
            })
            .collect();
        (!entry.is_empty()).then_some(SysinfoBlock { entry })
    };
    domain.sysinfo = Some(Sysinfo {
        sysinfo_type: "smbios".to_owned(),
        system: block(&system),
        chassis: block(&chassis),
    });
}

/// `<metadata>` with the VMI UID and its grace period, as upstream's metadata cache records them.
#[must_use]
pub fn metadata(vmi: &VirtualMachineInstance) -> Metadata {
    Metadata {
        kubevirt: Some(KubeVirtMetadata {
            xmlns: Some(KUBEVIRT_NAMESPACE.to_owned()),
            uid: Some(vmi.metadata.uid.clone().unwrap_or_default()),
            grace_period: Some(GracePeriodMetadata {
                deletion_grace_period_seconds: Some(vmi.termination_grace_period_seconds()),
            }),
        }),
    }
}

fn join(dir: &str, file: &str) -> String {
    Path::new(dir).join(file).to_string_lossy().into_owned()
}
