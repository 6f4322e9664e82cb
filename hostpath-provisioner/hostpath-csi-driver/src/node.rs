//! CSI's Node service: a volume's directory bind-mounted on the pod's target path (read-only
//! when asked), unmounted and the target removed on unpublish, the pool's space and inodes as the
//! volume's stats, and the node's name as its id and topology.

use std::path::Path;
use std::sync::Arc;

use tonic::{Request, Response, Status};

use crate::controller::topology;
use crate::csi::node_server::Node;
use crate::csi::node_service_capability::{self, rpc};
use crate::csi::volume_capability::AccessType;
use crate::csi::volume_usage::Unit;
use crate::csi::{
    NodeGetCapabilitiesRequest, NodeGetCapabilitiesResponse, NodeGetInfoRequest, NodeGetInfoResponse,
    NodeGetVolumeStatsRequest, NodeGetVolumeStatsResponse, NodePublishVolumeRequest, NodePublishVolumeResponse,
    NodeServiceCapability, NodeUnpublishVolumeRequest, NodeUnpublishVolumeResponse, VolumeUsage,
};
use crate::host::Host;
use crate::mount_options::BindOptions;
use crate::pools::{Pools, valid_volume_id};

/// The Node service.
#[derive(Debug)]
pub struct NodeService<H> {
    /// This node's name.
    pub node_id: String,
    /// Its pools.
    pub pools: Pools,
    /// The node.
    pub host: Arc<H>,
}

fn internal(what: &str, path: &Path, error: &std::io::Error) -> Status {
    Status::internal(format!("{what} {}: {error}", path.display()))
}

fn to_i64(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

#[tonic::async_trait]
impl<H: Host> Node for NodeService<H> {
    async fn node_publish_volume(
        &self,
        request: Request<NodePublishVolumeRequest>,
    ) -> Result<Response<NodePublishVolumeResponse>, Status> {
        let request = request.into_inner();
        if request.volume_id.is_empty() {
            return Err(Status::invalid_argument("volume ID missing in request"));
        }
        if request.target_path.is_empty() {
            return Err(Status::invalid_argument("target path missing in request"));
        }
        let Some(capability) = &request.volume_capability else {
            return Err(Status::invalid_argument("volume capability missing in request"));
        };
        let options = match &capability.access_type {
            Some(AccessType::Mount(mount)) => BindOptions::from_mount(mount, request.readonly)?,
            Some(AccessType::Block(_)) => {
                return Err(Status::invalid_argument(
                    "cannot publish a non-block volume as block volume",
                ));
            }
            None => return Err(Status::invalid_argument("must have mount access type")),
        };
        if !valid_volume_id(&request.volume_id) {
            return Err(Status::not_found(format!("volume {} not found", request.volume_id)));
        }
        let pool = self
            .pools
            .named_by(&request.volume_context)
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        let source = pool.join(&request.volume_id);
        if !self.host.is_dir(&source) {
            return Err(Status::not_found(format!("volume {} not found", request.volume_id)));
        }
        let target = Path::new(&request.target_path);
        if self
            .host
            .is_mount_point(target)
            .map_err(|e| internal("reading the mounts of", target, &e))?
        {
            return Ok(Response::new(NodePublishVolumeResponse {}));
        }
        self.host.make_dir(target).map_err(|e| internal("making", target, &e))?;
        self.host
            .bind_mount(&source, target, options)
            .map_err(|e| internal("mounting the volume on", target, &e))?;
        tracing::info!(volume = %request.volume_id, target = %target.display(), options = options.describe(), "published the volume");
        Ok(Response::new(NodePublishVolumeResponse {}))
    }

    async fn node_unpublish_volume(
        &self,
        request: Request<NodeUnpublishVolumeRequest>,
    ) -> Result<Response<NodeUnpublishVolumeResponse>, Status> {
        let request = request.into_inner();
        if request.volume_id.is_empty() {
            return Err(Status::invalid_argument("volume ID missing in request"));
        }
        if request.target_path.is_empty() {
            return Err(Status::invalid_argument("target path missing in request"));
        }
        let target = Path::new(&request.target_path);
        if self
            .host
            .is_mount_point(target)
            .map_err(|e| internal("reading the mounts of", target, &e))?
        {
            self.host
                .unmount(target)
                .map_err(|e| internal("unmounting", target, &e))?;
        }
        // Only an empty directory is removed: the volume's files are never reached through it.
        self.host
            .remove_empty_dir(target)
            .map_err(|e| internal("removing", target, &e))?;
        tracing::info!(volume = %request.volume_id, target = %target.display(), "unpublished the volume");
        Ok(Response::new(NodeUnpublishVolumeResponse {}))
    }

    async fn node_get_volume_stats(
        &self,
        request: Request<NodeGetVolumeStatsRequest>,
    ) -> Result<Response<NodeGetVolumeStatsResponse>, Status> {
        let request = request.into_inner();
        if request.volume_id.is_empty() {
            return Err(Status::invalid_argument("volume ID missing in request"));
        }
        if request.volume_path.is_empty() {
            return Err(Status::invalid_argument("volume path missing in request"));
        }
        let path = Path::new(&request.volume_path);
        if !self.host.is_dir(path) {
            return Err(Status::not_found(format!("volume path {} not found", path.display())));
        }
        let space = self
            .host
            .space(path)
            .map_err(|e| internal("reading the space of", path, &e))?;
        Ok(Response::new(NodeGetVolumeStatsResponse {
            usage: vec![
                VolumeUsage {
                    available: to_i64(space.available),
                    total: to_i64(space.total),
                    used: to_i64(space.total.saturating_sub(space.free)),
                    unit: Unit::Bytes.into(),
                },
                VolumeUsage {
                    available: to_i64(space.inodes_free),
                    total: to_i64(space.inodes),
                    used: to_i64(space.inodes.saturating_sub(space.inodes_free)),
                    unit: Unit::Inodes.into(),
                },
            ],
        }))
    }

    async fn node_get_capabilities(
        &self,
        _: Request<NodeGetCapabilitiesRequest>,
    ) -> Result<Response<NodeGetCapabilitiesResponse>, Status> {
        Ok(Response::new(NodeGetCapabilitiesResponse {
            capabilities: vec![NodeServiceCapability {
                r#type: Some(node_service_capability::Type::Rpc(node_service_capability::Rpc {
                    r#type: rpc::Type::GetVolumeStats.into(),
                })),
            }],
        }))
    }

    async fn node_get_info(&self, _: Request<NodeGetInfoRequest>) -> Result<Response<NodeGetInfoResponse>, Status> {
        Ok(Response::new(NodeGetInfoResponse {
            node_id: self.node_id.clone(),
            max_volumes_per_node: 0,
            accessible_topology: Some(topology(&self.node_id)),
        }))
    }
}
