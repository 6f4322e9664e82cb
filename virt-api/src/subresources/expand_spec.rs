//! `expand-spec`: a VM with its instance type and preference applied, as upstream's
//! `pkg/virt-api/rest/expand-spec.go` returns it. `PUT .../namespaces/{ns}/expand-vm-spec` expands
//! the VM in the body; `GET .../namespaces/{ns}/virtualmachines/{name}/expand-spec` a stored one
//! (through the revisions it recorded).

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use kubevirt_api::instancetype::{self, find_both};
use kubevirt_api::v1::{ClusterConfig, VirtualMachine};

use super::status::{ApiStatus, VM};
use crate::admission::lookup::AdmissionLookup;
use crate::app_state::AppState;
use crate::backends::{NodeConnector, SubresourceCluster};
use crate::defaults;

/// Why a VM could not be expanded; its text is upstream's message.
#[derive(Debug, thiserror::Error)]
pub enum ExpandError {
    /// The instance type or preference could not be found.
    #[error("{0}")]
    Find(#[from] instancetype::FindError),
    /// The template sets what the instance type sets.
    #[error("{0}")]
    Conflicts(#[from] instancetype::Conflicts),
    /// A cluster default cannot be applied.
    #[error("{0}")]
    Defaults(#[from] defaults::DefaultsError),
    /// `inferFromVolume` could not be resolved.
    #[error("{0}")]
    Infer(String),
}

/// Expands `vm`: default disks and interface, the instance type and preference, the cluster's
/// defaults; the matchers and status references are removed. A VM without matchers is returned
/// as it is.
pub async fn expand_vm(
    mut vm: VirtualMachine,
    lookup: &impl AdmissionLookup,
    config: &ClusterConfig,
) -> Result<VirtualMachine, ExpandError> {
    if vm.spec.instancetype.is_none() && vm.spec.preference.is_none() {
        return Ok(vm);
    }
    crate::admission::infer_matchers(&mut vm, lookup)
        .await
        .map_err(ExpandError::Infer)?;
    let (found_instancetype, found_preference) = find_both(lookup, &vm).await?;
    let instancetype_spec = found_instancetype.as_ref().map(|f| &f.spec);
    let preference_spec = found_preference.as_ref().map(|f| &f.spec);
    let template = vm.spec.template.spec.get_or_insert_with(Default::default);
    if let Some(preference) = preference_spec {
        instancetype::apply_device_preferences(preference, template);
    }
    defaults::set_default_volume_disks(template);
    defaults::set_default_network_interface(template, config)?;
    let meta = vm.spec.template.metadata.get_or_insert_with(Default::default);
    let mut annotations = meta.annotations.take().unwrap_or_default();
    instancetype::apply(
        instancetype_spec,
        preference_spec,
        template,
        &mut annotations,
        "spec.template.spec",
    )?;
    meta.annotations = Some(annotations).filter(|a| !a.is_empty());
    if let Some(preference) = preference_spec {
        instancetype::apply_architecture(preference, template);
    }
    defaults::set_vmi_spec_defaults(template, config)?;
    vm.spec.instancetype = None;
    vm.spec.preference = None;
    if let Some(status) = vm.status.as_mut() {
        status.instancetype_ref = None;
        status.preference_ref = None;
    }
    Ok(vm)
}

fn json_response(vm: &VirtualMachine) -> Response {
    match serde_json::to_value(vm) {
        Ok(value) => axum::Json(value).into_response(),
        Err(e) => ApiStatus::internal(e).into_response(),
    }
}

/// `PUT /apis/subresources.kubevirt.io/{version}/namespaces/{ns}/expand-vm-spec`.
pub(crate) async fn expand_body<C: SubresourceCluster, N: NodeConnector>(
    State(state): State<Arc<AppState<C, N>>>,
    Path((version, ns)): Path<(String, String)>,
    caller: super::routes::Caller,
    body: Bytes,
) -> Response {
    let result = async {
        super::routes::check_version(&version)?;
        let cluster = state.cluster()?;
        super::routes::authorize(&state, cluster.as_ref(), &caller).await?;
        if body.iter().all(u8::is_ascii_whitespace) {
            return Err(ApiStatus::bad_request("empty request body"));
        }
        let mut vm: VirtualMachine = serde_json::from_slice(&body)
            .map_err(|e| ApiStatus::bad_request(format!("Can not unmarshal Request body to struct, error: {e}")))?;
        if ns.is_empty() {
            return Err(ApiStatus::bad_request("The request namespace must not be empty"));
        }
        if vm
            .metadata
            .namespace
            .as_deref()
            .is_some_and(|n| !n.is_empty() && n != ns)
        {
            return Err(ApiStatus::bad_request(format!("VM namespace must be empty or {ns}")));
        }
        vm.metadata.namespace = Some(ns.clone());
        let config = state.admission_config();
        expand_vm(vm, cluster.as_ref(), &config)
            .await
            .map_err(|e| ApiStatus::bad_request(e.to_string()))
    }
    .await;
    match result {
        Ok(vm) => json_response(&vm),
        Err(status) => status.into_response(),
    }
}

/// `GET /apis/subresources.kubevirt.io/{version}/namespaces/{ns}/virtualmachines/{name}/expand-spec`.
pub(crate) async fn expand_stored<C: SubresourceCluster, N: NodeConnector>(
    State(state): State<Arc<AppState<C, N>>>,
    Path((version, ns, name)): Path<(String, String, String)>,
    caller: super::routes::Caller,
) -> Response {
    let result = async {
        super::routes::check_version(&version)?;
        let cluster = state.cluster()?;
        super::routes::authorize(&state, cluster.as_ref(), &caller).await?;
        let vm = cluster
            .get_vm(&ns, &name)
            .await
            .map_err(|e| ApiStatus::internal(&e))?
            .ok_or_else(|| ApiStatus::not_found(VM, &name))?;
        let config = state.admission_config();
        expand_vm(vm, cluster.as_ref(), &config)
            .await
            .map_err(ApiStatus::internal)
    }
    .await;
    match result {
        Ok(vm) => json_response(&vm),
        Err(status) => status.into_response(),
    }
}
