//! Local mode's input: a VMI (or a VM's template, with the instance type and preference given
//! with `--with`) from a manifest file, given the UID the API server would have given it, and the
//! rendering context this machine offers (the domain type, and containerDisk formats read from
//! the local image store).

use std::path::{Path, PathBuf};

use kubevirt_api::instancetype::{self, FindError, ObjectSet};
use kubevirt_api::v1::{VirtualMachine, VirtualMachineInstance};
use kubevirt_api::{Manifest, ManifestError};

use crate::domain::{ConvertContext, DomainType};
use crate::host_cpus::{self, HostCpusError};
use crate::image_store::{ImageStore, image_format};

/// Loads the VMI (or the VM's template) from `path`, with a UID. A VM's instance type and
/// preference are taken from the manifests in `with` and applied as virt-controller applies them.
///
/// # Errors
/// [`kubevirt_api::ManifestError`] naming the file and the field.
pub fn load_vmi(path: &Path, with: &[PathBuf]) -> Result<VirtualMachineInstance, ManifestError> {
    let mut objects = ObjectSet::default();
    for file in with {
        objects.add_file(file)?;
    }
    let manifest = Manifest::from_path(path)?;
    // A VM's own refused fields (volume migration, its DRA claims, ...) are refused here, the
    // VMI's in rendering (a `dataVolume` volume among them: local mode has no CDI).
    if let Manifest::Vm(vm) = &manifest
        && let Some(first) = kubevirt_api::support::vm(vm).into_iter().next()
    {
        return Err(ManifestError::InvalidField {
            path: path.to_owned(),
            message: first.message(),
            field: first.field,
        });
    }
    let mut vmi = match manifest {
        Manifest::Vm(vm) if vm.spec.instancetype.is_some() || vm.spec.preference.is_some() => {
            with_instancetypes(&vm, &objects, path)?
        }
        _ if !with.is_empty() => {
            return Err(ManifestError::InvalidField {
                path: path.to_owned(),
                field: "spec.instancetype".to_owned(),
                message: "--with is for a VirtualMachine that names an instance type or a preference".to_owned(),
            });
        }
        manifest => manifest.into_vmi(path)?,
    };
    refuse_persistent_state(&vmi, path)?;
    ensure_uid(&mut vmi);
    Ok(vmi)
}

/// A persistent TPM or persistent EFI keeps its state on VM state storage, a claim
/// virt-controller makes in a cluster; a local run has none, and would lose the state silently.
fn refuse_persistent_state(vmi: &VirtualMachineInstance, path: &Path) -> Result<(), ManifestError> {
    use kubevirt_api::persistent_state::{has_persistent_efi, has_persistent_tpm};
    let field = if has_persistent_tpm(&vmi.spec) {
        "spec.domain.devices.tpm.persistent"
    } else if has_persistent_efi(&vmi.spec) {
        "spec.domain.firmware.bootloader.efi.persistent"
    } else {
        return Ok(());
    };
    Err(ManifestError::InvalidField {
        path: path.to_owned(),
        field: field.to_owned(),
        message: "persistent state needs VM state storage, a claim virt-controller makes in a cluster; a local launcher has none"
            .to_owned(),
    })
}

/// The VMI of a VM that names an instance type or preference, found among `objects`.
fn with_instancetypes(
    vm: &VirtualMachine,
    objects: &ObjectSet,
    path: &Path,
) -> Result<VirtualMachineInstance, ManifestError> {
    let invalid = |field: &str, message: String| ManifestError::InvalidField {
        path: path.to_owned(),
        field: field.to_owned(),
        message,
    };
    for (field, infers) in [
        (
            "spec.instancetype.inferFromVolume",
            vm.spec.instancetype.as_ref().and_then(|m| m.infer_from_volume.as_ref()),
        ),
        (
            "spec.preference.inferFromVolume",
            vm.spec.preference.as_ref().and_then(|m| m.infer_from_volume.as_ref()),
        ),
    ] {
        if infers.is_some() {
            return Err(invalid(
                field,
                "inferring from a volume needs the cluster's volumes; name the object instead".to_owned(),
            ));
        }
    }
    let namespace = vm.metadata.namespace.as_deref().unwrap_or("default");
    let status = vm.status.as_ref();
    let not_found =
        |field: &'static str| move |e: FindError| invalid(field, format!("{e}; give its manifest with --with"));
    let instancetype = futures::executor::block_on(instancetype::find_instancetype(
        objects,
        namespace,
        vm.spec.instancetype.as_ref(),
        status.and_then(|s| s.instancetype_ref.as_ref()),
    ))
    .map_err(not_found("spec.instancetype"))?;
    let preference = futures::executor::block_on(instancetype::find_preference(
        objects,
        namespace,
        vm.spec.preference.as_ref(),
        status.and_then(|s| s.preference_ref.as_ref()),
    ))
    .map_err(not_found("spec.preference"))?;
    // What virt-api's validating webhook checks before a VM with these is stored.
    if let Some(message) = instancetype
        .as_ref()
        .and_then(|it| instancetype::spread_error(it.spec.cpu.guest, preference.as_ref().map(|f| &f.spec)))
    {
        return Err(invalid("instancetype.spec.cpu.guest", message));
    }
    if let (Some(preference), Some(template)) = (preference.as_ref(), vm.spec.template.spec.as_ref())
        && let Some(failure) =
            instancetype::check_requirements(instancetype.as_ref().map(|f| &f.spec), &preference.spec, template)
    {
        return Err(invalid(&failure.field, failure.message));
    }
    let mut vmi = Manifest::Vm(Box::new(vm.clone())).into_vmi(path)?;
    // As virt-controller: the default disks and pod interface around the preference.
    instancetype::add_defaults_for_preference(
        preference.as_ref().map(|f| &f.spec),
        &mut vmi.spec,
        &kubevirt_api::v1::ClusterConfig::default(),
    );
    let mut annotations = vmi.metadata.annotations.take().unwrap_or_default();
    instancetype::name_annotations(
        vm,
        instancetype.as_ref().map(|f| &f.kind),
        preference.as_ref().map(|f| &f.kind),
        &mut annotations,
    );
    let preference_spec = preference.as_ref().map(|f| &f.spec);
    instancetype::apply(
        instancetype.as_ref().map(|f| &f.spec),
        preference_spec,
        &mut vmi.spec,
        &mut annotations,
        "spec.template.spec",
    )
    .map_err(|conflicts| {
        let field = conflicts.0.first().map(|c| c.field.clone()).unwrap_or_default();
        invalid(&field, conflicts.to_string())
    })?;
    if let Some(preference) = preference_spec {
        instancetype::apply_architecture(preference, &mut vmi.spec);
    }
    vmi.metadata.annotations = Some(annotations);
    Ok(vmi)
}

/// Gives a VMI read from a file the UID the API server would have given it.
fn ensure_uid(vmi: &mut VirtualMachineInstance) {
    if vmi.metadata.uid.as_deref().is_none_or(str::is_empty) {
        let uid = std::fs::read_to_string("/proc/sys/kernel/random/uuid").map(|u| u.trim().to_owned());
        vmi.metadata.uid = Some(uid.unwrap_or_else(|_| "00000000-0000-4000-8000-000000000000".to_owned()));
    }
}

/// The context for rendering on this machine: `domain_type`, containerDisk formats read from
/// the local image store (an image that is not there is assumed raw, with a warning), and for
/// dedicated CPUs this process's CPUs.
pub fn local_context(
    vmi: &VirtualMachineInstance,
    domain_type: DomainType,
    store: &ImageStore,
) -> Result<ConvertContext, HostCpusError> {
    let mut ctx = ConvertContext {
        domain_type,
        host_cpus: host_cpus::for_vmi(vmi)?,
        ..ConvertContext::default()
    };
    for volume in &vmi.spec.volumes {
        if let Some(disk) = &volume.container_disk {
            let format = match store.container_disk(&disk.image, disk.path.as_deref()) {
                Ok(file) => image_format(&file).unwrap_or("raw"),
                Err(e) => {
                    eprintln!(
                        "virt-launcher: warning: volume {}: {e}; assuming a raw image",
                        volume.name
                    );
                    "raw"
                }
            };
            ctx.container_disk_formats
                .insert(volume.name.clone(), format.to_owned());
        }
    }
    Ok(ctx)
}
