//! The hostpath provisioner's CSI driver, as upstream's (`kubevirt.io.hostpath-provisioner`):
//! one process per node serves CSI's Identity, Controller and Node services on a unix socket. A
//! volume is a directory named by its id in one of the node's storage pools (the StorageClass's
//! `storagePool` parameter), published into a pod by a bind mount; the node's name is its
//! topology (`topology.hostpath.csi/node`), so that each node's external-provisioner makes the
//! volumes of the pods scheduled there. Filesystem volumes only: block volumes are refused.
//!
//! - [`csi`]: the CSI messages and services, generated from `proto/csi.proto`.
//! - [`pools`]: the storage pools (`--datadir`) and how a request names one.
//! - [`host`]: the node's filesystem and mounts, behind a trait (a fake for tests).
//! - [`identity`], [`controller`], [`node`]: the three services; [`server`]: the socket.
//! - [`registration`]: the driver's registration with its kubelet (upstream's
//!   node-driver-registrar sidecar's job), behind [`authority`].

pub mod authority;
pub mod controller;
pub mod host;
pub mod identity;
pub mod mount_options;
pub mod node;
pub mod pools;
pub mod registration;
pub mod server;

#[cfg(test)]
mod services_tests;

/// The kubelet's plugin registration API (`pluginregistration`).
#[allow(missing_docs, clippy::pedantic, clippy::nursery, reason = "generated code")]
pub mod registration_api {
    tonic::include_proto!("pluginregistration");
}

/// The CSI messages and services (`csi.v1`).
#[allow(missing_docs, clippy::pedantic, clippy::nursery, reason = "generated code")]
pub mod csi {
    tonic::include_proto!("csi.v1");
}

/// The driver's name (upstream's).
pub const DRIVER_NAME: &str = "kubevirt.io.hostpath-provisioner";
/// The topology key whose value is the node's name (upstream's).
pub const TOPOLOGY_KEY: &str = "topology.hostpath.csi/node";
/// The StorageClass parameter that names the pool (upstream's).
pub const POOL_PARAMETER: &str = "storagePool";
