//! The HTTP handlers of the subresource API: read the VM and VMI, let [`super::lifecycle`]
//! decide, then write. Every failure is a `metav1.Status` body with upstream's code.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use kubevirt_api::v1::{PauseOptions, RestartOptions, StartOptions, StopOptions, is_dry_run};
use serde::de::DeserializeOwned;

use super::authorize::{self, Authentication, PeerCertificate};
use super::discovery::VERSIONS;
use super::lifecycle::{self, Plan};
use super::status::{ApiStatus, VM, VMI};
use crate::app_state::AppState;
use crate::backends::{ClusterError, ConsoleStream, NodeConnector, PatchTarget, SubresourceCluster, VmiAction};

/// The subprotocol KubeVirt's console clients ask for.
pub const CONSOLE_SUBPROTOCOL: &str = "plain.kubevirt.io";

impl IntoResponse for ApiStatus {
    fn into_response(self) -> Response {
        let code = StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        (code, axum::Json(self.to_json())).into_response()
    }
}

fn decode_body<T: DeserializeOwned + Default>(body: &Bytes) -> Result<T, ApiStatus> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    serde_json::from_slice(body)
        .map_err(|e| ApiStatus::bad_request(format!("Can not unmarshal Request body to struct, error: {e}")))
}

pub(crate) fn check_version(version: &str) -> Result<(), ApiStatus> {
    if VERSIONS.contains(&version) {
        Ok(())
    } else {
        Err(ApiStatus {
            code: 404,
            reason: "NotFound",
            message: format!("version {version} is not served"),
            details: None,
        })
    }
}

fn read_failed(err: &ClusterError) -> ApiStatus {
    ApiStatus::internal(err)
}

fn write_failed(name: &str, err: &ClusterError) -> ApiStatus {
    match err {
        ClusterError::Conflict(message) => ApiStatus::conflict(VM, name, message),
        ClusterError::Failed(_) => ApiStatus::internal(err),
    }
}

async fn execute<C: SubresourceCluster>(
    cluster: &C,
    ns: &str,
    name: &str,
    plan: Plan,
    dry_run: bool,
) -> Result<(), ApiStatus> {
    if let Some(patch) = &plan.vmi_patch {
        cluster
            .patch(PatchTarget::Vmi, ns, name, patch, dry_run)
            .await
            .map_err(|e| ApiStatus::internal(&e))?;
    }
    if let Some(patch) = &plan.vm_patch {
        cluster
            .patch(PatchTarget::Vm, ns, name, patch, dry_run)
            .await
            .map_err(|e| write_failed(name, &e))?;
    }
    if let Some(patch) = &plan.vm_status_patch {
        cluster
            .patch(PatchTarget::VmStatus, ns, name, patch, dry_run)
            .await
            .map_err(|e| write_failed(name, &e))?;
    }
    if let Some(uid) = &plan.delete_launcher_pod_of {
        cluster
            .delete_launcher_pod(ns, uid, dry_run)
            .await
            .map_err(|e| ApiStatus::internal(&e))?;
    }
    Ok(())
}

/// What authorization looks at in a request.
pub(crate) struct Caller {
    method: Method,
    path: String,
    headers: HeaderMap,
    peer: bool,
}

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for Caller {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut http::request::Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(Self {
            method: parts.method.clone(),
            path: parts.uri.path().to_owned(),
            headers: parts.headers.clone(),
            peer: parts.extensions.get::<PeerCertificate>().is_some_and(|p| p.0),
        })
    }
}

/// Authenticates and authorizes a subresource request (401 when refused, as upstream).
pub(crate) async fn authorize<C: SubresourceCluster, N: NodeConnector>(
    state: &AppState<C, N>,
    cluster: &C,
    caller: &Caller,
) -> Result<(), ApiStatus> {
    if state.authentication == Authentication::Disabled || authorize::needs_no_authorization(&caller.path) {
        return Ok(());
    }
    let unauthorized = |reason: String| ApiStatus {
        code: 401,
        reason: "Unauthorized",
        message: format!("unauthorized: {reason}"),
        details: None,
    };
    if !caller.peer {
        return Err(unauthorized("request is not authenticated".to_owned()));
    }
    let spec = authorize::review_spec(&caller.method, &caller.path, &caller.headers).map_err(unauthorized)?;
    match cluster.review_access(&spec).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(reason)) => Err(unauthorized(reason)),
        Err(e) => Err(ApiStatus::internal(&e)),
    }
}

/// `PUT /apis/subresources.kubevirt.io/{version}/namespaces/{ns}/virtualmachines/{name}/{action}`.
pub(crate) async fn vm_action<C: SubresourceCluster, N: NodeConnector>(
    State(state): State<Arc<AppState<C, N>>>,
    Path((version, ns, name, action)): Path<(String, String, String, String)>,
    caller: Caller,
    body: Bytes,
) -> Response {
    match vm_action_inner(&state, &caller, &version, &ns, &name, &action, &body).await {
        Ok(()) => StatusCode::ACCEPTED.into_response(),
        Err(status) => status.into_response(),
    }
}

/// The body of a VM subresource request.
enum Options {
    Start(StartOptions),
    Stop(StopOptions),
    Restart(RestartOptions),
}

async fn vm_action_inner<C: SubresourceCluster, N: NodeConnector>(
    state: &AppState<C, N>,
    caller: &Caller,
    version: &str,
    ns: &str,
    name: &str,
    action: &str,
    body: &Bytes,
) -> Result<(), ApiStatus> {
    check_version(version)?;
    if action == "migrate" {
        let options: kubevirt_api::v1::MigrateOptions = decode_body(body)?;
        let cluster = state.cluster()?;
        authorize(state, cluster.as_ref(), caller).await?;
        return super::migrate::migrate(cluster.as_ref(), ns, name, &options).await;
    }
    let options = match action {
        "start" => Options::Start(decode_body(body)?),
        "stop" => Options::Stop(decode_body(body)?),
        "restart" => {
            let options: RestartOptions = decode_body(body)?;
            lifecycle::check_restart_options(&options)?;
            Options::Restart(options)
        }
        other => {
            return Err(ApiStatus::bad_request(format!(
                "unknown virtualmachines subresource {other:?}"
            )));
        }
    };
    let cluster = state.cluster()?;
    authorize(state, cluster.as_ref(), caller).await?;
    let vm = cluster
        .get_vm(ns, name)
        .await
        .map_err(|e| read_failed(&e))?
        .ok_or_else(|| ApiStatus::not_found(VM, name))?;
    let vmi = cluster.get_vmi(ns, name).await.map_err(|e| read_failed(&e))?;
    let (plan, dry_run) = match &options {
        Options::Start(o) => (lifecycle::plan_start(&vm, vmi.as_ref(), o)?, is_dry_run(&o.dry_run)),
        Options::Stop(o) => (lifecycle::plan_stop(&vm, vmi.as_ref(), o)?, is_dry_run(&o.dry_run)),
        Options::Restart(o) => (lifecycle::plan_restart(&vm, vmi.as_ref(), o)?, is_dry_run(&o.dry_run)),
    };
    tracing::info!(
        namespace = ns,
        name,
        action,
        dry_run,
        "virtual machine subresource request"
    );
    execute(cluster.as_ref(), ns, name, plan, dry_run).await
}

/// `PUT .../virtualmachineinstances/{name}/pause` and `.../unpause`.
pub(crate) async fn vmi_action<C: SubresourceCluster, N: NodeConnector>(
    State(state): State<Arc<AppState<C, N>>>,
    Path((version, ns, name, action)): Path<(String, String, String, String)>,
    caller: Caller,
    body: Bytes,
) -> Response {
    let result = async {
        check_version(&version)?;
        let action = match action.as_str() {
            "pause" => VmiAction::Pause,
            "unpause" => VmiAction::Unpause,
            other => {
                return Err(ApiStatus::bad_request(format!(
                    "unknown virtualmachineinstances subresource {other:?}"
                )));
            }
        };
        let options: PauseOptions = decode_body(&body)?;
        let (cluster, vmi) = authorized_vmi(&state, &caller, &ns, &name).await?;
        match action {
            VmiAction::Pause => lifecycle::check_pause(&vmi)?,
            VmiAction::Unpause => lifecycle::check_unpause(&vmi)?,
        }
        if is_dry_run(&options.dry_run) {
            return Ok(());
        }
        let address = handler_of(cluster.as_ref(), &vmi).await?;
        state
            .node
            .vmi_action(&address, &ns, &name, action)
            .await
            .map_err(|e| ApiStatus::internal(&e))
    }
    .await;
    match result {
        Ok(()) => StatusCode::ACCEPTED.into_response(),
        Err(status) => status.into_response(),
    }
}

/// The cluster, once the caller is authorized, and the VMI the request is about (404 when none).
async fn authorized_vmi<C: SubresourceCluster, N: NodeConnector>(
    state: &AppState<C, N>,
    caller: &Caller,
    ns: &str,
    name: &str,
) -> Result<(Arc<C>, kubevirt_api::v1::VirtualMachineInstance), ApiStatus> {
    let cluster = state.cluster()?;
    authorize(state, cluster.as_ref(), caller).await?;
    let vmi = cluster
        .get_vmi(ns, name)
        .await
        .map_err(|e| read_failed(&e))?
        .ok_or_else(|| ApiStatus::not_found(VMI, name))?;
    Ok((cluster, vmi))
}

async fn handler_of<C: SubresourceCluster>(
    cluster: &C,
    vmi: &kubevirt_api::v1::VirtualMachineInstance,
) -> Result<String, ApiStatus> {
    let node = vmi
        .status
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .unwrap_or_default();
    if node.is_empty() {
        return Err(ApiStatus::bad_request("the VMI is not scheduled to a node"));
    }
    cluster
        .handler_address(&node)
        .await
        .map_err(|e| read_failed(&e))?
        .ok_or_else(|| ApiStatus::unavailable(format!("no virt-handler is running on node {node}")))
}

/// `GET .../virtualmachineinstances/{name}/console`: a websocket piped to the node's handler.
pub(crate) async fn console<C: SubresourceCluster, N: NodeConnector>(
    State(state): State<Arc<AppState<C, N>>>,
    Path((version, ns, name)): Path<(String, String, String)>,
    caller: Caller,
    upgrade: WebSocketUpgrade,
) -> Response {
    let stream = async {
        check_version(&version)?;
        let (cluster, vmi) = authorized_vmi(&state, &caller, &ns, &name).await?;
        lifecycle::check_console(&vmi)?;
        let address = handler_of(cluster.as_ref(), &vmi).await?;
        state
            .node
            .console(&address, &ns, &name)
            .await
            .map_err(|e| ApiStatus::internal(&e))
    }
    .await;
    match stream {
        Ok(stream) => upgrade
            .protocols([CONSOLE_SUBPROTOCOL])
            .on_upgrade(move |socket| pipe(socket, stream)),
        Err(status) => status.into_response(),
    }
}

/// Copies bytes both ways until either side closes.
async fn pipe(mut socket: WebSocket, stream: ConsoleStream) {
    let ConsoleStream {
        to_guest,
        mut from_guest,
    } = stream;
    loop {
        tokio::select! {
            incoming = socket.recv() => match incoming {
                Some(Ok(Message::Binary(bytes))) => {
                    if to_guest.send(bytes.to_vec()).await.is_err() { break; }
                }
                Some(Ok(Message::Text(text))) => {
                    if to_guest.send(text.as_bytes().to_vec()).await.is_err() { break; }
                }
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
                Some(Ok(Message::Close(_)) | Err(_)) | None => break,
            },
            outgoing = from_guest.recv() => {
                let Some(bytes) = outgoing else {
                    let _ = socket.send(Message::Close(None)).await;
                    break;
                };
                if socket.send(Message::Binary(bytes.into())).await.is_err() { break; }
            }
        }
    }
}
