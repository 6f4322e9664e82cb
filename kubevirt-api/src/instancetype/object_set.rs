//! Instance types and preferences held in memory: local mode's `--with` manifests, read strictly.

use std::path::Path;

use k8s_openapi::api::apps::v1::ControllerRevision;
use serde_json::Value;

use super::{
    InstancetypeLookup, KindNames, LookupError, VirtualMachineClusterInstancetype, VirtualMachineClusterPreference,
    VirtualMachineInstancetype, VirtualMachinePreference,
};
use crate::manifest::{ManifestError, from_value_strict};

/// Objects as given, each with its kind.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ObjectSet {
    objects: Vec<(KindNames, Value)>,
}

impl ObjectSet {
    /// Reads an instance type or preference manifest and adds it.
    pub fn add_file(&mut self, path: &Path) -> Result<(), ManifestError> {
        let text = std::fs::read_to_string(path).map_err(|source| ManifestError::Read {
            path: path.to_owned(),
            source,
        })?;
        let value: Value = serde_saphyr::from_str(&text).map_err(|e| ManifestError::Syntax {
            path: path.to_owned(),
            message: e.to_string(),
        })?;
        let text_of = |key: &str| value.get(key).and_then(Value::as_str).unwrap_or_default().to_owned();
        let (api_version, kind) = (text_of("apiVersion"), text_of("kind"));
        let expected = format!("{}/{}", super::GROUP, super::VERSION);
        // Each kind is parsed strictly as its type; what is kept is the object as given.
        let names = match (api_version == expected, kind.as_str()) {
            (true, "VirtualMachineInstancetype") => {
                from_value_strict::<VirtualMachineInstancetype>(value.clone(), path)?;
                VirtualMachineInstancetype::NAMES
            }
            (true, "VirtualMachineClusterInstancetype") => {
                from_value_strict::<VirtualMachineClusterInstancetype>(value.clone(), path)?;
                VirtualMachineClusterInstancetype::NAMES
            }
            (true, "VirtualMachinePreference") => {
                from_value_strict::<VirtualMachinePreference>(value.clone(), path)?;
                VirtualMachinePreference::NAMES
            }
            (true, "VirtualMachineClusterPreference") => {
                from_value_strict::<VirtualMachineClusterPreference>(value.clone(), path)?;
                VirtualMachineClusterPreference::NAMES
            }
            _ => {
                return Err(ManifestError::UnsupportedKind {
                    path: path.to_owned(),
                    api_version,
                    kind,
                    expected: format!(
                        "{expected} VirtualMachine(Cluster)Instancetype or VirtualMachine(Cluster)Preference"
                    ),
                });
            }
        };
        self.objects.push((names, value));
        Ok(())
    }
}

impl InstancetypeLookup for ObjectSet {
    async fn object(&self, kind: &KindNames, namespace: &str, name: &str) -> Result<Option<Value>, LookupError> {
        Ok(self
            .objects
            .iter()
            .find(|(k, object)| {
                let meta = &object["metadata"];
                k.kind == kind.kind
                    && meta["name"].as_str() == Some(name)
                    && (!kind.namespaced || meta["namespace"].as_str().is_none_or(|n| n == namespace))
            })
            .map(|(_, object)| object.clone()))
    }

    async fn revision(&self, _: &str, _: &str) -> Result<Option<ControllerRevision>, LookupError> {
        Ok(None)
    }
}
