//! gRPC over unix sockets: binding a listener (atomically replacing a stale socket), connecting a
//! channel, and a command client that negotiates the version before use.

use std::path::{Path, PathBuf};
use std::time::Duration;

use hyper_util::rt::TokioIo;
use tokio_stream::wrappers::UnixListenerStream;
use tonic::transport::{Channel, Endpoint};

use crate::cmd::cmd_client::CmdClient as GeneratedCmdClient;
use crate::cmd::{EmptyRequest, MigrationRequest, Response, VmiRequest};
use crate::cmd_info::CmdInfoRequest;
use crate::cmd_info::cmd_info_client::CmdInfoClient;
use crate::version::{SUPPORTED_CMD_VERSIONS, highest_common};

/// Upstream's timeout for Info and other short calls.
pub const SHORT_TIMEOUT: Duration = Duration::from_secs(5);
/// Upstream's timeout for VMI commands.
pub const LONG_TIMEOUT: Duration = Duration::from_secs(20);

/// Why a call over the socket failed.
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    /// The socket could not be bound.
    #[error("cannot listen on {path}")]
    Listen {
        /// The socket.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The socket could not be reached.
    #[error("cannot connect to {path}")]
    Connect {
        /// The socket.
        path: PathBuf,
        /// Why.
        source: tonic::transport::Error,
    },
    /// The peer speaks none of our versions.
    #[error("the launcher at {path} speaks command versions {theirs:?}, this handler {SUPPORTED_CMD_VERSIONS:?}")]
    Version {
        /// The socket.
        path: PathBuf,
        /// What the peer speaks.
        theirs: Vec<u32>,
    },
    /// The call failed (including a peer that answered `success: false`).
    #[error("{call} failed: {message}")]
    Call {
        /// The RPC.
        call: &'static str,
        /// The status or the peer's message.
        message: String,
    },
}

/// Binds a unix socket at `path`, replacing a stale one left by a crashed process.
pub fn listen(path: &Path) -> Result<UnixListenerStream, TransportError> {
    let listen_error = |source| TransportError::Listen {
        path: path.to_owned(),
        source,
    };
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(listen_error(e)),
        _ => {}
    }
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(listen_error)?;
    }
    Ok(UnixListenerStream::new(
        crate::sockets::bind_unix(path).map_err(listen_error)?,
    ))
}

/// Connects a gRPC channel to the unix socket at `path`.
pub async fn connect(path: &Path) -> Result<Channel, TransportError> {
    let socket = path.to_owned();
    // The URI is required by tonic but unused: the connector dials the socket.
    let endpoint = Endpoint::from_static("http://launcher.invalid").connect_timeout(SHORT_TIMEOUT);
    endpoint
        .connect_with_connector(tower::service_fn(move |_| {
            let socket = socket.clone();
            async move { crate::sockets::connect_unix(&socket).await.map(TokioIo::new) }
        }))
        .await
        .map_err(|source| TransportError::Connect {
            path: path.to_owned(),
            source,
        })
}

/// A command client that has negotiated a common version with the launcher.
#[derive(Debug, Clone)]
pub struct CmdClient {
    inner: GeneratedCmdClient<Channel>,
    path: PathBuf,
}

impl CmdClient {
    /// Connects to the launcher at `path` and negotiates the command version.
    pub async fn connect(path: &Path) -> Result<Self, TransportError> {
        let channel = connect(path).await?;
        let mut info = CmdInfoClient::new(channel.clone());
        let mut request = tonic::Request::new(CmdInfoRequest {});
        request.set_timeout(SHORT_TIMEOUT);
        let theirs = info
            .info(request)
            .await
            .map_err(|status| TransportError::Call {
                call: "Info",
                message: status.message().to_owned(),
            })?
            .into_inner()
            .supported_cmd_versions;
        if highest_common(&SUPPORTED_CMD_VERSIONS, &theirs).is_none() {
            return Err(TransportError::Version {
                path: path.to_owned(),
                theirs,
            });
        }
        Ok(Self {
            inner: GeneratedCmdClient::new(channel),
            path: path.to_owned(),
        })
    }

    /// The socket this client talks to.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Health check.
    pub async fn ping(&mut self) -> Result<(), TransportError> {
        let mut request = tonic::Request::new(EmptyRequest {});
        request.set_timeout(SHORT_TIMEOUT);
        let reply = self.inner.ping(request).await;
        check("Ping", reply)
    }

    /// `SyncVirtualMachine`.
    pub async fn sync(&mut self, request: VmiRequest) -> Result<(), TransportError> {
        let reply = self.inner.sync_virtual_machine(long(request)).await;
        check("SyncVirtualMachine", reply)
    }

    /// `ShutdownVirtualMachine` (ACPI power button).
    pub async fn shutdown(&mut self, request: VmiRequest) -> Result<(), TransportError> {
        let reply = self.inner.shutdown_virtual_machine(long(request)).await;
        check("ShutdownVirtualMachine", reply)
    }

    /// `KillVirtualMachine`.
    pub async fn kill(&mut self, request: VmiRequest) -> Result<(), TransportError> {
        let reply = self.inner.kill_virtual_machine(long(request)).await;
        check("KillVirtualMachine", reply)
    }

    /// `PauseVirtualMachine`.
    pub async fn pause(&mut self, request: VmiRequest) -> Result<(), TransportError> {
        let reply = self.inner.pause_virtual_machine(long(request)).await;
        check("PauseVirtualMachine", reply)
    }

    /// `UnpauseVirtualMachine`.
    pub async fn unpause(&mut self, request: VmiRequest) -> Result<(), TransportError> {
        let reply = self.inner.unpause_virtual_machine(long(request)).await;
        check("UnpauseVirtualMachine", reply)
    }

    /// `DeleteVirtualMachine`.
    pub async fn delete(&mut self, request: VmiRequest) -> Result<(), TransportError> {
        let reply = self.inner.delete_virtual_machine(long(request)).await;
        check("DeleteVirtualMachine", reply)
    }

    /// `SyncMigrationTarget`: the target launcher prepares for the incoming migration.
    pub async fn sync_migration_target(&mut self, request: VmiRequest) -> Result<(), TransportError> {
        let reply = self.inner.sync_migration_target(long(request)).await;
        check("SyncMigrationTarget", reply)
    }

    /// `MigrateVirtualMachine`: the source launcher starts migrating.
    pub async fn migrate(&mut self, request: MigrationRequest) -> Result<(), TransportError> {
        let reply = self.inner.migrate_virtual_machine(long(request)).await;
        check("MigrateVirtualMachine", reply)
    }

    /// `CancelVirtualMachineMigration`: the source launcher aborts its migration.
    pub async fn cancel_migration(&mut self, request: VmiRequest) -> Result<(), TransportError> {
        let reply = self.inner.cancel_virtual_machine_migration(long(request)).await;
        check("CancelVirtualMachineMigration", reply)
    }

    /// `GetDomainStats`: the statistics JSON, or `None` when there is no domain.
    pub async fn domain_stats(&mut self) -> Result<Option<String>, TransportError> {
        let mut request = tonic::Request::new(EmptyRequest {});
        request.set_timeout(SHORT_TIMEOUT);
        let reply = self
            .inner
            .get_domain_stats(request)
            .await
            .map_err(|status| TransportError::Call {
                call: "GetDomainStats",
                message: status.message().to_owned(),
            })?
            .into_inner();
        check_response("GetDomainStats", reply.response)?;
        Ok(Some(reply.domain_stats).filter(|d| !d.is_empty()))
    }

    /// `GetDomain`: the domain JSON, or `None` when there is no domain.
    pub async fn domain(&mut self) -> Result<Option<String>, TransportError> {
        let mut request = tonic::Request::new(EmptyRequest {});
        request.set_timeout(SHORT_TIMEOUT);
        let reply = self
            .inner
            .get_domain(request)
            .await
            .map_err(|status| TransportError::Call {
                call: "GetDomain",
                message: status.message().to_owned(),
            })?
            .into_inner();
        check_response("GetDomain", reply.response)?;
        Ok(Some(reply.domain).filter(|d| !d.is_empty()))
    }
}

fn long<T>(message: T) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request.set_timeout(LONG_TIMEOUT);
    request
}

fn check(call: &'static str, reply: Result<tonic::Response<Response>, tonic::Status>) -> Result<(), TransportError> {
    let reply = reply.map_err(|status| TransportError::Call {
        call,
        message: status.message().to_owned(),
    })?;
    check_response(call, Some(reply.into_inner()))
}

fn check_response(call: &'static str, response: Option<Response>) -> Result<(), TransportError> {
    match response {
        Some(Response { success: true, .. }) => Ok(()),
        Some(Response { message, .. }) => Err(TransportError::Call { call, message }),
        None => Err(TransportError::Call {
            call,
            message: "empty response".to_owned(),
        }),
    }
}
