//! The deletion webhook of the `KubeVirt` CR (and [`Cluster`], what every webhook reads), as upstream's `kubevirt-validator.kubevirt.io`
//! (`virt-operator-validator`, `POST /kubevirt-validate-delete`): a CR whose
//! `spec.uninstallStrategy` is `BlockUninstallIfWorkloadsExist` and that is `Deployed` cannot be
//! deleted while any VirtualMachineInstance, VirtualMachine or VirtualMachineInstanceReplicaSet
//! exists in any namespace, since its deletion takes the CRDs and with them every one. The CR is
//! read from the API server, not from the request, as upstream's; what cannot be read refuses.

use std::future::Future;

use kube::api::ApiResource;
use kubevirt_api::v1::KubeVirt;

/// The webhook's path (upstream's).
pub const PATH: &str = "/kubevirt-validate-delete";
/// The strategy that blocks the uninstall.
pub const BLOCK: &str = "BlockUninstallIfWorkloadsExist";

/// A kind of workload that blocks the uninstall, in the order upstream looks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    /// VirtualMachineInstances.
    Vmis,
    /// VirtualMachines.
    Vms,
    /// VirtualMachineInstanceReplicaSets.
    ReplicaSets,
}

impl Workload {
    /// Every kind, in upstream's order.
    pub const ALL: [Self; 3] = [Self::Vmis, Self::Vms, Self::ReplicaSets];

    /// How upstream's message names it.
    #[must_use]
    pub const fn shown(self) -> &'static str {
        match self {
            Self::Vmis => "Virtual Machine Instances",
            Self::Vms => "Virtual Machines",
            Self::ReplicaSets => "Virtual Machine Instance Replica Sets",
        }
    }

    /// Its resource.
    #[must_use]
    pub fn resource(self) -> ApiResource {
        let (kind, plural) = match self {
            Self::Vmis => ("VirtualMachineInstance", "virtualmachineinstances"),
            Self::Vms => ("VirtualMachine", "virtualmachines"),
            Self::ReplicaSets => ("VirtualMachineInstanceReplicaSet", "virtualmachineinstancereplicasets"),
        };
        ApiResource {
            group: "kubevirt.io".to_owned(),
            version: "v1".to_owned(),
            api_version: "kubevirt.io/v1".to_owned(),
            kind: kind.to_owned(),
            plural: plural.to_owned(),
        }
    }
}

/// Upstream's refusal while `workload`s exist.
#[must_use]
pub fn refusal(workload: Workload) -> String {
    format!(
        "Rejecting the uninstall request, since there are still {} present. Either delete all KubeVirt related workloads or change the uninstall strategy before uninstalling KubeVirt.",
        workload.shown()
    )
}

/// Whether deleting `cr` waits on its workloads: it blocks its uninstall and is deployed (one
/// still deploying, being deleted or never deployed holds nothing back).
#[must_use]
pub fn blocks(cr: &KubeVirt) -> bool {
    cr.spec.uninstall_strategy.as_deref() == Some(BLOCK)
        && cr.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Deployed")
}

/// What the webhook reads; errors are the API server's, as text.
pub trait Cluster: Send + Sync {
    /// The KubeVirt CR `namespace/name`; `None` when it is not there.
    fn kubevirt(&self, namespace: &str, name: &str) -> impl Future<Output = Result<Option<KubeVirt>, String>> + Send;
    /// The KubeVirt CRs in `namespace`.
    fn kubevirts(&self, namespace: &str) -> impl Future<Output = Result<Vec<KubeVirt>, String>> + Send;
    /// Whether any KubeVirt CR exists, in any namespace.
    fn any_kubevirt(&self) -> impl Future<Output = Result<bool, String>> + Send;
    /// Whether any object of `workload` exists, in any namespace.
    fn any(&self, workload: Workload) -> impl Future<Output = Result<bool, String>> + Send;
}

/// Whether the deletion of the KubeVirt CR `namespace/name` may go on (a request without a name,
/// a namespace's deletion, is about the first CR in it, if any).
///
/// # Errors
/// The refusal's message.
pub async fn admit_delete<C: Cluster>(cluster: &C, namespace: &str, name: &str) -> Result<(), String> {
    let cr = if name.is_empty() {
        match cluster.kubevirts(namespace).await?.into_iter().next() {
            Some(cr) => cr,
            None => return Ok(()),
        }
    } else {
        cluster
            .kubevirt(namespace, name)
            .await?
            .ok_or_else(|| format!("kubevirts.kubevirt.io \"{name}\" not found"))?
    };
    if !blocks(&cr) {
        return Ok(());
    }
    for workload in Workload::ALL {
        if cluster.any(workload).await? {
            return Err(refusal(workload));
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "uninstall_tests.rs"]
pub(crate) mod tests;
