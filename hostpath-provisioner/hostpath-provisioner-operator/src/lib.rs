//! The hostpath provisioner's operator, as upstream's hostpath-provisioner-operator: it turns a
//! `HostPathProvisioner` CR ([`api`], its CRD in [`crd`]) into the CSI driver's DaemonSet, the
//! `CSIDriver` object and their RBAC ([`render`]), and reports upstream's conditions ([`status`]).
//! [`reconciler`] is one pass; the binary is its wiring.

pub mod api;
pub mod crd;
pub mod reconciler;
pub mod render;
pub mod status;
