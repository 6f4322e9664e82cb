//! Leader election among virt-controller replicas over the coordination.k8s.io Lease
//! `virt-controller` in the install namespace (kube-lease-manager): the returned channel says
//! whether this replica leads, and changes as the Lease does.

use tokio::sync::watch;

/// The Lease's name, as upstream's.
pub const LEASE_NAME: &str = "virt-controller";

/// Why the election could not start.
#[derive(Debug, thiserror::Error)]
#[error("cannot set up leader election: {0}")]
pub struct ElectionError(#[from] kube_lease_manager::LeaseManagerError);

/// Joins the election as `identity`; the channel is true while this replica holds the Lease.
pub async fn elect(
    client: kube::Client,
    namespace: &str,
    identity: &str,
) -> Result<watch::Receiver<bool>, ElectionError> {
    let manager = kube_lease_manager::LeaseManagerBuilder::new(client, LEASE_NAME)
        .with_namespace(namespace)
        .with_identity(identity)
        .build()
        .await?;
    let (leading, _watcher) = manager.watch().await;
    Ok(leading)
}
