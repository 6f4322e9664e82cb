//! [`SubresourceCluster`] over kube-rs.

use control_loop::instancetype_lookup::KubeInstancetypeLookup;
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::authorization::v1::SubjectAccessReview;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kubevirt_api::instancetype::{InstancetypeLookup, KindNames, LookupError};

use crate::admission::lookup::{EvictionLookup, MigrationLookup, VolumeLookup, VolumeObject};
use kubevirt_api::v1::{VirtualMachine, VirtualMachineInstance, VirtualMachineInstanceMigration};
use serde_json::Value;

use super::{ClusterError, PatchTarget, SubresourceCluster};

/// What upstream looks for in a failed patch to answer 409 instead of 500.
const JSON_PATCH_TEST_FAILED: &str = "test operation does not apply";

/// The real API server.
#[derive(Clone)]
pub struct KubeSubresourceCluster {
    client: kube::Client,
    install_namespace: String,
    instancetypes: KubeInstancetypeLookup,
}

impl std::fmt::Debug for KubeSubresourceCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeSubresourceCluster")
            .field("install_namespace", &self.install_namespace)
            .finish_non_exhaustive()
    }
}

impl KubeSubresourceCluster {
    /// Uses `client`; virt-handler pods are looked up in `install_namespace`.
    #[must_use]
    pub fn new(client: kube::Client, install_namespace: String) -> Self {
        Self {
            instancetypes: KubeInstancetypeLookup::new(client.clone()),
            client,
            install_namespace,
        }
    }
}

fn failed(what: &str, err: &kube::Error) -> ClusterError {
    if let kube::Error::Api(status) = err
        && (status.code == 409 || status.message.contains(JSON_PATCH_TEST_FAILED))
    {
        return ClusterError::Conflict(status.message.clone());
    }
    ClusterError::Failed(format!("{what}: {err}"))
}

fn params(dry_run: bool) -> PatchParams {
    PatchParams {
        dry_run,
        ..PatchParams::default()
    }
}

impl SubresourceCluster for KubeSubresourceCluster {
    async fn get_vm(&self, ns: &str, name: &str) -> Result<Option<VirtualMachine>, ClusterError> {
        let api: Api<VirtualMachine> = Api::namespaced(self.client.clone(), ns);
        api.get_opt(name)
            .await
            .map_err(|e| failed(&format!("get virtualmachine {ns}/{name}"), &e))
    }

    async fn get_vmi(&self, ns: &str, name: &str) -> Result<Option<VirtualMachineInstance>, ClusterError> {
        let api: Api<VirtualMachineInstance> = Api::namespaced(self.client.clone(), ns);
        api.get_opt(name)
            .await
            .map_err(|e| failed(&format!("get virtualmachineinstance {ns}/{name}"), &e))
    }

    async fn patch(
        &self,
        target: PatchTarget,
        ns: &str,
        name: &str,
        patch: &Value,
        dry_run: bool,
    ) -> Result<(), ClusterError> {
        let ops: json_patch::Patch =
            serde_json::from_value(patch.clone()).map_err(|e| ClusterError::Failed(format!("bad JSON patch: {e}")))?;
        let patch = Patch::Json::<()>(ops);
        let what = format!("patch {target:?} {ns}/{name}");
        match target {
            PatchTarget::Vm => {
                let api: Api<VirtualMachine> = Api::namespaced(self.client.clone(), ns);
                api.patch(name, &params(dry_run), &patch).await.map(drop)
            }
            PatchTarget::VmStatus => {
                let api: Api<VirtualMachine> = Api::namespaced(self.client.clone(), ns);
                api.patch_status(name, &params(dry_run), &patch).await.map(drop)
            }
            PatchTarget::Vmi => {
                let api: Api<VirtualMachineInstance> = Api::namespaced(self.client.clone(), ns);
                api.patch(name, &params(dry_run), &patch).await.map(drop)
            }
            PatchTarget::VmiStatus => {
                let api: Api<VirtualMachineInstance> = Api::namespaced(self.client.clone(), ns);
                api.patch_status(name, &params(dry_run), &patch).await.map(drop)
            }
        }
        .map_err(|e| failed(&what, &e))
    }

    async fn delete_launcher_pod(&self, ns: &str, vmi_uid: &str, dry_run: bool) -> Result<(), ClusterError> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), ns);
        let selector = ListParams::default()
            .labels(&format!("kubevirt.io=virt-launcher,kubevirt.io/created-by={vmi_uid}"))
            .fields("status.phase==Running");
        let pods = api
            .list(&selector)
            .await
            .map_err(|e| failed("list launcher pods", &e))?;
        let Some(name) = pods.items.first().and_then(|p| p.metadata.name.clone()) else {
            return Ok(());
        };
        let delete = DeleteParams {
            grace_period_seconds: Some(1),
            dry_run,
            ..DeleteParams::default()
        };
        match api.delete(&name, &delete).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
            Err(e) => Err(failed(&format!("delete pod {ns}/{name}"), &e)),
        }
    }

    async fn review_access(&self, spec: &Value) -> Result<Result<(), String>, ClusterError> {
        let review: SubjectAccessReview = serde_json::from_value(serde_json::json!({
            "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec
        }))
        .map_err(|e| ClusterError::Failed(format!("bad SubjectAccessReview: {e}")))?;
        let api: Api<SubjectAccessReview> = Api::all(self.client.clone());
        let answer = api
            .create(&kube::api::PostParams::default(), &review)
            .await
            .map_err(|e| failed("create a SubjectAccessReview", &e))?;
        let status = answer.status.unwrap_or_default();
        Ok(if status.allowed {
            Ok(())
        } else {
            Err(status.reason.unwrap_or_default())
        })
    }

    async fn create_migration(
        &self,
        ns: &str,
        migration: &VirtualMachineInstanceMigration,
        dry_run: bool,
    ) -> Result<VirtualMachineInstanceMigration, ClusterError> {
        let params = kube::api::PostParams {
            dry_run,
            ..kube::api::PostParams::default()
        };
        Api::<VirtualMachineInstanceMigration>::namespaced(self.client.clone(), ns)
            .create(&params, migration)
            .await
            .map_err(|e| match e {
                kube::Error::Api(status) => ClusterError::Failed(status.message),
                other => ClusterError::Failed(other.to_string()),
            })
    }

    async fn handler_address(&self, node: &str) -> Result<Option<String>, ClusterError> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &self.install_namespace);
        let selector = ListParams::default()
            .labels("kubevirt.io=virt-handler")
            .fields(&format!("spec.nodeName={node}"));
        let pods = api
            .list(&selector)
            .await
            .map_err(|e| failed("list virt-handler pods", &e))?;
        Ok(pods
            .items
            .iter()
            .find_map(|p| p.status.as_ref().and_then(|s| s.pod_ip.clone())))
    }
}

impl MigrationLookup for KubeSubresourceCluster {
    async fn migrating_vmi(&self, namespace: &str, name: &str) -> Result<Option<VirtualMachineInstance>, LookupError> {
        Api::<VirtualMachineInstance>::namespaced(self.client.clone(), namespace)
            .get_opt(name)
            .await
            .map_err(|e| LookupError(format!("cannot read VMI {namespace}/{name}: {e}")))
    }

    async fn migrations_of(
        &self,
        namespace: &str,
        vmi_name: &str,
    ) -> Result<Vec<VirtualMachineInstanceMigration>, LookupError> {
        let selector = format!("{}={vmi_name}", kubevirt_api::well_known::labels::MIGRATION_VMI_NAME);
        Api::<VirtualMachineInstanceMigration>::namespaced(self.client.clone(), namespace)
            .list(&ListParams::default().labels(&selector))
            .await
            .map(|list| list.items)
            .map_err(|e| LookupError(format!("cannot list the migrations of {namespace}/{vmi_name}: {e}")))
    }
}

impl EvictionLookup for KubeSubresourceCluster {
    async fn pod(&self, namespace: &str, name: &str) -> Result<Option<Pod>, LookupError> {
        Api::<Pod>::namespaced(self.client.clone(), namespace)
            .get_opt(name)
            .await
            .map_err(|e| LookupError(format!("cannot read pod {namespace}/{name}: {e}")))
    }

    async fn mark_for_evacuation(
        &self,
        namespace: &str,
        vmi_name: &str,
        node: &str,
        dry_run: bool,
    ) -> Result<(), LookupError> {
        super::mark_for_evacuation(self, namespace, vmi_name, node, dry_run).await
    }
}

impl InstancetypeLookup for KubeSubresourceCluster {
    async fn object(&self, kind: &KindNames, namespace: &str, name: &str) -> Result<Option<Value>, LookupError> {
        self.instancetypes.object(kind, namespace, name).await
    }

    async fn revision(&self, namespace: &str, name: &str) -> Result<Option<ControllerRevision>, LookupError> {
        self.instancetypes.revision(namespace, name).await
    }
}

/// A CDI kind, read dynamically: CDI may not be installed, and then it is simply absent.
fn cdi(kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: "cdi.kubevirt.io".to_owned(),
        version: "v1beta1".to_owned(),
        api_version: "cdi.kubevirt.io/v1beta1".to_owned(),
        kind: kind.to_owned(),
        plural: plural.to_owned(),
    }
}

impl VolumeLookup for KubeSubresourceCluster {
    async fn volume_object(
        &self,
        object: VolumeObject,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Value>, LookupError> {
        let found = match object {
            VolumeObject::PersistentVolumeClaim => {
                Api::<PersistentVolumeClaim>::namespaced(self.client.clone(), namespace)
                    .get_opt(name)
                    .await
                    .map(|o| o.and_then(|o| serde_json::to_value(o).ok()))
            }
            VolumeObject::DataVolume | VolumeObject::DataSource => {
                let resource = if object == VolumeObject::DataVolume {
                    cdi("DataVolume", "datavolumes")
                } else {
                    cdi("DataSource", "datasources")
                };
                Api::<DynamicObject>::namespaced_with(self.client.clone(), namespace, &resource)
                    .get_opt(name)
                    .await
                    .map(|o| o.and_then(|o| serde_json::to_value(o).ok()))
            }
        };
        match found {
            Ok(found) => Ok(found),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(None),
            Err(e) => Err(LookupError(format!(
                "cannot get {} {namespace}/{name}: {e}",
                object.kind()
            ))),
        }
    }
}
