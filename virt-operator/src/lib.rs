//! virt-operator: a `KubeVirt` CR into KubeVirt's components, as upstream's virt-operator.
//!
//! - [`render`]: what the CR wants (the CRDs, RBAC, virt-api, virt-controller and virt-handler,
//!   from the templates in `manifests/install`), decided without the API server;
//! - [`customize`]: `spec.customizeComponents` (patches and flags) applied to what it renders;
//! - [`labels`]: the labels of everything it makes;
//! - [`common_instancetypes`]: upstream's common instance types and preferences, and what a pass
//!   does to bring the cluster's to them;
//! - [`order`]: which components a pass may change, in upstream's install and update order;
//! - [`status`]: the CR's phase, conditions and versions after a pass;
//! - [`reconciler`]: one pass, through [`operator_kit::objects::Objects`];
//! - [`uninstall`], [`validator`], [`webhook`] and [`kube_cluster`]: the webhook that refuses
//!   deleting a CR with `BlockUninstallIfWorkloadsExist` while workloads exist, its objects and
//!   certificate, its server and its reads.

pub mod common_instancetypes;
pub mod customize;
pub mod kube_cluster;
pub mod labels;
pub mod order;
pub mod reconciler;
pub mod render;
pub mod spec_admission;
pub mod status;
pub mod uninstall;
pub mod validator;
pub mod webhook;
