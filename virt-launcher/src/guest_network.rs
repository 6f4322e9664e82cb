//! The launcher's side of pod networking (upstream's phase 2): the DHCP server that hands the
//! guest its lease on the in-pod bridge, and the MAC and MTU the domain's interface gets. The plan
//! comes from [`pod_network::plan`], from what was observed of the pod interface before it was
//! wired: by virt-handler in a cluster ([`from_handler_cache`]), by the launcher itself locally.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kubevirt_api::v1::VirtualMachineInstance;
use pod_network::dhcp::server::{self, ServerError};
use pod_network::handover::{HandoverError, read_observation};
use pod_network::plan::{InterfacePlan, PlanError, Resolv, format_mac, plan};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::domain::InterfaceLink;

/// Where the guest's DNS settings come from: the pod's resolv.conf.
pub const RESOLV_CONF: &str = "/etc/resolv.conf";

/// The pod's DNS settings for the guest's lease; none when resolv.conf cannot be read.
#[must_use]
pub fn pod_resolv() -> Resolv {
    Resolv::parse(&std::fs::read_to_string(RESOLV_CONF).unwrap_or_default())
}

/// Why the pod network's plan is not available.
#[derive(Debug, thiserror::Error)]
pub enum PodNetworkError {
    /// virt-handler has not wired the pod network yet.
    #[error("the pod network is not set up yet ({path} is missing)")]
    NotReady {
        /// The file that is missing.
        path: PathBuf,
    },
    /// The cache is unreadable.
    #[error(transparent)]
    Cache(#[from] HandoverError),
    /// The spec cannot be built.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// The DHCP server.
    #[error(transparent)]
    Dhcp(#[from] ServerError),
}

/// MAC and MTU of the pod network's interface, for the domain.
#[must_use]
pub fn interface_links(plan: Option<&InterfacePlan>) -> BTreeMap<String, InterfaceLink> {
    plan.iter()
        .map(|p| {
            (
                p.name.clone(),
                InterfaceLink {
                    mac: format_mac(p.guest_mac()),
                    mtu: u32::from(p.mtu),
                },
            )
        })
        .collect()
}

/// The plan for `vmi` from the pod interface virt-handler observed and cached in the VMI's private
/// directory (`ready` is the marker it writes once the wiring is done), with this pod's resolv.conf.
///
/// # Errors
/// [`PodNetworkError::NotReady`] until virt-handler is done; the others when the cache or the spec
/// is bad.
pub fn from_handler_cache(
    vmi: &VirtualMachineInstance,
    cache: &Path,
    ready: &Path,
) -> Result<Option<InterfacePlan>, PodNetworkError> {
    if !pod_network::plan::uses_pod_network(vmi) {
        return Ok(None);
    }
    if !ready.exists() {
        return Err(PodNetworkError::NotReady { path: ready.to_owned() });
    }
    let pod = read_observation(cache)?;
    Ok(plan(vmi, &pod, &pod_resolv())?.pod)
}

/// The DHCP server for one guest, on its bridge.
#[derive(Debug)]
pub struct DhcpServer {
    stop: CancellationToken,
    task: JoinHandle<usize>,
}

impl DhcpServer {
    /// Starts serving `plan`'s lease on its bridge.
    ///
    /// # Errors
    /// [`ServerError`] when the socket cannot be bound there.
    pub fn start(plan: &InterfacePlan) -> Result<Self, ServerError> {
        let socket = server::bind(&plan.bridge)?;
        let stop = CancellationToken::new();
        let task = tokio::spawn(server::serve(socket, plan.lease.clone(), stop.clone()));
        info!(bridge = %plan.bridge, guest = %plan.lease.address, "DHCP server started");
        Ok(Self { stop, task })
    }

    /// Stops serving.
    pub async fn stop(self) {
        self.stop.cancel();
        match self.task.await {
            Ok(replies) => info!(replies, "DHCP server stopped"),
            Err(e) => warn!(error = %e, "the DHCP server ended abnormally"),
        }
    }
}
