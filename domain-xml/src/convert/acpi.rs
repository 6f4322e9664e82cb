//! `spec.domain.firmware.acpi`: SLIC and MSDM tables (Windows activation) from Secret volumes.
//!
//! Each names a Secret volume whose `slic.bin` / `msdm.bin` holds the table. SLIC is libvirt's
//! `<os><acpi><table type='slic'>`. libvirt 9.0 knows no MSDM table type, so the MSDM table is
//! handed to QEMU as `-acpitable sig=MSDM,file=...`, the argument newer libvirt writes for it.

use kubevirt_api::v1::VirtualMachineInstance;

use super::{ConvertContext, ConvertError};
use crate::model::{AcpiTable, AcpiTables, Domain, QemuArg, QemuCommandline};

/// The file of the Secret volume `volume_name` that holds the `kind` table.
fn table_file(
    vmi: &VirtualMachineInstance,
    ctx: &ConvertContext,
    volume_name: &str,
    kind: &str,
) -> Result<String, ConvertError> {
    let field = format!("spec.domain.firmware.acpi.{kind}NameRef");
    let volume = vmi
        .spec
        .volumes
        .iter()
        .find(|v| v.name == volume_name)
        .ok_or_else(|| ConvertError::invalid(&field, format!("Firmware's volume for {kind} was not found")))?;
    if volume.secret.is_none() {
        return Err(ConvertError::invalid(
            &field,
            format!("Firmware's volume type is unsupported for {kind}"),
        ));
    }
    Ok(format!("{}/{kind}.bin", ctx.layout.secret_dir(volume_name)))
}

/// Adds the tables `spec.domain.firmware.acpi` names.
pub fn apply(vmi: &VirtualMachineInstance, ctx: &ConvertContext, domain: &mut Domain) -> Result<(), ConvertError> {
    let Some(acpi) = vmi.spec.domain.firmware.as_ref().and_then(|f| f.acpi.as_ref()) else {
        return Ok(());
    };
    let named = |r: &Option<String>| r.clone().filter(|n| !n.is_empty());
    let (slic, msdm) = (named(&acpi.slic_name_ref), named(&acpi.msdm_name_ref));
    if slic.is_none() && msdm.is_none() {
        return Err(ConvertError::invalid(
            "spec.domain.firmware.acpi",
            "no ACPI tables were set, expecting at least one",
        ));
    }
    if let Some(volume) = slic {
        domain.os.acpi = Some(AcpiTables {
            table: vec![AcpiTable {
                table_type: "slic".to_owned(),
                path: table_file(vmi, ctx, &volume, "slic")?,
            }],
        });
    }
    if let Some(volume) = msdm {
        let file = table_file(vmi, ctx, &volume, "msdm")?;
        let commandline = domain.qemu_commandline.get_or_insert_with(QemuCommandline::default);
        commandline.arg.extend([
            QemuArg {
                value: "-acpitable".to_owned(),
            },
            QemuArg {
                value: format!("sig=MSDM,file={file}"),
            },
        ]);
    }
    Ok(())
}
