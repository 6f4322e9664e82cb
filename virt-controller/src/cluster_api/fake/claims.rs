//! The fake's PersistentVolumeClaims: a test creates and deletes them as a user or CDI would, and
//! the controller's PVC watch sees each change.

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::runtime::watcher::Event;

use super::{FakeControllerApi, key_of};

impl FakeControllerApi {
    /// Creates or replaces a claim (namespace `default` when it has none).
    pub fn apply_claim(&self, mut claim: PersistentVolumeClaim) {
        let mut state = self.lock();
        claim.metadata.namespace.get_or_insert_with(|| "default".to_owned());
        state.stamp(&mut claim.metadata);
        state.claims.insert(key_of(&claim.metadata), claim.clone());
        let event = Event::Apply(claim);
        state.claim_watchers.retain(|w| w.send(event.clone()).is_ok());
    }

    /// Deletes the claim `namespace/name`, if it is there.
    pub fn delete_claim(&self, key: &str) {
        let mut state = self.lock();
        if let Some(claim) = state.claims.remove(key) {
            let event = Event::Delete(claim);
            state.claim_watchers.retain(|w| w.send(event.clone()).is_ok());
        }
    }

    /// Adds a StorageClass.
    pub fn add_storage_class(&self, class: k8s_openapi::api::storage::v1::StorageClass) {
        self.lock().storage_classes.push(class);
    }

    /// Gives the class `name` a storage profile with these claim property sets (volume mode,
    /// access modes).
    pub fn set_storage_profile(&self, name: &str, sets: crate::cluster_api::ClaimPropertySets) {
        self.lock().storage_profiles.insert(name.to_owned(), sets);
    }

    /// The claim `namespace/name`, if it is there.
    #[must_use]
    pub fn claim(&self, key: &str) -> Option<PersistentVolumeClaim> {
        self.lock().claims.get(key).cloned()
    }
}
