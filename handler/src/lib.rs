//! virt-handler: one per node. Watches the VMIs scheduled to its node, drives each virt-launcher
//! over its unix socket, writes Running/Succeeded/Failed and the rest of the VMI status, and
//! exports metrics.
//!
//! So far this crate holds its pure parts: the decision table ([`decide`]) and the status
//! computation ([`status`]); the reconciler, the kube side, the notify server and metrics come with
//! the rest of the virt-handler issue. It talks to the launcher only through `cmd-protocol` and
//! never links libvirt.

pub mod decide;
pub mod status;
