//! Local mode's pod network. A VMI with an interface on the pod network runs in a network
//! namespace of its own, linked to the host by a veth pair ([`pod_network::local`]): inside it the
//! launcher builds the binding exactly as in a pod (bridge, tap, NAT rules) and serves DHCP to the
//! guest. The host reaches the VM at the pod address it prints; the VM reaches the host through the
//! pod's gateway. Everything goes with the namespace when the launcher exits.

use std::collections::BTreeMap;
use std::sync::Arc;

use kubevirt_api::v1::VirtualMachineInstance;
use pod_network::commands::{ExitWaiter, NetworkCommands, SystemCommands};
use pod_network::dhcp::server::ServerError;
use pod_network::local::{HostLink, LocalError, PrivateNamespace, connect_to_host, disconnect};
use pod_network::plan::{Binding, CheckedInterfaces, InterfacePlan, PlanError, format_mac, plan_checked};
use pod_network::setup::{POD_INTERFACE, SetupError, observe_pod_interface, set_up_pod_network};
use tracing::{instrument, warn};

use crate::domain::InterfaceLink;
use crate::guest_network::{DhcpServer, interface_links, pod_resolv};
use crate::supervisor::reaper::Reaper;

/// Why the local network could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum NetworkError {
    /// The namespace or the host link.
    #[error(transparent)]
    Local(#[from] LocalError),
    /// Observing the pod interface or building the binding.
    #[error(transparent)]
    Setup(#[from] SetupError),
    /// The spec cannot be built.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// The DHCP server.
    #[error(transparent)]
    Dhcp(#[from] ServerError),
    /// A blocking step panicked or was cancelled.
    #[error("the network setup was interrupted")]
    Interrupted,
}

/// Exit statuses come from the launcher's reaper, which reaps every child.
#[derive(Clone, Debug)]
struct ReaperWaiter {
    reaper: Reaper,
    runtime: tokio::runtime::Handle,
}

impl ExitWaiter for ReaperWaiter {
    fn wait(&self, child: std::process::Child) -> std::io::Result<bool> {
        let pid = child.id();
        drop(child);
        self.runtime
            .block_on(self.reaper.wait(pid))
            .map(crate::supervisor::reaper::ProcessExit::is_success)
            .map_err(std::io::Error::other)
    }
}

fn commands(reaper: &Reaper) -> SystemCommands<ReaperWaiter> {
    SystemCommands::with_waiter(ReaperWaiter {
        reaper: reaper.clone(),
        runtime: tokio::runtime::Handle::current(),
    })
}

/// A running local pod network.
#[derive(Debug)]
pub struct LocalNetwork {
    link: HostLink,
    plan: Option<InterfacePlan>,
    dhcp: Option<DhcpServer>,
}

/// Enters the VM's namespace when `vmi` uses the pod network. Must run before any thread starts.
///
/// # Errors
/// [`NetworkError::Local`] when the namespace cannot be created.
pub fn enter_namespace(vmi: &VirtualMachineInstance) -> Result<Option<PrivateNamespace>, NetworkError> {
    if !pod_network::plan::uses_pod_network(vmi) {
        return Ok(None);
    }
    Ok(Some(PrivateNamespace::enter()?))
}

impl LocalNetwork {
    /// Links the namespace to the host, builds the binding and starts the DHCP server.
    ///
    /// # Errors
    /// [`NetworkError`]; whatever was made on the host is removed again.
    #[instrument(skip_all)]
    pub async fn start(
        namespace: &Arc<PrivateNamespace>,
        vmi: &VirtualMachineInstance,
        checked: CheckedInterfaces,
        reaper: &Reaper,
    ) -> Result<Self, NetworkError> {
        let ns = Arc::clone(namespace);
        let vmi = vmi.clone();
        let commands = commands(reaper);
        let built = tokio::task::spawn_blocking(move || build(&commands, &ns, &vmi, checked))
            .await
            .map_err(|_| NetworkError::Interrupted)?;
        let (link, plan) = built?;
        let mut network = Self { link, plan, dhcp: None };
        if let Some(plan) = &network.plan {
            match DhcpServer::start(plan) {
                Ok(server) => network.dhcp = Some(server),
                Err(e) => {
                    network.stop(namespace, reaper).await;
                    return Err(e.into());
                }
            }
        }
        Ok(network)
    }

    /// MAC and MTU of the pod network's interface, for the domain.
    #[must_use]
    pub fn interface_links(&self) -> BTreeMap<String, InterfaceLink> {
        interface_links(self.plan.as_ref())
    }

    /// One line for the terminal: where the VM can be reached.
    #[must_use]
    pub fn describe(&self) -> String {
        let pod = self.link.pod_address.address;
        match &self.plan {
            None => format!("network: the VM's namespace is at {pod}"),
            Some(plan) if plan.binding == Binding::Bridge => {
                format!(
                    "network: bridge, the VM is at {pod} (MAC {})",
                    format_mac(plan.guest_mac())
                )
            }
            Some(plan) => {
                let ports = if plan.ports.is_empty() {
                    "all ports".to_owned()
                } else {
                    plan.ports
                        .iter()
                        .map(|p| format!("{}/{}", p.protocol, p.port))
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                format!(
                    "network: masquerade, the VM is at {pod} ({ports} forwarded to guest {})",
                    plan.lease.address
                )
            }
        }
    }

    /// Stops the DHCP server and removes the host link.
    pub async fn stop(self, namespace: &Arc<PrivateNamespace>, reaper: &Reaper) {
        if let Some(server) = self.dhcp {
            server.stop().await;
        }
        let ns = Arc::clone(namespace);
        let link = self.link;
        let commands = commands(reaper);
        let removed = tokio::task::spawn_blocking(move || disconnect(&commands, &ns, &link)).await;
        if removed.is_err() {
            warn!("removing the host link was interrupted");
        }
    }
}

/// The blocking part: link, observe, plan, build.
fn build(
    commands: &dyn NetworkCommands,
    namespace: &PrivateNamespace,
    vmi: &VirtualMachineInstance,
    checked: CheckedInterfaces,
) -> Result<(HostLink, Option<InterfacePlan>), NetworkError> {
    let link = connect_to_host(commands, namespace)?;
    let planned = (|| {
        let pod = observe_pod_interface(commands, &namespace.own_path(), POD_INTERFACE)?;
        let plan = plan_checked(checked, vmi, &pod, &pod_resolv())?.pod;
        if let Some(plan) = &plan {
            set_up_pod_network(commands, &namespace.own_path(), plan)?;
        }
        Ok::<_, NetworkError>(plan)
    })();
    match planned {
        Ok(plan) => Ok((link, plan)),
        Err(e) => {
            disconnect(commands, namespace, &link);
            Err(e)
        }
    }
}
