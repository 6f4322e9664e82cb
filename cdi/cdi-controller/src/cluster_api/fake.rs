//! [`CdiApi`] in memory, for tests: objects in maps, every write applied and recorded.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use cdi_api::data_volume::DataVolumeStatus;
use cdi_api::{CDIConfig, DataSource, DataVolume, StorageProfile};

use crate::import_plan::populator::{PopulationSource, SourceKind};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod, Secret, Service};
use k8s_openapi::api::storage::v1::StorageClass;

use super::{ApiError, CdiApi, EventSubject};

/// What the fake holds.
#[derive(Debug, Default)]
pub struct State {
    /// DataVolumes by `namespace/name` (their statuses as written).
    pub data_volumes: BTreeMap<String, DataVolume>,
    /// DataSources by `namespace/name`.
    pub data_sources: BTreeMap<String, DataSource>,
    /// Claims by `namespace/name`.
    pub claims: BTreeMap<String, PersistentVolumeClaim>,
    /// Pods by `namespace/name`.
    pub pods: BTreeMap<String, Pod>,
    /// Services by `namespace/name`.
    pub services: BTreeMap<String, Service>,
    /// Secrets by `namespace/name`.
    pub secrets: BTreeMap<String, Secret>,
    /// StorageClasses.
    pub classes: Vec<StorageClass>,
    /// StorageProfiles by name.
    pub profiles: BTreeMap<String, StorageProfile>,
    /// PersistentVolumes.
    pub volumes: Vec<PersistentVolume>,
    /// The names of the CSIDriver objects.
    pub csi_drivers: Vec<String>,
    /// VolumeImportSources and VolumeUploadSources by `namespace/name`.
    pub population_sources: BTreeMap<String, PopulationSource>,
    /// The CDIConfig.
    pub config: Option<CDIConfig>,
    /// DataVolume statuses written, by `namespace/name` (what [`CdiApi::data_volume`] gives).
    pub statuses: BTreeMap<String, DataVolumeStatus>,
    /// Every write, in order, in short.
    pub writes: Vec<String>,
}

/// The fake API server.
#[derive(Debug, Default)]
pub struct FakeCdiApi {
    state: Mutex<State>,
}

fn key(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

impl FakeCdiApi {
    /// What it holds.
    pub fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The writes so far, emptied.
    pub fn take_writes(&self) -> Vec<String> {
        std::mem::take(&mut self.state().writes)
    }
}

impl CdiApi for FakeCdiApi {
    async fn data_volume(&self, namespace: &str, name: &str) -> Result<Option<DataVolume>, ApiError> {
        let state = self.state();
        let id = key(namespace, name);
        Ok(state.data_volumes.get(&id).cloned().map(|mut dv| {
            if let Some(status) = state.statuses.get(&id) {
                dv.status = Some(status.clone());
            }
            dv
        }))
    }

    async fn data_source(&self, namespace: &str, name: &str) -> Result<Option<DataSource>, ApiError> {
        Ok(self.state().data_sources.get(&key(namespace, name)).cloned())
    }

    async fn claim(&self, namespace: &str, name: &str) -> Result<Option<PersistentVolumeClaim>, ApiError> {
        Ok(self.state().claims.get(&key(namespace, name)).cloned())
    }

    async fn pod(&self, namespace: &str, name: &str) -> Result<Option<Pod>, ApiError> {
        Ok(self.state().pods.get(&key(namespace, name)).cloned())
    }

    async fn pods(&self, namespace: &str) -> Result<Vec<Pod>, ApiError> {
        let prefix = key(namespace, "");
        Ok(self
            .state()
            .pods
            .iter()
            .filter(|(id, _)| id.starts_with(&prefix))
            .map(|(_, pod)| pod.clone())
            .collect())
    }

    async fn storage_classes(&self) -> Result<Vec<StorageClass>, ApiError> {
        Ok(self.state().classes.clone())
    }

    async fn storage_profile(&self, name: &str) -> Result<Option<StorageProfile>, ApiError> {
        Ok(self.state().profiles.get(name).cloned())
    }

    async fn persistent_volumes(&self) -> Result<Vec<PersistentVolume>, ApiError> {
        Ok(self.state().volumes.clone())
    }

    async fn persistent_volume(&self, name: &str) -> Result<Option<PersistentVolume>, ApiError> {
        Ok(self
            .state()
            .volumes
            .iter()
            .find(|v| v.metadata.name.as_deref() == Some(name))
            .cloned())
    }

    async fn csi_driver_exists(&self, name: &str) -> Result<bool, ApiError> {
        Ok(self.state().csi_drivers.iter().any(|d| d == name))
    }

    async fn population_source_exists(&self, kind: SourceKind, namespace: &str, name: &str) -> Result<bool, ApiError> {
        Ok(self
            .state()
            .population_sources
            .get(&key(namespace, name))
            .is_some_and(|source| source.kind() == kind))
    }

    async fn population_source(
        &self,
        kind: SourceKind,
        namespace: &str,
        name: &str,
    ) -> Result<Option<PopulationSource>, ApiError> {
        Ok(self
            .state()
            .population_sources
            .get(&key(namespace, name))
            .filter(|source| source.kind() == kind)
            .cloned())
    }

    async fn create_population_source(&self, source: &PopulationSource) -> Result<(), ApiError> {
        let id = key(
            source.metadata().namespace.as_deref().unwrap_or_default(),
            source.metadata().name.as_deref().unwrap_or_default(),
        );
        let mut state = self.state();
        state.writes.push(format!("create {} {id}", source.kind().kind()));
        state.population_sources.entry(id).or_insert_with(|| source.clone());
        Ok(())
    }

    async fn delete_population_source(&self, kind: SourceKind, namespace: &str, name: &str) -> Result<(), ApiError> {
        let mut state = self.state();
        state.writes.push(format!("delete {} {namespace}/{name}", kind.kind()));
        state.population_sources.remove(&key(namespace, name));
        Ok(())
    }

    async fn delete_claim(&self, namespace: &str, name: &str) -> Result<(), ApiError> {
        let mut state = self.state();
        state.writes.push(format!("delete claim {namespace}/{name}"));
        state.claims.remove(&key(namespace, name));
        Ok(())
    }

    async fn replace_persistent_volume(&self, volume: &PersistentVolume) -> Result<(), ApiError> {
        let name = volume.metadata.name.clone().unwrap_or_default();
        let mut state = self.state();
        let claim = volume
            .spec
            .as_ref()
            .and_then(|s| s.claim_ref.as_ref())
            .and_then(|r| r.name.clone())
            .unwrap_or_default();
        state.writes.push(format!("rebind volume {name} to {claim}"));
        if let Some(held) = state
            .volumes
            .iter_mut()
            .find(|v| v.metadata.name.as_deref() == Some(&name))
        {
            *held = volume.clone();
        }
        Ok(())
    }

    async fn cdi_config(&self) -> Result<Option<CDIConfig>, ApiError> {
        Ok(self.state().config.clone())
    }

    async fn create_claim(&self, claim: &PersistentVolumeClaim) -> Result<(), ApiError> {
        let id = key(
            claim.metadata.namespace.as_deref().unwrap_or_default(),
            claim.metadata.name.as_deref().unwrap_or_default(),
        );
        let mut state = self.state();
        state.writes.push(format!("create claim {id}"));
        state.claims.entry(id).or_insert_with(|| claim.clone());
        Ok(())
    }

    async fn label_claim(
        &self,
        namespace: &str,
        name: &str,
        labels: &BTreeMap<String, String>,
    ) -> Result<(), ApiError> {
        let mut state = self.state();
        let keys: Vec<&str> = labels.keys().map(String::as_str).collect();
        state
            .writes
            .push(format!("label claim {namespace}/{name} {}", keys.join(",")));
        if let Some(claim) = state.claims.get_mut(&key(namespace, name)) {
            claim.metadata.labels.get_or_insert_default().extend(labels.clone());
        }
        Ok(())
    }

    async fn annotate_claim(
        &self,
        namespace: &str,
        name: &str,
        annotations: &BTreeMap<String, String>,
    ) -> Result<(), ApiError> {
        let mut state = self.state();
        let keys: Vec<&str> = annotations
            .keys()
            .map(|k| k.trim_start_matches("cdi.kubevirt.io/storage."))
            .collect();
        state
            .writes
            .push(format!("annotate claim {namespace}/{name} {}", keys.join(",")));
        if let Some(claim) = state.claims.get_mut(&key(namespace, name)) {
            claim
                .metadata
                .annotations
                .get_or_insert_default()
                .extend(annotations.clone());
        }
        Ok(())
    }

    async fn create_pod(&self, pod: &Pod) -> Result<(), ApiError> {
        let id = key(
            pod.metadata.namespace.as_deref().unwrap_or_default(),
            pod.metadata.name.as_deref().unwrap_or_default(),
        );
        let mut state = self.state();
        state.writes.push(format!("create pod {id}"));
        state.pods.entry(id).or_insert_with(|| pod.clone());
        Ok(())
    }

    async fn ungate_pod(&self, namespace: &str, name: &str, gate: &str) -> Result<(), ApiError> {
        let mut state = self.state();
        state.writes.push(format!("ungate pod {namespace}/{name}"));
        if let Some(gates) = state
            .pods
            .get_mut(&key(namespace, name))
            .and_then(|p| p.spec.as_mut())
            .and_then(|s| s.scheduling_gates.as_mut())
        {
            gates.retain(|g| g.name != gate);
        }
        Ok(())
    }

    async fn delete_pod(&self, namespace: &str, name: &str) -> Result<(), ApiError> {
        let mut state = self.state();
        state.writes.push(format!("delete pod {namespace}/{name}"));
        state.pods.remove(&key(namespace, name));
        Ok(())
    }

    async fn create_service(&self, service: &Service) -> Result<(), ApiError> {
        let id = key(
            service.metadata.namespace.as_deref().unwrap_or_default(),
            service.metadata.name.as_deref().unwrap_or_default(),
        );
        let mut state = self.state();
        state.writes.push(format!("create service {id}"));
        state.services.entry(id).or_insert_with(|| service.clone());
        Ok(())
    }

    async fn delete_service(&self, namespace: &str, name: &str) -> Result<(), ApiError> {
        let mut state = self.state();
        state.writes.push(format!("delete service {namespace}/{name}"));
        state.services.remove(&key(namespace, name));
        Ok(())
    }

    async fn delete_secret(&self, namespace: &str, name: &str) -> Result<(), ApiError> {
        let mut state = self.state();
        state.writes.push(format!("delete secret {namespace}/{name}"));
        state.secrets.remove(&key(namespace, name));
        Ok(())
    }

    async fn secret_exists(&self, namespace: &str, name: &str) -> Result<bool, ApiError> {
        Ok(self.state().secrets.contains_key(&key(namespace, name)))
    }

    async fn put_secret(&self, secret: &Secret) -> Result<(), ApiError> {
        let id = key(
            secret.metadata.namespace.as_deref().unwrap_or_default(),
            secret.metadata.name.as_deref().unwrap_or_default(),
        );
        let mut state = self.state();
        state.writes.push(format!("put secret {id}"));
        state.secrets.insert(id, secret.clone());
        Ok(())
    }

    async fn write_status(&self, namespace: &str, name: &str, status: &DataVolumeStatus) -> Result<(), ApiError> {
        let mut state = self.state();
        state
            .writes
            .push(format!("status {namespace}/{name} {:?}", status.phase));
        state.statuses.insert(key(namespace, name), status.clone());
        Ok(())
    }

    async fn create_cdi_config(&self, config: &CDIConfig) -> Result<(), ApiError> {
        let mut state = self.state();
        state.writes.push("create CDIConfig config".to_owned());
        if state.config.is_none() {
            state.config = Some(config.clone());
        }
        Ok(())
    }

    async fn replace_cdi_config_status(&self, config: &CDIConfig) -> Result<(), ApiError> {
        let mut state = self.state();
        state.writes.push("status CDIConfig config".to_owned());
        if let Some(held) = state.config.as_mut() {
            held.status.clone_from(&config.status);
        }
        Ok(())
    }

    async fn replace_data_source_status(&self, data_source: &DataSource) -> Result<(), ApiError> {
        let id = key(
            data_source.metadata.namespace.as_deref().unwrap_or_default(),
            data_source.metadata.name.as_deref().unwrap_or_default(),
        );
        let mut state = self.state();
        state.writes.push(format!("status DataSource {id}"));
        if let Some(held) = state.data_sources.get_mut(&id) {
            held.status.clone_from(&data_source.status);
        }
        Ok(())
    }

    async fn record_event(
        &self,
        subject: EventSubject<'_>,
        event_type: &'static str,
        reason: &str,
        _message: &str,
    ) -> Result<(), ApiError> {
        let mut state = self.state();
        state.writes.push(format!(
            "event {} {} {event_type} {reason}",
            subject.kind,
            subject.meta.name.as_deref().unwrap_or_default()
        ));
        Ok(())
    }
}
