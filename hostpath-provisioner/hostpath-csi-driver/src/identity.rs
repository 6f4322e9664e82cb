//! CSI's Identity service: the driver's name and version, its plugin capabilities (a controller
//! service, and volumes reachable from their node only), and readiness.

use tonic::{Request, Response, Status};

use crate::csi::identity_server::Identity;
use crate::csi::plugin_capability::{self, service};
use crate::csi::{
    GetPluginCapabilitiesRequest, GetPluginCapabilitiesResponse, GetPluginInfoRequest, GetPluginInfoResponse,
    PluginCapability, ProbeRequest, ProbeResponse,
};

/// The Identity service.
#[derive(Clone, Debug)]
pub struct IdentityService {
    /// The driver's name.
    pub name: String,
    /// Its version.
    pub version: String,
}

fn service_capability(kind: service::Type) -> PluginCapability {
    PluginCapability {
        r#type: Some(plugin_capability::Type::Service(plugin_capability::Service {
            r#type: kind.into(),
        })),
    }
}

#[tonic::async_trait]
impl Identity for IdentityService {
    async fn get_plugin_info(
        &self,
        _: Request<GetPluginInfoRequest>,
    ) -> Result<Response<GetPluginInfoResponse>, Status> {
        Ok(Response::new(GetPluginInfoResponse {
            name: self.name.clone(),
            vendor_version: self.version.clone(),
            manifest: std::collections::HashMap::new(),
        }))
    }

    async fn get_plugin_capabilities(
        &self,
        _: Request<GetPluginCapabilitiesRequest>,
    ) -> Result<Response<GetPluginCapabilitiesResponse>, Status> {
        Ok(Response::new(GetPluginCapabilitiesResponse {
            capabilities: vec![
                service_capability(service::Type::ControllerService),
                service_capability(service::Type::VolumeAccessibilityConstraints),
            ],
        }))
    }

    async fn probe(&self, _: Request<ProbeRequest>) -> Result<Response<ProbeResponse>, Status> {
        Ok(Response::new(ProbeResponse { ready: Some(true) }))
    }
}
