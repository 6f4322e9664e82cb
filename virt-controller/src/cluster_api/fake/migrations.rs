//! The fake's migrations: stored as the API server stores them, with their finalizers honoured on
//! deletion, and the calls a test makes to create and cancel them.

use kube::runtime::watcher::Event;
use kubevirt_api::v1::VirtualMachineInstanceMigration;

use super::{ApiError, FakeControllerApi, State, Write, compact, fetch_guarded, key_of, mark_deleting, merge_metadata};
use crate::compact::Compact;

impl FakeControllerApi {
    /// Creates or replaces a migration (as `kubectl apply` would), with a UID and namespace.
    pub fn apply_migration(&self, mut migration: VirtualMachineInstanceMigration) {
        let mut state = self.lock();
        if migration.metadata.uid.is_none() {
            migration.metadata.uid = Some(format!("uid-{}", key_of(&migration.metadata)));
        }
        migration.metadata.namespace.get_or_insert_with(|| "default".to_owned());
        state.stamp(&mut migration.metadata);
        state
            .migrations
            .insert(key_of(&migration.metadata), compact(&migration));
        state.migration_changed(&Event::Apply(migration));
    }

    /// Creates or replaces a `MigrationPolicy`.
    pub fn apply_migration_policy(&self, policy: kubevirt_api::migrations::MigrationPolicy) {
        let mut state = self.lock();
        state
            .migration_policies
            .retain(|p| p.metadata.name != policy.metadata.name);
        state.migration_policies.push(policy);
    }

    /// Gives `namespace` these labels.
    pub fn label_namespace(&self, namespace: &str, labels: std::collections::BTreeMap<String, String>) {
        self.lock().namespace_labels.insert(namespace.to_owned(), labels);
    }

    /// Deletes a migration as the API server does: at once without finalizers, otherwise marked.
    pub fn delete_migration(&self, key: &str) {
        let mut guard = self.lock();
        let state = &mut *guard;
        // A test deleting what is not there changes nothing.
        drop(remove(state, key));
    }

    /// virt-handler's part in a migration: changes the migration state of the VMI `key`, when it
    /// has one.
    pub fn report_migration_state(&self, key: &str, change: impl FnOnce(&mut kubevirt_api::v1::MigrationState)) {
        self.modify_vmi(key, |vmi| {
            if let Some(state) = vmi.status.as_mut().and_then(|s| s.migration_state.as_mut()) {
                change(state);
            }
        });
    }

    /// Migration watches started from now on do not finish listing until
    /// [`Self::release_migration_list`]: a slow list, for tests of what waits for it.
    pub fn hold_migration_list(&self) {
        self.lock().migration_list_held = Some(Vec::new());
    }

    /// Ends the held migration lists.
    pub fn release_migration_list(&self) {
        let held = self.lock().migration_list_held.take().unwrap_or_default();
        for watcher in held {
            let _ = watcher.send(Event::InitDone);
        }
    }

    /// Every migration creation from now on fails with `message` (a webhook's refusal).
    pub fn refuse_migrations(&self, message: &str) {
        self.lock().migration_refusal = Some(message.to_owned());
    }

    /// The keys of the stored migrations.
    #[must_use]
    pub fn migration_keys(&self) -> Vec<String> {
        self.lock().migrations.keys().cloned().collect()
    }

    /// The stored migration.
    #[must_use]
    pub fn migration(&self, key: &str) -> Option<VirtualMachineInstanceMigration> {
        self.lock().migrations.get(key).and_then(Compact::get)
    }
}

fn remove(state: &mut State, key: &str) -> Result<(), ApiError> {
    let marked = mark_deleting(&mut state.migrations, &mut state.version, key)?;
    if marked.metadata.finalizers.as_ref().is_none_or(Vec::is_empty) {
        state.migrations.remove(key);
        state.migration_changed(&Event::Delete(marked));
    } else {
        state.migration_changed(&Event::Apply(marked));
    }
    Ok(())
}

/// `delete` from the controller: logged, then as [`FakeControllerApi::delete_migration`].
pub(super) fn delete(state: &mut State, key: &str) -> Result<(), ApiError> {
    state.log(Write::DeleteMigration(key.to_owned()));
    remove(state, key)
}

/// `create` from the controller: named from `generateName`, with a UID, logged.
pub(super) fn create(
    state: &mut State,
    namespace: &str,
    migration: &VirtualMachineInstanceMigration,
) -> Result<VirtualMachineInstanceMigration, ApiError> {
    if let Some(message) = state.migration_refusal.clone() {
        state.log(Write::CreateMigration(format!("{namespace}/(refused)")));
        return Err(ApiError::Conflict { operation: message });
    }
    let mut created = migration.clone();
    let number = state.admit_new(namespace, &mut created.metadata);
    created.metadata.uid = Some(format!("migration-uid-{number}"));
    let key = key_of(&created.metadata);
    state.log(Write::CreateMigration(key.clone()));
    state.migrations.insert(key, compact(&created));
    state.migration_changed(&Event::Apply(created.clone()));
    Ok(created)
}

pub(super) fn patch_metadata(
    state: &mut State,
    migration: &VirtualMachineInstanceMigration,
    patch: &serde_json::Value,
) -> Result<VirtualMachineInstanceMigration, ApiError> {
    let key = key_of(&migration.metadata);
    state.log(Write::PatchMigration(key.clone(), patch.clone()));
    let mut stored = fetch_guarded(
        &state.migrations,
        &key,
        migration.metadata.resource_version.as_ref(),
        "patch migration",
    )?;
    merge_metadata(&mut stored.metadata, patch);
    state.stamp(&mut stored.metadata);
    if stored.metadata.deletion_timestamp.is_some() && stored.metadata.finalizers.as_ref().is_none_or(Vec::is_empty) {
        state.migrations.remove(&key);
        state.migration_changed(&Event::Delete(stored.clone()));
    } else {
        state.migrations.insert(key, compact(&stored));
        state.migration_changed(&Event::Apply(stored.clone()));
    }
    Ok(stored)
}

pub(super) fn update_status(
    state: &mut State,
    migration: &VirtualMachineInstanceMigration,
) -> Result<VirtualMachineInstanceMigration, ApiError> {
    let key = key_of(&migration.metadata);
    state.log(Write::MigrationStatus(key.clone()));
    let mut stored = fetch_guarded(
        &state.migrations,
        &key,
        migration.metadata.resource_version.as_ref(),
        "update status of migration",
    )?;
    stored.status.clone_from(&migration.status);
    state.stamp(&mut stored.metadata);
    state.migrations.insert(key, compact(&stored));
    state.migration_changed(&Event::Apply(stored.clone()));
    Ok(stored)
}

/// A migration watch whose list does not end until released.
pub(super) fn held_watch(
    state: &mut State,
    initial: Vec<VirtualMachineInstanceMigration>,
) -> futures::stream::BoxStream<'static, Result<super::MigrationWatchEvent, ApiError>> {
    use futures::StreamExt as _;
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let _ = tx.send(Event::Init);
    for migration in initial {
        let _ = tx.send(Event::InitApply(migration));
    }
    state.migration_list_held.get_or_insert_default().push(tx.clone());
    state.migration_watchers.push(tx);
    tokio_stream::wrappers::UnboundedReceiverStream::new(rx).map(Ok).boxed()
}
