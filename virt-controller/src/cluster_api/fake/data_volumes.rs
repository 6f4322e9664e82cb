//! The fake's DataVolumes, DataSources and access rules: the controller creates and adopts
//! DataVolumes; a test plays CDI (their phases and conditions), adds DataSources, and says which
//! accesses a SubjectAccessReview allows.

use cdi_api::{DataSource, DataVolume};
use kube::runtime::watcher::Event;

use super::{ApiError, FakeControllerApi, Write, key_of, merge_metadata};
use crate::cluster_api::ResourceAccess;

/// How an access is written down: `user namespace verb group/resource/subresource`.
#[must_use]
pub(super) fn access_key(user: &str, access: &ResourceAccess) -> String {
    format!(
        "{user} {} {} {}/{}/{}",
        access.namespace, access.verb, access.group, access.resource, access.subresource
    )
}

impl FakeControllerApi {
    pub(super) fn create_stored_data_volume(&self, data_volume: &DataVolume) -> Result<DataVolume, ApiError> {
        let mut guard = self.lock();
        let state = &mut *guard;
        let mut created = data_volume.clone();
        created.metadata.namespace.get_or_insert_with(|| "default".to_owned());
        let key = key_of(&created.metadata);
        state.log(Write::CreateDataVolume(key.clone()));
        if state.data_volumes.contains_key(&key) {
            return Err(ApiError::AlreadyExists(format!("create DataVolume {key}")));
        }
        created.metadata.uid = Some(format!("dv-uid-{key}"));
        state.stamp(&mut created.metadata);
        state.data_volumes.insert(key, created.clone());
        let event = Event::Apply(created.clone());
        state.data_volume_watchers.retain(|w| w.send(event.clone()).is_ok());
        Ok(created)
    }

    pub(super) fn patch_stored_data_volume(
        &self,
        namespace: &str,
        name: &str,
        patch: &serde_json::Value,
    ) -> Result<(), ApiError> {
        let key = format!("{namespace}/{name}");
        self.lock().log(Write::PatchDataVolume(key.clone(), patch.clone()));
        let mut stored = self
            .data_volume(&key)
            .ok_or_else(|| ApiError::NotFound(format!("patch DataVolume {key}")))?;
        // A uid in the patch is a precondition, as the API server checks it.
        if let Some(uid) = patch["metadata"]["uid"].as_str()
            && stored.metadata.uid.as_deref() != Some(uid)
        {
            return Err(ApiError::Conflict {
                operation: format!("patch DataVolume {key}: the uid differs"),
            });
        }
        merge_metadata(&mut stored.metadata, patch);
        self.apply_data_volume(stored);
        Ok(())
    }

    /// Creates or replaces a DataVolume as CDI or a user would (namespace `default` when it has
    /// none); the DataVolume watch sees it.
    pub fn apply_data_volume(&self, mut data_volume: DataVolume) {
        let mut guard = self.lock();
        let state = &mut *guard;
        data_volume
            .metadata
            .namespace
            .get_or_insert_with(|| "default".to_owned());
        state.stamp(&mut data_volume.metadata);
        state
            .data_volumes
            .insert(key_of(&data_volume.metadata), data_volume.clone());
        let event = Event::Apply(data_volume);
        state.data_volume_watchers.retain(|w| w.send(event.clone()).is_ok());
    }

    /// Changes a stored DataVolume (CDI moves its phase), if it is there.
    pub fn modify_data_volume(&self, key: &str, change: impl FnOnce(&mut DataVolume)) {
        if let Some(mut data_volume) = self.data_volume(key) {
            change(&mut data_volume);
            self.apply_data_volume(data_volume);
        }
    }

    /// The stored DataVolume.
    #[must_use]
    pub fn data_volume(&self, key: &str) -> Option<DataVolume> {
        self.lock().data_volumes.get(key).cloned()
    }

    /// Adds a DataSource.
    pub fn apply_data_source(&self, mut data_source: DataSource) {
        data_source
            .metadata
            .namespace
            .get_or_insert_with(|| "default".to_owned());
        let key = key_of(&data_source.metadata);
        self.lock().data_sources.insert(key, data_source);
    }

    /// Lets `user` do `access` from now on.
    pub fn allow(&self, user: &str, access: &ResourceAccess) {
        self.lock().allowed.insert(access_key(user, access));
    }
}
