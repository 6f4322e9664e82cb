//! CSI's Controller service, run on every node (the external-provisioner beside it asks only its
//! own node, by topology): a volume is the directory `<pool>/<id>`, made on create and removed
//! on delete; its capacity is the pool's, as upstream reports it; the pool's free space is the
//! node's capacity.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use tonic::{Request, Response, Status};

use crate::csi::controller_server::Controller;
use crate::csi::controller_service_capability::{self, rpc};
use crate::csi::validate_volume_capabilities_response::Confirmed;
use crate::csi::volume_capability::AccessType;
use crate::csi::{
    CapacityRange, ControllerGetCapabilitiesRequest, ControllerGetCapabilitiesResponse, ControllerServiceCapability,
    CreateVolumeRequest, CreateVolumeResponse, DeleteVolumeRequest, DeleteVolumeResponse, GetCapacityRequest,
    GetCapacityResponse, Topology, ValidateVolumeCapabilitiesRequest, ValidateVolumeCapabilitiesResponse, Volume,
    VolumeCapability,
};
use crate::host::Host;
use crate::mount_options::BindOptions;
use crate::pools::{Pools, valid_volume_id};

/// The Controller service.
#[derive(Debug)]
pub struct ControllerService<H> {
    /// This node's name (its topology).
    pub node_id: String,
    /// Its pools.
    pub pools: Pools,
    /// The node.
    pub host: Arc<H>,
}

/// The node's topology segment.
#[must_use]
pub fn topology(node_id: &str) -> Topology {
    Topology {
        segments: HashMap::from([(crate::TOPOLOGY_KEY.to_owned(), node_id.to_owned())]),
    }
}

/// A size as upstream reports a pool's: whole GiB from 10 GiB up, whole MiB from 10 MiB up.
#[must_use]
pub fn rounded(bytes: u64) -> u64 {
    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;
    if bytes >= 10 * GIB {
        bytes / GIB * GIB
    } else if bytes >= 10 * MIB {
        bytes / MIB * MIB
    } else {
        bytes
    }
}

fn to_i64(bytes: u64) -> i64 {
    i64::try_from(bytes).unwrap_or(i64::MAX)
}

/// Refuses capabilities this driver cannot give: none, a block volume, or none with a mount.
///
/// # Errors
/// `InvalidArgument`, saying which.
pub fn check_capabilities(capabilities: &[VolumeCapability]) -> Result<(), Status> {
    if capabilities.is_empty() {
        return Err(Status::invalid_argument("volume capabilities missing in request"));
    }
    if capabilities
        .iter()
        .any(|c| matches!(c.access_type, Some(AccessType::Block(_))))
    {
        return Err(Status::invalid_argument(
            "block volumes are not supported by the hostpath provisioner: ask for a filesystem volume",
        ));
    }
    if !capabilities
        .iter()
        .all(|c| matches!(c.access_type, Some(AccessType::Mount(_))))
    {
        return Err(Status::invalid_argument("must have mount access type"));
    }
    for capability in capabilities {
        if let Some(AccessType::Mount(mount)) = &capability.access_type {
            BindOptions::from_mount(mount, false)?;
        }
    }
    Ok(())
}

/// Refuses a size the pool cannot give: more than its filesystem holds, or a limit below it (a
/// volume has no size of its own: it reports, and may fill, its pool's filesystem).
fn check_capacity(range: Option<&CapacityRange>, capacity: u64) -> Result<(), Status> {
    let Some(range) = range else { return Ok(()) };
    let required = u64::try_from(range.required_bytes).unwrap_or(0);
    if required > capacity {
        return Err(Status::out_of_range(format!(
            "capacity_range.required_bytes {required}: the storage pool holds {capacity} bytes"
        )));
    }
    let limit = u64::try_from(range.limit_bytes).unwrap_or(0);
    if limit > 0 && limit < capacity {
        return Err(Status::out_of_range(format!(
            "capacity_range.limit_bytes {limit}: a hostpath volume shares its pool's {capacity} bytes and cannot be limited"
        )));
    }
    Ok(())
}

/// Whether this node is among the topologies a create asks for (any, when it asks for none).
fn node_requested(request: &CreateVolumeRequest, node_id: &str) -> bool {
    let Some(requirement) = &request.accessibility_requirements else {
        return true;
    };
    let wanted = |t: &Topology| t.segments.get(crate::TOPOLOGY_KEY).is_some_and(|n| n == node_id);
    requirement.requisite.iter().chain(&requirement.preferred).any(wanted)
        || (requirement.requisite.is_empty() && requirement.preferred.is_empty())
}

impl<H: Host> ControllerService<H> {
    fn volume_dir(&self, parameters: &HashMap<String, String>, id: &str) -> Result<PathBuf, Status> {
        let pool = self
            .pools
            .named_by(parameters)
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        Ok(pool.join(id))
    }

    fn pool_space(&self, parameters: &HashMap<String, String>) -> Result<crate::host::Space, Status> {
        let pool = self
            .pools
            .named_by(parameters)
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        self.host
            .space(pool)
            .map_err(|e| Status::internal(format!("reading the space of {}: {e}", pool.display())))
    }
}

#[tonic::async_trait]
impl<H: Host> Controller for ControllerService<H> {
    async fn create_volume(
        &self,
        request: Request<CreateVolumeRequest>,
    ) -> Result<Response<CreateVolumeResponse>, Status> {
        let request = request.into_inner();
        if request.name.is_empty() {
            return Err(Status::invalid_argument("name missing in request"));
        }
        if !valid_volume_id(&request.name) {
            return Err(Status::invalid_argument(format!(
                "name {:?} cannot name a directory",
                request.name
            )));
        }
        check_capabilities(&request.volume_capabilities)?;
        if request.volume_content_source.is_some() {
            return Err(Status::invalid_argument(
                "volumes from a snapshot or another volume are not supported by the hostpath provisioner",
            ));
        }
        if !node_requested(&request, &self.node_id) {
            return Err(Status::invalid_argument("not correct node"));
        }
        let dir = self.volume_dir(&request.parameters, &request.name)?;
        let space = self.pool_space(&request.parameters)?;
        check_capacity(request.capacity_range.as_ref(), rounded(space.total))?;
        self.host
            .make_dir(&dir)
            .map_err(|e| Status::internal(format!("making {}: {e}", dir.display())))?;
        tracing::info!(volume = %request.name, dir = %dir.display(), "created the volume");
        Ok(Response::new(CreateVolumeResponse {
            volume: Some(Volume {
                capacity_bytes: to_i64(rounded(space.total)),
                volume_id: request.name,
                volume_context: request.parameters,
                content_source: None,
                accessible_topology: vec![topology(&self.node_id)],
            }),
        }))
    }

    async fn delete_volume(
        &self,
        request: Request<DeleteVolumeRequest>,
    ) -> Result<Response<DeleteVolumeResponse>, Status> {
        let id = request.into_inner().volume_id;
        if id.is_empty() {
            return Err(Status::invalid_argument("volume ID missing in request"));
        }
        if !valid_volume_id(&id) {
            return Err(Status::invalid_argument(format!(
                "volume ID {id:?} cannot name a directory"
            )));
        }
        for pool in self.pools.paths() {
            let dir = pool.join(&id);
            if self.host.is_dir(&dir) {
                self.host
                    .remove_dir(&dir)
                    .map_err(|e| Status::internal(format!("removing {}: {e}", dir.display())))?;
                tracing::info!(volume = %id, dir = %dir.display(), "deleted the volume");
            }
        }
        Ok(Response::new(DeleteVolumeResponse {}))
    }

    async fn validate_volume_capabilities(
        &self,
        request: Request<ValidateVolumeCapabilitiesRequest>,
    ) -> Result<Response<ValidateVolumeCapabilitiesResponse>, Status> {
        let request = request.into_inner();
        if request.volume_id.is_empty() {
            return Err(Status::invalid_argument("volume ID not provided"));
        }
        check_capabilities(&request.volume_capabilities)?;
        let found = valid_volume_id(&request.volume_id)
            && self
                .volume_dir(&request.parameters, &request.volume_id)
                .is_ok_and(|dir| self.host.is_dir(&dir));
        if !found {
            return Err(Status::not_found(format!("volume {} not found", request.volume_id)));
        }
        Ok(Response::new(ValidateVolumeCapabilitiesResponse {
            confirmed: Some(Confirmed {
                volume_context: request.volume_context,
                volume_capabilities: request.volume_capabilities,
                parameters: request.parameters,
            }),
            message: String::new(),
        }))
    }

    async fn get_capacity(
        &self,
        request: Request<GetCapacityRequest>,
    ) -> Result<Response<GetCapacityResponse>, Status> {
        let request = request.into_inner();
        let space = self.pool_space(&request.parameters)?;
        Ok(Response::new(GetCapacityResponse {
            available_capacity: to_i64(space.available),
            maximum_volume_size: Some(to_i64(space.total)),
            minimum_volume_size: Some(0),
        }))
    }

    async fn controller_get_capabilities(
        &self,
        _: Request<ControllerGetCapabilitiesRequest>,
    ) -> Result<Response<ControllerGetCapabilitiesResponse>, Status> {
        let capability = |kind: rpc::Type| ControllerServiceCapability {
            r#type: Some(controller_service_capability::Type::Rpc(
                controller_service_capability::Rpc { r#type: kind.into() },
            )),
        };
        Ok(Response::new(ControllerGetCapabilitiesResponse {
            capabilities: vec![
                capability(rpc::Type::CreateDeleteVolume),
                capability(rpc::Type::GetCapacity),
            ],
        }))
    }
}
