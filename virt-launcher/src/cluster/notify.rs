//! Domain events from the launcher to virt-handler (`kubevirt.notify.v1.Notify`), as upstream's
//! notify client: connect lazily, negotiate the version, and retry a failed event every second for
//! up to 20 s, reconnecting each time, so a restarting handler misses nothing.

use std::path::PathBuf;
use std::time::Duration;

use cmd_protocol::domain::DomainSnapshot;
use cmd_protocol::notify::notify_client::NotifyClient;
use cmd_protocol::notify::notify_info_client::NotifyInfoClient;
use cmd_protocol::notify::{DomainEventRequest, NotifyInfoRequest};
use cmd_protocol::transport::{SHORT_TIMEOUT, TransportError, connect};
use cmd_protocol::version::{SUPPORTED_NOTIFY_VERSIONS, highest_common};
use tonic::transport::Channel;
use tracing::{debug, warn};

/// How long one event is retried.
pub const RETRY_WINDOW: Duration = Duration::from_secs(20);
/// Pause between attempts.
pub const RETRY_INTERVAL: Duration = Duration::from_secs(1);

/// Watch event types, as Kubernetes names them.
pub mod event_type {
    /// The domain appeared (defined or started).
    pub const ADDED: &str = "ADDED";
    /// Anything else, including the final event of a domain that is gone.
    pub const MODIFIED: &str = "MODIFIED";
}

/// Sends domain events to the handler's socket.
#[derive(Debug)]
pub struct Notifier {
    socket: PathBuf,
    client: Option<NotifyClient<Channel>>,
}

impl Notifier {
    /// A notifier for the handler socket at `socket`; nothing connects until the first event.
    #[must_use]
    pub fn new(socket: PathBuf) -> Self {
        Self { socket, client: None }
    }

    async fn client(&mut self) -> Result<&mut NotifyClient<Channel>, TransportError> {
        if self.client.is_none() {
            let channel = connect(&self.socket).await?;
            let mut request = tonic::Request::new(NotifyInfoRequest {});
            request.set_timeout(SHORT_TIMEOUT);
            let theirs = NotifyInfoClient::new(channel.clone())
                .info(request)
                .await
                .map_err(|status| TransportError::Call {
                    call: "NotifyInfo",
                    message: status.message().to_owned(),
                })?
                .into_inner()
                .supported_notify_versions;
            if highest_common(&SUPPORTED_NOTIFY_VERSIONS, &theirs).is_none() {
                return Err(TransportError::Version {
                    path: self.socket.clone(),
                    theirs,
                });
            }
            self.client = Some(NotifyClient::new(channel));
        }
        self.client.as_mut().ok_or_else(|| TransportError::Call {
            call: "Notify",
            message: "no client".to_owned(),
        })
    }

    async fn send_once(&mut self, request: DomainEventRequest) -> Result<(), TransportError> {
        let client = self.client().await?;
        let mut call = tonic::Request::new(request);
        call.set_timeout(SHORT_TIMEOUT);
        let reply = client
            .handle_domain_event(call)
            .await
            .map_err(|status| TransportError::Call {
                call: "HandleDomainEvent",
                message: status.message().to_owned(),
            })?
            .into_inner();
        if reply.success {
            Ok(())
        } else {
            Err(TransportError::Call {
                call: "HandleDomainEvent",
                message: reply.message,
            })
        }
    }

    /// Sends one event, retrying within [`RETRY_WINDOW`]; gives up (with a warning) after that.
    pub async fn send(&mut self, snapshot: &DomainSnapshot, event_type: &str) -> Result<(), TransportError> {
        let domain_json = serde_json::to_vec(snapshot).map_err(|e| TransportError::Call {
            call: "HandleDomainEvent",
            message: e.to_string(),
        })?;
        let request = DomainEventRequest {
            domain_json,
            status_json: Vec::new(),
            event_type: event_type.to_owned(),
        };
        let deadline = tokio::time::Instant::now() + RETRY_WINDOW;
        loop {
            match self.send_once(request.clone()).await {
                Ok(()) => {
                    debug!(event_type, state = %snapshot.status.status, "domain event sent");
                    return Ok(());
                }
                Err(error) if tokio::time::Instant::now() + RETRY_INTERVAL < deadline => {
                    debug!(error = %error, "cannot send a domain event yet; retrying");
                    self.client = None;
                    tokio::time::sleep(RETRY_INTERVAL).await;
                }
                Err(error) => {
                    warn!(error = %error, event_type, "giving up on a domain event");
                    self.client = None;
                    return Err(error);
                }
            }
        }
    }
}
