//! virt-operator: a `KubeVirt` CR into KubeVirt's components, as upstream's virt-operator.
//!
//! - [`render`]: what the CR wants (the CRDs, RBAC, virt-api, virt-controller and virt-handler,
//!   from the templates in `manifests/install`), decided without the API server;
//! - [`order`]: which components a pass may change, in upstream's install and update order;
//! - [`status`]: the CR's phase, conditions and versions after a pass;
//! - [`reconciler`]: one pass, through [`operator_kit::objects::Objects`].

pub mod order;
pub mod reconciler;
pub mod render;
pub mod status;
