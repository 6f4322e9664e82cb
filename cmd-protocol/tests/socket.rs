//! The protocol over a real unix socket: version negotiation, calls and their failures, and a
//! server that survives garbage on its socket.

use std::path::Path;
use std::sync::{Arc, Mutex};

use cmd_protocol::cmd::cmd_server::{Cmd, CmdServer};
use cmd_protocol::cmd::{
    DomainResponse, DomainStatsResponse, EmptyRequest, GuestInfoResponse, MigrationRequest, Response, Vmi, VmiRequest,
};
use cmd_protocol::cmd_info::cmd_info_server::{CmdInfo, CmdInfoServer};
use cmd_protocol::cmd_info::{CmdInfoRequest, CmdInfoResponse};
use cmd_protocol::transport::{CmdClient, TransportError, listen};
use tokio::io::AsyncWriteExt as _;
use tonic::{Request, Status};

/// A launcher double that records the calls it gets.
#[derive(Default, Clone)]
struct Recorder {
    calls: Arc<Mutex<Vec<String>>>,
}

fn ok() -> Response {
    Response {
        success: true,
        message: String::new(),
    }
}

impl Recorder {
    fn record(&self, call: &str, request: &VmiRequest) -> Result<tonic::Response<Response>, Status> {
        let vmi = request.vmi.as_ref().ok_or_else(|| Status::invalid_argument("no VMI"))?;
        let parsed: serde_json::Value =
            serde_json::from_slice(&vmi.vmi_json).map_err(|e| Status::invalid_argument(e.to_string()))?;
        self.calls
            .lock()
            .expect("calls")
            .push(format!("{call} {}", parsed["metadata"]["name"]));
        Ok(tonic::Response::new(ok()))
    }
}

#[tonic::async_trait]
impl Cmd for Recorder {
    async fn sync_virtual_machine(&self, r: Request<VmiRequest>) -> Result<tonic::Response<Response>, Status> {
        self.record("sync", r.get_ref())
    }
    async fn shutdown_virtual_machine(&self, r: Request<VmiRequest>) -> Result<tonic::Response<Response>, Status> {
        self.record("shutdown", r.get_ref())
    }
    async fn kill_virtual_machine(&self, r: Request<VmiRequest>) -> Result<tonic::Response<Response>, Status> {
        self.record("kill", r.get_ref())
    }
    async fn delete_virtual_machine(&self, _r: Request<VmiRequest>) -> Result<tonic::Response<Response>, Status> {
        Ok(tonic::Response::new(Response {
            success: false,
            message: "domain is busy".to_owned(),
        }))
    }
    async fn pause_virtual_machine(&self, r: Request<VmiRequest>) -> Result<tonic::Response<Response>, Status> {
        self.record("pause", r.get_ref())
    }
    async fn unpause_virtual_machine(&self, r: Request<VmiRequest>) -> Result<tonic::Response<Response>, Status> {
        self.record("unpause", r.get_ref())
    }
    async fn sync_migration_target(&self, r: Request<VmiRequest>) -> Result<tonic::Response<Response>, Status> {
        self.record("migration-target", r.get_ref())
    }
    async fn migrate_virtual_machine(&self, r: Request<MigrationRequest>) -> Result<tonic::Response<Response>, Status> {
        let options: cmd_protocol::migration::MigrationOptions =
            serde_json::from_slice(&r.get_ref().options).map_err(|e| Status::invalid_argument(e.to_string()))?;
        let vmi = VmiRequest {
            vmi: r.into_inner().vmi,
            options: None,
        };
        self.record(&format!("migrate {}", options.migration_uid), &vmi)
    }
    async fn cancel_virtual_machine_migration(
        &self,
        r: Request<VmiRequest>,
    ) -> Result<tonic::Response<Response>, Status> {
        self.record("cancel-migration", r.get_ref())
    }
    async fn ping(&self, _r: Request<EmptyRequest>) -> Result<tonic::Response<Response>, Status> {
        Ok(tonic::Response::new(ok()))
    }
    async fn get_domain(&self, _r: Request<EmptyRequest>) -> Result<tonic::Response<DomainResponse>, Status> {
        Ok(tonic::Response::new(DomainResponse {
            response: Some(ok()),
            domain: String::new(),
        }))
    }
    async fn get_domain_stats(
        &self,
        _r: Request<EmptyRequest>,
    ) -> Result<tonic::Response<DomainStatsResponse>, Status> {
        Err(Status::unimplemented("no stats in this double"))
    }
    async fn get_guest_info(&self, _r: Request<EmptyRequest>) -> Result<tonic::Response<GuestInfoResponse>, Status> {
        Err(Status::unimplemented("no agent in this double"))
    }
}

struct Versions(Vec<u32>);

#[tonic::async_trait]
impl CmdInfo for Versions {
    async fn info(&self, _r: Request<CmdInfoRequest>) -> Result<tonic::Response<CmdInfoResponse>, Status> {
        Ok(tonic::Response::new(CmdInfoResponse {
            supported_cmd_versions: self.0.clone(),
        }))
    }
}

fn serve(path: &Path, versions: Vec<u32>) -> Recorder {
    let recorder = Recorder::default();
    let incoming = listen(path).expect("listen");
    let service = recorder.clone();
    tokio::spawn(async move {
        tonic::transport::Server::builder()
            .add_service(CmdServer::new(service))
            .add_service(CmdInfoServer::new(Versions(versions)))
            .serve_with_incoming(incoming)
            .await
            .expect("serve");
    });
    recorder
}

fn request(name: &str) -> VmiRequest {
    let json = serde_json::json!({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
        "metadata": {"name": name}, "spec": {"domain": {"devices": {}}}});
    VmiRequest {
        vmi: Some(Vmi {
            vmi_json: serde_json::to_vec(&json).expect("json"),
        }),
        options: None,
    }
}

#[tokio::test]
async fn a_client_negotiates_then_calls_the_launcher() {
    let dir = tempfile::tempdir().expect("tempdir");
    let socket = dir.path().join("launcher-sock");
    let recorder = serve(&socket, vec![1]);
    let mut client = CmdClient::connect(&socket).await.expect("connect and negotiate");
    client.ping().await.expect("ping");
    client.sync(request("web")).await.expect("sync");
    client.shutdown(request("web")).await.expect("shutdown");
    client.kill(request("web")).await.expect("kill");
    client
        .sync_migration_target(request("web"))
        .await
        .expect("migration target");
    let options = serde_json::json!({
        "migrationUid": "m-1", "completionTimeoutPerGib": 150, "progressTimeoutSeconds": 150
    });
    client
        .migrate(MigrationRequest {
            vmi: request("web").vmi,
            options: serde_json::to_vec(&options).expect("json"),
        })
        .await
        .expect("migrate");
    client.cancel_migration(request("web")).await.expect("cancel");
    assert_eq!(client.domain().await.expect("get domain"), None, "no domain yet");
    assert_eq!(
        *recorder.calls.lock().expect("calls"),
        [
            "sync \"web\"",
            "shutdown \"web\"",
            "kill \"web\"",
            "migration-target \"web\"",
            "migrate m-1 \"web\"",
            "cancel-migration \"web\""
        ]
    );
}

#[tokio::test]
async fn failures_come_back_as_errors_naming_the_call() {
    let dir = tempfile::tempdir().expect("tempdir");
    let socket = dir.path().join("launcher-sock");
    serve(&socket, vec![1]);
    let mut client = CmdClient::connect(&socket).await.expect("connect");
    let refused = client.delete(request("web")).await.expect_err("success: false");
    assert_eq!(refused.to_string(), "DeleteVirtualMachine failed: domain is busy");
    let invalid = client
        .sync(VmiRequest {
            vmi: None,
            options: None,
        })
        .await
        .expect_err("no VMI");
    assert_eq!(invalid.to_string(), "SyncVirtualMachine failed: no VMI");
}

#[tokio::test]
async fn a_launcher_without_a_common_version_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let socket = dir.path().join("launcher-sock");
    serve(&socket, vec![7, 8]);
    let err = CmdClient::connect(&socket).await.expect_err("no common version");
    assert!(
        matches!(err, TransportError::Version { ref theirs, .. } if theirs == &[7, 8]),
        "{err}"
    );
}

#[tokio::test]
async fn a_missing_socket_is_a_connect_error_naming_it() {
    let err = CmdClient::connect(Path::new("/nonexistent/launcher-sock"))
        .await
        .expect_err("nothing there");
    assert!(err.to_string().contains("/nonexistent/launcher-sock"), "{err}");
}

#[tokio::test]
async fn garbage_on_the_socket_does_not_take_the_server_down() {
    let dir = tempfile::tempdir().expect("tempdir");
    let socket = dir.path().join("launcher-sock");
    serve(&socket, vec![1]);
    // Wait for the listener, then send bytes that are not HTTP/2, and an HTTP/2 preface followed
    // by a malformed frame.
    let _ = CmdClient::connect(&socket).await.expect("server up");
    for garbage in [
        b"GET / HTTP/1.1\r\n\r\n".to_vec(),
        [b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".as_slice(), &[0xff; 64]].concat(),
    ] {
        let mut raw = tokio::net::UnixStream::connect(&socket).await.expect("raw connect");
        let _ = raw.write_all(&garbage).await;
        drop(raw);
    }
    let mut client = CmdClient::connect(&socket).await.expect("still serving");
    client.ping().await.expect("ping after garbage");
}

proptest::proptest! {
    #[test]
    fn decoding_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..512)) {
        let _ = cmd_protocol::domain::decode_vmi_request(&bytes);
    }
}
