//! virt-handler's notify server (`kubevirt.notify.v1.Notify` on `<share>/domain-notify.sock`):
//! launchers push domain events and Kubernetes events here, through the notify pipe in their pod.
//! Events are decoded and handed to the reconciler; a malformed one is refused with
//! `InvalidArgument`, never a crash.

use cmd_protocol::domain::DomainSnapshot;
use cmd_protocol::notify::notify_info_server::{NotifyInfo, NotifyInfoServer};
use cmd_protocol::notify::notify_server::{Notify, NotifyServer};
use cmd_protocol::notify::{DomainEventRequest, K8sEventRequest, NotifyInfoRequest, NotifyInfoResponse, Response};
use cmd_protocol::version::SUPPORTED_NOTIFY_VERSIONS;
use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;
use tonic::{Request, Status};

/// The watch event types a launcher may send.
const EVENT_TYPES: [&str; 4] = ["ADDED", "MODIFIED", "DELETED", "ERROR"];

/// One domain event from a launcher.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DomainNotification {
    /// `ADDED`, `MODIFIED`, `DELETED` or `ERROR`.
    pub kind: String,
    /// The domain.
    pub snapshot: DomainSnapshot,
}

/// A Kubernetes event a launcher asks the handler to record about its VMI.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LauncherK8sEvent {
    /// The VMI's `namespace/name`.
    pub vmi_key: String,
    /// `Normal` or `Warning`.
    pub event_type: String,
    /// The reason.
    pub reason: String,
    /// The message.
    pub message: String,
}

/// Where decoded notifications go.
#[derive(Clone, Debug)]
pub struct NotifySink {
    /// Domain events.
    pub domains: UnboundedSender<DomainNotification>,
    /// Kubernetes events.
    pub k8s: UnboundedSender<LauncherK8sEvent>,
}

/// Decodes a domain event; every field is checked.
pub fn decode_domain_event(request: &DomainEventRequest) -> Result<DomainNotification, String> {
    if !EVENT_TYPES.contains(&request.event_type.as_str()) {
        return Err(format!("unknown event type {:?}", request.event_type));
    }
    let snapshot: DomainSnapshot =
        serde_json::from_slice(&request.domain_json).map_err(|e| format!("invalid domain JSON: {e}"))?;
    if snapshot.metadata.namespace.is_empty() || snapshot.metadata.name.is_empty() {
        return Err("the domain has no name or namespace".to_owned());
    }
    Ok(DomainNotification {
        kind: request.event_type.clone(),
        snapshot,
    })
}

/// Decodes a Kubernetes event (a core/v1 Event as JSON, about the VMI).
pub fn decode_k8s_event(request: &K8sEventRequest) -> Result<LauncherK8sEvent, String> {
    let event: k8s_openapi::api::core::v1::Event =
        serde_json::from_slice(&request.event_json).map_err(|e| format!("invalid event JSON: {e}"))?;
    let object = &event.involved_object;
    let (Some(namespace), Some(name)) = (object.namespace.as_deref(), object.name.as_deref()) else {
        return Err("the event names no involved object".to_owned());
    };
    Ok(LauncherK8sEvent {
        vmi_key: format!("{namespace}/{name}"),
        event_type: event.type_.unwrap_or_else(|| "Normal".to_owned()),
        reason: event.reason.unwrap_or_default(),
        message: event.message.unwrap_or_default(),
    })
}

/// Decodes untrusted bytes as either notify request, as the server would receive them. Never
/// panics (a fuzz target and a property test drive it); `Ok` only for a fully valid request.
pub fn decode_untrusted(bytes: &[u8]) -> Result<(), String> {
    let domain = <DomainEventRequest as prost::Message>::decode(bytes).map_err(|e| e.to_string());
    let k8s = <K8sEventRequest as prost::Message>::decode(bytes).map_err(|e| e.to_string());
    match (
        domain.and_then(|r| decode_domain_event(&r)),
        k8s.and_then(|r| decode_k8s_event(&r)),
    ) {
        (Ok(_), _) | (_, Ok(_)) => Ok(()),
        (Err(e), _) => Err(e),
    }
}

fn ok() -> tonic::Response<Response> {
    tonic::Response::new(Response {
        success: true,
        message: String::new(),
    })
}

#[tonic::async_trait]
impl Notify for NotifySink {
    async fn handle_domain_event(
        &self,
        request: Request<DomainEventRequest>,
    ) -> Result<tonic::Response<Response>, Status> {
        let notification = decode_domain_event(request.get_ref()).map_err(Status::invalid_argument)?;
        self.domains
            .send(notification)
            .map_err(|_| Status::unavailable("virt-handler is stopping"))?;
        Ok(ok())
    }

    async fn handle_k8s_event(&self, request: Request<K8sEventRequest>) -> Result<tonic::Response<Response>, Status> {
        let event = decode_k8s_event(request.get_ref()).map_err(Status::invalid_argument)?;
        self.k8s
            .send(event)
            .map_err(|_| Status::unavailable("virt-handler is stopping"))?;
        Ok(ok())
    }
}

#[tonic::async_trait]
impl NotifyInfo for NotifySink {
    async fn info(&self, _request: Request<NotifyInfoRequest>) -> Result<tonic::Response<NotifyInfoResponse>, Status> {
        Ok(tonic::Response::new(NotifyInfoResponse {
            supported_notify_versions: SUPPORTED_NOTIFY_VERSIONS.to_vec(),
        }))
    }
}

/// Serves the notify API on an already bound `incoming` socket (at `socket`) until `stop`; the
/// socket is removed afterwards.
pub async fn serve_incoming(
    incoming: tokio_stream::wrappers::UnixListenerStream,
    socket: std::path::PathBuf,
    sink: NotifySink,
    stop: CancellationToken,
) {
    let outcome = tonic::transport::Server::builder()
        .add_service(NotifyServer::new(sink.clone()))
        .add_service(NotifyInfoServer::new(sink))
        .serve_with_incoming_shutdown(incoming, stop.cancelled_owned())
        .await;
    let _ = std::fs::remove_file(&socket);
    if let Err(error) = outcome {
        tracing::warn!(error = %error, "the notify server failed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(kind: &str, json: &[u8]) -> DomainEventRequest {
        DomainEventRequest {
            domain_json: json.to_vec(),
            status_json: Vec::new(),
            event_type: kind.to_owned(),
        }
    }

    #[test]
    fn a_well_formed_event_decodes_and_malformed_ones_are_refused() {
        let json = br#"{"metadata":{"name":"default_vm","namespace":"default","uid":"u"},"spec":{"hasAcpi":true},"status":{"status":"Running","reason":"Booted"}}"#;
        let decoded = decode_domain_event(&request("ADDED", json)).expect("valid");
        assert_eq!(decoded.snapshot.vmi_key(), "default/vm");
        assert!(decode_domain_event(&request("EXPLODED", json)).is_err());
        assert!(decode_domain_event(&request("ADDED", b"\xff{not json")).is_err());
        let nameless = br#"{"metadata":{"name":"","namespace":"","uid":""},"spec":{"hasAcpi":false},"status":{"status":"Running","reason":"Booted"}}"#;
        assert!(decode_domain_event(&request("ADDED", nameless)).is_err());
    }

    #[test]
    fn k8s_events_need_their_involved_object() {
        let event = br#"{"metadata":{},"involvedObject":{"namespace":"ns","name":"vm"},"type":"Warning","reason":"Boom","message":"m"}"#;
        let decoded = decode_k8s_event(&K8sEventRequest {
            event_json: event.to_vec(),
        })
        .expect("valid");
        assert_eq!(decoded.vmi_key, "ns/vm");
        assert_eq!(decoded.reason, "Boom");
        assert!(
            decode_k8s_event(&K8sEventRequest {
                event_json: br#"{"metadata":{},"involvedObject":{}}"#.to_vec()
            })
            .is_err()
        );
    }
}
