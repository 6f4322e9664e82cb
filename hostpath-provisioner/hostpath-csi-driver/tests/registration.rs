//! The kubelet's side of registration, as a gRPC client on the registration socket: the driver
//! says it is a CSI plugin of its name at its endpoint, hears the kubelet's answer, and removes
//! its socket when it stops.

use hostpath_csi_driver::registration::{self, Registrar};
use hostpath_csi_driver::registration_api::registration_client::RegistrationClient;
use hostpath_csi_driver::registration_api::{InfoRequest, RegistrationStatus};
use hyper_util::rt::TokioIo;
use tonic::transport::Endpoint;

#[tokio::test]
async fn the_kubelet_learns_the_driver_and_its_endpoint() {
    let dir = tempfile::tempdir().expect("tempdir");
    let socket = registration::socket_in(dir.path(), "kubevirt.io.hostpath-provisioner");
    assert!(socket.ends_with("kubevirt.io.hostpath-provisioner-reg.sock"));
    let stop = tokio_util::sync::CancellationToken::new();
    let registrar = Registrar {
        driver: "kubevirt.io.hostpath-provisioner".to_owned(),
        endpoint: "/var/lib/kubelet/plugins/csi-hostpath/csi.sock".to_owned(),
    };
    let server = tokio::spawn(registration::serve(registrar, socket.clone(), stop.clone()));
    let path = socket.clone();
    let channel = tokio::time::timeout(std::time::Duration::from_secs(30), async {
        loop {
            let path = path.clone();
            let connected = Endpoint::try_from("http://registration")
                .expect("endpoint")
                .connect_with_connector(tower::service_fn(move |_| {
                    let path = path.clone();
                    async move { tokio::net::UnixStream::connect(path).await.map(TokioIo::new) }
                }))
                .await;
            match connected {
                Ok(channel) => return channel,
                Err(_) => tokio::task::yield_now().await,
            }
        }
    })
    .await
    .expect("the socket answers");
    let mut client = RegistrationClient::new(channel);
    let info = client.get_info(InfoRequest {}).await.expect("info").into_inner();
    assert_eq!(info.r#type, "CSIPlugin");
    assert_eq!(info.name, "kubevirt.io.hostpath-provisioner");
    assert_eq!(info.endpoint, "/var/lib/kubelet/plugins/csi-hostpath/csi.sock");
    assert_eq!(info.supported_versions, ["1.0.0"]);
    client
        .notify_registration_status(RegistrationStatus {
            plugin_registered: true,
            error: String::new(),
        })
        .await
        .expect("notified");
    stop.cancel();
    server.await.expect("task").expect("served");
    assert!(!socket.exists(), "the socket goes with the driver");
}
