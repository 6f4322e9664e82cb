use std::sync::{Arc, Mutex, PoisonError};

use api::device_plugin_client::DevicePluginClient;
use api::registration_server::{Registration, RegistrationServer};

use super::*;

const TUN: HostDevice = DEVICES[1];

#[test]
fn a_device_is_offered_as_a_thousand_shares_named_after_it() {
    let healthy = device_list(&TUN, true);
    assert_eq!(healthy.devices.len(), DEVICE_COUNT);
    assert_eq!(healthy.devices[0].id, "tun0");
    assert_eq!(healthy.devices[999].id, "tun999");
    assert!(healthy.devices.iter().all(|d| d.health == "Healthy"));
    assert!(device_list(&TUN, false).devices.iter().all(|d| d.health == "Unhealthy"));
    assert_eq!(
        (TUN.resource(), TUN.socket()),
        ("devices.kubevirt.io/tun".to_owned(), "kubevirt-tun.sock".to_owned())
    );
}

#[test]
fn each_container_gets_the_device_node_read_write() {
    let request = api::AllocateRequest {
        container_requests: vec![
            api::ContainerAllocateRequest {
                devices_ids: vec!["tun3".to_owned()],
            },
            api::ContainerAllocateRequest {
                devices_ids: vec!["tun4".to_owned()],
            },
        ],
    };
    let response = allocation(&TUN, &request);
    assert_eq!(response.container_responses.len(), 2);
    for container in &response.container_responses {
        assert_eq!(
            container.devices,
            vec![api::DeviceSpec {
                container_path: "/dev/net/tun".to_owned(),
                host_path: "/dev/net/tun".to_owned(),
                permissions: "rw".to_owned(),
            }]
        );
    }
}

/// The kubelet's registration service, recording each request.
#[derive(Clone, Default)]
struct FakeKubelet {
    registered: Arc<Mutex<Vec<api::RegisterRequest>>>,
}

impl FakeKubelet {
    fn registrations(&self) -> Vec<api::RegisterRequest> {
        self.registered.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

#[tonic::async_trait]
impl Registration for FakeKubelet {
    async fn register(&self, request: Request<api::RegisterRequest>) -> Result<Response<api::Empty>, Status> {
        self.registered
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(request.into_inner());
        Ok(Response::new(api::Empty {}))
    }
}

async fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    for _ in 0..100 {
        if condition() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("timed out waiting until {what}");
}

#[tokio::test]
async fn the_plugin_registers_serves_its_shares_follows_health_and_registers_again() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("device-plugins");
    let dev_root = tmp.path().join("root");
    std::fs::create_dir_all(&dir).expect("dir");
    std::fs::create_dir_all(dev_root.join("dev/net")).expect("dev");
    std::fs::write(dev_root.join("dev/net/tun"), b"").expect("device node");
    let kubelet = FakeKubelet::default();
    let incoming = cmd_protocol::transport::listen(&dir.join(KUBELET_SOCKET)).expect("kubelet socket");
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(RegistrationServer::new(kubelet.clone()))
            .serve_with_incoming(incoming),
    );
    let stop = CancellationToken::new();
    let plugin = tokio::spawn(run_plugin(TUN, dir.clone(), dev_root.clone(), stop.clone()));

    wait_until("the plugin registers", || !kubelet.registrations().is_empty()).await;
    assert_eq!(
        kubelet.registrations()[0],
        api::RegisterRequest {
            version: "v1beta1".to_owned(),
            endpoint: "kubevirt-tun.sock".to_owned(),
            resource_name: "devices.kubevirt.io/tun".to_owned(),
            options: Some(api::DevicePluginOptions::default()),
        }
    );
    let channel = cmd_protocol::transport::connect(&dir.join("kubevirt-tun.sock"))
        .await
        .expect("plugin socket");
    let mut client = DevicePluginClient::new(channel);
    let mut updates = client
        .list_and_watch(api::Empty {})
        .await
        .expect("ListAndWatch")
        .into_inner();
    let first = updates.message().await.expect("stream").expect("first list");
    assert_eq!(first, device_list(&TUN, true));
    let allocated = client
        .allocate(api::AllocateRequest {
            container_requests: vec![api::ContainerAllocateRequest {
                devices_ids: vec!["tun7".to_owned()],
            }],
        })
        .await
        .expect("Allocate")
        .into_inner();
    assert_eq!(allocated.container_responses[0].devices[0].host_path, "/dev/net/tun");

    // The device node goes away: the shares turn unhealthy.
    std::fs::remove_file(dev_root.join("dev/net/tun")).expect("remove node");
    let second = tokio::time::timeout(Duration::from_secs(10), updates.message())
        .await
        .expect("an update in time")
        .expect("stream")
        .expect("second list");
    assert_eq!(second, device_list(&TUN, false));

    // The kubelet restarts and removes the plugin sockets: the plugin serves and registers again.
    std::fs::remove_file(dir.join("kubevirt-tun.sock")).expect("remove socket");
    wait_until("the plugin registers again", || kubelet.registrations().len() == 2).await;
    assert!(dir.join("kubevirt-tun.sock").exists());

    stop.cancel();
    plugin.await.expect("plugin stops");
    assert!(!dir.join("kubevirt-tun.sock").exists(), "the socket is removed at stop");
}
