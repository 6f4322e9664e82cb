//! The three services over a fake node: what each request does to the node, and each refusal's
//! code and message.

use std::collections::HashMap;
use std::sync::Arc;

use pretty_assertions::assert_eq;
use tonic::{Code, Request};

use crate::controller::{ControllerService, rounded};
use crate::csi::controller_server::Controller as _;
use crate::csi::node_server::Node as _;
use crate::csi::volume_capability::{AccessMode, AccessType, BlockVolume, MountVolume};
use crate::csi::{
    CreateVolumeRequest, DeleteVolumeRequest, GetCapacityRequest, NodeGetVolumeStatsRequest, NodePublishVolumeRequest,
    NodeUnpublishVolumeRequest, Topology, TopologyRequirement, VolumeCapability,
};
use crate::host::Space;
use crate::host::fake::FakeHost;
use crate::node::NodeService;
use crate::pools::Pools;

const GIB: u64 = 1 << 30;
const GIB_I64: i64 = 1 << 30;

fn host() -> Arc<FakeHost> {
    Arc::new(FakeHost::with(
        &["/pools/local", "/pools/legacy"],
        Space {
            total: 20 * GIB + 12345,
            available: 5 * GIB,
            free: 6 * GIB,
            inodes: 1000,
            inodes_free: 900,
        },
    ))
}

fn pools() -> Pools {
    Pools::parse(r#"[{"name":"local","path":"/pools/local"},{"name":"legacy","path":"/pools/legacy"}]"#).expect("pools")
}

fn controller(host: &Arc<FakeHost>) -> ControllerService<FakeHost> {
    ControllerService {
        node_id: "node1".to_owned(),
        pools: pools(),
        host: Arc::clone(host),
    }
}

fn node(host: &Arc<FakeHost>) -> NodeService<FakeHost> {
    NodeService {
        node_id: "node1".to_owned(),
        pools: pools(),
        host: Arc::clone(host),
    }
}

fn mount() -> VolumeCapability {
    VolumeCapability {
        access_type: Some(AccessType::Mount(MountVolume::default())),
        access_mode: Some(AccessMode { mode: 1 }),
    }
}

fn create(name: &str, node: &str) -> CreateVolumeRequest {
    CreateVolumeRequest {
        name: name.to_owned(),
        volume_capabilities: vec![mount()],
        parameters: HashMap::from([("storagePool".to_owned(), "local".to_owned())]),
        accessibility_requirements: Some(TopologyRequirement {
            requisite: vec![crate::controller::topology(node)],
            preferred: vec![],
        }),
        ..CreateVolumeRequest::default()
    }
}

#[tokio::test]
async fn a_volume_is_a_directory_in_its_pool_on_its_node_and_goes_with_it() {
    let host = host();
    let service = controller(&host);
    let volume = service
        .create_volume(Request::new(create("pvc-1", "node1")))
        .await
        .expect("created")
        .into_inner()
        .volume
        .expect("volume");
    assert_eq!(volume.volume_id, "pvc-1");
    assert_eq!(volume.capacity_bytes, 20 * (1 << 30), "the pool's size, in whole GiB");
    assert_eq!(volume.volume_context["storagePool"], "local");
    assert_eq!(
        volume.accessible_topology,
        [Topology {
            segments: HashMap::from([("topology.hostpath.csi/node".to_owned(), "node1".to_owned())])
        }]
    );
    assert!(host.state().dirs.contains(std::path::Path::new("/pools/local/pvc-1")));
    service
        .delete_volume(Request::new(DeleteVolumeRequest {
            volume_id: "pvc-1".to_owned(),
        }))
        .await
        .expect("deleted");
    assert!(!host.state().dirs.contains(std::path::Path::new("/pools/local/pvc-1")));
    // Deleting it again, or a volume never made, succeeds.
    service
        .delete_volume(Request::new(DeleteVolumeRequest {
            volume_id: "pvc-1".to_owned(),
        }))
        .await
        .expect("deleted again");
}

#[tokio::test]
async fn creates_are_refused_with_their_reason() {
    let host = host();
    let service = controller(&host);
    let block = VolumeCapability {
        access_type: Some(AccessType::Block(BlockVolume {})),
        ..mount()
    };
    let mut other_pool = create("pvc-2", "node1");
    other_pool
        .parameters
        .insert("storagePool".to_owned(), "fast".to_owned());
    let cases = [
        (create("", "node1"), "name missing in request"),
        (create("../etc", "node1"), "cannot name a directory"),
        (
            CreateVolumeRequest {
                volume_capabilities: vec![block],
                ..create("pvc-2", "node1")
            },
            "block volumes are not supported by the hostpath provisioner",
        ),
        (
            CreateVolumeRequest {
                volume_capabilities: vec![],
                ..create("pvc-2", "node1")
            },
            "volume capabilities missing in request",
        ),
        (create("pvc-2", "node2"), "not correct node"),
        (other_pool, "unable to locate path for storage pool fast"),
    ];
    for (request, message) in cases {
        let status = service.create_volume(Request::new(request)).await.expect_err(message);
        assert_eq!(status.code(), Code::InvalidArgument, "{message}");
        assert!(status.message().contains(message), "{}", status.message());
    }
    assert!(
        !host.state().dirs.iter().any(|d| d.starts_with("/pools/local/pvc-2")),
        "nothing made"
    );
}

#[tokio::test]
async fn the_capacity_is_the_pools_free_space() {
    let host = host();
    let answer = controller(&host)
        .get_capacity(Request::new(GetCapacityRequest::default()))
        .await
        .expect("capacity")
        .into_inner();
    assert_eq!(answer.available_capacity, 5 * (1 << 30));
    assert_eq!(answer.maximum_volume_size, Some(20 * GIB_I64 + 12345));
    assert_eq!(rounded(10 * GIB + 5), 10 * GIB);
    assert_eq!(rounded(11 * (1 << 20) + 5), 11 * (1 << 20));
    assert_eq!(rounded(5000), 5000);
}

#[tokio::test]
async fn a_published_volume_is_bind_mounted_and_unpublishing_leaves_its_files() {
    let host = host();
    controller(&host)
        .create_volume(Request::new(create("pvc-3", "node1")))
        .await
        .expect("created");
    let service = node(&host);
    let target = "/var/lib/kubelet/pods/uid/volumes/kubernetes.io~csi/pvc-3/mount";
    let publish = NodePublishVolumeRequest {
        volume_id: "pvc-3".to_owned(),
        target_path: target.to_owned(),
        volume_capability: Some(mount()),
        readonly: true,
        volume_context: HashMap::from([("storagePool".to_owned(), "local".to_owned())]),
        ..NodePublishVolumeRequest::default()
    };
    service
        .node_publish_volume(Request::new(publish.clone()))
        .await
        .expect("published");
    service
        .node_publish_volume(Request::new(publish))
        .await
        .expect("published again");
    assert_eq!(
        host.state().mounts.get(std::path::Path::new(target)),
        Some(&(std::path::PathBuf::from("/pools/local/pvc-3"), true))
    );
    let stats = service
        .node_get_volume_stats(Request::new(NodeGetVolumeStatsRequest {
            volume_id: "pvc-3".to_owned(),
            volume_path: target.to_owned(),
            staging_target_path: String::new(),
        }))
        .await
        .expect("stats")
        .into_inner();
    assert_eq!((stats.usage[0].used, stats.usage[1].used), (14 * GIB_I64 + 12345, 100));
    service
        .node_unpublish_volume(Request::new(NodeUnpublishVolumeRequest {
            volume_id: "pvc-3".to_owned(),
            target_path: target.to_owned(),
        }))
        .await
        .expect("unpublished");
    let node_state = host.state();
    assert!(node_state.mounts.is_empty());
    assert!(!node_state.dirs.contains(std::path::Path::new(target)));
    assert!(
        node_state.dirs.contains(std::path::Path::new("/pools/local/pvc-3")),
        "the volume stays"
    );
    assert!(
        !node_state
            .changes
            .iter()
            .any(|c| c.starts_with("rm -r /var/lib/kubelet")),
        "a target is never removed recursively: {:?}",
        node_state.changes
    );
}

#[tokio::test]
async fn a_block_publish_or_a_missing_volume_is_refused() {
    let host = host();
    let service = node(&host);
    let block = NodePublishVolumeRequest {
        volume_id: "pvc-4".to_owned(),
        target_path: "/t".to_owned(),
        volume_capability: Some(VolumeCapability {
            access_type: Some(AccessType::Block(BlockVolume {})),
            ..mount()
        }),
        ..NodePublishVolumeRequest::default()
    };
    let status = service
        .node_publish_volume(Request::new(block.clone()))
        .await
        .expect_err("block");
    assert_eq!(status.code(), Code::InvalidArgument);
    let missing = NodePublishVolumeRequest {
        volume_capability: Some(mount()),
        ..block
    };
    let status = service
        .node_publish_volume(Request::new(missing))
        .await
        .expect_err("missing");
    assert_eq!(status.code(), Code::NotFound);
    assert!(host.state().mounts.is_empty());
}

#[tokio::test]
async fn a_volumes_mount_options_reach_its_bind_mount_and_others_are_refused() {
    let host = host();
    controller(&host)
        .create_volume(Request::new(create("pvc-4", "node1")))
        .await
        .expect("created");
    let with_flags = |flags: &[&str], fs_type: &str| VolumeCapability {
        access_type: Some(AccessType::Mount(MountVolume {
            fs_type: fs_type.to_owned(),
            mount_flags: flags.iter().map(|f| (*f).to_owned()).collect(),
            volume_mount_group: String::new(),
        })),
        access_mode: Some(AccessMode { mode: 1 }),
    };
    let target = "/var/lib/kubelet/pods/uid/volumes/kubernetes.io~csi/pvc-4/mount";
    let publish = |capability: VolumeCapability| NodePublishVolumeRequest {
        volume_id: "pvc-4".to_owned(),
        target_path: target.to_owned(),
        volume_capability: Some(capability),
        volume_context: HashMap::from([("storagePool".to_owned(), "local".to_owned())]),
        ..NodePublishVolumeRequest::default()
    };
    let service = node(&host);
    let refused = service
        .node_publish_volume(Request::new(publish(with_flags(&["discard"], ""))))
        .await
        .expect_err("a flag a bind cannot take");
    assert_eq!(refused.code(), Code::InvalidArgument);
    assert!(
        refused.message().contains("mount_flags: \"discard\""),
        "{}",
        refused.message()
    );
    assert!(host.state().mounts.is_empty(), "nothing mounted");

    service
        .node_publish_volume(Request::new(publish(with_flags(&["nosuid", "noexec"], ""))))
        .await
        .expect("published");
    assert!(
        host.state()
            .changes
            .iter()
            .any(|c| c == &format!("mount --bind /pools/local/pvc-4 {target} nosuid,noexec")),
        "{:?}",
        host.state().changes
    );

    // The controller refuses them as early, when the volume is made.
    let mut request = create("pvc-5", "node1");
    request.volume_capabilities = vec![with_flags(&[], "xfs")];
    let refused = controller(&host)
        .create_volume(Request::new(request))
        .await
        .expect_err("a filesystem type");
    assert_eq!(refused.code(), Code::InvalidArgument);
    assert!(refused.message().contains("fs_type \"xfs\""), "{}", refused.message());
}

#[tokio::test]
async fn a_size_the_pool_cannot_give_is_out_of_range() {
    let host = host();
    let service = controller(&host);
    let sized = |required: i64, limit: i64| {
        let mut request = create("pvc-6", "node1");
        request.capacity_range = Some(crate::csi::CapacityRange {
            required_bytes: required,
            limit_bytes: limit,
        });
        request
    };
    // The pool is 20 GiB (rounded).
    for (required, limit, field) in [
        (21 * GIB_I64, 0, "required_bytes"),
        (GIB_I64, 2 * GIB_I64, "limit_bytes"),
    ] {
        let refused = service
            .create_volume(Request::new(sized(required, limit)))
            .await
            .expect_err("out of range");
        assert_eq!(refused.code(), Code::OutOfRange);
        assert!(
            refused.message().contains(&format!("capacity_range.{field}")),
            "{}",
            refused.message()
        );
    }
    assert!(
        !host.state().dirs.contains(std::path::Path::new("/pools/local/pvc-6")),
        "nothing made"
    );
    service
        .create_volume(Request::new(sized(10 * GIB_I64, 20 * GIB_I64)))
        .await
        .expect("within the pool");
}
