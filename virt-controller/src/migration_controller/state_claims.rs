//! A migration of a VMI with VM state storage (persistent TPM or EFI), as upstream's: the target
//! pod gets a claim of its own (labelled `kubevirt.io/migrationName`; the source's, when that one
//! is `ReadWriteMany`), the migration's status names both, and once the migration is over the
//! state is handed over (the target's claim becomes the VMI's and the source's goes) or, when it
//! failed, the target's claim goes. QEMU carries the TPM's state and the EFI variables in the
//! migration stream, and the target writes them to its claim.

use kubevirt_api::clock::Clock;
use kubevirt_api::persistent_state::{self, CLAIM_LABEL, MIGRATION_NAME_LABEL};
use kubevirt_api::v1::{
    MigrationPhase, VirtualMachineInstance, VirtualMachineInstanceMigration, VirtualMachineInstanceMigrationStatus,
};
use serde_json::json;

use super::MigrationController;
use crate::cluster_api::{ApiError, ControllerApi};
use crate::reconcile_error::{ReconcileError, cannot};
use crate::state_claims::ClaimPurpose;
use crate::state_claims::make::make_state_claim;

/// The source's and the target's state claims of one migration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct StateClaims {
    /// The VMI's claim the source pod mounts.
    pub(super) source: String,
    /// The claim the target pod mounts.
    pub(super) target: String,
}

impl<A: ControllerApi, K: Clock> MigrationController<A, K> {
    /// The state claims of `migration` of `vmi`, the target's made when it is not there yet;
    /// `None` when the VMI keeps no state. The migration's status names them.
    pub(super) async fn state_claims(
        &self,
        migration: &mut VirtualMachineInstanceMigration,
        vmi: &VirtualMachineInstance,
    ) -> Result<Option<StateClaims>, ReconcileError> {
        if !persistent_state::needed(&vmi.spec) {
            return Ok(None);
        }
        let namespace = vmi.metadata.namespace.as_deref().unwrap_or("default");
        let vmi_name = vmi.metadata.name.as_deref().unwrap_or_default();
        let migration_name = migration.metadata.name.clone().unwrap_or_default();
        let not_there = |what: String| ReconcileError::new("prepare the VM state claims", ApiError::NotFound(what));
        let (source, source_info) = self
            .claims
            .state_claim(namespace, vmi_name)
            .ok_or_else(|| not_there(format!("the VM state claim of {namespace}/{vmi_name}")))?;
        let target = if source_info.access_modes.iter().any(|m| m == "ReadWriteMany") {
            source.name.clone()
        } else if let Some((target, _)) = self.claims.migration_target_claim(namespace, &migration_name) {
            target.name
        } else {
            let configured = self.pod_config(vmi).vm_state_storage_class;
            let purpose = ClaimPurpose::MigrationTarget(migration_name.clone());
            let created = make_state_claim(&self.api, vmi, configured.as_deref(), &purpose)
                .await
                .map_err(cannot("make the migration target's VM state claim"))?;
            let name = created.metadata.name.clone().unwrap_or_default();
            // The store has it before the watch does: the next pass must not make another.
            self.claims.on_event(&kube::runtime::watcher::Event::Apply(created));
            name
        };
        let claims = StateClaims {
            source: source.name,
            target,
        };
        let state = migration
            .status
            .get_or_insert_default()
            .migration_state
            .get_or_insert_default();
        if state.source_persistent_state_pvc_name.as_ref() != Some(&claims.source)
            || state.target_persistent_state_pvc_name.as_ref() != Some(&claims.target)
        {
            state.source_persistent_state_pvc_name = Some(claims.source.clone());
            state.target_persistent_state_pvc_name = Some(claims.target.clone());
            *migration = self
                .api
                .update_migration_status(migration)
                .await
                .map_err(cannot("name the VM state claims in the migration's status"))?;
        }
        Ok(Some(claims))
    }

    /// When `migration`'s status `status` says it is over: a migration that succeeded hands the
    /// state over (the target's claim is labelled the VMI's, then the source's is deleted); one
    /// that failed deletes the target's claim. Both are idempotent, and a shared
    /// (`ReadWriteMany`) claim stays.
    pub(super) async fn finish_state_claims(
        &self,
        migration: &VirtualMachineInstanceMigration,
        status: &VirtualMachineInstanceMigrationStatus,
    ) -> Result<(), ReconcileError> {
        let Some(state) = status.migration_state.as_ref() else {
            return Ok(());
        };
        let (Some(source), Some(target)) = (
            state.source_persistent_state_pvc_name.as_deref(),
            state.target_persistent_state_pvc_name.as_deref(),
        ) else {
            return Ok(());
        };
        if source == target {
            return Ok(());
        }
        let namespace = migration.metadata.namespace.as_deref().unwrap_or("default");
        let migration_name = migration.metadata.name.as_deref().unwrap_or_default();
        let vmi_name = migration.spec.vmi_name.as_deref().unwrap_or_default();
        match status.phase.unwrap_or_default() {
            MigrationPhase::Succeeded => {
                let unlabelled = self
                    .claims
                    .migration_target_claim(namespace, migration_name)
                    .is_some_and(|(claim, _)| claim.name == target);
                if unlabelled {
                    let labels = json!({CLAIM_LABEL: vmi_name, MIGRATION_NAME_LABEL: null});
                    self.api
                        .patch_pvc_labels(namespace, target, labels)
                        .await
                        .map_err(cannot("hand the VM state claim over to the target"))?;
                } else if self.claims.labelled_for(namespace, target).as_deref() != Some(vmi_name) {
                    // Neither this migration's nor the VMI's yet: the source's must stay.
                    return Err(ReconcileError::new(
                        "hand the VM state claim over to the target",
                        ApiError::NotFound(format!("the target's VM state claim {namespace}/{target}")),
                    ));
                }
                self.delete_claim(namespace, source).await
            }
            MigrationPhase::Failed => self.delete_claim(namespace, target).await,
            _ => Ok(()),
        }
    }

    async fn delete_claim(&self, namespace: &str, name: &str) -> Result<(), ReconcileError> {
        if self.claims.is_bound(namespace, name).is_none() {
            return Ok(());
        }
        match self.api.delete_pvc(namespace, name).await {
            Ok(()) | Err(ApiError::NotFound(_)) => Ok(()),
            Err(error) => Err(ReconcileError::new(format!("delete the VM state claim {name}"), error)),
        }
    }
}

/// The VM state claims named in `migration`'s status (written before the target pod) stay in the
/// status a plan made from the status before them.
pub(super) fn keep_names(
    migration: &VirtualMachineInstanceMigration,
    status: &mut VirtualMachineInstanceMigrationStatus,
) {
    let Some(named) = migration.status.as_ref().and_then(|s| s.migration_state.as_ref()) else {
        return;
    };
    if named.target_persistent_state_pvc_name.is_none() {
        return;
    }
    let state = status.migration_state.get_or_insert_default();
    if state.target_persistent_state_pvc_name.is_none() {
        state
            .source_persistent_state_pvc_name
            .clone_from(&named.source_persistent_state_pvc_name);
        state
            .target_persistent_state_pvc_name
            .clone_from(&named.target_persistent_state_pvc_name);
    }
}
