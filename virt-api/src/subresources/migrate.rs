//! `PUT .../virtualmachines/{name}/migrate`: a `VirtualMachineInstanceMigration` for the VM's
//! running VMI, as upstream creates it (`generateName: kubevirt-migrate-vm-`); the migration
//! webhooks then decide whether it may run.

use kubevirt_api::v1::{
    MigrateOptions, VirtualMachineInstanceMigration, VirtualMachineInstanceMigrationSpec, VirtualMachineInstancePhase,
    is_dry_run,
};

use super::status::{ApiStatus, VM, VMI};
use crate::backends::SubresourceCluster;

/// The prefix of the migrations this subresource creates.
pub const GENERATE_NAME: &str = "kubevirt-migrate-vm-";

/// Creates the migration of the VM `ns/name`'s VMI.
pub(crate) async fn migrate<C: SubresourceCluster>(
    cluster: &C,
    ns: &str,
    name: &str,
    options: &MigrateOptions,
) -> Result<(), ApiStatus> {
    cluster
        .get_vm(ns, name)
        .await
        .map_err(|e| ApiStatus::internal(format!("unable to retrieve vm [{name}]: {e}")))?
        .ok_or_else(|| ApiStatus::not_found(VM, name))?;
    let vmi = cluster
        .get_vmi(ns, name)
        .await
        .map_err(|e| ApiStatus::internal(&e))?
        .ok_or_else(|| ApiStatus::not_found(VMI, name))?;
    if vmi.status.as_ref().and_then(|s| s.phase) != Some(VirtualMachineInstancePhase::Running) {
        return Err(ApiStatus::conflict(VM, name, "VM is not running"));
    }
    let mut migration = VirtualMachineInstanceMigration::new(
        "",
        VirtualMachineInstanceMigrationSpec {
            vmi_name: Some(name.to_owned()),
            added_node_selector: options.added_node_selector.clone(),
            ..VirtualMachineInstanceMigrationSpec::default()
        },
    );
    migration.metadata.name = None;
    migration.metadata.generate_name = Some(GENERATE_NAME.to_owned());
    migration.metadata.namespace = Some(ns.to_owned());
    cluster
        .create_migration(ns, &migration, is_dry_run(&options.dry_run))
        .await
        .map_err(|e| ApiStatus::internal(&e))?;
    tracing::info!(namespace = ns, name, "migration requested");
    Ok(())
}
